"""What every evaluator shares: the run directories as it sees them (`Run`), the measurements planned for each
(`plan`: which RoPE scalings and context methods apply to which run), one model in memory at a time, decoding
through the KV cache, the options they all take, and the command skeleton (`evaluate`) that holds --out, keeps
finished rows on an error or Ctrl-C and exits with one line."""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import math
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import torch
from tqdm import tqdm

from checkpoint import (
    FROM_RUN,
    FromRun,
    check_checkpoint,
    hold,
    load_model,
    load_tokenizer,
    model_config,
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
from data import prepare_shards
from device import DEVICE_HELP, autocast, keep_freed_host_memory
from model.attention import KVCache
from model.context import CONTEXT_METHODS, describe, pairing_problem
from model.rope import SCALED_LAYERS, SCALINGS, is_dynamic, missing_settings


def evaluator_parser(doc: str, runs_help: str, out: str, resume_help: str) -> ArgumentParser:
    """The options every evaluator takes: the runs, --device, --out and --resume; each adds its own."""
    parser = ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="+", type=Path, help=runs_help)
    parser.add_argument("--device", default="auto", help=DEVICE_HELP)
    parser.add_argument("--out", type=Path, default=Path(out))
    parser.add_argument("--resume", action="store_true", help=resume_help)
    return parser


def evaluate(out: Path, tool: str, work: Callable[[list, Callable[[], None]], None],
             report: Callable[[list], None]) -> list[dict]:
    """The skeleton of an evaluator's command. work(rows, lock) checks its options, calls lock() before it reads
    earlier rows (one evaluation writes an --out folder at a time: checkpoint.hold), and appends each finished row,
    writing the rows as it goes; report(rows) then writes the whole report, tables and plots. An error or Ctrl-C
    writes the report of the finished rows and exits with one line (keep_finished)."""
    keep_freed_host_memory()  # process-wide: CPU steps reuse freed memory (device.py)
    rows: list[dict] = []
    with contextlib.ExitStack() as held:
        def lock():
            if out.exists() and not out.is_dir():
                raise UserError(f"--out {out} is a file, not a folder")
            held.enter_context(hold(out, tool))
        keep_finished(lambda: work(rows, lock), rows, out, lambda: report(rows))
        report(rows)
    return rows


DECODE_CHUNK = 16


DECODE_CHUNK_HELP = (f"tokens per forward pass when a dynamic scaling decodes past L; each keeps the frequencies "
                     f"of its own length, as in one-token steps, so this sets speed only (default {DECODE_CHUNK})")


TOKENS_PER_FORWARD = 16384  # default batch = this // length (at least 1): bounds logits and attention memory


CONTEXT_HELP = (f"a training-free context method for every measurement: {', '.join(CONTEXT_METHODS)}, or a YAML "
                f"mapping such as '{{type: dca, chunk_size: 64}}'; --scaling then defaults to none")


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
    base_length: int | None = None  # continued without a scaling (a control): its base run's L, where that run is here
    randomized_below: int | None = None  # trained on randomized positions (train.positions): drawn below this
    layer_types: bool = False  # has model.layer_types (full and sliding layers: a scaling may act on either)


@dataclass
class Measurement:
    run: Run
    label: str  # scaling column: a method name, or e.g. "yarn (fine-tuned)"
    scaling: ScalingConfig | FromRun | None  # what load_model gets (FROM_RUN: the run's own)
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
    base_length = None
    if train.get("init_from") and not scaling:
        try:
            base_length = model_config(Path(train["init_from"])).max_seq_len
        except UserError:
            pass  # the base run is gone
    positions = train.get("positions") or {}
    randomized_below = positions.get("max_position") if positions.get("type") == "randomized" else None
    return Run(path, name, int(run.get("seed", 0)), model.position.type, int(L), scaling,
               bool(train.get("init_from")), own, retokenize, scalings_taken(path), base_length, randomized_below,
               bool(model.layer_types))


def text_shards(run: Run, progress: bool = True) -> Path:
    """The token shards a run reads: its data's own (tokenizer trained with them), or its data encoded with
    the model's own tokenizer (`retokenize`)."""
    return prepare_shards(run.data, progress, tokenizer=load_tokenizer(run.path) if run.retokenize else None)


def check_applicable(runs: list[Run], methods: list[str], context: ContextConfig | None, named: bool = True) -> None:
    """Refuse, before anything is measured, a scaling asked for by name (`named`) that a model cannot be loaded with,
    and a context method that does not pair with a run's encoding or with one of the scalings: the one check of
    every evaluator (plan checks the pairing; past L, where every static scaling is a model of its own)."""
    for run in runs:
        for entry in methods if named else ():
            method, layers = split_layers(entry)
            if method not in run.scalings:
                why = missing_settings(method) or "transformers has no rope type for it"
                raise UserError(f"{run.path} cannot take RoPE scaling {method!r} from --scaling ({why}); "
                                f"it takes {', '.join(run.scalings)}")
            if layers == "global" and not run.layer_types:
                raise UserError(f"--scaling {entry}: {run.path} has no model.layer_types, so every layer is global; "
                                f"give {method}")
        plan(run, methods, [2 * run.train_length], [], context)


