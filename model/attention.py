"""Causal grouped-query attention with pluggable position hooks and a KV cache.

Backends, chosen per call, all computing softmax(q k^T * scale + bias + causal mask) v:
  - FlexAttention with the encoding's `score_mod` where GPT.use_flex_attention is on (CUDA: ALiBi
    without a T x T bias in memory), its block mask and score_mod built once per forward (`ctx`);
  - otherwise SDPA: with a learned bias (t5, kerple, fire), its float mask built once per forward
    (`ctx.bias`, -inf on future keys); else with a bias folded into q and k (ALiBi,
    `PositionalEncoding.fold`) and `is_causal` (flash / memory-efficient kernels) when queries and
    keys are the same tokens, a boolean causal mask when queries are the last T of S keys (chunked
    prefill, decoding).
"""
from __future__ import annotations

import functools

import torch
import torch.nn as nn
import torch.nn.functional as F

from config import ModelConfig

from .positions import PositionalEncoding, PositionContext


class KVCache:
    """Keys and values of the tokens seen so far, per layer, with their absolute positions. Keys are
    stored rotated, so a decoding step rotates only its own token, except for a dynamic RoPE scaling
    (`pe.dynamic`), whose keys are stored BEFORE rotation and re-rotated with the frequencies of the
    current length. `trim(n)` keeps the last n tokens: a sliding window whose positions stay absolute."""

    def __init__(self, n_layers: int):
        self.keys: list[torch.Tensor | None] = [None] * n_layers
        self.values: list[torch.Tensor | None] = [None] * n_layers
        self.positions: torch.Tensor | None = None  # (S,) or (B, S) absolute positions of the cached tokens
        # the next position as a Python int while every sequence shares its positions (None otherwise),
        # so that a decoding step needs no read-back from the device
        self.next_position: int | None = 0

    def __len__(self) -> int:
        return 0 if self.positions is None else self.positions.shape[-1]

    def extend(self, positions: torch.Tensor, end: int) -> torch.Tensor:
        """Add the positions of the tokens of this forward pass (once, before the layers), `end` their
        largest + 1; returns all."""
        if self.positions is not None and self.positions.dim() != positions.dim():  # (S,) cache, (B, T) new
            self.positions = self.positions.expand(*positions.shape[:-1], -1)
        self.positions = positions if self.positions is None else torch.cat([self.positions, positions], dim=-1)
        self.next_position = end if self.positions.dim() == 1 else None
        return self.positions

    def update(self, layer: int, k: torch.Tensor, v: torch.Tensor):
        if self.keys[layer] is not None:
            k = torch.cat([self.keys[layer], k], dim=-2)
            v = torch.cat([self.values[layer], v], dim=-2)
        self.keys[layer], self.values[layer] = k, v
        return k, v

    def trim(self, n: int) -> None:
        if len(self) > n:
            self.keys = [k[..., -n:, :] for k in self.keys]
            self.values = [v[..., -n:, :] for v in self.values]
            self.positions = self.positions[..., -n:]


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


@torch.compiler.disable  # under torch.compile(model): one graph break per forward, never a trace
@functools.lru_cache(maxsize=64)
def causal_block_mask(T: int, S: int, device: torch.device):
    """FlexAttention's block mask for queries at positions S-T .. S-1 over keys 0 .. S-1, built once per
    shape (building it launches work on the device). Built by GPT.forward before the layers: traced
    inside a compiled model, its creation and caching would break the guards and recompile the model."""
    from torch.nn.attention.flex_attention import create_block_mask
    offset = S - T

    def causal(b, h, q_idx, kv_idx):
        return q_idx + offset >= kv_idx
    return create_block_mask(causal, None, None, T, S, device=device)


def flex_attention(q, k, v, ctx: PositionContext, scale: float):
    """Causal FlexAttention with the encoding's score_mod. Inside a compiled model the plain function
    (the model's compile traces it); called eagerly, compiled_flex (eager flex on CUDA would
    materialise the T x S scores)."""
    if torch.compiler.is_compiling():
        from torch.nn.attention.flex_attention import flex_attention as flex
    else:
        flex = compiled_flex(q.device.type)
    return flex(q, k, v, score_mod=ctx.score_mod, block_mask=ctx.block_mask, scale=scale,
                enable_gqa=k.shape[1] != q.shape[1])


