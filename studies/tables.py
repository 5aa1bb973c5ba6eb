"""Tables the study pages share: perplexity by length from eval.extrapolation's rows, each cell the mean over seeds with
its 95% t interval over seeds (runs differ more than windows do here), rows named as the page names them."""
from __future__ import annotations

from pathlib import Path

from eval.results.rows import curves, previous_rows
from studies.stats import mean_interval


def ppl_rows(folder: Path) -> list[dict]:
    return previous_rows(folder / "results.json", "eval.extrapolation", "ppl")


def curve(rows: list[dict], run: str, label: str) -> dict[int, list[dict]]:
    """{length: [row per seed]} of one run under one scaling label (eval.results.rows.curve_label)."""
    (found,) = [c for (r, _, lab, _), c in curves(rows).items() if (r, lab) == (run, label)]
    return found


def cell(values: list[float], digits: int) -> str:
    mean, low, high = mean_interval(values)
    if len(values) < 2:
        return f"{mean:.{digits}f}"
    between = " to " if low < 0 else "-"  # "-41.1-1840.6" would read as a range from a negative to a negative
    return f"{mean:.{digits}f} ({low:.{digits}f}{between}{high:.{digits}f})"


def ppl_table(folder: Path, shown: list[tuple[str, str, str, str]], digits: int = 1) -> str:
    """One line per (run, scaling label, run as the page names it, scaling as the page names it): the mean
    perplexity over seeds at each multiple of L and its 95% interval over seeds."""
    rows = ppl_rows(folder)
    L = min(r["train_length"] for r in rows)
    lengths = sorted({r["length"] for r in rows})
    lines = ["| run | scaling | " + " | ".join(f"{n // L}x" for n in lengths) + " |",
             "|---|---|" + "---:|" * len(lengths)]
    for run, label, name, scaling in shown:
        by_length = curve(rows, run, label)
        values = [[r["ppl"] for r in by_length.get(n, [])] for n in lengths]
        lines.append(f"| {name} | {scaling} | " + " | ".join(
            "n/a" if not v or None in v else cell(v, digits) for v in values) + " |")
    return "\n".join(lines)
