"""The measured prose and tables of reports/bench/README.md, rendered by `make reports` from committed measurements.

On the CPU: reports/bench/cpu (`make bench-cpu`: every encoding, the peers, the profile) and its history.json (changes
measured when they were made, before their output was kept as files). On the GPU: reports/bench/gpu, the profiles
(profile.json, before-rope-table/ and alibi/; modes/reduce-overhead/profile.md, whose profile.json did not come back),
the bench tables' rows (bench.json of the H100 calls and the H200's peer/ and biases/), the CUDA tests' output, the
MiniMind epoch's log and the H200's first-call log. A comparative sentence is written only while its predicate holds
(render.prose). Not in any committed file, so written here: the 64 decoded tokens, the H100's bf16 peak and the 45%
and 90% aims."""
from __future__ import annotations

import json
import re
import statistics
from pathlib import Path
from typing import Callable

from render.prose import bullet, claim, listed, number, paragraph

DECODED = 64  # speed.bench times the last 64 tokens of each context
PEAK = 989e12  # the H100's bf16 FLOP/s (speed.bench's peak table)
AIM_MFU, AIM_BIASES = 0.45, 0.9
WORDS = {3: "three"}


# ----------------------------------------------------------------------------- speed.bench's tables (bench.md)

def fmt(value, pattern="{:,.0f}"):
    return "n/a" if value is None else pattern.format(value)


def mode_note(results: dict) -> str:
    """`compile=True`'s mode where it is not torch's default, for the tables' first line."""
    mode = results["compile_mode"]
    return f" ({mode} mode)" if results["compile"] and mode != "default" else ""


def markdown(results: dict) -> str:
    lines = [f"Device: **{results['device']}**, config `{results['config']}`, torch {results['torch']}, "
             f"compile={results['compile']}{mode_note(results)}, batch {results['batch_size']} x "
             f"{results['seq_len']} tokens{', score biases through SDPA' if results['attention'] == 'sdpa' else ''}.",
             "",
             "| encoding | params | train tokens/s | MFU | train peak MiB |", "|---|---:|---:|---:|---:|"]
    peer = results.get("peer")
    for r in results["rows"] + ([{**peer, "position": f"peer: {peer['name']}"}] if peer else []):
        lines.append(f"| {r['position']} | {r['params'] / 1e6:.2f}M | {fmt(r['train_tokens_per_s'])} | "
                     f"{fmt(r['mfu'] and 100 * r['mfu'], '{:.1f}%')} | {fmt(r['train_peak_mib'])} |")
    if peer:
        lines += ["", f"Ours (rope) over the peer in model FLOP/s (6N + 12 L H Q T per token), trained in turns on "
                      f"the same batches in one process, median of {len(peer['round_ratios'])} rounds: "
                      f"**{peer['ratio']:.2f}x** (rounds: {', '.join(f'{r:.2f}' for r in peer['round_ratios'])}; "
                      f"tokens/s {fmt(peer['ours_tokens_per_s'])} against {fmt(peer['train_tokens_per_s'])})."]
    multiples = [e["multiple"] for e in results["rows"][0]["eval"]]
    path = "compiled model" if results["compile"] else "eager model"
    lines += ["", f"Evaluation (forward, batch 1, {path}, after a warm-up at each length): tokens/s / peak MiB in "
              "use (GPU allocator, or process RSS on a CPU) at each multiple of the training length.", "",
              "| encoding | " + " | ".join(f"{m}x" for m in multiples) + " |",
              "|---|" + "---:|" * len(multiples)]
    for r in results["rows"]:
        cells = [e["note"] or f"{fmt(e['tokens_per_s'])} / {fmt(e['peak_mib'])}" for e in r["eval"]]
        lines.append(f"| {r['position']} | " + " | ".join(cells) + " |")
    generation = results["rows"][0].get("generation") or []
    if generation:
        decoding = "compiled steps on a static cache, as generate.py --compile" if results["compile"] else path
        lines += ["", f"Generation (batch 1, KV cache, {decoding}, after 8 untimed decoded tokens): tokens/s decoding "
                  "the last 64 tokens of a context of each multiple of the training length (and the graphs "
                  "torch.compile built while timed, where any).", "",
                  "| encoding | " + " | ".join(f"{g['multiple']}x" for g in generation) + " |",
                  "|---|" + "---:|" * len(generation)]
        for r in results["rows"]:
            lines.append(f"| {r['position']} | " + " | ".join(
                g["note"] or fmt(g["tokens_per_s"]) + (f" ({g['compiles']} compiles)" if g.get("compiles") else "")
                for g in r["generation"]) + " |")
            sinks = r.get("generation_sinks")
            lines.append(f"| {r['position']}, sinks | " + " | ".join(
                "n/a (absolute positions)" if sinks is None else g["note"] or fmt(g["tokens_per_s"])
                for g in (sinks or r["generation"])) + " |")
        lines += ["", "Sinks: generate.py --context-method sinks, eager: a rolling KV cache of 4 sink tokens and the "
                  "last L - 4 (L tokens at every length), against every token kept above."]
    decoding = results.get("peer_decoding")
    if decoding:
        lines += ["", f"Decoding against {decoding['name']}: batch 1, greedy, the same weights, tokens/s of the last "
                  "64 tokens of a context of each multiple of the training length, ours (generate.py --compile's "
                  "static cache) and the peer in turns.", "",
                  "| | " + " | ".join(f"{r['multiple']}x" for r in decoding["rows"]) + " |",
                  "|---|" + "---:|" * len(decoding["rows"])]
        for label, key, pattern in [("ours (rope)", "ours_tokens_per_s", "{:,.0f}"),
                                    ("transformers generate", "peer_tokens_per_s", "{:,.0f}"),
                                    ("ours / transformers", "ratio", "{:.2f}x")]:
            lines.append(f"| {label} | " + " | ".join(fmt(r[key], pattern) for r in decoding["rows"]) + " |")
    return "\n".join(lines) + "\n"



