"""Generate text from a trained run, streaming tokens as they come.

    python generate.py runs/tiny --prompt "ROMEO:" --max-new-tokens 200 --temperature 0.8 --top-k 50
    python generate.py runs/tiny --prompt "ROMEO:" --temperature 0          # greedy
    python generate.py runs/tiny --rope-scaling "{type: yarn, factor: 4}"   # a RoPE scaling at load time
    python generate.py runs/tiny --max-new-tokens 2048 --max-context 256    # a sliding KV cache
    python generate.py runs/tiny --compile                                  # compiled steps, CUDA graphs on CUDA
    python generate.py runs/tiny --max-new-tokens 8192 --context-method sinks  # a rolling cache: flat memory
    python generate.py hf:.cache/smollm2/SmolLM2-135M-Instruct-Q4_1 --prompt "The capital of France is" --temperature 0

Every token stays in the KV cache and is attended over, past the training length too, for every
encoding that can represent the positions (rope with or without a scaling, alibi, nope, sinusoidal);
`learned` stops at the end of its table with a notice. A dynamic RoPE scaling follows the current
length token by token. --max-context K keeps only the last K tokens in the cache (a sliding window;
positions stay absolute, nothing is recomputed). --compile decodes through a static KV cache (fixed
shapes, so one compiled graph serves every token) with torch.compile, as CUDA graphs on CUDA: the same
tokens as without it, up to float rounding (its attention reads every slot through a mask). On CUDA a run
decodes in bf16, as it trained: under autocast, its matrices held in bf16 once (for_decoding).
--context-method applies a training-free context method (model/context.py: self-extend, rerope, leaky-rerope,
dca, sinks, logn) to every step; `sinks` keeps only its sink tokens and window in the KV cache (a rolling
cache: memory stays flat however many tokens are generated).
hf:PATH, a transformers checkpoint (hf/checkpoints.py), decodes through transformers' own growing cache, so
--max-context and --compile are for run directories, and `sinks` hides the keys past its window instead of
dropping them (the same tokens; memory grows); its prompt starts with BOS where its tokenizer adds one.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Iterator

import torch

from checkpoint import FROM_RUN, FromRun, load_model, load_tokenizer, model_config, read_run_config
from config import ArgumentParser, ScalingConfig, UserError, is_task_source, parse_scaling, run_cli
from data import Tokenizer
from device import DEVICE_HELP, autocast, autocast_dtype, keep_freed_host_memory, pick_device
from model.attention import KVCache
from model.context import CONTEXT_METHODS, pairing_problem, parse_checked
from model.gpt import GPT, round_matrices
from model.rope import check_scaling


def sample_next(logits: torch.Tensor, temperature: float, top_k: int | None, top_p: float | None,
                generator: torch.Generator) -> torch.Tensor:
    """Next token id from logits (vocab,): greedy at temperature 0, else top-k / nucleus sampling."""
    if temperature <= 0:
        return logits.argmax(-1)
    logits = logits.float() / temperature
    if top_k is not None and top_k < logits.numel():
        kth = torch.topk(logits, top_k).values[-1]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    probs = torch.softmax(logits, -1)
    if top_p is not None and top_p < 1.0:
        sorted_probs, order = probs.sort(descending=True)
        outside = sorted_probs.cumsum(-1) - sorted_probs > top_p  # keep the smallest set reaching top_p
        probs = probs.scatter(0, order, sorted_probs.masked_fill(outside, 0.0))
    return torch.multinomial(probs, 1, generator=generator)[0]


@torch.no_grad()
def generate_tokens(model: GPT, prompt: list[int], max_new_tokens: int, temperature: float = 0.8,
                    top_k: int | None = None, top_p: float | None = None, seed: int = 0,
                    stop_id: int | None = None, max_context: int | None = None, step=None) -> Iterator[int]:
    """Yield new token ids one at a time, decoding with a KV cache that keeps every token, or the
    last `max_context` (a sliding window), or what the model's context method reads (attention sinks: its
    first tokens and a window). Stops early at `stop_id` or where the positions end
    (learned: its table). `step`: the model as each one-token step runs it (compile_step's); the prompt
    then fills a static cache of the prompt and new tokens, so that every step has the same shapes."""
    device = next(model.parameters()).device
    generator = torch.Generator(device=device).manual_seed(seed)
    limit = model.position.max_positions
    kept = None  # (first, last): the tokens a context method reads; transformers' cache only grows (hf:)
    if isinstance(model, GPT) and model.context_method is not None:
        kept = model.context_method.kept
    capacity = len(prompt) + max_new_tokens  # a static cache is fixed at this; trimming needs max_context
    if step is None and max_context is not None:
        capacity = max(len(prompt), max_context)
    if kept is not None:
        capacity = max(len(prompt), sum(kept))
    cache = KVCache(model.cfg.n_layers, capacity=capacity if limit is None else min(capacity, limit),
                    rolling=step is None)  # sliding layers keep only the keys their window reaches
    run = model if step is None else step
    with autocast(device):  # per call: a `with` around the yields would leave it on in the caller's code
        logits, _ = model(torch.tensor([prompt], device=device), cache=cache, last_only=True)
    if step is not None:
        cache.make_static(window=max_context)  # the window by mask: the same tokens as trimming
    for position in range(len(prompt), len(prompt) + max_new_tokens):  # the position of the new token
        next_id = int(sample_next(logits[0, -1], temperature, top_k, top_p, generator))
        if next_id == stop_id:
            return
        yield next_id
        if limit is not None and position + 1 >= limit:  # no position left for the token after it
            return
        if max_context is not None and step is None:
            cache.trim(max_context - 1)
        if kept is not None:
            cache.trim(kept[1] - 1, first=kept[0])  # room for the next token: a rolling cache
        if step is not None and device.type == "cuda":
            torch.compiler.cudagraph_mark_step_begin()  # the last replay's outputs were read: reuse them
        with autocast(device):
            logits, _ = run(torch.tensor([[next_id]], device=device), cache=cache, last_only=True)


def for_decoding(model: GPT) -> GPT:
    """The model as it decodes: on CUDA, under bf16 autocast, its matrices held in bf16 once
    (model.gpt.round_matrices: the same logits, without a copy of every weight at every token)."""
    dtype = autocast_dtype(next(model.parameters()).device)
    return model if dtype is None else round_matrices(model, dtype)


def compile_step(model: GPT):
    """The model compiled for one-token decoding steps on a static cache (generate_tokens' `step`): with
    CUDA graphs on CUDA (mode reduce-overhead: a step replays one graph instead of launching its kernels
    from Python, as gpt-fast does), plain torch.compile elsewhere. Shapes are static: the cache's never change."""
    cuda = next(model.parameters()).is_cuda
    return torch.compile(model, mode="reduce-overhead" if cuda else None, dynamic=False)


def load(args) -> tuple[GPT, Tokenizer]:
    check_options(args)
    source = ((read_run_config(args.run_dir) or {}).get("data") or {}).get("source", "")
    if is_task_source(str(source)):
        raise UserError(f"{args.run_dir} was trained on tasks ({source}), which have no text to generate; "
                        f"evaluate it with python -m eval.tasks")
    scaling = scaling_option(args.rope_scaling)
    context = parse_checked(args.context_method, "--context-method")
    if context is not None:  # checked against the model's encoding and scaling before its weights are read
        cfg = model_config(args.run_dir, scaling)
        problem = pairing_problem(context, cfg.position.type, cfg.position.scaling)
        if problem:
            raise UserError(f"--context-method: {problem}")
    model = load_model(args.run_dir, scaling=scaling, device=pick_device(args.device, "--device"), best=args.best,
                       context=context)
    if isinstance(model, GPT):
        model = for_decoding(model)
    own_cache = [option for option, given in (("--max-context", args.max_context is not None),
                                              ("--compile", args.compile)) if given]
    if own_cache and not isinstance(model, GPT):  # both need this repo's KVCache (trim, make_static)
        raise UserError(f"{own_cache[0]} needs this repo's KV cache; {args.run_dir} decodes through transformers' own")
    tokenizer = load_tokenizer(args.run_dir)
    if not args.prompt and tokenizer.bos_id is None:
        raise UserError(f"{args.run_dir}: give a --prompt (its tokenizer starts a text with no BOS token to "
                        f"generate from)")
    return model, tokenizer


def check_options(args) -> None:
    if args.max_new_tokens < 0:
        raise UserError(f"--max-new-tokens must be >= 0, got {args.max_new_tokens}")
    if not args.temperature >= 0:
        raise UserError(f"--temperature must be >= 0 (0 is greedy), got {args.temperature}")
    if args.top_k is not None and args.top_k < 1:
        raise UserError(f"--top-k must be >= 1, got {args.top_k}")
    if args.top_p is not None and not 0 < args.top_p <= 1:
        raise UserError(f"--top-p must be in (0, 1], got {args.top_p}")
    if args.max_context is not None and args.max_context < 2:
        raise UserError(f"--max-context must be >= 2 (tokens kept in the KV cache), got {args.max_context}")
    if args.context_method != "none" and args.max_context is not None:
        raise UserError("--max-context and --context-method both choose what attention reads; give one "
                        "(sinks keeps its sink tokens and a window)")
    if args.context_method != "none" and args.compile:
        raise UserError("--compile decodes through a static cache of every token; a context method decodes "
                        "eagerly (leave out --compile)")


def scaling_option(text: str) -> ScalingConfig | None | FromRun:
    """--rope-scaling: a YAML mapping, 'none', or 'from-run' (the run's own)."""
    if text == repr(FROM_RUN):
        return FROM_RUN
    scaling = parse_scaling(text, "--rope-scaling")
    check_scaling(scaling, "--rope-scaling")
    return scaling


def main(argv=None):
    keep_freed_host_memory()  # process-wide: CPU steps reuse freed memory (device.py)
    parser = ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--prompt", default="", help="text to continue (default: start of a document)")
    parser.add_argument("--max-new-tokens", type=int, default=200)
    parser.add_argument("--temperature", type=float, default=0.8, help="0 is greedy")
    parser.add_argument("--top-k", type=int, default=None)
    parser.add_argument("--top-p", type=float, default=None)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-context", type=int, default=None,
                        help="tokens kept in the KV cache (a sliding window; default: all)")
    parser.add_argument("--rope-scaling", default=repr(FROM_RUN),
                        help="YAML mapping, e.g. '{type: yarn, factor: 4}', or 'none'; default: the run's own")
    parser.add_argument("--best", action="store_true",
                        help="the best-validation checkpoint instead of the latest")
    parser.add_argument("--device", default="auto", help=DEVICE_HELP)
    parser.add_argument("--compile", action="store_true",
                        help="decode with torch.compile through a static KV cache (CUDA graphs on CUDA)")
    parser.add_argument("--context-method", default="none",
                        help=f"a training-free context method: {', '.join(CONTEXT_METHODS)}, or a YAML mapping such "
                             f"as '{{type: sinks, sinks: 4, window: 252}}'; default none")
    args = parser.parse_args(argv)

    model, tokenizer = run_cli(lambda: load(args))
    head = [] if tokenizer.bos_id is None else [tokenizer.bos_id]  # a run's tokenizer always has BOS
    prompt = head + tokenizer.encode(args.prompt)
    limit = model.position.max_positions
    if limit is not None and len(prompt) >= limit:
        print(f"note: the prompt has {len(prompt)} tokens and {model.cfg.position.type} positions stop at "
              f"{limit - 1}; keeping its last {limit - 1}", file=sys.stderr)
        prompt = prompt[-(limit - 1):]
    # Decode the prompt and the new tokens together: sentencepiece drops a leading space when a
    # piece is decoded alone. Print only what the newest token adds.
    context = prompt[len(head):]
    shown = tokenizer.decode(context)
    sys.stdout.write(shown)
    produced = 0
    for token in generate_tokens(model, prompt, args.max_new_tokens, args.temperature, args.top_k, args.top_p,
                                 args.seed, stop_id=tokenizer.eos_id, max_context=args.max_context,
                                 step=compile_step(model) if args.compile else None):
        produced += 1
        context.append(token)
        text = tokenizer.decode(context)
        if not text.endswith("\ufffd"):  # wait for the rest of a multi-byte character
            sys.stdout.write(text[len(shown):])
            sys.stdout.flush()
            shown = text
    sys.stdout.write(tokenizer.decode(context)[len(shown):] + "\n")
    if limit is not None and produced < args.max_new_tokens and len(prompt) + produced >= limit:
        print(f"note: stopped after {produced} tokens: {model.cfg.position.type} positions stop at {limit - 1}",
              file=sys.stderr)
    elif produced < args.max_new_tokens:
        print(f"note: the model ended the text (end-of-text token) after {produced} tokens; another --seed "
              f"may run longer", file=sys.stderr)


if __name__ == "__main__":
    main()
