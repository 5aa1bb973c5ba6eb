"""Perplexity at and beyond the training length, for every run, seed, length and RoPE scaling method.

    python -m eval.extrapolation runs/study/seed1/rope runs/study/seed1/alibi --lengths 128,256,512,1024,2048 \
        --scaling none,linear,ntk,dynamic,yarn,dynamic-yarn [--fixed-factors 4] [--split test] [--stride 64] \
        [--span 2048] [--max-tokens 32768] [--batch-size 4] [--decode-chunk 16] [--device cpu] \
        [--out reports/extrapolation]
    python -m eval.extrapolation hf:.cache/smollm2/SmolLM2-135M-Instruct-Q4_1 --data ../shared/corpora/gutenberg \
        --lengths 8192,16384,32768 --scaling none,linear,ntk,dynamic,yarn --fixed-factors '' --out reports/smollm2

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

A model is a run directory or hf:PATH, a transformers checkpoint (pretrained/hf.py), which reads --data (default:
the default corpus) encoded with its own tokenizer, in the same document-contained windows; it takes the
scalings transformers has (not dynamic-yarn), and its dynamic NTK is transformers' (cached keys keep their
rotation); a context method runs through an attention function registered with transformers (pretrained/hf.py). --data gives
a run other text too, encoded with the run's tokenizer.

Rows carry the run's seed (run.seed), so several seeds of one study aggregate in results.md
(mean and standard deviation over seeds). Writes results.json (one row per measurement, rewritten
after each, so an interrupted run keeps what it finished), results.md and PNG plots (eval/plots.py).
One evaluation writes an --out folder at a time (checkpoint.hold): a second is refused in one line.
"""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import gzip
import json
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import torch
import torch.nn.functional as F
from tqdm import tqdm

from checkpoint import (
    FROM_RUN,
    atomic_write_text,
    check_checkpoint,
    hold,
    load_model,
    load_tokenizer,
    parse_model_section,
    pretrained_tokenizer,
    read_run_config,
    scalings_taken,
)
from config import (
    ArgumentParser,
    ContextConfig,
    DataConfig,
    RunFailed,
    ScalingConfig,
    UserError,
    from_dict,
    is_task_source,
)
from data import TokenData, prepare_shards
from device import autocast, keep_freed_host_memory, pick_device
from eval.memory import PeakMemory
from eval.results import curve_label, format_ppl, markdown
from model.attention import KVCache
from model.context import CONTEXT_METHODS, describe, pairing_problem, parse_checked
from model.rope import SCALINGS, is_dynamic

DEFAULT_LENGTHS = "256,512,1024,2048,4096"
DEFAULT_MAX_TOKENS = 32768
DECODE_CHUNK = 16
DECODE_CHUNK_HELP = (f"tokens per forward pass when a dynamic scaling decodes past L; each keeps the frequencies "
                     f"of its own length, as in one-token steps, so this sets speed only (default {DECODE_CHUNK})")
TOKENS_PER_FORWARD = 16384  # default batch = this // length (at least 1): bounds logits and attention memory
CONTEXT_HELP = (f"a training-free context method for every measurement: {', '.join(CONTEXT_METHODS)}, or a YAML "
                f"mapping such as '{{type: dca, chunk_size: 64}}'; --scaling then defaults to none")
N_BUCKETS = 8  # position buckets of loss_by_position


@dataclass
class Run:
    path: Path
    name: str
    seed: int
    position: str  # encoding type
    train_length: int  # L: the training length, or the base run's for a fine-tuned run
    scaling: ScalingConfig | None  # the run's own RoPE scaling (a context-extension fine-tune), else None
    continued: bool  # trained from another run's weights (train.init_from)
    data: DataConfig  # the text it is evaluated on
    retokenize: bool = False  # encode `data` with the model's own tokenizer (not the data's cached shards)
    scalings: tuple[str, ...] = tuple(SCALINGS)  # the RoPE scaling methods it can be loaded with


