"""Throughput benchmark: training tokens/s and MFU, and evaluation speed and memory at long lengths.

    python -m speed.bench --config configs/tiny.yaml [--positions rope,alibi] [--out DIR] [key=value ...]

For each encoding: training tokens/s on random tokens (compute only, no data loading), model FLOPs
utilisation (PaLM, arXiv 2204.02311, appendix B) against the device's bf16 dense peak, parameter
count, peak memory; then forward-only evaluation tokens/s and peak memory at 1x ... 32x the
training length (batch 1), and decoding tokens/s through the KV cache, with every token kept and with
attention sinks' rolling cache (4 sinks and the last L - 4 tokens, as generate.py --context-method sinks).
--sliding-window W adds a forward pass at --sliding-window-length tokens of our rope model with a window of W tokens
on every layer, three ways: attention reading only the keys inside the window, the window as a (T, S) mask, and
transformers' Gemma3 of the same shape with every layer sliding (tokens/s and peak memory; --positions '' runs it
alone). Writes bench.json and bench.md to --out and prints the table.
"""
from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path

import torch

from checkpoint import load_model
from config import ArgumentParser, Config, ContextConfig, UserError, load_config, run_cli
from device import autocast, compiled, keep_freed_host_memory, pick_device
from device import PeakMemory
from speed.results import markdown
from speed.peers import make_peer
from generate import compile_step, for_decoding
from model.attention import KVCache
from model.context import pairing_problem
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
SINKS = ContextConfig("sinks")  # its defaults: 4 sinks and the last L - 4 tokens, a rolling KV cache of L tokens


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


def make_step(loss_of, model: torch.nn.Module, optimizer, device):
    """One optimizer step: forward under autocast, backward, clipping, AdamW, the same for our model and
    the peer."""
    def step():
        with autocast(device):
            loss = loss_of()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    return step


def time_steps(step, device, steps: int) -> float:
    sync(device)
    start = time.perf_counter()
    for _ in range(steps):
        step()
    sync(device)
    return time.perf_counter() - start


def time_training(loss_of, model: torch.nn.Module, optimizer, device, steps: int, warmup: int) -> tuple[float, float]:
    """(seconds for `steps` optimizer steps after `warmup` untimed ones, peak MiB)."""
    step = make_step(loss_of, model, optimizer, device)
    for _ in range(warmup):  # includes compilation
        step()
    with PeakMemory(device) as memory:
        elapsed = time_steps(step, device, steps)
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


def bench_training(cfg: Config, device, steps: int, warmup: int, flex: bool = True) -> dict:
    """`flex`: on CUDA the score biases through FlexAttention, as train.py runs them; off, ALiBi folded into q and
    k and the learned biases as SDPA's float mask, as on the CPU."""
    x, y = random_batch(cfg, device)
    model = GPT(cfg.model).to(device)
    if device.type == "cuda" and flex:
        model.use_flex_attention(True)
    optimizer = make_optimizer(model, cfg.train, device)
    step_model = compiled(model, cfg.run)
    elapsed, peak_mib = time_training(lambda: step_model(x, y)[1], model, optimizer, device, steps, warmup)
    return {**training_row(cfg, device, model.num_params(), elapsed, steps, peak_mib), "model": model,
            "step_model": step_model}


