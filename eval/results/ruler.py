"""RULER's report (eval/ruler.py measures, this renders): results.json and results.md, the score by length of each
task, the mean over tasks, and two effective lengths per model and scaling."""
from __future__ import annotations

import json
import math
import statistics
from collections import defaultdict
from pathlib import Path

from checkpoint import atomic_write_text

RESULTS = "results.json"
THRESHOLD = 85.6  # RULER's: Llama-2-7B's mean score at 4k (Hsieh et al., arXiv 2404.06654, section 4)
RELATIVE = 0.856  # the same share of a model's own mean score at its shortest length
Z = 1.959964


def row_key(r: dict) -> tuple:
    return r["run"], r["seed"], r["scaling"], r["task"], r["length"], r["depth"]


def wilson(successes: float, n: int) -> tuple[float, float]:
    """The 95% Wilson score interval of successes / n (Wilson 1927)."""
    p = successes / n
    centre = (p + Z * Z / (2 * n)) / (1 + Z * Z / n)
    half = Z * math.sqrt(p * (1 - p) / n + Z * Z / (4 * n * n)) / (1 + Z * Z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def scores(rows: list[dict]) -> dict[tuple, dict[str, dict[int, list[dict]]]]:
    """{(run, scaling): {task: {length: its rows (depths, seeds)}}}, the rows measured only."""
    out: dict = defaultdict(lambda: defaultdict(lambda: defaultdict(list)))
    for r in rows:
        out[(r["run"], r["scaling"])][r["task"]][r["length"]].append(r)
    return out


def cell_score(group: list[dict]) -> float | None:
    """The mean score (0-100) over a cell's trials, every depth and seed; None where a row has no value."""
    if any(r.get("value") is None for r in group):
        return None
    return statistics.fmean(x for r in group for x in r["scores"]) * 100


def mean_by_length(by_task: dict[str, dict[int, list[dict]]]) -> dict[int, float]:
    """Length -> the mean over tasks of their scores, at the lengths where every task has one."""
    lengths = set.intersection(*(set(v) for v in by_task.values())) if by_task else set()
    out = {}
    for n in sorted(lengths):
        values = [cell_score(by_task[t][n]) for t in by_task]
        if all(v is not None for v in values):
            out[n] = statistics.fmean(values)
    return out


def effective_length(means: dict[int, float], threshold: float) -> int | None:
    """The longest length whose mean score is at or above `threshold` (None where none is)."""
    passing = [n for n, v in means.items() if v >= threshold]
    return max(passing) if passing else None


def effective_lengths(means: dict[int, float]) -> tuple[int | None, int | None]:
    """(RULER's absolute threshold of 85.6, and 85.6% of the score at the shortest length measured): effective
    lengths; the relative one is None where the shortest length scores 0."""
    if not means:
        return None, None
    first = means[min(means)]
    return effective_length(means, THRESHOLD), (effective_length(means, RELATIVE * first) if first > 0 else None)


def cell_text(group: list[dict]) -> str:
    if group[0].get("same_as"):
        return f"= {group[0]['same_as']}"
    value = cell_score(group)
    if value is None:
        return f"n/a ({group[0].get('note')})"
    trials = sum(r["trials"] for r in group)
    if all(len(r["scores"]) == r["trials"] and r["expected"] == r["trials"] for r in group):  # one string a trial
        right = round(sum(x for r in group for x in r["scores"]))
        low, high = wilson(right, trials)
        return f"{value:.1f} [{100 * low:.0f}, {100 * high:.0f}] ({right}/{trials})"
    found, expected = sum(r["found"] for r in group), sum(r["expected"] for r in group)
    return f"{value:.1f} ({found}/{expected} strings, {trials} trials)"


def named(length: int | None) -> str:
    return "none" if length is None else f"{length:,}"


def markdown(rows: list[dict]) -> str:
    lines = ["# RULER's synthetic tasks by length", "",
             "python -m eval.ruler (Hsieh et al., arXiv 2404.06654). A score: RULER's string_match_all, the share of a "
             "trial's expected strings in its greedy answer, averaged over trials (every depth and seed), times 100. "
             "Where a task expects one string a trial, the unit is the trial: [low, high] is the 95% Wilson interval "
             "of the share of trials right; otherwise strings found / expected (strings of one trial are not "
             "independent: no interval). Mean: over the tasks measured at every length. Effective length (>= 85.6): "
             "the longest length whose mean is at least RULER's threshold, Llama-2-7B's 85.6 at 4k; effective length "
             "(>= 85.6% of shortest): the longest whose mean is at least 85.6% of the model's own mean at its "
             "shortest length; none where no length qualifies. = none: the unscaled model itself at that length (a static "
             "scaling at s = 1, a dynamic one within L), measured once.", ""]
    groups = scores([r for r in rows if "scores" in r or r.get("value") is None])
    lengths = sorted({r["length"] for r in rows})
    summary = ["## Effective length", "",
               "| run | scaling | mean at the shortest length | effective length (>= 85.6) | "
               "effective length (>= 85.6% of shortest) |", "|---|---|---:|---:|---:|"]
    for (run, scaling), by_task in groups.items():
        means = mean_by_length(by_task)
        absolute, relative = effective_lengths(means)
        first = f"{means[min(means)]:.1f}" if means else "n/a"
        summary.append(f"| {run} | {scaling} | {first} | {named(absolute)} | {named(relative)} |")
        lines += [f"## {run}: {scaling}", "", "| task | " + " | ".join(f"{n:,}" for n in lengths) + " |",
                  "|---|" + "---:|" * len(lengths)]
        for task, by_length in by_task.items():
            lines.append(f"| {task} | " + " | ".join(cell_text(by_length[n]) if n in by_length else "not measured"
                                                      for n in lengths) + " |")
        lines += ["| mean | " + " | ".join(f"{means[n]:.1f}" if n in means else "n/a" for n in lengths) + " |", ""]
    return "\n".join(lines + summary) + "\n"


def write_report(rows: list[dict], out: Path, tables: bool = True) -> None:
    atomic_write_text(out / RESULTS, json.dumps(rows, indent=2, allow_nan=False) + "\n")
    if tables and rows:
        atomic_write_text(out / "results.md", markdown(rows))
