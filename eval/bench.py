"""Throughput benchmark: training tokens/s and MFU, and evaluation speed and memory at long lengths.

    python -m eval.bench --config configs/tiny.yaml [--positions rope,alibi] [--out DIR] [key=value ...]

For each encoding: training tokens/s on random tokens (compute only, no data loading), model FLOPs
utilisation (PaLM, arXiv 2204.02311, appendix B) against the device's bf16 dense peak, parameter
count, peak memory; then forward-only evaluation tokens/s and peak memory at 1x ... 32x the
training length (batch 1). Writes bench.json and bench.md to --out and prints the table.
"""
from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

import torch

from config import ArgumentParser, Config, UserError, load_config, run_cli
from device import autocast, keep_freed_host_memory, pick_device
from eval.memory import PeakMemory
from model.attention import KVCache
from model.gpt import GPT, flops_per_token, make_optimizer
from model.positions import ENCODINGS
from model.positions import check as check_model

# Dense bf16 tensor-core peak FLOP/s (no sparsity) from the vendors' data sheets, keyed by a substring
# of torch.cuda.get_device_name(); the first match wins, so the more specific names come first.
PEAK_FLOPS = {
    "H100 PCIe": 756e12, "H100": 989e12,  # plain "H100": the SXM part ("NVIDIA H100 80GB HBM3")
    "H800 PCIe": 756e12, "H800": 989e12, "H200": 989e12, "GH200": 989e12,
    "A100": 312e12, "A800": 312e12, "L40S": 362e12, "L40": 181e12, "L4": 121e12,
    "A10G": 70e12, "A10": 125e12, "RTX 4090": 165e12, "RTX 3090": 71e12,
}


def device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return f"{platform.processor() or platform.machine()} CPU, {torch.get_num_threads()} threads"


def peak_flops(device: torch.device) -> float | None:
    name = device_name(device)
    return next((v for k, v in PEAK_FLOPS.items() if k in name), None)


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


def time_training(loss_of, model: torch.nn.Module, optimizer, device, steps: int, warmup: int) -> tuple[float, float]:
    """(seconds for `steps` optimizer steps after `warmup` untimed ones, peak MiB): forward under
    autocast, backward, clipping, AdamW, the same for our model and the peer."""
    def step():
        with autocast(device):
            loss = loss_of()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    for _ in range(warmup):  # includes compilation
        step()
    with PeakMemory(device) as memory:
        sync(device)
        start = time.perf_counter()
        for _ in range(steps):
            step()
        sync(device)
        elapsed = time.perf_counter() - start
    return elapsed, memory.mib


def training_row(cfg: Config, device, n_params: int, elapsed: float, steps: int, peak_mib) -> dict:
    B, T = cfg.train.batch_size, cfg.model.max_seq_len
    tokens_per_s = steps * B * T / elapsed
    peak = peak_flops(device)
    mfu = flops_per_token(cfg.model, T, n_params) * tokens_per_s / peak if peak else None
    return {"params": n_params, "train_tokens_per_s": tokens_per_s, "mfu": mfu, "train_peak_mib": peak_mib}


def random_batch(cfg: Config, device) -> tuple[torch.Tensor, torch.Tensor]:
    torch.manual_seed(0)  # the same batches for every encoding and for the peer
    return torch.randint(0, cfg.model.vocab_size, (2, cfg.train.batch_size, cfg.model.max_seq_len), device=device)


def bench_training(cfg: Config, device, steps: int, warmup: int) -> dict:
    x, y = random_batch(cfg, device)
    model = GPT(cfg.model).to(device)
    if device.type == "cuda":
        model.use_flex_attention(True)
    optimizer = make_optimizer(model, cfg.train, device)
    step_model = torch.compile(model) if cfg.run.compile else model
    elapsed, peak_mib = time_training(lambda: step_model(x, y)[1], model, optimizer, device, steps, warmup)
    return {**training_row(cfg, device, model.num_params(), elapsed, steps, peak_mib), "model": model}


def llama_peer(cfg: Config):
    """Hugging Face transformers' LlamaForCausalLM of our shape: width, depth, heads, KV heads, SwiGLU width,
    context, vocab, RMSNorm eps, RoPE base, tied embeddings, no biases, SDPA attention."""
    from transformers import LlamaConfig, LlamaForCausalLM
    m = cfg.model
    config = LlamaConfig(vocab_size=m.vocab_size, hidden_size=m.d_model, intermediate_size=m.ffn_hidden,
                         num_hidden_layers=m.n_layers, num_attention_heads=m.n_heads, num_key_value_heads=m.n_kv_heads,
                         max_position_embeddings=m.max_seq_len, rms_norm_eps=m.norm_eps, tie_word_embeddings=True,
                         attention_bias=False, mlp_bias=False, attention_dropout=0.0,
                         rope_parameters={"rope_type": "default", "rope_theta": m.position.theta},
                         rope_theta=m.position.theta)  # the second spelling for transformers 4.x
    config._attn_implementation = "sdpa"
    return LlamaForCausalLM(config)


