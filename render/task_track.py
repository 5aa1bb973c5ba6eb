"""The measured prose of the task track (reports/tasks/README.md), rendered by `make reports` from the committed rows:
each paragraph between <!-- rendered: NAME --> and <!-- /rendered --> lines of its page, each comparative sentence
written only while its predicate over the rows holds (render.prose). The rows: results.json.gz and training.json (the
track's seeds), context/METHOD/results.json.gz, anchor/SETTING/results.json.gz, heads/ and heads-16x/ (eval.heads),
recipe-search/ (each search run's validation log and the table's rows.json)."""
from __future__ import annotations

import functools
import json
import math
import re
import statistics
from pathlib import Path
from typing import Callable

import numpy as np

from config import Config, load_config
from data.tasks import FILLER_TARGETS, FOLLOW
from data.tasks import TASKS as TASKS_OF
from render.prose import bullet, claim, listed, number, paragraph, seeds_named
from render.rows import curve_label, previous_rows
from render.tasks import DRAWN, RESULTS, interval, learned, pooled

TASKS = ("copy", "recall", "passkey", "recall1", "passkey1")
INDUCTION = ("copy", "recall", "passkey")
SINGLE_HOP = ("recall1", "passkey1")
ENCODINGS = ("rope", "alibi", "nope", "t5")
FINE_TUNED = {"rope-pi": "linear (fine-tuned)", "rope-yarn": "yarn (fine-tuned)", "rope-continued": "none (fine-tuned)"}
SCALED = {m: f"{m} (s = length/L)" for m in ("linear", "ntk", "yarn")} | {"dynamic": "dynamic (s = T/L, cached)"}
WORDS = {2: "two", 3: "three", 4: "four", 5: "five", 6: "six", 7: "seven", 8: "eight"}


def pct(x: float) -> str:
    return f"{100 * x:.0f}"


def per_seed(values) -> str:
    """'15% and 7%', '15%, 7% and 9%': a value per seed, in seed order."""
    return listed([f"{pct(v)}%" for v in values])


def pct_span(values) -> str:
    """'4-18%': the least and the most of some accuracies, in whole percent."""
    ints = sorted(int(pct(v)) for v in values)
    return f"{ints[0]}-{ints[-1]}%"


def points(drop: float) -> int:
    """A drop in accuracy in whole points, rounded up ("within 11 points")."""
    return math.ceil(round(100 * drop, 6))


def ranges(numbers) -> str:
    """'13, 16, 17, 61-69': numbers, each run of three or more consecutive ones as a range."""
    numbers, out = sorted(numbers), []
    for n in numbers:
        if out and out[-1][-1] == n - 1:
            out[-1].append(n)
        else:
            out.append([n])
    return ", ".join(f"{r[0]}-{r[-1]}" if len(r) > 2 else ", ".join(map(str, r))
                     for r in out)


def rate(x: float) -> str:
    """A learning rate as the page writes it: 3e-3."""
    return f"{x:.0e}".replace("e-0", "e-")


def learned_step(curve: dict[int, float]) -> int | None:
    """The first step from which an accuracy curve stays at 90% or more to its end (None: never)."""
    steps = sorted(curve.items())
    return next((step for i, (step, _) in enumerate(steps) if all(a >= 0.9 for _, a in steps[i:])), None)


class Track:
    """The track's rows: accuracy by (run, seed, task, label, length), by band, learned at L, validation curves."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.rows = previous_rows(folder / "results.json.gz", "eval.tasks", "accuracy")
        self.pooled = pooled(self.rows)
        self.learned = learned(self.rows)
        self.training = json.loads((folder / "training.json").read_text())
        self.seeds = tuple(sorted({r["seed"] for r in self.rows}))
        self.L = min(r["train_length"] for r in self.rows)
        self.lengths = sorted({r["length"] for r in self.rows})
        self.ran: dict[str, list[int]] = {}  # run -> the seeds it has rows for (the added methods' arrive a few at a time)
        self.sequences: dict[tuple, int] = {}  # (run, seed, task, length) -> sequences a cell pools: its bands' samples
        for r in self.rows:
            self.ran.setdefault(r["run"], set()).add(r["seed"])
            key = (r["run"], r["seed"], r["task"], r["length"])
            self.sequences[key] = self.sequences.get(key, 0) + r["samples"]
        self.ran = {run: sorted(seeds) for run, seeds in self.ran.items()}
        self.bands_of = {}
        for r in sorted(self.rows, key=lambda r: r["distance_lo"]):
            key = (r["run"], r["seed"], r["task"], curve_label(r), r["length"])
            self.bands_of.setdefault(key, []).append(r["accuracy"])

    def acc(self, run: str, task: str, length: int, seed: int, label: str | None = None) -> float:
        """Accuracy pooled over the distance bands (a fine-tune under its own scaling unless named)."""
        return self.pooled[(run, seed, task, label or FINE_TUNED.get(run, "none"), length)]

    def bands(self, run: str, task: str, length: int, seed: int, label: str | None = None) -> list[float]:
        """Accuracy in each distance band, nearest the question first."""
        return self.bands_of[(run, seed, task, label or FINE_TUNED.get(run, "none"), length)]

    def learned_at_L(self, run: str, seed: int) -> set[str]:
        return {t for (r, s, t), ok in self.learned.items() if (r, s) == (run, seed) and ok}

    def curve(self, run: str, seed: int, task: str) -> dict[int, float]:
        """Validation accuracy by step (training.json)."""
        return {r["step"]: r["accuracy"] for r in self.training if (r["run"], r["seed"], r["task"]) == (run, seed, task)}


class Search:
    """The recipe search: its table's rows (rows.json) and each run's validation log."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.table = {r["row"]: r for r in json.loads((folder / "rows.json").read_text())}
        cfg = load_config(Config, folder.parents[2] / "configs" / "tasks.yaml")
        # a validation reading's sequences per task: train.eval_tokens over the tasks' sequences of L tokens
        self.sequences = cfg.train.eval_tokens // (cfg.model.max_seq_len * len(TASKS))

    def apart(self, a: float, b: float) -> bool:
        """Two validation readings whose 95% intervals over the sequences of a reading do not overlap."""
        (lo_a, hi_a), (lo_b, hi_b) = interval(a, self.sequences), interval(b, self.sequences)
        return hi_a < lo_b or hi_b < lo_a

    @functools.cache
    def log(self, name: str) -> dict[int, dict[str, float]]:
        rows = [json.loads(line) for line in (self.folder / f"{name}.jsonl").read_text().splitlines()]
        return {r["step"]: {k.removeprefix("val_acc_"): v for k, v in r.items() if k.startswith("val_acc_")}
                for r in rows}

    def clock(self, row: int) -> tuple[float, int] | None:
        """The row's training minutes and threads by its log's last wall clock (train.py's wall_s); None for the logs
        kept from before train.py recorded it."""
        rows = [json.loads(line) for line in (self.folder / f"{self.table[row]['log']}.jsonl").read_text().splitlines()]
        return (rows[-1]["wall_s"] / 60, rows[-1]["threads"]) if "wall_s" in rows[-1] else None

    def minutes(self, rows) -> str | None:
        """'37 and 38 minutes on one thread' for rows whose logs hold their clock, all on as many threads."""
        clocks = [self.clock(r) for r in rows]
        if None in clocks or len({t for _, t in clocks}) != 1:
            return None
        threads = clocks[0][1]
        return (f"{listed([f'{m:.0f}' for m, _ in clocks])} minutes on "
                f"{'one thread' if threads == 1 else f'{threads} threads'}")

    def final(self, row: int) -> dict[str, float]:
        return self.log(self.table[row]["log"])[self.table[row]["step"]]

    def last_step(self, row: int) -> int:
        return max(self.log(self.table[row]["log"]))

    def never_learned(self, rows, tasks) -> bool:
        return all(a.get(t, 0) < 0.9 for r in rows for a in self.log(self.table[r]["log"]).values() for t in tasks)


@functools.cache
def track(folder: Path) -> Track:
    return Track(folder)


def seeds_show(reports: Path) -> str:
    """"What the seeds show": what each encoding learned at L and how far each reads past it."""
    t, search = track(reports / "tasks"), Search(reports / "tasks" / "recipe-search")
    seeds, L = t.seeds, t.L
    x2, x4, x16 = 2 * L, 4 * L, 16 * L
    which = f"seeds {seeds[0]} to {seeds[-1]}"
    n_seeds = WORDS[len(seeds)]
    recall = [t.acc("nope", "recall", L, s) for s in seeds]
    last = max(r["step"] for r in t.training)
    late = [a for s in seeds for step, a in t.curve("nope", s, "recall").items() if step > last - 4000]
    nope_rows = [r for r, e in search.table.items() if "nope" in e["log"]]
    steps = sorted(search.last_step(r) for r in nope_rows)
    stopped = [r for r in nope_rows if search.table[r]["stopped"]]
    copy_from = [learned_step(t.curve("nope", s, "copy")) for s in seeds]
    (row_49,) = [r for r in nope_rows if search.table[r]["log"] == "l4-12k-nope-s7"]
    learned_all = all(t.learned_at_L(run, s) == set(TASKS) for run in ("rope", "alibi") for s in seeds)
    nope_all_but = all(t.learned_at_L("nope", s) == set(TASKS) - {"recall"} for s in seeds)
    what = bullet(
        claim(learned_all and nope_all_but,
              f"**What each encoding learned.** RoPE and ALiBi learned all five tasks at L in every seed, NoPE all but "
              f"`recall` in every seed ({pct_span(recall)})."),
        f"So the recipe meets the track's bar for RoPE and ALiBi on {n_seeds} seeds it was not chosen on, and for NoPE on "
        "four of the five tasks.",
        claim(max(late) < 0.5 and search.never_learned(nope_rows, ("recall",)),
              f"NoPE's `recall` is the one task below it: between {pct(min(late))}% and {pct(max(late))}% over the last "
              f"4,000 steps of every seed ([training.png](training.png)), as in every NoPE run of the search (rows "
              f"{ranges(nope_rows)}: three to six layers, two to eight heads, {number(steps[0])} to {number(steps[-1])} "
              f"steps (row {listed([str(r) for r in stopped])} stopped early), `recall` alone, lr 1e-3 to 3e-2, d 64 or 128, L 64 "
              "or 128, a start token, a curriculum over distance), and no head of NoPE's looks at the value to recall "
              "(next section)."),
        f"In the {len(nope_rows)} single-seed runs tried (at most {number(steps[-1])} steps, six layers and d 128, each "
        "remedy on its own), NoPE did not learn `recall`; longer training and the remedies together were not tried; its "
        "rows past L say nothing about it.",
        claim(min(copy_from) > last / 2,
              f"NoPE learned `copy` only late, from step {number(min(copy_from))} to {number(max(copy_from))} (row "
              f"{row_49}'s {number(search.last_step(row_49))} steps on seed 7 left it at "
              f"{pct(search.final(row_49)['copy'])}%)."))

    worst = max(t.acc("rope", task, x16, s) for task in INDUCTION for s in seeds)
    near = [t.bands("rope", "copy", x4, s)[0] for s in seeds]
    at_2x = {s: t.acc("rope", "copy", x2, s) for s in seeds}
    longest = max(at_2x, key=at_2x.get)
    rope = bullet(
        claim(max(near) < 0.5 and all(pct(t.bands("rope", "copy", L, s)[0]) == "100" for s in seeds),
              "**RoPE without a scaling fails past L, at distances it was trained on too.**"),
        f"At 16x L its `copy`, `recall` and `passkey` are at {pct(worst)}% or less in each of the {n_seeds} seeds (a "
        f"range over {n_seeds} seeds, not a bound). Facts within L of the question, at distances it saw in training, "
        f"are copied 100% at L and {per_seed(near)} in a sequence of 4x L ({which}): more than the distance has changed "
        "(the anchor section below).",
        claim(max(near) == near[seeds.index(longest)],
              f"Seed {longest} holds longest: `copy` {pct(at_2x[longest])}% at 2x L, where the others fall to "
              f"{pct_span(v for s, v in at_2x.items() if s != longest)}."))

    yarn = {s: [t.acc("rope", task, x16, s, SCALED["yarn"]) for task in TASKS] for s in seeds}
    full = [s for s in seeds if all(pct(v) == "100" for v in yarn[s])]
    scaled = bullet(
        claim(min(map(min, yarn.values())) >= 0.5,
              f"**Training-free YaRN carries RoPE to 16x L**: {pct(min(map(min, yarn.values())))}% or more on every "
              f"task at {number(x16)} tokens in every seed (seed {listed([str(s) for s in full])} 100% on every task)."),
        f"PI (linear, s = length/L) falls to {per_seed(t.acc('rope', 'copy', x2, s, SCALED['linear']) for s in seeds)} "
        "on `copy` at 2x already, and NTK and dynamic NTK to "
        f"{pct(max(t.acc('rope', 'copy', x16, s, SCALED[m]) for m in ('ntk', 'dynamic') for s in seeds))}% or less on "
        "`copy` at 16x.")

    drop = {n: max(t.acc("alibi", "copy", L, s) - t.acc("alibi", "copy", n, s) for s in seeds) for n in (x2, x4)}
    far = [t.bands("alibi", "copy", x16, s)[-1] for s in seeds]
    alibi = bullet(
        claim(drop[x2] <= 0 < drop[x4],
              "**ALiBi reads back farther than it was trained to, then fades**: `copy` at 2x L at or above its value "
              f"at L in every seed, at 4x L within {points(drop[x4])} points of it or above it, "
              f"{pct_span(t.acc('alibi', 'copy', x16, s) for s in seeds)} at 16x, and {pct_span(far)} for the facts "
              f"{number(x16 // 2)}-{number(x16)} tokens back."),
        "Its slopes make a far fact cheap to ignore, the recency the ALiBi paper designs for (section 3).")

    copy = {n: [t.acc("nope", "copy", n, s) for s in seeds] for n in (x2, x4, x16)}
    near, far = ([t.bands("nope", "copy", x2, s)[i] for s in seeds] for i in (0, 1))
    holds = [s for s, a, b in zip(seeds, near, far) if a >= 0.8 and b >= 0.8]
    nope = bullet(
        "**NoPE reads past L on some seeds, at distances unseen as well as seen; how far depends on the seed**: `copy` "
        f"at 2x L {per_seed(copy[x2])} ({which}), {per_seed(near)} of the facts within L of the question and "
        f"{per_seed(far)} of those L to 2L back; at 4x L {pct_span(copy[x4])}, at 16x {pct_span(copy[x16])}.",
        claim(all((a >= 0.8) == (b >= 0.8) for a, b in zip(near, far)) and holds,
              f"Where it holds at 2x (seeds {listed([str(s) for s in holds])}), it holds at both distances: it is the "
              "length that defeats it, not the distance."))

    tuned = {n: [t.bands("rope-yarn", "copy", n, s)[0] for s in seeds] for n in (L, x2, x4)}
    pi = [s for s in seeds if "copy" in t.learned_at_L("rope-pi", s)]
    fine = bullet(
        claim(max(tuned[L] + tuned[x2]) < min(tuned[x4]),
              "**The YaRN fine-tune copies fully only at the length it was fine-tuned at.** It copies the facts within "
              f"L of the question {pct_span(tuned[x4])} in a {x4}-token sequence in every seed and "
              f"{pct_span(tuned[L] + tuned[x2])} in the shorter ones, {L} and {x2} tokens."),
        f"PI's fine-tune learned `copy` at 4x L on seed {listed([str(s) for s in pi])} only "
        f"({per_seed(t.acc('rope-pi', 'copy', x4, s) for s in seeds)}). The control, continued without a scaling, "
        f"copies such facts {per_seed(t.bands('rope-continued', 'copy', L, s)[0] for s in seeds)} at {L} tokens.")
    return "\n".join(["What the seeds show:", what, rope, scaled, alibi, nope, fine])


