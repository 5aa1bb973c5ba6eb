"""One line per training run: final validation loss and perplexity, training throughput.

    python -m eval.summary runs/study/seed1/learned runs/study/seed1/rope [--out FILE.md]
"""
from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from checkpoint import read_run_config
from config import ArgumentParser, UserError, run_cli


def summarize(run_dir: Path) -> dict:
    config = read_run_config(run_dir)
    path = run_dir / "metrics.jsonl"
    if not path.is_file():
        raise UserError(f"no metrics.jsonl in {run_dir}")
    rows = [json.loads(line) for line in path.read_text().splitlines() if line]
    evals = [r for r in rows if "val_loss" in r]
    if not evals:
        raise UserError(f"{run_dir} has no validation loss yet")
    model = config["model"]
    return {"run": run_dir.name, "seed": (config.get("run") or {}).get("seed"), "position": model["position"]["type"], "scaling": model["position"]["scaling"],
            "context": model["max_seq_len"], "steps": evals[-1]["step"], "val_loss": evals[-1]["val_loss"],
            "val_ppl": evals[-1]["val_ppl"],
            # the median over logging intervals: robust to the first (warm-up) interval and to evaluations
            "tokens_per_s": statistics.median(r["tokens_per_s"] for r in rows)}


def markdown(summaries: list[dict]) -> str:
    lines = ["| run | seed | encoding | context | steps | val loss | val ppl | train tokens/s |",
             "|---|---:|---|---:|---:|---:|---:|---:|"]
    for s in summaries:
        encoding = s["position"] + (f" + {s['scaling']['type']} x{s['scaling']['factor']:g}" if s["scaling"] else "")
        lines.append(f"| {s['run']} | {s['seed']} | {encoding} | {s['context']} | {s['steps']} | {s['val_loss']:.3f} | "
                     f"{s['val_ppl']:.1f} | {s['tokens_per_s']:,.0f} |")
    return "\n".join(lines) + "\n"


def main(argv=None):
    parser = ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="+", type=Path)
    parser.add_argument("--out", type=Path, help="also write the table to this file")
    args = parser.parse_args(argv)
    table = run_cli(lambda: markdown([summarize(run) for run in args.runs]))
    print(table, end="")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(table)


if __name__ == "__main__":
    main()