@dataclass
class Measurement:
    run: Run
    label: str  # scaling column: a method name, or e.g. "yarn (fine-tuned)"
    scaling: ScalingConfig | str | None  # what load_model gets (FROM_RUN: the run's own)
    factor: float | None
    factor_rule: str | None  # "length/L", "fixed", "T/L" (dynamic), "fine-tuned"; None for no scaling
    length: int
    decode_from: int | None = None  # prefill this many tokens, decode the rest through the KV cache
    context: ContextConfig | None = None  # a context method (model/context.py), part of the label


def read_run(path: Path, name: str, tasks: bool = False, data: str | None = None) -> Run:
    """Everything needed to plan a run's measurements; fails now rather than after the other runs. A run
    trained on text when `tasks` (eval.tasks), or on tasks when not, is a UserError naming the right command.
    `data`: a data.source to evaluate on instead of the run's own, encoded with the model's tokenizer; a
    model trained elsewhere (hf:PATH: its config has no data section) reads it, or the default corpus."""
    check_checkpoint(path)  # a UserError when there is no checkpoint
    config = read_run_config(path)
    model = parse_model_section(path, config)
    try:
        own = from_dict(DataConfig, config.get("data") or {}, "data")
    except UserError as e:
        raise UserError(f"{path}/config.yaml: {e}") from None
    trained_on = own.source if "data" in config else None  # None: text this repo did not tokenize
    if tasks and trained_on is None:
        raise UserError(f"{path} was trained elsewhere, on text: the task track's sequences are ids of data/tasks.py's "
                        f"own vocabulary, which its tokenizer cannot express; evaluate it with python -m "
                        f"eval.extrapolation or eval.probe")
    if trained_on is not None and is_task_source(trained_on) != tasks:
        raise UserError(f"{path} was trained on {trained_on}, " + (
            "not tasks: evaluate it with python -m eval.extrapolation or eval.probe" if tasks
            else "not text: evaluate it with python -m eval.tasks"))
    # text this repo did not tokenize, other text, or a model with a pretrained tokenizer (a converted run and its
    # fine-tunes): encoded with the model's own tokenizer
    retokenize = data is not None or trained_on is None or pretrained_tokenizer(path) is not None
    if data is not None:
        own = DataConfig(source=data)
    scaling = model.position.scaling
    L = model.max_seq_len
    if scaling:
        L = scaling.original_max_position_embeddings or L
    run, train = config.get("run") or {}, config.get("train") or {}
    return Run(path, name, int(run.get("seed", 0)), model.position.type, int(L), scaling,
               bool(train.get("init_from")), own, retokenize, scalings_taken(path))


def text_shards(run: Run, progress: bool = True) -> Path:
    """The token shards a run reads: its data's own (tokenizer trained with them), or its data encoded with
    the model's own tokenizer (`retokenize`)."""
    return prepare_shards(run.data, progress, tokenizer=load_tokenizer(run.path) if run.retokenize else None)


def check_taken(runs: list[Run], methods: list[str]) -> None:
    """A UserError for a scaling asked for by name that a model cannot be loaded with."""
    for run in runs:
        for method in methods:
            if method not in run.scalings:
                raise UserError(f"{run.path} cannot take RoPE scaling {method!r} (transformers has no rope type "
                                f"for it); it takes {', '.join(run.scalings)}")


def plan(run: Run, methods: list[str], lengths: list[int], fixed_factors: list[float],
         context: ContextConfig | None = None) -> list[Measurement]:
    """The (scaling, factor, length) measurements of one run, in table order (of `methods`, those it takes),
    each with the context method (a UserError where the method does not apply to the run or the scaling)."""
    measurements = plan_scalings(run, [m for m in methods if m in run.scalings], lengths, fixed_factors)
    return measurements if context is None else [with_context(m, context) for m in measurements]


def with_context(m: Measurement, context: ContextConfig) -> Measurement:
    problem = pairing_problem(context, m.run.position, m.run.scaling if m.scaling == FROM_RUN else m.scaling)
    if problem:
        raise UserError(f"--context-method: {m.run.path}: {problem}")
    label = describe(context) if m.label == "none" else f"{m.label} + {describe(context)}"
    return dataclasses.replace(m, label=label, context=context)


