"""A MiniMind-style decoder-only transformer: pre-norm RMSNorm, grouped-query attention,
SwiGLU MLP, tied embeddings, no biases, and a pluggable positional encoding. Three options let it hold a
pretrained Llama-family checkpoint (hf/weights.py): untied embeddings (Llama 3), q/k/v biases (Qwen2)
and unscaled input embeddings (every Llama). Gemma 3 adds its own: a head width of its own (head_dim), an RMSNorm on
each head's q and k (qk_norm), norms on the attention's and the MLP's outputs (post_norms), GeGLU (mlp_activation)
and a score scale of its own (attention_scalar). Three shape which keys a layer reads and how: a layer pattern
(model.position.layer_pattern: some layers without positions, as RNoPE and Llama 4's iRoPE), a sliding window
(model.sliding_window) on the layers that apply the encoding, and layer types (model.layer_types: Gemma 3's sliding
layers, with the window and a RoPE of their own, beside its full ones). Each layer is of one kind (Block.kind), and
each kind's context is built once per forward."""
from __future__ import annotations

import dataclasses
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from config import ContextConfig, ModelConfig, TrainConfig

from .attention import Attention, KVCache, causal_block_mask, window_blocks
from .context import build_context
from .loss import chunk_tokens, in_chunks, mean_loss, token_losses
from .positions import NoPE, PositionalEncoding, PositionError, build_position, scaled_layers, table_score_mod


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return F.rms_norm(x.float(), (x.shape[-1],), eps=self.eps).type_as(x) * self.weight


class GatedMLP(nn.Module):
    """Shazeer (arXiv 2002.05202): down(act(gate(x)) * up(x)), SwiGLU with silu, GeGLU with the tanh approximation of
    GELU (Gemma's gelu_pytorch_tanh)."""
    ACTIVATIONS = {"silu": F.silu, "gelu_tanh": lambda x: F.gelu(x, approximate="tanh")}

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.act = self.ACTIVATIONS[cfg.mlp_activation]
        self.gate_proj = nn.Linear(cfg.d_model, cfg.ffn_hidden, bias=False)
        self.up_proj = nn.Linear(cfg.d_model, cfg.ffn_hidden, bias=False)
        self.down_proj = nn.Linear(cfg.ffn_hidden, cfg.d_model, bias=False)

    def forward(self, x):
        return self.down_proj(self.act(self.gate_proj(x)) * self.up_proj(x))


class QKNormAttention(Attention):
    """Attention with an RMSNorm over each head's q and k (weights of head_dim, shared by the heads), after the
    projection and before any position (model.qk_norm: Gemma 3, as OLMo 2 and Qwen3), so the KV cache, a context
    method's second rotation and eval.heads all see the normed keys."""

    def __init__(self, cfg: ModelConfig, layer: int):
        super().__init__(cfg, layer)
        self.q_norm = RMSNorm(cfg.head_dim, cfg.norm_eps)
        self.k_norm = RMSNorm(cfg.head_dim, cfg.norm_eps)

    def project(self, x):
        q, k, v = super().project(x)  # (B, nh or nkv, T, hs)
        return self.q_norm(q), self.k_norm(k), v


class Block(nn.Module):
    """Pre-norm attention and MLP, each added to the residual stream; with post_norms (Gemma's sandwich) each output is
    normed again before its add. `kind` (ModelConfig.layer_kinds) says which encoding and window the layer reads:
    positional (model.position), nope (a layer_pattern's nope entry) or sliding (a sliding_attention layer)."""

    def __init__(self, cfg: ModelConfig, layer: int):
        super().__init__()
        self.kind = cfg.layer_kinds[layer]
        self.attn_norm = RMSNorm(cfg.d_model, cfg.norm_eps)
        self.attn = (QKNormAttention if cfg.qk_norm else Attention)(cfg, layer)
        self.attn_post_norm = RMSNorm(cfg.d_model, cfg.norm_eps) if cfg.post_norms else nn.Identity()
        self.mlp_norm = RMSNorm(cfg.d_model, cfg.norm_eps)
        self.mlp = GatedMLP(cfg)
        self.mlp_post_norm = RMSNorm(cfg.d_model, cfg.norm_eps) if cfg.post_norms else nn.Identity()
        self.dropout = nn.Dropout(cfg.dropout)

    def forward(self, x, ctx, pe, cache=None):
        h = self.attn_norm(x)
        ctx = pe.layer_context(self.attn.layer, h, ctx, cache)  # fox: this layer's forget-gate bias
        x = x + self.dropout(self.attn_post_norm(self.attn(h, ctx, pe, cache)))
        return x + self.dropout(self.mlp_post_norm(self.mlp(self.mlp_norm(x))))


