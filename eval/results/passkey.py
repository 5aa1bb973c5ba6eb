"""The passkey heat map's report (eval/passkey.py measures, this renders): passkey.json, passkey.md, passkey.png."""
from __future__ import annotations

import json
import statistics
from collections import defaultdict
from pathlib import Path

import torch

from checkpoint import atomic_write_text
from eval.results.plots import plt


RESULTS = "passkey.json"


def cells(rows: list[dict]) -> dict[tuple, dict[tuple, list[dict]]]:
    """{(run, scaling): {(depth, length): the seeds' rows}}."""
    out: dict[tuple, dict[tuple, list[dict]]] = defaultdict(lambda: defaultdict(list))
    for r in rows:
        out[(r["run"], r["scaling"])][(r["depth"], r["length"])].append(r)
    return out


def cell_value(rows: list[dict]) -> float | None:
    values = [r["value"] for r in rows]
    return None if any(v is None for v in values) else statistics.fmean(values)


CELL = ("Each cell: the share of trials whose key is in the greedy continuation (right / trials, over all seeds; the "
        "mean share of the key's tokens predicted, and of 5-digit keys the trials whose every digit is, after the "
        "answer before it: held; the seconds its trials took, the deepest key's cell also the filler before it, "
        "computed once for every depth); = none: s = 1 is plain RoPE.")


def markdown(rows: list[dict]) -> str:
    return "\n".join(["# Passkey retrieval by length and depth", "",
                      "The prompt of Mohtashami & Jaggi (python -m eval.passkey). " + CELL, "", *tables(rows)])


def tables(rows: list[dict], level: str = "##") -> list[str]:
    """A table per model and scaling, under a heading of `level`: accuracy by depth (rows) and length (columns),
    trials and seconds; "not measured" where no row is."""
    lengths, depths = sorted({r["length"] for r in rows}), sorted({r["depth"] for r in rows})
    lines = []
    for (run, scaling), by_cell in cells(rows).items():
        first = next(iter(by_cell.values()))[0]
        lines += [f"{level} {run}: {scaling} (L = {first['train_length']:,}; the key: {first['keys']})", "",
                  "| depth | " + " | ".join(f"{n:,}" for n in lengths) + " |", "|---:|" + "---:|" * len(lengths)]
        for d in depths:
            values = []
            for n in lengths:
                group = by_cell.get((d, n))
                if not group:
                    values.append("not measured")
                elif cell_value(group) is None:
                    values.append(f"n/a ({group[0].get('note')})")
                elif group[0].get("same_as"):
                    values.append(f"= {group[0]['same_as']}")
                else:
                    hits, trials = sum(r["hits"] for r in group), sum(r["trials"] for r in group)
                    tokens = statistics.fmean(r["key_tokens"] for r in group)
                    seconds = statistics.fmean(r["seconds"] for r in group)
                    held = f", {sum(r['held'] for r in group)} held" if all("held" in r for r in group) else ""
                    values.append(f"{cell_value(group):.2f} ({hits}/{trials}; {tokens:.2f}{held}; {seconds:,.0f} s)")
            lines.append(f"| {d:g} | " + " | ".join(values) + " |")
        lines.append("")
    return lines


def plot_heatmap(rows: list[dict], path: Path) -> None:
    """One panel per model and scaling: accuracy by depth and length, the training length marked."""
    groups = cells(rows)
    lengths, depths = sorted({r["length"] for r in rows}), sorted({r["depth"] for r in rows})
    fig, axes = plt.subplots(1, len(groups), figsize=(0.7 * len(lengths) * len(groups) + 2.5, 0.45 * len(depths) + 2),
                             squeeze=False)
    for ax, ((run, scaling), by_cell) in zip(axes[0], groups.items()):
        grid = torch.full((len(depths), len(lengths)), float("nan"))
        for (d, n), group in by_cell.items():
            value = cell_value(group)
            if value is not None:
                grid[depths.index(d), lengths.index(n)] = value
        image = ax.imshow(grid.numpy(), vmin=0, vmax=1, cmap="RdYlGn", aspect="auto")
        for i, j in torch.nonzero(~grid.isnan()).tolist():
            ax.text(j, i, f"{grid[i, j]:.2f}", ha="center", va="center", fontsize=7)
        L = next(iter(by_cell.values()))[0]["train_length"]
        past = [j for j, n in enumerate(lengths) if n > L]
        if past:
            ax.axvline(past[0] - 0.5, color="black", linewidth=1.5)
        ax.set_xticks(range(len(lengths)), [f"{n // 1024}k" if n % 1024 == 0 else str(n) for n in lengths])
        ax.set_yticks(range(len(depths)), [f"{d:g}" for d in depths])
        ax.set_xlabel("prompt length (tokens; the line: L)")
        ax.set_title(f"{run}: {scaling}", fontsize=9)
    axes[0][0].set_ylabel("depth of the key in the filler")
    fig.colorbar(image, ax=axes[0].tolist(), label="passkey accuracy")
    fig.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(fig)


def write_report(rows: list[dict], out: Path, tables: bool = True) -> None:
    atomic_write_text(out / RESULTS, json.dumps(rows, indent=2, allow_nan=False) + "\n")
    if tables and rows:
        atomic_write_text(out / "passkey.md", markdown(rows))
        plot_heatmap(rows, out / "passkey.png")


def row_key(r: dict) -> tuple:
    return r["run"], r["seed"], r["scaling"], r["length"], r["depth"]