def bench_peer(cfg: Config, device, steps: int, warmup: int) -> dict:
    """Train transformers' Llama of the same shape on the same batches, compiled the same way."""
    import transformers
    x, y = random_batch(cfg, device)
    model = llama_peer(cfg).to(device)
    optimizer = make_optimizer(model, cfg.train, device)
    step_model = torch.compile(model) if cfg.run.compile else model

    def loss_of():
        logits = step_model(input_ids=x).logits
        return torch.nn.functional.cross_entropy(logits.float().flatten(0, 1), y.flatten())
    elapsed, peak_mib = time_training(loss_of, model, optimizer, device, steps, warmup)
    n_params = sum(p.numel() for p in model.parameters())
    return {"name": f"transformers {transformers.__version__} LlamaForCausalLM (sdpa)",
            **training_row(cfg, device, n_params, elapsed, steps, peak_mib)}


@torch.inference_mode()
def bench_eval(model: GPT, device, multiples: list[int], repeats: int) -> list[dict]:
    model.eval()
    L = model.cfg.max_seq_len
    rows = []
    for m in multiples:
        length = L * m
        row = {"multiple": m, "length": length, "tokens_per_s": None, "peak_mib": None, "note": ""}
        rows.append(row)
        if model.position.max_positions is not None and length > model.position.max_positions:
            row["note"] = "n/a (past the learned table)"
            continue
        x = torch.randint(0, model.cfg.vocab_size, (1, length), device=device)
        try:
            with autocast(device):
                model(x, last_only=True)  # warm-up (and compilation of FlexAttention)
            with PeakMemory(device) as memory:
                sync(device)
                start = time.perf_counter()
                for _ in range(repeats):
                    with autocast(device):
                        model(x, last_only=True)
                sync(device)
                elapsed = time.perf_counter() - start
        except torch.OutOfMemoryError:
            row["note"] = "out of memory"
            torch.cuda.empty_cache()
            continue
        row.update(tokens_per_s=repeats * length / elapsed, peak_mib=memory.mib)
    return rows


@torch.inference_mode()
def bench_generation(model: GPT, device, multiples=(1, 8), new_tokens: int = 64) -> list[dict]:
    """Decoding tokens/s (batch 1, KV cache) of the last `new_tokens` tokens of a context of m x L."""
    L, rows = model.cfg.max_seq_len, []
    for m in multiples:
        row = {"multiple": m, "tokens_per_s": None, "note": ""}
        rows.append(row)
        if model.position.max_positions is not None and m * L > model.position.max_positions:
            row["note"] = "n/a (past the learned table)"
            continue
        x = torch.randint(0, model.cfg.vocab_size, (1, m * L), device=device)
        prefill = max(1, m * L - new_tokens)
        cache = KVCache(model.cfg.n_layers)
        with autocast(device):
            model(x[:, :prefill], cache=cache, last_only=True)
            sync(device)
            start = time.perf_counter()
            for i in range(prefill, m * L):
                model(x[:, i:i + 1], cache=cache, last_only=True)
            sync(device)
        row["tokens_per_s"] = (m * L - prefill) / (time.perf_counter() - start)
    return rows


def fmt(value, pattern="{:,.0f}"):
    return "n/a" if value is None else pattern.format(value)