# ----------------------------------------------------------------------------- the GPU page's prose

def kernel_ms(profile: dict, *words: str) -> float:
    """CUDA ms a step of the kernels whose names hold any of `words`."""
    return sum(k["ms"] for k in profile["top"] if any(w in k["name"] for w in words)) / profile["steps"]


def after_evaluations(profile: dict) -> list[float]:
    """Tokens/s after each evaluation pass over tokens/s before the first."""
    before, *after = profile["evaluations"]
    return [e["tokens_per_s"] / before["tokens_per_s"] for e in after]


class Gpu:
    """The committed GPU measurements, read from reports/bench/gpu."""

    def __init__(self, reports: Path):
        self.folder = folder = reports / "bench" / "gpu"
        load = lambda name: json.loads((folder / name).read_text())  # noqa: E731
        self.profile, self.before, self.alibi = (load(f"{p}profile.json") for p in ("", "before-rope-table/", "alibi/"))
        self.bench, self.decode, self.peer = (load(f"{p}bench.json") for p in ("", "decode/", "peer/"))
        self.h200 = {name: load(f"h200/{name}/bench.json") for name in ("peer", "biases")}
        p = self.profile
        self.span = p["span_ms"] / p["steps"]
        self.ms = {k: v * self.span for k, v in p["shares"].items()}  # ms a step of each kernel category
        self.at_peak = 6 * p["params"] * p["batch_size"] * p["seq_len"] / PEAK * 1e3  # the products at peak, ms
        self.now = after_evaluations(p)
        self.alibi_share = self.alibi["tokens_per_s"] / p["tokens_per_s"]
        self.decoding = [g["tokens_per_s"] for g in self.decode["rows"][0]["generation"]]
        self.grown = [g["tokens_per_s"] for g in self.bench["rows"][0]["generation"]]
        biases = {r["position"]: r for r in self.h200["biases"]["rows"]}
        self.biases = {p: biases[p]["train_tokens_per_s"] / biases["rope"]["train_tokens_per_s"]
                       for p in ("t5", "kerple", "fire")}
        self.bias_rows = biases
        [self.peer_decoding] = self.h200["peer"]["peer_decoding"]["rows"]

    def minimind(self) -> tuple[str, dict[int, int]]:
        """The epoch's final validation perplexity as logged, and {step: tokens/s of the 10 steps to it}."""
        log = (self.folder / "minimind-26m-epoch.log").read_text()
        rate = {int(s): int(r) for s, r in re.findall(r"step (\d+)/403 \| .* \| tok_s (\d+)", log)}
        return re.findall(r"step 403: .* val ppl ([\d.]+)", log)[0], rate

    def reduce_overhead(self) -> tuple[str, tuple[str, str, str], str, str]:
        """modes/reduce-overhead/profile.md: its header, (tokens/s, step ms, MFU %), idle %, span ms."""
        text = (self.folder / "modes/reduce-overhead/profile.md").read_text()
        step = re.search(r"^\| ([\d,]+) \| ([\d.]+) ms \| ([\d.]+)% \|$", text, re.M).groups()
        idle = re.search(r"^\| idle gaps \(no kernel running\) \| ([\d.]+)% \|", text, re.M)[1]
        return text.splitlines()[2], step, idle, re.search(r"shares of the span \(([\d.]+) ms\)", text)[1]