def context_settings(model, context: ContextConfig | None) -> dict | None:
    """The context method a model was loaded with, every setting included (defaults too), for a row."""
    if context is None:
        return None
    return {"type": context.type, **model.context_method.settings}


def plan_scalings(run: Run, methods: list[str], lengths: list[int], fixed_factors: list[float]) -> list[Measurement]:
    if run.position != "rope" or (run.continued and not run.scaling):
        return [Measurement(run, "none" if not run.continued else "none (fine-tuned)", None, None, None, n)
                for n in lengths]
    L = run.train_length
    if run.scaling:
        kind = run.scaling.type
        dynamic = is_dynamic(run.scaling)
        return [Measurement(run, f"{kind} (fine-tuned)", FROM_RUN,
                            max(1.0, n / L) if kind == "dynamic-yarn" else run.scaling.factor, "fine-tuned", n,
                            decode_from=L if dynamic and n > L else None)
                for n in lengths]
    out = []
    for method in methods:
        if method == "none":
            out += [Measurement(run, method, None, None, None, n) for n in lengths]
        elif SCALINGS[method].dynamic:
            # Factor 1 for dynamic NTK: b' = b * (T/L)^(d/(d-2)), s following the current length T.
            scaling = ScalingConfig(method, 1.0, L)
            out += [Measurement(run, method, scaling, None, "T/L", n, decode_from=L if n > L else None)
                    for n in lengths]
        else:
            for n in lengths:
                s = max(1.0, n / L)
                # s = 1 is plain RoPE: loading it as such makes the rows identical, not merely close.
                scaling = None if s == 1.0 else ScalingConfig(method, s, L)
                out.append(Measurement(run, method, scaling, s, "length/L", n))
            for s in fixed_factors:
                scaling = ScalingConfig(method, s, L)
                out += [Measurement(run, method, scaling, s, "fixed", n) for n in lengths]
    return out


@torch.inference_mode()
def logits_in_parts(model, x: torch.Tensor, decode_from: int | None, chunk: int):
    """Yield (a, b, logits of x[:, a:b]) over inputs x (B, n): one forward pass, or, with `decode_from`,
    a prefill of that many tokens and then decoding through the KV cache `chunk` tokens at a time, as
    generation runs one at a time (a dynamic scaling gives each token the frequencies of its own length)."""
    cache = None if decode_from is None else KVCache(model.cfg.n_layers)
    edges = [0, x.shape[1]] if decode_from is None else [0, *range(decode_from, x.shape[1], chunk), x.shape[1]]
    for a, b in zip(edges, edges[1:]):
        with autocast(x.device):
            logits, _ = model(x[:, a:b], cache=cache)  # (B, b - a, V)
        yield a, b, logits


def window_losses(model, x: torch.Tensor, y: torch.Tensor, decode_from: int | None, chunk: int) -> torch.Tensor:
    """Next-token losses (B, n) of windows x -> y (B, n each), computed as `logits_in_parts` runs them."""
    return torch.cat([next_token_losses(logits, y[:, a:b])
                      for a, b, logits in logits_in_parts(model, x, decode_from, chunk)], dim=1)


def next_token_losses(logits: torch.Tensor, targets: torch.Tensor, part: int = 4096) -> torch.Tensor:
    """Cross-entropy (B, T) of logits (B, T, V), `part` positions at a time: a whole float copy and log-softmax
    of a 32k-token window's logits over a pretrained model's vocabulary would be gigabytes more."""
    return torch.cat([F.cross_entropy(logits[:, i:i + part].float().transpose(1, 2), targets[:, i:i + part],
                                      reduction="none") for i in range(0, logits.shape[1], part)], dim=1)


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
        nll = window_losses(model, tokens[:, :-1], tokens[:, 1:], decode_from, chunk).double().cpu()
        scored = pos[None, :] >= length - torch.tensor([n for _, _, n in chunk_windows])[:, None]  # (B, length)
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


