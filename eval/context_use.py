"""Context used, on the same targets: the loss of fixed target tokens with c tokens of context before them.

    python -m eval.context_use runs/tiny runs/alibi [--targets 128] [--multiples 0.25,0.5,1,2,4 | --contexts 64,128,512] \
        [--scaling none,linear,ntk,dynamic,yarn] [--context-method sinks] [--data SOURCE] [--split test] \
        [--spans-per-doc 1] [--max-docs N] [--margin 2.0] [--floor -2.0] [--batch-size N] [--decode-chunk 16] \
        [--device cpu] [--out runs/eval/context-use] [--resume]
    python -m eval.context_use hf:.cache/smollm2/SmolLM2-135M-Instruct-Q4_1 --data ../shared/corpora/gutenberg \
        --contexts 2048,4096,8192,16384,32640 --scaling none,yarn --out runs/eval/context-use-smollm2

Perplexity over whole windows mixes two things, the context a target has and which targets are scored. Here the
targets are fixed: a span of each held-out document (non-overlapping spans from the document's start, --spans-per-doc
of them, of max(c) + T + 1 tokens) ends in the same T targets (--targets) for every c, and only the context before
them changes (Khandelwal et al., arXiv 1805.04623, "How much context is used?": loss on fixed targets as the
context is cut). For each c the window is the c + T + 1 tokens ending at the span's end: the model reads its first
c + T tokens (c + T is the length it reads, as eval.extrapolation's length) and its last T predictions, the span's
last T tokens, are scored: the first target follows c + 1 tokens of its document, the last c + T. A document shorter
than a span is skipped (one note line says how many); --max-docs keeps the first that many of the others.

Per (model variant, document span, c) a row gives the mean loss (nats) of the T targets. The span's own numbers,
repeated in each of its rows, compare a short context, c = L or the largest c below L (short_context), with the
longest c (long_context), on the same targets, from the per-token log-probabilities held in memory:
  - gain_past_L: loss at the short c minus loss at the longest; > 0: the context past L helps;
  - key_share / key_tokens: LongPPL's key tokens (Fang et al., arXiv 2410.23771), the targets whose log-probability
    gains more than --margin nats with the long context (their long-short difference, LSD, Eq. 2) while it stays above
    --floor (their long-context likelihood, LCL): alpha = 2 and beta = -2 there (the defaults of the authors'
    find_key_token / compute_longppl, pip package longppl 0.3.0: a key token has LSD > alpha and LCL > beta);
  - key_loss (per row): the loss at that c on the span's key tokens (None where it has none).
A model that reads nothing past L is the floor every claim of use past L is held against: the loss at c = L itself
(the base model with its context cut to L), or the sinks context method. Sinks read their window and the first few
tokens, and through a stack of N layers of window W a target still reaches N (W - 1) tokens back: with no sink
tokens ({type: sinks, sinks: 0, window: W}) every c >= N (W - 1) gives the same losses, so the gain is 0 there.
At c = L the model reads L + T tokens: keep T small against L where the encoding does not extrapolate.

Scalings as eval.extrapolation chooses them (L = the run's training length), except that a static method gets ONE
factor, s = (longest c + T) / L (at least 1), at every c, so the model is the same at every c (factor_rule "fixed"); a
dynamic method runs through the KV cache as in generation (prefill L tokens, decode the rest, --decode-chunk at a
time) wherever c + T > L; a fine-tune runs with its own scaling; other encodings take none; `learned` past its table
is a row with loss null and a note. --context-method applies a training-free context method to every measurement
(--scaling then defaults to none). A model is a run directory or hf:PATH (eval.extrapolation's --data rule).

Writes results.json (one row per variant x span x c; the rows of a batch of spans are written as soon as it is
measured, so an interrupted evaluation keeps them; --resume measures only the spans a report lacks) and results.md
(eval/results/context_use.py: means over documents with 95% t intervals, a document's spans averaged first).
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import time
from dataclasses import dataclass
from pathlib import Path

import torch
from tqdm import tqdm

from config import ContextConfig, UserError
from data import TokenData
from device import pick_device
from eval.extrapolation import QUERY_CHUNK, finite, window_losses
from eval.harness import (
    CONTEXT_HELP,
    DATA_HELP,
    DECODE_CHUNK,
    DECODE_CHUNK_HELP,
    TOKENS_PER_FORWARD,
    Measurement,
    Models,
    Run,
    check_applicable,
    check_data_option,
    context_settings,
    evaluate,
    evaluator_parser,
    parse_lengths,
    parse_multiples,
    parse_scalings,
    plan,
    read_runs,
    scalings_option,
    text_shards,
)
from eval.results.context_use import markdown, row_key, write_report
from eval.results.rows import curve_label, previous_rows
from model.context import parse_checked

DEFAULT_TARGETS = 128
DEFAULT_MULTIPLES = "0.25,0.5,1,2,4"
MARGIN, FLOOR = 2.0, -2.0  # LongPPL's alpha and beta (see the module's docstring)


@dataclass(frozen=True)
class Span:
    """tokens[start:end] of a split: the k-th (index) non-overlapping span of a document, from its start."""
    document: int  # the document's index in the split
    name: str  # TokenData.names
    index: int
    start: int
    end: int
    offset: int  # where the span starts in its document


def document_spans(data: TokenData, length: int, per_doc: int, max_docs: int | None = None) -> tuple[list[Span], int]:
    """(spans, documents skipped): up to `per_doc` non-overlapping spans of `length` tokens from the start of each
    document of at least `length` tokens, in split order, of the first `max_docs` such documents; the documents
    shorter than `length` are counted and skipped."""
    offsets = data.doc_offsets.tolist()
    long_enough = [(d, a, b) for d, (a, b) in enumerate(zip(offsets[:-1], offsets[1:])) if b - a >= length]
    skipped = len(offsets) - 1 - len(long_enough)
    spans = [Span(d, data.names[d], k, a + k * length, a + (k + 1) * length, k * length)
             for d, a, b in long_enough[:max_docs] for k in range(min(per_doc, (b - a) // length))]
    return spans, skipped


def window(span: Span, c: int, targets: int) -> tuple[int, int]:
    """(start, end) of the c + targets + 1 tokens ending at the span's end: the model reads the first c + targets and
    its last `targets` predictions are the span's last `targets` tokens, the same at every c."""
    if span.end - span.start < c + targets + 1:
        raise ValueError(f"a span of {span.end - span.start} tokens holds no window of c = {c} and {targets} targets")
    return span.end - c - targets - 1, span.end


