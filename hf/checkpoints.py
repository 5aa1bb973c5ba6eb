"""Transformers checkpoints as models to evaluate through transformers: `hf:PATH` wherever a run directory is accepted.

PATH is a folder as `save_pretrained` writes it (config.json, safetensors weights, tokenizer files) or a
single .gguf file, whose weights transformers dequantizes on load (the `gguf` and `accelerate` packages:
pip install -e '.[hf]'). Nothing is downloaded: a path that is not on disk is a UserError, and transformers
is called with local_files_only. checkpoint.py opens it (`read_run_config`, `load_model`, `load_tokenizer`),
so that evaluators and generate.py get what a run gives them:

  - `describe`: the checkpoint as a run's config.yaml would describe it: a model section (widths, layers,
    heads, L = max_position_embeddings, the RoPE base and the checkpoint's own scaling) and no data section,
    since it was trained elsewhere;
  - `HFModel`: the transformers model behind GPT's call, `model(idx, cache=KVCache, last_only=...)` ->
    (logits, None), and GPT's `token_losses` (no (tokens x vocab) logits), in float32 on the CPU and bfloat16 on CUDA;
  - `load_tokenizer`: data.PretrainedTokenizer over the checkpoint's own tokenizer.

A Llama-family checkpoint can instead be converted into a run directory (hf/weights.py, python -m
convert.to_run) and then runs natively, without transformers; this path stays for every other architecture. A Gemma 3
checkpoint, whose RoPE differs per layer type (hf/rope.py), is refused here and converted instead.

A RoPE scaling goes through the config's rope parameters (hf/rope.py, the mapping convert/to_hf.py
writes too): linear, dynamic, yarn and llama3 as transformers' rope types, ntk as plain RoPE with the
larger base b * s^(d/(d-2)). dynamic-yarn has no transformers rope type and is refused. A static scaling
gives this repo's perplexities (tests/test_hf.py). transformers' dynamic NTK caches each key rotated with
the frequencies of the step that computed it, where this repo re-rotates every cached key at the current
length (model/attention.py): the same up to L, different past it.

A context method (model/context.py: Self-Extend, ReRoPE, DCA ...) runs as an attention function registered with
transformers (`context_attention`): q and k reach it rotated at their own positions, and the pairs the method
shows at other positions are scored with q and k rotated on by the difference, before one softmax, as this
repo's attention does (model.attention.merged_attention). It takes the models that rotate the two halves of a
head's rotary dimensions (rotate_half: Llama, Mistral, Qwen2, GPT-NeoX, Phi ...); an export gives its run's
perplexity under every method (tests/test_hf.py).
"""
from __future__ import annotations

import copy
import dataclasses
import functools
import inspect
import json
import pickle
import sys
import weakref
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F
from safetensors import SafetensorError

from config import ContextConfig, ModelConfig, PositionConfig, ScalingConfig, UserError, to_dict
from data.tokenizer import PretrainedTokenizer
from model.attention import merged_attention
from model.loss import chunk_tokens, token_losses
from model.context import ContextMethod, build_context
from model.positions import hiding_mask
from model.rope import is_dynamic
from hf.rope import TAKES, own_scaling, rope_parameters, rope_settings

PREFIX = "hf:"
# what a causal LM's forward does to its lm_head's output besides the final soft-capping HFModel.head applies: Cohere
# multiplies by logit_scale, Granite divides by logits_scaling
OTHER_LOGIT_SCALES = ("logit_scale", "logits_scaling")
INSTALL = "pip install -e '.[hf]'"
# what transformers raises for a checkpoint it cannot read: a weights file cut short (SafetensorError), a
# pytorch_model.bin holding objects torch's weights_only loader refuses (UnpicklingError: nothing is executed)
RAISED = (OSError, ValueError, KeyError, TypeError, RuntimeError, ImportError, json.JSONDecodeError,
          SafetensorError, pickle.UnpicklingError)


def is_hf(path) -> bool:
    return str(path).startswith(PREFIX)


# ----------------------------------------------------------------------------- the checkpoint on disk

@dataclass(frozen=True)
class Source:
    name: str  # as the user wrote it, hf: included
    folder: Path  # what from_pretrained reads
    gguf: str | None  # the .gguf file's name in `folder`, or None for a checkpoint folder


