"""Perplexity at and beyond the training length, for every run, length and RoPE scaling method.

    python -m eval.extrapolation runs/tiny runs/tiny-alibi --lengths 256,512,1024,2048,4096 \
        --scaling none,linear,ntk,dynamic,yarn,dynamic-yarn [--split test] [--stride 128] \
        [--max-tokens 32768] [--batch-size 4] [--device cpu] [--out reports/extrapolation]

The protocol is the ALiBi paper's (Press et al., arXiv 2108.12409): windows of `length` tokens
inside held-out documents, non-overlapping by default, or sliding with --stride so that every
target is scored once with at least length - stride tokens of context. Every length scores the
same budget of tokens (--max-tokens), so the numbers differ only by context length.

Which scalings apply to which run:
  - rope, trained without scaling: every method in --scaling. Static methods (linear = PI,
    arXiv 2306.15595; ntk; yarn, arXiv 2309.00071) get s = max(1, length / L), L = the run's
    max_seq_len, so at length <= L they are plain RoPE. The dynamic methods know no target
    length: `dynamic` runs with factor 1, so b' = b * (T/L)^(d/(d-2)) for the current length T
    (the YaRN paper's Dynamic NTK, section 3.3), and `dynamic-yarn` uses s = max(1, T / L). In
    full-length windows they therefore equal ntk and yarn; they differ in generation, where T
    grows one token at a time.
  - rope fine-tuned with a scaling (config has model.position.scaling): that scaling only,
    labelled e.g. "yarn (fine-tuned)"; its L is original_max_position_embeddings.
  - every other encoding: `none` only. `learned` past its table is a row with ppl null and a
    note, never a clamped position.

Writes results.json (one row per measurement, rewritten after each, so an interrupted run keeps
what it finished), results.md (a table a person reads) and PNG plots (eval/plots.py).
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from tqdm import tqdm

from data import DataConfig, TokenData, prepare
from eval.memory import PeakMemory
from model.checkpoint import CheckpointError, atomic_write_text, load_model, model_config, read_pointer, read_run_config
from model.config import ConfigError, from_dict
from model.device import autocast, pick_device
from model.rope import SCALINGS

DEFAULT_LENGTHS = "256,512,1024,2048,4096"
DEFAULT_MAX_TOKENS = 32768
TOKENS_PER_FORWARD = 16384  # default batch = this // length (at least 1): bounds logits and attention memory
N_BUCKETS = 8  # position buckets of loss_by_position
STATIC = ("linear", "ntk", "yarn")  # methods whose factor is fixed when the model is built


class EvalError(ValueError):
    """A mistake on the command line; one-line message."""


@dataclass
class Run:
    path: Path
    name: str
    position: str  # encoding type
    train_length: int  # L: the training length, or the base run's for a fine-tuned run
    scaling: dict | None  # the run's own RoPE scaling (a context-extension fine-tune), else None
    data: DataConfig


@dataclass
class Measurement:
    run: Run
    label: str  # scaling column: a method name, or e.g. "yarn (fine-tuned)"
    scaling: dict | str | None  # what load_model gets
    factor: float | None
    length: int


def read_run(path: Path, name: str) -> Run:
    """Everything needed to plan a run's measurements; fails now rather than after the other runs."""
    read_pointer(path)  # raises CheckpointError when there is no checkpoint
    try:
        model = model_config(path)
        data = from_dict(DataConfig, read_run_config(path).get("data") or {}, "data")
    except ConfigError as e:
        raise CheckpointError(f"{path}/config.yaml: {e}") from None
    scaling = dict(model.position.scaling) if model.position.scaling else None
    L = model.max_seq_len
    if scaling:
        L = scaling.get("original_max_position_embeddings") or L
    return Run(path, name, model.position.type, int(L), scaling, data)


def plan(run: Run, methods: list[str], lengths: list[int]) -> list[Measurement]:
    """The (scaling, length) measurements of one run, in table order."""
    out = []
    if run.position != "rope":
        return [Measurement(run, "none", None, None, n) for n in lengths]
    if run.scaling:
        kind = run.scaling.get("type", run.scaling.get("rope_type", "none"))
        for n in lengths:
            factor = max(1.0, n / run.train_length) if kind == "dynamic-yarn" else run.scaling.get("factor")
            out.append(Measurement(run, f"{kind} (fine-tuned)", "from-run", factor, n))
        return out
    for method in methods:
        for n in lengths:
            s = max(1.0, n / run.train_length)
            factor = 1.0 if method == "dynamic" else s
            if method == "none" or (method in STATIC and s == 1.0):
                # A static method with s = 1 is plain RoPE; loading it as such makes the rows
                # identical, not merely equal up to float rounding.
                scaling = None
            else:
                scaling = {"type": method, "factor": factor, "original_max_position_embeddings": run.train_length}
            out.append(Measurement(run, method, scaling, None if method == "none" else factor, n))
    return out


