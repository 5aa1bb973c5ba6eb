"""The attention probe's report (eval/heads.py measures, this renders): heads.md and heads.png from heads.json."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from eval.results.plots import plt
from eval.results.tasks import LEARNED


RESULTS = "heads.json"


def ordered(rows: list[dict]) -> tuple[list[tuple], list[str], dict[tuple, dict]]:
    """(runs by encoding then seed, tasks in their first order, {(run, seed, task): row})."""
    runs = sorted({(r["run"], r["seed"]) for r in rows})
    return runs, list(dict.fromkeys(r["task"] for r in rows)), {(r["run"], r["seed"], r["task"]): r for r in rows}


def top_head(share) -> str:
    """'layer.head share' of the head with the largest share (layers x heads)."""
    share = np.array(share)
    layer, head = np.unravel_index(share.argmax(), share.shape)
    return f"{layer}.{head} {share[layer, head]:.2f}"


def markdown(rows: list[dict]) -> str:
    runs, tasks, by_key = ordered(rows)
    length = rows[0].get("length") if rows else None  # one length a file: main refuses to mix them
    at = "at L" if length is None else f"of {length} tokens"
    lines = ["# Where the heads look", "",
             f"Per run and task: the accuracy (%) on the answers of the validation sequences {at}, and the head that "
             "gives the token holding the answer most attention from the token that asks for it (layer.head, "
             "counted from 0), with its mean share.", "",
             "| run | seed | " + " | ".join(tasks) + " |", "|---|---:|" + "---|" * len(tasks)]
    for run, seed in sorted(runs, key=lambda rs: (rs[1], rs[0])):
        out = []
        for task in tasks:
            r = by_key.get((run, seed, task))
            if r is None:
                out.append("")
                continue
            out.append(f"{100 * r['accuracy']:.0f} · {top_head(r['share'])}")
        lines.append(f"| {run} | {seed} | " + " | ".join(out) + " |")
    with_previous = [t for t in tasks if any("previous" in r for r in rows if r["task"] == t)]
    if with_previous:
        lines += ["", "The induction tasks' first half: the head that gives a fact's token the most attention on the token "
                  "before it (the key, for recall), with its mean share.", "",
                  "| run | seed | " + " | ".join(with_previous) + " |", "|---|---:|" + "---|" * len(with_previous)]
        for run, seed in sorted(runs, key=lambda rs: (rs[1], rs[0])):
            out = [top_head(r["previous"]) if "previous" in (r := by_key.get((run, seed, task), {})) else ""
                   for task in with_previous]
            lines.append(f"| {run} | {seed} | " + " | ".join(out) + " |")
    unlearned = [r for r in rows if r["accuracy"] < LEARNED and len(r.get("by_order", ())) > 1]
    if unlearned:
        lines += ["", f"Where a run is below {100 * LEARNED:.0f}% on a task of several answers: its accuracy (%) on "
                  "each answer in the order they are asked, beside a solver that knows the answers the facts hold "
                  "but not which question each belongs to and gives one not yet given (`bag_solver`).", "",
                  "| run | seed | task | accuracy | by order | the solver | by order |", "|---|---:|---|---:|---|---:|---|"]
        for r in sorted(unlearned, key=lambda r: (r["task"], r["run"], r["seed"])):
            bag = np.mean(r["bag_by_order"])
            lines.append(f"| {r['run']} | {r['seed']} | {r['task']} | {100 * r['accuracy']:.0f} | "
                         f"{' '.join(f'{100 * a:.0f}' for a in r['by_order'])} | {100 * bag:.0f} | "
                         f"{' '.join(f'{100 * a:.0f}' for a in r['bag_by_order'])} |")
    return "\n".join(lines) + "\n"


def plot(rows: list[dict], path: Path) -> None:
    """A panel per run and task: the attention share on the fact, layer (rows) by head (columns)."""
    runs, tasks, by_key = ordered(rows)
    fig, axes = plt.subplots(len(runs), len(tasks), figsize=(1.6 * len(tasks) + 1.5, 0.75 * len(runs) + 0.8),
                             squeeze=False)
    image = None
    for i, (run, seed) in enumerate(runs):
        for j, task in enumerate(tasks):
            ax, r = axes[i][j], by_key.get((run, seed, task))
            ax.set_xticks([])
            ax.set_yticks([])
            if r is None:
                ax.axis("off")
                continue
            image = ax.imshow(np.array(r["share"]), vmin=0, vmax=1, cmap="viridis", aspect="auto")
            ax.set_title(f"{100 * r['accuracy']:.0f}%", fontsize=7, pad=2)
            if i == 0:
                ax.text(0.5, 1.6, task, transform=ax.transAxes, ha="center", fontsize=9)
            if j == 0:
                ax.set_ylabel(f"{run} {seed}", fontsize=8, rotation=0, ha="right", va="center")
    fig.colorbar(image, ax=[ax for row in axes for ax in row], shrink=0.5,
                 label="attention share on the fact (panel: layers down, heads across; title: accuracy)")
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
