"""Perplexity at and beyond the training length, for every run, seed, length and RoPE scaling method.

    python -m eval.extrapolation runs/study/seed1/rope runs/study/seed1/alibi --lengths 128,256,512,1024,2048 \
        --scaling none,linear,ntk,dynamic,yarn,dynamic-yarn [--fixed-factors 4] [--split test] [--stride 64] \
        [--span 2048] [--max-tokens 32768] [--batch-size 4] [--decode-chunk 16] [--device cpu] \
        [--out runs/eval/extrapolation]
    python -m eval.extrapolation hf:.cache/smollm2/SmolLM2-135M-Instruct-Q4_1 --data ../shared/corpora/gutenberg \
        --lengths 8192,16384,32768 --scaling none,linear,ntk,dynamic,yarn --fixed-factors '' --out studies/smollm2

The protocol is the ALiBi paper's (Press et al., arXiv 2108.12409): windows of `length`
tokens inside held-out documents, non-overlapping by default (every target of a window scored). With
--stride the windows slide and each scores only its last `stride` targets, so every scored target
has at least length - stride tokens of context (a document's first length - stride targets are not
scored). Every length scores the same budget of tokens (--max-tokens), and every run at a length the
same windows, so runs differ only by model.

The budget's windows are taken round-robin over documents, so the lengths read different text: with
--max-tokens 32768, 8,192 reads the openings of four books and 32,768 of one. --span N makes every length
score the same targets, so lengths differ only by the context before them: each document's first N
targets (documents of N tokens or fewer are skipped), in non-overlapping windows of each length, which
must divide N; --max-tokens keeps the first max-tokens // N documents. The alternative is the YaRN repo's
protocol (jquesnelle/yarn, eval/perplexity.py): whole documents at every length, in a window sliding 256
tokens at a time, at length / 256 times the compute.

Which scalings apply to which run (L = the run's max_seq_len):
  - rope, trained from scratch without scaling: every method in --scaling.
      * static methods (linear = PI, arXiv 2306.15595; ntk; yarn, arXiv 2309.00071) twice: with the
        per-length factor s = max(1, length / L) (plain RoPE up to L), and with each fixed factor of
        --fixed-factors at every length, 1x included: the cost of a fixed s at short lengths.
      * dynamic methods run as in generation: the first L tokens of a window are prefilled, the rest
        decoded through the KV cache, each token with the frequencies of the current length T
        (`dynamic`: NTK with s = T / L, the YaRN paper's Dynamic NTK, section 3.3; `dynamic-yarn`: YaRN
        with s = T / L). Keys are cached before rotation and re-rotated. --decode-chunk tokens go through
        one forward pass, each still at its own length (Rope.chunk_context), so it sets speed only.
  - a run continued from another (train.init_from: a context-extension fine-tune or its control):
    only the scaling it was trained with (or none), labelled e.g. "yarn (fine-tuned)"; its L is
    original_max_position_embeddings when it has a scaling.
  - every other encoding: `none` only. `learned` past its table is a row with ppl null and a note,
    never a clamped position.
--context-method applies a training-free context method (model/context.py: self-extend, rerope,
leaky-rerope, dca, sinks, logn; a name or a mapping such as "{type: dca, chunk_size: 64}") to every
measurement, labelled e.g. "dca" or "yarn + dca"; --scaling then defaults to none, and a scaling or encoding
the method does not compose with is refused before anything is measured. Its defaults come from each run's
training length (a fine-tune's own); every row records the settings used (`context`).

A model is a run directory or hf:PATH, a transformers checkpoint (hf/checkpoints.py), which reads --data (default:
the default corpus) encoded with its own tokenizer, in the same document-contained windows; it takes the
scalings transformers has (not dynamic-yarn), and its dynamic NTK is transformers' (cached keys keep their
rotation); a context method runs through an attention function registered with transformers (hf/checkpoints.py). --data gives
a run other text too, encoded with the run's tokenizer.

Rows carry the run's seed (run.seed), so several seeds of one study aggregate in results.md
(mean and standard deviation over seeds). Writes results.json (one row per measurement, rewritten
after each, so an interrupted run keeps what it finished), results.md and PNG plots (eval/results/plots.py).
One evaluation writes an --out folder at a time (checkpoint.hold): a second is refused in one line.
"""
from __future__ import annotations