def bench_peer(cfg: Config, device, steps: int, warmup: int, rounds: int, peer_name: str) -> dict:
    """Our model (cfg's encoding) and a peer of the same shape (speed/peers.py) trained in turns on the same
    batches: `rounds` rounds of `steps` timed steps each, the first model alternating, after `warmup`
    steps of each. A round's ratio is our model FLOP/s over the peer's; the median round is reported."""
    x, y = random_batch(cfg, device)
    torch.manual_seed(cfg.run.seed)
    ours = GPT(cfg.model).to(device)
    peer = make_peer(peer_name, cfg.model)
    peer.model.to(device)
    runs = {m: compiled(m, cfg.run) for m in (ours, peer.model)}
    steps_of = {"ours": make_step(lambda: runs[ours](x, y)[1], ours, make_optimizer(ours, cfg.train, device), device),
                "peer": make_step(lambda: peer.loss_of(runs[peer.model], x, y), peer.model,
                                  make_optimizer(peer.model, cfg.train, device), device)}
    for step in steps_of.values():
        for _ in range(warmup):
            step()
    seconds = {"ours": [], "peer": []}
    for r in range(rounds):
        for who in (("ours", "peer") if r % 2 == 0 else ("peer", "ours")):
            seconds[who].append(time_steps(steps_of[who], device, steps))
    tokens = steps * x.numel()
    ours_flops = flops_per_token(cfg.model, cfg.model.max_seq_len, ours.num_params())
    ratios = [ours_flops * p / (peer.flops_per_token * o) for o, p in zip(seconds["ours"], seconds["peer"])]
    median = statistics.median
    peer_tokens_per_s, peak = tokens / median(seconds["peer"]), peak_flops(device)
    return {"name": peer.name, "params": sum(p.numel() for p in peer.model.parameters()),
            "train_tokens_per_s": peer_tokens_per_s, "ours_tokens_per_s": tokens / median(seconds["ours"]),
            "mfu": peer.flops_per_token * peer_tokens_per_s / peak if peak else None, "train_peak_mib": None,
            "flops_per_token": peer.flops_per_token, "ours_flops_per_token": ours_flops,
            "round_ratios": ratios, "ratio": median(ratios)}


@torch.inference_mode()
def bench_eval(model: GPT, run, device, multiples: list[int], repeats: int) -> list[dict]:
    """Forward tokens/s and peak memory at each multiple of L; `run` is the model as trained (compiled
    when run.compile is on), timed after a warm-up pass at each length."""
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
                run(x, last_only=True)  # warm-up (and compilation at this length)
            with PeakMemory(device) as memory:
                sync(device)
                start = time.perf_counter()
                for _ in range(repeats):
                    with autocast(device):
                        run(x, last_only=True)
                sync(device)
                elapsed = time.perf_counter() - start
        except torch.OutOfMemoryError:
            row["note"] = "out of memory"
            torch.cuda.empty_cache()
            continue
        row.update(tokens_per_s=repeats * length / elapsed, peak_mib=memory.mib)
    return rows


WARM_UP_UP_TO = 8192  # longer forward passes are timed without a warm-up one (each is minutes on a CPU)


def time_forward(run, device, repeats: int, warm_up: bool = True) -> dict:
    """Seconds per forward pass `run()` over `repeats` passes after a warm-up one, and the peak MiB in use; a note
    where it ran out of memory."""
    try:
        if warm_up:
            with autocast(device):
                run()
        with PeakMemory(device) as memory:
            sync(device)
            start = time.perf_counter()
            for _ in range(repeats):
                with autocast(device):
                    run()
            sync(device)
            elapsed = time.perf_counter() - start
    except torch.OutOfMemoryError:
        torch.cuda.empty_cache()
        return {"seconds": None, "peak_mib": None, "note": "out of memory"}
    return {"seconds": elapsed / repeats, "peak_mib": memory.mib, "note": ""}


# bench_sliding_window's cases by their --sliding-window-cases names
SLIDING_CASES = {"ours": "ours, keys inside the window", "mask": "ours, (T, S) mask", "peer": "transformers Gemma3 (sdpa)"}