def h100(reports: Path) -> str:
    """The H100's first three device calls: the CUDA tests, the profiles, MiniMind's epoch and batch-1 decoding."""
    g = Gpu(reports)
    p, b = g.profile, g.before
    passed, seconds = re.search(r"(\d+) passed in ([\d.]+)s", (g.folder / "cuda-tests.txt").read_text()).groups()
    recomputed = all("cos" in k["name"] for k in b["top"] if "stack" in k["name"])
    table = not any("cos" in k["name"] or "sin_" in k["name"] for k in p["top"])
    two = all(sum("stack" in k["name"] for k in x["top"]) == 2 for x in (p, b))
    ppl, rate = g.minimind()
    windows = [rate[s] for s in range(20, 401, 10) if s not in (110, 210, 310)]  # not compiling, no checkpoint
    first, third = [rate[s] for s in range(20, 101, 10)], [rate[s] for s in range(320, 401, 10)]
    after_eval = [rate[s] for s in (110, 210, 310)]
    L = g.decode["seq_len"]
    m1, m8 = (x["multiple"] for x in g.decode["rows"][0]["generation"])
    clean = all(e["graphs"] == 0 and e["device_allocs"] == 0 for e in p["evaluations"])
    return "\n".join([
        bullet(f"**CUDA tests** (`python3 -m pytest tests/test_cuda.py`): {passed} passed in {float(seconds):.0f} s "
               "(`gpu/cuda-tests.txt`), the static-cache decoding tests among them."),
        bullet("**The compiled step on GPT-2 small's shape** (`make gpu-profile`, `gpu/profile.md`): RoPE "
               f"**{number(p['tokens_per_s'])} tokens/s, {p['step_ms']:.1f} ms a step, {100 * p['mfu']:.1f}% MFU**.",
               "The same command a call earlier, before RoPE's cos and sin were read from a table "
               f"(`gpu/before-rope-table/profile.md`): {number(b['tokens_per_s'])} tokens/s, {100 * b['mfu']:.1f}%;",
               claim(recomputed and two, "its top kernels showed inductor recomputing cos and sin inside every layer's "
                                         f"rotation (two kernels, {kernel_ms(b, 'stack'):.2f} ms a step)."),
               claim(table and p["tokens_per_s"] > b["tokens_per_s"],
                     f"Now the two rotation kernels take {kernel_ms(p, 'stack'):.2f} ms a step, and the step is "
                     f"**{p['tokens_per_s'] / b['tokens_per_s']:.3f}x** as fast"),
               "(two calls on two starts of the machine, not one paired run). The table (`model/positions.py`, `Rope`) "
               "holds positions 0 to max_seq_len - 1, bit for bit the numbers computed per forward, so the committed "
               "CPU results are unchanged (`tests/test_model.py`)."),
        bullet("**ALiBi** (`python3 -m speed.profile --config configs/gpt2-124m.yaml model.position.type=alibi`,",
               f"`gpu/alibi/profile.md`): {number(g.alibi['tokens_per_s'])} tokens/s, {100 * g.alibi['mfu']:.1f}% MFU,",
               claim(g.alibi["position"] == "alibi" and p["position"] == "rope",
                     f"through FlexAttention: **{100 * g.alibi_share:.1f}% of RoPE's tokens/s**.")),
        bullet(f"**Training after evaluation** (`gpu/profile.md`): {g.now[0]:.3f}, {g.now[1]:.3f} and {g.now[2]:.3f} "
               f"of the tokens/s before, after each of {WORDS[len(g.now)]} evaluation passes run as train.py runs "
               "them,",
               claim(clean, "with no graph built and no new device allocation"),
               "(the call before: " + ", ".join(f"{r:.3f}" for r in after_evaluations(b)) + ")."),
        bullet("**One epoch of configs/minimind-26m.yaml** (`make gpu-minimind`, `gpu/minimind-26m-epoch.log`): "
               f"validation perplexity {ppl}. Its 10-step tokens/s windows vary from {min(windows) / 1e6:.2f}M to "
               f"{max(windows) / 1e6:.2f}M all through the run (leaving out the first, which compiles, and the three "
               "below):",
               claim(statistics.mean(third) >= statistics.mean(first),
                     f"a mean of {statistics.mean(first) / 1e6:.2f}M before the first evaluation (steps 20-100) and "
                     f"{statistics.mean(third) / 1e6:.2f}M after the third (steps 320-400), so the run does not slow "
                     "down after evaluating."),
               claim(max(after_eval) < min(windows),
                     "The three windows right after an evaluation (steps 110, 210, 310: "
                     + ", ".join(f"{r / 1e6:.2f}M" for r in after_eval) + ") counted the checkpoint saved after it;"),
               "train.py now restarts its clock after a checkpoint too (`tests/test_train.py`), so tokens/s counts "
               "training steps only. The earlier log's \"drop after the first evaluation\" was this spread and that "
               "window."),
        bullet("**Batch-1 decoding** (`python3 -m speed.bench --config configs/gpt2-124m.yaml --positions rope "
               f"--multiples 1,8`, `gpu/decode/bench.md`): through the static cache, compiled with CUDA graphs, "
               f"**{number(g.decoding[0])} tokens/s** for the last {DECODED} tokens of {number(m1 * L)} and "
               f"**{number(g.decoding[1])}** for the last {DECODED} of {number(m8 * L)},",
               claim(min(g.decoding[i] / g.grown[i] for i in (0, 1)) > 1,
                     f"against {number(g.grown[0])} and {number(g.grown[1])} when the cache grew by concatenation "
                     f"(`gpu/bench.md`): {g.decoding[0] / g.grown[0]:.0f}x and {g.decoding[1] / g.grown[1]:.0f}x."))])