def causal_mask(q_pos: torch.Tensor, k_pos: torch.Tensor) -> torch.Tensor:
    """True where a query may see a key: (T, S), or (B, 1, T, S) for per-sequence positions."""
    mask = k_pos[..., None, :] <= q_pos[..., :, None]
    return mask if mask.dim() == 2 else mask[:, None]


def per_query_attention(q, k, v, ctx: PositionContext, scale: float):
    """Causal attention where each query reads its own rotation of the keys, k (B, nkv, T, S, d): a
    dynamic RoPE scaling decoding a chunk (Rope.chunk_context). Query head h reads key head h // (H / nkv),
    as SDPA's enable_gqa."""
    q = q.unflatten(1, (k.shape[1], -1))  # (B, nkv, H / nkv, T, d)
    scores = torch.einsum("bngtd,bntsd->bngts", q.float(), k.float()) * scale
    scores = scores.masked_fill(~causal_mask(ctx.q_pos, ctx.k_pos), float("-inf"))
    y = torch.einsum("bngts,bnsd->bngtd", scores.softmax(-1), v.float())
    return y.flatten(1, 2).to(v.dtype)


class Attention(nn.Module):
    def __init__(self, cfg: ModelConfig, layer: int):
        super().__init__()
        self.layer, self.n_heads, self.n_kv_heads, self.head_dim = layer, cfg.n_heads, cfg.n_kv_heads, cfg.head_dim
        self.q_proj = nn.Linear(cfg.d_model, cfg.n_heads * cfg.head_dim, bias=False)
        self.k_proj = nn.Linear(cfg.d_model, cfg.n_kv_heads * cfg.head_dim, bias=False)
        self.v_proj = nn.Linear(cfg.d_model, cfg.n_kv_heads * cfg.head_dim, bias=False)
        self.o_proj = nn.Linear(cfg.n_heads * cfg.head_dim, cfg.d_model, bias=False)
        self.dropout = cfg.dropout

    def forward(self, x, ctx: PositionContext, pe: PositionalEncoding, cache: KVCache | None = None):
        B, T, _ = x.shape
        q = self.q_proj(x).view(B, T, self.n_heads, self.head_dim).transpose(1, 2)     # (B, nh, T, hs)
        k = self.k_proj(x).view(B, T, self.n_kv_heads, self.head_dim).transpose(1, 2)  # (B, nkv, T, hs)
        v = self.v_proj(x).view(B, T, self.n_kv_heads, self.head_dim).transpose(1, 2)
        if cache is not None and pe.dynamic:
            k, v = cache.update(self.layer, k, v)  # (B, nkv, S, hs) before rotation, S = cached + T
            q, k = pe.rotate(q, k, ctx)
        else:
            q, k = pe.rotate(q, k, ctx)
            if cache is not None:
                k, v = cache.update(self.layer, k, v)
        y = self.attend(q, k, v, ctx, pe)  # (B, nh, T, hs)
        return self.o_proj(y.transpose(1, 2).reshape(B, T, -1))

    def attend(self, q, k, v, ctx: PositionContext, pe: PositionalEncoding):
        T, S, hs = q.shape[-2], k.shape[-2], v.shape[-1]
        gqa = self.n_kv_heads != self.n_heads
        dropout = self.dropout if self.training else 0.0
        scale = self.head_dim ** -0.5
        if ctx.per_query_keys:
            return per_query_attention(q, k, v, ctx, scale)
        if ctx.block_mask is not None and dropout == 0.0:  # GPT.forward set FlexAttention up
            return flex_attention(q, k, v, ctx, scale)
        if ctx.bias is not None:
            # (1 or B, H, T, S): a 3-D mask sends the CPU kernel down a path 4x slower
            bias = ctx.bias if ctx.bias.dim() == 4 else ctx.bias[None]
            return F.scaled_dot_product_attention(q, k, v, attn_mask=bias.to(q.dtype), dropout_p=dropout,
                                                  scale=scale, enable_gqa=gqa)
        dtype = q.dtype
        q, k = pe.fold(q, k, ctx, scale)  # ALiBi: its bias as one more dimension of q and k
        if k.shape[-1] != hs:
            v = F.pad(v.to(k.dtype), (0, k.shape[-1] - hs))  # SDPA wants one head size; the pad is cut below
        mask = None if T == S else causal_mask(ctx.q_pos, ctx.k_pos)  # queries are the last T
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=mask is None, dropout_p=dropout,
                                           scale=scale, enable_gqa=gqa)
        return y[..., :hs].to(dtype)
