"""Where a training step's time goes: a short training loop under torch.profiler, as markdown.

    python -m speed.profile --config configs/gpt2-124m.yaml --out studies/bench/gpu   # on a GPU (make gpu-profile)
    python -m speed.profile --config configs/tiny.yaml                                # on the CPU, into runs/profile

The step is speed.bench's (random tokens, bf16 autocast on CUDA, compiled where run.compile is on, clipping
and AdamW). Written to --out as profile.md and profile.json:
- the step's tokens/s and MFU (speed.bench's peak table), timed without the profiler;
- the share of the profiled span in matrix products, attention, elementwise and other kernels, and idle
  gaps: on CUDA the kernels' time on the device, from the first kernel to the last, idle where no kernel
  runs; on the CPU the own (self) time of the operators and of inductor's generated kernels, idle the time
  outside them (Python, dispatch);
- the top kernels (CPU: operators) by that time; the shares again after the evaluations below;
- training tokens/s before and after each of --evaluations evaluation passes run as train.py runs them
  (the eager model in eval mode without gradients, validation batches of the training shape), with the
  graphs torch.compile built and, on CUDA, the allocator's new device allocations after each: the issue of
  a compiled run that slows down after its first evaluation.
"""
from __future__ import annotations

import argparse
import json
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import torch
from torch.autograd import DeviceType

from config import ArgumentParser, Config, UserError, run_cli
from device import autocast, compiled, keep_freed_host_memory, pick_device
from speed.results import mode_note
from speed.bench import bench_config, device_name, make_step, random_batch, sync, time_steps, training_row
from model.gpt import GPT, make_optimizer

# Kernel (CPU: operator) names by category, the first match wins: attention before matrix products,
# since attention kernels multiply matrices too.
CATEGORIES = (
    ("attention", re.compile(r"flash|fmha|attention|attn|sdpa|flex", re.I)),
    ("matmul", re.compile(r"gemm|cutlass|xmma|cublas|nvjet|matmul|\bmm\b|addmm|bmm|_mm_|triton_tem_fused_mm", re.I)),
)
OTHER = "elementwise and other"  # pointwise and fused kernels, norms, the loss, the optimizer, copies
LABELS = {"matmul": "matrix products", "attention": "attention", OTHER: "elementwise and other kernels "
          "(norms, loss, optimizer, copies)", "idle": "idle gaps (no kernel running)"}


def category(name: str) -> str:
    return next((label for label, pattern in CATEGORIES if pattern.search(name)), OTHER)


@dataclass
class Kernel:
    name: str
    start: float  # microseconds, on the profiler's clock
    end: float
    time: float  # its own time: the kernel's duration, or an operator's self CPU time


COMPILED = "## Call CompiledFxGraph"  # the CPU profiler's range around a compiled graph: its generated kernels


def kernels_of(events, cuda: bool) -> list[Kernel]:
    """The work the device did: CUDA kernels (and copies) on a GPU; on the CPU the aten operators and the
    kernels inductor generated (the self time of the range around each compiled graph), with their self
    time (an operator's children are operators too, so self times do not overlap). On a GPU the ranges that
    annotate kernels (such as "Optimizer.step#AdamW.step") are left out: their kernels are counted already."""
    if cuda:
        return [Kernel(e.name, e.time_range.start, e.time_range.end, e.time_range.end - e.time_range.start)
                for e in events if e.device_type == DeviceType.CUDA and not e.is_user_annotation]
    return [Kernel("inductor's generated kernels" if e.name.startswith(COMPILED) else e.name, e.time_range.start,
                   e.time_range.end, e.self_cpu_time_total)
            for e in events if e.device_type == DeviceType.CPU and e.name.startswith(("aten::", COMPILED))]


def busy_time(kernels: list[Kernel], cuda: bool) -> float:
    """Time in which some kernel runs: the union of the kernels' intervals on a GPU (streams may overlap),
    the sum of operator self times on the CPU."""
    if not cuda:
        return sum(k.time for k in kernels)
    busy, reach = 0.0, float("-inf")
    for k in sorted(kernels, key=lambda k: k.start):
        if k.end > reach:
            busy += k.end - max(k.start, reach)
            reach = k.end
    return busy