@torch.inference_mode()
def token_losses(model, data: TokenData, windows, length: int, batch_size: int, device):
    """Sum and count of next-token losses by position in the window, (length,) each, over the
    scored targets of `windows` (the last n_scored of each)."""
    loss_sum = torch.zeros(length, dtype=torch.float64)
    count = torch.zeros(length, dtype=torch.int64)
    pos = torch.arange(length, device=device)
    for i in range(0, len(windows), batch_size):
        chunk = windows[i:i + batch_size]
        tokens = torch.stack([data.window_tensor(s, e) for s, e, _ in chunk]).to(device)  # (B, length+1)
        n_scored = torch.tensor([n for _, _, n in chunk], device=device)
        with autocast(device):
            logits, _ = model(tokens[:, :-1])  # (B, length, V)
        scored = pos[None, :] >= length - n_scored[:, None]  # (B, length)
        if scored.all():  # non-overlapping windows: no copy of the logits
            nll = F.cross_entropy(logits.flatten(0, 1).float(), tokens[:, 1:].flatten(), reduction="none")
        else:
            nll = F.cross_entropy(logits[scored].float(), tokens[:, 1:][scored], reduction="none")  # (N,)
        where = pos.expand_as(scored)[scored].cpu()
        loss_sum.index_add_(0, where, nll.double().cpu())
        count += torch.bincount(where, minlength=length)
    return loss_sum, count


def buckets(loss_sum: torch.Tensor, count: torch.Tensor, n: int = N_BUCKETS) -> list[dict]:
    length = len(loss_sum)
    edges = [round(k * length / min(n, length)) for k in range(min(n, length) + 1)]
    out = []
    for a, b in zip(edges, edges[1:]):
        c = int(count[a:b].sum())
        out.append({"start": a, "end": b, "loss": round(float(loss_sum[a:b].sum()) / c, 5) if c else None})
    return out