def markdown(results: dict) -> str:
    lines = [f"Device: **{results['device']}**, config `{results['config']}`, torch {results['torch']}, "
             f"compile={results['compile']}, batch {results['batch_size']} x {results['seq_len']} tokens.", "",
             "| encoding | params | train tokens/s | MFU | train peak MiB |", "|---|---:|---:|---:|---:|"]
    peer = results.get("peer")
    for r in results["rows"] + ([{**peer, "position": f"peer: {peer['name']}"}] if peer else []):
        lines.append(f"| {r['position']} | {r['params'] / 1e6:.2f}M | {fmt(r['train_tokens_per_s'])} | "
                     f"{fmt(r['mfu'] and 100 * r['mfu'], '{:.1f}%')} | {fmt(r['train_peak_mib'])} |")
    if peer:
        lines += ["", f"Ours (rope) over the peer, training tokens/s on the same batches in the same run: "
                      f"**{peer['ratio']:.2f}x**."]
    multiples = [e["multiple"] for e in results["rows"][0]["eval"]]
    lines += ["", "Evaluation (forward, batch 1): tokens/s / peak MiB in use (GPU allocator, or process RSS on a CPU) "
              "at each multiple of the training length.", "",
              "| encoding | " + " | ".join(f"{m}x" for m in multiples) + " |",
              "|---|" + "---:|" * len(multiples)]
    for r in results["rows"]:
        cells = [e["note"] or f"{fmt(e['tokens_per_s'])} / {fmt(e['peak_mib'])}" for e in r["eval"]]
        lines.append(f"| {r['position']} | " + " | ".join(cells) + " |")
    generation = results["rows"][0].get("generation") or []
    if generation:
        lines += ["", "Generation (batch 1, KV cache): tokens/s decoding the last 64 tokens of a context of "
                  "each multiple of the training length.", "",
                  "| encoding | " + " | ".join(f"{g['multiple']}x" for g in generation) + " |",
                  "|---|" + "---:|" * len(generation)]
        for r in results["rows"]:
            lines.append(f"| {r['position']} | " + " | ".join(g["note"] or fmt(g["tokens_per_s"])
                                                             for g in r["generation"]) + " |")
    return "\n".join(lines) + "\n"


def bench_config(path: str, overrides: list[str]) -> Config:
    cfg = load_config(Config, path, overrides).resolve()
    check_model(cfg.model)
    return cfg


def parse_options(args) -> tuple[list[str], list[int], Config, torch.device]:
    positions = [p for p in args.positions.split(",") if p]
    if args.peer and "rope" not in positions:
        raise UserError("--peer transformers is compared with rope: include rope in --positions")
    unknown = [p for p in positions if p not in ENCODINGS]
    if unknown:
        raise UserError(f"--positions: unknown encoding {unknown[0]!r}; choose one of {', '.join(sorted(ENCODINGS))}")
    try:
        multiples = [int(m) for m in args.multiples.split(",")]
    except ValueError:
        raise UserError(f"--multiples must be comma-separated integers, got {args.multiples!r}") from None
    base = bench_config(args.config, args.overrides)
    return positions, multiples, base, pick_device(base.run.device, "run.device")


def main(argv=None):
    keep_freed_host_memory()  # process-wide: CPU steps reuse freed memory (device.py)
    parser = ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", required=True)
    parser.add_argument("--positions", default=",".join(sorted(ENCODINGS)))
    parser.add_argument("--multiples", default="1,2,4,8,16,32", help="evaluation lengths as multiples of max_seq_len")
    parser.add_argument("--steps", type=int, default=10, help="timed training steps")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=2, help="timed forward passes per evaluation length")
    parser.add_argument("--out", type=Path, default=Path("runs/bench"),
                        help="output folder (default runs/bench; reports/bench holds the committed tables)")
    parser.add_argument("--peer", choices=("transformers",), default=None,
                        help="also train transformers' LlamaForCausalLM of the same shape and report the ratio")
    parser.add_argument("overrides", nargs="*", help="dotted.key=value")
    args = parser.parse_args(argv)
    positions, multiples, base, device = run_cli(lambda: parse_options(args))
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    results = {"device": device_name(device), "config": args.config, "torch": torch.__version__,
               "compile": base.run.compile, "batch_size": base.train.batch_size, "seq_len": base.model.max_seq_len,
               "overrides": args.overrides, "rows": []}
    for position in positions:
        cfg = bench_config(args.config, args.overrides + [f"model.position.type={position}"])
        print(f"bench: {position} training ...", file=sys.stderr)
        row = bench_training(cfg, device, args.steps, args.warmup)
        model = row.pop("model")
        print(f"bench: {position} evaluation at {args.multiples}x ...", file=sys.stderr)
        row["eval"] = bench_eval(model, device, multiples, args.repeats)
        row["generation"] = bench_generation(model, device)
        results["rows"].append({"position": position, **row})
        del model
        if device.type == "cuda":
            torch.cuda.empty_cache()
    if args.peer:
        print("bench: transformers Llama (the peer) training ...", file=sys.stderr)
        ours = next(r for r in results["rows"] if r["position"] == "rope")
        results["peer"] = bench_peer(bench_config(args.config, args.overrides + ["model.position.type=rope"]),
                                     device, args.steps, args.warmup)
        results["peer"]["ratio"] = ours["train_tokens_per_s"] / results["peer"]["train_tokens_per_s"]
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "bench.json").write_text(json.dumps(results, indent=2))
    table = markdown(results)
    (args.out / "bench.md").write_text(table)
    print(table)


if __name__ == "__main__":
    main()
