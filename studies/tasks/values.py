"""The task track's tables and named values (studies/tasks/README.md) from the committed eval.tasks rows of this folder.
An accuracy's interval is Wilson's over the sequences it scores; a mean over seeds carries the t interval over seeds."""
from __future__ import annotations

import functools
import json

from config import Config, load_config
from data.tasks import TASKS as SPECS, values_only_level
from eval.results.rows import curve_label, previous_rows
from eval.results.tasks import LEARNED
from studies.report import Study
from studies.stats import mean_interval, wilson
from studies.tables import grid

study = Study(__file__)
TASKS = tuple(SPECS)
INDUCTION = TASKS[:3]  # copy, recall, passkey: read through an induction head
YARN = "yarn (s = length/L)"  # training-free YaRN at s = length / L
FINE_TUNED = {"rope-pi": "linear (fine-tuned)", "rope-yarn": "yarn (fine-tuned)", "rope-continued": "none (fine-tuned)"}
OWN = FINE_TUNED | {"drope": "none (fine-tuned)", "drope-long": "none (fine-tuned)"}  # a continued run's own curve
CONTEXT = ("self-extend", "rerope", "leaky-rerope", "dca", "sinks", "logn")
AGAIN = "rope-again"  # the RoPE runs trained again for DroPE (reproduction/rope-seedN), as a run of the track
ADDED = ("kerple", "fire", "sinusoidal", "learned", "fox", "rope-half", "p-rope", "rnope-swa", "rope-pose",
         "rope-randomized", "alibi-randomized", "drope")  # make extrapolation-tasks-added


def rows(name: str) -> list[dict]:
    return previous_rows(study.folder / name, "eval.tasks", "accuracy")


def cells(found: list[dict], near: bool = False, run: str | None = None) -> dict[tuple, tuple[float, int]]:
    """{(run, seed, task, scaling or context method, length): (accuracy, sequences)} over the bands (near: (0, L])."""
    hits: dict[tuple, list[int]] = {}
    for r in found:
        if r["accuracy"] is not None and not (near and r["distance_lo"] > 0):
            label = r["context"]["type"] if r.get("context") else curve_label(r)
            h = hits.setdefault((run or r["run"], r["seed"], r["task"], label, r["length"]), [0, 0, 0])
            h[0], h[1], h[2] = h[0] + round(r["accuracy"] * r["answers"]), h[1] + r["answers"], h[2] + r["samples"]
    return {k: (a / n, s) for k, (a, n, s) in hits.items()}


@functools.cache
def track() -> dict[tuple, tuple[float, int]]:
    """Every cell of the track, of the runs trained again, of DroPE recalibrated longer and of the context methods."""
    out = cells(rows("results.json.gz")) | cells(rows("drope-long/results.json.gz"))
    for method in CONTEXT:
        out |= cells(rows(f"context/{method}/results.json.gz"))
    for log in sorted((study.folder / "reproduction").glob("rope-seed*/metrics.jsonl")):  # the log is copied last
        out |= cells(rows(f"reproduction/{log.parent.name}/results.json.gz"), run=AGAIN)
    return out


# the facts within L with the keys L/2 or more back hidden (make task-anchor's window64)
anchor = functools.cache(lambda: cells(rows("anchor/window64/results.json.gz"), near=True))
L = min(r["train_length"] for r in rows("results.json.gz"))
X16 = 16 * L


def side(a: tuple[float, int], b: tuple[float, int]) -> int:
    """1 where a is above b with their Wilson intervals apart, -1 where below, 0 where the intervals overlap."""
    (lo_a, hi_a), (lo_b, hi_b) = (wilson(x * n, n) for x, n in (a, b))
    return 1 if lo_a > hi_b else -1 if hi_a < lo_b else 0


def seeds(c: dict, run: str, label: str = "none") -> list[int]:
    return sorted({k[1] for k in c if (k[0], k[3]) == (run, label)})


def at(c: dict, run: str, task: str, length: int, label: str = "none") -> dict[int, tuple[float, int]]:
    """{seed: cell} of one run, task, length and scaling."""
    return {s: c[(run, s, task, label, length)] for s in seeds(c, run, label) if (run, s, task, label, length) in c}