def time_shares(events, cuda: bool) -> dict:
    """{span_ms, shares {category: fraction of the span}, top [...]} of the profiled events."""
    kernels = kernels_of(events, cuda)
    if not kernels:
        raise RuntimeError("the profiler recorded no kernels")
    # the span: from the first kernel to the last on a GPU, from the first operator to the last on the CPU
    ranges = [(k.start, k.end) for k in kernels] if cuda else \
        [(e.time_range.start, e.time_range.end) for e in events if e.device_type == DeviceType.CPU]
    span = max(end for _, end in ranges) - min(start for start, _ in ranges)
    per_name: dict[str, list] = {}
    totals = {label: 0.0 for label in ("matmul", "attention", OTHER)}
    for k in kernels:
        entry = per_name.setdefault(k.name, [0.0, 0])
        entry[0] += k.time
        entry[1] += 1
        totals[category(k.name)] += k.time
    busy = busy_time(kernels, cuda)
    shares = {label: t / span for label, t in totals.items()}
    shares["idle"] = max(0.0, span - busy) / span
    top = sorted(per_name.items(), key=lambda item: -item[1][0])
    return {"span_ms": span / 1e3, "shares": shares,
            "top": [{"name": name, "category": category(name), "calls": calls, "ms": t / 1e3, "share": t / span}
                    for name, (t, calls) in top]}