def locate(path) -> Source:
    """Where an hf: checkpoint is, or a UserError saying why `path` is not one."""
    name = str(path)
    local = Path(name[len(PREFIX):]).expanduser()
    if not name[len(PREFIX):]:
        raise UserError(f"{name!r}: give a path after hf: (a transformers checkpoint folder or a .gguf file)")
    if local.is_file():
        if local.suffix.lower() != ".gguf":
            raise UserError(f"{name} is a file but not a .gguf file; hf: takes a transformers checkpoint folder "
                            f"(config.json, safetensors weights, tokenizer files) or a .gguf file")
        return Source(name, local.parent, local.name)
    if not local.is_dir():
        raise UserError(f"{name}: no such folder or .gguf file (hf: reads a transformers checkpoint on disk; "
                        f"nothing is downloaded)")
    if not (local / "config.json").is_file():
        hint = "; a run directory is given without hf:" if (local / "config.yaml").is_file() else ""
        raise UserError(f"{name} is not a transformers checkpoint (no config.json){hint}")
    return Source(name, local, None)


def transformers():
    try:
        import transformers
    except ImportError:
        raise UserError(f"hf: checkpoints need transformers: {INSTALL}") from None
    transformers.logging.set_verbosity_error()  # a checkpoint's notices and loading bars are not the evaluation's
    transformers.logging.disable_progress_bar()
    return transformers


def failed(source: Source, what: str, e: Exception) -> UserError:
    """One line for an exception transformers raised while reading `source`."""
    text = (str(e).strip().splitlines() or [type(e).__name__])[0]
    if source.gguf and isinstance(e, ImportError) or "gguf" in text.lower() and "install" in text.lower():
        return UserError(f"{source.name}: reading a .gguf file needs the gguf and accelerate packages: {INSTALL}")
    return UserError(f"{source.name}: transformers cannot load its {what}: {text}")


@functools.lru_cache(maxsize=4)
def base_config(path: str):
    """The checkpoint's transformers config (read once per process: a .gguf file is parsed whole)."""
    source = locate(path)
    try:
        return transformers().AutoConfig.from_pretrained(source.folder, gguf_file=source.gguf, local_files_only=True)
    except RAISED as e:
        raise failed(source, "config", e) from None


def model_section(config, name: str, params: dict | None = None) -> ModelConfig:
    """The checkpoint's shape and positions as this repo's ModelConfig (what evaluators plan with); `params`: the RoPE
    parameters of the layers model.position describes (None: the config's one set, rope_parameters)."""
    params = rope_parameters(config) if params is None else params
    if not params.get("rope_theta"):
        raise UserError(f"{name} ({config.model_type}) has no rotary positions; hf: takes RoPE checkpoints "
                        f"(Llama, Mistral, Qwen, SmolLM ...)")
    L = config.max_position_embeddings
    scaling = own_scaling(params, L, name)
    heads = config.num_attention_heads
    context = L  # the longest context it was made for: L, or L times its own static factor
    if scaling and scaling.factor:
        context = max(L, round(scaling.original_max_position_embeddings * scaling.factor))
    cfg = ModelConfig(vocab_size=config.vocab_size, d_model=config.hidden_size, n_layers=config.num_hidden_layers,
                      n_heads=heads, n_kv_heads=getattr(config, "num_key_value_heads", None) or heads,
                      max_seq_len=context,
                      ffn_hidden=getattr(config, "intermediate_size", None) or 4 * config.hidden_size,
                      norm_eps=getattr(config, "rms_norm_eps", None) or 1e-5,
                      position=PositionConfig(theta=float(params["rope_theta"]),
                                              rotary_fraction=float(params.get("partial_rotary_factor") or 1.0),
                                              scaling=scaling))
    return cfg


def rotary_dims(config) -> int:
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    return int(head_dim * float(rope_parameters(config).get("partial_rotary_factor") or 1.0))


def describe(path) -> dict:
    """The checkpoint as a run's config.yaml would describe it (no data section: trained elsewhere)."""
    source = locate(path)
    name = Path(source.gguf).stem if source.gguf else source.folder.resolve().name
    cfg = model_section(base_config(str(path)), source.name)
    return {"run": {"name": name, "seed": 0}, "model": to_dict(cfg)}


