"""The report on one pretrained model (`make smollm2-report`), from eval.extrapolation's and eval.probe's rows in
one folder: perplexity by length with each RoPE scaling, the passkey heat map by length and depth, and for every
cell how many windows or trials it holds and the seconds it took.

    python -m eval.pretrained reports/smollm2 --model "SmolLM2-135M-Instruct ..." --data ../shared/corpora/gutenberg

Writes report.md and passkey_heatmap.png beside results.json and probes.json.
"""
from __future__ import annotations

import argparse
import os
from collections import defaultdict
from pathlib import Path

import torch

from config import ArgumentParser, UserError, run_cli
from eval.extrapolation import previous_rows
from eval.plots import plt
from eval.results import format_ppl

DESCRIPTION = """\
- Perplexity: the exp of the mean next-token loss over non-overlapping windows of the length inside test documents
  (eval.extrapolation), encoded with the model's own tokenizer; every length scores the same token budget. A static
  scaling (linear = PI, ntk, yarn) has s = length / L, so it is plain RoPE up to L (its cell is the plain RoPE
  measurement: "= none"). dynamic is transformers' dynamic NTK as it runs in generation: the first L tokens
  prefilled, the rest decoded through the cache in chunks of 16 tokens, each chunk with the frequencies of its last
  length, and every cached key keeps the rotation it was computed with.
- Passkey (eval.probe): a key word stated at a depth of test text, asked for at the end; the share of trials whose
  key the model ranks first among the candidate words (rank: the mean rank of the key; 1 is retrieval, chance is
  (candidates + 1) / 2). Static scalings only, s = max(1, length / L).
- Seconds: the wall-clock time of the cell's measurement on this machine's CPU, loading aside."""


def ppl_table(rows: list[dict]) -> list[str]:
    lengths = sorted({r["length"] for r in rows})
    cells = defaultdict(dict)
    for r in rows:
        cells[r["scaling"]][r["length"]] = r
    lines = ["| scaling | " + " | ".join(f"{n:,}" for n in lengths) + " |", "|---|" + "---:|" * len(lengths)]
    for scaling, by_length in cells.items():
        values = []
        for n in lengths:
            r = by_length.get(n)
            if r is None:
                values.append("")
            elif r["factor_rule"] == "length/L" and r["factor"] == 1.0:
                values.append("= none")
            elif r["ppl"] is None:
                values.append(f"n/a ({r['note']})")
            else:
                values.append(f"{format_ppl(r['ppl'])} ({r['windows']} × {r['length']:,}; {seconds(r):,.0f} s)")
        lines.append(f"| {scaling} | " + " | ".join(values) + " |")
    return lines


def seconds(r: dict) -> float:
    return r["tokens"] / r["tokens_per_s"] if r.get("tokens_per_s") else 0.0


def passkey_tables(rows: list[dict]) -> list[str]:
    lengths, depths = sorted({r["length"] for r in rows}), sorted({r["depth"] for r in rows})
    lines = []
    for scaling in dict.fromkeys(r["scaling"] for r in rows):
        cell = {(r["depth"], r["length"]): r for r in rows if r["scaling"] == scaling}
        lines += ["", f"### {scaling}", "", "| depth | " + " | ".join(f"{n:,}" for n in lengths) + " |",
                  "|---:|" + "---:|" * len(lengths)]
        for d in depths:
            values = []
            for n in lengths:
                r = cell.get((d, n))
                if r is None or r.get("value") is None:
                    values.append("" if r is None else f"n/a ({r.get('note')})")
                elif r.get("same_as"):
                    values.append(f"= {r['same_as']}")
                else:
                    values.append(f"{r['value']:.2f}, rank {r['rank']:.1f} ({r['samples']}; {r['seconds']:,.0f} s)")
            lines.append(f"| {d:g} | " + " | ".join(values) + " |")
    return lines