class Models:
    """One model in memory at a time, loaded again only when the run or the scaling changes."""

    def __init__(self, device: torch.device):
        self.device, self.key, self.model = device, None, None

    def get(self, path: Path, scaling: ScalingConfig | str | None, context: ContextConfig | None = None):
        key = (str(path), repr(scaling), repr(context))
        if key != self.key:
            self.model = None  # free the previous model before building the next
            self.model = load_model(path, scaling=scaling, device=self.device, context=context)
            self.key = key
        return self.model


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
        with PeakMemory(self.device) as memory:
            t0 = time.perf_counter()
            loss_sum, count = token_losses(model, data, windows, n, batch, self.device, decode_from,
                                           self.decode_chunk)
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

def write_report(rows: list[dict], out: Path, plots: bool = True) -> list[Path]:
    """results.json, results.md and (plots) the plots in out; returns the paths written."""
    atomic_write_text(out / "results.json", json.dumps(rows, indent=2, allow_nan=False) + "\n")
    atomic_write_text(out / "results.md", markdown(rows))
    paths = [out / "results.json", out / "results.md"]
    if plots:
        from eval.plots import plot_results
        paths += plot_results(rows, out)
    return paths


# ----------------------------------------------------------------------------- command line

def keep_finished(work: Callable[[], None], rows: list, out: Path, write: Callable[[], None]) -> None:
    """Run a measuring command's work, which appends to `rows`. A user error, a failed run or Ctrl-C
    writes the finished rows (write()) and exits with one line: 2 for a bad path or option (nothing
    measured yet), 1 once measuring began (a checkpoint that breaks then is a failed run), 130 on Ctrl-C."""
    try:
        work()
    except (KeyboardInterrupt, UserError, RunFailed) as e:
        kept = f" ({len(rows)} finished measurements are in {out})" if rows else ""
        if rows:
            write()
        print(f"error: {str(e).splitlines()[0] if str(e) else 'interrupted'}{kept}", file=sys.stderr)
        failed = isinstance(e, RunFailed) or bool(rows)
        sys.exit(130 if isinstance(e, KeyboardInterrupt) else 1 if failed else 2)


DATA_HELP = ("text to evaluate on, a data.source (shakespeare, a folder, file or glob ...), encoded with each model's "
             "own tokenizer (default: a run's own data; the default corpus for hf:PATH)")


def check_data_option(data: str | None) -> None:
    if data is not None and (not data or is_task_source(data)):
        raise UserError(f"--data takes a text source (shakespeare, a folder, file or glob ...), got {data!r}")


def parse_lengths(text: str) -> list[int]:
    try:
        lengths = sorted({int(x) for x in text.split(",") if x.strip()})
    except ValueError:
        raise UserError(f"--lengths must be comma-separated integers, got {text!r}") from None
    if not lengths or lengths[0] < 1:
        raise UserError(f"--lengths must be positive integers, got {text!r}")
    return lengths


def scalings_option(text: str | None, context: ContextConfig | None, default: str = ",".join(SCALINGS)) -> str:
    """--scaling as given, else the command's default (every method: plan keeps those a model takes), or none
    under a context method."""
    return text if text is not None else "none" if context is not None else default


def check_span(span: int, lengths: list[int], stride: int | None, max_tokens: int) -> None:
    if stride is not None:
        raise UserError("--span scores non-overlapping windows; it cannot be combined with --stride")
    for n in lengths:
        if span % n:
            raise UserError(f"--span {span} is not a multiple of length {n}: every length must divide it")
    if max_tokens < span:
        raise UserError(f"--max-tokens ({max_tokens}) must be at least --span ({span})")


def parse_scalings(text: str) -> list[str]:
    names = [x.strip() for x in text.split(",") if x.strip()]
    unknown = [x for x in names if x not in SCALINGS]
    if unknown or not names:
        raise UserError(f"--scaling takes method names; unknown: {', '.join(map(repr, unknown)) if unknown else repr(text)}; "
                        f"choose from {', '.join(SCALINGS)}")
    return list(dict.fromkeys(names))