def original_length(config, name: str) -> int:
    """L, the context plain RoPE was trained at: max_position_embeddings, or the original length of the
    checkpoint's own scaling."""
    own = own_scaling(rope_parameters(config), config.max_position_embeddings, name)
    return own.original_max_position_embeddings if own else config.max_position_embeddings


def scaled_config(path: str, scaling: ScalingConfig | None):
    """The checkpoint's config with `scaling` (None: plain RoPE) in place of its own rope parameters."""
    config = copy.deepcopy(base_config(path))
    params = rope_parameters(config)
    L = original_length(config, path)
    if scaling is not None:
        if scaling.type not in TAKES:
            raise UserError(f"{path} cannot take RoPE scaling {scaling.type!r}: transformers has no rope type "
                            f"for it; it takes {', '.join(TAKES)}")
        scaling = dataclasses.replace(scaling, original_max_position_embeddings=scaling.original_max_position_embeddings or L)
    new, legacy, max_positions = rope_settings(float(params["rope_theta"]), rotary_dims(config), L, scaling)
    if params.get("partial_rotary_factor") is not None:
        new["partial_rotary_factor"] = params["partial_rotary_factor"]
    config.max_position_embeddings = max_positions
    if getattr(config, "rope_parameters", None) is not None:  # transformers >= 5
        config.rope_parameters = new
    else:
        config.rope_scaling, config.rope_theta = legacy, new["rope_theta"]
    return config


# ----------------------------------------------------------------------------- model and tokenizer

@dataclass
class Positions:
    """What evaluators and generate.py read of a model's positional encoding (GPT.position)."""
    scaling: ScalingConfig | None
    max_positions: int | None = None  # rotary positions never run out
    dynamic: bool = False