def cuda_graphs(reports: Path) -> str:
    """The later lease's profile in torch.compile's reduce-overhead mode."""
    g = Gpu(reports)
    p = g.profile
    header, (tps, step, mfu), idle, span = g.reduce_overhead()
    same = "compile=True (reduce-overhead mode)" in header and p["device"] in header
    return bullet(
        "**CUDA graphs** (`python3 -m speed.profile --config configs/gpt2-124m.yaml run.compile_mode=reduce-overhead "
        "--evaluations 0`, `gpu/modes/reduce-overhead/profile.md`):",
        claim(same, f"**{tps} tokens/s, {step} ms a step, {mfu}% MFU**, against {number(p['tokens_per_s'])} and "
                    f"{100 * p['mfu']:.1f}% in the default mode (`gpu/profile.md`, another machine start: not a paired "
                    "run)."),
        claim(float(idle) < 100 * p["shares"]["idle"] / 3 and int(tps.replace(",", "")) < p["tokens_per_s"],
              f"Under the profiler the idle gaps fall from {100 * p['shares']['idle']:.1f}% to {idle}% of the span "
              f"({p['span_ms']:.1f} to {span} ms for {p['steps']} steps), but the step timed without the profiler "
              "does not gain:"),
        "the gaps were mostly the profiler's own launch cost, and the unprofiled step is already bound by its kernels. "
        "CUDA graphs are not the way to 45%.")


def earlier(reports: Path) -> str:
    """The first calls, before the RoPE table: training, the peer, evaluation at 32x L."""
    g = Gpu(reports)
    rope, alibi = g.bench["rows"]
    peer = g.peer["peer"]
    at_32x = {r["position"]: next(e for e in r["eval"] if e["multiple"] == 32) for r in g.bench["rows"]}
    length = at_32x["rope"]["length"]
    return "\n".join([
        bullet(f"**Training** (`gpu/bench.md`): RoPE {number(rope['train_tokens_per_s'])} tokens/s, "
               f"{100 * rope['mfu']:.1f}% MFU (before the real-valued rotation on CUDA); ALiBi "
               f"{number(alibi['train_tokens_per_s'])}, {100 * alibi['mfu']:.1f}%."),
        bullet(claim(peer["ratio"] > 1,
                     "**Against transformers' Llama of the same shape** (`gpu/peer/bench.md`): ours "
                     f"**{peer['ratio']:.2f}x** in model FLOP/s (rounds "
                     + ", ".join(f"{r:.2f}" for r in peer["round_ratios"])
                     + f"; {number(peer['ours_tokens_per_s'])} against {number(peer['train_tokens_per_s'])} tokens/s, "
                     "the peer with its SDPA attention, both compiled).")),
        bullet(f"**Evaluation at {length // g.bench['seq_len']}x L** ({number(length)} tokens, batch 1, compiled "
               f"model): no out-of-memory; RoPE {number(at_32x['rope']['tokens_per_s'])} tokens/s at "
               f"{number(at_32x['rope']['peak_mib'])} MiB, ALiBi {number(at_32x['alibi']['tokens_per_s'])} tokens/s at "
               f"{number(at_32x['alibi']['peak_mib'])} MiB (through FlexAttention, no T x T scores).")])


