"""The long-range tasks' report (eval/tasks.py measures, this renders): accuracy pooled by length and by
distance band, whether a run learned a task, 95% intervals over sequences, results.md and the plots."""
from __future__ import annotations

import gzip
import json
from pathlib import Path

from checkpoint import atomic_write, atomic_write_text
from data.tasks import TASKS, values_only_level
from eval.results.rows import curve_label, spread


RESULTS = "results.json.gz"  # the rows; results.md is their table


LEARNED = 0.9  # accuracy at L from which a run counts as having learned a task
DRAWN = "drawn positions"  # the scaling column of rows measured with eval.tasks --drawn-positions


def row_key(r: dict) -> tuple:
    """What identifies a row: a measurement on one task (eval.tasks.job_key) and its distance band."""
    return tuple(r[k] for k in ("run", "seed", "task", "scaling", "factor_rule", "factor", "length", "distance"))


def pooled(rows: list[dict]) -> dict[tuple, float | None]:
    """{(run, seed, task, curve label, length): accuracy over every band}; None where not applicable."""
    out: dict[tuple, list[int]] = {}
    for r in rows:
        key = (r["run"], r["seed"], r["task"], curve_label(r), r["length"])
        if r["accuracy"] is None:
            out[key] = None
        elif out.setdefault(key, [0, 0]) is not None:
            out[key][0] += round(r["accuracy"] * r["answers"])
            out[key][1] += r["answers"]
    return {k: (v[0] / v[1] if v else None) for k, v in out.items()}


def interval(accuracy: float, sequences: int, z: float = 1.96) -> tuple[float, float]:
    """A 95% interval for an accuracy over `sequences` independent sequences, each scored on several answers.
    Answers within a sequence are correlated (a copied span is one fact), so the units are the sequences; a
    sequence's own accuracy lies in [0, 1], so the variance of their mean is at most p (1 - p) / sequences, and
    the Wilson score interval with that variance is conservative (exact when a sequence is all right or all wrong)."""
    p, n = accuracy, sequences
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * (p * (1 - p) / n + z * z / (4 * n * n)) ** 0.5 / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def learned(rows: list[dict]) -> dict[tuple, bool]:
    """{(run, seed, task): accuracy >= 90% at the length the run was trained at (L, or 4x L for a
    fine-tune), measured without scaling or with the run's own, and without a context method or drawn
    positions where the rows have such a measurement."""
    acc = pooled(rows)
    out = {}
    plain = lambda r: r.get("context") is None and r["scaling"] != DRAWN  # noqa: E731
    for r in sorted(rows, key=plain):  # plain rows last: they decide
        if r["length"] == r["run_length"] and r["factor_rule"] in (None, "fine-tuned"):
            out[(r["run"], r["seed"], r["task"])] = (acc[(r["run"], r["seed"], r["task"], curve_label(r), r["length"])]
                                                    or 0) >= LEARNED
    return out


def cell(values: list[float | None]) -> str:
    """Mean ± sd over seeds, and each seed's value in seed order: 77 ± 24 (100/79/51)."""
    if not values or any(v is None for v in values):
        return "n/a"
    mean, std = spread(values)
    if std is None:
        return f"{100 * mean:.0f}"
    return f"{100 * mean:.0f} ± {100 * std:.0f} ({'/'.join(f'{100 * v:.0f}' for v in values)})"


def curves(rows: list[dict], by: str) -> dict[tuple, dict]:
    """{(task, run, curve label): {x: {seed: accuracy}}} with x the length (pooled over bands) or, at each
    run's longest length, the distance band."""
    acc = pooled(rows)
    out: dict[tuple, dict] = {}
    longest = {}
    for r in rows:
        longest[r["run"]] = max(longest.get(r["run"], 0), r["length"])
    for r in rows:
        key = (r["task"], r["run"], curve_label(r))
        if by == "length":
            out.setdefault(key, {}).setdefault(r["multiple"], {})[r["seed"]] = \
                acc[(r["run"], r["seed"], r["task"], curve_label(r), r["length"])]
        elif r["length"] == longest[r["run"]]:
            out.setdefault(key, {}).setdefault((r["distance_lo"], r["distance_hi"]), {})[r["seed"]] = r["accuracy"]
    return out


def interval_note(rows: list[dict]) -> str:
    """How wide a 95% interval over sequences is around one seed's value, by how many sequences its cell holds."""
    per_cell: dict[tuple, int] = {}
    for r in rows:
        key = (r["run"], r["seed"], r["task"], curve_label(r), r["length"], r["multiple"])
        per_cell[key] = per_cell.get(key, 0) + r["samples"]
    sizes = sorted({(key[-1], n) for key, n in per_cell.items()})
    band = sorted({r["samples"] for r in rows})

    def half(n: int) -> str:
        lo, hi = interval(0.5, n)
        return f"±{100 * (hi - lo) / 2:.0f}"
    by_length = ", ".join(f"{n} sequences at {m:g}x ({half(n)})" for m, n in sizes)
    return ("- Intervals: answers within a sequence are not independent (a copied span is one fact), so a 95% interval "
            "for one seed's value counts sequences (eval.tasks.interval, conservative). Half-widths at 50%, narrower "
            f"towards 0 and 100: by length, {by_length}; by distance, {', '.join(map(str, band))} sequences a band "
            f"({', '.join(half(n) for n in band)}). Two values whose intervals overlap are not told apart here.")


