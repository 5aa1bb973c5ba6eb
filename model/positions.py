"""Positional encodings behind one interface, in a registry keyed by name.

A scheme may act at three points, each a no-op by default, so the model never branches on the name:
  1. `embed(x, positions)`: on the token embeddings (learned, sinusoidal);
  2. `rotate(q, k, ctx)`: on queries and keys inside attention (rope);
  3. on the attention scores (alibi): `score_bias(q_pos, k_pos)` is the definition, `score_mod()`
     the same bias for FlexAttention, and `fold(q, k, ctx)` the same scores without a T x S mask
     (an extra dimension of q and k, see Alibi).
Work that does not depend on the layer (RoPE's cos/sin, the frequencies of a dynamic scaling) is
done once per forward in `context(q_pos, k_pos, rot_pos, length)` and shared by every layer. Positions are explicit
integer tensors, so a KV cache, sliding-window evaluation and interpolation all use one code path.

Embedding scale, the one rule for additive encodings: tokens enter the network as
embed(idx) * sqrt(d), with RMS init_std * sqrt(d) at init (`token_rms`), and an additive encoding
starts no larger than that. A fixed encoding (sinusoidal) is scaled to exactly the token RMS; a
learned table is a weight like the others (std init_std, GPT-2's recipe) added unscaled, so it
starts at 1/sqrt(d) of the tokens and grows as it learns. Measured on configs/tiny.yaml (150-step
A/B, validation loss gap to RoPE): an unscaled sinusoid (RMS 0.707, 3x the tokens) cost 0.46 nats,
scaled to the token RMS 0.05; a learned table multiplied by sqrt(d) (token-sized noise) 0.21,
unscaled 0.03.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import torch
import torch.nn as nn

from config import ModelConfig, UserError

from .rope import apply_rope, check_scaling, is_dynamic, rope_angles, rope_frequencies

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


class PositionError(UserError):
    """A position the encoding cannot represent (learned, past its table)."""


@dataclass
class PositionContext:
    """What every layer of one forward pass shares: query and key positions, and for RoPE the cos
    and sin of the queries and of the keys that get rotated (all keys, or only the new ones when a
    static RoPE caches rotated keys)."""
    q_pos: torch.Tensor  # (T,)
    k_pos: torch.Tensor  # (S,) every key attended over
    q_angles: tuple[torch.Tensor, torch.Tensor] | None = None  # cos, sin (T, d/2)
    k_angles: tuple[torch.Tensor, torch.Tensor] | None = None  # cos, sin of the keys being rotated


class PositionalEncoding(nn.Module):
    name = "base"
    max_positions: int | None = None  # None: any position works (quality aside)
    dynamic = False  # True: keys are cached before rotation, re-rotated at each length

    def __init__(self, cfg: ModelConfig):
        super().__init__()

    def embed(self, x, positions):
        return x

    def context(self, q_pos, k_pos, rot_pos, length: int) -> PositionContext:
        """Per-forward work shared by the layers; rot_pos are the positions of the keys rotate() gets,
        length the current sequence length (the last position + 1)."""
        return PositionContext(q_pos, k_pos)

    def rotate(self, q, k, ctx: PositionContext):
        return q, k

    def score_bias(self, q_pos, k_pos):
        """Additive bias of shape (n_heads, T, S), or None."""
        return None

    def score_mod(self):
        """The bias as a FlexAttention score_mod(score, b, h, q_idx, kv_idx), or None."""
        return None

    def fold(self, q, k, ctx: PositionContext, scale: float):
        """q, k such that q.k * scale = the scores plus score_bias up to a constant per query row."""
        return q, k


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
        self.scaling = with_original_length(cfg)
        self.dynamic = is_dynamic(self.scaling)
        inv_freq, self.attention_factor = rope_frequencies(self.head_dim, self.theta, self.scaling)
        # Not persistent: scaling is chosen at load time and never baked into a checkpoint.
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def context(self, q_pos, k_pos, rot_pos, length):
        inv_freq, factor = self.inv_freq, self.attention_factor
        if self.dynamic:  # frequencies depend on the current length: recompute, never mutate buffers
            inv_freq, factor = rope_frequencies(self.head_dim, self.theta, self.scaling, seq_len=length,
                                                device=q_pos.device)
        k_angles = rope_angles(rot_pos, inv_freq, factor)
        q_angles = k_angles if rot_pos is q_pos else rope_angles(q_pos, inv_freq, factor)
        return PositionContext(q_pos, k_pos, q_angles, k_angles)

    def rotate(self, q, k, ctx):
        return apply_rope(q, *ctx.q_angles), apply_rope(k, *ctx.k_angles)


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
    """Linear bias -slope_h * (q_pos - k_pos) on the attention scores, one slope per head.

    Without FlexAttention the bias is folded into q and k instead of a (heads, T, S) mask: softmax
    ignores a constant per query row, so -slope_h * (i - j) may be replaced by slope_h * j, which is
    the product of one extra query dimension (slope_h / scale) and one extra key dimension (j). The
    causal kernel then runs as for the other encodings, memory linear in the length. In float32
    the large products cost about 1e-4 of absolute precision in the scores at 8k tokens.
    """

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

    def fold(self, q, k, ctx, scale):
        B, H, T, _ = q.shape
        dtype = torch.promote_types(q.dtype, torch.float32)  # bf16 could not hold slope x position
        q_extra = (self.slopes / scale).to(dtype).view(1, H, 1, 1).expand(B, H, T, 1)
        k_extra = ctx.k_pos.to(dtype).view(1, 1, -1, 1).expand(B, k.shape[1], -1, 1)
        return torch.cat([q.to(dtype), q_extra], dim=-1), torch.cat([k.to(dtype), k_extra], dim=-1)


def with_original_length(cfg: ModelConfig):
    """The model's RoPE scaling with original_max_position_embeddings filled in (max_seq_len when unset)."""
    scaling = cfg.position.scaling
    if scaling is None or scaling.original_max_position_embeddings is not None:
        return scaling
    return dataclasses.replace(scaling, original_max_position_embeddings=cfg.max_seq_len)


def check(cfg: ModelConfig) -> None:
    """The position section against the registries, once, where a model config is parsed (train.resolve,
    checkpoint.model_config): a known encoding, and for rope an even head dimension and a valid scaling.
    A UserError naming the key otherwise. The shapes and ranges are ModelConfig.validate's."""
    if cfg.position.type not in ENCODINGS:
        raise UserError(f"model.position.type: unknown encoding {cfg.position.type!r}; "
                        f"choose one of {', '.join(sorted(ENCODINGS))}")
    if cfg.position.type == "rope" and cfg.head_dim % 2:
        raise UserError(f"model.position.type=rope needs an even head dimension, got "
                        f"d_model/n_heads = {cfg.head_dim}")
    check_scaling(cfg.position.scaling, "model.position.scaling")


def build_position(cfg: ModelConfig) -> PositionalEncoding:
    """The encoding of a parsed (checked) model config."""
    return ENCODINGS[cfg.position.type](cfg)