def h200(reports: Path) -> str:
    """The H200's two runs: decoding against transformers, the learned biases, RoPE's step."""
    g = Gpu(reports)
    row, training = g.peer_decoding, g.h200["peer"]["peer"]
    log = (g.folder / "h200/biases/first-call.log").read_text()
    required, limit = re.search(r"flex_attention\S* Required: (\d+) Hardware limit:\s*(\d+)", log).groups()
    rope = g.bias_rows["rope"]
    decoding = [r["generation"][0]["tokens_per_s"] for r in g.bias_rows.values()]
    steps = [next(r for r in g.h200[n]["rows"] if r["position"] == "rope") for n in ("peer", "biases")]
    L = g.h200["peer"]["seq_len"]
    return "\n".join([
        bullet("**Decoding against transformers** (`python3 -m speed.bench --config configs/gpt2-124m.yaml "
               "--positions rope --multiples 1 --decode-multiples 1 --peer transformers`, `gpu/h200/peer/bench.md`): "
               f"batch 1, greedy, the last {DECODED} tokens of {number(row['multiple'] * L)}, in turns on the same "
               "weights: ours through `generate.py --compile`'s static cache with bf16 matrices "
               f"**{number(row['ours_tokens_per_s'])} tokens/s**, transformers' `generate` (static cache, compiled "
               "with "
               f"reduce-overhead) on the model exported to Llama in bf16 **{number(row['peer_tokens_per_s'])} "
               "tokens/s**:",
               claim(g.h200["peer"]["device"] == "NVIDIA H200" and row["ratio"] >= 1.5,
                     f"**{row['ratio']:.2f}x** (the target was 1.5x)."),
               f"In the same run ours trains at **{training['ratio']:.2f}x** transformers' Llama in model FLOP/s "
               "(rounds " + ", ".join(f"{r:.2f}" for r in training["round_ratios"]) + ")."),
        bullet("**The learned biases** (`make gpu-bench-biases`, `gpu/h200/biases/bench.md`).",
               claim("bench: t5 training" in log, "The first call stopped at t5:"),
               "once a FlexAttention score_mod reads a bias table, inductor's default sm90 blocks for bf16 at head "
               f"size 64 (128 x 128, 3 stages) asked for {number(int(required))} bytes of shared memory where there "
               f"are {number(int(limit))} (`gpu/h200/biases/first-call.log`). Such calls now take blocks of 64 keys in "
               "the forward (`model/attention.py`, `TABLE_KERNEL_OPTIONS`; a CUDA test compiles t5 and FIRE at that "
               "shape).",
               claim(max(g.biases.values()) < AIM_BIASES,
                     f"Then, in one run: RoPE {number(rope['train_tokens_per_s'])} tokens/s ({100 * rope['mfu']:.1f}% "
                     f"MFU), t5 **{100 * g.biases['t5']:.1f}%** of it, kerple **{100 * g.biases['kerple']:.1f}%**, "
                     "FIRE "
                     f"**{100 * g.biases['fire']:.1f}%**, below the {100 * AIM_BIASES:.0f}% aimed at."),
               "RoPE runs SDPA's cuDNN flash kernel; the learned biases run FlexAttention, which reads a tile of the "
               "(heads, T, S) bias table with each block of keys and sums the table's gradient over the batch by "
               "atomic adds.",
               claim(max(decoding) / min(decoding) < 1.05,
                     f"Batch-1 decoding through the static cache is level: {number(min(decoding))} to "
                     f"{number(max(decoding))} tokens/s for all four.")),
        bullet(claim(max(r["mfu"] for r in steps) < AIM_MFU,
                     f"**RoPE's step** in the two runs: {number(steps[0]['train_tokens_per_s'])} and "
                     f"{number(steps[1]['train_tokens_per_s'])} tokens/s, {100 * steps[0]['mfu']:.1f}% and "
                     f"{100 * steps[1]['mfu']:.1f}% MFU (`speed.bench`'s 10 timed steps), still below "
                     f"{100 * AIM_MFU:.0f}%."))])


def left(reports: Path) -> str:
    """"What these numbers say": where the step goes, decoding, training after evaluation."""
    g = Gpu(reports)
    p, ms = g.profile, g.ms
    step_at_aim = p["step_ms"] * p["mfu"] / AIM_MFU
    rest = ms["attention"] + ms["elementwise and other"]
    kernels = [("SwiGLU's activation forward and backward", ("silu",)), ("the norms", ("rms_norm",)),
               ("the loss over 32,768 classes", ("log_softmax",)),
               ("the optimizer and gradient clipping", ("multi_tensor_apply",)), ("the rotation", ("stack",))]
    return "\n".join([
        bullet(claim(p["mfu"] < AIM_MFU, f"**MFU {100 * p['mfu']:.1f}%, not the {100 * AIM_MFU:.0f}% we aim at.**"),
               claim(abs(sum(p["shares"].values()) - 1) < 1e-3,  # each kernel counted once (streams overlap a little)
                     f"A step is {p['step_ms']:.1f} ms; of the profiled span ({g.span:.1f} ms a step under the "
                     f"profiler) the matrix products take {ms['matmul']:.1f} ms, attention {ms['attention']:.1f} ms, "
                     f"the other kernels {ms['elementwise and other']:.1f} ms and idle gaps {ms['idle']:.1f} ms "
                     "(`gpu/profile.md`)."),
               claim(ms["matmul"] > g.at_peak and step_at_aim - ms["matmul"] < rest,
                     f"The products alone are already {ms['matmul'] / g.at_peak:.1f}x the {g.at_peak:.1f} ms they "
                     f"would take at the H100's bf16 peak, so {100 * AIM_MFU:.0f}% (a {step_at_aim:.1f} ms step) would "
                     f"leave about {step_at_aim - ms['matmul']:.1f} ms for attention and everything else, which take "
                     f"{rest:.1f} ms now."),
               "The other kernels are each close to memory bound: "
               + ", ".join(f"{what} ({kernel_ms(p, *words):.1f} ms)" for what, words in kernels) + ".",
               "What is left needs fewer passes over memory, not faster kernels: norms and activations fused into the "
               "products' epilogues, a fused linear + cross-entropy. Not done."),
        bullet(claim(min(g.decoding) >= 1000 and g.peer_decoding["ratio"] > 1,
                     "**Decoding meets 1,000 tokens/s** at 1x and 8x L on the H100, and is "
                     f"**{g.peer_decoding['ratio']:.2f}x** transformers' compiled static-cache `generate` on the H200 "
                     "(above)."),
               f"The H100's {number(g.decoding[0])} tokens/s were decoded with float32 weights under autocast, every "
               "compiled step casting each weight matrix to bf16 again; a run now decodes on CUDA with its matrices "
               "held in bf16 once (`generate.for_decoding`: the same logits bit for bit, `tests/test_model.py`), and "
               "`generate.py` decodes under bf16 autocast on CUDA, where it had run in float32."),
        bullet(claim(max(abs(1 - r) for r in g.now) <= 0.003,
                     "**Training after evaluation holds** its tokens/s within 0.3% "
                     f"({WORDS[len(g.now)]} passes, `gpu/profile.md`)."))])


