"""Causal grouped-query attention with pluggable position hooks and a KV cache.

Backends, chosen per call, all computing softmax(q k^T * scale + bias + causal mask) v:
  - SDPA with `is_causal` (flash / memory-efficient kernels) when there is no score bias;
  - FlexAttention with the encoding's `score_mod` on CUDA (ALiBi without a T x T bias in memory);
  - SDPA with an explicit float mask otherwise (CPU ALiBi, chunked prefill), in query blocks so
    memory stays O(block x S) at long lengths.
"""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from .config import ModelConfig
from .positions import PositionalEncoding

QUERY_BLOCK = 1024  # query rows per block on the explicit-mask path


class KVCache:
    """Keys and values of the tokens seen so far, per layer. Keys are stored BEFORE rotation, so
    a dynamic RoPE scaling can re-rotate them with the frequencies of the current length."""

    def __init__(self, n_layers: int):
        self.keys: list[torch.Tensor | None] = [None] * n_layers
        self.values: list[torch.Tensor | None] = [None] * n_layers

    def __len__(self) -> int:
        return 0 if self.keys[0] is None else self.keys[0].shape[-2]

    def update(self, layer: int, k: torch.Tensor, v: torch.Tensor):
        if self.keys[layer] is not None:
            k = torch.cat([self.keys[layer], k], dim=-2)
            v = torch.cat([self.values[layer], v], dim=-2)
        self.keys[layer], self.values[layer] = k, v
        return k, v


_flex_attention = None
_block_masks: dict = {}


def causal_block_mask(T: int, S: int, device):
    """FlexAttention's block mask for queries at positions S-T .. S-1 over keys 0 .. S-1, built
    once per shape (building it launches work on the device)."""
    from torch.nn.attention.flex_attention import create_block_mask
    key = (T, S, str(device))
    if key not in _block_masks:
        offset = S - T

        def causal(b, h, q_idx, kv_idx):
            return q_idx + offset >= kv_idx
        _block_masks[key] = create_block_mask(causal, None, None, T, S, device=device)
    return _block_masks[key]


def flex_attention(q, k, v, score_mod, scale):
    """Causal FlexAttention, compiled once (eager flex materialises scores and is only for tests)."""
    global _flex_attention
    if _flex_attention is None:
        from torch.nn.attention.flex_attention import flex_attention as flex
        _flex_attention = torch.compile(flex, dynamic=False) if q.is_cuda else flex
    mask = causal_block_mask(q.shape[-2], k.shape[-2], q.device)
    return _flex_attention(q, k, v, score_mod=score_mod, block_mask=mask, scale=scale,
                           enable_gqa=k.shape[1] != q.shape[1])


class Attention(nn.Module):
    def __init__(self, cfg: ModelConfig, layer: int):
        super().__init__()
        self.layer, self.n_heads, self.n_kv_heads, self.head_dim = layer, cfg.n_heads, cfg.n_kv_heads, cfg.head_dim
        self.q_proj = nn.Linear(cfg.d_model, cfg.n_heads * cfg.head_dim, bias=False)
        self.k_proj = nn.Linear(cfg.d_model, cfg.n_kv_heads * cfg.head_dim, bias=False)
        self.v_proj = nn.Linear(cfg.d_model, cfg.n_kv_heads * cfg.head_dim, bias=False)
        self.o_proj = nn.Linear(cfg.n_heads * cfg.head_dim, cfg.d_model, bias=False)
        self.dropout = cfg.dropout
        self.use_flex = False  # set by GPT.use_flex_attention for encodings with a score_mod on CUDA

    def forward(self, x, q_pos, k_pos, pe: PositionalEncoding, cache: KVCache | None = None):
        B, T, _ = x.shape
        q = self.q_proj(x).view(B, T, self.n_heads, self.head_dim).transpose(1, 2)     # (B, nh, T, hs)
        k = self.k_proj(x).view(B, T, self.n_kv_heads, self.head_dim).transpose(1, 2)  # (B, nkv, T, hs)
        v = self.v_proj(x).view(B, T, self.n_kv_heads, self.head_dim).transpose(1, 2)
        if cache is not None:
            k, v = cache.update(self.layer, k, v)  # (B, nkv, S, hs), S = cached + T
        q, k = pe.rotate(q, k, q_pos, k_pos)
        y = self.attend(q, k, v, q_pos, k_pos, pe)  # (B, nh, T, hs)
        return self.o_proj(y.transpose(1, 2).reshape(B, T, -1))

    def attend(self, q, k, v, q_pos, k_pos, pe):
        T, S = q.shape[-2], k.shape[-2]
        gqa = self.n_kv_heads != self.n_heads
        dropout = self.dropout if self.training else 0.0
        score_mod = pe.score_mod()
        if score_mod is None and T == S:
            return F.scaled_dot_product_attention(q, k, v, is_causal=True, dropout_p=dropout, enable_gqa=gqa)
        if self.use_flex and score_mod is not None and dropout == 0.0:
            return flex_attention(q, k, v, score_mod, scale=self.head_dim ** -0.5)
        out = []
        for i in range(0, T, QUERY_BLOCK):  # bound the (H, block, S) mask and scores at long lengths
            qp = q_pos[i:i + QUERY_BLOCK]
            mask = torch.zeros(len(qp), S, device=q.device).masked_fill_(k_pos[None, :] > qp[:, None], float("-inf"))
            bias = pe.score_bias(qp, k_pos)
            mask = (mask if bias is None else mask + bias).to(q.dtype)  # (T, S) or (H, T, S)
            out.append(F.scaled_dot_product_attention(q[:, :, i:i + QUERY_BLOCK], k, v, attn_mask=mask,
                                                      dropout_p=dropout, enable_gqa=gqa))
        return torch.cat(out, dim=2)