def plan(run: Run, methods: list[str], lengths: list[int], fixed_factors: list[float],
         context: ContextConfig | None = None) -> list[Measurement]:
    """The (scaling, factor, length) measurements of one run, in table order (of `methods`, those it takes),
    each with the context method (a UserError where the method does not apply to the run or the scaling)."""
    measurements = plan_scalings(run, [m for m in methods if split_layers(m)[0] in run.scalings], lengths, fixed_factors)
    return measurements if context is None else [with_context(m, context) for m in measurements]


def with_context(m: Measurement, context: ContextConfig) -> Measurement:
    problem = pairing_problem(context, m.run.position, m.run.scaling if m.scaling is FROM_RUN else m.scaling)
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
    for entry in methods:  # the label keeps the layers named (yarn:all)
        method, layers = split_layers(entry)
        if method == "none":
            out += [Measurement(run, entry, None, None, None, n) for n in lengths]
        elif SCALINGS[method].dynamic:
            # Factor 1 for dynamic NTK: b' = b * (T/L)^(d/(d-2)), s following the current length T; within L it is
            # plain RoPE, loaded as such, as a static scaling at s = 1 is
            scaling = ScalingConfig(method, 1.0, L, layers=layers)
            out += [Measurement(run, entry, scaling if n > L else None, None, "T/L", n,
                                decode_from=L if n > L else None) for n in lengths]
        else:
            for n in lengths:
                s = max(1.0, n / L)
                # s = 1 is plain RoPE: loading it as such makes the rows identical, not merely close.
                scaling = None if s == 1.0 else ScalingConfig(method, s, L, layers=layers)
                out.append(Measurement(run, entry, scaling, s, "length/L", n))
            for s in fixed_factors:
                scaling = ScalingConfig(method, s, L, layers=layers)
                out += [Measurement(run, entry, scaling, s, "fixed", n) for n in lengths]
    return out


@torch.inference_mode()
def logits_in_parts(model, x: torch.Tensor, decode_from: int | None, chunk: int, positions: torch.Tensor | None = None):
    """Yield (a, b, logits of x[:, a:b]) over the parts of inputs x (B, n) that `in_parts` runs."""
    def logits(a, b, cache):
        return model(x[:, a:b], cache=cache, positions=positions)[0]  # (B, b - a, V)
    yield from in_parts(model, x, decode_from, chunk, positions, logits)


@torch.inference_mode()
def losses_in_parts(model, x: torch.Tensor, y: torch.Tensor, decode_from: int | None, chunk: int,
                    positions: torch.Tensor | None = None) -> torch.Tensor:
    """Next-token losses (B, n) of inputs x against targets y (B, n each) over the parts `in_parts` runs, each from
    model.token_losses: the output projection a chunk of tokens at a time (model/loss.py), never a part's (B, n, V)
    logits (34 GB in float32 for 32k tokens of Gemma 3's vocabulary)."""
    def losses(a, b, cache):
        return model.token_losses(x[:, a:b], y[:, a:b], positions=positions, cache=cache)  # (B, b - a)
    return torch.cat([out for _, _, out in in_parts(model, x, decode_from, chunk, positions, losses)], dim=1)


def in_parts(model, x: torch.Tensor, decode_from: int | None, chunk: int, positions: torch.Tensor | None, step):
    """Yield (a, b, step(a, b, cache)), step running the model on x[:, a:b] of inputs x (B, n) under autocast: one
    forward pass, or, with `decode_from`, a prefill of that many tokens and then decoding through the KV cache `chunk`
    tokens at a time, as generation runs one at a time (a dynamic scaling gives each token the frequencies of its own
    length). `positions` (B, n), in one forward pass only: each sequence's own (default 0, 1, ...)."""
    if positions is not None and decode_from is not None:
        raise ValueError("positions are given to one forward pass, not to decoding through the cache")
    cache = None if decode_from is None else KVCache(model.cfg.n_layers, rolling=True)
    edges = [0, x.shape[1]] if decode_from is None else [0, *range(decode_from, x.shape[1], chunk), x.shape[1]]
    # a long decode (SmolLM2's 24,576 tokens after 8,192: over an hour on a CPU) shows its own bar in a terminal
    with tqdm(total=x.shape[1], unit="token", desc="through the cache", leave=False, dynamic_ncols=True,
              disable=True if len(edges) <= 64 else None) as bar:  # closed too when a caller stops early
        for a, b in zip(edges, edges[1:]):
            with autocast(x.device):
                out = step(a, b, cache)
            bar.update(b - a)
            yield a, b, out


class Models:
    """One model in memory at a time, loaded again only when the run or the scaling changes."""

    def __init__(self, device: torch.device):
        self.device, self.key, self.model = device, None, None

    def get(self, path: Path, scaling: ScalingConfig | FromRun | None, context: ContextConfig | None = None):
        key = (str(path), repr(scaling), repr(context))
        if key != self.key:
            self.model = None  # free the previous model before building the next
            self.model = load_model(path, scaling=scaling, device=self.device, context=context)
            self.key = key
        return self.model


