"""The page's sections on the training-free context methods (make task-context's rows: context/METHOD/results.json.gz),
run on the track's RoPE and ALiBi models."""
from __future__ import annotations

import json
from pathlib import Path

from data.tasks import TASKS as TASKS_OF
from render.prose import bullet, claim, listed, number, paragraph
from render.rows import previous_rows
from render.tasks import interval, pooled
from render.task_track.track import INDUCTION, SCALED, SINGLE_HOP, Track, WORDS, pct, pct_span, per_seed, points, track


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
