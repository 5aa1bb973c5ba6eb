"""Positional encodings behind one interface, in a registry keyed by name.

A scheme may act at three points, each a no-op by default, so the model never branches on the name:
  1. `embed(x, positions)`: on the token embeddings (learned, sinusoidal);
  2. `rotate(q, k, ctx)`: on queries and keys inside attention (rope);
  3. on the attention scores: `score_bias(q_pos, k_pos)` is the definition, `score_mod(ctx)` the same
     bias for FlexAttention. ALiBi, linear in the key position, is folded into q and k instead of a
     T x S mask (`fold(q, k, ctx)`, an extra dimension of q and k); the learned biases (t5, kerple,
     fire) are built once per forward as a float mask `ctx.mask` (heads, T, S) that SDPA adds.
A training-free context method (model/context.py) is applied by a fourth hook, `show(ctx, method, length)`:
the score bias at the distances it shows (`bias_at`), -inf on the keys it hides, and for RoPE a second
rotation of q and k at the positions it shows far pairs. A sliding window (model.sliding_window) hides keys the
same way, `hide(ctx, hidden)`: -inf in the float mask ctx.bias, which then carries the encoding's bias too; on scores
without a bias (RoPE, NoPE) it is ctx.window instead, and attention reads only the keys inside it.
A bias that depends on each layer's input (fox: a data-dependent forget gate) is built per layer by a fifth
hook, `layer_context(layer, x, ctx, cache)`, from the shared context; the others return it as it is.
Work that does not depend on the layer (RoPE's cos/sin, the frequencies of a dynamic scaling, a
learned bias) is done once per forward in `context(q_pos, k_pos, rot_pos, length)` and shared by every
layer. Positions are explicit integer tensors, so a KV cache, sliding-window evaluation and
interpolation all use one code path.

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
import torch.nn.functional as F

from config import ModelConfig, UserError

from .rope import apply_rope, check_scaling, is_dynamic, rope_angles, rope_frequencies, rotate_pairs

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
    q_pos: torch.Tensor  # (T,), or (B, T) where each sequence has its own positions
    k_pos: torch.Tensor  # (S,) or (B, S): every key attended over
    q_angles: tuple[torch.Tensor, torch.Tensor] | None = None  # cos, sin (T, d/2) or (B, 1, T, d/2)
    k_angles: tuple[torch.Tensor, torch.Tensor] | None = None  # cos, sin of the keys being rotated
    bias: torch.Tensor | None = None  # (heads, T, S) or (B, heads, T, S): a learned score bias, -inf on future keys
    # (T, S, d/2) complex, cos + i sin: each query rotates every key with its own frequencies (a dynamic scaling
    # decoding a chunk of T tokens, as T one-token steps would); k_angles is then None
    key_rotors: torch.Tensor | None = None
    score_mod: object = None  # with FlexAttention (GPT.use_flex_attention): the encoding's score_mod ...
    block_mask: object = None  # ... and the causal BlockMask of this forward's shape
    rotate_keys: bool = False  # every key is rotated in this forward, so a KV cache holds them before rotation
    # a context method (model/context.py): the second pass of RoPE, q and k at the positions it shows far
    # pairs, and the (T, S) pairs scored by it; and factors (T,) multiplying the queries (log-n)
    far: PositionContext | None = None
    use_far: torch.Tensor | None = None
    q_scale: torch.Tensor | None = None
    # a sliding window on scores without a bias (GPT.shared_context): keys `window` or more positions back are left
    # out by attention itself (model.attention.windowed_attention), each block of queries reading only its keys,
    # (first query, end of the queries, first key, end of the keys), in place of -inf in a (T, S) mask
    window: int | None = None
    window_blocks: list[tuple[int, int, int, int]] | None = None


class PositionalEncoding(nn.Module):
    name = "base"
    kind = "relative"  # how positions reach attention: relative, absolute (added to the tokens) or none (NoPE)
    max_positions: int | None = None  # None: any position works (quality aside)
    dynamic = False  # True: keys are cached before rotation, re-rotated at each length
    layer_bias = False  # True: a score bias built per layer from its input (layer_context), as fox's

    def __init__(self, cfg: ModelConfig):
        super().__init__()

    def embed(self, x, positions):
        return x

    def context(self, q_pos, k_pos, rot_pos, length: int, consecutive: bool | None = None) -> PositionContext:
        """Per-forward work shared by the layers; rot_pos are the positions of the keys rotate() gets,
        length the current sequence length (the last position + 1). `consecutive`: whether the query and
        the key positions are each consecutive integers, as GPT.forward knows them without reading the
        device (None: unknown, an encoding that cares checks the tensors)."""
        return PositionContext(q_pos, k_pos)

    def rotate(self, q, k, ctx: PositionContext):
        return q, k

    def score_bias(self, q_pos, k_pos):
        """Additive bias of shape (n_heads, T, S), or None."""
        return None

    def bias_at(self, distance, q_pos):
        """The bias (H, T, S) at distances (T, S) >= 0 for queries at positions q_pos (T,) (or (B, H, T, S) for
        (B, T, S) and (B, T)), or None for an encoding without one."""
        return None

    def score_mod(self, ctx: PositionContext):
        """The bias as a FlexAttention score_mod(score, b, h, q_idx, kv_idx), or None; a bias built as the
        float mask ctx.bias is read from it instead (GPT.forward, table_score_mod)."""
        return None

    def fold(self, q, k, ctx: PositionContext, scale: float):
        """q, k such that q.k * scale = the scores plus score_bias up to a constant per query row."""
        return q, k

    def show(self, ctx: PositionContext, method, length) -> None:
        """Apply a context method (model/context.py) to this forward's context, for every layer: the score bias
        at the distances the method shows and -inf on the keys it hides, one float mask ctx.bias."""
        q_pos, k_pos = ctx.q_pos, ctx.k_pos
        bias = self.bias_at(method.distance(q_pos, k_pos).clamp(min=0), method.query_position(q_pos))
        ctx.bias = hiding_mask(method.hidden(q_pos, k_pos), bias)

    def hide(self, ctx: PositionContext, hidden: torch.Tensor) -> None:
        """Hide keys from every query of this forward, for every layer given ctx (a sliding window): -inf where
        `hidden` (T, S) (or (B, T, S) for per-sequence positions) holds, in the float mask ctx.bias. Where the
        context has no mask yet, one is built with -inf on the future keys and the encoding's bias at the true
        distances (bias_at: ALiBi's, no longer folded into q and k), zero for an encoding without one."""
        if ctx.bias is None:
            distance = ctx.q_pos[..., :, None] - ctx.k_pos[..., None, :]  # (T, S) or (B, T, S)
            bias = self.bias_at(distance.clamp(min=0).float(), ctx.q_pos)  # (H, T, S) or (B, H, T, S), or None
            hidden = hidden | (distance < 0)
            ctx.bias = torch.zeros(hidden.unsqueeze(-3).shape, device=hidden.device) if bias is None else bias
        ctx.bias = ctx.bias.masked_fill(hidden.unsqueeze(-3), float("-inf"))

    def layer_context(self, layer: int, x: torch.Tensor, ctx: PositionContext, cache=None) -> PositionContext:
        """The context of one layer whose input is x (B, T, C), with `cache` (model.attention.KVCache) the forward's
        cache: the shared one, except for an encoding whose bias depends on the layer's input (layer_bias)."""
        return ctx


def hiding_mask(hidden: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """(H or 1, T, S) float mask: the bias (zero where None) with -inf where `hidden` (T, S) holds."""
    if bias is None:
        bias = torch.zeros(1, *hidden.shape, device=hidden.device)
    return bias.masked_fill(hidden, float("-inf"))


def table_score_mod(bias: torch.Tensor):
    """A FlexAttention score_mod adding a float mask (H or 1, T, S) or (B, H or 1, T, S) built before the layers
    (the learned biases, or a context method's bias or hidden keys)."""
    bias = bias if bias.dim() == 4 else bias[None]  # (1 or B, H or 1, T, S)
    last, last_head = bias.shape[0] - 1, bias.shape[1] - 1  # 0: one mask for every sequence, or every head

    def table_bias(score, b, h, q_idx, kv_idx):
        return score + bias[torch.clamp(b, max=last), torch.clamp(h, max=last_head), q_idx, kv_idx]
    return table_bias


@register("nope")
class NoPE(PositionalEncoding):
    """No positional information at all; the causal mask is the only source of order
    (Kazemnejad et al., arXiv 2305.19466). The control of every comparison."""
    kind = "none"


@register("learned")
class Learned(PositionalEncoding):
    """A trained vector per absolute position (GPT-2), initialised at std init_std and added
    unscaled (see the embedding-scale rule above). Undefined past its table."""
    kind = "absolute"

    def __init__(self, cfg: ModelConfig):
        super().__init__(cfg)
        self.max_positions = cfg.max_seq_len
        self.table = nn.Embedding(cfg.max_seq_len, cfg.d_model)

    def embed(self, x, positions):
        return x + self.table(positions)


def sinusoid_table(positions: torch.Tensor, d: int) -> torch.Tensor:
    """(T, d) table (or (B, T, d) for per-sequence positions) of Vaswani et al. (arXiv 1706.03762): sin at
    even dims, cos at odd dims."""
    inv_freq = 10000.0 ** (-torch.arange(0, d, 2, device=positions.device, dtype=torch.float32) / d)
    angles = positions.float()[..., None] * inv_freq
    return torch.stack((angles.sin(), angles.cos()), dim=-1).flatten(-2)[..., :d]


@register("sinusoidal")
class Sinusoidal(PositionalEncoding):
    """Fixed sinusoids added to the embeddings, computed for any position and scaled to the
    tokens' initial RMS (the table's own RMS is 1/sqrt(2); see the embedding-scale rule above)."""
    kind = "absolute"

    def __init__(self, cfg: ModelConfig):
        super().__init__(cfg)
        self.d = cfg.d_model
        self.amplitude = token_rms(cfg) * math.sqrt(2)

    def embed(self, x, positions):
        return x + (self.amplitude * sinusoid_table(positions, self.d)).to(x.dtype)


def rotary_dims(cfg: ModelConfig) -> int:
    """Dimensions of each head that RoPE rotates: rotary_fraction of the head, the first ones (GPT-NeoX's
    partial rotary); the frequencies and scalings are those of a head of that size."""
    return round(cfg.head_dim * cfg.position.rotary_fraction)


def rotated_pairs(cfg: ModelConfig) -> int:
    """Pairs of the rotated dimensions whose frequency is kept (p-RoPE's p of them, the highest first)."""
    return round(cfg.position.kept_frequencies * rotary_dims(cfg) / 2)


@register("rope")
class Rope(PositionalEncoding):
    """Rotary embedding of q and k (model/rope.py), with an optional scaling method, on the first
    `rotary_dims` dimensions of each head (all of them by default); the others carry no position. With
    kept_frequencies p < 1 (p-RoPE, Barbero et al., arXiv 2410.06205), only the highest p of the frequencies rotate:
    the pairs of the lowest are left as they are, channels that carry no position, where GPT-NeoX's partial rotary
    keeps the whole range of frequencies on fewer dimensions."""

    def __init__(self, cfg: ModelConfig):
        super().__init__(cfg)
        self.dims, self.theta = rotary_dims(cfg), cfg.position.theta
        self.kept = rotated_pairs(cfg)
        self.scaling = with_original_length(cfg)
        self.dynamic = is_dynamic(self.scaling)
        inv_freq, self.attention_factor = self.frequencies()
        # Not persistent: scaling is chosen at load time and never baked into a checkpoint.
        self.register_buffer("inv_freq", inv_freq, persistent=False)
        # cos and sin of the positions of a training step (0 .. max_seq_len - 1), computed once: read from here, a
        # compiled step does no trigonometry, where inductor would recompute them in every layer's rotation
        # kernel (8% of an H100 step at gpt2-124m, studies/bench/history.md). Dynamic scalings depend on the length.
        cos, sin = (None, None) if self.dynamic else rope_angles(torch.arange(cfg.max_seq_len), inv_freq,
                                                                 self.attention_factor)
        self.register_buffer("cos_table", cos, persistent=False)
        self.register_buffer("sin_table", sin, persistent=False)

    def context(self, q_pos, k_pos, rot_pos, length, consecutive=None):
        T = q_pos.shape[-1]
        if self.dynamic and q_pos.dim() == 1 and k_pos.shape[-1] > T > 1:
            return self.chunk_context(q_pos, k_pos, length)
        if consecutive and rot_pos is q_pos and self.cos_table is not None and length <= len(self.cos_table):
            # positions length - T .. length - 1, the keys rotated being the queries (GPT.place: no cache)
            angles = self.cos_table[length - T:length], self.sin_table[length - T:length]
            return PositionContext(q_pos, k_pos, angles, angles)
        inv_freq, factor = self.inv_freq, self.attention_factor
        if self.dynamic:  # frequencies depend on the current length: recompute, never mutate buffers
            inv_freq, factor = self.frequencies(length, q_pos.device)
        k_angles = per_head(rope_angles(rot_pos, inv_freq, factor))
        q_angles = k_angles if rot_pos is q_pos else per_head(rope_angles(q_pos, inv_freq, factor))
        return PositionContext(q_pos, k_pos, q_angles, k_angles)

    def frequencies(self, seq_len=None, device=None):
        """(inv_freq, attention factor) of the scaling at the current length, p-RoPE's lowest pairs at frequency 0."""
        inv_freq, factor = rope_frequencies(self.dims, self.theta, self.scaling, seq_len=seq_len, device=device)
        if self.kept < len(inv_freq):  # inv_freq falls with the pair index: the lowest frequencies come last
            inv_freq = torch.cat((inv_freq[:self.kept], inv_freq.new_zeros(len(inv_freq) - self.kept)))
        return inv_freq, factor

    def chunk_context(self, q_pos, k_pos, length):
        """A dynamic scaling decoding T tokens after a cache, exactly as T one-token steps: the token at
        position p (contiguous positions, the last one length - 1) takes the frequencies of length p + 1,
        for itself and for every key it reads, so each query gets its own rotation of the keys."""
        T, length = q_pos.shape[-1], int(length)  # (a static cache's length is a tensor: read back here)
        freqs = [self.frequencies(n, q_pos.device) for n in range(length - T + 1, length + 1)]
        inv_freq = torch.stack([f for f, _ in freqs])  # (T, d/2): a row per query
        factor = torch.tensor([a for _, a in freqs], device=q_pos.device)[:, None]  # (T, 1)
        cos, sin = rope_angles(k_pos, inv_freq[:, None], factor[:, None])  # (T, S, d/2)
        return PositionContext(q_pos, k_pos, rope_angles(q_pos, inv_freq, factor),  # (T, d/2)
                               key_rotors=torch.complex(cos, sin))

    def show(self, ctx, method, length):
        """Under a context method that shows far pairs another distance: q and k rotated a second time at the
        positions it shows them (ctx.far), the attention layer taking each pair's score from one rotation or the
        other (ctx.use_far) before one softmax; and -inf on the keys it hides."""
        ctx.bias = hiding_mask(method.hidden(ctx.q_pos, ctx.k_pos))
        far = method.far(ctx.q_pos, ctx.k_pos)
        if far is not None:
            ctx.use_far, far_q, far_k = far
            ctx.far = self.context(far_q, far_k, far_k, length)

    def rotate(self, q, k, ctx):
        if ctx.key_rotors is not None:  # per_query_attention turns k for one query at a time (rotate_part)
            return self.rotate_part(q, ctx.q_angles), k
        return self.rotate_part(q, ctx.q_angles), self.rotate_part(k, ctx.k_angles)

    def rotate_part(self, x, angles):
        """x rotated on its first self.dims dimensions by angles: (cos, sin), or a complex rotor (rotate_pairs)."""
        def turn(y):
            return rotate_pairs(y, angles) if torch.is_tensor(angles) else apply_rope(y, *angles)
        if self.dims == x.shape[-1]:
            return turn(x)
        rotated = turn(x[..., :self.dims])
        return torch.cat([rotated, x[..., self.dims:].expand(*rotated.shape[:-1], -1)], dim=-1)


def per_head(angles):
    """cos and sin of per-sequence positions, (B, T, d/2), as (B, 1, T, d/2) for q and k of shape (B, H, T, d)."""
    return angles if angles[0].dim() == 2 else tuple(a.unsqueeze(1) for a in angles)


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
        return self.bias_at((q_pos[..., :, None] - k_pos[..., None, :]).float(), q_pos)  # (T, S) or (B, T, S)

    def bias_at(self, distance, q_pos):
        return -self.slopes[:, None, None] * distance.unsqueeze(-3)  # (H, T, S) or (B, H, T, S)

    def score_mod(self, ctx):
        slopes = self.slopes
        if ctx.q_pos.dim() == 2:  # per-sequence positions: the distance is not the index difference
            q_pos, k_pos = ctx.q_pos, ctx.k_pos

            def alibi_at(score, b, h, q_idx, kv_idx):
                return score - slopes[h] * (q_pos[b, q_idx] - k_pos[b, kv_idx])
            return alibi_at

        def alibi(score, b, h, q_idx, kv_idx):
            return score - slopes[h] * (q_idx - kv_idx)  # the distance up to a constant per query row
        return alibi

    def fold(self, q, k, ctx, scale):
        B, H, T, _ = q.shape
        dtype = torch.promote_types(q.dtype, torch.float32)  # bf16 could not hold slope x position
        q_extra = (self.slopes / scale).to(dtype).view(1, H, 1, 1).expand(B, H, T, 1)
        k_pos = ctx.k_pos if ctx.k_pos.dim() == 2 else ctx.k_pos[None]  # (1 or B, S)
        k_extra = k_pos.to(dtype)[:, None, :, None].expand(B, k.shape[1], -1, 1)
        return torch.cat([q.to(dtype), q_extra], dim=-1), torch.cat([k.to(dtype), k_extra], dim=-1)


class LearnedBias(PositionalEncoding):
    """An encoding whose score bias is a learned function of the query and key positions, per head. It
    is built once per forward in `context` as ctx.bias, (heads, T, S) with -inf on future keys, and
    added by SDPA as a float mask (or read by FlexAttention, `table_score_mod`). One set of parameters serves every
    layer, as T5 shares its bias (Raffel et al., arXiv 1910.10683, section 2.1).

    A bias that depends on the distance i - j only defines `distance_bias`, its values per head for a
    vector of distances; where the positions are consecutive (training, evaluation, decoding) the
    T x S mask is then a Toeplitz matrix, built from the T + S - 1 distances it holds."""
    distance_only = True  # False: the bias also depends on the query position (score_bias overridden)

    def distance_bias(self, distance: torch.Tensor) -> torch.Tensor:
        """(H, n) bias for n distances i - j >= 0."""
        raise NotImplementedError

    def score_bias(self, q_pos, k_pos):
        return self.bias_at(causal_distance(q_pos, k_pos), q_pos)  # (T, S) or (B, T, S) distances

    def bias_at(self, distance, q_pos):
        bias = self.distance_bias(distance.flatten()).view(-1, *distance.shape)  # (H, [B,] T, S)
        return bias if distance.dim() == 2 else bias.transpose(0, 1)

    def context(self, q_pos, k_pos, rot_pos, length, consecutive=None):
        return PositionContext(q_pos, k_pos, bias=self.mask(q_pos, k_pos, consecutive))

    def mask(self, q_pos, k_pos, consecutive: bool | None = None):
        """(H, T, S) bias, -inf on future keys. `consecutive` as in context(): when GPT.forward knows it,
        nothing is read back from the device (no host sync, no graph break under torch.compile)."""
        if self.distance_only and q_pos.dim() == k_pos.dim() == 1 and both_consecutive(q_pos, k_pos, consecutive):
            # row t of the mask is the bias at distances d_t, d_t - 1, ..., d_t - S + 1 (d_t = q_pos[t] - k_pos[0]):
            # a window of the bias of every distance from the smallest to the largest, read backwards
            T, S = len(q_pos), len(k_pos)
            distance = q_pos[:1] - k_pos[-1:] + torch.arange(T + S - 1, device=q_pos.device)  # no read-back
            values = self.distance_bias(distance.clamp(min=0)).masked_fill(distance < 0, float("-inf"))  # (H, T+S-1)
            return values.flip(-1).unfold(-1, S, 1).flip(-2)  # (H, T, S), flip copies
        future = (k_pos[..., None, :] > q_pos[..., :, None]).unsqueeze(-3)  # (1, T, S) or (B, 1, T, S)
        return self.score_bias(q_pos, k_pos).masked_fill(future, float("-inf"))


def is_consecutive(positions: torch.Tensor) -> bool:
    return len(positions) < 2 or bool((positions.diff() == 1).all())


def both_consecutive(q_pos: torch.Tensor, k_pos: torch.Tensor, known: bool | None) -> bool:
    """Whether query and key positions are each consecutive: `known` where the caller knows it, else read
    from the tensors (a host sync)."""
    return known if known is not None else is_consecutive(q_pos) and is_consecutive(k_pos)


def causal_distance(q_pos, k_pos) -> torch.Tensor:
    """(T, S) (or (B, T, S)) distances i - j of query i to key j, 0 for future keys (which the mask removes)."""
    return (q_pos[..., :, None] - k_pos[..., None, :]).clamp(min=0)


def t5_bucket(distance: torch.Tensor, buckets: int, max_distance: int) -> torch.Tensor:
    """T5's causal relative-position bucket of each distance (Raffel et al., arXiv 1910.10683, section
    2.1): distances below buckets/2 have a bucket each, longer ones share buckets spaced
    logarithmically up to max_distance, and every distance beyond falls in the last bucket. A fractional
    distance (Leaky ReRoPE's) takes the bucket of its integer part."""
    distance = distance.long()
    exact = buckets // 2
    spread = torch.log(distance.float().clamp(min=1) / exact) / math.log(max_distance / exact)
    far = exact + (spread * (buckets - exact)).long()
    return torch.where(distance < exact, distance, far.clamp(max=buckets - 1))


@register("t5")
class T5(LearnedBias):
    """T5's relative bias: one learned scalar per head per distance bucket (t5_bucket), from
    model.position.buckets and max_distance. The table starts as every weight does (std init_std)."""

    def __init__(self, cfg: ModelConfig):
        super().__init__(cfg)
        self.buckets, self.max_distance = cfg.position.buckets, cfg.position.max_distance
        self.table = nn.Embedding(self.buckets, cfg.n_heads)

    def distance_bias(self, distance):
        return self.table(t5_bucket(distance, self.buckets, self.max_distance)).T


@register("kerple")
class Kerple(LearnedBias):
    """KERPLE's logarithmic kernel (Chi et al., arXiv 2205.09921, KERPLE-log): bias =
    -r1 * log(1 + r2 * (i - j)) with r1, r2 > 0 per head. As in the paper's code, r1 starts uniform in
    (0, 2) and r2 in (0, 1), and both are clamped at 0.01 from below. (The paper gives each layer its
    own r1, r2; here the layers share them, like every score bias in this repo.)"""

    def __init__(self, cfg: ModelConfig):
        super().__init__(cfg)
        self.r1 = nn.Parameter(2 * torch.rand(cfg.n_heads))
        self.r2 = nn.Parameter(torch.rand(cfg.n_heads))

    def distance_bias(self, distance):
        r1, r2 = (r.clamp(min=0.01)[:, None] for r in (self.r1, self.r2))
        return -r1 * torch.log1p(r2 * distance.float())


@register("fire")
class Fire(LearnedBias):
    """FIRE (Li et al., arXiv 2310.04418): bias = f(psi(i - j) / psi(max(L_thr, i))), psi(x) = log(c x + 1),
    f an MLP from the scalar to one value per head, c and the threshold L_thr learned. Dividing by
    psi(max(L_thr, i)) keeps f's input in [0, 1] at any length ("progressive interpolation"). Here f has
    one hidden layer of 32 ReLU units with nn.Linear's default init; c starts at 0.1 and L_thr at the
    training length, both clamped (c >= 0.001, L_thr >= 1)."""
    distance_only = False
    hidden = 32
    chunk = 1 << 22  # hidden activations per query-row chunk (16 MiB): 16x L stays in memory

    def __init__(self, cfg: ModelConfig):
        super().__init__(cfg)
        first, second = nn.Linear(1, self.hidden), nn.Linear(self.hidden, cfg.n_heads)
        # plain parameters, not nn.Linear modules, so GPT's std init_std init leaves the MLP's init alone
        self.w1, self.b1 = nn.Parameter(first.weight.data[:, 0].clone()), nn.Parameter(first.bias.data.clone())
        self.w2, self.b2 = nn.Parameter(second.weight.data.clone()), nn.Parameter(second.bias.data.clone())
        self.c = nn.Parameter(torch.tensor(0.1))
        self.threshold = nn.Parameter(torch.tensor(float(cfg.max_seq_len)))

    def bias_at(self, distance, q_pos):
        c, threshold = self.c.clamp(min=1e-3), self.threshold.clamp(min=1.0)
        f = self.mlp if torch.is_grad_enabled() else self.segments()
        rows = max(1, self.chunk // (distance[..., :1, :].numel() * self.hidden))
        out = []
        for start in range(0, distance.shape[-2], rows):
            normaliser = torch.log1p(c * torch.maximum(q_pos[..., start:start + rows].float(), threshold))[..., None]
            psi = torch.log1p(c * distance[..., start:start + rows, :].float())
            out.append(f(psi / normaliser))  # (H, [B,] rows, S)
        bias = torch.cat(out, dim=-2)
        return bias if distance.dim() == 2 else bias.transpose(0, 1)

    def mask(self, q_pos, k_pos, consecutive=None):
        if (torch.is_grad_enabled() or torch.compiler.is_compiling() or q_pos.dim() != 1 or k_pos.dim() != 1
                or not both_consecutive(q_pos, k_pos, consecutive)):  # compiled: no read-back below
            return super().mask(q_pos, k_pos, consecutive)
        # evaluation over consecutive positions: each block of rows computes only the keys its last query
        # sees, about half of the T x S pairs at long lengths (the rest stays -inf)
        T, S, rows = len(q_pos), len(k_pos), 256
        seen = int(q_pos[0] - k_pos[0]) + 1  # keys the first query sees
        out = torch.full((self.w2.shape[0], T, S), float("-inf"), device=q_pos.device, dtype=self.w2.dtype)
        for start in range(0, T, rows):
            q, keys = q_pos[start:start + rows], k_pos[:min(S, seen + start + rows - 1)]
            future = (keys[None, :] > q[:, None])
            out[:, start:start + len(q), :len(keys)] = self.score_bias(q, keys).masked_fill(future, float("-inf"))
        return out

    def mlp(self, x):
        return (torch.relu(x[..., None] * self.w1 + self.b1) @ self.w2.T + self.b2).movedim(-1, 0)

    def segments(self):
        """f without its hidden layer, for evaluation: with one input, f is piecewise linear, affine
        between the kinks -b1/w1 of its units, so f(x) = slope[s] x + intercept[s] on segment s. The
        same function as mlp up to float rounding, without a hidden activation per (query, key) pair.
        Every size is fixed (a unit with w1 = 0 has its kink at +inf, past every input), so torch.compile
        traces it without a data-dependent shape."""
        w1, b1 = self.w1, self.b1
        kinks = torch.where(w1 != 0, -b1 / w1, torch.inf).sort().values
        inside = torch.cat([kinks[:1] - 1, (kinks[1:] + kinks[:-1]) / 2, kinks[-1:] + 1])  # +inf past the last kink
        # (segments, hidden): the units on in each segment; a unit without a kink is on everywhere or nowhere
        active = torch.where(w1 != 0, inside[:, None] * w1 + b1 > 0, b1 > 0).to(w1.dtype)
        slope, intercept = (active * w1) @ self.w2.T, (active * b1) @ self.w2.T + self.b2  # (segments, H)

        def f(x):  # (H, *x.shape); one small gather per head beats indexing an (H, segments) table
            s = torch.searchsorted(kinks, x)
            return torch.stack([torch.addcmul(intercept[:, h][s], x, slope[:, h][s]) for h in range(slope.shape[1])])
        return f


class ForgetGate(nn.Module):
    """One layer's forget gate: logit_h = w_h . x + b_h per head, from the layer's input x (plain parameters, so
    GPT's init of every nn.Linear leaves them alone)."""

    def __init__(self, cfg: ModelConfig, bias: torch.Tensor):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(cfg.n_heads, cfg.d_model) * cfg.init_std)
        self.bias = nn.Parameter(bias.clone())

    def forward(self, x):
        return F.linear(x, self.weight, self.bias)  # (B, T, H)


@register("fox")
class FoX(PositionalEncoding):
    """Forgetting Attention, the attention of the Forgetting Transformer (FoX; Lin et al., arXiv 2503.02130;
    reference code github.com/zhixuan-lin/forgetting-transformer): each head h of each layer has a forget gate
    f_t = sigmoid(w_h . x_t + b_h) computed from each token's input x_t to the layer, and the score of query i on
    key j <= i gets
        D_ij = sum_{l=j+1..i} log f_l = c_i - c_j,   c_t = sum_{l<=t} log f_l (the cumulative log forget gate),
    so a key fades by the product of the gates of the tokens after it, 0 for the query itself. Nothing else
    carries position: the paper's FoX uses no positional embedding. The bias goes down the learned biases' path
    (built per layer in layer_context, since it depends on the layer's input): a float mask (B, H, T, S) for SDPA
    on the CPU, or with FlexAttention a score_mod reading c of the query and of the key (no T x S bias in memory).
    A KV cache keeps each key's c (KVCache.update_gates), so decoding one token adds its gate to the last c.
    Positions only order the tokens (the causal mask, a sliding window); c sums over tokens, whatever their
    positions (train.positions changes nothing).

    Init: the reference's data-dependent gate (fgate_type "full") is an nn.Linear whose weights start at std
    initializer_range and its bias at 0 (f = 1/2 at init); its bias init by decay times, b = -log(expm1(1/tau))
    so that -1 / log sigmoid(b) = tau, serves only its data-independent gates. Here the weights start at init_std
    and the bias at that formula with tau_h = 1 / m_h, ALiBi's slopes (alibi_slopes): every gate starts near 1
    (f_h = exp(-m_h), from e^(-1/4) to e^(-1/256) with 4 heads) and, with zero weights, D_ij is ALiBi's
    -m_h (i - j): FoX starts as ALiBi and learns which tokens to forget.

    Left out: the paper's "Pro" block (an output gate, an RMSNorm of each head's output, QK-norm, and the
    data-dependent token shift of keys and values), its pruning of the attention past a decayed key (the Triton
    kernel's adaptive computation pruning) and its kernel. The reference does not support grouped-query
    attention; here each query head has its own gate and reads its key head as the other encodings do. Each layer
    has its own gate, where the repo's other learned biases share one set of parameters across layers."""
    kind = "none"  # no distance is shown: a context method may hide keys or scale queries, not remap distances
    layer_bias = True

    def __init__(self, cfg: ModelConfig):
        super().__init__(cfg)
        bias = -torch.log(torch.expm1(alibi_slopes(cfg.n_heads)))  # sigmoid(b_h) = exp(-m_h)
        self.gates = nn.ModuleDict({str(layer): ForgetGate(cfg, bias)
                                    for layer, on in enumerate(cfg.positional_layers) if on})

    def log_gates(self, layer: int, x: torch.Tensor) -> torch.Tensor:
        """(B, H, T) log f of each token of x (B, T, C) at `layer`, at least float32."""
        logit = self.gates[str(layer)](x)
        return F.logsigmoid(logit.to(torch.promote_types(logit.dtype, torch.float32))).transpose(1, 2)

    def layer_context(self, layer, x, ctx, cache=None):
        c = self.log_gates(layer, x).cumsum(-1)  # (B, H, T): from this forward's first token
        c_q, c_k = (c, c) if cache is None else cache.update_gates(layer, c, ctx.q_pos)  # (B, H, T), (B, H, S)
        if ctx.block_mask is not None:  # FlexAttention (GPT.forward): c read per (query, key)
            return dataclasses.replace(ctx, score_mod=gated_score_mod(ctx.score_mod, c_q, c_k))
        decay = c_q[..., :, None] - c_k[..., None, :]  # (B, H, T, S)
        if ctx.bias is not None:  # keys hidden for every layer: the future, a sliding window, a context method
            return dataclasses.replace(ctx, bias=decay + ctx.bias)
        future = (ctx.k_pos[..., None, :] > ctx.q_pos[..., :, None]).unsqueeze(-3)  # (1, T, S) or (B, 1, T, S)
        return dataclasses.replace(ctx, bias=decay.masked_fill(future, float("-inf")))


def gated_score_mod(base, c_q: torch.Tensor, c_k: torch.Tensor):
    """FoX's bias as a FlexAttention score_mod: c_q[b, h, i] - c_k[b, h, j], after `base` (a score_mod of keys hidden
    for every layer, or None)."""
    def forget(score, b, h, q_idx, kv_idx):
        if base is not None:
            score = base(score, b, h, q_idx, kv_idx)
        return score + (c_q[b, h, q_idx] - c_k[b, h, kv_idx])
    return forget


def with_original_length(cfg: ModelConfig):
    """The model's RoPE scaling with original_max_position_embeddings filled in (max_seq_len when unset)."""
    scaling = cfg.position.scaling
    if scaling is None or scaling.original_max_position_embeddings is not None:
        return scaling
    return dataclasses.replace(scaling, original_max_position_embeddings=cfg.max_seq_len)


def scaled_layers(cfg: ModelConfig) -> str:
    """Which layers model.position.scaling acts on: global (the full_attention layers of model.layer_types) or all, as
    its `layers` says, else global for a model with layer_types (Gemma 3 rescales only its global layers' RoPE) and all
    otherwise. A UserError where it asks for layers the model lacks: checked with the config, and again by GPT for a
    scaling given at load time."""
    scaling, types = cfg.position.scaling, cfg.layer_types or []
    layers = (scaling.layers if scaling else None) or ("global" if types else "all")
    if scaling is not None and layers == "global" and "full_attention" not in types:
        lacks = "sets no model.layer_types" if not types else "has no full_attention layer in model.layer_types"
        raise UserError(f"model.position.scaling.layers: global means the full_attention layers, and this model "
                        f"{lacks}; give layers: all")
    return layers


def check(cfg: ModelConfig) -> None:
    """The position section against the registries, once, where a model config is parsed (train.resolve,
    checkpoint.model_config): a known encoding, for rope an even number of rotated dimensions and a valid scaling, and
    a layer pattern only for an encoding that acts inside attention.
    A UserError naming the key otherwise. The shapes and ranges are ModelConfig.validate's."""
    if cfg.position.type not in ENCODINGS:
        raise UserError(f"model.position.type: unknown encoding {cfg.position.type!r}; "
                        f"choose one of {', '.join(sorted(ENCODINGS))}")
    if cfg.position.type == "rope":
        rotated = cfg.head_dim * cfg.position.rotary_fraction
        if rotated != rotary_dims(cfg) or rotary_dims(cfg) % 2 or rotary_dims(cfg) < 2:
            raise UserError(f"model.position.type=rope needs an even head dimension to rotate, got "
                            f"d_model/n_heads x rotary_fraction = {cfg.head_dim} x "
                            f"{cfg.position.rotary_fraction:g} = {rotated:g}")
        if rotated_pairs(cfg) < 1:
            raise UserError(f"model.position.kept_frequencies={cfg.position.kept_frequencies:g} keeps no frequency of "
                            f"the {rotary_dims(cfg) // 2} a head has")
    check_scaling(cfg.position.scaling, "model.position.scaling")
    scaled_layers(cfg)
    if cfg.position.layer_pattern is not None and ENCODINGS[cfg.position.type].kind == "absolute":
        raise UserError(f"model.position.layer_pattern applies an encoding per layer, and {cfg.position.type} adds its "
                        f"positions to the tokens, before every layer; use it with "
                        f"{', '.join(n for n, c in ENCODINGS.items() if c.kind != 'absolute' and n != 'nope')}")


def build_position(cfg: ModelConfig) -> PositionalEncoding:
    """The encoding of a parsed (checked) model config."""
    return ENCODINGS[cfg.position.type](cfg)
