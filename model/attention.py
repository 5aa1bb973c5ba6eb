"""Causal grouped-query attention with pluggable position hooks and a KV cache.

Backends, chosen per call, all computing softmax(q k^T * scale + bias + causal mask) v:
  - FlexAttention with the encoding's `score_mod` where GPT.use_flex_attention is on (CUDA: ALiBi
    without a T x T bias in memory), its block mask and score_mod built once per forward (`ctx`);
  - otherwise SDPA: with a learned bias (t5, kerple, fire), its float mask built once per forward
    (`ctx.bias`, -inf on future keys and on keys past a sliding window; fox's built per layer); else with a bias
    folded into q and k (ALiBi,
    `PositionalEncoding.fold`) and `is_causal` (flash / memory-efficient kernels) when queries and
    keys are the same tokens, else a boolean causal mask from their positions (chunked prefill,
    decoding, the slots of a static KV cache), on the CPU a block of queries at a time for long chunks;
  - a sliding window on scores without a bias (RoPE, NoPE: `ctx.window`), `windowed_attention`: SDPA over blocks of
    queries, each reading only the keys inside its window, O(T x window) where a (T, S) mask costs T x S (with
    FlexAttention and positions that are indices, its block mask skips the blocks past the window instead);
  - under a context method that shows RoPE's far pairs another distance (model/context.py), `merged_attention`:
    the scores of q and k rotated at their own positions and of q and k rotated at the method's, one picked per
    pair before one softmax, in one SDPA call per block of queries over the keys it sees (a score bias under a
    context method is a float mask, as for the learned biases).
"""
from __future__ import annotations

import functools

import torch
import torch.nn as nn
import torch.nn.functional as F

from config import ModelConfig

from .positions import PositionalEncoding, PositionContext


# The position of an empty slot of a static cache: after every query, so that every causal mask hides it.
EMPTY = 2 ** 31 - 1
MIN_SLOTS = 256  # slots a cache of unknown capacity allocates first (a full cache doubles)