def reference_contexts(contexts: list[int], L: int) -> tuple[int | None, int | None]:
    """(short, long): c = L or the largest c below it, and the longest c where it is past L (else None for both)."""
    inside = [c for c in contexts if c <= L]
    if not inside or max(contexts) <= L:
        return None, None
    return max(inside), max(contexts)


def key_tokens(short: torch.Tensor, long: torch.Tensor, margin: float = MARGIN, floor: float = FLOOR) -> torch.Tensor:
    """LongPPL's key tokens (Fang et al., arXiv 2410.23771) among targets with log-probabilities `short` and `long`
    (T,): the long-short difference (LSD, Eq. 2) above `margin` and the long-context log-likelihood (LCL) above `floor`,
    both strict, as the authors' find_key_token compares them (alpha = 2, beta = -2)."""
    return (long - short > margin) & (long > floor)


def summarize(log_probs: dict[int, torch.Tensor | None], short: int | None, long: int | None,
              margin: float = MARGIN, floor: float = FLOOR) -> tuple[dict, dict[int, float | None]]:
    """A span's numbers from its targets' log-probabilities (T,) by c (None: not applicable): ({gain_past_L,
    key_share, key_tokens}, {c: the loss at c on the key tokens, None where there is none})."""
    if short is None or long is None or log_probs.get(short) is None or log_probs.get(long) is None:
        return {"gain_past_L": None, "key_share": None, "key_tokens": None}, {c: None for c in log_probs}
    key = key_tokens(log_probs[short], log_probs[long], margin, floor)
    n = int(key.sum())
    span = {"gain_past_L": finite(float(log_probs[long].mean() - log_probs[short].mean())),
            "key_share": n / len(key), "key_tokens": n}
    return span, {c: None if v is None or n == 0 else finite(float(-v[key].mean())) for c, v in log_probs.items()}