class Evaluator:
    """Measures rows, reusing loaded models, token data, windows and identical measurements."""

    def __init__(self, split: str, stride: int | None, max_tokens: int, batch_size: int | None, device: str):
        self.split, self.stride, self.max_tokens, self.batch_size = split, stride, max_tokens, batch_size
        self.device = torch.device(device)
        self.data: dict[str, TokenData] = {}
        self.model_key, self.model = None, None
        self.done: dict[tuple, dict] = {}

    def token_data(self, cfg: DataConfig) -> TokenData:
        key = json.dumps(cfg.__dict__, sort_keys=True)
        if key not in self.data:
            self.data[key] = TokenData(prepare(cfg), self.split)
        return self.data[key]

    def load(self, m: Measurement):
        key = (str(m.run.path), json.dumps(m.scaling, sort_keys=True))
        if key != self.model_key:
            self.model = None  # free the previous model before building the next
            self.model = load_model(m.run.path, scaling=m.scaling, device=self.device)
            if self.device.type == "cuda":
                self.model.use_flex_attention(True)  # ALiBi without a T x T bias in memory
            self.model_key = key
        return self.model

    def measure(self, m: Measurement) -> dict:
        run, n = m.run, m.length
        stride = min(self.stride or n, n)  # a stride longer than the window means non-overlapping
        row = {"run": run.name, "position": run.position, "scaling": m.label,
               "factor": None if m.factor is None else round(m.factor, 6), "length": n,
               "train_length": run.train_length, "multiple": round(n / run.train_length, 4),
               "ppl": None, "nll": None, "tokens": 0, "windows": 0, "split": self.split, "stride": stride,
               "loss_by_position": None, "tokens_per_s": None, "peak_mib": None, "note": None}
        model = self.load(m)
        limit = model.position.max_positions
        if limit is not None and n > limit:
            return {**row, "note": f"{run.position} positions stop at {limit - 1}"}
        key = (self.model_key, n)
        if key not in self.done:
            self.done[key] = self.compute(run, model, n, stride)
        return {**row, **self.done[key]}

    def compute(self, run: Run, model, n: int, stride: int) -> dict:
        data = self.token_data(run.data)
        windows = data.eval_windows(n, max_tokens=self.max_tokens, stride=stride)
        if not windows:
            return {"note": f"no {self.split} document is longer than {n} tokens"}
        batch = self.batch_size or max(1, TOKENS_PER_FORWARD // n)
        with PeakMemory(self.device) as memory:
            t0 = time.perf_counter()
            loss_sum, count = token_losses(model, data, windows, n, batch, self.device)
            seconds = time.perf_counter() - t0
        tokens = int(count.sum())
        nll = float(loss_sum.sum()) / tokens
        note = None
        if tokens < self.max_tokens:
            note = f"{self.split} documents hold only {tokens} tokens of the {self.max_tokens}-token budget"
        return {"ppl": math.exp(nll), "nll": nll, "tokens": tokens, "windows": len(windows),
                "loss_by_position": buckets(loss_sum, count), "tokens_per_s": round(tokens / seconds, 1),
                "peak_mib": round(memory.mib, 1),
                "note": note}


# ----------------------------------------------------------------------------- report

def format_ppl(ppl: float | None) -> str:
    if ppl is None:
        return "n/a"
    return f"{ppl:.2f}" if ppl < 1e4 else f"{ppl:.2e}"


def markdown(rows: list[dict]) -> str:
    """One table row per (run, scaling), one column per length, and a legend."""
    lengths = sorted({r["length"] for r in rows})
    table: dict[tuple, dict] = {}
    for r in rows:
        table.setdefault((r["run"], r["position"], r["scaling"], r["train_length"]), {})[r["length"]] = r
    lines = ["# Perplexity by evaluation length", "",
             "| run | position | scaling | L | " + " | ".join(str(n) for n in lengths) + " |",
             "|---|---|---|---:|" + "---:|" * len(lengths)]
    for (run, position, scaling, L), cells in table.items():
        values = [format_ppl(cells[n]["ppl"]) if n in cells else "" for n in lengths]
        lines.append(f"| {run} | {position} | {scaling} | {L} | " + " | ".join(values) + " |")
    measured = [r for r in rows if r["ppl"] is not None]
    split = rows[0]["split"] if rows else "test"
    strides = {r["stride"] for r in rows if r["stride"] != r["length"]}
    protocol = (f"sliding windows (stride {', '.join(map(str, sorted(strides)))}; each target scored once)"
                if strides else "non-overlapping windows")
    tokens = sorted({r["tokens"] for r in measured})
    token_text = (f"{tokens[0]:,}" if len(tokens) == 1 else f"{tokens[0]:,} to {tokens[-1]:,}") if tokens else "no"
    lines += ["", f"Perplexity (exp of the mean next-token loss) on the {split} split: {protocol} inside "
              f"documents, {token_text} scored tokens per cell (ALiBi paper protocol, arXiv 2108.12409).", "",
              "- L: training length (for a fine-tuned run, the base run's); lengths above L are extrapolation.",
              "- linear (PI), ntk, yarn: static, factor s = max(1, length / L), so plain RoPE up to L. "
              "dynamic (factor 1: NTK base stretched by T / L) and dynamic-yarn (s = T / L) follow the current "
              "length T, so in these full-length windows they equal ntk and yarn; they differ in generation.",
              "- \"(fine-tuned)\": a context-extension run evaluated with the scaling it was trained with.",
              "- n/a: not applicable (learned positions past their table) or no document long enough.",
              "- results.json has the factor, token and window counts, loss by position bucket, "
              "throughput and memory of every cell."]
    notes = sorted({f"{r['run']} @ {r['length']}: {r['note']}" for r in rows if r["note"] and r["ppl"] is None})
    if notes:
        lines += ["", "Not applicable:", ""] + [f"- {n}" for n in notes]
    return "\n".join(lines) + "\n"


def write_report(rows: list[dict], out: Path, plots: bool = True) -> None:
    atomic_write_text(out / "results.json", json.dumps(rows, indent=2) + "\n")
    atomic_write_text(out / "results.md", markdown(rows))
    if plots:
        from eval.plots import plot_results
        plot_results(rows, out)


# ----------------------------------------------------------------------------- command line

def parse_lengths(text: str) -> list[int]:
    try:
        lengths = sorted({int(x) for x in text.split(",") if x.strip()})
    except ValueError:
        raise EvalError(f"--lengths must be comma-separated integers, got {text!r}") from None
    if not lengths or lengths[0] < 1:
        raise EvalError(f"--lengths must be positive integers, got {text!r}")
    return lengths


def parse_scalings(text: str) -> list[str]:
    names = [x.strip() for x in text.split(",") if x.strip()]
    unknown = [x for x in names if x not in SCALINGS]
    if unknown or not names:
        raise EvalError(f"unknown RoPE scaling {unknown[0] if unknown else text!r}; "
                        f"choose from {', '.join(SCALINGS)}")
    return list(dict.fromkeys(names))


def run_names(paths: list[Path]) -> list[str]:
    """Run directory names, or the paths as given where two runs share a name."""
    names = [p.name for p in paths]
    return [n if names.count(n) == 1 else str(p) for n, p in zip(names, paths)]


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="+", type=Path, help="run directories")
    parser.add_argument("--lengths", default=DEFAULT_LENGTHS, help=f"evaluation lengths (default {DEFAULT_LENGTHS})")
    parser.add_argument("--scaling", default=",".join(SCALINGS),
                        help="RoPE scaling methods for unscaled rope runs (default: all)")
    parser.add_argument("--split", default="test", choices=("train", "val", "test"))
    parser.add_argument("--stride", type=int, default=None, help="sliding-window stride (default: non-overlapping)")
    parser.add_argument("--max-tokens", type=int, default=DEFAULT_MAX_TOKENS,
                        help=f"scored tokens per measurement, the same at every length (default {DEFAULT_MAX_TOKENS})")
    parser.add_argument("--batch-size", type=int, default=None,
                        help=f"windows per forward pass (default: {TOKENS_PER_FORWARD} // length, at least 1)")
    parser.add_argument("--device", default="auto", help="auto (cuda, then mps, then cpu), cpu, cuda ...")
    parser.add_argument("--out", type=Path, default=Path("reports/extrapolation"))
    args = parser.parse_args(argv)

    rows: list[dict] = []
    try:
        lengths, methods = parse_lengths(args.lengths), parse_scalings(args.scaling)
        if args.stride is not None and args.stride < 1:
            raise EvalError(f"--stride must be >= 1, got {args.stride}")
        if args.batch_size is not None and args.batch_size < 1:
            raise EvalError(f"--batch-size must be >= 1, got {args.batch_size}")
        if args.max_tokens < lengths[-1]:
            raise EvalError(f"--max-tokens ({args.max_tokens}) must be at least the longest length ({lengths[-1]})")
        runs = [read_run(p, name) for p, name in zip(args.runs, run_names(args.runs))]
        measurements = [m for run in runs for m in plan(run, methods, lengths)]
        evaluator = Evaluator(args.split, args.stride, args.max_tokens, args.batch_size, pick_device(args.device))
        args.out.mkdir(parents=True, exist_ok=True)
        bar = tqdm(measurements, unit="measurement", dynamic_ncols=True)
        for m in bar:
            bar.set_description(f"{m.run.name} | {m.label} | {m.length}")
            row = evaluator.measure(m)
            rows.append(row)
            write_report(rows, args.out, plots=False)  # finished rows survive a crash or Ctrl-C
            bar.write(f"{row['run']} | {row['scaling']} | {row['length']}: ppl {format_ppl(row['ppl'])} "
                      f"({row['tokens']} tokens, {row['windows']} windows)"
                      + (f" [{row['note']}]" if row["note"] else ""))
        bar.close()
        write_report(rows, args.out)
    except (KeyboardInterrupt, EvalError, ConfigError, CheckpointError) as e:
        kept = f" ({len(rows)} finished measurements are in {args.out})" if rows else ""
        if rows:
            write_report(rows, args.out)
        print(f"error: {str(e) or 'interrupted'}{kept}", file=sys.stderr)
        sys.exit(130 if isinstance(e, KeyboardInterrupt) else 1 if isinstance(e, CheckpointError) else 2)
    print(markdown(rows))
    peak = max((r["peak_mib"] for r in rows if r["peak_mib"] is not None), default=0)
    print(f"wrote {args.out}/results.json, results.md, ppl_vs_length.png, loss_vs_position.png | "
          f"peak memory {peak:,.0f} MiB")
    return rows


if __name__ == "__main__":
    main()
