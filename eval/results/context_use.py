"""The context-use report (eval/context_use.py measures, this renders): results.json and results.md, the loss of fixed
targets by the context c before them, the gain past L and the LongPPL key tokens, each a mean over documents with its
95% t interval (a document is the unit: its spans, and its seeds where a run has several, are averaged first)."""
from __future__ import annotations

import json
import math
import statistics
from collections import defaultdict
from pathlib import Path

from checkpoint import atomic_write_text
from eval.results.rows import curve_label

Z975 = 1.959964  # the normal's 97.5% point
# Student's t 97.5% points for 1-30 degrees of freedom; past 30 a Cornish-Fisher expansion (below)
T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
        2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042)


def row_key(r: dict) -> tuple:
    """What identifies a row: a model variant, a document span and a context length."""
    return r["run"], r["seed"], r["scaling"], r["document"], r["span"], r["context_tokens"]


def t975(df: int) -> float:
    """Student's t 97.5% point for df >= 1 degrees of freedom (tabled to 30; the expansion is within 1e-4 past it)."""
    if df <= len(T975):
        return T975[df - 1]
    z = Z975
    return z + (z ** 3 + z) / (4 * df) + (5 * z ** 5 + 16 * z ** 3 + 3 * z) / (96 * df ** 2)


def interval(values: list[float]) -> tuple[float, float | None]:
    """(mean, half-width of its 95% t interval, None for a single unit) of independent units."""
    mean = statistics.fmean(values)
    if len(values) < 2:
        return mean, None
    return mean, t975(len(values) - 1) * statistics.stdev(values) / math.sqrt(len(values))


def by_document(rows: list[dict], field: str) -> list[float]:
    """rows[field] averaged within each document (over its spans and seeds), one value a document; rows where the
    field is None (not applicable, or no key token) are left out."""
    per_doc: dict[str, list[float]] = defaultdict(list)
    for r in rows:
        if r.get(field) is not None:
            per_doc[r["document"]].append(r[field])
    return [statistics.fmean(v) for v in per_doc.values()]


def format_interval(values: list[float], digits: int = 3, signed: bool = False) -> str:
    if not values:
        return "n/a"
    mean, half = interval(values)
    text = f"{mean:+.{digits}f}" if signed else f"{mean:.{digits}f}"
    return text + (f" ± {half:.{digits}f}" if half is not None else "")


def groups(rows: list[dict]) -> dict[tuple, list[dict]]:
    """{(run, position, scaling label, L): its rows} in first-seen order."""
    out: dict[tuple, list[dict]] = {}
    for r in rows:
        out.setdefault((r["run"], r["position"], curve_label(r), r["train_length"]), []).append(r)
    return out


def markdown(rows: list[dict]) -> str:
    """Loss by context c (mean ± 95% t over documents), the gain past L and the key tokens, one line per run and
    scaling, and a legend."""
    contexts = sorted({r["context_tokens"] for r in rows})
    table = groups(rows)
    lines = ["# Context used, on the same targets", "",
             "## Loss of the same targets by the context before them (nats)", "",
             "| run | position | scaling | L | documents | " + " | ".join(f"c={c}" for c in contexts) + " |",
             "|---|---|---|---:|---:|" + "---:|" * len(contexts)]
    for (run, position, label, L), rs in table.items():
        cells = []
        for c in contexts:
            at = [r for r in rs if r["context_tokens"] == c]
            cells.append("" if not at else format_interval(by_document(at, "loss")))
        lines.append(f"| {run} | {position} | {label} | {L} | {len({r['document'] for r in rs})} | "
                     + " | ".join(cells) + " |")
    lines += ["", "## Past L: the gain and the key tokens (LongPPL)", "",
              "| run | scaling | L | short c | long c | gain past L | key share | key loss, short | key loss, long |",
              "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for (run, position, label, L), rs in table.items():
        shorts = sorted({r["short_context"] for r in rs if r.get("short_context") is not None})
        longs = sorted({r["long_context"] for r in rs if r.get("long_context") is not None})
        # span-level fields repeat in every row of a span: read them from the rows of its longest context
        span_rows = [r for r in rs if r["context_tokens"] == r.get("long_context")]
        short_rows = [r for r in rs if r["context_tokens"] == r.get("short_context")]
        lines.append(f"| {run} | {label} | {L} | {'/'.join(map(str, shorts)) or 'n/a'} | "
                     f"{'/'.join(map(str, longs)) or 'n/a'} | "
                     f"{format_interval(by_document(span_rows, 'gain_past_L'), signed=True)} | "
                     f"{format_interval(by_document(span_rows, 'key_share'))} | "
                     f"{format_interval(by_document(short_rows, 'key_loss'))} | "
                     f"{format_interval(by_document(span_rows, 'key_loss'))} |")
    targets = sorted({r["targets"] for r in rows})
    margin = sorted({r["margin"] for r in rows})
    floor = sorted({r["floor"] for r in rows})
    split = rows[0]["split"] if rows else "test"
    lines += ["",
              f"The same {'/'.join(map(str, targets)) or 'T'} target tokens of each {split} document span (its last "
              "tokens) scored with c tokens of context before them: the model reads c + T tokens and its last T "
              "predictions are scored (Khandelwal et al., arXiv 1805.04623). Each cell is the mean over documents "
              "± the half-width of its 95% t interval (a document is the unit: its spans, and seeds, averaged "
              "first).",
              "",
              "- gain past L: the loss at the short c (c = L, or the largest c below it) minus the loss at the "
              "longest c; positive: the targets are predicted better with the context past L.",
              f"- key share: the share of targets whose log-probability with the longest c exceeds that with the "
              f"short c by more than {'/'.join(map(str, margin))} nats and is above {'/'.join(map(str, floor))} "
              "(LongPPL's key tokens, Fang et al., arXiv 2410.23771); key loss: the loss on those tokens at the short "
              "and the longest c (documents with no key token left out; exp of the long one is LongPPL).",
              "- The floor: a model that reads nothing past L (the loss at c = L itself, or the `sinks` context "
              "method) has gain 0 and no key token; use of the context past L is claimed only where the gain's "
              "interval lies above the floor's.",
              "- A static scaling has one factor, s = (longest c + T) / L, at every c, so the model is the same at "
              "every c; a dynamic one decodes through the KV cache; a fine-tune runs with its own scaling.",
              "- results.json has every (document span, c): the loss, the key loss and the span's gain and key share "
              "(repeated in each of the span's rows)."]
    notes = sorted({f"{r['run']} @ c={r['context_tokens']}: {r['note']}" for r in rows if r.get("note")})
    if notes:
        lines += ["", "Not applicable:", ""] + [f"- {n}" for n in notes]
    return "\n".join(lines) + "\n"


def write_report(rows: list[dict], out: Path) -> list[Path]:
    """results.json and results.md in out; returns the paths written."""
    atomic_write_text(out / "results.json", json.dumps(rows, indent=2, allow_nan=False) + "\n")
    atomic_write_text(out / "results.md", markdown(rows))
    return [out / "results.json", out / "results.md"]