def tokens_hash(data: TokenData, start: int, end: int) -> str:
    """A short hash of tokens[start:end]: rows with the same targets carry the same one."""
    return hashlib.sha1(data.tokens[start:end].astype("int64").tobytes()).hexdigest()[:16]


def variants(run: Run, methods: list[str], longest: int, context: ContextConfig | None) -> list[Measurement]:
    """eval.extrapolation's plan at the longest input (longest c + T): one model for every c, a static scaling's
    per-length factor s = longest / L being here a fixed one."""
    return [dataclasses.replace(m, factor_rule="fixed") if m.factor_rule == "length/L" else m
            for m in plan(run, methods, [longest], [], context)]


def decode_from(m: Measurement, n: int) -> int | None:
    """Where a dynamic scaling's input of n tokens starts decoding through the cache (None: one forward pass)."""
    return m.decode_from if m.decode_from is not None and n > m.decode_from else None


class Evaluator:
    """Measures the rows of a model variant on a batch of spans, reusing loaded models, token data and identical
    measurements (a static scaling at s = 1 is plain RoPE)."""

    def __init__(self, split: str, targets: int, margin: float, floor: float, device, decode_chunk: int = DECODE_CHUNK):
        self.split, self.targets, self.margin, self.floor = split, targets, margin, floor
        self.device, self.decode_chunk = torch.device(device), decode_chunk
        self.data: dict[str, TokenData] = {}
        self.models = Models(self.device)
        self.done: dict[tuple, tuple[torch.Tensor, float]] = {}

    def token_data(self, run: Run) -> TokenData:
        key = json.dumps([run.data.__dict__, str(run.path) if run.retokenize else None], sort_keys=True)
        if key not in self.data:
            self.data[key] = TokenData(text_shards(run), self.split)
        return self.data[key]

    def log_probs(self, model, data: TokenData, spans: list[Span], c: int, parts: tuple) -> tuple[torch.Tensor, float]:
        """The targets' log-probabilities (B, T) with c tokens of context, and the seconds they took."""
        T = self.targets
        tokens = torch.stack([data.window_tensor(*window(s, c, T)) for s in spans]).to(self.device)
        t0 = time.perf_counter()
        targets = tokens[:, 1:].clone()
        targets[:, :-T] = -1  # only the targets' logits are made
        nll = window_losses(model, tokens[:, :-1], targets, *parts)[:, -T:]
        return -nll.double().cpu(), time.perf_counter() - t0

    def measure(self, m: Measurement, spans: list[Span], contexts: list[int]) -> list[dict]:
        run, T = m.run, self.targets
        model = self.models.get(run.path, m.scaling, m.context)
        data = self.token_data(run)
        limit = model.position.max_positions
        settings = context_settings(model, m.context)
        by_c: dict[int, tuple[torch.Tensor, float] | None] = {}
        parts_of: dict[int, tuple] = {}
        for c in contexts:
            n = c + T
            parts_of[c] = (decode_from(m, n), self.decode_chunk)
            if parts_of[c][0] is None and getattr(model, "context_method", None) is not None and n > QUERY_CHUNK:
                parts_of[c] = (QUERY_CHUNK, QUERY_CHUNK)  # eval.extrapolation's bound on a context method's memory
            if limit is not None and n > limit:
                by_c[c] = None
                continue
            key = (self.models.key, c, parts_of[c], tuple(s.end for s in spans))
            if key not in self.done:
                self.done[key] = self.log_probs(model, data, spans, c, parts_of[c])
            by_c[c] = self.done[key]
        short, long = reference_contexts(contexts, run.train_length)
        rows = []
        for b, s in enumerate(spans):
            log_probs = {c: None if v is None else v[0][b] for c, v in by_c.items()}
            span_numbers, key_loss = summarize(log_probs, short, long, self.margin, self.floor)
            targets_hash = tokens_hash(data, s.end - T, s.end)
            for c in contexts:
                lp = log_probs[c]
                rows.append({
                    "run": run.name, "seed": run.seed, "position": run.position, "scaling": m.label,
                    "factor_rule": m.factor_rule, "factor": None if m.factor is None else round(m.factor, 6),
                    "context": settings, "train_length": run.train_length, "split": self.split,
                    "document": s.name, "document_index": s.document, "span": s.index, "span_start": s.offset,
                    "context_tokens": c,
                    "multiple": round(c / run.train_length, 4), "targets": T, "targets_hash": targets_hash,
                    "through_cache": parts_of[c][0] is not None,
                    "loss": None if lp is None else finite(float(-lp.mean())), "key_loss": key_loss[c],
                    "short_context": short, "long_context": long, **span_numbers,
                    "margin": self.margin, "floor": self.floor,
                    "seconds": None if by_c[c] is None else round(by_c[c][1] / len(spans), 4),
                    "note": None if lp is not None else f"{run.position} positions stop at {limit - 1}"})
        return rows


