"""Training runs side by side: final validation loss and perplexity, training throughput, and for the
runs trained from scratch the validation loss at every evaluation step (mean over seeds, and the gap
to the RoPE run of the same seed), so one sees when the encodings part ways.

    python -m eval.summary runs/study/seed1/learned runs/study/seed1/rope [--out FILE.md]

With --out, the curves are also drawn beside the table (FILE.png). With --budget F, a section gives each run's
lowest validation loss and the first evaluation step within the fraction F of it; the last line printed,
"budget: N steps", is the latest of those steps over the runs: a token budget chosen from the data (the GPU
study's, `make gpu-study-budget`), where training longer no longer buys validation loss.
"""
from __future__ import annotations

import argparse
import statistics
from collections import defaultdict
from pathlib import Path

from checkpoint import read_metrics, read_run_config
from config import ArgumentParser, UserError, run_cli
from eval.results.plots import plot_training

REFERENCE = "rope"  # the run the by-step table measures gaps against


def summarize(run_dir: Path) -> dict:
    config = read_run_config(run_dir)
    rows = read_metrics(run_dir)
    evals = [r for r in rows if "val_loss" in r]
    if not evals:
        raise UserError(f"{run_dir} has no validation loss yet")
    model = config["model"]
    return {"run": run_dir.name, "seed": (config.get("run") or {}).get("seed"), "position": model["position"]["type"], "scaling": model["position"]["scaling"],
            "context": model["max_seq_len"], "steps": evals[-1]["step"], "val_loss": evals[-1]["val_loss"],
            "val_ppl": evals[-1]["val_ppl"],
            # the median over logging intervals: robust to the first (warm-up) interval and to evaluations
            "tokens_per_s": statistics.median(r["tokens_per_s"] for r in rows),
            "tokens_per_step": config["train"]["batch_size"] * config["train"]["grad_accum"] * model["max_seq_len"],
            "from_scratch": not (config.get("train") or {}).get("init_from"),
            "val_loss_by_step": {r["step"]: r["val_loss"] for r in evals}}


def by_step(summaries: list[dict]) -> dict[str, dict[int, dict]]:
    """{run: {step: {"loss": [per seed], "gap": [per seed, minus the reference run of that seed]}}} for
    the runs trained from scratch; the gap only for other runs, where the reference run has that step."""
    reference = {s["seed"]: s["val_loss_by_step"] for s in summaries if s["run"] == REFERENCE and s["from_scratch"]}
    table: dict[str, dict[int, dict]] = {}
    for s in summaries:
        if not s["from_scratch"]:
            continue
        for step, loss in s["val_loss_by_step"].items():
            cell = table.setdefault(s["run"], {}).setdefault(step, defaultdict(list))
            cell["loss"].append(loss)
            if s["run"] != REFERENCE and step in reference.get(s["seed"], {}):
                cell["gap"].append(loss - reference[s["seed"]][step])
    return table


def budget_step(summary: dict, within: float) -> int:
    """The first evaluation step whose validation loss is within the fraction `within` of the run's lowest."""
    losses = summary["val_loss_by_step"]
    floor = min(losses.values())
    return min(step for step, loss in losses.items() if loss <= floor * (1 + within))


def budget(summaries: list[dict], within: float) -> tuple[int, str]:
    """(the study's budget in steps: the latest run's budget_step, its markdown section)."""
    firsts = [budget_step(s, within) for s in summaries]
    lines = ["", f"## Token budget: validation loss within {within:.0%} of its lowest", "",
             "| run | seed | lowest val loss | at step | within from step | tokens then |", "|---|---:|---:|---:|---:|---:|"]
    for s, first in zip(summaries, firsts):
        losses = s["val_loss_by_step"]
        lowest = min(losses, key=losses.get)
        lines.append(f"| {s['run']} | {s['seed']} | {losses[lowest]:.3f} | {lowest} | {first} | "
                     f"{first * s['tokens_per_step'] / 1e6:.1f}M |")
    lines += ["", f"budget: {max(firsts)} steps"]
    return max(firsts), "\n".join(lines) + "\n"


def markdown(summaries: list[dict]) -> str:
    lines = ["| run | seed | encoding | context | steps | val loss | val ppl | train tokens/s |",
             "|---|---:|---|---:|---:|---:|---:|---:|"]
    for s in summaries:
        encoding = s["position"] + (f" + {s['scaling']['type']} x{s['scaling']['factor']:g}" if s["scaling"] else "")
        lines.append(f"| {s['run']} | {s['seed']} | {encoding} | {s['context']} | {s['steps']} | {s['val_loss']:.3f} | "
                     f"{s['val_ppl']:.1f} | {s['tokens_per_s']:,.0f} |")
    table = by_step(summaries)
    if table:
        steps = sorted({step for cells in table.values() for step in cells})
        seeds = sorted({s["seed"] for s in summaries if s["from_scratch"]}, key=str)
        lines += ["", f"## Validation loss by step, runs trained from scratch (seeds {', '.join(map(str, seeds))})", "",
                  f"Each cell: the mean over seeds, and in brackets the mean ± standard deviation of the gap to the "
                  f"{REFERENCE} run of the same seed (nats).", "",
                  "| run | " + " | ".join(f"step {step}" for step in steps) + " |",
                  "|---|" + "---:|" * len(steps)]
        for run, cells in table.items():
            lines.append(f"| {run} | " + " | ".join(format_cell(cells.get(step)) for step in steps) + " |")
    return "\n".join(lines) + "\n"


def format_cell(cell: dict | None) -> str:
    if not cell:
        return ""
    text = f"{statistics.fmean(cell['loss']):.3f}"
    gaps = cell["gap"]
    if gaps:
        text += f" ({statistics.fmean(gaps):+.3f}" + (f" ± {statistics.stdev(gaps):.3f}" if len(gaps) > 1 else "") + ")"
    return text


def main(argv=None):
    parser = ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="+", type=Path)
    parser.add_argument("--out", type=Path, help="also write the table to this file, and the curves beside it (.png)")
    parser.add_argument("--budget", type=float, metavar="F",
                        help="each run's first step within the fraction F of its lowest validation loss (e.g. 0.01)")
    args = parser.parse_args(argv)
    if args.budget is not None and not 0 <= args.budget < 1:
        parser.error(f"--budget is a fraction of the lowest validation loss in [0, 1), not {args.budget}")
    summaries = run_cli(lambda: [summarize(run) for run in args.runs])
    table = markdown(summaries) + (budget(summaries, args.budget)[1] if args.budget is not None else "")
    print(table, end="")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(table)
        plot_training(by_step(summaries), args.out.with_suffix(".png"))
        print(f"wrote {args.out} and {args.out.with_suffix('.png')}")


if __name__ == "__main__":
    main()
