"""Llama-family checkpoints as this repo's GPT, and this repo's GPT as a Llama (or Qwen2) checkpoint: the shapes,
the names and the order of the q/k rows, both ways, as pure functions of configs and state dicts.

The family is the architecture model/gpt.py already is: pre-norm RMSNorm, SwiGLU, grouped-query attention, RoPE
and no biases. Its members differ by three options of ModelConfig: Llama 3 unties the output projection from the
embedding (`tie_embeddings`), Qwen2 adds biases to q, k and v (`qkv_bias`), and none of them multiplies the
input embeddings by sqrt(d) as this repo's own models do (`scale_embeddings`). Covered: llama (SmolLM2, Llama 2
and 3), mistral without a sliding window, qwen2. Anything else is refused by `problem` in one line saying what
the GPT lacks; hf:PATH still evaluates it through transformers (hf/checkpoints.py).

RoPE pairs: transformers rotates the halves of a head (i, i + d/2), this repo interleaved pairs (2i, 2i + 1)
(model/rope.py). Reordering each head's q and k rows (and biases) maps one onto the other exactly, and q.k
scores are unchanged since q and k get the same order.
"""
from __future__ import annotations

import dataclasses

import torch

from config import ModelConfig
from hf.checkpoints import model_section
from hf.rope import rope_parameters

COVERED = ("llama", "mistral", "qwen2")
# What the GPT lacks for architectures people ask about; any other model_type gets the generic line.
LACKS = {
    "gpt_neox": "a parallel residual (attention and MLP read the same input) and LayerNorm with biases",
    "phi": "a parallel residual, LayerNorm and a partial rotary embedding",
    "phi3": "fused qkv and gate/up projections with a LongRoPE-style scaling",
    "gpt2": "learned absolute positions and LayerNorm",
    "bloom": "ALiBi positions and LayerNorm",
    "mpt": "ALiBi positions and LayerNorm",
    "falcon": "a parallel residual and LayerNorm",
    "gemma": "GeGLU, a (1 + w) RMSNorm and embeddings scaled by sqrt(d) in its own way",
    "gemma2": "logit soft-capping, sliding-window layers and extra norms",
    "qwen3": "an RMSNorm on q and k",
}


def problem(config) -> str | None:
    """Why a transformers config is not one this GPT can hold exactly, or None."""
    kind = config.model_type
    if kind not in COVERED:
        lacks = LACKS.get(kind, "an architecture outside the Llama family")
        return f"{kind} has {lacks}; the GPT converts {', '.join(COVERED)}"
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


def gpt_config(config, name: str) -> ModelConfig:
    """The ModelConfig of a covered checkpoint (its RoPE base and own scaling included)."""
    return dataclasses.replace(model_section(config, name), tie_embeddings=bool(config.tie_word_embeddings),
                               qkv_bias=config.model_type == "qwen2", scale_embeddings=False)


def head_order(head_dim: int) -> torch.Tensor:
    """Interleaved dimension k goes to half-split row order[k]: [0, 2, ..., d-2, 1, 3, ..., d-1]."""
    return torch.cat([torch.arange(0, head_dim, 2), torch.arange(1, head_dim, 2)])


def reorder_heads(t: torch.Tensor, head_dim: int, order: torch.Tensor) -> torch.Tensor:
    """Each head's rows of a q/k weight (heads * head_dim, d_model) or bias (heads * head_dim,) taken in `order`."""
    heads = t.view(-1, head_dim, *t.shape[1:])
    return heads[:, order].reshape(t.shape)


# our name -> transformers' name, for every weight of a layer
LAYER = {"attn_norm.weight": "input_layernorm.weight", "mlp_norm.weight": "post_attention_layernorm.weight",
         **{f"attn.{p}_proj.weight": f"self_attn.{p}_proj.weight" for p in "qkvo"},
         **{f"attn.{p}_proj.bias": f"self_attn.{p}_proj.bias" for p in "qkv"},  # qkv_bias
         **{f"mlp.{p}_proj.weight": f"mlp.{p}_proj.weight" for p in ("gate", "up", "down")}}
TOP = {"embed.weight": "model.embed_tokens.weight", "norm.weight": "model.norm.weight", "lm_head.weight": "lm_head.weight"}


def names(cfg: ModelConfig) -> dict[str, str]:
    """{our weight name: transformers' name} of every weight a GPT of `cfg` holds (a tied output projection is
    the embedding, named once)."""
    out = {k: v for k, v in TOP.items() if not (cfg.tie_embeddings and k == "lm_head.weight")}
    for i in range(cfg.n_layers):
        out.update({f"blocks.{i}.{k}": f"model.layers.{i}.{v}" for k, v in LAYER.items()
                    if cfg.qkv_bias or not k.endswith("bias")})
    return out


def from_transformers(state: dict[str, torch.Tensor], cfg: ModelConfig) -> dict[str, torch.Tensor]:
    """A GPT state dict from a covered checkpoint's, q/k rows reordered to interleaved pairs. Raises KeyError
    naming the first weight the checkpoint lacks."""
    back = torch.argsort(head_order(cfg.head_dim))
    out = {}
    for ours, theirs in names(cfg).items():
        t = state[theirs].float()
        if ".attn.q_proj." in ours or ".attn.k_proj." in ours:
            t = reorder_heads(t, cfg.head_dim, back)
        out[ours] = t.contiguous()
    if cfg.tie_embeddings:
        out["lm_head.weight"] = out["embed.weight"]
    return out


def to_transformers(state: dict[str, torch.Tensor], cfg: ModelConfig, embed_scale: float) -> dict[str, torch.Tensor]:
    """A Llama/Qwen2 state dict of a GPT's, q/k rows reordered to half-split pairs. A GPT that scales its input
    embeddings (`embed_scale` != 1) is written untied: the embedding holds the scaled matrix, lm_head the plain."""
    order = head_order(cfg.head_dim)
    out = {}
    for ours, theirs in names(dataclasses.replace(cfg, tie_embeddings=cfg.tie_embeddings and embed_scale == 1)).items():
        t = state["embed.weight" if ours == "lm_head.weight" and cfg.tie_embeddings else ours].detach().float()
        if ".attn.q_proj." in ours or ".attn.k_proj." in ours:
            t = reorder_heads(t, cfg.head_dim, order)
        if ours == "embed.weight":
            t = t * embed_scale
        out[theirs] = t.contiguous()
    return out