# ----------------------------------------------------------------------------- command line


def run_contexts(run: Run, contexts: list[int] | None, multiples: list[float]) -> list[int]:
    """The c of a run: --contexts, or the multiples of its L (at least 1 token)."""
    return contexts if contexts is not None else sorted({max(1, round(k * run.train_length)) for k in multiples})


def resumable_rows(path: Path, split: str, targets: int, margin: float, floor: float,
                   planned: dict[tuple, list[int]]) -> list[dict]:
    """The rows of an earlier report measured as these options measure: the same split, targets, margin and floor,
    and for a run measured again the same contexts."""
    rows = previous_rows(path, "eval.context_use", "context_tokens")
    measured: dict[tuple, set[int]] = {}
    for r in rows:
        if (r["split"], r["targets"], r["margin"], r["floor"]) != (split, targets, margin, floor):
            raise UserError(f"--resume: {path} was measured on the {r['split']} split with {r['targets']} targets, "
                            f"margin {r['margin']} and floor {r['floor']}; these options differ, so measure again "
                            f"without --resume")
        measured.setdefault((r["run"], r["seed"]), set()).add(r["context_tokens"])
    for key, cs in measured.items():
        if key in planned and cs != set(planned[key]):
            raise UserError(f"--resume: {path} measured {key[0]} (seed {key[1]}) at contexts "
                            f"{','.join(map(str, sorted(cs)))}, not {','.join(map(str, planned[key]))}; measure again "
                            f"without --resume")
    return rows


