"""Generate text from a trained run, streaming tokens as they come.

    python generate.py runs/tiny --prompt "ROMEO:" --max-new-tokens 200 --temperature 0.8 --top-k 50
    python generate.py runs/tiny --prompt "ROMEO:" --temperature 0          # greedy
    python generate.py runs/tiny --rope-scaling "{type: yarn, factor: 4}"   # a RoPE scaling at load time
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Iterator

import torch
import yaml

from model.attention import KVCache
from model.checkpoint import CheckpointError, load_model
from model.config import ArgumentParser, ConfigError
from model.device import pick_device
from model.gpt import GPT


def context_limit(model: GPT) -> int:
    """Tokens the model attends over at once: its training length, or the original length times
    the factor of a static RoPE scaling chosen at load time (a fine-tuned run already has it)."""
    scaling = model.cfg.position.scaling or {}
    if scaling.get("type") in (None, "dynamic", "dynamic-yarn"):
        return model.cfg.max_seq_len
    base = scaling.get("original_max_position_embeddings", model.cfg.max_seq_len)
    return max(model.cfg.max_seq_len, int(base * scaling.get("factor", 1.0)))


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
                    stop_id: int | None = None) -> Iterator[int]:
    """Yield new token ids one at a time, decoding with a KV cache.

    When the context is full, the cache is rebuilt from the latest half of the context, so long
    generations continue within positions the model knows.
    """
    device = next(model.parameters()).device
    generator = torch.Generator(device=device).manual_seed(seed)
    limit = context_limit(model)
    tokens = list(prompt[-(limit - 1):])
    cache = KVCache(model.cfg.n_layers)
    logits, _ = model(torch.tensor([tokens], device=device), cache=cache, last_only=True)
    for _ in range(max_new_tokens):
        next_id = int(sample_next(logits[0, -1], temperature, top_k, top_p, generator))
        if next_id == stop_id:
            return
        yield next_id
        tokens.append(next_id)
        if len(cache) + 1 >= limit:
            tokens = tokens[-(limit // 2):]
            cache = KVCache(model.cfg.n_layers)
            logits, _ = model(torch.tensor([tokens], device=device), cache=cache, last_only=True)
        else:
            logits, _ = model(torch.tensor([[next_id]], device=device), cache=cache, last_only=True)


def check_options(args) -> None:
    if args.max_new_tokens < 0:
        raise ConfigError(f"--max-new-tokens must be >= 0, got {args.max_new_tokens}")
    if not args.temperature >= 0:
        raise ConfigError(f"--temperature must be >= 0 (0 is greedy), got {args.temperature}")
    if args.top_k is not None and args.top_k < 1:
        raise ConfigError(f"--top-k must be >= 1, got {args.top_k}")
    if args.top_p is not None and not 0 < args.top_p <= 1:
        raise ConfigError(f"--top-p must be in (0, 1], got {args.top_p}")


def parse_scaling(text: str) -> dict | None | str:
    """--rope-scaling: a YAML mapping, 'none', or 'from-run' (the run's own)."""
    if text == "from-run":
        return text
    try:
        scaling = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise ConfigError(f"--rope-scaling: cannot parse {text!r} as YAML ({e.problem})") from None
    if scaling in ("none", None):
        return None
    if not isinstance(scaling, dict):
        raise ConfigError(f"--rope-scaling must be a mapping such as '{{type: yarn, factor: 4}}' or 'none', got {text!r}")
    return scaling


def main(argv=None):
    parser = ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--prompt", default="", help="text to continue (default: start of a document)")
    parser.add_argument("--max-new-tokens", type=int, default=200)
    parser.add_argument("--temperature", type=float, default=0.8, help="0 is greedy")
    parser.add_argument("--top-k", type=int, default=None)
    parser.add_argument("--top-p", type=float, default=None)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rope-scaling", default="from-run",
                        help="YAML mapping, e.g. '{type: yarn, factor: 4}', or 'none'; default: the run's own")
    parser.add_argument("--device", default="auto", help="auto (cuda, then mps, then cpu), cpu, cuda ...")
    args = parser.parse_args(argv)

    from data import Tokenizer
    try:
        check_options(args)
        scaling = parse_scaling(args.rope_scaling)
        device = pick_device(args.device, "--device")
        try:
            model = load_model(args.run_dir, scaling=scaling, device=device)
        except ConfigError as e:  # the run's own config was checked when it trained: this is the option's
            raise ConfigError(f"--rope-scaling: {str(e).removeprefix('model.position.scaling: ')}") from None
        tokenizer = Tokenizer(args.run_dir / "tokenizer.model")
    except (CheckpointError, ValueError) as e:  # ConfigError is a ValueError
        print(f"error: {str(e).splitlines()[0]}", file=sys.stderr)
        sys.exit(2)

    prompt = [tokenizer.bos_id] + tokenizer.encode(args.prompt)
    limit = context_limit(model)
    if len(prompt) >= limit:
        print(f"note: the prompt has {len(prompt)} tokens and the model takes {limit}; "
              f"keeping its last {limit - 1}", file=sys.stderr)
    # Decode the prompt and the new tokens together: sentencepiece drops a leading space when a
    # piece is decoded alone. Print only what the newest token adds.
    context = prompt[1:]
    shown = tokenizer.decode(context)
    sys.stdout.write(shown)
    for token in generate_tokens(model, prompt, args.max_new_tokens, args.temperature, args.top_k, args.top_p,
                                 args.seed, stop_id=tokenizer.eos_id):
        context.append(token)
        text = tokenizer.decode(context)
        if not text.endswith("\ufffd"):  # wait for the rest of a multi-byte character
            sys.stdout.write(text[len(shown):])
            sys.stdout.flush()
            shown = text
    sys.stdout.write(tokenizer.decode(context)[len(shown):] + "\n")


if __name__ == "__main__":
    main()
