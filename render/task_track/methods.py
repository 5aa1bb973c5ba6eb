"""The section "Every method on the track": make extrapolation-tasks-added's runs beside RoPE, ALiBi, NoPE and T5, the
randomized-position runs scored on drawn positions, and DroPE against its own base and training-free YaRN."""
from __future__ import annotations

import json
import re
import statistics
from pathlib import Path

from config import Config, load_config
from render.prose import claim, listed, named, number, paragraph, seeds_named
from render.rows import previous_rows
from render.tasks import DRAWN, RESULTS, interval, learned, pooled
from data.tasks import values_only_level
from render.task_track.context import METHODS as CONTEXT_METHODS, Context
from render.text_study.context import NAMES as CONTEXT_NAMES
from render.task_track.track import (
    FINE_TUNED, INDUCTION, SCALED, TASKS, Track, pct, readings_apart, track, validation_sequences)


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
    parts = [intro, "\n".join(lines), said, unlearned_curves(reports, t, present)]
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


def unlearned_curves(reports: Path, t: Track, present: list[str]) -> str:
    """Each task an added run left below 90% at L (the randomized runs' and DroPE's are read below, on drawn positions
    and through the recalibration): its validation accuracy at half, three quarters and the end of training, whether
    it was still rising over the last quarter (the two readings' 95% intervals apart), and its accuracy at L beside the
    values-only solver's level (data.tasks.bag_solver), which a run that knows which values a sequence holds but not
    which key holds which would score."""
    lost = [(run, s, task) for run in present if not run.endswith("-randomized") and run != "drope"
            for s in t.ran[run] for task in TASKS if not t.learned.get((run, s, task), False)]
    if not lost:
        return ""
    n = validation_sequences(reports.parent)
    total = load_config(Config, reports.parent / "configs" / "tasks.yaml").train.max_steps
    half, late, last = total // 2, 3 * total // 4, total
    lines = ["| run | seed | task | " + " | ".join(f"step {number(step)}" for step in (half, late, last))
             + " | at L (95% interval) | values only |", "|---|---:|---|" + "---:|" * 5]
    levels = {task: values_only_level(task, t.L) for task in {task for *_, task in lost}}  # 256 sequences drawn each
    rising, at_level = [], []
    for run, s, task in lost:
        curve = t.curve(run, s, task)
        acc = t.acc(run, task, t.L, s, label_of(t, run))
        lo, hi = interval(acc, t.sequences[(run, s, task, t.L)])
        level = levels[task]
        if curve[last] > curve[late] and readings_apart(curve[late], curve[last], n):
            rising.append(f"{SHORT[run]} on `{task}` (seed {s})")
        if level is not None and lo <= level <= hi:
            at_level.append(f"{SHORT[run]} on `{task}` (seed {s})")
        lines.append(f"| {SHORT[run]} | {s} | `{task}` | "
                     + " | ".join(pct(curve[step]) for step in (half, late, last))
                     + f" | {pct(acc)} ({pct(lo)}-{pct(hi)}) | " + (f"{100 * level:.1f}" if level is not None else "")
                     + " |")
    return "\n\n".join([
        paragraph("Where an added run left a task below 90% at L: its validation accuracy (%) at half, three quarters "
                  f"and the end of training ([training.png](training.png): a reading is {n} sequences a task), its "
                  "accuracy at L and the values-only solver's (the task table above: it knows which values a sequence "
                  "holds, not which key holds which)."),
        "\n".join(lines),
        paragraph(f"Still rising over the last quarter (the two readings' 95% intervals apart): {named(rising)}.",
                  f"Not told apart from the values-only solver (its level inside the 95% interval at L): "
                  f"{named(at_level)}.")])


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
    measured = sorted({s for r in runs for s in seeds[r]})

    def unlearned(run):  # the tasks below 90% at L with drawn positions, each with its seeds when several were measured
        lost = {task: [s for s in seeds[run] if not d.learned.get((run, s, task), False)] for task in TASKS}
        return [f"`{task}`" + (f" ({seeds_named(ss)})" if len(measured) > 1 else "") for task, ss in lost.items() if ss]
    learned_drawn = [SHORT[r] for r in runs if not unlearned(r)]
    sentences = [
        f"Measured as that code measures, each sequence of n tokens given n positions drawn from [0, {number(x16)}) and "
        "sorted (a fixed draw per sequence, the same for every run; "
        f"`make task-drawn SEED_NUMBERS=\"{' '.join(map(str, measured))}\"`, "
        "`eval.tasks --drawn-positions`: [drawn/results.md](drawn/results.md)), each cell below is the accuracy (%) "
        "with drawn positions, then in brackets with the track's contiguous ones, seed by seed; at 16x L the draw is "
        "every position, so the two are one measurement there.",
        f"With drawn positions, {named(learned_drawn)} learned all five tasks at L on "
        f"{'every seed measured' if len(measured) > 1 else seeds_named(measured)}."]
    sentences += [f"{SHORT[r]} leaves {listed(unlearned(r))} below 90% at L even so, on positions drawn as it was "
                  "trained: it had not learned them on its own positions either." for r in runs if unlearned(r)]
    for run in runs:
        above = [f"`{task}`" for task in TASKS if apart(run, task) == 1]
        below = [f"`{task}`" for task in TASKS if apart(run, task) == -1]
        sentences.append(f"{SHORT[run]} at L, drawn against contiguous (95% intervals over sequences apart in "
                         f"{'every seed' if len(seeds[run]) > 1 else seeds_named(seeds[run])}): "
                         f"{above_below(above, below)}.")
    return paragraph(*sentences[:1]) + "\n\n" + "\n".join(lines) + "\n\n" + paragraph(*sentences[1:])


