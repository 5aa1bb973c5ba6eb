"""Plots of length-extrapolation results, from eval.extrapolation's rows or its results.json:

    python -m eval.plots reports/extrapolation/results.json [--out DIR]

ppl_vs_length.png     perplexity vs evaluation length (log-log), one line per (run, scaling),
                      a dashed vertical line at each training length
loss_vs_position.png  loss by position bucket at the longest length, one line per (run, scaling),
                      so degradation at tail positions is visible rather than averaged away
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only; no display needed
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib import ticker  # noqa: E402


def curves(rows: list[dict]) -> dict[str, list[dict]]:
    """Rows grouped by (run, scaling) in first-seen order, labelled for a legend."""
    out: dict[str, list[dict]] = {}
    for r in rows:
        label = r["run"] if r["position"] != "rope" else f"{r['run']} ({r['scaling']})"
        out.setdefault(label, []).append(r)
    return out


def style(i: int) -> dict:
    # tab10 colours first, then the same colours dash-dotted: a study has 5 encodings + 6 scalings.
    # A marker per line keeps curves that coincide (ntk and dynamic, say) both visible.
    return {"color": plt.get_cmap("tab10")(i % 10), "linestyle": "-" if i < 10 else "-.",
            "marker": "osv^D<>px*"[i % 10], "markersize": 4, "markerfacecolor": "none", "linewidth": 1.5}


def mark_training_lengths(ax, rows: list[dict]) -> None:
    for i, L in enumerate(sorted({r["train_length"] for r in rows})):
        ax.axvline(L, color="grey", linestyle="--", linewidth=1, label="training length" if i == 0 else None)


def plot_ppl_vs_length(rows: list[dict], path: Path) -> None:
    fig, ax = plt.subplots(figsize=(8, 5))
    for i, (label, rs) in enumerate(curves(rows).items()):
        points = sorted((r["length"], r["ppl"]) for r in rs if r["ppl"] is not None)
        if points:
            ax.plot(*zip(*points), label=label, **style(i))
    mark_training_lengths(ax, rows)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.xaxis.set_major_formatter(ticker.StrMethodFormatter("{x:.0f}"))
    ppls = [r["ppl"] for r in rows if r["ppl"] is not None]
    plain = ticker.FuncFormatter(lambda v, _: f"{v:,.0f}" if v >= 100 else f"{v:.3g}")  # 1508, not 1.508 x 10^3
    ax.yaxis.set_major_formatter(plain)
    # within a decade only minor ticks fall in range: label them; across decades they would crowd
    ax.yaxis.set_minor_formatter(plain if ppls and max(ppls) < 10 * min(ppls) else ticker.NullFormatter())
    ax.set_xlabel("evaluation length (tokens)")
    ax.set_ylabel(f"perplexity ({rows[0]['split'] if rows else 'test'} split)")
    ax.set_title("Perplexity vs evaluation length")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_loss_vs_position(rows: list[dict], path: Path) -> None:
    measured = [r for r in rows if r["loss_by_position"]]
    longest = max((r["length"] for r in measured), default=None)
    fig, ax = plt.subplots(figsize=(8, 5))
    for i, (label, rs) in enumerate(curves(rows).items()):
        for r in rs:
            if r["length"] == longest and r["loss_by_position"]:
                points = [((b["start"] + b["end"]) / 2, b["loss"]) for b in r["loss_by_position"] if b["loss"] is not None]
                ax.plot(*zip(*points), label=label, **style(i))
    mark_training_lengths(ax, [r for r in measured if r["length"] == longest])
    ax.set_xlabel("position in the window (bucket centre)")
    ax.set_ylabel("mean next-token loss")
    ax.set_title(f"Loss by position at length {longest}" if longest else "Loss by position (no data)")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_results(rows: list[dict], out_dir: str | Path) -> list[Path]:
    """Write both plots into out_dir; returns their paths."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = [out_dir / "ppl_vs_length.png", out_dir / "loss_vs_position.png"]
    plot_ppl_vs_length(rows, paths[0])
    plot_loss_vs_position(rows, paths[1])
    return paths


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Re-draw the plots of an eval.extrapolation results.json.")
    parser.add_argument("results", type=Path, help="results.json written by python -m eval.extrapolation")
    parser.add_argument("--out", type=Path, default=None, help="output folder (default: beside results.json)")
    args = parser.parse_args(argv)
    try:
        rows = json.loads(args.results.read_text())
    except FileNotFoundError:
        print(f"error: {args.results} not found", file=sys.stderr)
        sys.exit(1)
    except json.JSONDecodeError as e:
        print(f"error: {args.results} is not valid JSON ({e.msg} at line {e.lineno})", file=sys.stderr)
        sys.exit(1)
    if not isinstance(rows, list) or not all(isinstance(r, dict) and "ppl" in r for r in rows):
        print(f"error: {args.results} is not an eval.extrapolation results.json (a list of rows)", file=sys.stderr)
        sys.exit(1)
    for path in plot_results(rows, args.out or args.results.parent):
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
