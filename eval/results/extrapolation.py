"""The perplexity report (eval/extrapolation.py measures, this renders): results.json, results.md (mean and spread
over seeds by length, one line per run and scaling) and the plots."""
from __future__ import annotations

import json
import statistics
from pathlib import Path

from checkpoint import atomic_write_text
from eval.results.rows import curves, previous_rows, relative_to_nope, spread


def row_key(r: dict) -> tuple:
    """What identifies a row: a measurement (eval.harness.measurement_key of its plan)."""
    return r["run"], r["seed"], r["scaling"], r["factor_rule"], r["factor"], r["length"]


def format_ppl(ppl: float | None) -> str:
    if ppl is None:
        return "n/a"
    return f"{ppl:.2f}" if ppl < 1e4 else f"{ppl:.2e}"


def format_cell(rows: list[dict]) -> str:
    values = [r["ppl"] for r in rows if r["ppl"] is not None]
    if not values or len(values) < len(rows):
        return "n/a"
    mean, std = spread(values)
    return format_ppl(mean) + (f" ± {std:.2f}" if std is not None and mean < 1e4 else "")


def markdown(rows: list[dict]) -> str:
    """Perplexity per (run, scaling) and length (mean ± std over seeds), the loss by position against
    NoPE at the longest length, and a legend."""
    lengths = sorted({r["length"] for r in rows})
    table = curves(rows)
    seeds = sorted({r["seed"] for r in rows})
    lines = ["# Perplexity by evaluation length", "",
             "| run | position | scaling | L | seeds | " + " | ".join(str(n) for n in lengths) + " |",
             "|---|---|---|---:|---:|" + "---:|" * len(lengths)]
    for (run, position, label, L), cells in table.items():
        n_seeds = len({r["seed"] for rs in cells.values() for r in rs})
        values = [format_cell(cells[n]) if n in cells else "" for n in lengths]
        lines.append(f"| {run} | {position} | {label} | {L} | {n_seeds} | " + " | ".join(values) + " |")
    measured = [r for r in rows if r["ppl"] is not None]
    split = rows[0]["split"] if rows else "test"
    strides = {r["stride"] for r in rows if r["stride"] != r["length"]}
    protocol = (f"sliding windows (stride {', '.join(map(str, sorted(strides)))}; only targets with at least "
                "length - stride tokens of context are scored)" if strides else "non-overlapping windows")
    tokens = sorted({r["tokens"] for r in measured})
    token_text = (f"{tokens[0]:,}" if len(tokens) == 1 else f"{tokens[0]:,} to {tokens[-1]:,}") if tokens else "no"
    lines += ["", f"Perplexity (exp of the mean next-token loss) on the {split} split: {protocol} inside "
              f"documents, {token_text} scored tokens per cell (ALiBi paper protocol, arXiv 2108.12409). "
              f"Each cell is the mean ± sample standard deviation over its curve's seeds (the seeds column; one seed: "
              f"the value alone); seeds in these rows: {', '.join(map(str, seeds))}.",
              "",
              "- L: training length; for a run fine-tuned with a scaling, the scaling's original length (the base "
              "run's); a control continued without one is listed at its own length. Lengths above L are "
              "extrapolation.",
              "- s = length/L: a static method (linear = PI, ntk, yarn) with the factor matched to the window, so "
              "plain RoPE up to L. s = a number: the same method with that fixed factor at every length, 1x included.",
              "- s = T/L, cached: a dynamic method as it runs in generation: the first L tokens prefilled, the rest "
              "decoded through the KV cache with the frequencies of the current length T.",
              "- \"(fine-tuned)\": a run continued from the base RoPE run at 4x its length, evaluated as trained; "
              "\"none (fine-tuned)\" is the control, continued without scaling.",
              "- n/a: not applicable (learned positions past their table) or no document long enough.",
              *(["- A context method in the scaling column (`dca`, `yarn + dca`): applied at load time to every "
                 "window (model/context.py), its settings in results.json."] if any(r.get("context") for r in rows)
                else []),
              "- results.json has the factor, token and window counts, loss by position bucket, "
              "throughput and memory of every cell."]
    deltas = relative_to_nope(rows)
    if deltas and lengths:
        longest = lengths[-1]
        some = next((d[longest][0] for d in deltas.values() if longest in d), [])
        n_buckets = len(some)
        lines += ["", f"## Loss by position at length {longest}, minus NoPE's on the same windows (nats)", "",
                  f"Window positions split into {n_buckets} equal buckets; each cell is the mean over seeds of "
                  "(this run's bucket loss - the NoPE run's of the same seed). Negative: better than no positions "
                  "at all.", "",
                  "| run | scaling | " + " | ".join(f"b{i + 1}" for i in range(n_buckets)) + " |",
                  "|---|---|" + "---:|" * n_buckets]
        for (run, position, label, L), by_length in deltas.items():
            per_seed = by_length.get(longest)
            if not per_seed or position == "nope" or any(len(d) != n_buckets for d in per_seed):
                continue
            means = [statistics.fmean(col) for col in zip(*per_seed)]
            lines.append(f"| {run} | {label} | " + " | ".join(f"{m:+.3f}" for m in means) + " |")
    notes = sorted({f"{r['run']} @ {r['length']}: {r['note']}" for r in rows if r["note"] and r["ppl"] is None})
    if notes:
        lines += ["", "Not applicable:", ""] + [f"- {n}" for n in notes]
    return "\n".join(lines) + "\n"


def write_report(rows: list[dict], out: Path, plots: bool = True) -> list[Path]:
    """results.json, results.md and (plots) the plots in out; returns the paths written."""
    atomic_write_text(out / "results.json", json.dumps(rows, indent=2, allow_nan=False) + "\n")
    atomic_write_text(out / "results.md", markdown(rows))
    paths = [out / "results.json", out / "results.md"]
    if plots:
        from eval.results.plots import plot_results
        paths += plot_results(rows, out)
    return paths


def context_table(folder: Path, methods: list[str], runs: tuple[str, ...], multiple: int) -> str:
    """Perplexity at `multiple` x L under each training-free context method (folder/METHOD/results.json, `none` the
    same checkpoints without one): the mean over seeds, and in brackets the range over seeds of the ratio to `none`."""
    cells = {}
    for method in ("none", *methods):
        for r in previous_rows(folder / method / "results.json", "eval.extrapolation", "ppl"):
            if r["length"] == multiple * r["train_length"]:
                cells[(method, r["run"], r["seed"])] = r["ppl"]
    seeds = sorted({s for _, _, s in cells})
    lines = ["| method | " + " | ".join({"rope": "RoPE", "alibi": "ALiBi", "t5": "T5"}.get(r, r) for r in runs) + " |",
             "|---|" + "---:|" * len(runs)]
    for method in ("none", *methods):
        values = []
        for run in runs:
            mean = statistics.fmean(cells[(method, run, s)] for s in seeds)
            ratios = [cells[(method, run, s)] / cells[("none", run, s)] for s in seeds]
            values.append(f"{mean:.2f}" + ("" if method == "none" else f" ({min(ratios):.2f}-{max(ratios):.2f}x)"))
        lines.append(f"| {method} | " + " | ".join(values) + " |")
    return "\n".join(lines)
