"""The bench page's tables and values: speed.bench's and speed.profile's rows under cpu/ and gpu/, read as they are."""
from __future__ import annotations

import json
from statistics import median

from speed.results import markdown
from studies.report import Study
from studies.stats import mean_interval

study = Study(__file__)
AIM_MFU, AIM_BIASES, AIM_DECODE, AIM_DECODE_PEER = 0.45, 0.9, 1000, 1.5  # the GPU targets set (not measured)
LEVEL = 0.05  # "level": the rounds' 95% interval holds 1 and lies within 1 +- 5%; decoding readings within 5%
PEERS = {name: f"{folder}/bench.json" for name, folder in [("nanogpt", "cpu/peer-nanogpt"), ("gpt2", "cpu/peer-gpt2"),
         ("transformers", "cpu/peer-transformers"), ("h100", "gpu/peer"), ("h200", "gpu/h200/peer")]}
BIASES, LONG = ("t5", "kerple", "fire"), 16  # the learned biases; the multiple of L their evaluation claim reads
REST = ("attention", "elementwise and other")  # the kernels beside the matrix products (idle gaps apart)
CPU, G, A, H200 = "cpu/bench.json", "gpu/profile.json", "gpu/alibi/profile.json", "gpu/h200/biases/bench.json"

def load(path):
    return json.loads((study.folder / path).read_text())

def row(data, position="rope"):
    return next(r for r in data["rows"] if r["position"] == position)

def rounds(data):  # ours over the peer in model FLOP/s: (mean, low, high) over the rounds run in turns, 95% t interval
    return mean_interval(data["peer"]["round_ratios"])

def ci(t):
    return f"{t[0]:.2f} ({t[1]:.2f}-{t[2]:.2f})"

def span(xs, f="{:,.0f}"):
    return f"{100 * min(xs):.0f}-{100 * max(xs):.0f}%" if f == "%" else f"{f.format(min(xs))}-{f.format(max(xs))}"

def spread(xs):
    return max(xs) / min(xs) - 1

def readings(profile):  # a profile's tokens/s: the step, then again after each evaluation pass
    return [e["tokens_per_s"] for e in profile["evaluations"]]

def share(data, position, multiple=None):  # tokens/s over RoPE's: training, or evaluation at a multiple of L
    at = lambda p: (row(data, p)["train_tokens_per_s"] if multiple is None else next(  # noqa: E731
        e["tokens_per_s"] for e in row(data, p)["eval"] if e["multiple"] == multiple))
    return at(position) / at("rope")

def ms(p):  # ms a step of each kind of kernel under the profiler
    return {k: v * p["span_ms"] / p["steps"] for k, v in p["shares"].items()}

def aim_left(p):  # ms a step at AIM_MFU would leave beside the products as they run now
    return p["step_ms"] * p["mfu"] / AIM_MFU - ms(p)["matmul"]

def decoded(data, position="rope"):  # tokens/s decoding batch 1 at each context length
    return [g["tokens_per_s"] for g in row(data, position)["generation"]]

def decode_ratio(data):  # ours over transformers' generate, decoding batch 1 (one context length)
    (at,) = data["peer_decoding"]["rows"]
    return at["ratio"]

study.values.update({  # one-line values by name, as @study.value registers a function
    **{f"{name}_ratio": (lambda p=path: ci(rounds(load(p)))) for name, path in PEERS.items()},
    "level": lambda: f"{LEVEL:.0%}", "aim_mfu": lambda: f"{AIM_MFU:.0%}", "aim_biases": lambda: f"{AIM_BIASES:.0%}",
    "aim_decode": lambda: f"{AIM_DECODE:,}", "aim_decode_peer": lambda: f"{AIM_DECODE_PEER}",
    "h100_tps": lambda: f"{load(G)['tokens_per_s']:,.0f}", "h100_mfu": lambda: f"{load(G)['mfu']:.1%}",
    "h200_decode": lambda: f"{decode_ratio(load(PEERS['h200'])):.2f}",
    "biases_share": lambda: span([share(load(H200), p) for p in BIASES], "%"),
    "rope_h200_spread": lambda: f"{spread([row(load(f))['train_tokens_per_s'] for f in (H200, PEERS['h200'])]):.1%}",
    "biases_16x": lambda: span([share(load(CPU), p, LONG) for p in BIASES], "%"),
    "alibi_share": lambda: f"{median(readings(load(A))) / median(readings(load(G))):.1%}",
    "after_eval": lambda: span([r / readings(load(G))[0] for r in readings(load(G))[1:]], "{:.3f}"),
    "products_ms": lambda: f"{ms(load(G))['matmul']:.1f}", "aim_left": lambda: f"{aim_left(load(G)):.1f}",
    "rest_ms": lambda: f"{sum(ms(load(G))[k] for k in REST):.1f}",
    "decode_h100": lambda: span(decoded(load("gpu/decode/bench.json"))),
    "decode_grown": lambda: span(decoded(load("gpu/bench.json"))),
    "decode_h200": lambda: span([t for p in ("rope", *BIASES) for t in decoded(load(H200), p)])})

@study.table
def peers():
    return "\n".join(["| device | peer | ours, tokens/s | peer, tokens/s | ours / peer | rounds |",
                      "|---|---|---:|---:|---:|---:|"] + [
        f"| {d['device']} | {p['name']} | {p['ours_tokens_per_s']:,.0f} | {p['train_tokens_per_s']:,.0f} | "
        f"{ci(rounds(d))} | {len(p['round_ratios'])}: {span(p['round_ratios'], '{:.2f}')} |"
        for d in map(load, PEERS.values()) for p in [d["peer"]]])

@study.table
def cpu_tables():
    return markdown(load(CPU))