def sliding_config(cfg: ModelConfig, layers: str) -> ModelConfig:
    """The config the sliding layers of model.layer_types rotate by: RoPE of base model.position.local_theta (Gemma 3's
    rope_local_base_freq; theta where unset), with the model's scaling only where it acts on all `layers`."""
    p = cfg.position
    scaling = p.scaling if layers == "all" else None
    return dataclasses.replace(cfg, position=dataclasses.replace(p, theta=p.local_theta or p.theta, scaling=scaling))


class GPT(nn.Module):
    # True: a sliding window always as -inf in a (T, S) mask, also where attention could read only the keys inside it
    # (speed.bench's comparison; the results are the same)
    window_mask = False

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        self.embed = nn.Embedding(cfg.vocab_size, cfg.d_model)
        kinds = set(cfg.layer_kinds)
        self.position = build_position(cfg)  # the positional layers' (with layer_types, the full layers')
        # the layers of a pattern's nope entries attend without positions (no parameters: the weights stay the same)
        self.plain = NoPE(cfg) if "nope" in kinds else None
        # the sliding layers of layer_types: RoPE of their own base (buffers only), any other encoding shared; the
        # layers a RoPE scaling acts on are checked here too, for a scaling given at load time
        layers = scaled_layers(cfg)
        local = cfg.position.type == "rope" and "sliding" in kinds
        self.local = build_position(sliding_config(cfg, layers)) if local else None
        # Llama 4's temperature (model.position.nope_temperature) on the queries of the layers without positions:
        # (on the layers that apply the encoding, where it is NoPE; on a pattern's nope layers)
        on = cfg.position.nope_temperature
        self.temperature = (on and all(cfg.nope_layers), on)
        # each kind of layer (Block.kind): (its encoding, its sliding window, its temperature)
        self.kinds = {kind: entry for kind, entry in {
            "positional": (self.position, None if cfg.layer_types else cfg.sliding_window, self.temperature[0]),
            "nope": (self.plain, None, self.temperature[1]),
            "sliding": (self.position if self.local is None else self.local, cfg.sliding_window, self.temperature[0]),
        }.items() if kind in kinds}
        self.blocks = nn.ModuleList(Block(cfg, i) for i in range(cfg.n_layers))
        self.norm = RMSNorm(cfg.d_model, cfg.norm_eps)
        self.lm_head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        if cfg.tie_embeddings:
            self.lm_head.weight = self.embed.weight
        self.flex_block_mask = None  # use_flex_attention: FlexAttention on where set
        self.context_method = None  # use_context_method
        # Token embeddings are scaled by sqrt(d) as in Vaswani et al.; additive encodings follow
        # the embedding-scale rule in model/positions.py. Llama's are not.
        self.embed_scale = math.sqrt(cfg.d_model) if cfg.scale_embeddings else 1.0
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, std=cfg.init_std)
            if isinstance(m, nn.Linear) and m.bias is not None:
                nn.init.zeros_(m.bias)
        for name, p in self.named_parameters():  # GPT-2: scale residual projections by depth
            if name.endswith(("o_proj.weight", "down_proj.weight")):
                nn.init.normal_(p, std=cfg.init_std / math.sqrt(2 * cfg.n_layers))

    def num_params(self) -> int:
        return sum(p.numel() for p in self.parameters())

    def use_flex_attention(self, on: bool = True):
        """Route score-modifying encodings (ALiBi, t5, kerple, fire, fox) and sliding windows through FlexAttention
        (on CUDA; the CPU runs it too, for tests)."""
        # Under torch.compile(model) the mask is built outside the graph: one graph break per forward, never
        # a trace. Wrapped here, not where it is defined: the wrapper imports torch._dynamo, which takes
        # seconds of every command's start.
        self.flex_block_mask = torch.compiler.disable(causal_block_mask) if on else None

    def use_context_method(self, context: ContextConfig | None):
        """Apply a training-free context method (model/context.py) from now on, its defaults taken from this
        model's training length (max_seq_len); None: plain attention. The caller has checked the method and
        that it applies to this encoding and scaling (context.check_context, context.pairing_problem)."""
        self.context_method = build_context(context, self.cfg.max_seq_len)

    def forward(self, idx, targets=None, positions=None, cache: KVCache | None = None, last_only=False,
                per_token=False):
        """idx (B, T) token ids -> logits (B, T, vocab) [or (B, 1, vocab) with last_only], loss.

        The loss is the mean over the targets that are not -1; where the step's float32 logits would pass
        model.loss.CHUNKED_ABOVE (a large vocabulary), it is taken a chunk of tokens at a time, each chunk's logits
        recomputed in the backward pass, and the logits are None (never built whole). per_token (token_losses):
        (None, the loss of every token (B, T)), computed in chunks.

        positions (T,), or (B, T) to give each sequence its own (train.positions), default to the next
        positions after the cache (0, 1, ... without one). The cache may be a sliding window
        (KVCache.trim): its positions stay absolute. With a static cache (KVCache.make_static) nothing is
        read back from the device and each step of T tokens has the shapes of the one before. A context method
        (use_context_method) needs positions shared by the sequences.
        """
        B, T = idx.shape
        positions, end, consecutive = self.place(T, idx.device, positions, cache)
        if self.context_method is not None and positions.dim() != 1:
            raise ValueError("a context method takes positions shared by every sequence, (T,)")
        caches, k_pos = self.extend_caches(cache, positions, end)
        # once per forward, for each kind of layer: its encoding's context, with its sliding window
        contexts = {kind: self.shared_context(pe, positions, k_pos[kind], end, consecutive, caches[kind], window,
                                              temperature)
                    for kind, (pe, window, temperature) in self.kinds.items()}
        x = self.position.embed(self.embed(idx) * self.embed_scale, positions)  # (B, T, C)
        for block in self.blocks:
            x = block(x, contexts[block.kind], self.kinds[block.kind][0], caches[block.kind])
        x = self.norm(x)
        if last_only:
            x = x[:, -1:]
        if per_token:
            return None, token_losses(self.lm_head, x, targets, chunk_tokens(self.cfg.vocab_size))
        if targets is not None and in_chunks(targets.numel(), self.cfg.vocab_size):
            return None, mean_loss(self.lm_head, x, targets, chunk_tokens(self.cfg.vocab_size))
        logits = self.lm_head(x)  # (B, T, vocab)
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.float().flatten(0, 1), targets.flatten(), ignore_index=-1)
        return logits, loss

    def extend_caches(self, cache: KVCache | None, positions, end) -> tuple[dict, dict]:
        """Each kind of layer's cache and the positions of the keys it reads, this forward's tokens added: the cache
        given, or, where it rolls (KVCache.for_window), a sliding window's own."""
        if cache is None:
            return dict.fromkeys(self.kinds), dict.fromkeys(self.kinds, positions)
        caches = {kind: cache.for_window(window) for kind, (_, window, _) in self.kinds.items()}
        extended = {id(cache): cache.extend(positions, end)}  # the cache given counts every token
        for kind, own in caches.items():
            if id(own) not in extended:
                own.roll(self.kinds[kind][1])
                extended[id(own)] = own.extend(positions, end)
        return caches, {kind: extended[id(own)] for kind, own in caches.items()}

    def token_losses(self, idx, targets, positions=None, cache: KVCache | None = None) -> torch.Tensor:
        """Next-token losses (B, T) in float32 of idx (B, T) against targets (B, T) (-1: not scored, 0), with
        forward's positions and cache: the output projection and the cross-entropy a chunk of tokens at a time
        (model/loss.py), so no (tokens x vocab) logits beyond a chunk's exist (a large vocabulary at a long length)."""
        return self(idx, targets, positions, cache, per_token=True)[1]

    def shared_context(self, pe: PositionalEncoding, positions, k_pos, end, consecutive, cache: KVCache | None,
                       window: int | None, temperature: bool):
        """The context that the layers applying `pe` share in this forward: pe's own (rotations, a learned bias), the
        context method's (use_context_method), a sliding window hiding the keys `window` or more positions back,
        Llama 4's temperature on the queries (`temperature`), and FlexAttention's score_mod and block mask."""
        method = self.context_method
        # keys rotated in attention: all of them (cached before rotation: a dynamic scaling, a context method's
        # far pass), or only the new ones where the cache holds rotated keys
        rotate_keys = pe.dynamic or (method is not None and method.maps_distances)
        rot_pos = k_pos if rotate_keys else positions
        ctx = pe.context(positions, k_pos, rot_pos, end, consecutive)
        ctx.rotate_keys = rotate_keys
        if method is not None:
            ctx.q_scale = method.query_scale(positions)
            if method.changes_scores:
                pe.show(ctx, method, end)
        static = cache is not None and cache.static  # flex's block mask takes the queries to be the last T keys
        if window is not None:
            # on scores without a bias, attention reads only the keys inside the window (ctx.window, O(T x window));
            # a bias, a context method's mask or second rotation, per-query rotations and a static cache's fixed
            # shapes take it as -inf in their (T, S) mask
            plain = (ctx.bias is None and ctx.far is None and ctx.key_rotors is None and not static
                     and not pe.layer_bias and pe.score_mod(ctx) is None and not self.window_mask)
            if not plain:
                pe.hide(ctx, positions[..., :, None] - k_pos[..., None, :] >= window)
            elif not (consecutive and window >= positions.shape[-1]):  # a window as long as the input hides nothing
                ctx.window = window
        if temperature:
            p = self.cfg.position  # transformers' Llama4TextAttention (attn_temperature_tuning)
            scale = torch.log1p(torch.floor((positions.float() + 1) / p.floor_scale)) * p.attn_scale + 1
            ctx.q_scale = scale if ctx.q_scale is None else ctx.q_scale * scale
        # flex has no attention dropout, and a context method's two rotations are merged by the eager path
        flex = self.flex_block_mask is not None
        if flex and not static and not (self.training and self.cfg.dropout) and ctx.far is None:
            ctx.score_mod = table_score_mod(ctx.bias) if ctx.bias is not None else pe.score_mod(ctx)
            if ctx.score_mod is not None or pe.layer_bias or (ctx.window is not None and consecutive):
                # a window by index skips blocks where indices are positions (no cache, consecutive positions)
                ctx.block_mask = self.flex_block_mask(positions.shape[-1], k_pos.shape[-1], positions.device,
                                                      window if consecutive else None)
        if ctx.window is not None and ctx.block_mask is None:
            ctx.window_blocks = window_blocks(positions, k_pos, window, consecutive)
        return ctx

    def place(self, T: int, device, positions, cache: KVCache | None):
        """(positions, end, consecutive) of a forward's T tokens: their positions (given, or after the
        cache's), the length they reach (last position + 1; an int, a tensor for a static cache, None where
        nothing needs it), and whether query and key positions are consecutive as known without reading
        them back (None: unknown). A PositionError for a position the encoding cannot represent."""
        limit = self.position.max_positions
        if cache is not None and cache.static:  # everything stays on the device: one compiled graph a step
            if limit is not None and cache.capacity > limit:
                raise PositionError(f"{self.cfg.position.type} positions stop at {limit - 1}; this static cache "
                                    f"holds positions up to {cache.capacity - 1}")
            positions = cache.next_positions(T) if positions is None else positions
            return positions, positions[-1] + 1, False  # its empty slots are not consecutive
        start = 0 if cache is None else cache.next_position
        end, consecutive = None, None
        if positions is None and start is not None:  # the last position + 1 is known without a read-back
            positions, end = torch.arange(start, start + T, device=device), start + T
            consecutive = True if cache is None else None
        elif positions is None:  # a cache of per-sequence positions: each goes on after its own last one
            positions = torch.arange(T, device=device) + cache.positions[..., -1:] + 1
        if end is None and (limit is not None or self.position.dynamic or cache is not None):
            end = int(positions.max()) + 1  # a read-back (host sync), only where the length is used
        if limit is not None and end > limit:
            raise PositionError(f"{self.cfg.position.type} positions stop at {limit - 1}; "
                                f"this input needs position {end - 1}")
        return positions, end, consecutive


