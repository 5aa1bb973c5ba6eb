"""Models speed.bench trains beside ours, at our config's shape, to put our speed in context.

  - `gpt2`: a plain GPT-2 (Radford et al. 2019) written here: learned positions, pre-norm LayerNorm,
    multi-head attention through SDPA, a 4x GELU MLP, biases, tied embeddings;
  - `transformers`: Hugging Face transformers' LlamaForCausalLM (our architecture, their code);
  - a path to nanoGPT's `model.py` (from a checkout of karpathy/nanoGPT): its GPT, built at our shape.
For decoding, `transformers` is our rope model exported to LlamaForCausalLM (`exported_llama`), decoded by
transformers' own `generate`; for a sliding window's forward, its Gemma3ForCausalLM of our shape (`gemma3_sliding`).

Each peer is (name, module, loss_of(module, x, y), FLOPs per token), the FLOPs counted as for our
model (PaLM appendix B: 6N + 12 L H Q T, N without the position table).
"""
from __future__ import annotations

import importlib.util
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import torch
import torch.nn as nn
import torch.nn.functional as F

from config import ModelConfig, UserError
from model.gpt import GPT, flops_per_token


@dataclass
class Peer:
    name: str
    model: nn.Module
    loss_of: Callable  # (model, x, y) -> loss
    flops_per_token: float


