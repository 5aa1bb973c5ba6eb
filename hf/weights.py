"""Llama-family and Gemma 3 checkpoints as this repo's GPT, and this repo's GPT as a Llama, Qwen2 or Gemma 3
checkpoint: the shapes, the names, the norms' weights and the order of the q/k rows, both ways, as pure functions of
configs and state dicts.

The family is the architecture model/gpt.py already is: pre-norm RMSNorm, SwiGLU, grouped-query attention, RoPE
and no biases. Its members differ by three options of ModelConfig: Llama 3 unties the output projection from the
embedding (`tie_embeddings`), Qwen2 adds biases to q, k and v (`qkv_bias`), and none of them multiplies the
input embeddings by sqrt(d) as this repo's own models do (`scale_embeddings`). Covered: llama (SmolLM2, Llama 2
and 3), mistral without a sliding window, qwen2. Anything else is refused by `problem` in one line saying what
the GPT lacks; hf:PATH still evaluates it through transformers (hf/checkpoints.py).

Gemma 3 (gemma3_text, Gemma3ForCausalLM) is the GPT with its own options (`gemma_config`): a head width of its own
(head_dim), an RMSNorm over each head's q and k (qk_norm), norms on the attention's and the MLP's outputs too
(post_norms: Gemma's input_layernorm, post_attention_layernorm, pre_feedforward_layernorm, post_feedforward_layernorm),
GeGLU with tanh GELU, scores scaled by query_pre_attn_scalar^-0.5 (attention_scalar), embeddings times sqrt(d) (as
scale_embeddings does: Gemma's normalizer is sqrt(hidden_size) in the weights' dtype, the same float32 number), and
layer types: sliding_attention layers with the window and a RoPE base of their own (rope_local_base_freq:
model.position.local_theta) beside full_attention ones, a RoPE scaling of the full layers only (layers: global) or of
both types alike (layers: all). Gemma's RMSNorm multiplies by (1 + w) where the GPT's multiplies by w: every norm
weight is FOLDED at import (ours = 1 + theirs, in float32) and unfolded at export (theirs = ours - 1), so the GPT has
no option for it. Refused: soft-capping of the scores or logits (Gemma 2's; Gemma 3 sets neither), bidirectional
attention, and a sliding layers' RoPE scaling that is not the full layers'.

RoPE pairs: transformers rotates the halves of a head (i, i + d/2), this repo interleaved pairs (2i, 2i + 1)
(model/rope.py). Reordering each head's q and k rows (and biases) maps one onto the other exactly, and q.k
scores are unchanged since q and k get the same order. The q and k norms act on a head's dimensions in that order,
so their weight vectors are reordered the same way (the norm itself, a mean over the head, does not see the order).
"""
from __future__ import annotations

import dataclasses

import torch

from config import LAYER_TYPES, ModelConfig
from hf.checkpoints import model_section
from hf.rope import layer_rope_parameters, own_scaling, rope_parameters

COVERED = ("llama", "mistral", "qwen2", "gemma3_text")
# What the GPT lacks for architectures people ask about; any other model_type gets the generic line.
LACKS = {
    "gpt_neox": "a parallel residual (attention and MLP read the same input) and LayerNorm with biases",
    "phi": "a parallel residual, LayerNorm and a partial rotary embedding",
    "phi3": "fused qkv and gate/up projections with a LongRoPE-style scaling",
    "gpt2": "learned absolute positions and LayerNorm",
    "bloom": "ALiBi positions and LayerNorm",
    "mpt": "ALiBi positions and LayerNorm",
    "falcon": "a parallel residual and LayerNorm",
    "gemma": "a layout the converter does not map (it maps Gemma 3's)",
    "gemma2": "soft-capping of its attention scores and logits",
    "qwen3": "q and k norms the converter does not map yet (it maps Gemma 3's)",
}


def problem(config) -> str | None:
    """Why a transformers config is not one this GPT can hold exactly, or None."""
    kind = config.model_type
    if kind not in COVERED:
        lacks = LACKS.get(kind, "an architecture outside the Llama family")
        return f"{kind} has {lacks}; the GPT converts {', '.join(COVERED)}"
    if kind == "gemma3_text":
        return gemma_problem(config)
    if getattr(config, "hidden_act", "silu") != "silu":
        return f"its MLP activation is {config.hidden_act}, not SwiGLU's silu"
    head_dim = getattr(config, "head_dim", None)
    if head_dim is not None and head_dim * config.num_attention_heads != config.hidden_size:
        return f"its head_dim {head_dim} x {config.num_attention_heads} heads is not hidden_size {config.hidden_size}"
    if getattr(config, "mlp_bias", False):
        return "its MLP has biases"
    if kind == "llama" and getattr(config, "attention_bias", False):
        return "its attention output projection has a bias (attention_bias covers q, k, v and o in Llama)"
    window = getattr(config, "sliding_window", None)
    if window is not None and (kind != "qwen2" or getattr(config, "use_sliding_window", False)):
        return f"its attention is a sliding window of {window} tokens"
    if float(rope_parameters(config).get("partial_rotary_factor") or 1.0) != 1.0:
        return "it rotates only part of each head (partial_rotary_factor)"
    return None