def side(a: float, b: float, sequences: int) -> int:
    """1 where accuracy a is above b with their 95% intervals over `sequences` apart (every cell at one length pools as
    many), -1 where below, 0 where the intervals meet."""
    (lo_a, hi_a), (lo_b, hi_b) = interval(a, sequences), interval(b, sequences)
    return 1 if lo_a > hi_b else -1 if hi_a < lo_b else 0


WORD = {1: "above", -1: "below", 0: "level"}


def in_every_seed(one, other, seeds: list[int], sequences) -> tuple[list[str], list[str], list[str]]:
    """The tasks (named `task`) on which accuracy one(seed, task) is above other(seed, task) in every seed, their 95%
    intervals over sequences(seed, task) apart; those below in every seed; and the rest."""
    sides = {task: {side(one(s, task), other(s, task), sequences(s, task)) for s in seeds} for task in TASKS}
    return tuple([f"`{task}`" for task, v in sides.items() if pick(v)]
                 for pick in (lambda v: v == {1}, lambda v: v == {-1}, lambda v: v not in ({1}, {-1})))


def above_below(above: list[str], below: list[str]) -> str:
    return f"above on {listed(above) if above else 'no task'}, below on {listed(below) if below else 'no task'}"


def drope_at_16x(t: Track):
    """DroPE's accuracy at 16x L, and the sequences a cell pools, as functions of (seed, task)."""
    x16, label = 16 * t.L, label_of(t, "drope")
    return (lambda s, task: t.pooled[("drope", s, task, label, x16)],
            lambda s, task: t.sequences[("drope", s, task, x16)])


def drope_sides(t: Track, seeds: list[int]) -> tuple[list[str], list[str], list[str]]:
    """The tasks on which DroPE is above training-free YaRN at 16x L in every seed (95% intervals over sequences
    apart), below it, and the rest."""
    drope, sequences = drope_at_16x(t)
    return in_every_seed(drope, lambda s, task: t.pooled[("rope", s, task, SCALED["yarn"], 16 * t.L)],
                         drope_seeds(t, seeds), sequences)