# ----------------------------------------------------------------------------- the CPU page's tables

PEERS = {"nanogpt": "nanoGPT `model.py`", "gpt2": "GPT-2 (this repo)", "transformers": "transformers' Llama"}
WHOSE = {"nanogpt": "nanoGPT's", "gpt2": "GPT-2's", "transformers": "transformers' Llama's"}
LEVEL = 0.05  # "level with a peer": the model-FLOP/s ratio within 5% of 1
AIM_OVER_NANOGPT = 1.2


class Cpu:
    """The committed CPU measurements, read from reports/bench/cpu (`make bench-cpu`) and its history.json."""

    def __init__(self, reports: Path):
        self.folder = folder = reports / "bench" / "cpu"
        load = lambda name: json.loads((folder / name).read_text())  # noqa: E731
        self.bench, self.profile, self.history = load("bench.json"), load("profile/profile.json"), load("history.json")
        self.rows = {r["position"]: r for r in self.bench["rows"]}
        self.peers = {name: load(f"peer-{name}/bench.json") for name in PEERS if (folder / f"peer-{name}").is_dir()}

    def at(self, position: str, multiple: int) -> dict:
        return next(e for e in self.rows[position]["eval"] if e["multiple"] == multiple)


def cpu_peers(reports: Path) -> str:
    """Our RoPE model against each peer of the same shape, trained in turns (`make bench-cpu`)."""
    c = Cpu(reports)
    rounds = [r for m in c.peers.values() for r in m["peer"]["round_ratios"]]
    counts = sorted({len(m["peer"]["round_ratios"]) for m in c.peers.values()})
    lines = [paragraph(f"On the 2-core CPU ({c.bench['device']}, float32, eager), `make bench-cpu` (each peer in one "
                       f"run of {listed([str(n) for n in counts])} rounds; `cpu/peer-NAME/bench.md`):"), "",
             "| peer | ours, tokens/s | peer, tokens/s | model FLOP/s ratio | its rounds |", "|---|---:|---:|---:|---:|"]
    for name, m in c.peers.items():
        p = m["peer"]
        lines.append(f"| {PEERS[name]} | {number(p['ours_tokens_per_s'])} | {number(p['train_tokens_per_s'])} | "
                     f"{p['ratio']:.2f}x | {min(p['round_ratios']):.2f} to {max(p['round_ratios']):.2f} |")
    return "\n".join(lines + ["", paragraph(
        f"The rounds spread from {min(rounds):.2f} to {max(rounds):.2f} (another process's burst slows one model of a "
        "pair), so read the medians, not a round.")])