@torch.inference_mode()
def bench_sliding_window(ours: GPT, peer, device, length: int, repeats: int, seed: int,
                         cases: tuple[str, ...] = tuple(SLIDING_CASES)) -> dict:
    """A forward pass (batch 1, `length` tokens, the last token's logits) of a model with sliding-window layers:
    attention reading only each block of queries' keys (model.attention.windowed_attention), the same model with the
    window as a (T, S) mask (GPT.window_mask, as every encoding with a bias takes it), and its transformers peer
    (speed/peers.py: Gemma3 of our shape, or the model itself exported). Tokens/s and peak MiB of each, and how far
    the peer's last logits are from ours; `cases`, those of SLIDING_CASES timed (a mask's memory grows with the
    square of the length)."""
    torch.manual_seed(seed)
    x = torch.randint(0, ours.cfg.vocab_size, (1, length), device=device)
    logits = {}

    def keep(name, out):
        logits[name] = out.float()

    def by_mask():
        ours.window_mask = True
        try:
            keep("mask", ours(x, last_only=True)[0])
        finally:
            ours.window_mask = False
    runs = {"ours": lambda: keep("ours", ours(x, last_only=True)[0]), "mask": by_mask,
            "peer": lambda: keep("peer", peer(input_ids=x, logits_to_keep=1).logits)}
    rows = []
    for name, run in [(SLIDING_CASES[case], runs[case]) for case in cases]:
        timed = time_forward(run, device, repeats, warm_up=length <= WARM_UP_UP_TO)
        rows.append({"name": name, "tokens_per_s": timed["seconds"] and length / timed["seconds"],
                     "peak_mib": timed["peak_mib"], "note": timed["note"]})
    differ = {k: float((v - logits["ours"]).abs().max()) for k, v in logits.items() if k != "ours" and "ours" in logits}
    window = ours.cfg.sliding_window
    return {"length": length, "window": window, "layers": ours.cfg.layer_kinds.count("sliding") if ours.cfg.layer_types
            else ours.cfg.n_layers, "n_layers": ours.cfg.n_layers, "rows": rows, "max_logit_difference": differ}


@torch.inference_mode()
def bench_generation(model: GPT, step, device, multiples, new_tokens: int = 64, warmup: int = 8,
                     context: ContextConfig | None = None) -> list[dict]:
    """Decoding tokens/s (batch 1, KV cache) of the last `new_tokens` tokens of a context of m x L, after a
    prefill and `warmup` decoded tokens that are not timed. `step`: None (the eager model, its cache
    addressed by the host), or the model compiled for decoding (generate.compile_step: a static cache,
    CUDA graphs on CUDA), whose compilation and graph recording happen in the untimed tokens. `compiles`:
    dynamo graphs compiled while timed, which should be none. `context`: a context method for the eager
    model, its cache rolled as generate.py rolls it (sinks: the sink tokens and the window)."""
    model.use_context_method(context)
    try:
        return decode_rows(model, step, device, multiples, new_tokens, warmup)
    finally:
        model.use_context_method(None)


def decode_span(length: int, new_tokens: int, warmup: int) -> tuple[int, int]:
    """(tokens prefilled, position the timing starts at) for decoding to `length`: the last `new_tokens` timed after
    `warmup` untimed ones (fewer where the length is short)."""
    prefill = max(1, length - new_tokens - warmup)
    return prefill, min(length, prefill + warmup)


def decode_rows(model: GPT, step, device, multiples, new_tokens: int, warmup: int) -> list[dict]:
    from torch._dynamo.utils import counters
    L, rows = model.cfg.max_seq_len, []
    kept = model.context_method.kept if model.context_method is not None else None
    for m in multiples:
        row = {"multiple": m, "tokens_per_s": None, "compiles": 0, "note": ""}
        rows.append(row)
        if model.position.max_positions is not None and m * L > model.position.max_positions:
            row["note"] = "n/a (past the learned table)"
            continue
        x = torch.randint(0, model.cfg.vocab_size, (1, m * L), device=device)
        prefill, timed_from = decode_span(m * L, new_tokens, warmup)
        cache = KVCache(model.cfg.n_layers, capacity=m * L)
        with autocast(device):
            model(x[:, :prefill], cache=cache, last_only=True)
            if step is not None:
                cache.make_static()
            for i in range(prefill, m * L):
                if i == timed_from:
                    sync(device)
                    graphs, start = counters["stats"]["unique_graphs"], time.perf_counter()
                if kept is not None:
                    cache.trim(kept[1] - 1, first=kept[0])
                if step is None:
                    model(x[:, i:i + 1], cache=cache, last_only=True)
                else:
                    if device.type == "cuda":
                        torch.compiler.cudagraph_mark_step_begin()
                    step(x[:, i:i + 1], cache=cache, last_only=True)
            sync(device)
        row["tokens_per_s"] = (m * L - timed_from) / (time.perf_counter() - start)
        row["compiles"] = counters["stats"]["unique_graphs"] - graphs
    return rows


