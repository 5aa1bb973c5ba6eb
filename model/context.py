"""Training-free context methods: what attention shows the encoding of each (query, key) pair.

A context method (Self-Extend, ReRoPE, Leaky ReRoPE, DCA, attention sinks, log-n) changes which relative
positions attention sees, never the encoding's parameters. For a query at position i and a key at j
(d = i - j >= 0) it may
  - show some pairs another distance: where `far` holds, the pair is scored as if the query sat at far_q(i)
    and the key at far_k(j), so the distance shown is far_q(i) - far_k(j); elsewhere it is d;
  - hide keys (`hidden`: the future, and for sinks what has left the window);
  - scale queries (`query_scale`: log-n).
The encoding applies it once per forward (PositionalEncoding.show): RoPE rotates q and k a second time at the
far positions and the attention layer takes each pair's score from one pass or the other before a single
softmax; a score bias (alibi, t5, kerple, fire) is computed at the distance shown; NoPE only hides keys.
Absolute encodings (learned, sinusoidal) are refused. Positions stay absolute everywhere, the KV cache
included, so cached decoding computes what a full forward pass over the same tokens computes.

Each method is one class in CONTEXT_METHODS with its keys, their defaults (from L, the length the run was
trained at: model.max_seq_len) and their smallest values. The typed config is config.ContextConfig, parsed by
config.parse_context; `check_context` is the one check of a method and its keys, `pairing_problem` the rule of
which encodings and RoPE scalings it composes with. Adding a method is one class and its tests.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import torch

from config import ContextConfig, ScalingConfig, UserError, parse_context

from .positions import ENCODINGS
from .rope import SCALINGS

CONTEXT_METHODS: dict[str, type[ContextMethod]] = {}


@dataclass(frozen=True)
class Key:
    default: Callable[[int, dict], float]  # (L, the keys resolved before it) -> the value when left out
    minimum: float


def share(numerator: int, denominator: int) -> Callable[[int, dict], int]:
    """A default of numerator/denominator of L tokens, at least 1."""
    return lambda L, _: max(1, L * numerator // denominator)


def fixed(value: float) -> Callable[[int, dict], float]:
    return lambda L, _: value


def register(name: str):
    def wrap(cls):
        cls.name = name
        CONTEXT_METHODS[name] = cls
        return cls
    return wrap


class ContextMethod:
    """A method resolved for one model: its settings are attributes (self.window, ...). Positions are (T,)
    query and (S,) key positions shared by every sequence, as evaluation and generation use them."""
    name = "base"
    keys: dict[str, Key] = {}
    maps_distances = False  # shows some pairs another distance (`far`)
    hides_keys = False  # hides keys besides the future (`hidden`)
    scales_queries = False  # `query_scale`

    def __init__(self, **settings):
        self.settings = settings
        for key, value in settings.items():
            setattr(self, key, value)

    @property
    def changes_scores(self) -> bool:
        return self.maps_distances or self.hides_keys

    @property
    def kept(self) -> tuple[int, int] | None:
        """(first, last): the tokens a KV cache must keep for the next token to read (the first `first` and the
        last `last`, the new one included), or None: every token."""
        return None

    def far(self, q_pos, k_pos) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None:
        """(use (T, S) bool, far_q (T,), far_k (S,)): the pairs shown another distance, far_q[i] - far_k[j]."""
        return None

    def hidden(self, q_pos, k_pos) -> torch.Tensor:
        """(T, S) True where a query does not read a key: the future."""
        return k_pos[None, :] > q_pos[:, None]

    def query_scale(self, q_pos) -> torch.Tensor | None:
        """(T,) factors multiplying the queries, or None."""
        return None

    def distance(self, q_pos, k_pos) -> torch.Tensor:
        """(T, S) the distance shown for each pair, float (Leaky ReRoPE's are fractional)."""
        d = (q_pos[:, None] - k_pos[None, :]).float()
        far = self.far(q_pos, k_pos)
        if far is None:
            return d
        use, far_q, far_k = far
        return torch.where(use, (far_q[:, None] - far_k[None, :]).float(), d)

    def query_position(self, q_pos) -> torch.Tensor:
        """(T,) the position each query is shown at: the distance it is shown to the first token (FIRE reads it)."""
        return self.distance(q_pos, torch.zeros_like(q_pos[:1]))[:, 0]


def past_window(q_pos, k_pos, window: int) -> torch.Tensor:
    """(T, S) True where a key is `window` or more positions back."""
    return q_pos[:, None] - k_pos[None, :] >= window


@register("self-extend")
class SelfExtend(ContextMethod):
    """Self-Extend (Jin et al., arXiv 2401.01325, section 3 and Algorithm 1): keys less than W back (the
    neighbour window) keep their distance; farther ones are grouped by G, the query at floor(i / G) + W - floor(W / G)
    and the key at floor(j / G), so the distance shown, floor(i / G) - floor(j / G) + W - floor(W / G), goes on from
    about W where the window ends. G = 1 is plain attention. Defaults: the authors' Llama-2 setting, G = 4 and
    W = 1024 of L = 4096 (W = L / 4); every distance shown stays below L up to inputs of (L - W) G + W tokens."""
    keys = {"group_size": Key(fixed(4), 1), "window": Key(share(1, 4), 1)}
    maps_distances = True

    def far(self, q_pos, k_pos):
        G, W = self.group_size, self.window
        return past_window(q_pos, k_pos, W), q_pos // G + W - W // G, k_pos // G


@register("rerope")
class ReRoPE(ContextMethod):
    """ReRoPE (Su, 2023, https://kexue.fm/archives/9708, github.com/bojone/rerope): the distance is clipped at
    the window, min(d, W): every key W or more back is shown at distance W (the query at W, the key at 0).
    Default W = L / 8 (512 of L = 4096 in Su's patch; it also scales queries by log-n, here the `logn`
    method). A window at least the input's length is plain attention."""
    keys = {"window": Key(share(1, 8), 1)}
    maps_distances = True

    def far(self, q_pos, k_pos):
        W = self.window
        return past_window(q_pos, k_pos, W), torch.full_like(q_pos, W), torch.zeros_like(k_pos)


@register("leaky-rerope")
class LeakyReRoPE(ContextMethod):
    """Leaky ReRoPE (Su, 2023, https://kexue.fm/archives/9708): inside the window the distance is kept, past
    it it grows at slope 1/k, W + (d - W) / k: the query at W + (i - W) / k, the key at j / k (fractional
    positions). k = 1 is plain attention; k -> infinity is ReRoPE. Defaults W = L / 8 and k = 16 (Su's patch:
    W = 512 and k = 16 for L = 4096)."""
    keys = {"window": Key(share(1, 8), 1), "k": Key(fixed(16.0), 1)}
    maps_distances = True

    def far(self, q_pos, k_pos):
        W, k = self.window, self.k
        return past_window(q_pos, k_pos, W), W + (q_pos.double() - W) / k, k_pos.double() / k


@register("dca")
class DualChunk(ContextMethod):
    """Dual Chunk Attention (An et al., arXiv 2402.17463, section 3): positions are cut into chunks of s and a
    key is shown at its position in its chunk, j mod s. A query reads
      - its own chunk at the true distance (intra-chunk);
      - the chunk before from position min(s + (i mod s), c - 1) (successive-chunk): the true distance for the
        first w tokens of its chunk (the local window), then the largest position c - 1;
      - every earlier chunk from c - 1 (inter-chunk),
    with c - 1 = s + w - 1 the largest position shown (the paper's w = c - s). Defaults from the authors' code
    (ChunkLlama): s + w = 3L/4 with w = L/16, so s = 11L/16. Chunks at least the input's length are plain attention."""
    keys = {"chunk_size": Key(share(11, 16), 1), "local_window": Key(share(1, 16), 1)}
    maps_distances = True

    def far(self, q_pos, k_pos):
        s, w = self.chunk_size, self.local_window
        behind = q_pos[:, None] // s - k_pos[None, :] // s  # chunks from the key's to the query's
        use = (behind > 1) | ((behind == 1) & (q_pos % s >= w)[:, None])
        return use, torch.full_like(q_pos, s + w - 1), k_pos % s


@register("sinks")
class Sinks(ContextMethod):
    """Attention sinks (StreamingLLM, Xiao et al., arXiv 2309.17453, section 3.2): a query reads the first n
    tokens (the sinks) and the last W (itself included), at the positions they hold in that cache: a sink is
    shown at distance min(i, n + W - 1) - j, a recent key at its true distance. Generation keeps only these
    n + W tokens in the KV cache (`kept`), so memory stays flat however long it runs. Defaults: n = 4 (the
    paper's) and W = L - n (a cache of L tokens). A window covering the whole input is plain attention."""
    keys = {"sinks": Key(fixed(4), 0), "window": Key(lambda L, chosen: max(1, L - chosen["sinks"]), 1)}
    maps_distances = hides_keys = True

    @property
    def kept(self):
        return self.sinks, self.window

    def hidden(self, q_pos, k_pos):
        left = past_window(q_pos, k_pos, self.window) & (k_pos >= self.sinks)[None, :]
        return super().hidden(q_pos, k_pos) | left

    def far(self, q_pos, k_pos):
        n, W = self.sinks, self.window
        return past_window(q_pos, k_pos, W) & (k_pos < n)[None, :], q_pos.clamp(max=n + W - 1), k_pos


@register("logn")
class LogN(ContextMethod):
    """Log-n scaling (Su, 2021, https://kexue.fm/archives/8823; the scalable softmax of Nakanishi, arXiv
    2501.19399): a query at position i reads n = i + 1 tokens and, past the training length, its scores are
    multiplied by log_L(n) = ln n / ln L, so that attention keeps the sharpness it had at L; nothing changes
    up to L. The query is scaled, so a score bias is not. Default L: the run's training length."""
    keys = {"length": Key(lambda L, _: L, 2)}
    scales_queries = True

    def query_scale(self, q_pos):
        return (torch.log1p(q_pos.double()) / math.log(self.length)).clamp(min=1)


def check_context(context: ContextConfig | None, key: str = "context") -> None:
    """A UserError naming the key unless the method exists and every key set belongs to it and is in range."""
    if context is None:
        return
    if context.type == "none":
        raise UserError(f"{key}: name the method, e.g. {{type: rerope, window: 16}}")
    if context.type not in CONTEXT_METHODS:
        raise UserError(f"{key}: unknown context method {context.type!r}; choose one of {', '.join(CONTEXT_METHODS)}")
    keys = CONTEXT_METHODS[context.type].keys
    for name, value in context.to_dict().items():
        if name == "type":
            continue
        if name not in keys:
            raise UserError(f"{key}: context method {context.type!r} takes no key {name!r}; its keys: "
                            f"{', '.join(keys) or 'none'}")
        if not value >= keys[name].minimum:  # NaN too
            raise UserError(f"{key}.{name} must be >= {keys[name].minimum:g}, got {value}")


def parse_checked(value, key: str = "context") -> ContextConfig | None:
    """A context method as a user wrote it (a name, a mapping or YAML text; 'none'), parsed and checked."""
    context = parse_context(value, key)
    check_context(context, key)
    return context


def pairing_problem(context: ContextConfig, encoding: str, scaling: ScalingConfig | None) -> str | None:
    """Why a checked context method does not apply to a run of `encoding` with the RoPE `scaling`, or None:
    - absolute encodings (learned, sinusoidal) put positions in the tokens, which no method can remap;
    - NoPE shows no distance, so a method that only remaps distances would change nothing;
    - a method that remaps distances keeps them short, while a dynamic scaling's frequencies follow the input's
      length: they do not compose (static scalings do, a fine-tune's own included);
    - log-n and a scaling with an attention temperature (yarn, dynamic-yarn) would both sharpen attention on
      long inputs."""
    method, name = CONTEXT_METHODS[context.type], context.type
    kind = ENCODINGS[encoding].kind
    if kind == "absolute":
        relative = ", ".join(n for n, cls in ENCODINGS.items() if cls.kind == "relative")
        return (f"context method {name!r} changes the relative positions attention sees and applies to {relative}; "
                f"{encoding} adds absolute positions to the tokens")
    if kind == "none" and not (method.hides_keys or method.scales_queries):
        return f"context method {name!r} only changes the distances attention is shown, and {encoding} shows none"
    if scaling is not None and method.maps_distances and SCALINGS[scaling.type].dynamic:
        static = ", ".join(n for n, m in SCALINGS.items() if not m.dynamic)
        return (f"context method {name!r} keeps the distances attention is shown short, while the {scaling.type} "
                f"RoPE scaling follows the input's length; they do not compose (static scalings do: {static})")
    if scaling is not None and method.scales_queries and SCALINGS[scaling.type].temperature:
        return (f"context method {name!r} and the {scaling.type} RoPE scaling both sharpen attention on long inputs "
                f"(its attention factor); use one of them")
    return None


def describe(context: ContextConfig) -> str:
    """The method as a label: its name, and the keys the user set (`dca (chunk_size=64)`)."""
    keys = {k: v for k, v in context.to_dict().items() if k != "type"}
    return context.type + (f" ({', '.join(f'{k}={v:g}' for k, v in keys.items())})" if keys else "")


def build_context(context: ContextConfig | None, L: int) -> ContextMethod | None:
    """The method of a checked config for a model trained at length L, every key left out at its default."""
    if context is None:
        return None
    cls = CONTEXT_METHODS[context.type]
    settings: dict = {}
    for name, key in cls.keys.items():
        value = getattr(context, name)
        settings[name] = key.default(L, settings) if value is None else value
    return cls(**settings)