def gemma_problem(config) -> str | None:
    """What a Gemma 3 config asks that the GPT lacks, or None."""
    for key, what in (("attn_logit_softcapping", "attention scores"), ("final_logit_softcapping", "logits")):
        if getattr(config, key, None) is not None:
            return f"it soft-caps its {what} ({key}={getattr(config, key)})"
    if getattr(config, "use_bidirectional_attention", False):
        return "its attention is bidirectional (use_bidirectional_attention)"
    if config.hidden_activation != "gelu_pytorch_tanh":
        return f"its MLP activation is {config.hidden_activation}, not GeGLU's gelu_pytorch_tanh"
    if getattr(config, "attention_bias", False):
        return "its attention projections have biases (attention_bias)"
    types = list(config.layer_types)
    bad = [t for t in types if t not in LAYER_TYPES]
    if bad or len(types) != config.num_hidden_layers:
        return (f"its layer type {bad[0]!r} is not {' or '.join(LAYER_TYPES)}" if bad else
                f"its layer_types list {len(types)} layers of {config.num_hidden_layers}")
    params = layer_rope_parameters(config)
    lacking = [t for t in sorted(set(types)) if not (params.get(t) or {}).get("rope_theta")]
    if lacking:
        return f"it gives its {lacking[0]} layers no RoPE base"
    if any(float(params[t].get("partial_rotary_factor") or 1.0) != 1.0 for t in set(types)):
        return "it rotates only part of each head (partial_rotary_factor)"
    if "sliding_attention" in types and "full_attention" in types:
        local, full = (type_scaling(config, params[t]) for t in ("sliding_attention", "full_attention"))
        if local is not None and local != full:
            return (f"its sliding layers' RoPE scaling ({params['sliding_attention']['rope_type']}) is not its full "
                    f"layers' ({params['full_attention'].get('rope_type', 'default')}); a scaling acts on the full "
                    f"layers or on all")
    return None


def type_scaling(config, params: dict):
    """The RoPE scaling of one layer type's parameters (None: plain RoPE); a UserError for a rope type this repo
    cannot describe."""
    return own_scaling(params, config.max_position_embeddings, config.model_type)


def gpt_config(config, name: str) -> ModelConfig:
    """The ModelConfig of a covered checkpoint (its RoPE base and own scaling included)."""
    if config.model_type == "gemma3_text":
        return gemma_config(config, name)
    return dataclasses.replace(model_section(config, name), tie_embeddings=bool(config.tie_word_embeddings),
                               qkv_bias=config.model_type == "qwen2", scale_embeddings=False)


def gemma_config(config, name: str) -> ModelConfig:
    """The ModelConfig of a Gemma 3 checkpoint that `gemma_problem` passed: model.position describes the full layers
    (their base and own scaling, which acts on them only, or on every layer where the sliding layers share it), the
    sliding layers rotate with their own base (local_theta) and read the window."""
    params = layer_rope_parameters(config)
    types = list(config.layer_types)
    local = params.get("sliding_attention")
    full = params.get("full_attention") or local  # a model of sliding layers only: their RoPE describes it
    cfg = model_section(config, name, full)
    scaling = cfg.position.scaling
    if scaling is not None:
        shared = "full_attention" not in types or local is not None and type_scaling(config, local) == scaling
        scaling = dataclasses.replace(scaling, layers="all" if shared else "global")
    local_theta = float(local["rope_theta"]) if local and "sliding_attention" in types else None
    return dataclasses.replace(
        cfg, head_dim=config.head_dim, tie_embeddings=bool(config.tie_word_embeddings), scale_embeddings=True,
        qk_norm=True, post_norms=True, mlp_activation="gelu_tanh", attention_scalar=float(config.query_pre_attn_scalar),
        layer_types=types, sliding_window=config.sliding_window,
        position=dataclasses.replace(cfg.position, local_theta=local_theta, scaling=scaling))


def is_gemma(cfg: ModelConfig) -> bool:
    """Whether a GPT has Gemma 3's layout (q/k and post norms), which names and folds its norms as Gemma does."""
    return cfg.qk_norm or cfg.post_norms


def head_order(head_dim: int) -> torch.Tensor:
    """Interleaved dimension k goes to half-split row order[k]: [0, 2, ..., d-2, 1, 3, ..., d-1]."""
    return torch.cat([torch.arange(0, head_dim, 2), torch.arange(1, head_dim, 2)])