class TokenClock:
    """A transformers streamer that notes the time each token is handed over (the prompt first)."""

    def __init__(self, device):
        self.device, self.times = device, []

    def put(self, value):
        sync(self.device)
        self.times.append(time.perf_counter())

    def end(self):
        pass


@torch.inference_mode()
def bench_peer_decoding(cfg: Config, device, multiples, new_tokens: int = 64, warmup: int = 8) -> dict:
    """Batch-1 greedy decoding, ours against transformers' on the same weights, in turns at each multiple of L:
    our rope model through generate.compile_step (static cache, CUDA graphs on CUDA) as decode_rows times it,
    and the model exported to LlamaForCausalLM (bf16 on a GPU) through transformers' `generate` with its static
    cache, compiled by generate itself (CompileConfig: reduce-overhead, CUDA graphs on CUDA; on the CPU compiled
    as well, so the CPU test runs the same path). Both decode the last `new_tokens` of m x L after `warmup`
    untimed tokens; transformers' generate runs once untimed first at each length (its compilation), and its
    tokens are timed from a streamer that synchronises the device at each one."""
    import transformers

    from speed.peers import exported_llama
    torch.manual_seed(cfg.run.seed)
    ours = GPT(cfg.model).to(device).eval()
    # on a GPU in bf16 weights, as transformers' users run it (autocast would write bf16 keys into its float32
    # static cache); ours with bf16 matrices under autocast, as generate.py decodes
    llama = exported_llama(ours).to(device, torch.bfloat16 if device.type == "cuda" else torch.float32).eval()
    ours = for_decoding(ours)
    compile_config = transformers.CompileConfig(fullgraph=True, mode="reduce-overhead")
    compile_config._compile_all_devices = True  # transformers compiles only on accelerators unless told
    rows, L = [], cfg.model.max_seq_len
    for m in multiples:  # decode_rows' tokens: n after the prompt, the first `warm` of them untimed
        prefill, timed_from = decode_span(m * L, new_tokens, warmup)
        n, warm = m * L - prefill, timed_from - prefill
        prompt = torch.randint(0, cfg.model.vocab_size, (1, prefill), device=device)

        def generate():
            clock = TokenClock(device)
            out = llama.generate(prompt, max_new_tokens=n, min_new_tokens=n, do_sample=False, streamer=clock,
                                 cache_implementation="static", compile_config=compile_config, pad_token_id=0,
                                 eos_token_id=None)
            return out, clock.times
        generate()
        out, times = generate()
        peer = (n - warm) / (times[n] - times[warm])  # times[k]: after the k-th new token (times[0]: the prompt)
        torch._dynamo.reset()
        mine = decode_rows(ours, compile_step(ours), device, [m], new_tokens, warmup)[0]["tokens_per_s"]
        rows.append({"multiple": m, "ours_tokens_per_s": mine, "peer_tokens_per_s": peer, "ratio": mine / peer,
                     "peer_tokens": out.shape[1] - prompt.shape[1]})
    return {"name": f"transformers {transformers.__version__} generate (static cache, torch.compile "
                    f"reduce-overhead) on our rope model exported to LlamaForCausalLM", "rows": rows}


def bench_config(path: str, overrides: list[str]) -> Config:
    cfg = load_config(Config, path, overrides).resolve()
    check_model(cfg.model)
    return cfg


def sliding_cases(given: str) -> tuple[str, ...]:
    cases = tuple(c for c in given.split(",") if c)
    unknown = [c for c in cases if c not in SLIDING_CASES]
    if unknown or not cases:
        raise UserError(f"--sliding-window-cases: {','.join(unknown) or 'none given'}; choose from "
                        f"{', '.join(SLIDING_CASES)}")
    return cases