@torch.inference_mode()
def read_cached(model, tokens: list[int], cache: KVCache, device, last_only: bool = True) -> torch.Tensor:
    """The logits (len(tokens) or 1, V) of `tokens` read after what `cache` holds, which they extend: where generation
    decodes. A dynamic scaling reads the tokens up to position L in one pass and the rest DECODE_CHUNK at a time, each
    token with the frequencies of its own length as in one-token steps (as eval.extrapolation decodes past L): one
    pass over a whole prompt would give every token those of the prompt's length."""
    pieces = [tokens]
    if model.position.dynamic:
        head = max(0, model.position.scaling.original_max_position_embeddings - len(cache))
        pieces = [tokens[:head]] + [tokens[i:i + DECODE_CHUNK] for i in range(head, len(tokens), DECODE_CHUNK)]
    out = []
    for piece in filter(None, pieces):
        with autocast(device):
            out.append(model(torch.tensor([piece], device=device), cache=cache, last_only=last_only)[0][0])
    return out[-1] if last_only else torch.cat(out)


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


def parse_lengths(text: str, option: str = "--lengths") -> list[int]:
    """Positive token counts, sorted and without repeats (--lengths, --contexts)."""
    try:
        lengths = sorted({int(x) for x in text.split(",") if x.strip()})
    except ValueError:
        raise UserError(f"{option} must be comma-separated integers, got {text!r}") from None
    if not lengths or lengths[0] < 1:
        raise UserError(f"{option} must be positive integers, got {text!r}")
    return lengths


def run_lengths(run: Run, lengths: str | None, multiples: str) -> list[int]:
    """A run's prompt lengths: --lengths as given, else --multiples of its L."""
    if lengths is not None:
        return parse_lengths(lengths)
    return sorted({round(m * run.train_length) for m in parse_multiples(multiples)})


def parse_depths(text: str, of: str) -> list[float]:
    """--depths: shares in [0, 1] of what a fact is placed in (`of`: the filler, the haystack)."""
    try:
        depths = sorted({float(x) for x in text.split(",") if x.strip()})
    except ValueError:
        depths = []
    if not depths or not 0 <= depths[0] <= depths[-1] <= 1:
        raise UserError(f"--depths must be shares of {of} in [0, 1], got {text!r}")
    return depths


def static_scalings(text: str | None, context: ContextConfig | None, default: str, tool: str) -> list[str]:
    """--scaling of an evaluator that decodes greedily at one prompt length: static methods only."""
    methods = parse_scalings(scalings_option(text, context, default))
    dynamic = [m for m in methods if SCALINGS[split_layers(m)[0]].dynamic]
    if dynamic:
        raise UserError(f"--scaling: {tool} takes static scalings; {', '.join(dynamic)} change with the length as "
                        f"tokens are decoded (eval.extrapolation measures them)")
    return methods


def scalings_option(text: str | None, context: ContextConfig | None, default: str = ",".join(SCALINGS)) -> str:
    """--scaling as given, else the command's default (every method: plan keeps those a model takes), or none
    under a context method."""
    return text if text is not None else "none" if context is not None else default


def split_layers(entry: str) -> tuple[str, str | None]:
    """A --scaling entry, METHOD or METHOD:LAYERS, as (method, the layers it acts on: global, all or None)."""
    method, _, layers = entry.partition(":")
    return method, layers or None


def parse_scalings(text: str) -> list[str]:
    """--scaling's entries: method names, each optionally with the layers it acts on (yarn:all, linear:global; a
    model with full and sliding layers, model.layer_types, defaults to global)."""
    names = [x.strip() for x in text.split(",") if x.strip()]
    unknown = [x for x in names if split_layers(x)[0] not in SCALINGS]
    if unknown or not names:
        raise UserError(f"--scaling takes method names; unknown: {', '.join(map(repr, unknown)) if unknown else repr(text)}; "
                        f"choose from {', '.join(SCALINGS)}")
    layers = [x for x in names if split_layers(x)[1] not in (None, *SCALED_LAYERS) or x.startswith("none:")]
    if layers:
        raise UserError(f"--scaling {layers[0]}: after a method, ':global' (the full_attention layers of "
                        f"model.layer_types) or ':all' names the layers it acts on")
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


def read_runs(paths: list[Path], tasks: bool = False, data: str | None = None) -> list[Run]:
    """The runs, named by their directory, or by the path as given where two runs of one seed share a name."""
    runs = [read_run(p, p.name, tasks, data) for p in paths]
    keys = [(r.name, r.seed) for r in runs]
    for r, key in zip(runs, keys):
        if keys.count(key) > 1:
            r.name = str(r.path)
    return runs


def measurement_key(m: Measurement) -> tuple:
    """What identifies a planned measurement: its row's eval.results.extrapolation.row_key."""
    factor = None if m.factor is None else round(m.factor, 6)
    return m.run.name, m.run.seed, m.label, m.factor_rule, factor, m.length