def values_only_note(rows: list[dict], tasks: list[str]) -> str:
    """The level of a solver that reads which values a sequence's facts hold but not which question each answers,
    beside chance: a run near it has learned the values, not the keys."""
    L = min(r["train_length"] for r in rows)
    levels = {t: values_only_level(t, L) for t in tasks}
    shown = [f"{t} {100 * v:.1f}" for t, v in levels.items() if v is not None and v > TASKS[t].chance]
    return ("A solver that knows which values a sequence's facts hold but not which question each answers "
            f"(data.tasks.bag_solver, {L}-token validation sequences) scores more: {', '.join(shown)}.") if shown else ""


def markdown(rows: list[dict]) -> str:
    ok = learned(rows)
    seeds = sorted({r["seed"] for r in rows})
    tasks = list(dict.fromkeys(r["task"] for r in rows))
    lines = ["# Long-range tasks: answer accuracy (%) by length and by distance", "",
             f"Mean ± sample standard deviation over seeds ({', '.join(map(str, seeds))}), then each seed's value "
             "in that order; greedy prediction of "
             "every answer token, the question's own tokens given. Chance (a blind guess among the answers' "
             "alphabet): " + ", ".join(f"{t} {100 * TASKS[t].chance:.1f}" for t in tasks) + ". " + values_only_note(rows, tasks),
             "",
             f"- †: a seed of this run did not learn the task (below {LEARNED:.0%} at the length it was trained "
             "at: L, or 4x L for a fine-tune): its rows past that length say nothing about extrapolation.",
             "- By length: the facts in every distance band, (0, L] to (n/2, n], pooled. A distance counts from "
             "the token that asks for an answer back to the token that holds it.",
             "- By distance from the question, at each run's longest length: (0, L] is positions past L at "
             "distances seen in training; the other bands are distances longer than any the base run saw "
             "(a fine-tune saw up to 4x L).",
             "- s = length/L, s = 4, s = T/L (cached): the scalings as in eval.extrapolation; \"(fine-tuned)\": "
             "continued at 4x L with that scaling, \"none (fine-tuned)\" the control.",
             interval_note(rows)]
    for by, title in (("length", "by length (multiples of L)"),
                      ("distance", "by distance from the question, at the longest length")):
        table = curves(rows, by)
        for task in tasks:
            keys = [k for k in table if k[0] == task]
            xs = sorted({x for k in keys for x in table[k]})
            head = [f"{x:g}x" for x in xs] if by == "length" else [f"{lo}-{hi}" for lo, hi in xs]
            lines += ["", f"## {task}: {title}", "", "| run | scaling | " + " | ".join(head) + " |",
                      "|---|---|" + "---:|" * len(xs)]
            for key in keys:
                _, run, label = key
                mark = "" if all(ok.get((run, s, task), True) for s in seeds) else " †"
                values = [cell([v for _, v in sorted(table[key][x].items())]) if x in table[key] else "" for x in xs]
                lines.append(f"| {run}{mark} | {label} | " + " | ".join(values) + " |")
    return "\n".join(lines) + "\n"


def training_curves(training: list[dict]) -> dict[str, dict[str, dict[int, list[float]]]]:
    """{task: {run: {step: [accuracy per seed]}}} from training_rows, runs trained from scratch only (a continued
    run counts its own steps)."""
    out: dict[str, dict[str, dict[int, list[float]]]] = {}
    for r in training:
        if r.get("continued"):
            continue
        out.setdefault(r["task"], {}).setdefault(r["run"], {}).setdefault(r["step"], []).append(r["accuracy"])
    return out


def write_report(rows: list[dict], training: list[dict], out: Path, plots: bool = True) -> None:
    """results.json, results.md, training.json (training_rows) and (with plots) the plots."""
    # a row per line: a three-seed report has thousands of rows
    text = "[\n" + ",\n".join(json.dumps(r, allow_nan=False) for r in rows) + "\n]\n"
    # gzip: the rows of three seeds by task, scaling, length and distance band are megabytes of JSON
    atomic_write(out / RESULTS, lambda tmp: Path(tmp).write_bytes(gzip.compress(text.encode(), mtime=0)))
    atomic_write_text(out / "training.json", "[\n" + ",\n".join(json.dumps(r, allow_nan=False) for r in training) + "\n]\n")
    atomic_write_text(out / "results.md", markdown(rows))
    if plots:
        from eval.results.plots import plot_task_accuracy, plot_task_training
        plot_task_accuracy(curves(rows, "length"), curves(rows, "distance"), learned(rows), out)
        plot_task_training(training_curves(training), out / "training.png")
