"""Positional encodings behind one interface, in a registry keyed by name.

A scheme may act at three points, each a no-op by default, so the model never branches on the name:
  1. `embed(x, positions)`: on the token embeddings (learned, sinusoidal);
  2. `rotate(q, k, q_pos, k_pos)`: on queries and keys inside attention (rope);
  3. `score_bias(q_pos, k_pos)` / `score_mod()`: on the attention scores (alibi).
Positions are explicit integer tensors, so a KV cache, sliding-window evaluation and
interpolation all use the same code path.
"""
from __future__ import annotations

import math

import torch
import torch.nn as nn

from .config import ModelConfig
from .rope import DYNAMIC, apply_rope, rope_angles, rope_frequencies

ENCODINGS: dict[str, type[PositionalEncoding]] = {}


def register(name: str):
    def wrap(cls):
        cls.name = name
        ENCODINGS[name] = cls
        return cls
    return wrap


class PositionError(ValueError):
    """A position the encoding cannot represent (learned, past its table)."""


class PositionalEncoding(nn.Module):
    name = "base"
    max_positions: int | None = None  # None: any position works (quality aside)

    def __init__(self, cfg: ModelConfig):
        super().__init__()

    def embed(self, x, positions):
        return x

    def rotate(self, q, k, q_pos, k_pos):
        return q, k

    def score_bias(self, q_pos, k_pos):
        """Additive bias of shape (n_heads, T, S), or None."""
        return None

    def score_mod(self):
        """The bias as a FlexAttention score_mod(score, b, h, q_idx, kv_idx), or None."""
        return None


@register("nope")
class NoPE(PositionalEncoding):
    """No positional information at all; the causal mask is the only source of order
    (Kazemnejad et al., arXiv 2305.19466). The control of every comparison."""


@register("learned")
class Learned(PositionalEncoding):
    """A trained vector per absolute position (GPT-2). Undefined past its table."""

    def __init__(self, cfg: ModelConfig):
        super().__init__(cfg)
        self.max_positions = cfg.max_seq_len
        self.table = nn.Embedding(cfg.max_seq_len, cfg.d_model)
        self.scale = math.sqrt(cfg.d_model)  # the same scale as the token embeddings, see GPT.forward

    def embed(self, x, positions):
        return x + self.table(positions) * self.scale


def sinusoid_table(positions: torch.Tensor, d: int) -> torch.Tensor:
    """(T, d) table of Vaswani et al. (arXiv 1706.03762): sin at even dims, cos at odd dims."""
    inv_freq = 10000.0 ** (-torch.arange(0, d, 2, device=positions.device, dtype=torch.float32) / d)
    angles = positions.float()[:, None] * inv_freq[None, :]
    return torch.stack((angles.sin(), angles.cos()), dim=-1).flatten(-2)[:, :d]


@register("sinusoidal")
class Sinusoidal(PositionalEncoding):
    """Fixed sinusoids added to the embeddings; computed for any position."""

    def __init__(self, cfg: ModelConfig):
        super().__init__(cfg)
        self.d = cfg.d_model

    def embed(self, x, positions):
        return x + sinusoid_table(positions, self.d).to(x.dtype)


@register("rope")
class Rope(PositionalEncoding):
    """Rotary embedding of q and k (model/rope.py), with an optional scaling method."""

    def __init__(self, cfg: ModelConfig):
        super().__init__(cfg)
        self.head_dim, self.theta = cfg.head_dim, cfg.position.theta
        self.scaling = dict(cfg.position.scaling or {})
        if self.scaling:
            self.scaling.setdefault("original_max_position_embeddings", cfg.max_seq_len)
        self.dynamic = self.scaling.get("type") in DYNAMIC
        inv_freq, self.attention_factor = rope_frequencies(self.head_dim, self.theta, self.scaling)
        # Not persistent: scaling is chosen at load time and never baked into a checkpoint.
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def rotate(self, q, k, q_pos, k_pos):
        inv_freq, factor = self.inv_freq, self.attention_factor
        if self.dynamic:  # frequencies depend on the current length: recompute, never mutate buffers
            inv_freq, factor = rope_frequencies(self.head_dim, self.theta, self.scaling, seq_len=k.shape[-2])
            inv_freq = inv_freq.to(q.device)
        k_cos, k_sin = rope_angles(k_pos, inv_freq, factor)
        if q_pos is k_pos:
            q_cos, q_sin = k_cos, k_sin
        else:
            q_cos, q_sin = rope_angles(q_pos, inv_freq, factor)
        return apply_rope(q, q_cos, q_sin), apply_rope(k, k_cos, k_sin)


def alibi_slopes(n_heads: int) -> torch.Tensor:
    """Head slopes of ALiBi (Press et al., arXiv 2108.12409).

    For n a power of two: the geometric sequence 2^(-8/n), 2^(-16/n), ..., 2^(-8). Otherwise the
    paper's recipe: the slopes for the nearest lower power of two, then every other slope of the
    next power of two until there are n.
    """
    def power_of_two(n):
        return [2.0 ** (-8.0 * (i + 1) / n) for i in range(n)]
    if n_heads & (n_heads - 1) == 0:
        return torch.tensor(power_of_two(n_heads))
    lower = 2 ** math.floor(math.log2(n_heads))
    extra = power_of_two(2 * lower)[0::2][: n_heads - lower]
    return torch.tensor(power_of_two(lower) + extra)


@register("alibi")
class Alibi(PositionalEncoding):
    """Linear bias -slope_h * (q_pos - k_pos) on the attention scores, one slope per head."""

    def __init__(self, cfg: ModelConfig):
        super().__init__(cfg)
        self.register_buffer("slopes", alibi_slopes(cfg.n_heads), persistent=False)

    def score_bias(self, q_pos, k_pos):
        distance = (q_pos[:, None] - k_pos[None, :]).float()  # (T, S)
        return -self.slopes[:, None, None] * distance  # (H, T, S)

    def score_mod(self):
        slopes = self.slopes

        def alibi(score, b, h, q_idx, kv_idx):
            return score - slopes[h] * (q_idx - kv_idx)
        return alibi


def build_position(cfg: ModelConfig) -> PositionalEncoding:
    return ENCODINGS[cfg.position.type](cfg)  # ModelConfig.validate has checked the name
