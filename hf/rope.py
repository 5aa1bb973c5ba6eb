"""RoPE parameters between transformers' config (rope_parameters in version 5, rope_scaling and rope_theta in 4.x)
and this repo's `ScalingConfig`, both ways: what a checkpoint's config says (`rope_parameters`, `own_scaling`) and
what a scaled model's config must say (`rope_settings`). The hf: loader, the converter and the export all use it.
A config with a RoPE per layer type (Gemma 3: its sliding_attention and full_attention layers) is read by
`layer_rope_parameters`, for the converter; the hf: loader, which rewrites one set of parameters, refuses it.
"""
from __future__ import annotations

from config import ScalingConfig, UserError
from model.rope import SCALINGS, setting

# The scalings a transformers model takes: its rope types, and static NTK as a larger base.
TAKES = tuple(name for name, method in SCALINGS.items() if method.hf_name or name == "ntk")


def rope_settings(theta: float, d: int, max_seq_len: int, scaling: ScalingConfig | None) -> tuple[dict, dict | None, int]:
    """(rope_parameters for transformers >= 5, rope_scaling for 4.x, max_position_embeddings) of RoPE with base
    `theta` over `d` rotated dimensions, trained at `max_seq_len`, under `scaling` (original length filled in).

    As in Hugging Face checkpoints of context-extended models (Qwen2.5, Vicuna-16k), a scaled model gets
    max_position_embeddings = the original length L, its context being L * factor: every transformers
    version reads that alike. (Before 4.52 YaRN takes L from max_position_embeddings; 4.52 to 4.55 recompute
    the factor as max_position_embeddings / original_max_position_embeddings when rope_scaling holds the
    latter; dynamic NTK always takes L from max_position_embeddings.)
    """
    kind = scaling.type if scaling else "none"
    if kind == "none":
        return {"rope_type": "default", "rope_theta": theta}, None, max_seq_len
    factor, original = float(scaling.factor), scaling.original_max_position_embeddings
    if kind == "ntk":
        # Static NTK is plain RoPE with a larger base and needs no scaling entry.
        return {"rope_type": "default", "rope_theta": theta * factor ** (d / (d - 2))}, None, round(original * factor)
    hf_name = SCALINGS[kind].hf_name
    if hf_name is None:
        raise UserError(f"RoPE scaling {kind!r} has no transformers rope type; transformers takes {', '.join(TAKES)}")
    legacy = {"type": hf_name, "rope_type": hf_name, "factor": factor}
    if kind == "yarn":
        legacy.update({k: getattr(scaling, k) for k in ("beta_fast", "beta_slow", "attention_factor")
                       if getattr(scaling, k) is not None})
    if kind == "longrope":  # transformers requires both factor lists and the original length
        legacy.update(short_factor=scaling.short_factor, long_factor=scaling.long_factor,
                      original_max_position_embeddings=original,
                      **({"attention_factor": scaling.attention_factor} if scaling.attention_factor else {}))
    if kind == "llama3":  # transformers requires both factors and the original length
        legacy.update(low_freq_factor=setting(scaling, "low_freq_factor"),
                      high_freq_factor=setting(scaling, "high_freq_factor"), original_max_position_embeddings=original)
    params = {"rope_theta": theta, **{k: v for k, v in legacy.items() if k != "type"}}
    if kind == "yarn":  # linear would warn about it as an unknown key, dynamic has no use for it
        params["original_max_position_embeddings"] = original
    return params, legacy, original


def layer_rope_settings(theta: float, local_theta: float, d: int, max_seq_len: int, scaling: ScalingConfig | None,
                        layers: str) -> tuple[dict, int]:
    """(rope_parameters per layer type, max_position_embeddings) of a model with layer types (Gemma 3): the full layers'
    RoPE of base `theta` under `scaling`, the sliding layers' of base `local_theta`, scaled alike where `layers` is
    all, as rope_settings writes one."""
    full, _, max_positions = rope_settings(theta, d, max_seq_len, scaling)
    local, _, _ = rope_settings(local_theta, d, max_seq_len, scaling if layers == "all" else None)
    return {"full_attention": full, "sliding_attention": local}, max_positions


def rope_parameters(config) -> dict:
    """The config's RoPE parameters as transformers 5 names them (rope_type, rope_theta, factor ...), for a config
    with one set for every layer."""
    if per_layer_type(config):
        raise UserError(f"{config.model_type} has a RoPE per layer type, which hf: does not evaluate through "
                        f"transformers; convert it into a run directory: python -m convert.to_run hf:PATH RUN_DIR")
    params = getattr(config, "rope_parameters", None)
    if params is None:  # transformers 4.x
        params = {**(getattr(config, "rope_scaling", None) or {}), "rope_theta": getattr(config, "rope_theta", None)}
        params.setdefault("rope_type", params.get("type", "default"))
    return dict(params)


def per_layer_type(config) -> bool:
    """Whether the config gives a RoPE per layer type (transformers 5: nested rope_parameters; 4.x: Gemma 3's
    rope_local_base_freq)."""
    params = getattr(config, "rope_parameters", None)
    if params is None:
        return getattr(config, "rope_local_base_freq", None) is not None
    return any(isinstance(v, dict) for v in params.values())


def layer_rope_parameters(config) -> dict[str, dict]:
    """{layer type: its RoPE parameters} of a config with a RoPE per layer type (Gemma 3's full_attention and
    sliding_attention): transformers 5's nested rope_parameters, or 4.x's rope_theta and rope_scaling (the full layers')
    and rope_local_base_freq (the sliding layers', unscaled)."""
    params = getattr(config, "rope_parameters", None)
    if params is None:  # transformers 4.x
        full = {**(getattr(config, "rope_scaling", None) or {}), "rope_theta": getattr(config, "rope_theta", None)}
        full.setdefault("rope_type", full.get("type", "default"))
        local = {"rope_type": "default", "rope_theta": getattr(config, "rope_local_base_freq", None)}
        return {"full_attention": full, "sliding_attention": local}
    if not any(isinstance(v, dict) for v in params.values()):  # one set for every layer type
        return {kind: dict(params) for kind in set(getattr(config, "layer_types", None) or ["full_attention"])}
    return {kind: dict(value) for kind, value in params.items() if isinstance(value, dict)}


def own_scaling(params: dict, L: int, name: str) -> ScalingConfig | None:
    """The checkpoint's own RoPE scaling in this repo's terms (None for plain RoPE)."""
    kind = params.get("rope_type", "default")
    if kind == "default":
        return None
    ours = {m.hf_name: n for n, m in SCALINGS.items() if m.hf_name and n != "none"}
    if kind not in ours:
        raise UserError(f"{name} uses rope_type {kind!r}, which this repo's RoPE scalings ({', '.join(ours)}) "
                        f"cannot describe")
    keys = ("factor", *SCALINGS[ours[kind]].keys)
    return ScalingConfig(ours[kind], original_max_position_embeddings=params.get("original_max_position_embeddings") or L,
                         **{k: params[k] for k in keys if params.get(k) is not None})


