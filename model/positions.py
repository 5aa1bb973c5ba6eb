"""Positional encodings behind one interface, in a registry keyed by name.

A scheme may act at three points, each a no-op by default, so the model never branches on the name:
  1. `embed(x, positions)`: on the token embeddings (learned, sinusoidal);
  2. `rotate(q, k, q_pos, k_pos)`: on queries and keys inside attention (rope);
  3. `score_bias(q_pos, k_pos)` / `score_mod()`: on the attention scores (alibi).
Positions are explicit integer tensors, so a KV cache, sliding-window evaluation and
interpolation all use the same code path.

Embedding scale, the one rule for additive encodings: tokens enter the network as
embed(idx) * sqrt(d), with RMS init_std * sqrt(d) at init (`token_rms`), and an additive encoding
starts no larger than that. A fixed encoding (sinusoidal) is scaled to exactly the token RMS; a
learned table is a weight like the others (std init_std, GPT-2's recipe) added unscaled, so it
starts at 1/sqrt(d) of the tokens and grows as it learns. Measured on configs/tiny.yaml (150-step
A/B, validation loss gap to RoPE): an unscaled sinusoid (RMS 0.707, 3x the tokens) cost 0.46 nats,
scaled to the token RMS 0.05; a learned table multiplied by sqrt(d) (token-sized noise) 0.21,
unscaled 0.03 (issue 8).
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


def token_rms(cfg: ModelConfig) -> float:
    """RMS of the scaled token embeddings at init (GPT.forward multiplies them by sqrt(d))."""
    return cfg.init_std * math.sqrt(cfg.d_model)


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
    """A trained vector per absolute position (GPT-2), initialised at std init_std and added
    unscaled (see the embedding-scale rule above). Undefined past its table."""

    def __init__(self, cfg: ModelConfig):
        super().__init__(cfg)
        self.max_positions = cfg.max_seq_len
        self.table = nn.Embedding(cfg.max_seq_len, cfg.d_model)

    def embed(self, x, positions):
        return x + self.table(positions)


def sinusoid_table(positions: torch.Tensor, d: int) -> torch.Tensor:
    """(T, d) table of Vaswani et al. (arXiv 1706.03762): sin at even dims, cos at odd dims."""
    inv_freq = 10000.0 ** (-torch.arange(0, d, 2, device=positions.device, dtype=torch.float32) / d)
    angles = positions.float()[:, None] * inv_freq[None, :]
    return torch.stack((angles.sin(), angles.cos()), dim=-1).flatten(-2)[:, :d]


@register("sinusoidal")
class Sinusoidal(PositionalEncoding):
    """Fixed sinusoids added to the embeddings, computed for any position and scaled to the
    tokens' initial RMS (the table's own RMS is 1/sqrt(2); see the embedding-scale rule above)."""

    def __init__(self, cfg: ModelConfig):
        super().__init__(cfg)
        self.d = cfg.d_model
        self.amplitude = token_rms(cfg) * math.sqrt(2)

    def embed(self, x, positions):
        return x + (self.amplitude * sinusoid_table(positions, self.d)).to(x.dtype)


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