def main(argv: list[str] | None = None) -> list[dict]:
    parser = evaluator_parser(__doc__, "run directories, or hf:PATH (a transformers checkpoint)", "runs/eval/context-use",
                              "keep the rows already in --out/results.json and measure only the document spans they "
                              "lack (the same --split, --targets, contexts, --margin and --floor)")
    parser.add_argument("--targets", type=int, default=DEFAULT_TARGETS,
                        help=f"target tokens scored at the end of each span, the same at every c (default {DEFAULT_TARGETS})")
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--multiples", default=DEFAULT_MULTIPLES,
                       help=f"contexts c as multiples of each model's L (default {DEFAULT_MULTIPLES})")
    which.add_argument("--contexts", default=None, help="contexts c in tokens, comma-separated (instead of --multiples)")
    parser.add_argument("--scaling", default=None,
                        help="RoPE scaling methods for unscaled rope runs, a static one at s = (longest c + targets) / L "
                             "for every c (default: all a model takes; none with --context-method)")
    parser.add_argument("--context-method", default="none", help=CONTEXT_HELP)
    parser.add_argument("--data", default=None, help=DATA_HELP)
    parser.add_argument("--split", default="test", choices=("train", "val", "test"))
    parser.add_argument("--spans-per-doc", type=int, default=1,
                        help="non-overlapping spans from each document's start (default 1)")
    parser.add_argument("--max-docs", type=int, default=None, help="the first N documents long enough (default: all)")
    parser.add_argument("--margin", type=float, default=MARGIN,
                        help=f"LongPPL's alpha: a key token's log-probability gains more than this with the long "
                             f"context (default {MARGIN})")
    parser.add_argument("--floor", type=float, default=FLOOR,
                        help=f"LongPPL's beta: a key token's log-probability with the long context is above this "
                             f"(default {FLOOR})")
    parser.add_argument("--batch-size", type=int, default=None,
                        help=f"spans per forward pass (default: {TOKENS_PER_FORWARD} // (longest c + targets), at least 1)")
    parser.add_argument("--decode-chunk", type=int, default=DECODE_CHUNK, help=DECODE_CHUNK_HELP)
    args = parser.parse_args(argv)

    def work(rows: list[dict], lock) -> None:
        context = parse_checked(args.context_method, "--context-method")
        methods = parse_scalings(scalings_option(args.scaling, context))
        contexts = parse_lengths(args.contexts, "--contexts") if args.contexts is not None else None
        multiples = parse_multiples(args.multiples)
        check_data_option(args.data)
        for option, value in (("--targets", args.targets), ("--spans-per-doc", args.spans_per_doc),
                              ("--max-docs", args.max_docs), ("--batch-size", args.batch_size),
                              ("--decode-chunk", args.decode_chunk)):
            if value is not None and value < 1:
                raise UserError(f"{option} must be >= 1, got {value}")
        lock()
        runs = read_runs(args.runs, data=args.data)
        check_applicable(runs, methods, context, named=args.scaling is not None)
        evaluator = Evaluator(args.split, args.targets, args.margin, args.floor, pick_device(args.device, "--device"),
                              args.decode_chunk)
        jobs, notes = [], []  # (measurement, spans of one forward pass, contexts)
        planned = {}
        for run in runs:
            cs = run_contexts(run, contexts, multiples)
            planned[(run.name, run.seed)] = cs
            need = cs[-1] + args.targets + 1
            data = evaluator.token_data(run)
            spans, skipped = document_spans(data, need, args.spans_per_doc, args.max_docs)
            if not spans:
                raise UserError(f"no {args.split} document of {run.path} holds {need} tokens (the longest context "
                                f"{cs[-1]} + {args.targets} targets + 1); choose shorter --contexts or --targets")
            if skipped:
                notes.append(f"note: {run.name}: {skipped} of {data.n_docs} {args.split} documents are shorter than "
                             f"{need} tokens (the longest context + targets + 1) and are skipped")
            batch = args.batch_size or max(1, TOKENS_PER_FORWARD // (need - 1))
            for m in variants(run, methods, need - 1, context):
                jobs += [(m, spans[i:i + batch], cs) for i in range(0, len(spans), batch)]
        if args.resume:
            rows.extend(resumable_rows(args.out / "results.json", args.split, args.targets, args.margin, args.floor,
                                       planned))
            done = {row_key(r) for r in rows}
            jobs = [(m, [s for s in spans if any((m.run.name, m.run.seed, m.label, s.name, s.index, c) not in done
                                                 for c in cs)], cs) for m, spans, cs in jobs]
            jobs = [job for job in jobs if job[1]]
        bar = tqdm(jobs, unit="batch", dynamic_ncols=True, disable=None)  # off when not a terminal
        for note in notes:
            bar.write(note)
        for m, spans, cs in bar:
            bar.set_description(f"{m.run.name} | {m.label} | {len(spans)} spans")
            measured = evaluator.measure(m, spans, cs)
            rows.extend(measured)
            write_report(rows, args.out)  # finished rows survive a crash or Ctrl-C
            for s in spans:
                mine = [r for r in measured if (r["document"], r["span"]) == (s.name, s.index)]
                losses = ", ".join(f"{r['context_tokens']}: " + ("n/a" if r["loss"] is None else f"{r['loss']:.3f}")
                                   for r in mine)
                gain = mine[0]["gain_past_L"]
                bar.write(f"{m.run.name} (seed {m.run.seed}) | {curve_label(mine[0])} | {s.name} span {s.index}: "
                          f"loss by c {losses}" + ("" if gain is None else
                                                   f"; gain past L {gain:+.3f}, key share {mine[0]['key_share']:.3f}"))
        bar.close()
    written: list[Path] = []
    rows = evaluate(args.out, "eval.context_use", work, lambda rows: written.extend(write_report(rows, args.out)))
    print(markdown(rows))
    print(f"wrote {args.out}/{', '.join(dict.fromkeys(p.name for p in written))}")
    return rows


if __name__ == "__main__":
    main()