def parse_multiples(text: str, option: str = "--multiples") -> list[float]:
    try:
        values = sorted({float(x) for x in text.split(",") if x.strip()})
    except ValueError:
        raise UserError(f"{option} must be comma-separated numbers, got {text!r}") from None
    if not values or values[0] <= 0 or not math.isfinite(values[-1]):
        raise UserError(f"{option} must be positive numbers, got {text!r}")
    return values


def parse_factors(text: str) -> list[float]:
    try:
        factors = [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise UserError(f"--fixed-factors must be comma-separated numbers, got {text!r}") from None
    if any(not math.isfinite(s) or s <= 1 for s in factors):
        raise UserError(f"--fixed-factors must be numbers above 1, got {text!r}")
    return list(dict.fromkeys(factors))


def previous_rows(path: Path, tool: str, field: str) -> list[dict]:
    """The rows of an earlier report at `path`, for --resume ([] where there is none); each must have `field`."""
    if not path.is_file():
        return []
    try:
        rows = json.loads(gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_text())
    except json.JSONDecodeError as e:
        raise UserError(f"--resume: {path} is not valid JSON ({e.msg} at line {e.lineno})") from None
    if not isinstance(rows, list) or not all(isinstance(r, dict) and field in r for r in rows):
        raise UserError(f"--resume: {path} is not an {tool} results file")
    return rows


def read_runs(paths: list[Path], tasks: bool = False, data: str | None = None) -> list[Run]:
    """The runs, named by their directory, or by the path as given where two runs of one seed share a name."""
    runs = [read_run(p, p.name, tasks, data) for p in paths]
    keys = [(r.name, r.seed) for r in runs]
    for r, key in zip(runs, keys):
        if keys.count(key) > 1:
            r.name = str(r.path)
    return runs


def measurement_key(m: Measurement | dict) -> tuple:
    """What identifies a measurement, from its plan or its row."""
    if isinstance(m, dict):
        return m["run"], m["seed"], m["scaling"], m["factor_rule"], m["factor"], m["length"]
    factor = None if m.factor is None else round(m.factor, 6)
    return m.run.name, m.run.seed, m.label, m.factor_rule, factor, m.length


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
    keep_freed_host_memory()  # process-wide: CPU steps reuse freed memory (device.py)
    parser = ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="+", type=Path, help="run directories, or hf:PATH (a transformers checkpoint)")
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
    parser.add_argument("--device", default="auto", help="auto (cuda, then mps, then cpu), cpu, cuda ...")
    parser.add_argument("--out", type=Path, default=Path("reports/extrapolation"))
    parser.add_argument("--resume", action="store_true",
                        help="keep the rows already in --out/results.json and measure only the missing ones "
                             "(add runs or seeds to a report, or finish an interrupted evaluation)")
    args = parser.parse_args(argv)

    rows: list[dict] = []
    held = contextlib.ExitStack()  # --out's lock, from when the options are checked to the last write

    def work():
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
        if args.out.exists() and not args.out.is_dir():
            raise UserError(f"--out {args.out} is a file, not a folder")
        held.enter_context(hold(args.out, "eval.extrapolation"))  # one evaluation writes a folder at a time
        runs = read_runs(args.runs, data=args.data)
        if args.scaling is not None:
            check_taken(runs, methods)
        measurements = [m for run in runs for m in plan(run, methods, lengths, fixed_factors, context)]
        if args.resume:
            rows.extend(resumable_rows(args.out / "results.json", args.split, args.stride, args.span))
            done = {measurement_key(r) for r in rows}
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
    with held:
        keep_finished(work, rows, args.out, lambda: write_report(rows, args.out))
        written = write_report(rows, args.out)
    print(markdown(rows))
    peak = max((r["peak_mib"] for r in rows if r["peak_mib"] is not None), default=0)
    print(f"wrote {args.out}/{', '.join(p.name for p in written)} | peak memory {peak:,.0f} MiB")
    return rows


if __name__ == "__main__":
    main()