def cpu_profile(reports: Path) -> str:
    """Where our CPU training step goes, and what that bounds against nanoGPT."""
    c = Cpu(reports)
    p = c.profile
    span = p["span_ms"] / p["steps"]
    ms = {k: v * span for k, v in p["shares"].items()}
    kernel = ms["matmul"] + ms["attention"]
    lines = [paragraph(
        f"`python -m speed.profile --config configs/tiny.yaml --evaluations 0` (`cpu/profile/profile.md`): "
        f"{number(p['tokens_per_s'])} tokens/s, a step of {p['step_ms']:.0f} ms (batch {p['batch_size']} x "
        f"{p['seq_len']} tokens, {p['params'] / 1e6:.2f}M parameters, float32, eager). Under the profiler a step "
        f"spans {span:.0f} ms: matrix products {ms['matmul']:.0f} ms, attention {ms['attention']:.0f} ms, the other "
        f"operators {ms['elementwise and other']:.0f} ms and {ms['idle']:.0f} ms outside any operator (Python, "
        "dispatch). The top operators by self time a step:"), "",
        "| operator | category | ms a step | share |", "|---|---|---:|---:|"]
    lines += [f"| `{k['name']}` | {k['category']} | {k['ms'] / p['steps']:.1f} | {100 * k['share']:.1f}% |"
              for k in p["top"][:8]]
    nanogpt = c.peers.get("nanogpt")
    if nanogpt:
        ratio = nanogpt["peer"]["ratio"]
        bound = ratio * span / kernel
        lines += ["", paragraph(
            "nanoGPT's step runs the same matrix products and the same attention kernel (the shapes are equal).",
            f"Removing every other operator and every gap from our step would leave {kernel:.0f} of its {span:.0f} ms, "
            f"so at most {bound:.2f}x nanoGPT's model FLOP/s (ours is {ratio:.2f}x):",
            f"{AIM_OVER_NANOGPT}x is out of reach at equal numerics; it needs fewer FLOPs per token, lower precision or "
            "another kernel." if bound < AIM_OVER_NANOGPT else
            f"{AIM_OVER_NANOGPT}x would need nearly every other operator gone.")]
    return "\n".join(lines)


def cpu_history(reports: Path) -> str:
    """The changes tried on the CPU and the memory reuse, as measured when they were made (history.json)."""
    h = Cpu(reports).history
    lines = [paragraph(h["about"]), "", "| change | measured | after / before | kept |", "|---|---|---:|---|"]
    for t in h["tried"]:
        if "after_over_before" in t:
            ratio = " to ".join(f"{r:.2f}" for r in t["after_over_before"])
        elif isinstance(t["before"], dict):  # FIRE's share of RoPE's tokens/s, each run's
            share = {when: t[when]["fire"] / t[when]["rope"] for when in ("before", "after")}
            ratio = (f"{share['after'] / share['before']:.2f} ({100 * share['before']:.0f}% of RoPE before, "
                     f"{100 * share['after']:.0f}% after)")
        else:
            figure = number if t["before"] >= 100 else "{:.2f}".format  # tokens/s of a 135M model decoding: 1.62
            ratio = f"{t['after'] / t['before']:.2f} ({figure(t['after'])} against {figure(t['before'])})"
        lines.append(f"| {t['change']} | {t['measure']} | {ratio} | {'yes' if t['kept'] else 'no'} |")
    m = h["memory_reuse"]
    lines += ["", paragraph(f"**CPU memory reuse** ({m['change']}), {m['how']}, against the commit before "
                            f"({m['baseline']}):"), "",
              "| command | before | after | after / before |", "|---|---:|---:|---:|"]
    lines += [f"| {r['what']} | {r['before_s']:.1f} s | {r['after_s']:.1f} s | {r['ratio']:.2f} |"
              for r in m["commands"]]
    (sys_before, sys_after), (faults_before, faults_after) = m["system_s"], m["minor_faults_at_30_steps"]
    peak_before, peak_after = m["study_peak_mib"]
    lines += ["", paragraph(
        "The commands: " + "; ".join(f"`{r['command']}`" if r["command"].startswith("python") else r["command"]
                                     for r in m["commands"]) + ".",
        claim(sys_after < sys_before and faults_after < faults_before,
              f"System time fell from {sys_before} s to {sys_after} s in the first command, and its minor page "
              f"faults at 30 steps from {faults_before / 1e6:.2f}M to {faults_after / 1e6:.2f}M."),
        f"The price is memory: the study run's peak grew from {number(peak_before)} to {number(peak_after)} MiB.",
        "Every memory measurement (`device.PeakMemory`: the tables above, and each cell of `eval.extrapolation`) first "
        "hands the kept blocks back (`malloc_trim`), so it counts the memory in use and grows with the length;",
        claim(m["evaluation_ratio_without_release"] < m["commands"][-1]["ratio"],
              "that re-faulting at each cell is why the evaluation gains less "
              f"({m['evaluation_ratio_without_release']:.2f} without it, {m['commands'][-1]['ratio']:.2f} with it)."))]
    return "\n".join(lines)