def sliding_window_models(args, device) -> tuple[GPT, object]:
    """(ours, its transformers peer) for the sliding-window forward: a run's own model and itself exported, or our
    rope model of --config with a window of --sliding-window on every layer and Gemma3 of its shape."""
    if args.sliding_window_length < 1:
        raise UserError(f"--sliding-window-length must be at least 1, got {args.sliding_window_length}")
    from speed.peers import exported_gemma3, gemma3_sliding
    if args.sliding_window_model is not None:
        ours = load_model(args.sliding_window_model, device=device)
        if not ours.cfg.sliding_window:
            raise UserError(f"{args.sliding_window_model} has no sliding window (model.sliding_window)")
        return ours, exported_gemma3(ours).to(device).eval()
    cfg = bench_config(args.config, args.overrides + ["model.position.type=rope",
                                                      f"model.sliding_window={args.sliding_window}"])
    torch.manual_seed(cfg.run.seed)
    ours = GPT(cfg.model).to(device).eval()
    return ours, gemma3_sliding(cfg.model, args.sliding_window, args.sliding_window_length).to(device).eval()


def parse_options(args) -> tuple[list[str], list[int], list[int], Config, torch.device]:
    positions = [p for p in args.positions.split(",") if p]
    for name in ("steps", "rounds"):
        if getattr(args, name) < 1:
            raise UserError(f"--{name} must be at least 1, got {getattr(args, name)}")
    unknown = [p for p in positions if p not in ENCODINGS]
    if unknown:
        raise UserError(f"--positions: unknown encoding {unknown[0]!r}; choose one of {', '.join(sorted(ENCODINGS))}")
    multiples, decode_multiples = (multiples_option(args, name) for name in ("multiples", "decode_multiples"))
    base = bench_config(args.config, args.overrides)
    return positions, multiples, decode_multiples, base, pick_device(base.run.device, "run.device")


def multiples_option(args, name: str) -> list[int]:
    value, flag = getattr(args, name), "--" + name.replace("_", "-")
    try:
        multiples = [int(m) for m in value.split(",")]
    except ValueError:
        raise UserError(f"{flag} must be comma-separated integers, got {value!r}") from None
    if min(multiples) < 1:
        raise UserError(f"{flag} must be positive, got {value!r}")
    return multiples