import json
import math
import time
from pathlib import Path

import torch
from tqdm import tqdm

from config import UserError
from data import TokenData
from device import PeakMemory, pick_device
from eval.harness import (
    CONTEXT_HELP,
    DATA_HELP,
    DECODE_CHUNK,
    DECODE_CHUNK_HELP,
    TOKENS_PER_FORWARD,
    Measurement,
    Models,
    Run,
    check_data_option,
    check_applicable,
    context_settings,
    evaluate,
    evaluator_parser,
    losses_in_parts,
    measurement_key,
    parse_factors,
    parse_lengths,
    parse_scalings,
    plan,
    read_runs,
    scalings_option,
    text_shards,
)
from model.context import parse_checked
from eval.results.extrapolation import format_ppl, markdown, row_key, write_report
from eval.results.rows import curve_label, previous_rows

DEFAULT_LENGTHS = "256,512,1024,2048,4096"
DEFAULT_MAX_TOKENS = 32768
# A context method past this many tokens reads each window through the KV cache this many queries at a time: its
# (queries x keys) scores and masks for a whole 32,768-token window took SmolLM2 past 20 GB (killed on a 23 GiB
# machine). The cached path gives the full pass's logits (tests/test_context.py).
QUERY_CHUNK = 4096
N_BUCKETS = 8  # position buckets of loss_by_position


def window_losses(model, x: torch.Tensor, y: torch.Tensor, decode_from: int | None, chunk: int) -> torch.Tensor:
    """Next-token losses (B, n) of windows x -> y (B, n each), in the parts `in_parts` runs, from the model's final
    hidden states a chunk of tokens at a time (harness.losses_in_parts: no (B, n, V) logits)."""
    return losses_in_parts(model, x, y, decode_from, chunk)


def token_losses(model, data: TokenData, windows, length: int, batch_size: int, device,
                 decode_from: int | None = None, chunk: int = DECODE_CHUNK):
    """Sum and count of next-token losses by position in the window, (length,) each, over the
    scored targets of `windows` (the last n_scored of each)."""
    loss_sum = torch.zeros(length, dtype=torch.float64)
    count = torch.zeros(length, dtype=torch.int64)
    pos = torch.arange(length)
    for i in range(0, len(windows), batch_size):
        chunk_windows = windows[i:i + batch_size]
        tokens = torch.stack([data.window_tensor(s, e) for s, e, _ in chunk_windows]).to(device)  # (B, length+1)
        scored = pos[None, :] >= length - torch.tensor([n for _, _, n in chunk_windows])[:, None]  # (B, length)
        targets = tokens[:, 1:].masked_fill(~scored.to(device), -1)  # only the scored tokens' logits are made
        nll = window_losses(model, tokens[:, :-1], targets, decode_from, chunk).double().cpu()
        loss_sum += (nll * scored).sum(0)
        count += scored.sum(0)
    return loss_sum, count


def buckets(loss_sum: torch.Tensor, count: torch.Tensor, n: int = N_BUCKETS) -> list[dict]:
    length = len(loss_sum)
    edges = [round(k * length / min(n, length)) for k in range(min(n, length) + 1)]
    out = []
    for a, b in zip(edges, edges[1:]):
        c = int(count[a:b].sum())
        out.append({"start": a, "end": b, "loss": finite(float(loss_sum[a:b].sum()) / c, 5) if c else None})
    return out


def finite(x: float, digits: int | None = None) -> float | None:
    """x, rounded, or None (JSON null) where it is not finite."""
    if not math.isfinite(x):
        return None
    return round(x, digits) if digits is not None else x