class HFModel(nn.Module):
    """A transformers causal LM called as GPT is: model(idx, cache=KVCache(...), last_only=...) -> (logits, loss).

    The KVCache the caller makes stands for a transformers DynamicCache, made at its first use and kept
    while the KVCache lives, and counts its tokens; only growing caches are served (rewind, but no trim and no
    static cache)."""

    def __init__(self, model, cfg: ModelConfig, scaling: ScalingConfig | None):
        super().__init__()
        self.hf, self.cfg = model, cfg
        self.position = Positions(scaling, dynamic=is_dynamic(scaling))
        self.context_method: ContextMethod | None = None  # use_context_method
        self.caches = weakref.WeakKeyDictionary()

    def use_context_method(self, context: ContextConfig | None, length: int) -> None:
        """Attend through `context_attention` with the method, its defaults from the context `length` the
        model was trained at, or, None, through the attention the model was loaded with. The caller has
        checked that it applies (model.context.pairing_problem)."""
        self.context_method = build_context(context, length)
        if self.context_method is None:
            return
        layout = sys.modules[type(self.hf).__module__]
        if not hasattr(layout, "rotate_half") or hasattr(layout, "rotate_every_two"):
            raise UserError(f"{self.hf.config.model_type} rotates q and k in a layout context methods do not take; "
                            f"they take models that rotate the halves of each head (Llama, Mistral, Qwen2, GPT-NeoX ...)")
        frequencies = {m.inv_freq for m in self.hf.modules() if isinstance(getattr(m, "inv_freq", None), torch.Tensor)}
        if len(frequencies) != 1:
            raise UserError(f"{self.hf.config.model_type} has {len(frequencies)} rotary embeddings; context methods "
                            f"take a model with one")
        shown = ShownPositions(self.context_method, frequencies.pop())
        for module in self.hf.modules():  # the attention function is given its module
            module.shown_positions = shown
        transformers().AttentionInterface.register(CONTEXT_ATTENTION, context_attention)
        self.hf.set_attn_implementation(CONTEXT_ATTENTION)

    def restart_dynamic_rope(self) -> None:
        """transformers' dynamic NTK keeps the frequencies of the longest length seen, and sets them back only
        below max_position_embeddings: a new sequence starts from the original ones."""
        for module in self.hf.modules():
            if hasattr(module, "original_inv_freq") and hasattr(module, "max_seq_len_cached"):
                module.inv_freq = module.original_inv_freq.clone()
                module.max_seq_len_cached = module.original_max_seq_len

    def forward(self, idx, targets=None, positions=None, cache=None, last_only=False):
        out = self.run(self.hf, idx, positions, cache, logits_to_keep=1 if last_only else 0)
        loss = None
        if targets is not None:
            loss = F.cross_entropy(out.logits.float().flatten(0, 1), targets.flatten(), ignore_index=-1)
        return out.logits, loss

    def token_losses(self, idx, targets, positions=None, cache=None) -> torch.Tensor:
        """Next-token losses (B, T) in float32, as GPT.token_losses: the base model's final hidden states, then its
        lm_head (and the final logit soft-capping Gemma 2 and 3 apply in their forward) a chunk of tokens at a time
        (model/loss.py), never the (B, T, V) logits. A model whose forward scales its logits in another way
        (OTHER_LOGIT_SCALES) has its logits made whole by its forward, as `model(...)` does, and scored in chunks."""
        chunk = chunk_tokens(self.cfg.vocab_size)
        if any(getattr(self.hf.config, name, None) is not None for name in OTHER_LOGIT_SCALES):
            return token_losses(lambda logits: logits, self(idx, positions=positions, cache=cache)[0], targets, chunk)
        hidden = self.run(self.hf.base_model, idx, positions, cache).last_hidden_state  # (B, T, C), after the norm
        return token_losses(self.head, hidden, targets, chunk)

    def head(self, hidden: torch.Tensor) -> torch.Tensor:
        """The logits of final hidden states, as the causal LM's forward makes them from its base model's output."""
        logits = self.hf.get_output_embeddings()(hidden)
        cap = getattr(self.hf.config, "final_logit_softcapping", None)
        return logits if cap is None else torch.tanh(logits / cap) * cap

    def run(self, module, idx, positions, cache, **kwargs):
        """`module` (the causal LM, or its base model for the hidden states) on idx, through the transformers cache
        that stands for `cache`."""
        if positions is not None:
            raise ValueError("a transformers model takes positions 0, 1, ... (no per-sequence positions)")
        past = None if cache is None else self.caches.get(cache)
        if cache is not None and cache.static:
            raise ValueError("a transformers model keeps its own growing cache, not a static one")
        if past is None:
            if self.position.dynamic:
                self.restart_dynamic_rope()
            if cache is not None:
                past = self.caches[cache] = transformers().DynamicCache(config=self.hf.config)
        if past is not None and past.get_seq_length() > cache.length:
            past.crop(cache.length - past.get_seq_length())  # KVCache.rewind (negative: tokens to drop)
        out = module(input_ids=idx, use_cache=cache is not None, **{cache_argument(module): past}, **kwargs)
        if past is not None:
            cache.length = cache.next_position = past.get_seq_length()
        return out


def cache_argument(module) -> str:
    """The name of a transformers model's cache argument: `cache` in transformers 5.24, `past_key_values` before."""
    return "cache" if "cache" in inspect.signature(module.forward).parameters else "past_key_values"


# ----------------------------------------------------------------------------- context methods

CONTEXT_ATTENTION = "positional-gpt-context"  # the name context_attention is registered under
MASKS = 1 << 24  # (query, key) pairs of a context method's masks made at once (64 MiB in float32)


@dataclass(frozen=True)
class ShownPositions:
    """What context_attention reads from an attention module: the method, and the frequencies the model
    rotates with ((rotary dims / 2,), a static scaling's included)."""
    method: ContextMethod
    inv_freq: torch.Tensor


def rotate_on(x: torch.Tensor, shift: torch.Tensor, inv_freq: torch.Tensor) -> torch.Tensor:
    """x (B, h, N, hs), rotated at positions p by RoPE over the halves of its first 2 * len(inv_freq) dimensions
    (rotate_half), as rotated at p + shift (N,): rotations compose, so only the shift is applied."""
    angles = (shift.double()[:, None] * inv_freq.double()[None, :]).float()  # (N, dims / 2)
    cos, sin = (torch.cat((f, f), dim=-1).to(x.dtype) for f in (angles.cos(), angles.sin()))
    dims = cos.shape[-1]
    part = x[..., :dims]
    half = part.unflatten(-1, (2, -1))
    rotated = part * cos + torch.cat((-half[..., 1, :], half[..., 0, :]), dim=-1) * sin
    return torch.cat((rotated, x[..., dims:]), dim=-1)