def main(argv=None):
    keep_freed_host_memory()  # process-wide: CPU steps reuse freed memory (device.py)
    parser = ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", required=True)
    parser.add_argument("--positions", default=",".join(sorted(ENCODINGS)))
    parser.add_argument("--multiples", default="1,2,4,8,16,32", help="evaluation lengths as multiples of max_seq_len")
    parser.add_argument("--decode-multiples", default="1,8", help="decoding contexts as multiples of max_seq_len")
    parser.add_argument("--steps", type=int, default=10, help="timed training steps")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=2, help="timed forward passes per evaluation length")
    parser.add_argument("--out", type=Path, default=Path("runs/bench"),
                        help="output folder (default runs/bench; studies/bench holds the committed tables)")
    parser.add_argument("--peer", default=None,
                        help="also train a model of the same shape in turns with our rope model and report the "
                             "model-FLOP/s ratio: gpt2 (a plain GPT-2 written here), transformers (its "
                             "LlamaForCausalLM; then also batch-1 decoding against transformers' generate on our "
                             "model exported to it), or the path of nanoGPT's model.py")
    parser.add_argument("--attention", choices=["flex", "sdpa"], default="flex",
                        help="on CUDA, the score biases through FlexAttention (as train.py; the default) or through "
                             "SDPA (ALiBi folded into q and k, the learned biases as a float mask, as on the CPU)")
    parser.add_argument("--rounds", type=int, default=5, help="timed rounds of --steps steps for each of ours "
                                                                 "and the peer")
    parser.add_argument("--sliding-window", type=int, default=None, metavar="W",
                        help="also time a forward pass of our rope model with a sliding window of W tokens on every "
                             "layer, against the same window as a (T, S) mask and transformers' Gemma3 (--positions '' "
                             "for this case alone)")
    parser.add_argument("--sliding-window-model", type=Path, default=None, metavar="RUN",
                        help="the same, of a run directory's own model (its weights, layer types and window: Gemma 3 "
                             "converted by make gemma3), against itself exported to transformers' Gemma3")
    parser.add_argument("--sliding-window-length", type=int, default=8192, help="its tokens (batch 1)")
    parser.add_argument("--sliding-window-cases", default=",".join(SLIDING_CASES),
                        help=f"the forwards timed, of {', '.join(SLIDING_CASES)} (default all)")
    parser.add_argument("overrides", nargs="*", help="dotted.key=value")
    args = parser.parse_args(argv)
    positions, multiples, decode_multiples, base, device = run_cli(lambda: parse_options(args))
    cases = run_cli(lambda: sliding_cases(args.sliding_window_cases))
    peer_cfg = None
    if args.peer:  # the peer is named and built before the long part, so a bad --peer fails at once
        peer_cfg = run_cli(lambda: bench_config(args.config, args.overrides + ["model.position.type=rope"]))
        run_cli(lambda: make_peer(args.peer, peer_cfg.model))
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    results = {"device": device_name(device), "config": args.config, "torch": torch.__version__,
               "compile": base.run.compile, "batch_size": base.train.batch_size, "seq_len": base.model.max_seq_len,
               "compile_mode": base.run.compile_mode, "attention": args.attention, "overrides": args.overrides,
               "rows": []}
    args.out.mkdir(parents=True, exist_ok=True)
    for position in positions:
        cfg = bench_config(args.config, args.overrides + [f"model.position.type={position}"])
        torch._dynamo.reset()  # each model compiles afresh, never against the previous one's recompile limit
        print(f"bench: {position} training ...", file=sys.stderr)
        row = bench_training(cfg, device, args.steps, args.warmup, flex=args.attention == "flex")
        model, run = row.pop("model"), row.pop("step_model")
        print(f"bench: {position} evaluation at {args.multiples}x ...", file=sys.stderr)
        row["eval"] = bench_eval(model, run, device, multiples, args.repeats)
        if cfg.run.compile:
            torch._dynamo.reset()  # the decoding step's graphs start afresh, far from the recompile limit
        model = for_decoding(model)  # trained and evaluated: from here on it decodes, as generate.py does
        row["generation"] = bench_generation(model, compile_step(model) if cfg.run.compile else None, device,
                                             decode_multiples)
        if pairing_problem(SINKS, position, cfg.model.position.scaling) is None:
            row["generation_sinks"] = bench_generation(model, None, device, decode_multiples, context=SINKS)
        results["rows"].append({"position": position, **row})
        write_results(results, args.out)  # the finished rows survive a later failure or a time limit
        del model, run
        if device.type == "cuda":
            torch.cuda.empty_cache()
    if args.sliding_window is not None or args.sliding_window_model is not None:
        ours, peer = run_cli(lambda: sliding_window_models(args, device))
        print(f"bench: a forward of {args.sliding_window_length} tokens with a sliding window of "
              f"{ours.cfg.sliding_window} ...", file=sys.stderr)
        results["sliding_window"] = bench_sliding_window(ours, peer, device, args.sliding_window_length, args.repeats,
                                                         base.run.seed, cases)
        results["sliding_window"]["model"] = str(args.sliding_window_model or "random")
        write_results(results, args.out)
    if peer_cfg is not None:
        torch._dynamo.reset()
        print(f"bench: ours (rope) and the peer {args.peer}, {args.rounds} rounds in turns ...", file=sys.stderr)
        results["peer"] = run_cli(lambda: bench_peer(peer_cfg, device, args.steps, args.warmup, args.rounds, args.peer))
        if args.peer == "transformers":
            write_results(results, args.out)
            torch._dynamo.reset()
            print("bench: decoding, ours and transformers' generate on the exported model, in turns ...",
                  file=sys.stderr)
            results["peer_decoding"] = bench_peer_decoding(peer_cfg, device, decode_multiples)
    print(write_results(results, args.out))


def write_results(results: dict, out: Path) -> str:
    (out / "bench.json").write_text(json.dumps(results, indent=2))
    table = markdown(results)
    (out / "bench.md").write_text(table)
    return table


if __name__ == "__main__":
    main()