class Evaluator:
    """Measures rows, reusing loaded models, token data, windows and identical measurements."""

    def __init__(self, split: str, stride: int | None, max_tokens: int, batch_size: int | None, device: str,
                 decode_chunk: int = DECODE_CHUNK, span: int | None = None):
        self.split, self.stride, self.max_tokens, self.batch_size = split, stride, max_tokens, batch_size
        self.span = span
        self.device, self.decode_chunk = torch.device(device), decode_chunk
        self.data: dict[str, TokenData] = {}
        self.models = Models(self.device)
        self.done: dict[tuple, dict] = {}

    def token_data(self, run: Run) -> TokenData:
        key = json.dumps([run.data.__dict__, str(run.path) if run.retokenize else None], sort_keys=True)
        if key not in self.data:
            self.data[key] = TokenData(text_shards(run), self.split)
        return self.data[key]


    def measure(self, m: Measurement) -> dict:
        run, n = m.run, m.length
        stride = min(self.stride or n, n)  # a stride longer than the window means non-overlapping
        row = {"run": run.name, "seed": run.seed, "position": run.position, "scaling": m.label,
               "factor_rule": m.factor_rule, "factor": None if m.factor is None else round(m.factor, 6),
               "length": n, "train_length": run.train_length, "multiple": round(n / run.train_length, 4),
               "through_cache": m.decode_from is not None,
               "ppl": None, "nll": None, "tokens": 0, "windows": 0, "split": self.split, "stride": stride,
               "span": self.span,
               "loss_by_position": None, "tokens_per_s": None, "peak_mib": None, "note": None}
        model = self.models.get(run.path, m.scaling, m.context)
        row["context"] = context_settings(model, m.context)
        limit = model.position.max_positions
        if limit is not None and n > limit:
            return {**row, "note": f"{run.position} positions stop at {limit - 1}"}
        key = (self.models.key, n, m.decode_from, self.span)
        if key not in self.done:
            self.done[key] = self.compute(run, model, n, stride, m.decode_from)
        return {**row, **self.done[key]}

    def compute(self, run: Run, model, n: int, stride: int, decode_from: int | None) -> dict:
        data = self.token_data(run)
        if self.span:
            windows = data.span_windows(n, self.span, self.max_tokens // self.span)
        else:
            windows = data.eval_windows(n, max_tokens=self.max_tokens, stride=stride)
        if not windows:
            return {"note": f"no {self.split} document is longer than {self.span or n} tokens"}
        batch = self.batch_size or max(1, TOKENS_PER_FORWARD // n)
        parts = (decode_from, self.decode_chunk)
        if decode_from is None and getattr(model, "context_method", None) is not None and n > QUERY_CHUNK:
            parts = (QUERY_CHUNK, QUERY_CHUNK)
        with PeakMemory(self.device) as memory:
            t0 = time.perf_counter()
            loss_sum, count = token_losses(model, data, windows, n, batch, self.device, *parts)
            seconds = time.perf_counter() - t0
        tokens = int(count.sum())
        nll = float(loss_sum.sum()) / tokens
        note = None
        budget = self.max_tokens - self.max_tokens % self.span if self.span else self.max_tokens  # whole documents
        if tokens < budget:
            note = f"{self.split} documents hold only {tokens} tokens of the {budget}-token budget"
        return {"ppl": finite(math.exp(min(nll, 700.0))), "nll": finite(nll), "tokens": tokens,
                "windows": len(windows), "loss_by_position": buckets(loss_sum, count),
                "tokens_per_s": round(tokens / seconds, 1), "peak_mib": round(memory.mib, 1), "note": note}


# ----------------------------------------------------------------------------- report


# ----------------------------------------------------------------------------- command line


def check_span(span: int, lengths: list[int], stride: int | None, max_tokens: int) -> None:
    if stride is not None:
        raise UserError("--span scores non-overlapping windows; it cannot be combined with --stride")
    for n in lengths:
        if span % n:
            raise UserError(f"--span {span} is not a multiple of length {n}: every length must divide it")
    if max_tokens < span:
        raise UserError(f"--max-tokens ({max_tokens}) must be at least --span ({span})")


def resumable_rows(path: Path, split: str, stride: int | None, span: int | None = None) -> list[dict]:
    """The rows of an earlier report measured as these options measure (rows from before --span: span None)."""
    rows = previous_rows(path, "eval.extrapolation", "ppl")
    for r in rows:
        if r["split"] != split or r["stride"] != min(stride or r["length"], r["length"]) or r.get("span") != span:
            raise UserError(f"--resume: {path} was measured on the {r['split']} split with stride {r['stride']} and "
                            f"span {r.get('span')} at length {r['length']}; these options differ, so measure again "
                            f"without --resume")
    return rows


def main(argv: list[str] | None = None) -> list[dict]:
    parser = evaluator_parser(__doc__, "run directories, or hf:PATH (a transformers checkpoint)", "runs/eval/extrapolation",
                              "keep the rows already in --out/results.json and measure only the missing ones "
                              "(add runs or seeds to a report, or finish an interrupted evaluation)")
    parser.add_argument("--lengths", default=DEFAULT_LENGTHS, help=f"evaluation lengths (default {DEFAULT_LENGTHS})")
    parser.add_argument("--scaling", default=None,
                        help="RoPE scaling methods for unscaled rope runs (default: all a model takes; none with "
                             "--context-method)")
    parser.add_argument("--data", default=None, help=DATA_HELP)
    parser.add_argument("--fixed-factors", default="4",
                        help="fixed factors at which static methods are also evaluated at every length "
                             "(comma-separated, '' for none; default 4)")
    parser.add_argument("--context-method", default="none", help=CONTEXT_HELP)
    parser.add_argument("--decode-chunk", type=int, default=DECODE_CHUNK, help=DECODE_CHUNK_HELP)
    parser.add_argument("--split", default="test", choices=("train", "val", "test"))
    parser.add_argument("--stride", type=int, default=None, help="sliding-window stride (default: non-overlapping)")
    parser.add_argument("--span", type=int, default=None, metavar="N",
                        help="score the same targets at every length: the first N of each document longer than N "
                             "tokens, in non-overlapping windows of each length (each must divide N); default: "
                             "windows round-robin over documents, so lengths read different text")
    parser.add_argument("--max-tokens", type=int, default=DEFAULT_MAX_TOKENS,
                        help=f"scored tokens per measurement, the same at every length; with --span, the first "
                             f"max-tokens // N documents (default {DEFAULT_MAX_TOKENS})")
    parser.add_argument("--batch-size", type=int, default=None,
                        help=f"windows per forward pass (default: {TOKENS_PER_FORWARD} // length, at least 1)")
    args = parser.parse_args(argv)

    def work(rows: list[dict], lock) -> None:
        context = parse_checked(args.context_method, "--context-method")
        lengths, methods = parse_lengths(args.lengths), parse_scalings(scalings_option(args.scaling, context))
        check_data_option(args.data)
        fixed_factors = parse_factors(args.fixed_factors)
        for option, value in (("--stride", args.stride), ("--span", args.span), ("--batch-size", args.batch_size),
                              ("--decode-chunk", args.decode_chunk)):
            if value is not None and value < 1:
                raise UserError(f"{option} must be >= 1, got {value}")
        if args.span is not None:
            check_span(args.span, lengths, args.stride, args.max_tokens)
        elif args.max_tokens < lengths[-1]:
            raise UserError(f"--max-tokens ({args.max_tokens}) must be at least the longest length ({lengths[-1]})")
        lock()
        runs = read_runs(args.runs, data=args.data)
        check_applicable(runs, methods, context, named=args.scaling is not None)
        measurements = [m for run in runs for m in plan(run, methods, lengths, fixed_factors, context)]
        if args.resume:
            rows.extend(resumable_rows(args.out / "results.json", args.split, args.stride, args.span))
            done = {row_key(r) for r in rows}
            measurements = [m for m in measurements if measurement_key(m) not in done]
        evaluator = Evaluator(args.split, args.stride, args.max_tokens, args.batch_size, pick_device(args.device, "--device"),
                              args.decode_chunk, args.span)
        bar = tqdm(measurements, unit="measurement", dynamic_ncols=True, disable=None)  # off when not a terminal
        for m in bar:
            bar.set_description(f"{m.run.name} | {m.label} | {m.length}")
            row = evaluator.measure(m)
            rows.append(row)
            write_report(rows, args.out, plots=False)  # finished rows survive a crash or Ctrl-C
            bar.write(f"{row['run']} (seed {row['seed']}) | {curve_label(row)} | {row['length']}: ppl {format_ppl(row['ppl'])} "
                      f"({row['tokens']} tokens, {row['windows']} windows)"
                      + (f" [{row['note']}]" if row["note"] else ""))
        bar.close()
    written: list[Path] = []
    rows = evaluate(args.out, "eval.extrapolation", work, lambda rows: written.extend(write_report(rows, args.out)))
    print(markdown(rows))
    peak = max((r["peak_mib"] for r in rows if r["peak_mib"] is not None), default=0)
    print(f"wrote {args.out}/{', '.join(p.name for p in written)} | peak memory {peak:,.0f} MiB")
    return rows

if __name__ == "__main__":
    main()