def learned(c: dict, run: str, seed: int) -> set[str]:
    """The tasks a run answers at LEARNED or more at the length it was trained at (4x L for a fine-tune)."""
    length = 4 * L if run in FINE_TUNED else L
    return {t for t in TASKS if c[(run, seed, t, OWN.get(run, "none"), length)][0] >= LEARNED}


def pct(x: float) -> str:
    return f"{100 * x:.0f}"


def span(values) -> str:
    values = sorted(round(100 * v) for v in values)
    return f"{values[0]}%" if values[0] == values[-1] else f"{values[0]}-{values[-1]}%"


def seed_range(ran: list[int]) -> str:
    return f"{ran[0]}-{ran[-1]}"


def with_interval(cell: tuple[float, int]) -> str:
    lo, hi = wilson(cell[0] * cell[1], cell[1])
    return f"{pct(cell[0])} ({pct(lo)}-{pct(hi)})"


def missed(c: dict, run: str) -> str:
    """The tasks a run left below LEARNED at L, each with its seeds."""
    lost = {t: [str(s) for s in seeds(c, run, OWN.get(run, "none")) if t not in learned(c, run, s)] for t in TASKS}
    return "; ".join(f"`{t}` ({', '.join(ss)})" for t, ss in lost.items() if ss) or "none"


def seeds_table(shown: list[tuple[str, str]], columns: list[tuple[str, int]], last: bool = False) -> str:
    """A line per (run, scaling): its seeds, what it missed at L (last) and per (task, length) the mean over seeds."""
    def mean(values):
        m, lo, hi = mean_interval(values) if values else (0, 0, 0)
        return f"{pct(m)} ({pct(max(lo, 0))}-{pct(min(hi, 1))})" if values else "n/a"
    c, lines = track(), []
    for run, label in shown:
        name = run + ("" if label in ("none", OWN.get(run)) else f" + {label.split()[0]}")
        lines.append([name, seed_range(seeds(c, run, label))] + ([missed(c, run)] if last else [])
                     + [mean([v[0] for v in at(c, run, t, n, label).values()]) for t, n in columns])
    return grid(["run", "seeds", *["not learned at L (seeds)"] * last, *[f"{t} at {n // L}x" for t, n in columns]],
                lines)


@study.table
def tasks_table() -> str:
    """The tasks as data/tasks.py registers them, with chance and the values-only solver's level at L."""
    level = {n: values_only_level(n, L) for n in SPECS}
    return grid(["task", "the fact, somewhere in the filler", "the question at the end, answered", "chance",
                 "values only"], [[f"`{n}`", t.fact, t.question, f"{100 * t.chance:.1f}%",
                                   f"{100 * level[n]:.1f}%" if level[n] else ""] for n, t in SPECS.items()], left=3)


@study.table
def recipe() -> str:
    cfg = load_config(Config, study.folder / "tasks.yaml")
    m, t = cfg.model, cfg.train
    return grid(["tasks (`data.source`)", "layers x heads", "d", "L", "steps x sequences", "learning rate, cosine"],
                [[f"`{cfg.data.source}`", f"{m.n_layers} x {m.n_heads}", str(m.d_model), str(m.max_seq_len),
                  f"{t.max_steps:,} x {t.batch_size}", f"{t.lr:g} to {t.min_lr:g}"]])


@study.table
def at_L() -> str:
    """Per run and task: on how many seeds it learned the task at its own length, and its least seed with interval."""
    c, lines = track(), []
    for run in ("rope", AGAIN, "alibi", "nope", "t5", *FINE_TUNED):
        found = [at(c, run, t, 4 * L if run in FINE_TUNED else L, OWN.get(run, "none")) for t in TASKS]
        lines.append([run] + [f"{sum(v[0] >= LEARNED for v in f.values())} of {len(f)}; least "
                              f"{with_interval(min(f.values()))}" for f in found])
    return grid(["run", *TASKS], lines)


@study.table
def drope_table() -> str:
    """DroPE at 16x L against training-free YaRN on the RoPE run it continued, seed by seed."""
    c, words, lines = track(), {1: "above", -1: "below", 0: "level"}, []
    for run in ("drope", "drope-long"):
        for s in seeds(c, run, OWN[run]):
            pairs = [(c[(run, s, t, OWN[run], X16)], c[(AGAIN, s, t, YARN, X16)]) for t in TASKS]
            lines.append([run, str(s)] + [f"{with_interval(a)} / {with_interval(b)}, {words[side(a, b)]}"
                                          for a, b in pairs])
    return grid(["run", "seed", *TASKS], lines)