class GPT2Block(nn.Module):
    def __init__(self, d: int, n_heads: int):
        super().__init__()
        self.n_heads = n_heads
        self.ln_1, self.ln_2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc, self.fc_out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(self.ln_1(x)).view(B, T, 3, self.n_heads, C // self.n_heads).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(B, T, C))
        return x + self.fc_out(F.gelu(self.fc(self.ln_2(x)), approximate="tanh"))


class GPT2(nn.Module):
    """GPT-2 at our shape: the reference a speed ratio is taken against (no GQA, no RoPE, no SwiGLU)."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.embed = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.positions = nn.Embedding(cfg.max_seq_len, cfg.d_model)
        self.blocks = nn.ModuleList(GPT2Block(cfg.d_model, cfg.n_heads) for _ in range(cfg.n_layers))
        self.ln_f = nn.LayerNorm(cfg.d_model)
        for name, p in self.named_parameters():
            if p.dim() == 2:  # GPT-2's init: N(0, 0.02), residual projections scaled by depth
                std = 0.02 / math.sqrt(2 * cfg.n_layers) if name.endswith(("proj.weight", "fc_out.weight")) else 0.02
                nn.init.normal_(p, std=std)
            elif "ln" not in name:
                nn.init.zeros_(p)

    def forward(self, idx):
        x = self.embed(idx) + self.positions(torch.arange(idx.shape[1], device=idx.device))
        for block in self.blocks:
            x = block(x)
        return F.linear(self.ln_f(x), self.embed.weight)  # tied output projection


def cross_entropy(logits, y):
    return F.cross_entropy(logits.float().flatten(0, 1), y.flatten())


def peer_flops(cfg: ModelConfig, model: nn.Module, position_table: int) -> float:
    n = sum(p.numel() for p in model.parameters()) - position_table
    return flops_per_token(cfg, cfg.max_seq_len, n)


def gpt2_peer(cfg: ModelConfig) -> Peer:
    model = GPT2(cfg)
    return Peer("GPT-2 reference (this repo, speed/peers.py)", model, lambda m, x, y: cross_entropy(m(x), y),
                peer_flops(cfg, model, model.positions.weight.numel()))


def llama_peer(cfg: ModelConfig) -> Peer:
    """Hugging Face transformers' LlamaForCausalLM of our shape: width, depth, heads, KV heads, SwiGLU width,
    context, vocab, RMSNorm eps, RoPE base, tied embeddings, no biases, SDPA attention."""
    import transformers
    from transformers import LlamaConfig, LlamaForCausalLM
    config = LlamaConfig(vocab_size=cfg.vocab_size, hidden_size=cfg.d_model, intermediate_size=cfg.ffn_hidden,
                         num_hidden_layers=cfg.n_layers, num_attention_heads=cfg.n_heads,
                         num_key_value_heads=cfg.n_kv_heads, max_position_embeddings=cfg.max_seq_len,
                         rms_norm_eps=cfg.norm_eps, tie_word_embeddings=True, attention_bias=False, mlp_bias=False,
                         attention_dropout=0.0, rope_parameters={"rope_type": "default", "rope_theta": cfg.position.theta},
                         rope_theta=cfg.position.theta)  # the second spelling for transformers 4.x
    config._attn_implementation = "sdpa"
    model = LlamaForCausalLM(config)
    return Peer(f"transformers {transformers.__version__} LlamaForCausalLM (sdpa)", model,
                lambda m, x, y: cross_entropy(m(input_ids=x).logits, y), peer_flops(cfg, model, 0))


def gemma3_sliding(cfg: ModelConfig, window: int, length: int):
    """transformers' Gemma3ForCausalLM of our shape (width, depth, heads, KV heads, head width, MLP width, vocab) with
    every layer a sliding_attention layer of `window` tokens, through SDPA: the peer of speed.bench's sliding-window
    forward. Gemma's own parts stay (q/k norms, four norms a layer, GeGLU), a little more work than ours a layer."""
    from transformers import Gemma3ForCausalLM, Gemma3TextConfig
    config = Gemma3TextConfig(vocab_size=cfg.vocab_size, hidden_size=cfg.d_model, intermediate_size=cfg.ffn_hidden,
                              num_hidden_layers=cfg.n_layers, num_attention_heads=cfg.n_heads,
                              num_key_value_heads=cfg.n_kv_heads, head_dim=cfg.head_dim, rms_norm_eps=cfg.norm_eps,
                              max_position_embeddings=length, sliding_window=window,
                              layer_types=["sliding_attention"] * cfg.n_layers)
    config._attn_implementation = "sdpa"
    return Gemma3ForCausalLM(config)


def exported_gemma3(model):
    """transformers' Gemma3ForCausalLM holding our GPT's weights exactly (convert/to_hf.py's config and names)."""
    from transformers import Gemma3ForCausalLM, Gemma3TextConfig
    from convert.to_hf import gemma_config
    from hf.weights import to_transformers
    config = Gemma3TextConfig(**gemma_config(model.cfg, model.position.scaling, None, None))
    config._attn_implementation = "sdpa"
    peer = Gemma3ForCausalLM(config)
    peer.load_state_dict(to_transformers(model.state_dict(), model.cfg, model.embed_scale), strict=False)
    return peer


def nanogpt_peer(cfg: ModelConfig, path: Path) -> Peer:
    """nanoGPT's GPT from its model.py, at our shape with its own defaults otherwise (biases, dropout 0)."""
    spec = importlib.util.spec_from_file_location("nanogpt_model", path)
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
        config = module.GPTConfig(block_size=cfg.max_seq_len, vocab_size=cfg.vocab_size, n_layer=cfg.n_layers,
                                  n_head=cfg.n_heads, n_embd=cfg.d_model, dropout=0.0)
        model = module.GPT(config)
    except Exception as e:  # a file that is not nanoGPT's model.py
        raise UserError(f"--peer {path}: not nanoGPT's model.py ({type(e).__name__}: {e})") from None
    return Peer(f"nanoGPT model.py ({path})", model, lambda m, x, y: m(x, y)[1],
                peer_flops(cfg, model, model.transformer.wpe.weight.numel()))


def make_peer(name: str, cfg: ModelConfig) -> Peer:
    if name == "gpt2":
        return gpt2_peer(cfg)
    if name == "transformers":
        return llama_peer(cfg)
    path = Path(name)
    if path.name != "model.py" or not path.is_file():
        raise UserError(f"--peer: expected gpt2, transformers or the path of nanoGPT's model.py, got {name!r}")
    return nanogpt_peer(cfg, path)


def exported_llama(model: GPT):
    """Our rope model as transformers' LlamaForCausalLM with its weights (convert/to_hf.py's mapping, in memory):
    the peer for decoding, the model a user of the export would run."""
    from transformers import LlamaConfig, LlamaForCausalLM

    from convert.to_hf import check_exportable, llama_config, llama_weights
    check_exportable(model.cfg)
    config = LlamaConfig.from_dict(llama_config(model.cfg, model.position.scaling, bos_id=0, eos_id=0))
    config._attn_implementation = "sdpa"
    llama = LlamaForCausalLM(config)
    llama.load_state_dict(llama_weights(model))
    return llama