def evaluate_as_training_does(model: GPT, cfg: Config, device) -> None:
    """One evaluation pass as train.py's evaluate() runs it: the eager model (the compiled one is only for
    training steps) in eval mode without gradients, under autocast, on eval_tokens of validation batches of
    the training shape copied from the host (the last one smaller, as the validation windows rarely fill
    it), a loss read back from each; then train mode again."""
    B, T = cfg.train.batch_size, cfg.model.max_seq_len
    sizes = [B] * max(1, cfg.train.eval_tokens // (B * T)) + [max(1, B // 2)]
    model.eval()
    with torch.no_grad():
        for size in sizes:
            x, y = torch.randint(0, cfg.model.vocab_size, (2, size, T)).to(device)
            with autocast(device):
                _, loss = model(x, y)
            loss.item()
    model.train()


def device_allocations(device) -> int:
    """Device memory allocations so far (cudaMalloc calls by the caching allocator); 0 off CUDA."""
    return torch.cuda.memory_stats(device).get("num_device_alloc", 0) if device.type == "cuda" else 0


def profiled(step, device, steps: int) -> dict:
    """time_shares of `steps` steps under torch.profiler."""
    cuda = device.type == "cuda"
    activities = [torch.profiler.ProfilerActivity.CPU] + ([torch.profiler.ProfilerActivity.CUDA] if cuda else [])
    sync(device)
    with torch.profiler.profile(activities=activities) as prof:
        for _ in range(steps):
            step()
        sync(device)
    return time_shares(prof.events(), cuda)


def profile(cfg: Config, device, steps: int, warmup: int, evaluations: int) -> dict:
    from torch._dynamo.utils import counters
    x, y = random_batch(cfg, device)
    torch.manual_seed(cfg.run.seed)
    model = GPT(cfg.model).to(device)
    if device.type == "cuda":
        model.use_flex_attention(True)
    optimizer = make_optimizer(model, cfg.train, device)
    step_model = compiled(model, cfg.run)
    step = make_step(lambda: step_model(x, y)[1], model, optimizer, device)
    for _ in range(warmup):  # compilation
        step()
    elapsed = time_steps(step, device, steps)
    row = training_row(cfg, device, model.num_params(), elapsed, steps, None)

    cuda = device.type == "cuda"
    shares = profiled(step, device, steps)

    after = [{"when": "before", "tokens_per_s": row["train_tokens_per_s"], "graphs": 0, "device_allocs": 0}]
    for i in range(evaluations):
        evaluate_as_training_does(model, cfg, device)
        graphs, allocs = counters["stats"]["unique_graphs"], device_allocations(device)
        tokens_per_s = training_row(cfg, device, model.num_params(), time_steps(step, device, steps), steps,
                                    None)["train_tokens_per_s"]
        after.append({"when": f"after evaluation {i + 1}", "tokens_per_s": tokens_per_s,
                      "graphs": counters["stats"]["unique_graphs"] - graphs,
                      "device_allocs": device_allocations(device) - allocs})
    if evaluations:  # where a step's time goes after them: a host-side slowdown shows as idle gaps
        shares["shares_after"] = profiled(step, device, steps)["shares"]
    return {"device": device_name(device), "torch": torch.__version__, "compile": cfg.run.compile,
            "compile_mode": cfg.run.compile_mode,
            "precision": "bf16 autocast" if cuda else "float32", "clock": "CUDA" if cuda else "CPU",
            "position": cfg.model.position.type, "batch_size": cfg.train.batch_size, "seq_len": cfg.model.max_seq_len,
            "params": model.num_params(), "steps": steps, "step_ms": 1e3 * elapsed / steps,
            "tokens_per_s": row["train_tokens_per_s"], "mfu": row["mfu"], **shares, "evaluations": after}


def pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


def markdown(r: dict, config: str, top: int = 15) -> str:
    clock, after = r["clock"], r.get("shares_after")
    lines = ["# Where a training step's time goes", "",
             f"Device: **{r['device']}**, config `{config}`, torch {r['torch']}, compile={r['compile']}{mode_note(r)}, "
             f"{r['precision']}, {r['position']}, {r['params'] / 1e6:.2f}M parameters, batch {r['batch_size']} x "
             f"{r['seq_len']} tokens (`python -m speed.profile`).", "",
             "## The step", "", "| tokens/s | step | MFU |", "|---:|---:|---:|",
             f"| {r['tokens_per_s']:,.0f} | {r['step_ms']:.1f} ms | {pct(r['mfu'])} |", "",
             f"Timed over {r['steps']} steps without the profiler; MFU as speed.bench (PaLM appendix B, against the "
             "device's bf16 dense peak; n/a where the peak table has no entry).", "",
             "## Where the time goes", "",
             f"{clock} time of {r['steps']} profiled steps, as shares of the span ({r['span_ms']:.1f} ms) "
             + ("from the first kernel to the last; idle is where no kernel runs (launch gaps, host syncs)."
                if clock == "CUDA" else "from the first operator to the last: each operator's own (self) time, "
                "and idle the time outside any operator (Python, dispatch, the framework).")
             + " Kernels are sorted into categories by name (`speed.profile.CATEGORIES`)."
             + (" The last column profiles the same steps again after the evaluations below." if after else ""), ""]
    columns = [r["shares"]] + ([after] if after else [])
    evaluations = len(r["evaluations"]) - 1
    lines += ["| time in | share of the span |" + (f" after {evaluations} evaluations |" if after else ""),
              "|---|---:|" + ("---:|" if after else "")]
    lines += [f"| {LABELS[label]} | " + " | ".join(pct(c[label]) for c in columns) + " |" for label in r["shares"]]
    lines += ["| total | " + " | ".join(pct(sum(c.values())) for c in columns) + " |", "",
              f"## Top kernels by {clock} time" if clock == "CUDA" else "## Top operators by CPU self time", "",
              "| kernel | category | calls | ms | share of the span |", "|---|---|---:|---:|---:|"]
    for k in r["top"][:top]:
        name = k["name"] if len(k["name"]) <= 90 else k["name"][:87] + "..."
        lines.append(f"| `{name.replace('|', '/')}` | {k['category']} | {k['calls']} | {k['ms']:.2f} | "
                     f"{pct(k['share'])} |")
    before = r["evaluations"][0]["tokens_per_s"]
    lines += ["", "## Training after evaluation", "",
              f"Tokens/s of {r['steps']} steps before and after each evaluation pass run as train.py runs it; the "
              "graphs torch.compile built in those steps (a recompiled training step shows here) and, on CUDA, "
              "the allocator's new device allocations (fragmentation shows here).", "",
              "| | tokens/s | against before | graphs built | device allocations |", "|---|---:|---:|---:|---:|"]
    lines += [f"| {e['when']} | {e['tokens_per_s']:,.0f} | {e['tokens_per_s'] / before:.3f} | {e['graphs']} | "
              f"{e['device_allocs']} |" for e in r["evaluations"]]
    return "\n".join(lines) + "\n"


def main(argv=None):
    keep_freed_host_memory()  # process-wide: CPU steps reuse freed memory (device.py)
    parser = ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", required=True)
    parser.add_argument("--steps", type=int, default=10, help="steps timed, and steps profiled")
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps first (compilation)")
    parser.add_argument("--evaluations", type=int, default=3, help="evaluation passes, each followed by --steps steps")
    parser.add_argument("--out", type=Path, default=Path("runs/profile"),
                        help="output folder for profile.md and profile.json (make gpu-profile: studies/bench/gpu)")
    parser.add_argument("overrides", nargs="*", help="dotted.key=value")
    args = parser.parse_args(argv)

    def options():
        for name in ("steps", "warmup", "evaluations"):
            if getattr(args, name) < (1 if name == "steps" else 0):
                raise UserError(f"--{name} must be at least {1 if name == 'steps' else 0}, got {getattr(args, name)}")
        cfg = bench_config(args.config, args.overrides)
        return cfg, pick_device(cfg.run.device, "run.device")
    cfg, device = run_cli(options)
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    print(f"profile: {cfg.model.position.type} on {device_name(device)} ...", file=sys.stderr)
    start = time.perf_counter()
    results = profile(cfg, device, args.steps, args.warmup, args.evaluations)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "profile.json").write_text(json.dumps({"config": args.config, "overrides": args.overrides, **results},
                                                      indent=2))
    text = markdown(results, args.config)
    (args.out / "profile.md").write_text(text)
    print(text + f"\n({time.perf_counter() - start:.0f} s; written to {args.out})")


if __name__ == "__main__":
    main()
