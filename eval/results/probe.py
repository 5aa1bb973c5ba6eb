"""The context-use probes' report (eval/probe.py measures, this renders): probes.json, probes.md, probes.png."""
from __future__ import annotations

import json
import statistics
from collections import defaultdict
from pathlib import Path

from checkpoint import atomic_write_text
from eval.results.plots import plt, style, ticker


def markdown(rows: list[dict]) -> str:
    """Copy gain by distance (mean ± std over seeds) and passkey accuracy by length."""
    lines = ["# Context-use probes", ""]
    copy = [r for r in rows if r["probe"] == "copy"]
    distances = sorted({r["distance"] for r in copy})
    cells: dict[tuple, dict[int, list]] = defaultdict(lambda: defaultdict(list))
    for r in copy:
        cells[(r["run"], r["scaling"], r["train_length"])][r["distance"]].append(r.get("gain"))
    lines += ["## Copy: loss on a repeated span, gain over the same tokens without the first copy (nats)", "",
              "Positive: the model uses the tokens D back. Mean ± std over seeds; n/a: positions the encoding "
              "cannot represent.", "",
              "| run | scaling | L | " + " | ".join(f"D={d}" for d in distances) + " |",
              "|---|---|---:|" + "---:|" * len(distances)]
    for (run, scaling, L), by_d in cells.items():
        values = []
        for d in distances:
            gains = by_d.get(d, [])
            if not gains or any(g is None for g in gains):
                values.append("n/a" if gains else "")
            else:
                mean = statistics.fmean(gains)
                values.append(f"{mean:+.3f}" + (f" ± {statistics.stdev(gains):.3f}" if len(gains) > 1 else ""))
        lines.append(f"| {run} | {scaling} | {L} | " + " | ".join(values) + " |")
    passkey = [r for r in rows if r["probe"] == "passkey"]
    if passkey:
        candidates = next((r["candidates"] for r in passkey if r.get("candidates")), None)
        depths = sorted({r["depth"] for r in passkey})
        # rows from before the rank was recorded hold greedy accuracy, not the share ranked first, and no rank
        measure = "Passkey retrieval: share of keys ranked first" if candidates else "Passkey retrieval accuracy"
        lines += passkey_table(passkey, "value", "{:.2f}", f"{measure} (depths {', '.join(map(str, depths))}, all seeds)")
        if candidates:
            lines += passkey_table(passkey, "rank", "{:.1f}", f"Passkey: mean rank of the true key among "
                                   f"{candidates} candidate words (chance {(candidates + 1) / 2}; 1 is retrieval)")
    return "\n".join(lines) + "\n"


def passkey_table(rows: list[dict], key: str, fmt: str, title: str) -> list[str]:
    """Markdown lines: the mean of rows[key] by (run, scaling, L) and length."""
    lengths = sorted({r["length"] for r in rows})
    cells: dict[tuple, dict[int, list]] = defaultdict(lambda: defaultdict(list))
    for r in rows:
        cells[(r["run"], r["scaling"], r["train_length"])][r["length"]].append(r.get(key))
    lines = ["", f"## {title}", "", "| run | scaling | L | " + " | ".join(str(n) for n in lengths) + " |",
             "|---|---|---:|" + "---:|" * len(lengths)]
    for (run, scaling, L), by_n in cells.items():
        values = ["" if n not in by_n else "n/a" if any(v is None for v in by_n[n])
                  else fmt.format(statistics.fmean(by_n[n])) for n in lengths]
        lines.append(f"| {run} | {scaling} | {L} | " + " | ".join(values) + " |")
    return lines


def plot(rows: list[dict], path: Path) -> None:
    fig, axes = plt.subplots(1, 2, figsize=(14, 5.5))
    for ax, probe, x_key, y_key, title in ((axes[0], "copy", "multiple", "gain",
                                            "Copy: loss gain from a first copy D tokens back"),
                                           (axes[1], "passkey", "multiple", "value", "Passkey accuracy")):
        groups: dict[str, dict[float, list]] = defaultdict(lambda: defaultdict(list))
        for r in rows:
            if r["probe"] == probe and r.get(y_key) is not None:
                label = r["run"] if r["scaling"] == "none" else f"{r['run']}: {r['scaling']}"
                groups[label][r[x_key]].append(r[y_key])
        for i, (label, by_x) in enumerate(groups.items()):
            x, st = sorted(by_x), style(i)
            ax.plot(x, [statistics.fmean(by_x[v]) for v in x], label=label, **st)
            if probe == "copy":
                ax.fill_between(x, [min(by_x[v]) for v in x], [max(by_x[v]) for v in x], color=st["color"],
                                alpha=0.12, linewidth=0)
        ax.axvline(1, color="grey", linestyle="--", linewidth=1, label="training length")
        ax.axhline(0, color="black", linewidth=0.8)
        ax.set_xscale("log", base=2)
        ax.xaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _: f"{v:g}x"))
        ax.set_xlabel("distance back (copy) or sequence length (passkey), in multiples of L")
        ax.set_title(title)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7, loc="upper right")
    axes[0].set_ylabel("gain (nats): loss without the first copy - with it")
    axes[1].set_ylabel("accuracy (mean over depths and seeds)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def write_report(rows: list[dict], out: Path, tables: bool = True) -> None:
    """probes.json, and with `tables` probes.md and probes.png (eval.merge writes merged seeds this way)."""
    atomic_write_text(out / "probes.json", json.dumps(rows, indent=2, allow_nan=False) + "\n")
    if tables:
        atomic_write_text(out / "probes.md", markdown(rows))
        plot(rows, out / "probes.png")


def row_key(r: dict) -> tuple:
    """What identifies a probe measurement (--resume skips the ones a report has)."""
    return r["run"], r["seed"], r["scaling"], r["probe"], r.get("distance"), r.get("length"), r.get("depth")