def against_own_base(reports: Path, t: Track, seeds: list[int]) -> str:
    """DroPE against training-free YaRN on the very RoPE run it continued, where that run's rows are committed
    (reproduction/rope-seedN): a table of the two at 16x L, each cell marked above, below or level (95% intervals over
    sequences apart or not)."""
    x16, label, yarn = 16 * t.L, label_of(t, "drope"), SCALED["yarn"]
    lines = []
    for s in seeds:
        path = reports / "tasks" / "reproduction" / f"rope-seed{s}" / "results.json.gz"
        if not path.exists():
            continue
        base = pooled(previous_rows(path, "eval.tasks", "accuracy"))
        cells = []
        for task in TASKS:
            d, y = t.pooled[("drope", s, task, label, x16)], base[("rope", s, task, yarn, x16)]
            cells.append(f"{pct(d)} / {pct(y)}, {WORD[side(d, y, t.sequences[('drope', s, task, x16)])]}")
        lines.append(f"| {s} | " + " | ".join(cells) + " |")
    if not lines:
        return ""
    return (paragraph("Against training-free YaRN on the very run it continued, at 16x L (DroPE / YaRN, %; above or "
                      "below where their 95% intervals over sequences are apart):") + "\n\n"
            "| seed | " + " | ".join(f"`{task}`" for task in TASKS) + " |\n|---|" + "---:|" * len(TASKS) + "\n"
            + "\n".join(lines))


def drope_against_context(reports: Path, t: Track, seeds: list[int]) -> str:
    """DroPE against each training-free context method on the same seeds' RoPE runs at 16x L (make task-context's
    rows): the tasks on which it is above or below in every seed, 95% intervals over sequences apart."""
    drope, sequences = drope_at_16x(t)
    said = []
    for method in CONTEXT_METHODS:
        c = Context(reports / "tasks", method)
        if not set(seeds) <= set(c.seeds):
            continue
        above, below, _ = in_every_seed(drope, lambda s, task: c.acc("rope", task, 16 * t.L, s), seeds, sequences)
        said.append(f"above {CONTEXT_NAMES[method]} on {listed(above) if above else 'no task'} and below it on "
                    f"{listed(below) if below else 'no task'}")
    if not said:
        return ""
    return (f"Against the training-free context methods on the same RoPE runs at 16x L ([Training-free context "
            f"methods](#training-free-context-methods), {seeds_named(seeds)}), DroPE is, with 95% intervals over "
            f"sequences apart in every seed: " + "; ".join(said) + ".")


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
    cfg, base = drope_config(reports, "drope"), load_config(Config, reports.parent / "configs" / "tasks.yaml")
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
        drope_against_context(reports, t, seeds),
        f"Its recalibration is {number(cfg.train.max_steps)} steps of {cfg.train.batch_size} x {cfg.model.max_seq_len} "
        f"tokens ({number(tokens)} tokens, {100 * tokens / base_tokens:.1f}% of the RoPE run's {number(base_tokens)}), at "
        "L, added to its budget;",
        claim(fine_tune.train.max_steps * fine_tune.train.batch_size * fine_tune.model.max_seq_len == tokens,
              "the 4x fine-tunes train as many tokens at 4x L.")) + "\n\n" + against_own_base(reports, t, seeds) \
        + longer_recalibration(t, seeds, tokens, base_tokens)


def drope_config(reports: Path, run: str) -> Config:
    """A DroPE run's config: the track's fine-tune config with make/study.mk's ARGS_RUN on it (ARGS_drope inside
    ARGS_drope-long spelled out)."""
    study = (reports.parent / "make" / "study.mk").read_text()
    args = re.search(rf"^ARGS_{run} := (.+)$", study, re.M)[1]
    args = args.replace("$(ARGS_drope)", re.search(r"^ARGS_drope := (.+)$", study, re.M)[1])
    return load_config(Config, reports.parent / "configs" / "extend-4x-tasks.yaml", args.split())