def plot_heatmap(rows: list[dict], path: Path) -> None:
    scalings = list(dict.fromkeys(r["scaling"] for r in rows))
    lengths, depths = sorted({r["length"] for r in rows}), sorted({r["depth"] for r in rows})
    fig, axes = plt.subplots(1, len(scalings), figsize=(3.2 * len(scalings) + 1, 3.2), squeeze=False)
    for ax, scaling in zip(axes[0], scalings):
        grid = torch.full((len(depths), len(lengths)), float("nan"))
        for r in rows:
            if r["scaling"] == scaling and r.get("value") is not None:
                grid[depths.index(r["depth"]), lengths.index(r["length"])] = r["value"]
        image = ax.imshow(grid.numpy(), vmin=0, vmax=1, cmap="viridis", aspect="auto", origin="upper")
        for i in range(len(depths)):
            for j in range(len(lengths)):
                if not torch.isnan(grid[i, j]):
                    ax.text(j, i, f"{grid[i, j]:.2f}", ha="center", va="center", fontsize=7,
                            color="black" if grid[i, j] > 0.5 else "white")
        ax.set_xticks(range(len(lengths)), [f"{n // 1024}k" if n % 1024 == 0 else str(n) for n in lengths])
        ax.set_yticks(range(len(depths)), [f"{d:g}" for d in depths])
        ax.set_xlabel("length (tokens)")
        ax.set_title(scaling)
    axes[0][0].set_ylabel("depth of the key")
    fig.colorbar(image, ax=axes[0].tolist(), label="share of keys ranked first")
    fig.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(fig)


def write(folder: Path, model: str, data: str) -> Path:
    ppl = previous_rows(folder / "results.json", "eval.extrapolation", "ppl")
    passkey = [r for r in previous_rows(folder / "probes.json", "eval.probe", "probe") if r["probe"] == "passkey"]
    if not ppl and not passkey:
        raise UserError(f"{folder} holds neither results.json nor probes.json (run eval.extrapolation and eval.probe)")
    L = next(r["train_length"] for r in ppl + passkey)
    measured = [r for r in ppl if not (r["factor_rule"] == "length/L" and r["factor"] == 1.0)]
    total = sum(map(seconds, measured)) + sum(r.get("seconds", 0) for r in passkey if not r.get("same_as"))
    lines = [f"# {model}: perplexity and passkey retrieval at and past its context", "",
             f"L = {L:,} tokens (its max_position_embeddings). Text: the test split of {data}. "
             f"CPU: {os.cpu_count()} cores, torch threads {torch.get_num_threads()}; {total / 3600:,.1f} hours of "
             f"measurement in all.", "", DESCRIPTION]
    if ppl:
        lines += ["", "## Perplexity by length", "",
                  "Each cell: perplexity (windows × length; seconds).", "", *ppl_table(ppl)]
    if passkey:
        candidates = next((r["candidates"] for r in passkey if r.get("candidates")), 0)
        lines += ["", "## Passkey retrieval by length and depth", "",
                  f"Each cell: share of keys ranked first, mean rank among {candidates} candidate words (chance "
                  f"{(candidates + 1) / 2:g}) (trials; seconds). passkey_heatmap.png draws the shares.",
                  *passkey_tables(passkey)]
        plot_heatmap(passkey, folder / "passkey_heatmap.png")
    (folder / "report.md").write_text("\n".join(lines) + "\n")
    return folder / "report.md"


def main(argv=None):
    parser = ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folder", type=Path, help="a folder holding results.json and/or probes.json")
    parser.add_argument("--model", required=True, help="what the model is, as the report's title names it")
    parser.add_argument("--data", required=True, help="the text it was evaluated on (eval.extrapolation's --data)")
    args = parser.parse_args(argv)
    path = run_cli(lambda: write(args.folder, args.model, args.data))
    print(f"wrote {path} and {args.folder / 'passkey_heatmap.png'}")


if __name__ == "__main__":
    main()
