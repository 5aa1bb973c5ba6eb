"""Plots of length-extrapolation results, from eval.extrapolation's rows or its results.json:

    python -m eval.results.plots studies/text/results.json [--out DIR]

ppl_vs_length.png     perplexity vs evaluation length (log-log), one line per (run, scaling): the mean
                      over seeds, with a band from the lowest to the highest seed; left the encodings
                      and the fine-tunes, right the RoPE scalings of the base RoPE run
loss_vs_position.png  at the longest length, each run's loss by position bucket minus NoPE's on the
                      same windows (same seed), so degradation at tail positions is visible rather
                      than averaged away, and text difficulty cancels (drawn where there is a NoPE run)
training.png          (plot_training, drawn by eval.summary beside training.md) validation loss
                      against training step, the mean over seeds with the same band

    python -m eval.results.plots studies/text/context/*/results.json --out studies/text/context

With several results.json (make study-context's, one per context method), it draws methods_vs_length.png
instead: a panel per run, a line per method, `none` (no method, the same checkpoints) dashed black.
"""
from __future__ import annotations

import json
import statistics
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only; no display needed
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib import ticker  # noqa: E402

from config import ArgumentParser, UserError, run_cli  # noqa: E402
from eval.results.rows import curves, relative_to_nope  # noqa: E402


def style(i: int) -> dict:
    # tab10 colours first, then the same colours dash-dotted. A marker per line keeps curves that
    # coincide (static and fixed factors at one length, say) both visible.
    return {"color": plt.get_cmap("tab10")(i % 10), "linestyle": "-" if i < 10 else "-.",
            "marker": "osv^D<>px*"[i % 10], "markersize": 4, "markerfacecolor": "none", "linewidth": 1.5}


def panels(keys: list[tuple]) -> tuple[list[tuple], list[tuple]]:
    """(encodings and fine-tunes, RoPE scalings of unscaled RoPE runs)."""
    scalings = [k for k in keys if k[1] == "rope" and k[2] != "none" and "(fine-tuned)" not in k[2]]
    return [k for k in keys if k not in scalings], scalings


def legend_label(key: tuple) -> str:
    run, position, label, _ = key
    return run if label == "none" else f"{run}: {label}"


def log_ticks(low: float, high: float, n: int = 6) -> list[float]:
    """About n ticks spread evenly on a log axis from low to high, each rounded to two significant figures,
    so every tick is labelled whatever the range (matplotlib labels only the decades, or too many)."""
    if not (0 < low < high):
        return [low] if low > 0 else []
    ratio = (high / low) ** (1 / (n - 1))
    return sorted({float(f"{low * ratio ** i:.2g}") for i in range(n)})


def mark_training_lengths(ax, keys: list[tuple]) -> None:
    for i, L in enumerate(sorted({k[3] for k in keys})):
        ax.axvline(L, color="grey", linestyle="--", linewidth=1, label="training length" if i == 0 else None)


def format_log_axes(ax, ppls: list[float]) -> None:
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.xaxis.set_major_formatter(ticker.StrMethodFormatter("{x:.0f}"))
    if ppls:
        ax.yaxis.set_major_locator(ticker.FixedLocator(log_ticks(min(ppls), max(ppls))))
    ax.yaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _: f"{v:,.0f}" if v >= 100 else f"{v:.3g}"))  # 1,508
    ax.yaxis.set_minor_formatter(ticker.NullFormatter())
    ax.set_xlabel("evaluation length (tokens)")
    ax.grid(True, which="both", alpha=0.3)


REFERENCE = {"color": "black", "linestyle": "--", "marker": None, "linewidth": 1.5}  # the curve the others are judged by


def seed_band(curve: dict[int, list[dict]]) -> list[tuple]:
    """(length, mean, lowest, highest) of a curve's perplexity over seeds, at each length every seed measured."""
    points = []
    for length, rs in sorted(curve.items()):
        values = [r["ppl"] for r in rs if r["ppl"] is not None]
        if values and len(values) == len(rs):
            points.append((length, statistics.fmean(values), min(values), max(values)))
    return points