def round_matrices(model: GPT, dtype: torch.dtype) -> GPT:
    """Hold every nn.Linear's weights in `dtype`, once, for inference under autocast in that dtype, which would
    otherwise round each float32 matrix again at every forward: a decoding step on a GPU copies every weight
    for one token's products. The output projection is untied from the embedding first; the embedding, the norms
    and the position tables stay float32, so the logits are the ones autocast gives with float32 weights, bit
    for bit. In place; the model is for inference from then on (train.py never calls this)."""
    model.lm_head.weight = nn.Parameter(model.lm_head.weight.detach().clone())
    for module in model.modules():
        if isinstance(module, nn.Linear):
            module.to(dtype)
    return model


def flops_per_token(cfg: ModelConfig, seq_len: int, n_params: int) -> float:
    """Training FLOPs per token, PaLM (arXiv 2204.02311) appendix B: 6N + 12 * L * H * Q * T,
    with N the non-embedding parameters plus the (tied) output projection, H heads, Q head dim."""
    return 6 * n_params + 12 * cfg.n_layers * cfg.n_heads * cfg.head_dim * seq_len


def make_optimizer(model: nn.Module, t: TrainConfig, device: torch.device) -> torch.optim.AdamW:
    """AdamW with weight decay on matrices only (not norms or other vectors); fused on CUDA. Any
    module: speed.bench gives its transformers peer the same recipe."""
    params = [p for p in model.parameters() if p.requires_grad]
    groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": t.weight_decay},
              {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=t.lr, betas=(t.beta1, t.beta2), fused=device.type == "cuda")
