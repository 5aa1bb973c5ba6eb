"""speed.bench's table (bench.md) of its measurements (bench.json): training throughput and MFU per encoding, the
peer, evaluation and decoding speed by length."""
from __future__ import annotations


def fmt(value, pattern="{:,.0f}"):
    return "n/a" if value is None else pattern.format(value)


def mode_note(results: dict) -> str:
    """`compile=True`'s mode where it is not torch's default, for the tables' first line."""
    mode = results["compile_mode"]
    return f" ({mode} mode)" if results["compile"] and mode != "default" else ""


def markdown(results: dict) -> str:
    lines = [f"Device: **{results['device']}**, config `{results['config']}`, torch {results['torch']}, "
             f"compile={results['compile']}{mode_note(results)}, batch {results['batch_size']} x "
             f"{results['seq_len']} tokens{', score biases through SDPA' if results['attention'] == 'sdpa' else ''}."]
    peer = results.get("peer")
    if results["rows"] or peer:
        lines += ["", "| encoding | params | train tokens/s | MFU | train peak MiB |", "|---|---:|---:|---:|---:|"]
    for r in results["rows"] + ([{**peer, "position": f"peer: {peer['name']}"}] if peer else []):
        lines.append(f"| {r['position']} | {r['params'] / 1e6:.2f}M | {fmt(r['train_tokens_per_s'])} | "
                     f"{fmt(r['mfu'] and 100 * r['mfu'], '{:.1f}%')} | {fmt(r['train_peak_mib'])} |")
    if peer:
        lines += ["", f"Ours (rope) over the peer in model FLOP/s (6N + 12 L H Q T per token), trained in turns on "
                      f"the same batches in one process, median of {len(peer['round_ratios'])} rounds: "
                      f"**{peer['ratio']:.2f}x** (rounds: {', '.join(f'{r:.2f}' for r in peer['round_ratios'])}; "
                      f"tokens/s {fmt(peer['ours_tokens_per_s'])} against {fmt(peer['train_tokens_per_s'])})."]
    lines += sliding_window_lines(results.get("sliding_window"))
    if not results["rows"]:  # the sliding-window case alone (--positions '')
        return "\n".join(lines) + "\n"
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


def sliding_window_lines(case: dict | None) -> list[str]:
    """The table of speed.bench --sliding-window: one forward pass over a sliding window three ways."""
    if case is None:
        return []
    model = case.get("model", "random")
    layers = f"{case.get('layers', '?')} of {case.get('n_layers', '?')} layers" if model != "random" else "every layer"
    peer = "itself exported to transformers' Gemma3" if model != "random" else \
        "transformers' Gemma3 of the same shape with every layer sliding"
    warm = "after a warm-up pass" if case["length"] <= 8192 else "one pass each, no warm-up"
    differ = case.get("max_logit_difference") or {}
    lines = ["", f"Sliding-window forward of {model} (batch 1, {case['length']:,} tokens, a window of "
             f"{case['window']:,} tokens on {layers}, eager, {warm}): ours reading each block of queries' keys, ours "
             f"with the window as a (T, S) mask, and {peer}" + (
                 "; the largest difference of the last logits from ours: " + ", ".join(
                     f"{k} {v:.1e}" for k, v in differ.items()) if differ else "") + ".",
             "",
             "| | tokens/s | peak MiB |", "|---|---:|---:|"]
    for r in case["rows"]:
        lines.append(f"| {r['name']} | {r['note'] or fmt(r['tokens_per_s'])} | {fmt(r['peak_mib'])} |")
    return lines