@study.table
def recipe_search() -> str:
    """recipe-search.md's table: each search run's recipe, log and step (rows.json), and its validation accuracy (%)."""
    lines, folder = [], study.folder / "recipe-search"
    for e in json.loads((folder / "rows.json").read_text()):
        (at_step,) = [r for r in map(json.loads, (folder / f"{e['log']}.jsonl").read_text().splitlines())
                      if r["step"] == e["step"]]
        lines.append([str(e["row"]), e["recipe"], e["log"], f"{e['step']}" + " (stopped)" * e["stopped"]]
                     + [pct(at_step[f"val_acc_{t}"]) if f"val_acc_{t}" in at_step else "" for t in TASKS])
    return grid(["#", "recipe (overrides of the former 2-layer recipe)", "log", "step", *TASKS], lines, left=3)


def retrain_moves(c: dict) -> list[tuple[float, int]]:
    """(points, side) by which each run trained again moved from the committed run at 16x L with YaRN, per task."""
    return [(100 * (v[0] - c[("rope", s, t, YARN, X16)][0]), side(v, c[("rope", s, t, YARN, X16)]))
            for t in INDUCTION for s, v in at(c, AGAIN, t, X16, YARN).items()]


study.tables.update({
    "past_L": lambda: seeds_table([("rope", "none"), ("rope", YARN), (AGAIN, "none"), (AGAIN, YARN), ("alibi", "none"),
                                   ("nope", "none"), ("t5", "none")], [(t, X16) for t in TASKS]),
    "every_method": lambda: seeds_table([(r, OWN.get(r, "none")) for r in ADDED], [(t, X16) for t in TASKS], True),
    "context_table": lambda: seeds_table([(run, m) for m in ("none", *CONTEXT) for run in ("rope", "alibi")],
                                         [(t, L) for t in INDUCTION] + [(t, X16) for t in INDUCTION])})


def sides(c: dict, a: str, b: str, task: str, length: int, label: str = "none") -> list[int]:
    """Per seed of a: 1 where a is above b on the task (intervals apart), -1 below, 0 level."""
    return [side(c[(a, s, task, label, length)], c[(b, s, task, label, length)]) for s in seeds(c, a, label)]


def spans(runs, tasks, length, label="none", found=track):
    return lambda: span(v[0] for run in runs for t in tasks for v in at(found(), run, t, length, label).values())


study.values.update({
    "L": lambda: str(L), "learned": lambda: f"{LEARNED:.0%}", "seeds_track": lambda: seed_range(seeds(track(), "rope")),
    "seeds_added": lambda: seed_range(seeds(track(), "kerple")),
    "seeds_again": lambda: seed_range(seeds(track(), AGAIN)), "nope_recall_L": spans(["nope"], ["recall"], L),
    "values_only_recall": lambda: pct(values_only_level("recall", L)) + "%",
    "rope_16x_committed": spans(["rope"], INDUCTION, X16), "rope_16x": spans(["rope", AGAIN], INDUCTION, X16),
    "alibi_copy_16x": spans(["alibi"], ["copy"], X16), "yarn_16x": spans(["rope", AGAIN], INDUCTION, X16, YARN),
    "retrain_move": lambda: f"{max(abs(p) for p, _ in retrain_moves(track())):.0f}",
    "nope_copy_2x": spans(["nope"], ["copy"], 2 * L),
    "nope_below_alibi_2x": lambda: str(sides(track(), "nope", "alibi", "copy", 2 * L).count(-1)),
    "rope_hidden": spans(["rope"], ["copy"], L, "sinks", anchor),
    "alibi_hidden": spans(["alibi"], ["copy"], L, "sinks", anchor),
    "anchor_below": lambda: str(sides(anchor(), "rope", "alibi", "copy", L, "sinks").count(-1)),
    "sequences_band": lambda: str(min(r["samples"] for r in rows("results.json.gz"))),
    "sequences_16x": lambda: str(min(v[1] for k, v in track().items() if k[4] == X16))})