class KVCache:
    """Keys and values of the tokens seen so far, per layer, with their absolute positions, in buffers
    allocated ahead and written by index. Keys are stored rotated, so a decoding step rotates only its own
    token, except for a dynamic RoPE scaling (`pe.dynamic`), whose keys are stored BEFORE rotation and
    re-rotated with the frequencies of the current length, and a context method's second rotation of every
    key (ctx.rotate_keys). Beside them, for fox, each key's cumulative log forget gate (`update_gates`).

    One storage, addressed two ways:
    - by the host (the default): the cache counts its tokens in Python, a forward writes after them and
      attention reads the filled part, so shapes follow the length; a full buffer grows by doubling (no
      copy of the whole cache per token, as concatenating would). `trim(n)` keeps the last n tokens: a
      sliding window whose positions stay absolute (`trim(n, first)` also the first tokens: attention
      sinks). Sequences may have their own positions, (B, S).
    - static (`make_static()`, after a prefill addressed by the host): every buffer keeps its shape, a
      token's slot is its position, the next position lives on the device, and attention reads every
      slot, the empty ones at position EMPTY (after any query, so the causal masks hide them). A decoding
      step then has the same shapes at every token and reads nothing back: compiled, it is one graph for
      every token, which CUDA graphs can replay (the buffers are static addresses).
    Rolling (host addressing), the layers with a sliding window keep their keys in a cache of their own that drops
    those the window no longer reaches (`for_window`, `roll`); `trim` and `rewind` act on both.
    """

    def __init__(self, n_layers: int, capacity: int | None = None, rolling: bool = False):
        self.keys: list[torch.Tensor | None] = [None] * n_layers  # (B, nkv, capacity, hs)
        self.values: list[torch.Tensor | None] = [None] * n_layers
        self.gates: list[torch.Tensor | None] = [None] * n_layers  # fox: (B, H, capacity) float, see update_gates
        self.slots: torch.Tensor | None = None  # (capacity,) or (B, capacity) positions of the slots
        self.capacity = capacity  # slots to allocate at the first write (None: MIN_SLOTS, or what it needs)
        self.length = 0  # filled slots (host addressing)
        # the next position as a Python int while every sequence shares its positions (None otherwise),
        # so that a decoding step needs no read-back from the device
        self.next_position: int | None = 0
        self.static = False
        self.window: int | None = None  # static: keys this far back or more are hidden (a sliding window)
        self.upcoming: torch.Tensor | None = None  # static: (1,) the next position, on the device
        # rolling: the layers with a sliding window keep their keys apart (`for_window`), only those it still reaches
        self.rolling = rolling
        self.windowed: dict[int, KVCache] = {}  # window -> the cache of the layers with that window
        self.rolled = False  # a window's cache: keys it no longer reaches were dropped

    def __len__(self) -> int:
        return self.length

    @property
    def positions(self) -> torch.Tensor | None:
        """(S,) or (B, S) absolute positions of the cached tokens (every slot of a static cache)."""
        if self.slots is None or self.static:
            return self.slots
        return self.slots[..., :self.length]

    def next_positions(self, T: int) -> torch.Tensor:
        """Static: the positions of the next T tokens, on the device."""
        return self.upcoming + torch.arange(T, device=self.upcoming.device)

    def for_window(self, window: int | None) -> KVCache:
        """The cache of the layers that hide keys `window` or more positions back: this one, or, rolling, one of their
        own that holds between window - 1 and 2 * window keys before each forward's new ones (Gemma 3's 15 sliding
        layers of 512 at 32k tokens: 2 MB of keys each instead of 64 MB). Every forward extends both."""
        if window is None or not self.rolling:
            return self
        if window not in self.windowed:
            if self.length:
                raise ValueError("a rolling cache sets its layers' windows at its first forward")
            self.windowed[window] = KVCache(len(self.keys), self.capacity)
        return self.windowed[window]

    def roll(self, window: int) -> None:
        """A window's cache, before a forward: past 2 * window keys, keep the last window - 1 (what the next token
        reaches) and shrink buffers grown far past that (a long prefill's)."""
        if self.length < 2 * window:
            return
        self.trim(window - 1)
        self.rolled = True
        size = 2 * window
        if self.slots.shape[-1] > 2 * size:
            self.slots = self.slots[..., :size].clone()
            for buffers in (self.keys, self.values, self.gates):
                for i, buffer in enumerate(buffers):
                    if buffer is not None:
                        buffers[i] = buffer[:, :, :size].clone()

    def extend(self, positions: torch.Tensor, end: int | torch.Tensor) -> torch.Tensor:
        """Add the positions of the tokens of this forward pass (once, before the layers), `end` their
        largest + 1; returns the positions of every key attention reads."""
        if self.static:
            self.slots[positions] = positions  # index_put_: the slot of a token is its position
            self.upcoming.copy_(positions[-1:] + 1)
            if self.window is None:
                return self.slots
            return torch.where(self.slots > positions[0] - self.window, self.slots, EMPTY)
        T, n = positions.shape[-1], self.length
        if self.slots is None or n + T > self.slots.shape[-1]:
            like = positions if self.slots is None or positions.dim() >= self.slots.dim() else self.slots
            self.slots = grown(self.slots, n, max(n + T, self.capacity or MIN_SLOTS), EMPTY, like)
        if positions.dim() > self.slots.dim():  # (S,) cache, (B, T) new
            self.slots = self.slots.expand(*positions.shape[:-1], -1).clone()
        self.slots[..., n:n + T] = positions
        self.length = n + T
        self.next_position = end if self.slots.dim() == 1 else None
        return self.slots[..., :self.length]

    def update(self, layer: int, k: torch.Tensor, v: torch.Tensor, positions: torch.Tensor):
        """Write this forward's keys and values (B, nkv, T, hs) of one layer, of the tokens at `positions`
        (T,) (their slots, static); returns every key and value attention reads."""
        if self.static:
            self.keys[layer][:, :, positions] = k  # index_put_, in place
            self.values[layer][:, :, positions] = v
            return self.keys[layer], self.values[layer]
        n, end, capacity = self.length - k.shape[-2], self.length, self.slots.shape[-1]
        if self.keys[layer] is None or self.keys[layer].shape[-2] < capacity:
            self.keys[layer] = grown(self.keys[layer], n, capacity, 0, k, dim=-2)
            self.values[layer] = grown(self.values[layer], n, capacity, 0, v, dim=-2)
        self.keys[layer][:, :, n:end] = k
        self.values[layer][:, :, n:end] = v
        return self.keys[layer][:, :, :end], self.values[layer][:, :, :end]

    def update_gates(self, layer: int, c: torch.Tensor, positions: torch.Tensor):
        """FoX (model/positions.py): c (B, H, T) are this forward's cumulative log forget gates, summed from its first
        token; stored summed from the first token the cache saw (the last cached token's sum added), in the slots of
        this forward's tokens at `positions` (T,). Returns those of the new tokens (B, H, T) and those of every key
        attention reads (B, H, S). Only differences of sums are used, so a trimmed cache keeps its sums."""
        if self.static:  # a static cache continues a prefill: the token before the first new one has a slot
            gates = self.gates[layer]
            c = c + gates[:, :, (positions[:1] - 1).clamp(min=0)] * (positions[:1] > 0)
            gates[:, :, positions] = c  # index_put_, in place
            return c, gates
        n, end, capacity = self.length - c.shape[-1], self.length, self.slots.shape[-1]
        if self.gates[layer] is None or self.gates[layer].shape[-1] < capacity:
            self.gates[layer] = grown(self.gates[layer], n, capacity, 0.0, c)
        if n:
            c = c + self.gates[layer][:, :, n - 1:n]
        self.gates[layer][:, :, n:end] = c
        return c, self.gates[layer][:, :, :end]

    def trim(self, n: int, first: int = 0) -> None:
        """Keep the last n tokens, after the first `first` (host addressing)."""
        if self.static:
            raise ValueError("a static cache is not trimmed: make_static(window=...) hides the old keys instead")
        for cache in self.windowed.values():  # first tokens it keeps past its window stay hidden by it
            cache.trim(n, first)
        if len(self) > first + n:
            kept, to = slice(self.length - n, self.length), slice(first, first + n)
            for buffer in (*self.keys, *self.values, *self.gates):  # the slots are dim 2 of each
                if buffer is not None:
                    buffer[:, :, to] = buffer[:, :, kept].clone()
            self.slots[..., to] = self.slots[..., kept].clone()
            self.length = first + n

    def rewind(self, n: int) -> None:
        """Forget every token after the first n (host addressing, shared positions 0, 1, ...): the next forward
        continues at position n, overwriting their slots (eval.passkey's trials continue one shared prefix)."""
        if self.static or self.next_position != self.length or n > self.length:
            raise ValueError("rewind takes a host-addressed cache of positions 0, 1, ... back to a length it had")
        if any(cache.rolled for cache in self.windowed.values()):
            raise ValueError("a rolling cache has dropped the keys a rewind would need: make it with rolling=False")
        for cache in self.windowed.values():
            cache.rewind(n)
        self.length = self.next_position = n

    def make_static(self, window: int | None = None) -> None:
        """Address the cache statically from now on (see the class): after a prefill of shared positions
        0, 1, ... (so that each slot holds its own position); its capacity is then fixed. `window`: each
        new token reads only the keys less than `window` positions back (trim's sliding window, by mask)."""
        if self.slots is None or self.slots.dim() != 1 or self.next_position != self.length:
            raise ValueError("a static cache continues a prefill of the shared positions 0, 1, ...")
        if self.windowed:
            raise ValueError("a rolling cache is addressed by the host: make a static one with rolling=False")
        self.static, self.window, self.capacity = True, window, self.slots.shape[-1]
        self.upcoming = torch.full((1,), self.length, device=self.slots.device)
        self.next_position = None
        for buffer in (*self.keys, *self.values, *self.gates, self.slots, self.upcoming):
            if buffer is not None:  # gates: fox's layers only
                torch._dynamo.mark_static_address(buffer)