class LongerRecalibration:
    """make task-drope-long's rows (reports/tasks/drope-long): each seed's DroPE recalibrated again from the same RoPE
    run with more steps, beside the track's DroPE rows and training-free YaRN: cells at 16x L by (seed, task), what
    each learned at L, and the steps of each."""

    def __init__(self, t: Track, seeds: list[int]):
        reports, path = t.folder.parent, t.folder / "drope-long" / "results.json.gz"
        rows = previous_rows(path, "eval.tasks", "accuracy")
        cells, long_learned = pooled(rows), learned(rows)
        self.t, self.seeds = t, [s for s in seeds if any(r["seed"] == s for r in rows)]
        self.steps, self.long_steps = (drope_config(reports, run).train.max_steps for run in ("drope", "drope-long"))
        self.curves = json.loads((path.parent / "training.json").read_text())
        x16, label = 16 * t.L, label_of(t, "drope")
        self.shown = {run: {(s, task): acc(s, task) for s in self.seeds for task in TASKS} for run, acc in (
            ("drope", drope_at_16x(t)[0]),
            ("drope-long", lambda s, task: cells[("drope-long", s, task, label, x16)]),
            ("yarn", lambda s, task: t.pooled[("rope", s, task, SCALED["yarn"], x16)]))}
        self.learned = {"drope": {k[1:]: v for k, v in t.learned.items() if k[0] == "drope"},
                        "drope-long": {k[1:]: v for k, v in long_learned.items() if k[0] == "drope-long"}}

    def said(self, a: str, b: str) -> str:
        """'above on ..., below on ...': run a against run b at 16x L in every seed, 95% intervals over sequences
        apart."""
        above, below, _ = in_every_seed(lambda s, task: self.shown[a][(s, task)],
                                        lambda s, task: self.shown[b][(s, task)], self.seeds, drope_at_16x(self.t)[1])
        return above_below(above, below)

    def missed(self, run: str) -> str:
        """The tasks a DroPE run left below 90% at L, with the seeds ('' for YaRN's row)."""
        if run not in self.learned:
            return ""
        lost = {task: [s for s in self.seeds if not self.learned[run].get((s, task), False)] for task in TASKS}
        return "; ".join(f"`{task}` ({', '.join(map(str, ss))})" for task, ss in lost.items() if ss) or "none"


def longer_recalibration(t: Track, seeds: list[int], tokens: int, base_tokens: int) -> str:
    """DroPE recalibrated again with more steps (LongerRecalibration) beside the shorter DroPE and training-free YaRN at
    16x L, what the extra steps changed (95% intervals over sequences apart in every seed), and its curve at L."""
    if not (t.folder / "drope-long" / "results.json.gz").exists():
        return ""
    r = LongerRecalibration(t, seeds)
    steps, long_steps, seeds = r.steps, r.long_steps, r.seeds
    long_tokens = tokens * long_steps // steps
    names = {"drope": f"DroPE, {number(steps)} steps", "drope-long": f"DroPE, {number(long_steps)} steps",
             "yarn": "RoPE + YaRN (training-free)"}
    lines = ["| run | not learned at L (seeds) | " + " | ".join(f"`{task}` at 16x" for task in TASKS) + " |",
             "|---|---|" + "---:|" * len(TASKS)]
    for run, name in names.items():
        lines.append(f"| {name} | {r.missed(run)} | "
                     + " | ".join(" / ".join(pct(r.shown[run][(s, task)]) for s in seeds) for task in TASKS) + " |")
    text = paragraph(
        f"**More recalibration.** `make task-drope-long` recalibrates each seed's DroPE again from the same RoPE run "
        f"with {long_steps // steps}x the steps ({number(long_steps)} steps, {number(long_tokens)} tokens, "
        f"{100 * long_tokens / base_tokens:.1f}% of the RoPE run's budget). Accuracy at 16x L (%), "
        f"{seeds_named(seeds)} in that order:")
    nope_best = max(t.pooled[("nope", s, task, "none", 16 * t.L)] for s in seeds for task in TASKS)
    said = paragraph(
        f"With {number(long_steps)} steps against {number(steps)}, at 16x L (95% intervals over sequences apart in "
        f"every seed): {r.said('drope-long', 'drope')}. Against training-free YaRN: {r.said('drope-long', 'yarn')}.",
        "Every length and band: [drope-long/results.md](drope-long/results.md).",
        "A reading these rows allow but do not prove: the longer DroPE trains without positions, the nearer it comes "
        "to a model trained without them from the start, and the track's NoPE runs of these seeds keep at most "
        f"{pct(nope_best)}% on any task at 16x L.")
    return "\n\n" + text + "\n\n" + "\n".join(lines) + "\n\n" + said + "\n\n" + recalibration_table(
        r.curves, seeds, steps)


