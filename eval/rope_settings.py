"""What each kind of layer of a model reads of positions: its RoPE base, scaling, attention factor, window and original
context, and the settings users trip on.

    python -m eval.rope_settings runs/gemma-3-270m-Q4_K_M
    python -m eval.rope_settings runs/gemma-3-270m-Q4_K_M --scaling "{type: yarn, factor: 4, layers: all}"
    python -m eval.rope_settings hf:.cache/smollm2/SmolLM2-135M-Instruct-Q4_1 --scaling "{type: yarn, factor: 4}"

A run directory or hf:PATH, with its own scaling or the one --scaling gives (as eval.* and generate.py load it: the
original length filled in from the length it was trained at). One row per kind of layer (model.layer_types' full and
sliding layers, a layer pattern's layers without positions, or every layer), and a `check:` line for each of:
  - a scaling whose original_max_position_embeddings is not the length the model was trained at: its factor is then
    taken against another length than the one the model knows;
  - a scaling over sliding-window layers (layers: all): they read only their window, so their positions never pass
    it; Gemma 3 rescales only its global layers (its technical report, on reaching 128k);
  - YaRN with an attention factor of 1 or less at s > 1: it drops YaRN's temperature 0.1 ln s + 1 (the YaRN paper,
    eq. 22), as inference stacks that read only `factor` do.
"""
from __future__ import annotations

import argparse
import dataclasses
import math
from pathlib import Path

from checkpoint import model_config
from config import ArgumentParser, ModelConfig, ScalingConfig, parse_scaling, run_cli
from hf import checkpoints as hf, weights
from model.positions import check as check_positions, rotary_dims, scaled_layers
from model.rope import check_scaling, is_dynamic, rope_frequencies
from model.gpt import sliding_config

KINDS = {"positional": "full_attention", "sliding": "sliding_attention", "nope": "no positions"}


def spans(layers: list[int]) -> str:
    """0-4, 6-10, 12-16 (15): layer indices as runs, and their count."""
    runs, start = [], layers[0]
    for a, b in zip(layers, layers[1:] + [None]):
        if b != a + 1:
            runs.append(f"{start}" if start == a else f"{start}-{a}")
            start = b
    return f"{', '.join(runs)} ({len(layers)})"


def attention_factor(cfg: ModelConfig) -> str:
    """The factor cos and sin are multiplied by (scores by its square); for a dynamic method, at 2 L."""
    scaling = cfg.position.scaling
    if scaling is None:
        return "1"
    L = scaling.original_max_position_embeddings
    _, factor = rope_frequencies(rotary_dims(cfg), cfg.position.theta, scaling, seq_len=2 * L)
    return f"{float(factor):.4g}" + (" (at 2L)" if is_dynamic(scaling) else "")


def describe_scaling(scaling: ScalingConfig | None) -> str:
    if scaling is None:
        return "none"
    return scaling.type + ("" if scaling.factor is None else f" s = {scaling.factor:g}")


def layer_rows(cfg: ModelConfig) -> list[dict]:
    """One row per kind of layer: its layers, base, scaling, attention factor, window and original context."""
    rows = []
    layers = scaled_layers(cfg)
    for kind, name in KINDS.items():
        indices = [i for i, k in enumerate(cfg.layer_kinds) if k == kind]
        if not indices:
            continue
        own = sliding_config(cfg, layers) if kind == "sliding" and cfg.position.type == "rope" else cfg
        rope = cfg.position.type == "rope" and kind != "nope"
        scaling = own.position.scaling if rope else None
        window = cfg.sliding_window if kind == "sliding" or (kind == "positional" and not cfg.layer_types) else None
        rows.append({"layers": spans(indices), "type": name if cfg.layer_types or kind == "nope" else "every layer",
                     "encoding": cfg.position.type if kind != "nope" else "nope",
                     "base": f"{own.position.theta:,.0f}" if rope else "-",
                     "scaling": describe_scaling(scaling) if rope else "-",
                     "attention factor": attention_factor(own) if rope else "-",
                     "window": f"{window:,}" if window else "-",
                     "original context": f"{scaling.original_max_position_embeddings:,}" if scaling else "-"})
    return rows


def checks(cfg: ModelConfig, trained: int) -> list[str]:
    """The settings users trip on (see the module's docstring), one line each."""
    scaling, out = cfg.position.scaling, []
    if scaling is None or cfg.position.type != "rope":
        return out
    if scaling.original_max_position_embeddings != trained:
        out.append(f"the scaling's original_max_position_embeddings is {scaling.original_max_position_embeddings:,}, "
                   f"but the model was trained at {trained:,} tokens: s = {scaling.factor or 1:g} is then taken "
                   f"against another length than the one it knows")
    sliding = cfg.layer_kinds.count("sliding")
    if sliding and scaled_layers(cfg) == "all":
        out.append(f"the scaling acts on the {sliding} sliding-window layers too, which read only "
                   f"{cfg.sliding_window:,} tokens and never see a distance past them; Gemma 3 scales only its "
                   f"global layers (layers: global)")
    if scaling.type in ("yarn", "dynamic-yarn") and scaling.attention_factor is not None:
        s = scaling.factor or 1.0
        if scaling.attention_factor <= 1 and s > 1:
            out.append(f"attention_factor {scaling.attention_factor:g} drops YaRN's temperature: 0.1 ln s + 1 = "
                       f"{0.1 * math.log(s) + 1:.4f} at s = {s:g}")
    return out


def model_of(path: str) -> ModelConfig:
    """The ModelConfig of a run directory, or of hf:PATH as convert.to_run would make it (Gemma 3 included, which
    hf: itself does not evaluate), else as hf: describes it."""
    if not hf.is_hf(path):
        return model_config(Path(path))
    config = hf.base_config(path)
    return weights.gpt_config(config, path) if weights.problem(config) is None else hf.model_section(config, path)


def inspect(path: str, scaling_text: str | None) -> str:
    cfg = model_of(path)
    own = cfg.position.scaling
    trained = own.original_max_position_embeddings if own else cfg.max_seq_len  # L, as the evaluators take it
    if scaling_text is not None:
        scaling = parse_scaling(scaling_text, "--scaling")
        if scaling is not None:
            check_scaling(scaling, "--scaling")
            if scaling.original_max_position_embeddings is None:
                scaling = dataclasses.replace(scaling, original_max_position_embeddings=trained)
        cfg.position.scaling = scaling
        check_positions(cfg)
    lines = [f"{Path(path).name} ({path}): trained at {trained:,} tokens, {cfg.n_layers} layers", "",
             "| layers | type | encoding | RoPE base | scaling | attention factor | window | original context |",
             "|---|---|---|---:|---|---:|---:|---:|"]
    lines += ["| " + " | ".join(r.values()) + " |" for r in layer_rows(cfg)]
    found = checks(cfg, trained)
    lines += [""] + [f"check: {line}" for line in found] if found else ["", "nothing to check"]
    return "\n".join(lines)


def main(argv=None):
    parser = ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run", help="a run directory, or hf:PATH (a transformers checkpoint)")
    parser.add_argument("--scaling", default=None,
                        help="a RoPE scaling to load it with, e.g. \"{type: yarn, factor: 4, layers: all}\" (default: "
                             "its own)")
    args = parser.parse_args(argv)
    print(run_cli(lambda: inspect(args.run, args.scaling)))


if __name__ == "__main__":
    main()
