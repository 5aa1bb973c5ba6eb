"""A report's committed rows (the JSON each evaluator writes): read for --resume, merging and rendering, and grouped
into the curves a person reads (one per run and scaling, its mean and spread over seeds)."""
from __future__ import annotations

import gzip
import json
import statistics
from collections import defaultdict
from pathlib import Path

from config import UserError


def previous_rows(path: Path, tool: str, field: str) -> list[dict]:
    """The rows of an earlier report at `path`, for --resume ([] where there is none); each must have `field`."""
    if not path.is_file():
        return []
    try:
        rows = json.loads(gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_text())
    except json.JSONDecodeError as e:
        raise UserError(f"--resume: {path} is not valid JSON ({e.msg} at line {e.lineno})") from None
    if not isinstance(rows, list) or not all(isinstance(r, dict) and field in r for r in rows):
        raise UserError(f"--resume: {path} is not an {tool} results file")
    return rows


def curve_label(r: dict) -> str:
    """The scaling column: the method and how its factor was chosen."""
    rule = r.get("factor_rule")
    if rule == "length/L":
        return f"{r['scaling']} (s = length/L)"
    if rule == "fixed":
        return f"{r['scaling']} (s = {r['factor']:g})"
    if rule == "T/L":
        return f"{r['scaling']} (s = T/L, cached)"
    return r["scaling"]


def curves(rows: list[dict]) -> dict[tuple, dict[int, list[dict]]]:
    """{(run, position, label, L): {length: [row per seed]}} in first-seen order."""
    out: dict[tuple, dict[int, list[dict]]] = {}
    for r in rows:
        key = (r["run"], r["position"], curve_label(r), r["train_length"])
        out.setdefault(key, defaultdict(list))[r["length"]].append(r)
    return out


def spread(values: list[float]) -> tuple[float, float | None]:
    """(mean, sample standard deviation or None for one value)."""
    return statistics.fmean(values), statistics.stdev(values) if len(values) > 1 else None


def relative_to_nope(rows: list[dict]) -> dict[tuple, dict[int, list[list[float]]]]:
    """{curve key: {length: [per seed: bucket loss minus NoPE's, same seed, same windows]}}."""
    nope = {(r["seed"], r["length"]): r["loss_by_position"] for r in rows  # the run trained without positions
            if r["run"] == "nope" and r["scaling"] == "none" and r["loss_by_position"]}  # (not DroPE, also nope)
    out: dict[tuple, dict[int, list[list[float]]]] = {}
    for key, cells in curves(rows).items():
        for length, rs in cells.items():
            for r in rs:
                base = nope.get((r["seed"], length))
                if r["loss_by_position"] and base and len(base) == len(r["loss_by_position"]):
                    deltas = [a["loss"] - b["loss"] for a, b in zip(r["loss_by_position"], base)
                              if a["loss"] is not None and b["loss"] is not None]
                    out.setdefault(key, {}).setdefault(length, []).append(deltas)
    return out