def grown(buffer: torch.Tensor | None, filled: int, size: int, fill, like: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """A buffer of `size` slots along `dim` shaped and typed like `like` there, holding the first `filled`
    slots of `buffer` (None: none) and `fill` in the rest; at least double the old size."""
    if buffer is not None:
        size = max(size, 2 * buffer.shape[dim])
    shape = list(like.shape)
    shape[dim] = size
    out = torch.full(shape, fill, dtype=like.dtype, device=like.device)
    if buffer is not None and filled:
        out.narrow(dim, 0, filled).copy_(buffer.narrow(dim, 0, filled))
    return out


_flex_kernels: dict = {}  # device type -> the flex_attention that eager calls use


def compiled_flex(device_type: str):
    """FlexAttention for eager calls on one device type, built once per process and never inside a
    traced region (compiled lazily inside a `torch.compile(model)` trace it would stay eager). On CUDA
    compiled with dynamic shapes, so new lengths (every multiple of L, a KV cache growing by one key per
    decoded token) reuse its kernels. Elsewhere eager: with torch 2.13 the CPU's compiled flex gave
    wrong scores when decoding at some key lengths with dynamic shapes and failed to build with a
    captured bias, and the CPU path is only for tests (SDPA serves the CPU)."""
    if device_type not in _flex_kernels:
        from torch.nn.attention.flex_attention import flex_attention
        _flex_kernels[device_type] = (torch.compile(flex_attention, dynamic=True) if device_type == "cuda"
                                      else flex_attention)
    return _flex_kernels[device_type]


@functools.lru_cache(maxsize=64)
def causal_block_mask(T: int, S: int, device: torch.device, window: int | None = None):
    """FlexAttention's block mask for queries at positions S-T .. S-1 over keys 0 .. S-1, built once per
    shape (building it launches work on the device); with a sliding `window`, only the keys less than `window`
    back, so the blocks past it are skipped (GPT.forward passes it where the positions are these indices; the
    score_mod hides the keys past the window by position in any case). Built by GPT.forward before the layers,
    through torch.compiler.disable (GPT.use_flex_attention): traced inside a compiled model, its creation and
    caching would break the guards and recompile the model."""
    from torch.nn.attention.flex_attention import create_block_mask
    offset = S - T

    def causal(b, h, q_idx, kv_idx):
        return q_idx + offset >= kv_idx

    def sliding(b, h, q_idx, kv_idx):
        return (q_idx + offset >= kv_idx) & (q_idx + offset - kv_idx < window)
    return create_block_mask(causal if window is None else sliding, None, None, T, S, device=device)


# A score_mod that reads a bias table (the learned biases: table_score_mod) loads a tile of the table with
# each block of keys. At inductor's default blocks on sm90 for bf16 and head size 64 (128 queries x 128 keys,
# 3 stages) the compiled forward asked for 240 KiB of shared memory on an H200 (torch 2.11), past the 227 KiB
# a block may have, and t5 did not compile; blocks of 64 keys halve the tiles.
TABLE_KERNEL_OPTIONS = {"fwd_BLOCK_N": 64}


def flex_attention(q, k, v, ctx: PositionContext, scale: float):
    """Causal FlexAttention with the encoding's score_mod. Inside a compiled model the plain function
    (the model's compile traces it); called eagerly, compiled_flex (eager flex on CUDA would
    materialise the T x S scores)."""
    if torch.compiler.is_compiling():
        from torch.nn.attention.flex_attention import flex_attention as flex
    else:
        flex = compiled_flex(q.device.type)
    options = TABLE_KERNEL_OPTIONS if ctx.bias is not None and q.is_cuda else None
    return flex(q, k, v, score_mod=ctx.score_mod, block_mask=ctx.block_mask, scale=scale,
                enable_gqa=k.shape[1] != q.shape[1], kernel_options=options)


def causal_mask(q_pos: torch.Tensor, k_pos: torch.Tensor, window: int | None = None) -> torch.Tensor:
    """True where a query may see a key: (T, S), or (B, 1, T, S) for per-sequence positions; with a sliding
    `window`, only the keys less than `window` positions back."""
    mask = k_pos[..., None, :] <= q_pos[..., :, None]
    if window is not None:
        mask &= k_pos[..., None, :] > q_pos[..., :, None] - window
    return mask if mask.dim() == 2 else mask[:, None]


QUERY_BLOCK = 512  # query rows per SDPA call of attention_in_query_blocks


def attention_in_query_blocks(q, k, v, q_pos: torch.Tensor, k_pos: torch.Tensor, scale: float, gqa: bool
                              ) -> torch.Tensor:
    """Causal SDPA over T queries after S - T cached keys, QUERY_BLOCK query rows at a time, each block with its own
    mask over only the keys up to the last one its queries see. The CPU kernel computes every score a mask covers,
    hidden or not, so in one call T queries (a passkey prompt after its shared prefix, a chunked prefill) cost all
    T x S scores, twice the causal half where S - T is small, and the (T, S) mask itself; in blocks they cost the
    causal part and half a block's square each. A row's numbers are the same: the keys a block leaves out are hidden
    from all its queries."""
    T, S = q.shape[-2], k.shape[-2]
    out = []
    for a in range(0, T, QUERY_BLOCK):
        block = q_pos[..., a:a + QUERY_BLOCK]
        n = int((k_pos <= block.max()).reshape(-1, S).any(0).nonzero().max()) + 1  # a query sees its own key
        out.append(F.scaled_dot_product_attention(q[..., a:a + QUERY_BLOCK, :], k[..., :n, :], v[..., :n, :],
                                                  attn_mask=causal_mask(block, k_pos[..., :n]), scale=scale,
                                                  enable_gqa=gqa))
    return torch.cat(out, dim=-2)


def window_blocks(q_pos: torch.Tensor, k_pos: torch.Tensor, window: int, consecutive: bool | None
                  ) -> list[tuple[int, int, int, int]]:
    """(first query, end of the queries, first key, end of the keys) of each block of queries that windowed_attention
    runs: a block reads the keys from its earliest query's position - window + 1 to its latest query's position. By
    index where queries and keys are the same consecutive positions (`consecutive`, as GPT.place knows it: nothing
    read back), else found in k_pos with one read-back for every block (between the first and the last key index
    whose position is in the range, so positions need not be sorted). Blocks of window / 2 queries (64 to
    QUERY_BLOCK) read at most 1.5 x window keys each, from window 128 up."""
    T, S = q_pos.shape[-1], k_pos.shape[-1]
    rows = min(QUERY_BLOCK, max(64, window // 2))
    starts = range(0, T, rows)
    if consecutive:  # query t is key t + S - T
        return [(a, min(a + rows, T), max(0, a + S - T - window + 1), min(a + rows, T) + S - T) for a in starts]
    first = torch.stack([q_pos[..., a:a + rows].amin(-1) for a in starts], -1) - window + 1  # (n,) or (B, n)
    last = torch.stack([q_pos[..., a:a + rows].amax(-1) for a in starts], -1)
    key = k_pos[..., None, :]  # (1, S) or (B, 1, S)
    read = ((key >= first[..., None]) & (key <= last[..., None])).reshape(-1, len(starts), S).any(0)  # (n, S)
    index = torch.arange(S, device=k_pos.device)
    spans = torch.stack([torch.where(read, index, S).amin(-1), torch.where(read, index, -1).amax(-1) + 1], -1)
    return [(a, min(a + rows, T), start, end) for a, (start, end) in zip(starts, spans.tolist())]


def windowed_attention(q, k, v, ctx: PositionContext, scale: float, gqa: bool, dropout: float = 0.0) -> torch.Tensor:
    """Causal attention over a sliding window of ctx.window positions at O(T x window) cost: each block of queries
    (ctx.window_blocks) reads only its span of keys, masked at the causal and the window edges inside it, where SDPA
    with the (T, S) mask would score every pair. The same numbers: the keys a block leaves out are hidden from all
    its queries. A decoding step reads the last `window` keys of the cache, a slice."""
    out = []
    for a, b, start, end in ctx.window_blocks:
        mask = causal_mask(ctx.q_pos[..., a:b], ctx.k_pos[..., start:end], ctx.window)
        out.append(F.scaled_dot_product_attention(q[..., a:b, :], k[..., start:end, :], v[..., start:end, :],
                                                  attn_mask=mask, dropout_p=dropout, scale=scale, enable_gqa=gqa))
    return out[0] if len(out) == 1 else torch.cat(out, dim=-2)


def per_query_attention(q, k, v, ctx: PositionContext, scale: float, rotate):
    """Causal attention where each query reads its own rotation of the keys: a dynamic RoPE scaling decoding a
    chunk (Rope.chunk_context), k (B, nkv, S, hs) not yet rotated and rotate(k, rotor) turning it by one query's
    row of ctx.key_rotors. One query at a time: the (B, nkv, T, S, hs) keys of all T rotations at once are T
    times the cache, and scoring them was slower (studies/bench/history.md). Query
    head h reads key head h // (H / nkv), as SDPA's enable_gqa."""
    q = q.float().unflatten(1, (k.shape[1], -1))  # (B, nkv, H / nkv, T, hs)
    scores = torch.stack([q[:, :, :, t] @ rotate(k, rotor).float().mT for t, rotor in enumerate(ctx.key_rotors)],
                         dim=3) * scale  # (B, nkv, H / nkv, T, S)
    if ctx.bias is not None:  # (1, T, S): -inf on future keys and on those past a sliding window
        scores = scores + ctx.bias
    else:
        scores = scores.masked_fill(~causal_mask(ctx.q_pos, ctx.k_pos), float("-inf"))
    y = torch.einsum("bngts,bnsd->bngtd", scores.softmax(-1), v.float())
    return y.flatten(1, 2).to(v.dtype)


def merged_attention(q, k, far_q, far_k, v, use_far, mask, scale: float):
    """Attention whose score for each (query, key) pair comes from one of two passes: q and k rotated at their
    own positions, or far_q and far_k rotated at those a context method shows far pairs (Self-Extend's groups,
    ReRoPE's window ...), picked by use_far (T, S), then one softmax over the row; mask (1, T, S) holds -inf on
    future and hidden keys. One SDPA call for each block of QUERY_BLOCK query rows, over only the keys a row of the
    block sees (a sliding window and its sinks are O(T x window)): q and far_q side by side as one head of twice the
    width, a key scored near as (k, 0) and one scored far as (0, far_k), so that a column's score is q k or
    far_q far_k, and a key that some rows score near and others far is two columns, the mask keeping each row's.
    The fused kernel beats scoring the two passes by hand (3.6x for sinks at 16k on a CPU, studies/bench/history.md)."""
    T, hs = q.shape[-2], q.shape[-1]
    gqa = k.shape[1] != q.shape[1]
    seen = mask[0] > float("-inf")
    both = torch.cat([q, far_q.to(q.dtype)], dim=-1)  # (B, H, T, 2 hs)
    out = []
    for a in range(0, T, QUERY_BLOCK):
        b = min(T, a + QUERY_BLOCK)
        far = use_far[a:b] & seen[a:b]
        near = ~use_far[a:b] & seen[a:b]
        near_keys, far_keys = near.any(0).nonzero()[:, 0], far.any(0).nonzero()[:, 0]
        if not len(far_keys):
            part = (q[..., a:b, :], k[..., near_keys, :], v[..., near_keys, :], near[:, near_keys])
        elif not len(near_keys):
            part = (far_q[..., a:b, :].to(q.dtype), far_k[..., far_keys, :].to(k.dtype), v[..., far_keys, :],
                    far[:, far_keys])
        else:
            keys = torch.cat([F.pad(k[..., near_keys, :], (0, hs)),
                              F.pad(far_k[..., far_keys, :].to(k.dtype), (hs, 0))], dim=-2)
            values = F.pad(v[..., torch.cat([near_keys, far_keys]), :], (0, hs))  # one head size: SDPA's fast kernel
            part = (both[..., a:b, :], keys, values, torch.cat([near[:, near_keys], far[:, far_keys]], dim=-1))
        y = F.scaled_dot_product_attention(*part[:3], attn_mask=part[3], scale=scale, enable_gqa=gqa)
        out.append(y[..., :hs])
    return torch.cat(out, dim=-2)  # (B, H, T, hs)


class Attention(nn.Module):
    def __init__(self, cfg: ModelConfig, layer: int):
        super().__init__()
        self.layer, self.n_heads, self.n_kv_heads, self.head_dim = layer, cfg.n_heads, cfg.n_kv_heads, cfg.head_dim
        self.attention_scalar = cfg.attention_scalar  # None: scores scaled by head_dim ** -0.5
        # q/k/v biases are an option for pretrained checkpoints that have them (Qwen2)
        self.q_proj = nn.Linear(cfg.d_model, cfg.n_heads * cfg.head_dim, bias=cfg.qkv_bias)
        self.k_proj = nn.Linear(cfg.d_model, cfg.n_kv_heads * cfg.head_dim, bias=cfg.qkv_bias)
        self.v_proj = nn.Linear(cfg.d_model, cfg.n_kv_heads * cfg.head_dim, bias=cfg.qkv_bias)
        self.o_proj = nn.Linear(cfg.n_heads * cfg.head_dim, cfg.d_model, bias=False)
        self.dropout = cfg.dropout

    def project(self, x):
        """q (B, nh, T, hs), k and v (B, nkv, T, hs) of x (B, T, C), before any position is applied."""
        B, T, _ = x.shape
        q = self.q_proj(x).view(B, T, self.n_heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(B, T, self.n_kv_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(B, T, self.n_kv_heads, self.head_dim).transpose(1, 2)
        return q, k, v

    def forward(self, x, ctx: PositionContext, pe: PositionalEncoding, cache: KVCache | None = None):
        B, T, _ = x.shape
        q, k, v = self.project(x)
        if cache is not None and ctx.rotate_keys:
            k, v = cache.update(self.layer, k, v, ctx.q_pos)  # (B, nkv, S, hs) before rotation, S = cached + T
        far = None if ctx.far is None else pe.rotate(q, k, ctx.far)  # a context method's second rotation
        q, k = pe.rotate(q, k, ctx)
        if cache is not None and not ctx.rotate_keys:
            k, v = cache.update(self.layer, k, v, ctx.q_pos)
        y = self.attend(q, k, v, ctx, pe, far)  # (B, nh, T, hs)
        return self.o_proj(y.transpose(1, 2).reshape(B, T, -1))

    def attend(self, q, k, v, ctx: PositionContext, pe: PositionalEncoding, far=None):
        T, S, hs = q.shape[-2], k.shape[-2], v.shape[-1]
        gqa = self.n_kv_heads != self.n_heads
        dropout = self.dropout if self.training else 0.0
        scale = (self.attention_scalar or self.head_dim) ** -0.5  # attention_scalar: Gemma's query_pre_attn_scalar
        if ctx.q_scale is not None:  # log-n, Llama 4's temperature: each query row times its factor, before any bias
            factor = ctx.q_scale.to(q.dtype)[..., None, :, None]  # (1, T, 1), or (B, 1, T, 1): per-sequence positions
            q, far = q * factor, None if far is None else (far[0] * factor, far[1])
        if ctx.key_rotors is not None:
            return per_query_attention(q, k, v, ctx, scale, pe.rotate_part)
        if far is not None:
            return merged_attention(q, k, *far, v, ctx.use_far, ctx.bias, scale)
        if ctx.block_mask is not None and dropout == 0.0:  # GPT.forward set FlexAttention up
            return flex_attention(q, k, v, ctx, scale)
        if ctx.bias is not None:
            # (1 or B, H, T, S): a 3-D mask sends the CPU kernel down a path 4x slower
            bias = ctx.bias if ctx.bias.dim() == 4 else ctx.bias[None]
            return F.scaled_dot_product_attention(q, k, v, attn_mask=bias.to(q.dtype), dropout_p=dropout,
                                                  scale=scale, enable_gqa=gqa)
        if ctx.window is not None:  # a sliding window on scores without a bias (GPT.shared_context)
            return windowed_attention(q, k, v, ctx, scale, gqa, dropout)
        dtype = q.dtype
        q, k = pe.fold(q, k, ctx, scale)  # ALiBi: its bias as one more dimension of q and k
        if k.shape[-1] != hs:
            v = F.pad(v.to(k.dtype), (0, k.shape[-1] - hs))  # SDPA wants one head size; the pad is cut below
        if T != S and T > QUERY_BLOCK and q.device.type == "cpu":
            y = attention_in_query_blocks(q, k, v, ctx.q_pos, ctx.k_pos, scale, gqa)
        else:
            mask = None if T == S else causal_mask(ctx.q_pos, ctx.k_pos)  # queries are the last T
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=mask is None, dropout_p=dropout,
                                               scale=scale, enable_gqa=gqa)
        return y[..., :hs].to(dtype)