def seed_list(seeds) -> str:
    """'seeds 11-14 and 16', 'seed 15': runs of three or more consecutive seeds as ranges."""
    seeds = sorted(seeds)
    return ("seed " if len(seeds) == 1 else "seeds ") + listed(ranges(seeds).split(", "))


def heads_of(folder: Path) -> dict[tuple[str, int, str], dict]:
    """eval.heads' rows by (run, seed, task), with the head that looks most (top: layer, head) and its share (most)."""
    out = {}
    for r in json.loads((folder / "heads.json").read_text()):
        cells = [(v, (layer, head)) for layer, row in enumerate(r["share"]) for head, v in enumerate(row)]
        most, top = max(cells)
        out[(r["run"], r["seed"], r["task"])] = {**r, "top": top, "most": most}
    return out


def alibi_slope(head: int, n_heads: int) -> str:
    """ALiBi's slope of a head as a fraction, 2^(-8 (h + 1) / n) (Press et al., section 3; model.positions)."""
    return f"1/{2 ** (8 * (head + 1) // n_heads)}"


def where_heads_look(reports: Path) -> str:
    """The section "Where the heads look": which heads read the induction tasks, and NoPE's `recall`."""
    t, h = track(reports / "tasks"), heads_of(reports / "tasks" / "heads")
    seeds, runs = t.seeds, [run for run in ENCODINGS if any((run, s, "copy") in h for s in t.seeds)]
    rng = np.random.default_rng(0)
    per_sequence = {task: len(TASKS_OF[task].make(rng, t.L).answers) for task in TASKS}
    (sequences,) = {r["answers"] // per_sequence[task] for (_, _, task), r in h.items()}
    braces = "{" + ",".join(map(str, seeds)) + "}"
    intro = paragraph(
        f"`python -m eval.heads runs/tasks/seed{braces}/{{{','.join(runs)}}} --out reports/tasks/heads` (the last step "
        f"of `make extrapolation-tasks`) reads each run's attention on {sequences} validation sequences a task at L: for "
        "every answer, the share of attention each head gives, from the token that asks, to the token that holds the "
        "answer (for the induction tasks, the token after the earlier occurrence: the induction head's target). "
        "[heads/heads.md](heads/heads.md) has each run's accuracy on those sequences and its head that looks most, "
        "[heads/heads.png](heads/heads.png) every layer x head share as a small heat map (heads.json the numbers). This "
        "is each run's probe of how it reads back, beside the tables by length and distance above.")

    top = {(run, s): {h[(run, s, task)]["top"] for task in INDUCTION} for run in ("rope", "alibi") for s in seeds}
    n_layers, n_heads = len(h[("rope", seeds[0], "copy")]["share"]), len(h[("rope", seeds[0], "copy")]["share"][0])
    one_layer = all(len(v) <= 2 and len({layer for layer, _ in v}) == 1 for v in top.values())
    layer = {key: next(iter(v))[0] for key, v in top.items()}

    def groups(run):  # {layer: seeds}, the most seeds first
        out = {}
        for s in seeds:
            out.setdefault(layer[(run, s)], []).append(s)
        return sorted(out.items(), key=lambda kv: -len(kv[1]))
    (rope_main, rope_seeds), (rope_odd, (odd,)) = groups("rope")
    at_2x = {s: t.acc("rope", "copy", 2 * t.L, s) for s in seeds}
    alibi_heads = {g: sorted({head for s in ss for _, head in top[("alibi", s)]}) for g, ss in groups("alibi")}
    flattest = sorted({head for v in alibi_heads.values() for head in v})
    alibi_text = ", and ".join(
        f"in layer {g} on {seed_list(ss)}, head{'s' if len(alibi_heads[g]) > 1 else ''} "
        f"{listed([str(x) for x in alibi_heads[g]])}" for g, ss in groups("alibi"))
    rope_most = [h[("rope", s, task)]["most"] for s in seeds for task in INDUCTION]
    alibi_most = [h[("alibi", s, task)]["most"] for s in seeds for task in INDUCTION]
    read = bullet(
        claim(one_layer, "**RoPE and ALiBi read `copy`, `recall` and `passkey` through one or two induction heads of "
                         "one layer**:"),
        claim(rope_main == n_layers - 1 and odd == max(at_2x, key=at_2x.get),
              f"RoPE's in its last layer (layer {rope_main}) on {seed_list(rope_seeds)} and in layer {rope_odd} on seed "
              f"{odd}, the seed whose RoPE held longest past L;"),
        claim(flattest == list(range(n_heads - len(flattest), n_heads)),
              f"ALiBi's {alibi_text}: those of its {WORDS[len(flattest)]} flattest slopes "
              f"({listed([alibi_slope(x, n_heads) for x in flattest])})."),
        f"The head that looks most gives the target {pct_span(rope_most)} of its attention in RoPE, {pct_span(alibi_most)} in "
        "ALiBi.")

    recall = [h[("nope", s, "recall")]["most"] for s in seeds]
    induction = [h[("nope", s, task)]["most"] for s in seeds for task in ("copy", "passkey")]
    rows = [h[("nope", s, "recall")] for s in seeds]
    first, last = [r["by_order"][0] for r in rows], [r["by_order"][-1] for r in rows]
    bag = rows[0]["bag_by_order"]
    level = statistics.fmean(bag)
    (t5_seed,) = [s for s in seeds if "recall" not in t.learned_at_L("t5", s)]
    t5 = h[("t5", t5_seed, "recall")]
    prev = {(run, s): max(map(max, h[(run, s, "recall")]["previous"])) for s in seeds for run in ENCODINGS}
    unlearned = [k for k in prev if "recall" not in t.learned_at_L(*k)]
    knew = [k for k in prev if k not in unlearned]
    top_nope = max((k for k in unlearned if k[0] == "nope"), key=prev.get)
    low = min(knew, key=prev.get)
    names = {"alibi": "ALiBi", "rope": "RoPE", "t5": "T5"}
    nope = bullet(
        claim(max(recall) < 0.2 < min(induction)
              and all({"copy", "passkey"} <= t.learned_at_L("nope", s) for s in seeds),
              "**NoPE forms no induction head for `recall`**: its largest share on the value to recall is "
              f"{pct_span(recall)} in every seed, while for `copy` and `passkey`, learned in every seed, a head gives the "
              f"target {pct_span(induction)}."),
        "So NoPE has the circuit and does not use it for `recall`, whose keys occur in no other task (the search's note "
        "on seed 5); why is open.",
        claim(all(r["bag_by_order"] == bag for r in rows) and all(a < b for a, b in zip(bag, bag[1:]))
              and all(r["by_order"][-1] > 2 * r["by_order"][0] for r in rows)
              and all(abs(r["accuracy"] - level) < 0.1 for r in rows),
              "What it does instead ([heads.md](heads/heads.md), last table): its accuracy climbs with the order the "
              f"keys are asked in, from {pct_span(first)} on the first to {pct_span(last)} on the last, the curve of a solver "
              "that knows which values the facts hold but not which key holds each and answers with one not yet given "
              f"({pct(bag[0])}% on the first, {pct(bag[-1])}% on the last, {pct(level)}% overall; NoPE "
              f"{pct_span(r['accuracy'] for r in rows)} on these sequences)."),
        "NoPE has learned which values a sequence holds, not which key holds which.",
        claim(t5["bag_by_order"] == bag and abs(t5["accuracy"] - level) < 0.1,
              f"T5's `recall` on seed {t5_seed}, also unlearned, follows the same curve ({pct(t5['by_order'][0])}% on "
              f"the first key, {pct(t5['by_order'][-1])}% on the last, {pct(t5['accuracy'])}% overall)."),
        claim(statistics.fmean(prev[k] for k in unlearned) < statistics.fmean(prev[k] for k in knew),
              "The circuit's first half is weaker there too (heads.md, second table: the share a fact's token gives "
              "the token before it): at `recall`'s values NoPE's previous-token head gives the key "
              f"{pct_span(prev[k] for k in unlearned if k[0] == 'nope')} and T5's on seed {t5_seed} "
              f"{pct(prev['t5', t5_seed])}%, where the runs that learned `recall` give it {pct_span(prev[k] for k in knew)} ("
              + ", ".join(f"{names[run]} {pct_span(prev[k] for k in knew if k[0] == run)}" for run in ("alibi", "rope", "t5"))
              + ")."),
        claim(prev[top_nope] > prev[low],
              f"The ranges meet (NoPE on seed {top_nope[1]}, {names[low[0]]} on seed {low[1]}), so a weak first half is "
              "not the whole answer."))
    return "\n\n".join([intro, read + "\n" + nope])


class Context:
    """make task-context's rows of one method (context/METHOD/results.json.gz) on RoPE and ALiBi."""

    def __init__(self, folder: Path, method: str):
        self.rows = previous_rows(folder / "context" / method / "results.json.gz", "eval.tasks", "accuracy")
        self.method, self.pooled = method, pooled(self.rows)
        self.seeds = tuple(sorted({r["seed"] for r in self.rows}))
        (settings,) = {json.dumps(r["context"], sort_keys=True) for r in self.rows}
        self.settings = json.loads(settings)

    def acc(self, run: str, task: str, length: int, seed: int) -> float:
        return self.pooled[(run, seed, task, self.method, length)]

    def bands(self, run: str, task: str, length: int, seed: int) -> list[float]:
        rows = (r for r in self.rows if (r["run"], r["seed"], r["task"], r["length"]) == (run, seed, task, length))
        return [r["accuracy"] for r in sorted(rows, key=lambda r: r["distance_lo"])]

    def lengths(self, run: str, task: str, seed: int) -> list[float]:
        return [self.acc(run, task, n, seed) for n in sorted({r["length"] for r in self.rows})]


METHODS = ("self-extend", "rerope", "leaky-rerope", "dca", "sinks", "logn")


def self_extend_distance(d: int, group_size: int, window: int) -> int:
    """The distance Self-Extend shows a key d back (model.context: neighbours as they are, the others grouped)."""
    return d if d < window else d // group_size + window - window // group_size


def leaky_rerope_distance(d: int, window: int, k: float) -> float:
    """The distance Leaky ReRoPE shows a key d back (model.context)."""
    return d if d < window else window + (d - window) / k


def context_intro(reports: Path) -> str:
    folder = reports / "tasks"
    by_seeds: dict[tuple, list[str]] = {}
    for m in METHODS:
        by_seeds.setdefault(Context(folder, m).seeds, []).append(m)
    (many, first), (few, rest) = sorted(by_seeds.items(), key=lambda kv: -len(kv[0]))
    methods = ", ".join(f"[{m}](context/{m}/results.md)" for m in METHODS)
    return paragraph(
        f'`make -j2 task-context THREADS=1 SEED_NUMBERS="{" ".join(map(str, many))}" CONTEXT_METHODS={" ".join(first)}` '
        f'and `make -j2 task-context THREADS=1 SEED_NUMBERS="{" ".join(map(str, few))}" CONTEXT_METHODS="{" ".join(rest)}"` '
        "evaluate RoPE and ALiBi of each seed with a method of `model/context.py` at its defaults scaled to L, no "
        f"scaling, 1x-16x L; each method's rows in context/METHOD ({methods}). Self-Extend ran on seeds "
        f"{many[0]}-{many[-1]}, the others on seeds {few[0]}-{few[-1]}. The papers apply these methods to RoPE models; on ALiBi (its bias taken at the distance "
        "a method shows) they are this repo's extension. ReRoPE here leaves out the log-n query scaling of Su's patch "
        "(the `logn` method is that scaling alone).")


def self_extend(reports: Path) -> str:
    t, c = track(reports / "tasks"), Context(reports / "tasks", "self-extend")
    L, seeds, G, W = t.L, c.seeds, c.settings["group_size"], c.settings["window"]
    x4, x16 = 4 * L, 16 * L

    def each(run, task, n):
        return [c.acc(run, task, n, s) for s in seeds]
    plain = [t.acc("rope", task, L, s) for task in ("copy", "passkey") for s in seeds]
    unscaled = [t.acc("alibi", "copy", x16, s) for s in seeds]
    peaks = [max(c.lengths("rope", "copy", s)) in (c.acc("rope", "copy", 2 * L, s), c.acc("rope", "copy", x4, s))
             for s in seeds]
    first = {n: self_extend_distance(n - 1, G, W) for n in (x4, L)}
    return "\n".join([
        paragraph(f"Self-Extend (Jin et al., arXiv 2401.01325): a neighbour window W = L/{L // W} = {W} tokens, and "
                  f"farther keys grouped by G = {G}, so a key d > W back is shown at about d/{G} + {W - W // G}."),
        bullet(claim(min(each("alibi", "copy", x16)) > max(unscaled),
                     f"**ALiBi keeps its retrieval to 16x L**: at {number(x16)} tokens `copy` "
                     f"{pct_span(each('alibi', 'copy', x16))}, `recall` {pct_span(each('alibi', 'recall', x16))} and `passkey` "
                     f"{pct_span(each('alibi', 'passkey', x16))} in every seed, where unscaled ALiBi keeps `copy` at "
                     f"{pct_span(unscaled)}.")),
        bullet(claim(min(plain) >= 0.99 and max(each("rope", "copy", L) + each("rope", "passkey", L)) < 0.7,
                     f"**RoPE breaks, at L too**: `copy` {pct_span(each('rope', 'copy', L))} and `passkey` "
                     f"{pct_span(each('rope', 'passkey', L))} at {L} tokens ({pct_span(plain)} without Self-Extend)."),
               claim(all(peaks), f"`copy` peaks at 2x or 4x L in every seed ({pct_span(each('rope', 'copy', x4))} at 4x) "
                                 f"and falls back to {pct_span(each('rope', 'copy', x16))} at 16x."),
               claim(abs(first[x4] - L) < L / 4 < first[L] < L / 2,
                     f"At {x4} tokens the grouping shows the sequence's first tokens about {round(first[x4], -1)} back, "
                     "near L, where the base run's anchor sat (previous section); at "
                     f"{L} it shows them within {first[L] + 1}.")),
        bullet(claim(max(each("rope", "copy", x16)) < 0.2 < 0.85 < min(each("alibi", "copy", x16)),
                     "Self-Extend's claim, long-context retrieval with no fine-tuning (its passkey results on Llama-2, a "
                     "RoPE model), does not hold here for RoPE; carried over to ALiBi (this repo's extension), the "
                     "method keeps its retrieval."))])


def rerope(reports: Path) -> str:
    t, c = track(reports / "tasks"), Context(reports / "tasks", "rerope")
    L, seeds, W = t.L, c.seeds, c.settings["window"]
    x16 = 16 * L

    def bands(run, task, s):
        return [a for n in sorted({r["length"] for r in c.rows}) for a in c.bands(run, task, n, s)]
    (rising,) = [s for s in seeds if c.lengths("rope", "copy", s) == sorted(c.lengths("rope", "copy", s))]
    others = [s for s in seeds if s != rising]
    (keeps,) = [s for s in others if min(bands("rope", "recall", s)) >= 0.5]  # a survivor where `copy` fell
    (wrong,) = [s for s in seeds if max(bands("rope", "recall", s)) < TASKS_OF["recall"].chance]
    return "\n".join([
        paragraph(f"ReRoPE (Su, 2023): every key W = L/{L // W} = {W} or more tokens back shown at distance {W}."),
        bullet(claim(max(a for s in others for a in bands("rope", "copy", s)) < 0.5,
                     "**RoPE: how far back a fact is stops mattering, and on two seeds of three so does most of what "
                     "it learned.**"),
               claim(all(pct(t.acc("rope", "copy", L, s)) == "100" for s in seeds),
                     f"`copy` falls at L to {per_seed(c.acc('rope', 'copy', L, s) for s in seeds)} (100% without);"),
               f"seed {rising}'s then rises with length, to {pct(c.acc('rope', 'copy', x16, rising))}% at 16x, where "
               f"unscaled RoPE copies {pct(t.acc('rope', 'copy', x16, rising))}%, while seeds "
               f"{listed([str(s) for s in others])} stay at {pct(max(a for s in others for a in bands('rope', 'copy', s)))}% "
               "or less at every length.",
               f"Where a task survives, it survives at every distance: seed {keeps} keeps `recall` at "
               f"{pct_span(bands('rope', 'recall', keeps))} in every band of every length. Seed {wrong}'s `recall` is "
               f"{pct(max(bands('rope', 'recall', wrong)))}% at every length, below chance: a systematic wrong answer."),
        bullet(f"**ALiBi's bias stops growing {W} tokens back**, so far keys cost no more than near ones: `copy` at L "
               f"{per_seed(c.acc('alibi', 'copy', L, s) for s in seeds)} "
               f"({per_seed(t.acc('alibi', 'copy', L, s) for s in seeds)} without), "
               f"{per_seed(c.acc('alibi', 'copy', x16, s) for s in seeds)} at 16x.")])


def leaky_rerope(reports: Path) -> str:
    t, c = track(reports / "tasks"), Context(reports / "tasks", "leaky-rerope")
    L, seeds, W, k = t.L, c.seeds, c.settings["window"], c.settings["k"]
    x16 = 16 * L
    lengths = sorted({r["length"] for r in c.rows})

    def quoted(run, task, n, plain=False):
        return per_seed(t.acc(run, task, n, s) if plain else c.acc(run, task, n, s) for s in seeds)
    drift = max(abs(c.acc("alibi", task, n, s) - c.acc("alibi", task, L, s))
                for task in INDUCTION for s in seeds for n in lengths)
    single = {(task, n, s): c.acc("alibi", task, n, s) for task in SINGLE_HOP for s in seeds for n in lengths if n > L}
    worst = {task: min((v, n, s) for (t_, n, s), v in single.items() if t_ == task) for task in SINGLE_HOP}
    low = sorted((s, v) for (task, n, s), v in single.items() if task == "recall1" and n == x16 and v < 0.9)
    (pv, pn, ps) = worst["passkey1"]
    far, near = ([c.bands("rope", "copy", x16, s)[i] for s in seeds] for i in (-1, 0))
    shown = [round(leaky_rerope_distance(d, W, k)) for d in (L - 1, x16 // 2, x16 - 1)]
    return "\n".join([
        paragraph(f"Leaky ReRoPE (Su, 2023): past W = {W} the distance grows at slope 1/k = 1/{k:g}, so a key d back is "
                  f"shown at {W} + (d - {W})/{k:g}: the facts within L at {W}-{shown[0]}, those "
                  f"{number(x16 // 2)}-{number(x16)} back at {shown[1]}-{shown[2]}."),
        bullet(claim(all(c.acc("alibi", task, x16, s) > t.acc("alibi", task, x16, s) for task in INDUCTION for s in seeds),
                     f"**ALiBi keeps its retrieval to 16x L**: at {number(x16)} tokens `copy` {quoted('alibi', 'copy', x16)}, "
                     f"`recall` {quoted('alibi', 'recall', x16)} and `passkey` {quoted('alibi', 'passkey', x16)} "
                     f"({quoted('alibi', 'copy', x16, True)}, {quoted('alibi', 'recall', x16, True)}, and "
                     f"{quoted('alibi', 'passkey', x16, True)} unscaled), within {points(drift)} points of its level at L "
                     "on these three tasks at every length and seed."),
               claim(min(worst["recall1"][0], pv) < 1 - drift,
                     f"The single-hop tasks slip further: `recall1` to {per_seed(v for _, v in low)} at 16x (seeds "
                     f"{listed([str(s) for s, _ in low])}), `passkey1` to {pct(pv)}% at {pn // L}x (seed {ps}).")),
        bullet(claim(all(f > n + 0.3 for f, n in zip(far, near)),
                     "**RoPE reads the facts it is shown near L and not the others**: at 16x its `copy` of the facts "
                     f"{number(x16 // 2)}-{number(x16)} back is {per_seed(far)}, and of those within L {per_seed(near)}; at "
                     f"L, where every fact is shown within {shown[0]}, {quoted('rope', 'copy', L)}."),
               "RoPE's far anchor again (previous sections).")])


def dca(reports: Path) -> str:
    t, c = track(reports / "tasks"), Context(reports / "tasks", "dca")
    L, seeds, s_, w = t.L, c.seeds, c.settings["chunk_size"], c.settings["local_window"]
    x16 = 16 * L
    keeps = [s for s in seeds if min(c.lengths("rope", "recall", s)) >= 0.5]
    (lost,) = [s for s in seeds if s not in keeps]
    copies = [s for s in seeds if min(c.lengths("rope", "copy", s)) >= 0.5]
    rest = [s for s in seeds if s not in copies]
    recall = c.lengths("rope", "recall", lost)
    return "\n".join([
        paragraph(f"DCA (An et al., arXiv 2402.17463, section 3): chunks of s = {s_} with a local window of {w} (the "
                  f"authors' ratios for L), every key in an earlier chunk shown at a distance below {s_ + w}."),
        bullet(f"**RoPE keeps `recall` to 16x L on {WORDS[len(keeps)]} seeds of {WORDS[len(seeds)]}**: "
               f"{pct(min(min(c.lengths('rope', 'recall', s)) for s in keeps))}% or more at every length on seeds "
               f"{listed([str(s) for s in keeps])}, {per_seed(c.acc('rope', 'recall', x16, s) for s in keeps)} at 16x "
               f"({per_seed(t.acc('rope', 'recall', x16, s) for s in keeps)} unscaled; training-free YaRN "
               f"{per_seed(t.acc('rope', 'recall', x16, s, SCALED['yarn']) for s in keeps)}); seed {lost}'s is "
               f"{pct(max(recall[:3]))}% to 4x L and {pct(recall[-1])}% at 16x.",
               f"Seed {listed([str(s) for s in copies])} also keeps `copy` "
               f"({pct_span(a for s in copies for a in c.lengths('rope', 'copy', s))} at every length); seeds "
               f"{listed([str(s) for s in rest])} copy {pct(max(a for s in rest for a in c.lengths('rope', 'copy', s)))}% "
               "or less at every length."),
        bullet(claim(all(c.acc("alibi", "copy", x16, s) < t.acc("alibi", "copy", x16, s) for s in seeds),
                     f"**ALiBi loses its recency**: `copy` at L {per_seed(c.acc('alibi', 'copy', L, s) for s in seeds)}, "
                     f"{per_seed(c.acc('alibi', 'copy', x16, s) for s in seeds)} at 16x "
                     f"({per_seed(t.acc('alibi', 'copy', x16, s) for s in seeds)} unscaled).")),
        bullet(f"DCA's aim, extension without training that keeps retrieval (its abstract), holds here for RoPE's "
               f"`recall` on {WORDS[len(keeps)]} seeds of {WORDS[len(seeds)]} and its `copy` on "
               f"{'one' if len(copies) == 1 else WORDS[len(copies)]}.")])


def sinks(reports: Path) -> str:
    t, c = track(reports / "tasks"), Context(reports / "tasks", "sinks")
    L, seeds, n_sinks, window = t.L, c.seeds, c.settings["sinks"], c.settings["window"]
    past = [n for n in sorted({r["length"] for r in c.rows}) if n > L]
    far = {task: max(a for run in ("rope", "alibi") for s in seeds for n in past for a in c.bands(run, task, n, s)[1:])
           for task in INDUCTION}

    def near(run, *seeds_):
        return [c.bands(run, "copy", n, s)[0] for s in seeds_ for n in past]
    kept = [s for s in seeds if min(near("rope", s)) > 0.8]
    lost = [s for s in seeds if s not in kept]
    return "\n".join([
        paragraph(f"StreamingLLM (Xiao et al., arXiv 2309.17453, section 3.2): the first {n_sinks} tokens and the last "
                  f"L - {n_sinks} = {window}, a cache of L."),
        bullet(claim(max(far.values()) <= 0.12,
                     "**Nothing past the window is read, by any encoding**: in every distance band past L, at every "
                     f"length and seed, `copy` is at {pct(far['copy'])}% or less, `recall` at {pct(far['recall'])}% or "
                     f"less and `passkey` at {pct(far['passkey'])}% or less, at or near chance ("
                     + listed([f"{100 * TASKS_OF[task].chance:.1f}%" for task in INDUCTION]) + ")."),
               "The method evicts those keys (its section 3.2), so this is by design, and the track measures it."),
        bullet(claim(min(near("alibi", *seeds) + near("rope", *kept)) > 0.85 > 0.7 > max(near("rope", *lost)),
                     f"**The facts within L are kept at every length** by ALiBi (`copy` {pct_span(near('alibi', *seeds))} at "
                     f"2x-16x L) and by RoPE on seed {listed([str(s) for s in kept])} ({pct_span(near('rope', *kept))}); RoPE "
                     f"on seeds {listed([str(s) for s in lost])} keeps {pct_span(near('rope', *lost))}."))])


def logn_on_alibi(t: Track, c: Context) -> tuple[set[bool], list[tuple[str, int, bool]]]:
    """Log-n on ALiBi's induction tasks at 16x L against ALiBi without it: the directions it moved them ({True}: up
    only), and the (task, seed, lowered) whose 95% intervals over sequences do not overlap."""
    x16, ways, apart = 16 * t.L, set(), []
    for task in INDUCTION:
        for s in c.seeds:
            on, off = c.acc("alibi", task, x16, s), t.acc("alibi", task, x16, s)
            sequences = sum(r["samples"] for r in c.rows
                            if (r["run"], r["seed"], r["task"], r["length"]) == ("alibi", s, task, x16))
            (lo_on, hi_on), (lo_off, hi_off) = interval(on, sequences), interval(off, sequences)
            ways.add(on > off)
            if hi_on < lo_off or hi_off < lo_on:
                apart.append((task, s, on < off))
    return ways, apart


def logn(reports: Path) -> str:
    t, c = track(reports / "tasks"), Context(reports / "tasks", "logn")
    L, seeds = t.L, c.seeds
    x16 = 16 * L

    def at_16x(run, task, with_logn):
        return [c.acc(run, task, x16, s) if with_logn else t.acc(run, task, x16, s) for s in seeds]

    def quoted(run, task, with_logn):
        return per_seed(at_16x(run, task, with_logn))
    cell = {(s, task): [r for r in c.rows if (r["run"], r["seed"], r["task"], r["length"]) == ("alibi", s, task, x16)]
            for s in seeds for task in INDUCTION}
    (sequences,) = {sum(r["samples"] for r in rows) for rows in cell.values()}
    (per_band,) = {r["samples"] for rows in cell.values() for r in rows}
    (bands,) = {len(rows) for rows in cell.values()}
    ways, apart = logn_on_alibi(t, c)
    ((task_apart, seed_apart, lowers),) = apart
    return "\n".join([
        paragraph("Queries past L scaled by log_L(n) (Su 2021; the scalable softmax of arXiv 2501.19399), to keep "
                  "attention as sharp as at L."),
        bullet(claim(ways == {True, False},
                     "**On ALiBi it moves far retrieval both ways, mostly within the noise of a cell**: ALiBi's `copy` "
                     f"at 16x L is {quoted('alibi', 'copy', True)} with it, {quoted('alibi', 'copy', False)} without; its "
                     f"`recall` {quoted('alibi', 'recall', True)}, from {quoted('alibi', 'recall', False)}; its `passkey` "
                     f"{quoted('alibi', 'passkey', True)}, from {quoted('alibi', 'passkey', False)}."),
               f"Each value is over {sequences} sequences ({per_band} in each of {WORDS[bands]} distance bands);",
               claim(lowers, "every with-and-without pair but one has intervals that overlap (95%, over sequences: "
                             f"`eval.tasks.interval`), and the one apart is seed {seed_apart}'s `{task_apart}`, which "
                             "log-n lowers.")),
        bullet(claim(max(at_16x("rope", "copy", True)) < 0.1,
                     "**It leaves RoPE's induction tasks where they fell**: `copy` at 16x "
                     f"{quoted('rope', 'copy', True)}, from {quoted('rope', 'copy', False)}."),
               "The scaling sharpens attention; it does not show RoPE a position it has seen.")])


def seed_16(reports: Path) -> str:
    """What the seed trained after the page's sentences (the last seed) changed in them."""
    t, h = track(reports / "tasks"), heads_of(reports / "tasks" / "heads")
    L, seeds = t.L, t.seeds
    before, new = seeds[:-1], seeds[-1]
    x4, x16 = 4 * L, 16 * L

    def least_yarn(group):
        return min(t.acc("rope", task, x16, s, SCALED["yarn"]) for task in TASKS for s in group)
    far = {s: t.bands("alibi", "copy", x16, s)[-1] for s in seeds}
    nope = {n: {s: t.acc("nope", "copy", n, s) for s in seeds} for n in (x4, x16)}
    layers = {s: {h[("alibi", s, task)]["top"][0] for task in INDUCTION} for s in seeds}
    (old,) = set().union(*(layers[s] for s in before))
    (now,) = layers[new]
    others = [s for s in seeds if s != new]
    held = all(t.learned_at_L(run, s) == set(TASKS) for run in ("rope", "alibi") for s in seeds) and \
        all(t.learned_at_L("nope", s) == set(TASKS) - {"recall"} for s in seeds)
    return paragraph(
        f"**Seed {new} was trained after this page's sentences were written for seeds {before[0]}-{before[-1]}**, as a "
        f"seed never used, to test them; they are now stated over all {WORDS[len(seeds)]}. What it changed:",
        claim(least_yarn(seeds) < least_yarn(before),
              f"training-free YaRN's least at 16x fell from {pct(least_yarn(before))}% to {pct(least_yarn(seeds))}%;"),
        claim(now != old and far[new] > max(far[s] for s in before),
              f"ALiBi's induction heads are in layer {now} on it, not layer {old}, and it copies {pct(far[new])}% of the "
              f"facts {number(x16 // 2)}-{number(x16)} tokens back at 16x L ({pct(max(far[s] for s in before))}% at most "
              "before);"),
        claim(all(nope[n][new] > max(nope[n][s] for s in before) for n in (x4, x16)),
              f"NoPE copies far past L on it ({pct(nope[x4][new])}% at 4x L, {pct(nope[x16][new])}% at 16x, where the "
              f"others reached {pct(max(nope[x4][s] for s in before))}% and {pct(max(nope[x16][s] for s in before))}% at "
              "most), so \"not far\" is gone from NoPE's sentence;"),
        claim("recall" not in t.learned_at_L("t5", new) and all(t.learned_at_L("t5", s) == set(TASKS) for s in others),
              f"and its T5 left `recall` unlearned ({pct(t.acc('t5', 'recall', L, new))}%), where those of seeds "
              f"{listed([str(s) for s in others])} learned all five."),
        claim(held, "Every \"every seed\" sentence about RoPE, ALiBi and NoPE at L held."))


def anchor_rows(folder: Path, setting: str) -> tuple[dict, dict]:
    """make task-anchor's rows of one setting: (its context settings, {(run, task, seed): accuracy on the facts
    within L of the question})."""
    rows = previous_rows(folder / "anchor" / setting / "results.json.gz", "eval.tasks", "accuracy")
    (settings,) = {json.dumps(r["context"], sort_keys=True) for r in rows}
    return json.loads(settings), {(r["run"], r["task"], r["seed"]): r["accuracy"] for r in rows if r["distance_lo"] == 0}


def anchor(reports: Path) -> str:
    """The section "A far-back anchor": RoPE's retrieval with far keys hidden."""
    t = track(reports / "tasks")
    L, seeds = t.L, t.seeds
    x4 = 4 * L
    (near, near_acc), (far, far_acc), (moved, moved_acc) = (anchor_rows(reports / "tasks", s)
                                                            for s in ("window64", "window448", "sinks64"))

    def quoted(acc, run, task):
        return per_seed(acc[(run, task, s)] for s in seeds)
    shown = [t.bands("rope-yarn", "copy", x4, s)[0] for s in seeds]
    control = all(abs(acc[("rope-continued", "copy", s)] - t.bands("rope-continued", "copy", x4, s)[0]) < 0.01
                  for acc in (far_acc, moved_acc) for s in seeds)
    w, W, n_sinks, window = near["window"], far["window"], moved["sinks"], moved["window"]
    intro = paragraph(
        f'`make task-anchor SEED_NUMBERS="{" ".join(map(str, seeds))}"` evaluates the runs with keys hidden from every '
        "query: the `sinks` context method (model/context.py) with no sinks shows a query only its last W keys. "
        "Accuracy (%) on the facts within L of the question, each seed's rows in [anchor/](anchor):")
    base = bullet(
        f"**RoPE at L, keys {w} or more tokens back hidden** (W = {w}): `copy` {quoted(near_acc, 'rope', 'copy')}, "
        f"`passkey` {quoted(near_acc, 'rope', 'passkey')} (seeds {seeds[0]} to {seeds[-1]}; "
        f"{pct_span(t.acc('rope', task, L, s) for task in ('copy', 'passkey') for s in seeds)} with every key shown).",
        claim(all(near_acc[("rope", "copy", s)] < 0.5 < 0.7 < near_acc[("alibi", "copy", s)] for s in seeds),
              f"ALiBi under the same hiding keeps `copy` at {quoted(near_acc, 'alibi', 'copy')}. Facts more than {w} "
              f"tokens back are hidden from both; RoPE also loses the ones within {w}."))
    tuned = bullet(
        f"**The YaRN fine-tune at 4x L, keys {W} or more back hidden** (W = {W}, the sequence's first {x4 - W} tokens "
        f"for the question): `copy` {quoted(far_acc, 'rope-yarn', 'copy')} on the facts within L, from "
        f"{per_seed(shown)}. Showing those {n_sinks} tokens nearer (`{{type: sinks, sinks: {n_sinks}, window: "
        f"{window}}}`: at {window}-{window + n_sinks - 1} tokens back instead of {W}-{x4 - 1}) gives "
        f"{quoted(moved_acc, 'rope-yarn', 'copy')}.",
        claim(control, "The control copies under either what it copies with every key shown, within a point."))
    lean = paragraph(
        "So RoPE's models lean on keys far back, at the distance where training put the start of the sequence: the base "
        f"run on keys {w}-{L - 1} tokens back, the YaRN fine-tune on the first tokens at {W}-{x4 - 1} back, not nearer. A "
        "sequence longer than training (RoPE past L) puts other tokens at those distances, and one shorter (the "
        "fine-tune below 4x L) has none there; either way the facts near the question are lost too. StreamingLLM (Xiao "
        "et al., arXiv 2309.17453, section 3.1) found pretrained models parking attention on the first tokens; here the "
        "anchor is tied to its distance as well. Why RoPE forms it and ALiBi does not is open.")
    return "\n\n".join([intro, base + "\n" + tuned, lean])


def beside_kazemnejad(reports: Path) -> str:
    """The section "Compared with the literature on `copy`"."""
    t, h = track(reports / "tasks"), heads_of(reports / "tasks" / "heads")
    L, seeds = t.L, t.seeds
    x2, x4, x16 = 2 * L, 4 * L, 16 * L

    def copy(run, n, label=None):
        return per_seed(t.acc(run, "copy", n, s, label) for s in seeds)
    which = f"seeds {seeds[0]} to {seeds[-1]}"
    drop = max(t.acc("alibi", "copy", L, s) - t.acc("alibi", "copy", x4, s) for s in seeds)
    above = [s for s in seeds if t.acc("t5", "copy", x4, s) >= t.acc("alibi", "copy", x4, s)]
    kept = [(run, s) for s in seeds for run in ENCODINGS if all(t.acc(run, task, x16, s) >= 0.9 for task in INDUCTION)]
    ((_, keeper),) = kept
    others = [t.acc("t5", "copy", x16, s) for s in seeds if s != keeper]
    (unlearned,) = [s for s in seeds if t.learned_at_L("t5", s) != set(TASKS)]
    far = {(r["run"], r["seed"]): r for r in json.loads((reports / "tasks" / "heads-16x" / "heads.json").read_text())}
    near = {key: h[(*key, "copy")] for key in far}  # the head each run copies through at L
    at_L = {key: near[key]["most"] for key in far}
    at_16x = {key: r["share"][near[key]["top"][0]][near[key]["top"][1]] for key, r in far.items()}
    rest = [k for k in far if k != ("t5", keeper)]
    prev_L = {key: max(map(max, near[key]["previous"])) for key in far}
    prev_16x = {key: max(map(max, r["previous"])) for key, r in far.items()}
    holds = [s for s in seeds if prev_16x["t5", s] > 0.5]
    braces = "{" + ",".join(map(str, seeds)) + "}"
    return paragraph(
        "Kazemnejad et al. 2023 (arXiv 2305.19466, \"The Impact of Positional Encoding on Length Generalization in "
        "Transformers\") train decoder-only models of about 107M parameters on copy, reverse, addition and other tasks "
        "up to instance length 20 and test to 40; over their tasks NoPE ranks first and T5's bias second, while ALiBi, "
        "RoPE and absolute positions generalize worse. Their copy grows the instance; ours keeps a span of 8 and moves "
        "it farther back than training ever put it.",
        claim(all("copy" in t.learned_at_L("nope", s) for s in seeds),
              f"NoPE, their best, learned `copy` at L in every seed here ({copy('nope', L)}),"),
        f"and at 2x L, the farthest they tested, it copies {copy('nope', x2)} ({which}):",
        claim(all(t.acc("nope", "copy", x2, s) < t.acc("alibi", "copy", x2, s) for s in seeds),
              f"it holds there on some seeds, as theirs does, and falls on others, below ALiBi in every seed "
              f"({copy('alibi', x2)})."),
        claim(max(t.acc("rope", "copy", x4, s) for s in seeds) < 0.5,
              f"That part disagrees with their ranking; the agreement is on RoPE, which has fallen by 4x L "
              f"({copy('rope', x4)}; {copy('rope', x16)} at 16x), where ALiBi keeps `copy` within {points(drop)} points "
              "of L or above it."),
        f"With YaRN (no fine-tune) RoPE copies {copy('rope', x16, SCALED['yarn'])} at 16x, a method outside their "
        "comparison.",
        claim(all("copy" in t.learned_at_L("t5", s) and t.acc("t5", "copy", x2, s) >= 0.9 for s in seeds),
              f"T5, their second (`TASK_ENCODINGS=t5`, above), learned `copy` at L in every seed ({copy('t5', L)}) and "
              f"holds it at 2x L ({copy('t5', x2)}), as theirs does;"),
        f"at 4x L it copies {copy('t5', x4)}, below ALiBi ({copy('alibi', x4)}) in every seed but "
        f"{listed([str(s) for s in above])}.",
        claim(above == [keeper] and all(pct(t.acc("t5", "copy", n, keeper)) == "100" for n in t.lengths),
              "Seeds 14 and 15 were trained after the sentence \"below ALiBi in every seed\" was written on the other "
              f"four, and seed {keeper} broke it: its T5 copies 100% at every length to 16x L, and `recall` and "
              "`passkey` with it (" + listed([f"{pct(t.acc('t5', task, x16, keeper))}%" for task in INDUCTION])
              + f" at {number(x16)} tokens, {pct_span(t.bands('t5', 'copy', x16, keeper))} of `copy`'s facts in every "
              "distance band), the one run of the track without a scaling that keeps the three induction tasks at 16x "
              f"L; the five others copy {pct_span(others)} there."),
        f"`python -m eval.heads runs/tasks/seed{braces}/{{{','.join(ENCODINGS)}}} --tasks copy --length {x16} --out "
        "reports/tasks/heads-16x` reads the heads on `copy` at 16x L ([heads-16x/heads.md](heads-16x/heads.md)):",
        claim(at_16x["t5", keeper] > 0.8 > max(at_16x[k] for k in rest)
              and all(at_16x[k] < 0.7 * at_L[k] for k in rest) and abs(at_16x["t5", keeper] - at_L["t5", keeper]) < 0.02,
              "the head through which a run copies at L (its largest share in [heads.md](heads/heads.md)) gives the "
              f"fact {pct(at_16x['t5', keeper])}% of its attention in seed {keeper}'s T5 ({pct(at_L['t5', keeper])}% at "
              f"L), and {pct_span(at_16x[k] for k in rest)} in every other run of the four encodings "
              f"({pct_span(at_L[k] for k in rest)} at L). Past L the induction head loses the fact, in every run but this "
              "one; why its head holds is open."),
        claim(all(prev_16x["rope", s] < prev_L["rope", s] / 2 for s in seeds)
              and all(at_16x["t5", s] < 0.5 for s in holds if s != keeper),
              "The circuit's first half ([heads-16x/heads.md](heads-16x/heads.md), second table) fails past L in RoPE "
              f"too: its previous-token head gives the token before {pct_span(prev_L['rope', s] for s in seeds)} at L and "
              f"{pct_span(prev_16x['rope', s] for s in seeds)} at 16x L; T5's keeps it on seeds "
              f"{listed([str(s) for s in holds])} ({pct_span(prev_16x['t5', s] for s in holds)}) and loses it on the "
              f"others ({pct_span(prev_16x['t5', s] for s in seeds if s not in holds)}), so on seeds "
              f"{listed([str(s) for s in holds if s != keeper])} its second half alone fails."),
        f"T5 left `recall` at {pct(t.acc('t5', 'recall', L, unlearned))}% on seed {unlearned}, where NoPE is.")


def profile(reports: Path) -> str:
    """"Where a step's time goes": speed.profile of the recipe's step, eager and compiled."""
    eager, compiled = (json.loads((reports / "tasks" / folder / "profile.json").read_text())
                       for folder in ("profile", "profile/compiled"))
    share = {k: f"{100 * v:.0f}" for k, v in eager["shares"].items()}
    threads = eager["device"].split(", ")[-1].split()[0]
    return paragraph(
        f"**Where a step's time goes** (`OMP_NUM_THREADS={threads} python -m speed.profile --config {eager['config']} "
        "--out reports/tasks/profile`, and with `run.compile=true` into [profile/compiled](profile/compiled)): a step "
        f"of {eager['batch_size']} x {eager['seq_len']} tokens takes {eager['step_ms']:.0f} ms on "
        f"{'one thread' if threads == '1' else threads + ' threads'}, {share['matmul']}% of it in matrix products, "
        f"{share['attention']}% in attention (PyTorch's flash kernel for the CPU) and {share['idle']}% outside any "
        f"operator; compiled, {compiled['step_ms']:.0f} ms ({eager['step_ms'] / compiled['step_ms']:.2f}x).",
        claim(eager["shares"]["idle"] < 0.1 and eager["step_ms"] / compiled["step_ms"] < 1.2
              and not eager["compile"] and compiled["compile"],
              "The step is compute-bound, so the budget cannot come from speed within reach; it needs fewer steps that "
              "still learn."))


def first_learned(search: Search, row: int, task: str) -> int | None:
    """The first logged step of a search row from which the task stays at 90% or more (None: never)."""
    return learned_step({step: acc[task] for step, acc in search.log(search.table[row]["log"]).items()})


def learned_from(search: Search, row: int) -> int | None:
    """The first logged step from which every task of a search row stays at 90% or more (None: never)."""
    steps = [first_learned(search, row, task) for task in search.final(row)]
    return None if None in steps else max(steps)


def at_most(search: Search, rows, task: str) -> float:
    """The most a task reached at any logged step of the rows."""
    return max(a[task] for r in rows for a in search.log(search.table[r]["log"]).values())


def each_step(reports: Path) -> str:
    """"What each step showed": the recipe search, row by row (the accuracies from the committed logs; the attention
    shares and per-answer accuracies from the runs' checkpoints, which are not committed, are quoted as measured)."""
    q = Search(reports / "tasks" / "recipe-search")
    f = q.final
    all_five = {r: all(v >= 0.9 for v in f(r).values()) for r in q.table}
    slowed = q.log(q.table[14]["log"])[q.table[15]["step"]]
    (from_20,) = [learned_from(q, 20)]
    stopped_25 = q.table[25]
    seed1_22 = q.log(q.table[22]["log"])[q.table[26]["step"]]
    more = q.last_step(34) - q.last_step(32)
    return "\n".join([
        "What each step showed (the attention shares and per-answer accuracies quoted come from the runs' checkpoints, "
        "which are not committed; the accuracy columns are in the logs):",
        bullet("**No previous-token head over uniform filler** (rows 1-10). Row 3's model, read head by head, gives the "
               "previous token 2-5% of its attention in every head of both layers (the mean attention from each position "
               "to the one before it, read from its checkpoint): the induction circuit never starts. Its "
               f"{pct_span(f(3)[t] for t in INDUCTION)} on the multi-token tasks is a bag of the fact's symbols: it attends "
               "to every fact token at once, and `passkey`'s last digit (94%) is the one digit the question has not yet "
               "shown.",
               claim(q.never_learned(range(1, 11), ("copy", "recall")),
                     "Longer training, a distance curriculum, width, a larger lr, shorter sequences and q/k/v biases did "
                     "not change that.")),
        bullet("**Then the filler got local structure**: each token the symbol after the one two back, with probability "
               "3/4, so that predicting it takes the token before the current one (a previous-token head), and training "
               "predicts one filler token in eight beside the answers (`data/tasks.py`, `filler`). The runs that chose "
               "that form (rows 11-13) ran on scratch copies of the generator and are left out."),
        bullet(claim(all_five[14],
                     "**Row 14, the first on the committed filler, changed two more things**, `copy`'s span drawn from "
                     "the values (every other task answers with a value) and two heads of 32 dimensions instead of four "
                     f"of 16, and reached every task by step {number(q.table[14]['step'])} on seed 101;"),
               "what each change contributed is not separated."),
        bullet(claim(any(f(18)[t] < 0.9 for t in INDUCTION) and any(f(19)[t] < 0.9 for t in INDUCTION),
                     "**That recipe does not hold on a seed it was not tuned on** (rows 18-19)."),
               "On seed 1, RoPE formed its previous-token head (88% of one layer-0 head's attention) but no induction "
               f"head by step {number(q.table[18]['step'])}, and ALiBi formed neither in layer 0: with two heads its "
               f"steepest slope is 2^-4 (the ALiBi paper's rule for 2 heads), so its bias separates the previous token "
               "from the one before by a factor of e^(1/16) only, and its previous-token head appears in layer 1 (57%), "
               "where no layer is left to read it."),
        bullet("**Why NoPE and few-headed ALiBi need three layers.** Without positions (NoPE), or with a bias too flat "
               "to pick one neighbour (ALiBi with few heads), layer 0 cannot single out the previous token; a "
               "previous-token head can form in layer 1 at the earliest, and the induction head that reads it needs a "
               "layer after that.",
               claim(q.never_learned((16, 23), INDUCTION) and all(f(16)[t] >= 0.9 for t in SINGLE_HOP)
                     and all(f(15)[t] < slowed[t] and q.apart(f(15)[t], slowed[t]) for t in INDUCTION),
                     "NoPE learned none of the induction tasks in 3 layers (rows 16 and 23), and both single-hop tasks "
                     f"where it ran {number(q.table[16]['step'])} steps (row 16); a third layer also slowed RoPE (row "
                     "15).")),
        bullet(claim(from_20 is not None and any(f(18)[t] < 0.9 for t in TASKS) and q.never_learned((21,), INDUCTION),
                     f"**Three layers and a longer schedule carry RoPE on seed 1** (row 20: all five tasks at 90% or "
                     f"more from step {number(from_20)}, where two layers failed, row 18), **but not two-headed ALiBi** "
                     f"(row 21: none of the induction tasks by step {number(q.last_step(21))}).")),
        bullet(claim(all(f(22)[t] >= 0.9 for t in INDUCTION) and f(22)["recall1"] < 0.9,
                     "**Four heads let ALiBi form the induction circuit in three layers** (row 22: `copy`, `recall` and "
                     f"`passkey` at {pct_span(f(22)[t] for t in INDUCTION)} by step {number(q.table[22]['step'])}, with a "
                     f"steepest slope of {alibi_slope(0, 4)} instead of {alibi_slope(0, 2)}), but its `recall1` stays at "
                     f"{pct(f(22)['recall1'])}%."),
               claim(q.never_learned((23,), INDUCTION),
                     f"**NoPE in three layers** learned no induction task by step {number(q.last_step(23))} of 5,000 "
                     "(row 23).")),
        bullet(claim(all(v >= 0.9 for v in q.log(q.table[24]["log"])[q.table[24]["step"]].values())
                     and q.never_learned((25,), INDUCTION) and all(f(25)[t] >= 0.9 for t in SINGLE_HOP)
                     and not stopped_25["stopped"],
                     f"**The recipe on seed 2** (rows 24-26): RoPE learned all five tasks by step "
                     f"{number(q.table[24]['step'])}. NoPE, run the whole {number(stopped_25['step'])} steps, learned "
                     "both single-hop tasks and no induction task (" + ", ".join(f"`{t}` {pct(f(25)[t])}%" for t in INDUCTION)
                     + ")."),
               claim(q.table[26]["stopped"] and pct(seed1_22["recall1"]) == pct(f(26)["recall1"]),
                     f"ALiBi was stopped at step {number(q.table[26]['step'])} to free the CPU for the track's seed 3: "
                     + ", ".join(f"`{t}` {pct(f(26)[t])}%" for t in ("copy", "passkey")) + f", and `recall1` "
                     f"{pct(f(26)['recall1'])}%, the same as seed 1's at that step (row 22).")),
        bullet("**`recall` and `recall1` were asked alike, and held each other back** (rows 22, 28-31). Both asked key k "
               "with the same token, so at a key in the question block a model had to tell from the facts before it "
               "whether to copy the token after an earlier k (`recall`) or decode a fused pair (`recall1`), and the two "
               "rules competed for the same heads. Where one was learned first, the other stayed behind: ALiBi on seed 1 "
               f"reached `recall` {pct(f(22)['recall'])}% and `recall1` {pct(f(22)['recall1'])}% (row 22), ALiBi on "
               f"seed 4 `recall1` {pct(f(28)['recall1'])}% and `recall` {pct(f(28)['recall'])}% (row 28), and RoPE on "
               f"seed 3 `recall` {pct(f(29)['recall'])}% (row 29).",
               claim(all_five[30] and all_five[31] and not any(all_five[r] for r in (22, 28, 29)),
                     "With `recall1` asked by tokens of its own, the two runs that had failed learned all five: RoPE on "
                     f"seed 3 from step {number(learned_from(q, 30))} (row 30), ALiBi on seed 4 from step "
                     f"{number(learned_from(q, 31))} (row 31)."),
               "Seed and config draw the same sequences as before, token for token, but for `recall1`'s question tokens; "
               "the initial weights differ, since the embedding table is 16 rows longer and every draw after it moves."),
        bullet(claim(q.never_learned((32, 33, 34, 35), ("recall",)),
                     "**On seed 5, never used before, `recall` failed for both** (rows 32-33: RoPE "
                     f"{pct(f(32)['recall'])}%, with `copy` at {pct(f(32)['copy'])}%; ALiBi {pct(f(33)['recall'])}%), and "
                     f"{number(more)} more steps at the final lr left it there (rows 34-35: {pct(f(34)['recall'])}% and "
                     f"{pct(f(35)['recall'])}%) while RoPE's `copy` reached {pct(f(34)['copy'])}%."),
               "`recall` is the task with the least shared structure: its keys occur in no other task, so the query side "
               "of its induction head learns from a fifth of the sequences only."),
        bullet(claim(all_five[36] and f(37)["recall"] >= 0.9 and f(37)["copy"] < 0.9 and f(37)["recall1"] < 0.9,
                     "**Drawing `recall` three times as often** (`data.source: tasks:copy,recall*3,passkey,recall1,"
                     "passkey1`, the same steps and batches) carried RoPE on seed 5 through all five tasks (row 36), and "
                     f"ALiBi through `recall` ({pct(f(37)['recall'])}%), but left ALiBi's `copy` at {pct(f(37)['copy'])}% "
                     f"and `recall1` at {pct(f(37)['recall1'])}% (row 37):"),
               "with a seventh of the sequences each instead of a fifth, the other tasks get less training, and ALiBi's "
               f"two did not reach 90% in {number(q.table[37]['step'])} steps."),
        bullet(claim(all_five[38] and all_five[39],
                     f"**{number(q.table[38]['step'])} steps** (the cosine decay over all of them) carried ALiBi through "
                     f"all five tasks on seed 5 (from step {number(learned_from(q, 38))} on, row 38) and on seed 6, never "
                     f"used before (from step {number(learned_from(q, 39))}, row 39)."),
               "That was the committed recipe until the track's seeds 6-10 were trained with it.",
               claim(all_five[40] and f(41)["recall1"] < 0.9,
                     "RoPE learned all five with it on seed 6 (row 40); ALiBi on seed 7, never used before, left "
                     f"`recall1` at {pct(f(41)['recall1'])}% (row 41).")),
    ])


def run_of(search: Search, row: int) -> tuple[str, int]:
    """(encoding, seed) of a search row, from its log's name (…-alibi-s7)."""
    log = search.table[row]["log"]
    return next(e for e in ENCODINGS if f"-{e}-" in f"-{log}-"), int(log.rsplit("-s", 1)[1])


NAMES = {"rope": "RoPE", "alibi": "ALiBi", "nope": "NoPE", "t5": "T5"}


def search_status(reports: Path) -> str:
    """The search's status after the three-layer recipe, the fourth layer, the longer schedule and the new seeds."""
    q = Search(reports / "tasks" / "recipe-search")
    f = q.final
    all_five = {r: all(v >= 0.9 for v in f(r).values()) for r in q.table}
    recipe = [r for r in q.table if q.table[r]["log"].startswith("recall3-8k-")]
    tried = [r for r in recipe if run_of(q, r)[0] != "nope"]
    (nope_6,) = [r for r in recipe if run_of(q, r)[0] == "nope"]
    won = [r for r in tried if all_five[r]]
    (lost,) = [r for r in tried if not all_five[r]]
    by_run = {run: [run_of(q, r)[1] for r in won if run_of(q, r)[0] == run] for run in ("alibi", "rope")}
    (late,) = [r for r in won if learned_from(q, r) == q.table[r]["step"]]
    late_log = q.log(q.table[late]["log"])
    steps = sorted(late_log)
    last_of = {r: max(TASKS, key=lambda t: first_learned(q, r, t) or math.inf) for r in (31, *won, lost)
               if run_of(q, r)[0] == "alibi"}
    recall1_last = [r for r in last_of if last_of[r] == "recall1"]
    recall_last = [r for r in last_of if last_of[r] == "recall"]
    lost_log = q.log(q.table[lost]["log"])
    rising = [lost_log[s]["recall1"] for s in sorted(lost_log)[-4:]]
    up_to_then = (16, 23, 25, nope_6)
    status = paragraph(
        claim(len(won) == 4 and len(tried) == 5,
              f"**Status of the three-layer recipe.** Of the five RoPE and ALiBi runs of it in this search, four learned "
              f"all five tasks at L: ALiBi on seeds {listed([str(x) for x in by_run['alibi']])} and RoPE on seed "
              f"{listed([str(x) for x in by_run['rope']])} (rows {ranges([r for r in won if r != late])}, {late}; seed "
              f"{run_of(q, late)[1]}'s `{min(f(late), key=f(late).get)}` reached {pct(min(f(late).values()))}% only at "
              f"the last step, from {pct(late_log[steps[-2]][min(f(late), key=f(late).get)])}% at step "
              f"{number(steps[-2])})."),
        claim(rising == sorted(rising) and rising[0] < rising[-1],
              f"ALiBi on seed {run_of(q, lost)[1]}, never used before, did not: its `recall1` reached "
              f"{pct(f(lost)['recall1'])}% by step {number(q.table[lost]['step'])}, still rising (row {lost})."),
        f"ALiBi's last task to stay at 90% or more was `recall1` in rows {listed([str(r) for r in recall1_last])} (at "
        f"step {listed([number(first_learned(q, r, 'recall1')) for r in recall1_last if first_learned(q, r, 'recall1')])}, "
        f"or never) and `recall` in row{'s' if len(recall_last) > 1 else ''} {listed([str(r) for r in recall_last])} "
        f"(step {listed([number(first_learned(q, r, 'recall')) for r in recall_last])}).",
        claim(q.never_learned((nope_6,), INDUCTION) and all(f(nope_6)[t] >= 0.9 for t in SINGLE_HOP),
              f"NoPE on seed {run_of(q, nope_6)[1]} learned both single-hop tasks and no induction task (row {nope_6}: "
              + ", ".join(f"`{t}` {pct(f(nope_6)[t])}%" for t in INDUCTION) + ")."),
        claim(q.never_learned(up_to_then, INDUCTION),
              "NoPE learned no induction task under any recipe tried up to then (rows "
              f"{', '.join(map(str, up_to_then))}: three layers, two or four heads, up to "
              f"{number(max(q.last_step(r) for r in up_to_then))} steps)."),
        "The track's former seeds 6-10 were trained with it; in each ALiBi missed a task and NoPE `copy` and `recall`, "
        "and their results are withdrawn with the recipe (they remain in the git history: reports/tasks at commit "
        "63f85c4), as are the results measured under the former generators (`recall1` asked twice, bands counted from "
        "the last token, uniform filler) and seed 3's results under the generators before rows 30-31 (commit 2842f18), "
        "which remain in the git history too.")

    four = {run_of(q, r): r for r in range(44, 49)}
    alibi_won = [r for r in range(44, 48) if run_of(q, r)[0] == "alibi" and all_five[r]]
    alibi_lost = [r for r in range(44, 48) if run_of(q, r)[0] == "alibi" and not all_five[r]]
    (missed,) = alibi_lost
    nope_7, rope_7 = four[("nope", 7)], four[("rope", 7)]
    fourth = paragraph(
        "**After the three-layer track: a fourth layer** (rows 44-48: the recipe with `model.n_layers=4` and nothing "
        "else changed; `python train.py --config "
        "configs/tasks.yaml run.seed=7 run.out_dir=runs/recipe-search run.name=l4-alibi-s7 model.position.type=alibi "
        "model.n_layers=4`). The heads (below) suggested it: where ALiBi learned `recall1`, it read the fact through its "
        "induction head of the flattest slope, and three layers of four heads have three such heads.",
        f"With four layers ALiBi learned all five tasks on seeds {listed([str(run_of(q, r)[1]) for r in alibi_won])}, "
        f"from step {listed([number(learned_from(q, r)) for r in alibi_won])} on (rows "
        f"{listed([str(r) for r in alibi_won])}), where three layers had left `recall1` unlearned in the former track;",
        claim(f(missed)["recall"] >= 0.9 and first_learned(q, missed, "recall1") is None,
              f"on seed {run_of(q, missed)[1]}, where three layers had left `recall` unlearned, it learned `recall` and "
              f"left `recall1` at {pct(f(missed)['recall1'])}% (row {missed})."),
        claim(first_learned(q, nope_7, "copy") is None and first_learned(q, nope_7, "recall") is None
              and all(f(nope_7)[t] >= 0.9 for t in ("passkey", *SINGLE_HOP)),
              f"NoPE on seed 7 learned `passkey` ({pct(f(nope_7)['passkey'])}%) and both single-hop tasks, not `copy` "
              f"({pct(f(nope_7)['copy'])}%) or `recall` ({pct(f(nope_7)['recall'])}%; row {nope_7}). So a fourth layer "
              f"is not a recipe for every seed either: ALiBi missed a task on {WORDS.get(len(alibi_lost), 'one')} seed of "
              f"{WORDS[len(alibi_won) + len(alibi_lost)]}, NoPE two tasks on its one seed."),
        claim(all_five[rope_7], f"RoPE on seed 7 learned all five with it, from step {number(learned_from(q, rope_7))} "
                                f"on (row {rope_7})."))

    nope_12, alibi_12 = 49, 50
    a12, a8 = q.log(q.table[alibi_12]["log"]), q.log(q.table[missed]["log"])
    early = [a12[x]["recall1"] for x in a12 if x <= 6000]
    n12 = q.log(q.table[nope_12]["log"])
    tail = [n12[x]["recall"] for x in n12 if x > q.last_step(nope_12) - 4000]
    no_copy_recall = (16, 23, 25, nope_6, nope_7, nope_12)
    longer = paragraph(
        f"**And a longer schedule** (rows {nope_12}-{alibi_12}: four layers and {number(q.table[alibi_12]['step'])} "
        "steps, the cosine decay over all of them, `model.n_layers=4 train.max_steps=12000`). Both curves of the 8,000-step runs were still rising at their "
        "last step.",
        claim(all_five[alibi_12],
              f"ALiBi on seed {run_of(q, alibi_12)[1]} learned all five tasks from step "
              f"{number(learned_from(q, alibi_12))} on (row {alibi_12}): its `recall1` sat at {pct_span(early)} to step "
              f"6,000, then reached {pct(a12[6500]['recall1'])}% at 6,500 and {100 * a12[7000]['recall1']:.1f}% at "
              f"7,000, where the 8,000-step run was at {pct(a8[7250]['recall1'])}% by step 7,250 (its learning rate, "
              "decayed over 8,000 steps, lower at every step)."),
        claim(q.never_learned((nope_12,), ("copy", "recall")),
              f"NoPE on seed 7 reached `copy` {pct(f(nope_12)['copy'])}% and `recall` {pct(f(nope_12)['recall'])}% (row "
              f"{nope_12}; {pct(f(nope_7)['copy'])}% and {pct(f(nope_7)['recall'])}% with 8,000 steps), its `recall` "
              f"between {pct(min(tail))}% and {pct(max(tail))}% over the last 4,000 steps: more steps did not teach "
              "NoPE either task."),
        f"So four layers and 12,000 steps is the next candidate for RoPE and ALiBi, tried then on one seed each (rows "
        f"{rope_7} and {alibi_12} with 8,000 and 12,000 steps), not yet on seeds it was not chosen on; a run costs 1.5 "
        "times one of 8,000 steps.",
        claim(q.never_learned(no_copy_recall, ("copy", "recall")),
              f"NoPE learned `copy` and `recall` in no run of this search (rows {', '.join(map(str, no_copy_recall))})."))

    fresh = {run_of(q, r): r for r in range(51, 61)}
    seeds = sorted({s for _, s in fresh})
    ok = all(all_five[r] and q.table[r]["step"] == 12000 for r in fresh.values())
    last = {s: max(TASKS, key=lambda t: first_learned(q, fresh[("alibi", s)], t)) for s in seeds}
    by_last = {t: [s for s in seeds if last[s] == t] for t in ("recall1", "copy")}
    taught = [s for s in by_last["recall1"] if first_learned(q, fresh[("alibi", s)], "recall1") > 8000]
    s11, s13 = (q.log(q.table[fresh[("alibi", s)]]["log"]) for s in taught)
    alibi_seeds = [s for (run, s), r in {**fresh, ("alibi", 10): alibi_12}.items() if run == "alibi" and all_five[r]]
    t = track(reports / "tasks")
    curves: dict[tuple, dict] = {}  # the track's validation curves of those runs, as the search's logs hold them
    for r in t.training:
        curves.setdefault((r["run"], r["seed"]), {}).setdefault(r["step"], {})[r["task"]] = r["accuracy"]
    never = paragraph(
        f"**On seeds never used before** (rows {min(fresh.values())}-{max(fresh.values())}: four layers and 12,000 steps "
        f"on seeds {seeds[0]}-{seeds[-1]}, RoPE and ALiBi, the command above with `run.seed=11` and so on).",
        claim(ok, f"Both learned all five tasks on each of the {WORDS[len(seeds)]} seeds: RoPE from step "
                  f"{listed([number(learned_from(q, fresh[('rope', s)])) for s in seeds])} on, ALiBi from step "
                  f"{listed([number(learned_from(q, fresh[('alibi', s)])) for s in seeds])}."),
        claim(sorted(by_last["recall1"] + by_last["copy"]) == seeds and len(taught) == 2,
              f"ALiBi's last task was `recall1` on seeds {listed([str(s) for s in by_last['recall1']])} (`copy` on "
              f"{listed([str(s) for s in by_last['copy']])}), and on {listed([str(s) for s in taught])} the steps past "
              f"8,000 taught it: seed {taught[0]}'s climbed from {pct(s11[5000]['recall1'])}% at step 5,000 to "
              f"{pct(s11[8000]['recall1'])}% at 8,000 and {pct(s11[10750]['recall1'])}% at 10,750, seed {taught[1]}'s "
              f"sat at {100 * s13[8000]['recall1']:.1f}% at step 8,000 and reached {100 * s13[8750]['recall1']:.1f}% at "
              "8,750."),
        claim(all_five[alibi_12] and all_five[rope_7],
              f"With seed 10 (row {alibi_12}), ALiBi has learned all five tasks under this recipe on "
              f"{WORDS[len(alibi_seeds)]} seeds, {WORDS[len(seeds)]} of them never used before; RoPE on "
              f"{WORDS[len(seeds)]} never used before, and on seed 7 with 8,000 steps (row {rope_7})."),
        "That is the committed recipe, frozen here:",
        claim(all(curves[key] == q.log(q.table[r]["log"]) for key, r in fresh.items()),
              f"the track's seeds {t.seeds[0]}-{t.seeds[-1]} below are trained with it, their RoPE and ALiBi runs of "
              f"seeds {seeds[0]}-{seeds[-1]} those of rows {min(fresh.values())}-{max(fresh.values())}"),
        "(the "
        "Makefile's command trains them bit for bit: seed 11's RoPE gave the same losses and accuracies over its first "
        "500 steps), and a run that does not learn a task is a result, marked †, with its curve in "
        "[training.png](training.png).")
    return "\n\n".join([status, fourth, longer, never])


def search_nope(reports: Path) -> str:
    """The search for NoPE's `recall` after the track: alone, deeper, other learning rates and widths, positions, a
    curriculum (rows 61-69, 73-74)."""
    t, q = track(reports / "tasks"), Search(reports / "tasks" / "recipe-search")
    f = q.final
    alone, six = 61, 62
    mix = [t.acc("nope", "recall", t.L, s) for s in t.seeds]
    alone_most = at_most(q, (alone,), "recall")
    after = paragraph(
        f"**After the track: NoPE's `recall`** (rows {alone}-{six}, seed 101, one thread each, side by side; `python "
        "train.py --config configs/tasks.yaml run.seed=101 run.out_dir=runs/recipe-search run.name=nope-recall-only-s101 "
        f"model.position.type=nope data.source=tasks:recall train.max_steps={q.table[alone]['step']}`).",
        claim(set(f(alone)) == {"recall"} and alone_most < min(mix),
              f"Trained on `recall` alone, NoPE reached {pct(f(alone)['recall'])}% by step "
              f"{number(q.table[alone]['step'])} ({pct(alone_most)}% at most at any step), no higher than the "
              f"{pct_span(mix)} of the mix in the track: the other tasks are not what holds it back."),
        claim(all(f(six)[x] >= 0.9 for x in ("passkey", *SINGLE_HOP)) and f(six)["copy"] < 0.9
              and q.never_learned((alone, six), ("recall",)),
              f"With six layers (row {six}: `model.n_layers=6 train.max_steps={q.table[six]['step']}`) it learned "
              f"`passkey` and both single-hop tasks, and left `copy` at {pct(f(six)['copy'])}% and `recall` at "
              f"{pct(f(six)['recall'])}%. Neither is a recipe for NoPE's `recall`."))

    base, slow, fast, wide, faster = 45, 63, 64, 65, 66
    fb, fs, ff, fw, fx = f(base), f(slow), f(fast), f(wide), f(faster)
    most = at_most(q, (slow, fast, wide, faster), "recall")
    ends = [pct(f(r)["recall"]) for r in (slow, fast, faster, wide)]  # by lr, then width
    rate = paragraph(
        f"**A learning rate and width for NoPE** (rows {slow}-{faster}, seed 7 with four layers and 8,000 steps as in row "
        f"{base}, whose lr was 3e-3; one thread each, side by side; `python train.py --config configs/tasks.yaml "
        "run.seed=7 run.out_dir=runs/recipe-search run.name=nope-lr1e-2-s7 model.position.type=nope train.max_steps=8000 "
        "train.lr=1e-2 train.min_lr=1e-3`, or `model.d_model=128`). Zoology tunes "
        "both for every model on MQAR: the configs of its figure 2 sweep the lr from 1e-4 to 1e-2 and d_model from 64 to "
        "512 (Arora et al., arXiv 2312.04927; `zoology/experiments/paper_configs/iclr24_zoology_figure2/configs.py` in "
        "HazyResearch/zoology), for attention with learned absolute positions, not NoPE.",
        f"A validation reading is {q.sequences} sequences a task, so two readings are told apart only where their 95% "
        f"intervals over those sequences do not overlap (±{50 * (interval(0.5, q.sequences)[1] - interval(0.5, q.sequences)[0]):.0f} "
        "points at 50%).",
        claim(all(q.apart(fs[x], fb[x]) for x in ("copy", "passkey")) and q.apart(fx["copy"], ff["copy"])
              and first_learned(q, base, "copy") is None,
              f"With lr 1e-3 NoPE learned less than with 3e-3 (`copy` {pct(fs['copy'])}% and `passkey` "
              f"{pct(fs['passkey'])}%, against {pct(fb['copy'])}% and {pct(fb['passkey'])}%); with 1e-2 it learned "
              f"`copy` from step {number(first_learned(q, fast, 'copy'))} ({pct(ff['copy'])}% at 8,000) and `passkey` "
              f"from step {number(first_learned(q, fast, 'passkey'))}, where 3e-3 had left `copy` at {pct(fb['copy'])}% "
              f"(and {pct(f(49)['copy'])}% after 12,000 steps, row 49); with 3e-2 `copy` fell back to "
              f"{pct(fx['copy'])}%."),
        claim(all(fw[x] <= fb[x] and not q.apart(fw[x], fb[x]) for x in INDUCTION),
              f"d 128 learned no more than d 64 (`copy` {pct(fw['copy'])}%, `passkey` {pct(fw['passkey'])}%: within "
              f"row {base}'s intervals)."),
        claim(most <= fb["recall"] and q.never_learned((slow, fast, wide, faster), ("recall",)),
              f"`recall` ended at {'%, '.join(ends[:-1])}% and {ends[-1]}%, {pct(most)}% at most at any step, no higher "
              f"than row {base}'s {pct(fb['recall'])}%: neither a learning rate nor width is a recipe for NoPE's "
              "`recall`."))

    shown = (67, 68, 69)
    rows = [f(r) for r in shown]
    start_token_clock = q.minutes([shown[1]])
    most = at_most(q, shown, "recall")
    positions = paragraph(
        f"**Positions for NoPE** (rows {shown[0]}-{shown[-1]}, seed 7 with four layers and 8,000 steps as in row {base}). "
        "NoPE answers `recall` like a solver that knows which "
        "values the facts hold but not which key holds each ([Where the heads look](#where-the-heads-look)); binding a "
        "value to the key just before it takes telling neighbouring positions apart, which NoPE can only infer. Three "
        f"ways to make that easier: half the length (row {shown[0]}, `model.max_seq_len=64`: half the positions to tell "
        f"apart), a start token before every sequence (row {shown[1]}, `data.start_token=true data.vocab_size=163`: each "
        "sequence one token right behind a token of its own, id 162; a head attending evenly over the prefix gives a "
        "fixed first token the share 1/(t+1) at position t, from which a later layer can read t"
        + (f"; {start_token_clock}, beside another run" if start_token_clock else "") + ") "
        f"and eight heads of 8 instead of four of 16 (row {shown[2]}, `model.n_heads=8 model.n_kv_heads=8`).",
        claim(all(r[x] >= 0.9 for r in rows for x in ("copy", "passkey", *SINGLE_HOP))
              and q.never_learned(shown, ("recall",)) and fb["copy"] < 0.9,
              f"Each learned `copy` ({per_seed(r['copy'] for r in rows)}, where row {base} left {pct(fb['copy'])}%), "
              f"`passkey` and both single-hop tasks, and none `recall`: {per_seed(r['recall'] for r in rows)} at step "
              f"8,000, {pct(most)}% at most at any step. Shorter sequences, a start token and more heads are not a "
              "recipe for NoPE's `recall` either."))

    curr = (73, 74)
    curriculum_clock = q.minutes(curr)
    most = at_most(q, curr, "recall")
    curriculum = paragraph(
        f"**A curriculum over distance for NoPE** (rows {curr[0]}-{curr[1]}, seed 7 as row {base}, 8,000 steps"
        + (f"; {curriculum_clock}, each beside another run" if curriculum_clock else "")
        + "): of the remedies the track was asked to try "
        "(models per task, a curriculum over distance, more heads or width, a longer schedule, a learning-rate sweep), the "
        "one no NoPE run had tried. `data.curriculum=[32, 4000]` places every training fact within 32 tokens of the "
        "token that asks for it at step 0, a bound growing linearly to the whole sequence by step 4,000 (validation as "
        "always, facts anywhere), at lr 3e-3 and 1e-2 (`train.lr=1e-2 train.min_lr=1e-3`).",
        claim(q.never_learned(curr, ("recall",)) and all(f(r)[x] >= 0.9 for r in curr for x in SINGLE_HOP),
              f"`recall` ended at {per_seed(f(r)['recall'] for r in curr)} ({pct(most)}% at most at any step), `copy` "
              f"at {per_seed(f(r)['copy'] for r in curr)}: near facts first do not teach NoPE to bind a key to its "
              "value either."))
    return "\n\n".join([after, rate, positions, curriculum])


def fewer_steps(reports: Path) -> str:
    """"Fewer steps at a higher learning rate": ALiBi with 8,000 steps at lr 1e-2 (rows 70-72)."""
    q = Search(reports / "tasks" / "recipe-search")
    f = q.final
    ten, eleven, thirteen = 70, 71, 72
    committed = {run_of(q, r)[1]: r for r in range(51, 61) if run_of(q, r)[0] == "alibi"}
    eight_k = 47  # seed 10 with 8,000 steps at 3e-3
    return paragraph(
        f"**Fewer steps at a higher learning rate** (rows {ten}-{thirteen}: ALiBi, the encoding that learned last, with "
        "8,000 steps at lr 1e-2 decayed to 1e-3, `train.max_steps=8000 train.lr=1e-2 train.min_lr=1e-3`).",
        claim(learned_from(q, ten) == q.table[ten]["step"] and first_learned(q, eight_k, "recall1") is None
              and learned_from(q, eleven) < learned_from(q, committed[11])
              and q.never_learned((thirteen,), ("recall", "recall1")),
              f"On seed 10, where 8,000 steps at 3e-3 left `recall1` at {pct(f(eight_k)['recall1'])}% (row {eight_k}), "
              f"it learned all five tasks at its last step (`recall1` {pct(f(ten)['recall1'])}%); on seed 11 from step "
              f"{number(learned_from(q, eleven))}, where the committed recipe took to step "
              f"{number(learned_from(q, committed[11]))}; on seed 13 it left `recall` at {pct(f(thirteen)['recall'])}% "
              f"and `recall1` at {pct(f(thirteen)['recall1'])}% ({pct(at_most(q, (thirteen,), 'recall1'))}% at most), "
              f"where the committed recipe learned both by step {number(learned_from(q, committed[13]))}. A higher "
              "learning rate does not carry ALiBi through 8,000 steps on every seed, so the recipe stays at 12,000 "
              "steps and a seed over the budget."))


def recipe(reports: Path) -> str:
    """"The recipe": configs/tasks.yaml and the fine-tunes' configs/extend-4x-tasks.yaml, as data/tasks.py draws."""
    root = reports.parent
    cfg, extend = (load_config(Config, root / "configs" / name) for name in ("tasks.yaml", "extend-4x-tasks.yaml"))
    m, t, e = cfg.model, cfg.train, extend.model
    drawn = dict(part.split("*") if "*" in part else (part, "1") for part in cfg.data.source.split(":")[1].split(","))
    (often,) = [name for name, k in drawn.items() if k != "1"]
    times = {2: "twice", 3: "three times", 4: "four times"}[int(drawn[often])]
    grouped = "no grouped KV" if m.n_kv_heads == m.n_heads else f"{m.n_kv_heads} KV heads"
    decay = "a cosine decay" if t.decay_steps in (None, t.max_steps) else f"a cosine decay over {number(t.decay_steps)}"
    factor = e.position.scaling.factor
    return paragraph(
        "One recipe for every encoding, `configs/tasks.yaml` (rows 50-60 below): "
        f"d {m.d_model}, {m.n_layers} layers of {m.n_heads} heads ({m.d_model // m.n_heads} dimensions each, {grouped}), "
        f"L = {m.max_seq_len}, a mix of the {WORDS[len(drawn)]} tasks with `{often}` drawn {times} as often as each other "
        f"(`data.source: {cfg.data.source}`), {number(t.max_steps)} steps of {t.batch_size * t.grad_accum} sequences, "
        f"lr {rate(t.lr)} with warmup {t.warmup_steps} and {decay} to {rate(t.min_lr)}. The filler is not uniform noise: each "
        "filler token continues the one two back (the next symbol) with probability "
        f"{FOLLOW:g}, and training predicts one filler token in {WORDS[round(1 / FILLER_TARGETS)]} "
        "beside the answers (validation and `eval.tasks` score the answers only). Predicting that filler needs the token "
        "before the current one, which is what makes a previous-token head worth forming: text has such local structure, "
        f"uniform noise has none. `configs/extend-4x-tasks.yaml` continues the RoPE run {extend.train.max_steps} steps "
        f"at {e.max_seq_len} tokens with PI (s = {factor:g}), YaRN (s = {factor:g}), or no scaling (the control).")


def seeds_intro(reports: Path) -> str:
    """"The track's seeds": the commands, what they train and how many sequences a cell holds."""
    t = track(reports / "tasks")
    (per_band,) = {r["samples"] for r in t.rows}
    multiples = sorted({r["multiple"] for r in t.rows})
    first, *rest = t.seeds
    return paragraph(
        f"`make -j2 extrapolation-tasks THREADS=1 SEED_NUMBERS={first}`, then `SEED_NUMBERS={rest[0]} RESUME=1` and so "
        f"on to `SEED_NUMBERS={rest[-1]} RESUME=1`: RoPE, ALiBi and NoPE trained with the recipe, RoPE continued at 4x L "
        f"with PI, YaRN and no scaling, all evaluated at {multiples[0]:g}x-{multiples[-1]:g}x L by `eval.tasks` with "
        f"{per_band} sequences per task, length and distance band ([results.md](results.md), "
        "[accuracy_vs_length.png](accuracy_vs_length.png), [accuracy_vs_distance.png](accuracy_vs_distance.png), "
        "[training.png](training.png): every run's validation curves). These tables by length and by distance are each "
        "run's probe of context use: the text study's `eval.probe` reads text, which these models have no tokens for. "
        f"A cell of {per_band} sequences moves by several points from one draw to the next.",
        claim({s for r, s, _ in t.learned if r == "t5"} == set(t.seeds),
              "T5 was trained apart, on every seed (`make -j2 extrapolation-tasks THREADS=1 SEED_NUMBERS="
              f"\"{' '.join(map(str, t.seeds))}\" TASK_ENCODINGS=t5 TASK_RUNS=t5 RESUME=1`; 14 and 15 after this page's "
              "sentences about T5 were written, to test them)."))


ADDED = {"kerple": "KERPLE", "fire": "FIRE", "sinusoidal": "sinusoidal", "learned": "learned", "fox": "FoX",
         "rope-half": "RoPE, half of each head rotated", "p-rope": "p-RoPE (p = 0.75)",
         "rnope-swa": "RNoPE-SWA (3 RoPE layers over L/4, 1 NoPE)", "rope-pose": "RoPE, PoSE to 4x L",
         "rope-randomized": "RoPE, randomized positions (< 16x L)", "alibi-randomized": "ALiBi, randomized positions",
         "drope": "DroPE (RoPE's weights, positions dropped, recalibrated)"}  # make extrapolation-tasks-added's runs
SHORT = ADDED | {"rope-half": "half-rotated RoPE", "p-rope": "p-RoPE", "rnope-swa": "RNoPE-SWA",
                 "rope-pose": "RoPE with PoSE", "rope-randomized": "RoPE with randomized positions",
                 "alibi-randomized": "ALiBi with randomized positions", "drope": "DroPE"}  # README.md's names


def label_of(t: Track, run: str) -> str:
    """A run's own curve: unscaled, or a fine-tune's (continued runs are named '... (fine-tuned)')."""
    return FINE_TUNED.get(run) or ("none (fine-tuned)" if any(r["run"] == run and r["scaling"] == "none (fine-tuned)"
                                                              for r in t.rows) else "none")


def named(runs: list[str]) -> str:
    return listed(runs) if runs else "none of them"


def added_lists(t: Track, present: list[str], names: dict[str, str] = ADDED) -> tuple[list[str], list[str]]:
    """The added methods, by name, that learned all five tasks at L on every seed they ran, and that kept the induction
    tasks at 50% or more at 16x L on every seed they ran."""
    x16 = 16 * t.L
    return ([names[r] for r in present if all(t.learned.get((r, s, task), False) for task in TASKS for s in t.ran[r])],
            [names[r] for r in present if all((t.pooled.get((r, s, task, label_of(t, r), x16)) or 0) >= 0.5
                                              for task in INDUCTION for s in t.ran[r])])


def added_present(t: Track) -> tuple[list[str], list[int]]:
    """The added methods with rows on the track, and the seeds any of them ran."""
    present = [run for run in ADDED if any(r["run"] == run for r in t.rows)]
    return present, sorted({r["seed"] for r in t.rows if r["run"] in present})


def every_method(reports: Path) -> str:
    """"Every method on the track": each other encoding, RoPE variant, position schedule and DroPE on the seeds they
    ran, beside RoPE (unscaled and with training-free YaRN), ALiBi, NoPE and T5 on the same seeds."""
    t = track(reports / "tasks")
    present, seeds = added_present(t)
    if not present:
        return paragraph("Not measured yet: `make extrapolation-tasks-added SEED_NUMBERS=\"11 12 13\"` trains and "
                         "evaluates them.")
    x16 = 16 * t.L
    shown = [("rope", "none", "RoPE"), ("rope", SCALED["yarn"], "RoPE + YaRN (training-free)"), ("alibi", "none", "ALiBi"),
             ("nope", "none", "NoPE"), ("t5", "none", "T5")] + [(run, label_of(t, run), ADDED[run]) for run in present]

    def at(run, label, task, n, s):
        return t.pooled.get((run, s, task, label, n))

    def cell(run, label, task, n):
        values = [at(run, label, task, n, s) if s in t.ran[run] else "-" for s in seeds]
        return "n/a" if None in values else " / ".join(v if v == "-" else pct(v) for v in values)

    def missed(run):
        lost = {task: [s for s in seeds if s in t.ran[run] and not t.learned.get((run, s, task), False)]
                for task in TASKS}
        return "; ".join(f"`{task}` ({', '.join(map(str, ss))})" for task, ss in lost.items() if ss) or "none"
    partial = any(t.ran[run] != seeds for run in present)
    lines = ["| run | not learned at L (seeds) | " + " | ".join(f"`{task}` at 16x" for task in TASKS) + " |",
             "|---|---|" + "---:|" * len(TASKS)]
    for run, label, name in shown:
        lines.append(f"| {name} | {missed(run) if label == label_of(t, run) else ''} | "
                     + " | ".join(cell(run, label, task, x16) for task in TASKS) + " |")
    learned_all, kept = added_lists(t, present)
    # why a run has no cell past L: its rows' note ("learned positions stop at 127")
    stops = sorted({r["note"] for r in t.rows if r["run"] in present and r["length"] == x16 and r.get("note")})
    intro = paragraph(
        f"`make extrapolation-tasks-added SEED_NUMBERS=\"{' '.join(map(str, seeds))}\"` trains the other methods with "
        "the committed recipe and evaluates them as the track's runs: each cell below is the accuracy (%) at 16x L "
        f"({number(x16)} tokens, every distance band pooled) of {seeds_named(seeds)}"
        f"{', in that order,' if len(seeds) > 1 else ','} "
        "and the second column the tasks a run left below 90% at the length it was trained at (†: its rows past L "
        "say nothing about extrapolation)" + (f"; n/a where a run cannot be measured there ({'; '.join(stops)})"
                                              if stops else "")
        + ("; - where a run has not been trained on that seed yet" if partial else "")
        + ". Every row, length and band, with intervals: [results.md](results.md).")
    every = "every seed it ran" if partial else "every one of these seeds" if len(seeds) > 1 else seeds_named(seeds)
    said = paragraph(
        f"Learned all five tasks at L on {every}: {named(learned_all)}.",
        f"Kept `copy`, `recall` and `passkey` at 50% or more at 16x L on "
        f"{'every seed it ran' if partial else 'every seed' if len(seeds) > 1 else seeds_named(seeds)}: {named(kept)}.")
    parts = [intro, "\n".join(lines), said]
    unlearned = [SHORT[r] for r in present if r.endswith("-randomized") and ADDED[r] not in learned_all]
    if unlearned:  # make/study.mk's RANDOMIZED: positions over [0, 16L), every length the track measures
        parts.append(paragraph(
            f"{listed(unlearned)} {'is' if len(unlearned) == 1 else 'are'} trained on positions drawn at random from "
            f"[0, {number(x16)}) and sorted, so neighbouring tokens sit about {x16 // t.L} positions apart, while "
            "validation and every evaluation here give contiguous positions, which such a run is hardly ever shown: "
            "at L it reads neighbours one position apart, a spacing it rarely met. The text study found the same of "
            "its randomized runs (training loss on their own positions close to RoPE's, validation on contiguous "
            "positions far behind: [Training positions](../extrapolation/README.md#training-positions-three-seeds)). "
            "The paper's own code draws the positions anew in every forward pass, evaluation included "
            "(google-deepmind/randomized_positional_encodings: models/transformer.py draws them in the forward pass, "
            "experiments/range_evaluation.py passes a new random key for each test batch); the rows above do not: "
            "each run is evaluated on the positions 0, 1, 2, ... of its tokens."))
    randomized = [r for r in present if r.endswith("-randomized")]
    if randomized:
        parts.append(drawn_positions(reports, t, randomized))
    if "drope" in present:
        parts.append(drope_against_yarn(reports, t, seeds))
    return "\n\n".join(parts)


def drawn_positions(reports: Path, t: Track, runs: list[str]) -> str:
    """The randomized runs measured as their paper's code measures them (reports/tasks/drawn: eval.tasks
    --drawn-positions) beside the track's contiguous positions: each task at every length, the tasks learned at L that
    way, and the tasks at L on which the two protocols' 95% intervals over sequences are apart in every seed."""
    folder = reports / "tasks" / "drawn"
    if not (folder / RESULTS).exists():
        return paragraph("Not measured yet with the positions drawn at evaluation: `make task-drawn SEED_NUMBERS=...`.")
    d = track(folder)
    x16 = 16 * t.L
    runs = [r for r in runs if r in d.ran]
    seeds = {r: d.ran[r] for r in runs}
    lengths = d.lengths

    def cell(run, task, n):
        drawn = " / ".join(pct(d.pooled[(run, s, task, DRAWN, n)]) for s in seeds[run])
        return f"{drawn} ({' / '.join(pct(t.pooled[(run, s, task, 'none', n)]) for s in seeds[run])})"
    lines = ["| run | task | " + " | ".join(f"{n // t.L}x L" for n in lengths) + " | 16x L (the same) |",
             "|---|---|" + "---:|" * (len(lengths) + 1)]
    for run in runs:
        for task in TASKS:
            same = " / ".join(pct(t.pooled[(run, s, task, "none", x16)]) for s in seeds[run])
            lines.append(f"| {SHORT[run]} | `{task}` | " + " | ".join(cell(run, task, n) for n in lengths)
                         + f" | {same} |")

    def apart(run, task):
        """1: drawn above contiguous at L in every seed, -1: below in every seed, 0: otherwise (95% intervals)."""
        sides = set()
        for s in seeds[run]:
            n = d.sequences[(run, s, task, t.L)]
            (lo_d, hi_d), (lo_c, hi_c) = (interval(d.pooled[(run, s, task, DRAWN, t.L)], n),
                                          interval(t.pooled[(run, s, task, "none", t.L)], n))
            sides.add(1 if lo_d > hi_c else -1 if hi_d < lo_c else 0)
        return sides.pop() if len(sides) == 1 else 0
    unlearned = {r: [f"`{task}`" for task in TASKS if not all(d.learned.get((r, s, task), False) for s in seeds[r])]
                 for r in runs}
    learned_drawn = [SHORT[r] for r in runs if not unlearned[r]]
    measured = sorted({s for r in runs for s in seeds[r]})
    sentences = [
        f"Measured as that code measures, each sequence of n tokens given n positions drawn from [0, {number(x16)}) and "
        "sorted (a fixed draw per sequence, the same for every run; "
        f"`make task-drawn SEED_NUMBERS=\"{' '.join(map(str, measured))}\"`, "
        "`eval.tasks --drawn-positions`: [drawn/results.md](drawn/results.md)), each cell below is the accuracy (%) "
        "with drawn positions, then in brackets with the track's contiguous ones, seed by seed; at 16x L the draw is "
        "every position, so the two are one measurement there.",
        f"With drawn positions, {named(learned_drawn)} learned all five tasks at L on "
        f"{'every seed measured' if len(measured) > 1 else seeds_named(measured)}."]
    sentences += [f"{SHORT[r]} leaves {listed(unlearned[r])} below 90% at L even so, on positions drawn as it was "
                  "trained: it had not learned them on its own positions either." for r in runs if unlearned[r]]
    for run in runs:
        above = [f"`{task}`" for task in TASKS if apart(run, task) == 1]
        below = [f"`{task}`" for task in TASKS if apart(run, task) == -1]
        sentences.append(f"{SHORT[run]} at L, drawn against contiguous (95% intervals over sequences apart in "
                         f"{'every seed' if len(seeds[run]) > 1 else seeds_named(seeds[run])}): above on "
                         f"{listed(above) if above else 'no task'}, below on {listed(below) if below else 'no task'}.")
    return paragraph(*sentences[:1]) + "\n\n" + "\n".join(lines) + "\n\n" + paragraph(*sentences[1:])


def drope_sides(t: Track, seeds: list[int]) -> tuple[list[str], list[str], list[str]]:
    """The tasks on which DroPE is above training-free YaRN at 16x L in every seed (95% intervals over sequences
    apart), below it, and the rest."""
    x16, label = 16 * t.L, label_of(t, "drope")
    seeds = drope_seeds(t, seeds)

    def side(task, s):
        """1: DroPE above YaRN, -1: below, 0: their intervals overlap."""
        d, y = t.pooled[("drope", s, task, label, x16)], t.pooled[("rope", s, task, SCALED["yarn"], x16)]
        n = t.sequences[("drope", s, task, x16)]
        (lo_d, hi_d), (lo_y, hi_y) = interval(d, n), interval(y, n)
        return 1 if lo_d > hi_y else -1 if hi_d < lo_y else 0
    sides = {task: {side(task, s) for s in seeds} for task in TASKS}
    return ([f"`{task}`" for task, v in sides.items() if v == {1}], [f"`{task}`" for task, v in sides.items() if v == {-1}],
            [f"`{task}`" for task, v in sides.items() if v not in ({1}, {-1})])


def against_own_base(reports: Path, t: Track, seeds: list[int]) -> str:
    """DroPE against training-free YaRN on the very RoPE run it continued, where that run's rows are committed
    (reproduction/rope-seedN): the tasks on which it is above or below at 16x L, 95% intervals over sequences apart."""
    x16, label, yarn = 16 * t.L, label_of(t, "drope"), SCALED["yarn"]
    said = []
    for s in seeds:
        path = reports / "tasks" / "reproduction" / f"rope-seed{s}" / "results.json.gz"
        if not path.exists():
            continue
        base = pooled(previous_rows(path, "eval.tasks", "accuracy"))
        sides = {}
        for task in TASKS:
            n = t.sequences[("drope", s, task, x16)]
            (lo_d, hi_d), (lo_y, hi_y) = (interval(t.pooled[("drope", s, task, label, x16)], n),
                                          interval(base[("rope", s, task, yarn, x16)], n))
            sides[task] = "above" if lo_d > hi_y else "below" if hi_d < lo_y else "level"
        parts = [f"{side} on {listed([f'`{k}`' for k, v in sides.items() if v == side])}"
                 for side in ("above", "below", "level") if side in sides.values()]
        said.append(f"Against training-free YaRN on the very run it continued (seed {s}; YaRN there at 16x L: "
                    + ", ".join(f"`{k}` {pct(base[('rope', s, k, yarn, x16)])}%" for k in TASKS)
                    + f"), DroPE is {listed(parts)}.")
    return " ".join(said)


def drope_unlearned(t: Track, seeds: list[int]) -> list[str]:
    """The tasks DroPE's recalibration leaves below 90% at L in at least one of `seeds` (named `task`)."""
    return [f"`{task}`" for task in TASKS if any(not t.learned.get(("drope", s, task), False)
                                                 for s in drope_seeds(t, seeds))]


def drope_seeds(t: Track, seeds: list[int]) -> list[int]:
    """Those of `seeds` with a DroPE run measured at 16x L."""
    return [s for s in seeds if ("drope", s, TASKS[0], label_of(t, "drope"), 16 * t.L) in t.pooled]


def recalibration_curve(t: Track, seeds: list[int], tasks: list[str]) -> str:
    """DroPE's validation accuracy at L at each evaluation of its recalibration (the mean over seeds) on `tasks`
    (named `task`), and whether it was still rising on each of them when the recalibration stopped."""
    if not tasks:
        return ""
    curves = {}
    for task in tasks:
        by_step = {}
        for r in t.training:
            if (r["run"], r["task"]) == ("drope", task.strip("`")) and r["seed"] in seeds:
                by_step.setdefault(r["step"], []).append(r["accuracy"])
        curves[task] = {step: statistics.fmean(v) for step, v in sorted(by_step.items())}
    steps = sorted({step for c in curves.values() for step in c})
    if len(steps) < 2:
        return ""
    rising = all(list(c.values())[-1] > list(c.values())[-2] for c in curves.values())
    when = "was still rising on each of them when the recalibration stopped" if rising else "during the recalibration"
    return (f"Its validation accuracy at L {when} "
            f"({'the mean over ' if len(seeds) > 1 else ''}{seeds_named(seeds)}, at steps "
            f"{listed([number(s) for s in steps])}): "
            + "; ".join(f"{task} {listed([pct(a) + '%' for a in c.values()])}" for task, c in curves.items()) + ".")


def drope_against_yarn(reports: Path, t: Track, seeds: list[int]) -> str:
    """DroPE's claim (arXiv 2512.12167, abstract: past the training context it far outperforms RoPE's scalings) put
    to the track: DroPE against training-free YaRN on the same seeds' RoPE runs at 16x L, told apart only where the
    95% intervals over sequences do not overlap; and what its recalibration cost."""
    seeds = drope_seeds(t, seeds)
    above, below, rest = drope_sides(t, seeds)
    short = drope_unlearned(t, seeds)
    study = (reports.parent / "make" / "study.mk").read_text()
    overrides = re.search(r"^ARGS_drope := (.+)$", study, re.M)[1].split()
    cfg = load_config(Config, reports.parent / "configs" / "extend-4x-tasks.yaml", overrides)
    base = load_config(Config, reports.parent / "configs" / "tasks.yaml")
    fine_tune = load_config(Config, reports.parent / "configs" / "extend-4x-tasks.yaml")
    tokens = cfg.train.max_steps * cfg.train.batch_size * cfg.model.max_seq_len
    base_tokens = base.train.max_steps * base.train.batch_size * base.model.max_seq_len
    return paragraph(
        "**DroPE's claim, put to the track.** Its paper recalibrates RoPE models without positions and reports them far "
        "ahead of RoPE's scalings past the training context (arXiv 2512.12167, abstract). Here, against training-free "
        f"YaRN on the same seeds' RoPE runs at 16x L, the two told apart only where their 95% intervals over sequences "
        f"do not overlap in every seed: DroPE is above on {listed(above) if above else 'no task'}, below on "
        f"{listed(below) if below else 'no task'}, and level or mixed across seeds on {listed(rest) if rest else 'no task'}.",
        f"The recalibration leaves {listed(short)} below 90% at L itself in at least one seed, so there the gap is "
        "already at L, not past it." if short else "DroPE keeps every task at 90% or more at L in every seed.",
        recalibration_curve(t, seeds, short),
        "Each DroPE run continues its seed's RoPE run trained again for it (run folders are not committed): the same "
        "recipe and seed as the RoPE rows it is compared with, not the same weights (\"Not the same run on another "
        "machine\" below).",
        against_own_base(reports, t, seeds),
        f"Its recalibration is {number(cfg.train.max_steps)} steps of {cfg.train.batch_size} x {cfg.model.max_seq_len} "
        f"tokens ({number(tokens)} tokens, {100 * tokens / base_tokens:.1f}% of the RoPE run's {number(base_tokens)}), at "
        "L, added to its budget;",
        claim(fine_tune.train.max_steps * fine_tune.train.batch_size * fine_tune.model.max_seq_len == tokens,
              "the 4x fine-tunes train as many tokens at 4x L."))


def readme_summary(reports: Path) -> str:
    """README.md's paragraph on the track: what every seed learned, how far each encoding reads, and the methods."""
    t = track(reports / "tasks")
    L, seeds, x16 = t.L, t.seeds, 16 * t.L
    config = load_config(Config, reports.parent / "configs" / "tasks.yaml")
    recall = [t.acc("nope", "recall", L, s) for s in seeds]
    yarn = [t.acc("rope", task, x16, s, SCALED["yarn"]) for task in TASKS for s in seeds]
    again = pooled(previous_rows(reports / "tasks" / "reproduction" / "rope-seed11" / "results.json.gz", "eval.tasks",
                                 "accuracy"))
    again_copy = again[("rope", 11, "copy", SCALED["yarn"], x16)]
    unscaled = max(t.acc("rope", task, x16, s) for task in INDUCTION for s in seeds)
    copy = {run: [t.acc(run, "copy", x16, s) for s in seeds] for run in ("alibi", "nope", "t5")}
    (t5_best,) = [s for s in seeds if t.acc("t5", "copy", x16, s) == max(copy["t5"])]
    t5_rest = [v for s, v in zip(seeds, copy["t5"]) if s != t5_best]
    near, near_acc = anchor_rows(reports / "tasks", "window64")
    hidden = {run: [near_acc[(run, "copy", s)] for s in seeds] for run in ("rope", "alibi")}
    c = {m: Context(reports / "tasks", m) for m in ("self-extend", "leaky-rerope", "dca", "sinks", "logn")}
    keep_alibi = all(c[m].acc("alibi", task, x16, s) >= t.acc("alibi", task, L, s) - 0.12
                     for m in ("self-extend", "leaky-rerope") for task in INDUCTION for s in c[m].seeds)
    break_rope = all(c[m].acc("rope", "copy", L, s) < 0.7 for m in ("self-extend", "leaky-rerope") for s in c[m].seeds)
    dca_keeps = [s for s in c["dca"].seeds if min(c["dca"].lengths("rope", "recall", s)) >= 0.5]
    past = [n for n in t.lengths if n > L]
    sinks_far = max(a for run in ("rope", "alibi") for task in INDUCTION for s in c["sinks"].seeds for n in past
                    for a in c["sinks"].bands(run, task, n, s)[1:])
    logn_ways, logn_apart = logn_on_alibi(t, c["logn"])
    return paragraph(
        f"**Seeds {seeds[0]}-{seeds[-1]}** ([report](reports/tasks/README.md#the-tracks-seeds); "
        f"{WORDS[config.model.n_layers]} layers, {number(config.train.max_steps)} steps; seed {seeds[-1]} trained after "
        "the report's sentences, to test them):",
        claim(all(t.learned_at_L(run, s) == set(TASKS) for run in ("rope", "alibi") for s in seeds)
              and all(t.learned_at_L("nope", s) == set(TASKS) - {"recall"} for s in seeds),
              "RoPE and ALiBi learned all five tasks at L in every seed, NoPE all but `recall` "
              f"({pct_span(recall)}; it forms no induction head for it and answers from the values a sequence holds, not "
              "which key holds which)."),
        claim(min(yarn) >= 0.5 > unscaled,
              f"Over these {WORDS[len(seeds)]} seeds, at 16x L training-free YaRN keeps RoPE at {pct(min(yarn))}% or "
              f"more on every task (seed 11 trained again: `copy` {pct(again_copy)}%, "
              "[why](reports/tasks/README.md#runs-trained-again)), where unscaled RoPE falls to "
              f"{pct(unscaled)}% or less on `copy`, `recall` and `passkey`;"),
        f"ALiBi keeps `copy` at {pct_span(copy['alibi'])}, NoPE at {pct_span(copy['nope'])}, T5 at {pct_span(t5_rest)} "
        f"({pct(max(copy['t5']))}% on seed {t5_best}).",
        claim(max(hidden["rope"]) < min(hidden["alibi"]),
              f"With keys {near['window']} or more back hidden, RoPE's `copy` at L falls to {pct_span(hidden['rope'])}, "
              f"ALiBi's to {pct_span(hidden['alibi'])}."),
        "[Context methods](reports/tasks/README.md#training-free-context-methods):",
        claim(keep_alibi and break_rope,
              "Self-Extend and Leaky ReRoPE keep ALiBi's retrieval to 16x L and break RoPE's at L;"),
        f"DCA keeps RoPE's `recall` to 16x on {WORDS.get(len(dca_keeps), 'one')} seeds of "
        f"{WORDS[len(c['dca'].seeds)]};",
        claim(sinks_far <= 0.12, "sinks read nothing past their window;"),
        claim(logn_ways == {True, False} and len(logn_apart) <= 1,
              "log-n moves ALiBi's retrieval both ways, mostly within the noise."),
        added_sentence(t))


def added_sentence(t: Track) -> str:
    """README.md's sentence on the other methods of the track, once their rows are in ('' before)."""
    present, seeds = added_present(t)
    if not present:
        return ""
    learned_all, kept = added_lists(t, present, SHORT)
    drope = ""
    if "drope" in present:
        above, below, _ = drope_sides(t, seeds)
        drope = (f"; DroPE against training-free YaRN at 16x (intervals apart in every seed): above on "
                 f"{listed(above) if above else 'no task'}, below on {listed(below) if below else 'no task'}"
                 + (", not relearned at L" if below and set(below) <= set(drope_unlearned(t, seeds)) else ""))
    so_far = f"{len(present)} of the {len(ADDED)} so far, " if len(present) < len(ADDED) else ""
    full = [s for s in seeds if all(s in t.ran[r] for r in present)]  # the seeds every method ran; then the others
    every = " in every seed" if len(seeds) > 1 else ""
    where = "; ".join(([seeds_named(full)] if full else [])
                      + [f"seed {s} for {sum(s in t.ran[r] for r in present)}" for s in seeds if s not in full])
    return (f"[Every other method](reports/tasks/README.md#every-method-on-the-track) ({so_far}{where}): "
            f"all five tasks learned at L{every} by {named(learned_all)}; `copy`, `recall` and `passkey` kept at 50% or "
            f"more at 16x{every} by {named(kept)}{drope}.")


def retrained(reports: Path) -> str:
    """RoPE's seed-11 run trained again in a later session (reproduction/rope-seed11: its eval.tasks rows and
    metrics.jsonl) against the committed run of that seed: the validation curve from its first evaluation, what each
    learned at L, and the cells at 16x L unscaled and with training-free YaRN, beside the committed seeds' range."""
    t, folder, seed = track(reports / "tasks"), reports / "tasks" / "reproduction" / "rope-seed11", 11
    rows = previous_rows(folder / "results.json.gz", "eval.tasks", "accuracy")
    again, again_learned = pooled(rows), learned(rows)
    metrics = [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines()]
    first = min(m["step"] for m in metrics if "val_acc_copy" in m)
    (at_first,) = [m for m in metrics if m["step"] == first and "val_acc_copy" in m]
    two = [json.loads(line) for line in (folder / "metrics-2-threads.jsonl").read_text().splitlines()]
    (two_first,) = [m for m in two if m["step"] == first and "val_acc_copy" in m]
    parted = two_first["threads"] == 2 and any(two_first[k] != at_first[k] for k in at_first if k.startswith("val_acc"))
    x16, yarn, retrieval = 16 * t.L, SCALED["yarn"], ["copy", "recall", "passkey"]
    both_learned = all(t.learned.get(("rope", seed, task)) and again_learned.get(("rope", seed, task))
                       for task in TASKS)
    now = {task: again[("rope", seed, task, yarn, x16)] for task in TASKS}
    then = {task: t.acc("rope", task, x16, seed, yarn) for task in TASKS}
    copies = [t.acc("rope", "copy", x16, s, yarn) for s in t.seeds]
    return paragraph(
        f"**Not the same run on another machine.** RoPE's run of seed {seed} was trained again in a later session (one "
        "thread, the recipe above, for DroPE to continue; its rows and `metrics.jsonl` are in "
        "[reproduction/rope-seed11](reproduction/rope-seed11)).",
        claim(at_first["val_acc_copy"] != t.curve("rope", seed, "copy")[first],
              f"Its validation accuracy differs from the committed run's from the first evaluation on (step "
              f"{number(first)}, `copy` {pct(at_first['val_acc_copy'])}% against "
              f"{pct(t.curve('rope', seed, 'copy')[first])}%)."),
        claim(parted, f"Float rounding is what differs: it changes with the processor and the number of threads (the "
                      "same run on two threads, its first steps in metrics-2-threads.jsonl, parts from "
                      f"the one-thread run by step {number(first)}), and the committed run's are not recorded (train.py "
                      "logs them since). The two are runs of one recipe and seed, not the same weights."),
        claim(both_learned, "Both learn all five tasks at L."),
        f"At 16x L with training-free YaRN the run trained again keeps {listed([f'`{k}` {pct(now[k])}%' for k in retrieval])}"
        f", the committed run {listed([f'{pct(then[k])}%' for k in retrieval])};",
        claim(now["copy"] < min(copies),
              f"its `copy` is below that of every committed seed ({pct(min(copies))}-{pct(max(copies))}%), so a cell past "
              "L is a property of a trained run as much as of its recipe and seed, and the track's \"every seed\" "
              "sentences speak of the committed runs.") if now["copy"] < min(copies) else
        f"its `copy` lies within the committed seeds' {pct(min(copies))}-{pct(max(copies))}%.")


# {page, from the checkout's root: {block name: its rendering from the reports folder}} (render.reports merges these)
BLOCKS: dict[str, dict[str, Callable[[Path], str]]] = {"README.md": {"track-summary": readme_summary},
                                                       "reports/tasks/README.md": {"every-method": every_method, "seeds-show": seeds_show, "heads": where_heads_look,
                                                       "context": context_intro, "self-extend": self_extend, "rerope": rerope,
                                                       "leaky-rerope": leaky_rerope, "dca": dca, "sinks": sinks, "logn": logn,
                                                       "seed-16": seed_16, "anchor": anchor, "kazemnejad": beside_kazemnejad,
                                                       "profile": profile, "each-step": each_step,
                                                       "search-status": search_status,
                                                       "search-nope": search_nope, "fewer-steps": fewer_steps, "recipe": recipe,
                                                       "seeds-intro": seeds_intro, "retrained": retrained}}