def context_attention(module, query, key, value, attention_mask, scaling: float, dropout: float = 0.0, **kwargs):
    """A transformers attention function (AttentionInterface) applying the context method of
    module.shown_positions: query (B, H, T, hs) and key (B, nkv, S, hs) rotated at their own positions, the keys
    being every token so far (0 ... S - 1: no padding, a cache that only grows) and the queries the last T.
    transformers builds no mask for it; the causal one and the method's hidden keys are made here, and the
    method's far pairs scored in blocks of query rows, as merged_attention does. Returns (B, T, H, hs), None."""
    shown = module.shown_positions
    method = shown.method
    B, H, T, _ = query.shape
    S = key.shape[-2]
    k_pos = torch.arange(S, device=query.device)
    q_pos = k_pos[S - T:]
    factor = method.query_scale(q_pos)
    if factor is not None:  # log-n
        query = query * factor.to(query.dtype)[:, None]
    if not method.maps_distances:  # log-n: plain attention, with the keys a method may hide masked
        mask = None if T == S and not method.hides_keys else ~method.hidden(q_pos, k_pos)
        y = F.scaled_dot_product_attention(query, key, value, attn_mask=mask, is_causal=mask is None, scale=scaling,
                                           enable_gqa=key.shape[1] != H)
        return y.transpose(1, 2), None
    _, far_q, _ = method.far(q_pos, k_pos[:1])  # far_q depends on the query alone, far_k on the key alone
    _, _, far_k = method.far(q_pos[:1], k_pos)
    far_query, far_key = rotate_on(query, far_q - q_pos, shown.inv_freq), rotate_on(key, far_k - k_pos, shown.inv_freq)
    rows = max(1, MASKS // S)  # the (T, S) masks of a long input are made a block of rows at a time
    out = []
    for a in range(0, T, rows):
        block = q_pos[a:a + rows]
        out.append(merged_attention(query[..., a:a + rows, :], key, far_query[..., a:a + rows, :], far_key, value,
                                    method.far(block, k_pos)[0], hiding_mask(method.hidden(block, k_pos)), scaling))
    return torch.cat(out, dim=-2).transpose(1, 2), None


def load_model(path: str, scaling: ScalingConfig | None, device, own: bool = False,
               context: ContextConfig | None = None) -> HFModel:
    """The checkpoint as an eval-mode HFModel on `device`, float32 on the CPU and bfloat16 on CUDA, with `scaling`
    as its RoPE scaling (None: plain RoPE), or with `own` its config's rope parameters as they are, and the
    context method (checked by the caller)."""
    source = locate(path)
    config = copy.deepcopy(base_config(path)) if own else scaled_config(path, scaling)
    device = torch.device(device)
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    try:
        model = transformers().AutoModelForCausalLM.from_pretrained(
            source.folder, gguf_file=source.gguf, config=config, dtype=dtype, local_files_only=True)
    except RAISED as e:
        raise failed(source, "weights", e) from None
    cfg = model_section(config, source.name)
    model = HFModel(model, cfg, cfg.position.scaling).to(device).eval()
    # after the move, since it holds the rotary frequencies; a method's defaults follow the length trained at,
    # as a run's do (its own scaling's context, or L under a scaling given here)
    model.use_context_method(context, cfg.max_seq_len if own else original_length(base_config(path), source.name))
    return model


def transformers_tokenizer(path: str):
    """The checkpoint's tokenizer as transformers loads it."""
    source = locate(path)
    try:
        return transformers().AutoTokenizer.from_pretrained(source.folder, gguf_file=source.gguf, local_files_only=True)
    except RAISED as e:
        raise failed(source, "tokenizer", e) from None


def load_tokenizer(path: str) -> PretrainedTokenizer:
    tok = transformers_tokenizer(path)
    backend = getattr(tok, "backend_tokenizer", None)
    if backend is None:
        raise UserError(f"{path}: its tokenizer ({type(tok).__name__}) has no tokenizer.json form (a fast tokenizer)")
    return PretrainedTokenizer(backend, tok.bos_token_id, tok.eos_token_id)