def cpu_latest(reports: Path) -> str:
    """Every encoding's tables (cpu/bench.md), then what the sinks and the learned biases' columns say."""
    c = Cpu(reports)
    L = c.bench["seq_len"]
    tables = markdown(c.bench).split("\n", 2)[2].rstrip("\n")  # without its device line: the page says it above
    multiple = c.rows["rope"]["generation"][-1]["multiple"]  # the longest decoding context, in L
    longest = {p: (r["generation"][-1]["tokens_per_s"], r["generation_sinks"][-1]["tokens_per_s"])
              for p, r in c.rows.items() if r.get("generation_sinks")}
    sixteen = {p: c.at(p, 16)["tokens_per_s"] / c.at("rope", 16)["tokens_per_s"] for p in ("t5", "kerple", "fire")}
    return "\n".join([
        paragraph(f"`make bench-cpu` (`python -m speed.bench --config configs/tiny.yaml --out reports/bench/cpu`, "
                  f"{c.bench['device']}, torch {c.bench['torch']}, the machine otherwise idle; `cpu/bench.md`):"), "",
        tables, "",
        paragraph(
            f"**Sinks** at {multiple}x L decode "
            + listed([f"{p} at {longest[p][1] / longest[p][0]:.2f}x" for p in sorted(longest)])
            + " the speed with every token kept (one reading of 64 tokens each, in one run: rough figures). Their "
            f"rolling cache holds L tokens where the full one holds {multiple} L; a RoPE model "
            "also scores its sinks' keys a second time, rotated at the positions they are shown at "
            "(`merged_attention`, model/context.py)."),
        "",
        paragraph(
            f"**The learned biases at 16x L** ({number(16 * L)} tokens): their bias is a (heads, T, S) float mask "
            "built once per forward, so at long lengths they pay for T x S values that RoPE and ALiBi never build:",
            claim(max(sixteen.values()) < 1,
                  f"t5 at {100 * sixteen['t5']:.0f}% of RoPE's evaluation tokens/s, kerple {100 * sixteen['kerple']:.0f}%,"
                  f" FIRE {100 * sixteen['fire']:.0f}%."),
            "t5 and kerple depend on i - j only and build the mask from one bias per distance (a Toeplitz matrix). "
            "FIRE's bias also depends on the query position, so each of the T x S values goes through its MLP; "
            "evaluation uses the MLP as its piecewise-linear segments and, for consecutive positions, computes only "
            "the keys each block of 256 queries sees (about half the pairs; what that gained is in the history "
            "below).")])


def cpu_summary(reports: Path) -> str:
    """README.md's sentence on the CPU peers (the speed summary's first)."""
    ratios = {n: m["peer"]["ratio"] for n, m in Cpu(reports).peers.items()}
    named = listed([f"{r:.2f}x {WHOSE[n]}" for n, r in ratios.items()])
    level = all(abs(1 - r) <= LEVEL for r in ratios.values())
    return (f"On the 2-core CPU our RoPE model trains at {named} model FLOP/s (`make bench-cpu`)"
            + (", level with each." if level else "."))


# {page: {block name: its rendering from the reports folder}} (render.reports merges these)
def readme_summary(reports: Path) -> str:
    """README.md's sentences on the GPU measurements, quoting the page's."""
    g = Gpu(reports)
    p = g.profile
    [at_32x] = [e for e in g.bench["rows"][0]["eval"] if e["multiple"] == 32]
    L = g.decode["seq_len"]
    return paragraph(
        cpu_summary(reports),
        f"On one H100 (bf16, compiled, GPT-2 small's shape): {number(p['tokens_per_s'])} tokens/s, "
        f"{100 * p['mfu']:.1f}% MFU,",
        claim(max(abs(1 - r) for r in g.now) <= 0.003, "the same after three evaluations;"),
        f"ALiBi through FlexAttention at {100 * g.alibi_share:.1f}% of RoPE;",
        claim(g.peer["peer"]["ratio"] > 1, f"**{g.peer['peer']['ratio']:.2f}x** transformers' Llama"),
        f"(before RoPE's cos/sin table); evaluation at 32x L in {at_32x['peak_mib'] / 1000:.1f} GB; one MiniMind epoch "
        f"to perplexity {g.minimind()[0]}. `generate.py --compile` decodes batch 1 through a static KV cache with CUDA "
        f"graphs at {number(g.decoding[0])} tokens/s (the last {DECODED} tokens of {number(L)}).",
        claim(g.peer_decoding["ratio"] > 1,
              f"On one H200 that decoding is **{g.peer_decoding['ratio']:.2f}x** transformers' compiled static-cache "
              "`generate`,"),
        f"and t5, kerple and FIRE train at {round(100 * min(g.biases.values()))}-{round(100 * max(g.biases.values()))}% "
        "of RoPE: "
        "[reports/bench/README.md](reports/bench/README.md).")


BLOCKS: dict[str, dict[str, Callable[[Path], str]]] = {"README.md": {"speed-summary": readme_summary},
                                                       "reports/bench/README.md": {
    "bench-h100": h100, "bench-cuda-graphs": cuda_graphs, "bench-earlier": earlier, "bench-h200": h200,
    "bench-left": left, "bench-cpu-peers": cpu_peers, "bench-cpu-profile": cpu_profile, "bench-cpu-latest": cpu_latest,
    "bench-cpu-history": cpu_history}}