def recalibration_table(curves: list[dict], seeds: list[int], steps: int) -> str:
    """The longer recalibration's validation accuracy at L (training.json: 25 sequences a task a reading), the mean over
    `seeds` at the shorter run's last step and at each doubling of it to the end."""
    last = max(r["step"] for r in curves)
    shown = [n for n in (steps * 2 ** k for k in range(last.bit_length())) if n <= last]
    heading = f"Its validation accuracy at L during the recalibration (%, the mean over {seeds_named(seeds)}):"
    lines = [paragraph(heading),
             "", "| step | " + " | ".join(f"`{task}`" for task in TASKS) + " |", "|---:|" + "---:|" * len(TASKS)]
    for n in shown:
        cells = [statistics.fmean(r["accuracy"] for r in curves if (r["step"], r["task"]) == (n, task)
                                  and r["seed"] in seeds) for task in TASKS]
        lines.append(f"| {number(n)} | " + " | ".join(pct(c) for c in cells) + " |")
    return "\n".join(lines)


def added_sentence(t: Track) -> str:
    """README.md's sentence on the other methods of the track, once their rows are in ('' before)."""
    present, seeds = added_present(t)
    if not present:
        return ""
    learned_all, kept = added_lists(t, present, SHORT)
    drope = ""
    if "drope" in present:
        above, below, _ = drope_sides(t, seeds)
        drope = ("; DroPE against training-free YaRN at 16x (intervals apart in every seed): "
                 f"{above_below(above, below)}"
                 + (", not relearned at L" if below and set(below) <= set(drope_unlearned(t, seeds)) else ""))
        if (t.folder / "drope-long" / "results.json.gz").exists():
            r = LongerRecalibration(t, seeds)
            fewer = sum(not v for v in r.learned["drope-long"].values()) < sum(
                not r.learned["drope"].get(k, False) for k in r.learned["drope-long"])
            drope += (f"; with {r.long_steps // r.steps}x the recalibration, {'fewer tasks below 90% at L, ' * fewer}"
                      f"at 16x against the shorter: {r.said('drope-long', 'drope')}")
    so_far = f"{len(present)} of the {len(ADDED)} so far, " if len(present) < len(ADDED) else ""
    full = [s for s in seeds if all(s in t.ran[r] for r in present)]  # the seeds every method ran; then the others
    every = " in every seed" if len(seeds) > 1 else ""
    where = "; ".join(([seeds_named(full)] if full else [])
                      + [f"seed {s} for {sum(s in t.ran[r] for r in present)}" for s in seeds if s not in full])
    return (f"[Every other method](reports/tasks/README.md#every-method-on-the-track) ({so_far}{where}): "
            f"all five tasks learned at L{every} by {named(learned_all)}; `copy`, `recall` and `passkey` kept at 50% or "
            f"more at 16x{every} by {named(kept)}{drope}.")