def reorder_heads(t: torch.Tensor, head_dim: int, order: torch.Tensor) -> torch.Tensor:
    """Each head's rows of a q/k weight (heads * head_dim, d_model) or bias (heads * head_dim,) taken in `order`."""
    heads = t.view(-1, head_dim, *t.shape[1:])
    return heads[:, order].reshape(t.shape)


# our name -> transformers' name, for every weight of a layer (Gemma 3: GEMMA_LAYER)
LAYER = {"attn_norm.weight": "input_layernorm.weight", "mlp_norm.weight": "post_attention_layernorm.weight",
         **{f"attn.{p}_proj.weight": f"self_attn.{p}_proj.weight" for p in "qkvo"},
         **{f"attn.{p}_proj.bias": f"self_attn.{p}_proj.bias" for p in "qkv"},  # qkv_bias
         **{f"mlp.{p}_proj.weight": f"mlp.{p}_proj.weight" for p in ("gate", "up", "down")}}
GEMMA_LAYER = {"attn_norm.weight": "input_layernorm.weight", "attn_post_norm.weight": "post_attention_layernorm.weight",
               "mlp_norm.weight": "pre_feedforward_layernorm.weight",
               "mlp_post_norm.weight": "post_feedforward_layernorm.weight",
               "attn.q_norm.weight": "self_attn.q_norm.weight", "attn.k_norm.weight": "self_attn.k_norm.weight",
               **{f"attn.{p}_proj.weight": f"self_attn.{p}_proj.weight" for p in "qkvo"},
               **{f"mlp.{p}_proj.weight": f"mlp.{p}_proj.weight" for p in ("gate", "up", "down")}}
TOP = {"embed.weight": "model.embed_tokens.weight", "norm.weight": "model.norm.weight", "lm_head.weight": "lm_head.weight"}


def names(cfg: ModelConfig) -> dict[str, str]:
    """{our weight name: transformers' name} of every weight a GPT of `cfg` holds (a tied output projection is
    the embedding, named once)."""
    out = {k: v for k, v in TOP.items() if not (cfg.tie_embeddings and k == "lm_head.weight")}
    layer = GEMMA_LAYER if is_gemma(cfg) else LAYER
    for i in range(cfg.n_layers):
        out.update({f"blocks.{i}.{k}": f"model.layers.{i}.{v}" for k, v in layer.items()
                    if cfg.qkv_bias or not k.endswith("bias")})
    return out


def is_norm(name: str) -> bool:
    """Whether our weight `name` is an RMSNorm's (which Gemma stores as w - 1)."""
    return name.endswith("norm.weight")


def is_rotated(name: str) -> bool:
    """Whether our weight `name` has a row (or an entry) per dimension of a head that RoPE pairs: q, k, their
    biases and norms."""
    return any(f".attn.{p}." in name for p in ("q_proj", "k_proj", "q_norm", "k_norm"))


def from_transformers(state: dict[str, torch.Tensor], cfg: ModelConfig) -> dict[str, torch.Tensor]:
    """A GPT state dict from a covered checkpoint's, q/k rows reordered to interleaved pairs. Raises KeyError
    naming the first weight the checkpoint lacks."""
    back = torch.argsort(head_order(cfg.head_dim))
    fold = is_gemma(cfg)
    out = {}
    for ours, theirs in names(cfg).items():
        t = state[theirs].float()
        if is_rotated(ours):
            t = reorder_heads(t, cfg.head_dim, back)
        if fold and is_norm(ours):
            t = 1.0 + t  # Gemma's (1 + w)
        out[ours] = t.contiguous()
    if cfg.tie_embeddings:
        out["lm_head.weight"] = out["embed.weight"]
    return out


def to_transformers(state: dict[str, torch.Tensor], cfg: ModelConfig, embed_scale: float) -> dict[str, torch.Tensor]:
    """A Llama/Qwen2 (or Gemma 3: is_gemma) state dict of a GPT's, q/k rows reordered to half-split pairs. A Llama
    of a GPT that scales its input embeddings (`embed_scale` != 1) is written untied: the embedding holds the scaled
    matrix, lm_head the plain; Gemma scales its own, as the GPT does, and its norm weights are unfolded (w - 1)."""
    order = head_order(cfg.head_dim)
    gemma = is_gemma(cfg)
    embed_scale = 1.0 if gemma else embed_scale
    out = {}
    for ours, theirs in names(dataclasses.replace(cfg, tie_embeddings=cfg.tie_embeddings and embed_scale == 1)).items():
        t = state["embed.weight" if ours == "lm_head.weight" and cfg.tie_embeddings else ours].detach().float()
        if is_rotated(ours):
            t = reorder_heads(t, cfg.head_dim, order)
        if gemma and is_norm(ours):
            t = t - 1.0
        if ours == "embed.weight":
            t = t * embed_scale
        out[theirs] = t.contiguous()
    return out