def plot_ppl_vs_length(rows: list[dict], path: Path) -> None:
    table = curves(rows)
    fig, axes = plt.subplots(1, 2, figsize=(14, 5.5), sharey=True)
    ppls = [r["ppl"] for r in rows if r["ppl"] is not None]
    encodings, scalings = panels(list(table))
    # the unscaled RoPE runs, drawn again in the scalings panel as the reference each scaling is judged by
    references = [k for k in encodings if k[1] == "rope" and k[2] == "none"] if scalings else []
    for ax, keys, title in zip(axes, (encodings, references + scalings), ("Encodings and context-extension fine-tunes",
                                                                         "RoPE scalings without training")):
        for i, key in enumerate(keys):
            points = seed_band(table[key])
            if points:
                x, mean, low, high = zip(*points)
                st = style(i)
                if ax is axes[1] and key in references:
                    st = {**st, **REFERENCE}
                ax.plot(x, mean, label=legend_label(key) + (" (reference)" if ax is axes[1] and key in references else ""),
                        **st)
                ax.fill_between(x, low, high, color=st["color"], alpha=0.15, linewidth=0)
        mark_training_lengths(ax, keys)
        format_log_axes(ax, ppls)
        ax.set_title(title)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7, loc="upper left")
        else:
            ax.text(0.5, 0.5, "no run here", transform=ax.transAxes, ha="center", color="gray")
    seeds = len({r["seed"] for r in rows})
    axes[0].set_ylabel(f"perplexity ({rows[0]['split'] if rows else 'test'} split; mean of {seeds} seed(s), "
                       "band: min to max)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_context_methods(rows: list[dict], path: Path) -> None:
    """A panel per run, a line per context method (the scaling column: a method's name, or "none" dashed black):
    the mean over seeds with a band from the lowest to the highest seed."""
    table = curves(rows)
    runs = list(dict.fromkeys(key[0] for key in table))
    methods = list(dict.fromkeys(key[2] for key in sorted(table, key=lambda k: k[2] != "none")))  # a colour each
    fig, axes = plt.subplots(1, len(runs), figsize=(5 * len(runs), 4.5), sharey=True, squeeze=False)
    for ax, run in zip(axes[0], runs):
        keys = sorted((k for k in table if k[0] == run), key=lambda k: methods.index(k[2]))
        for key in keys:
            points = seed_band(table[key])
            if not points:
                continue
            x, mean, low, high = zip(*points)
            st = REFERENCE if key[2] == "none" else style(methods.index(key[2]))
            ax.plot(x, mean, label=key[2], **st)
            ax.fill_between(x, low, high, color=st["color"], alpha=0.12, linewidth=0)
        mark_training_lengths(ax, keys)
        format_log_axes(ax, [r["ppl"] for r in rows if r["ppl"] is not None])
        ax.set_title(run)
        ax.legend(fontsize=7, loc="upper left")
    seeds = len({r["seed"] for r in rows})
    axes[0][0].set_ylabel(f"perplexity (mean of {seeds} seed(s), band: min to max)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_loss_vs_position(rows: list[dict], path: Path, deltas: dict) -> None:
    """deltas: relative_to_nope(rows)."""
    longest = max((r["length"] for r in rows if r["loss_by_position"]), default=None)
    fig, axes = plt.subplots(1, 2, figsize=(14, 5.5), sharey=True)
    buckets = next((r["loss_by_position"] for r in rows if r["length"] == longest and r["loss_by_position"]), [])
    centres = [(b["start"] + b["end"]) / 2 for b in buckets]
    for ax, keys in zip(axes, panels([k for k in deltas if k[1] != "nope"])):
        for i, key in enumerate(keys):
            per_seed = deltas[key].get(longest)
            if per_seed and all(len(d) == len(centres) for d in per_seed):
                columns = list(zip(*per_seed))
                st = style(i)
                ax.plot(centres, [statistics.fmean(c) for c in columns], label=legend_label(key), **st)
                ax.fill_between(centres, [min(c) for c in columns], [max(c) for c in columns], color=st["color"],
                                alpha=0.15, linewidth=0)
        ax.axhline(0, color="black", linewidth=1, label="NoPE")
        mark_training_lengths(ax, keys)
        ax.set_xlabel("position in the window (bucket centre)")
        ax.set_title(f"Loss by position at length {longest}, minus NoPE's on the same windows" if longest
                     else "Loss by position (no data)", fontsize=10)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7, loc="upper left")
    axes[0].set_ylabel("mean next-token loss - NoPE's (nats; mean over seeds, band: min to max)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_training(by_step: dict[str, dict[int, dict]], path: Path) -> None:
    """Validation loss against step (eval.summary.by_step): the mean over seeds, a band from the
    lowest to the highest seed."""
    fig, ax = plt.subplots(figsize=(8, 5))
    for i, (run, cells) in enumerate(by_step.items()):
        steps = sorted(cells)
        st = style(i)
        ax.plot(steps, [statistics.fmean(cells[s]["loss"]) for s in steps], label=run, **st)
        ax.fill_between(steps, [min(cells[s]["loss"]) for s in steps], [max(cells[s]["loss"]) for s in steps],
                        color=st["color"], alpha=0.15, linewidth=0)
    ax.set_xlabel("training step")
    ax.set_ylabel("validation loss (nats; mean over seeds, band: min to max)")
    ax.set_title("Validation loss during training", fontsize=10)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def task_panels(curves: dict[tuple, dict]) -> tuple[list[str], list[list[tuple]]]:
    """(tasks, [keys of encodings and fine-tunes, keys of RoPE scalings]) of eval.tasks curves keyed
    (task, run, label)."""
    tasks = list(dict.fromkeys(k[0] for k in curves))
    scalings = [k for k in curves if k[2] != "none" and "(fine-tuned)" not in k[2]]
    return tasks, [[k for k in curves if k not in scalings], scalings]


def plot_task_accuracy(by_length: dict, by_distance: dict, learned: dict, out_dir: Path) -> None:
    """accuracy_vs_length.png and accuracy_vs_distance.png of eval.tasks: a column per task, the encodings
    and fine-tunes above, the RoPE scalings below; the mean over seeds with a band from the lowest to the
    highest seed; a curve of a run that did not learn the task at L is drawn dotted."""
    for panels, name, xlabel in ((by_length, "accuracy_vs_length.png", "evaluation length (multiples of L)"),
                                 (by_distance, "accuracy_vs_distance.png",
                                  "distance from the question back to the fact (tokens; band upper edge), longest length")):
        tasks, rows = task_panels(panels)
        if not tasks:
            continue
        fig, axes = plt.subplots(2, len(tasks), figsize=(4.2 * len(tasks), 8.5), sharey=True, squeeze=False)
        for r, keys in enumerate(rows):
            labels = list(dict.fromkeys((k[1], k[2]) for k in keys))
            for c, task in enumerate(tasks):
                ax = axes[r][c]
                for i, (run, label) in enumerate(labels):
                    cells = panels.get((task, run, label))
                    points = [(x if name.endswith("length.png") else x[1], list(v.values()))
                              for x, v in sorted(cells.items()) if None not in v.values()] if cells else []
                    if not points:
                        continue
                    x, values = zip(*points)
                    st = style(i)
                    if not all(learned.get((run, seed, task), True) for seed in cells[next(iter(cells))]):
                        st["linestyle"] = ":"
                    ax.plot(x, [100 * statistics.fmean(v) for v in values], label=run if label == "none" else f"{run}: {label}",
                            **st)
                    ax.fill_between(x, [100 * min(v) for v in values], [100 * max(v) for v in values],
                                    color=st["color"], alpha=0.12, linewidth=0)
                ax.set_xscale("log", base=2)
                ax.xaxis.set_major_formatter(ticker.FuncFormatter(
                    (lambda v, _: f"{v:g}x") if name.endswith("length.png") else (lambda v, _: f"{v:.0f}")))
                ax.set_ylim(-3, 103)
                ax.grid(True, alpha=0.3)
                ax.set_title(f"{task}: {'encodings and fine-tunes' if r == 0 else 'RoPE scalings'}", fontsize=9)
            axes[r][0].set_ylabel("answer accuracy (%; mean over seeds, band: min to max)", fontsize=8)
            if axes[r][-1].get_legend_handles_labels()[0]:
                axes[r][-1].legend(fontsize=6, loc="center left", bbox_to_anchor=(1.02, 0.5))
        fig.supxlabel(xlabel, fontsize=9)  # once: under every column it overlaps its neighbours'
        fig.tight_layout()
        fig.savefig(out_dir / name, dpi=110)
        plt.close(fig)


def plot_task_training(curves: dict[str, dict[str, dict[int, list[float]]]], path: Path) -> None:
    """Validation answer accuracy against step, a panel per task: {task: {run: {step: [per seed]}}}, the
    mean over seeds with a band from the lowest to the highest seed."""
    if not curves:
        return
    fig, axes = plt.subplots(1, len(curves), figsize=(4.2 * len(curves), 4), sharey=True, squeeze=False)
    for ax, (task, runs) in zip(axes[0], curves.items()):
        for i, (run, cells) in enumerate(runs.items()):
            steps = sorted(cells)
            st = style(i)
            ax.plot(steps, [100 * statistics.fmean(cells[s]) for s in steps], label=run, **st)
            ax.fill_between(steps, [100 * min(cells[s]) for s in steps], [100 * max(cells[s]) for s in steps],
                            color=st["color"], alpha=0.12, linewidth=0)
        ax.axhline(90, color="grey", linestyle="--", linewidth=1)
        ax.set_title(f"{task}: validation accuracy at L", fontsize=9)
        ax.set_xlabel("training step")
        ax.set_ylim(-3, 103)
        ax.grid(True, alpha=0.3)
    axes[0][0].set_ylabel("answer accuracy (%; mean over seeds, band: min to max)", fontsize=8)
    axes[0][-1].legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_results(rows: list[dict], out_dir: str | Path) -> list[Path]:
    """Write the plots into out_dir (the loss by position only where there is a NoPE run to subtract); returns
    their paths."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = [out_dir / "ppl_vs_length.png"]
    plot_ppl_vs_length(rows, paths[0])
    deltas = relative_to_nope(rows)
    if deltas:
        paths.append(out_dir / "loss_vs_position.png")
        plot_loss_vs_position(rows, paths[1], deltas)
    return paths


def read_results(path: Path) -> list[dict]:
    try:
        rows = json.loads(path.read_text())
    except FileNotFoundError:
        raise UserError(f"{path} not found") from None
    except json.JSONDecodeError as e:
        raise UserError(f"{path} is not valid JSON ({e.msg} at line {e.lineno})") from None
    if not isinstance(rows, list) or not all(isinstance(r, dict) and "ppl" in r for r in rows):
        raise UserError(f"{path} is not an eval.extrapolation results.json (a list of rows)")
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = ArgumentParser(description="Re-draw the plots of an eval.extrapolation results.json, or draw several "
                                        "(one per context method) side by side.")
    parser.add_argument("results", type=Path, nargs="+", help="results.json written by python -m eval.extrapolation")
    parser.add_argument("--out", type=Path, default=None, help="output folder (default: beside the first results.json)")
    args = parser.parse_args(argv)
    rows = run_cli(lambda: [row for path in args.results for row in read_results(path)])
    out = args.out or args.results[0].parent
    if len(args.results) == 1:
        paths = plot_results(rows, out)
    else:
        out.mkdir(parents=True, exist_ok=True)
        paths = [out / "methods_vs_length.png"]
        plot_context_methods(rows, paths[0])
    for path in paths:
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
