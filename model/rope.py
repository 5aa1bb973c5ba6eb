"""Rotary position embedding (RoFormer, arXiv 2104.09864) and its context-extension scalings.

Convention: INTERLEAVED pairs. Dimensions (0, 1), (2, 3), ... of a head form the 2-D planes that
pair i rotates by angle `position * inv_freq[i]`, as in the RoFormer paper. (Llama / Hugging Face
use the half-split pairing (i, i + d/2); export/llama.py permutes q/k rows to convert.)

Each scaling method is a pure function registered in SCALINGS under its name, with the keys it
takes, whether it is dynamic and its Hugging Face `rope_type` name, and returns
`(inv_freq, attention_factor)`; the attention factor multiplies cos and sin (so q.k scores are scaled
by its square), exactly as transformers' `modeling_rope_utils.py` does. A scaling is the typed
`config.ScalingConfig` (parsed by `config.parse_scaling` wherever it comes from) and `check_scaling`
is the one check of its method and keys: an unknown method, a key the method does not take or a
value out of range is a UserError naming it. Adding a method is one `@register` entry and one test.
Notation: d = rotary dims per head, b = theta, L = original training context,
s = factor, T = current sequence length.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import torch

from config import ScalingConfig, UserError


@dataclass(frozen=True)
class Method:
    fn: Callable[..., tuple[torch.Tensor, float]]  # (d, b, L, s, T, scaling) -> (inv_freq, attention_factor)
    keys: tuple[str, ...]  # the method's own keys, besides type, factor, original_max_position_embeddings
    dynamic: bool  # the frequencies depend on the current length (keys are cached before rotation)
    hf_name: str | None  # transformers' rope_type, None where it has no equivalent


SCALINGS: dict[str, Method] = {}
COMMON_KEYS = ("type", "factor", "original_max_position_embeddings")


def register(name: str, keys: tuple[str, ...] = (), dynamic: bool = False, hf_name: str | None = None):
    def wrap(fn):
        SCALINGS[name] = Method(fn, keys, dynamic, hf_name)
        return fn
    return wrap


def base_inv_freq(d: int, b: float) -> torch.Tensor:
    """inv_freq_i = b^(-2i/d), computed in float32 the way transformers does it."""
    return 1.0 / (b ** (torch.arange(0, d, 2, dtype=torch.int64).float() / d))


@register("none", hf_name="default")
def _none(d, b, L, s, T, p):
    return base_inv_freq(d, b), 1.0


@register("linear", hf_name="linear")
def _linear(d, b, L, s, T, p):
    # Position Interpolation (Chen et al., arXiv 2306.15595): positions m -> m / s.
    return base_inv_freq(d, b) / s, 1.0


@register("ntk")
def _ntk(d, b, L, s, T, p):
    # NTK-aware scaling (bloc97, 2023; YaRN paper section 3.1): stretch the base so the slowest pair
    # is interpolated by s while the fastest pairs barely change.
    return base_inv_freq(d, b * s ** (d / (d - 2))), 1.0


@register("dynamic", dynamic=True, hf_name="dynamic")
def _dynamic(d, b, L, s, T, p):
    # Dynamic NTK (emozilla, 2023): NTK with a base that grows with the current length; plain
    # RoPE while T <= L.
    T = max(T or L, L)
    return base_inv_freq(d, b * ((s * T / L) - (s - 1)) ** (d / (d - 2))), 1.0


def yarn_correction_range(d: int, b: float, L: int, beta_fast: float, beta_slow: float) -> tuple[float, float]:
    """Indices of the pairs that make beta_fast and beta_slow full rotations over L (YaRN eq. 17-18)."""
    def dim_for(rotations):
        return d * math.log(L / (rotations * 2 * math.pi)) / (2 * math.log(b))
    low, high = math.floor(dim_for(beta_fast)), math.ceil(dim_for(beta_slow))
    return max(low, 0), min(high, d - 1)


@register("yarn", keys=("beta_fast", "beta_slow", "attention_factor"), hf_name="yarn")
def _yarn(d, b, L, s, T, p):
    # YaRN (Peng et al., arXiv 2309.00071): pairs that rotate many times within L keep their
    # frequency (extrapolate), pairs slower than one rotation are interpolated by s, a linear ramp
    # in between; plus an attention temperature 0.1 ln s + 1.
    low, high = yarn_correction_range(d, b, L, p.beta_fast or 32, p.beta_slow or 1)
    if low == high:
        high += 0.001
    ramp = ((torch.arange(d // 2, dtype=torch.float32) - low) / (high - low)).clamp(0, 1)
    inv = base_inv_freq(d, b)
    inv = (inv / s) * ramp + inv * (1 - ramp)
    if p.attention_factor is not None:  # transformers' override of the temperature
        return inv, float(p.attention_factor)
    return inv, (0.1 * math.log(s) + 1.0) if s > 1 else 1.0


@register("dynamic-yarn", keys=("beta_fast", "beta_slow", "attention_factor"), dynamic=True)
def _dynamic_yarn(d, b, L, s, T, p):
    # YaRN with the factor recomputed for the current length: s = max(1, T / L).
    return _yarn(d, b, L, max(1.0, (T or L) / L), T, p)


@register("llama3", keys=("low_freq_factor", "high_freq_factor"), hf_name="llama3")
def _llama3(d, b, L, s, T, p):
    # Llama 3.1 (Meta, 2024; transformers' _compute_llama3_parameters): wavelengths shorter than
    # L / high_freq_factor keep their frequency, longer than L / low_freq_factor are divided by s,
    # and a smooth blend in between.
    low, high = p.low_freq_factor or 1.0, p.high_freq_factor or 4.0
    inv = base_inv_freq(d, b)
    wavelength = 2 * math.pi / inv
    smooth = ((L / wavelength - low) / (high - low)).clamp(0, 1)  # 0: long (divided by s), 1: short (kept)
    return (inv / s) * (1 - smooth) + inv * smooth, 1.0


OPTIONAL_POSITIVE = ("original_max_position_embeddings", "beta_fast", "beta_slow", "attention_factor",
                     "low_freq_factor", "high_freq_factor")


def check_scaling(scaling: ScalingConfig | None, key: str = "scaling") -> None:
    """A UserError naming the key unless the method exists and every key set belongs to it and is in range."""
    if scaling is None:
        return
    if scaling.type not in SCALINGS:
        raise UserError(f"{key}: unknown RoPE scaling {scaling.type!r}; choose one of {', '.join(SCALINGS)}")
    allowed = COMMON_KEYS + SCALINGS[scaling.type].keys
    for name, value in scaling.to_dict().items():
        if name not in allowed:
            raise UserError(f"{key}: RoPE scaling {scaling.type!r} takes no key {name!r}; its keys: {', '.join(allowed)}")
    if not scaling.factor >= 1:
        raise UserError(f"{key}.factor must be >= 1, got {scaling.factor}")
    for name in OPTIONAL_POSITIVE:
        if getattr(scaling, name) is not None and not getattr(scaling, name) > 0:
            raise UserError(f"{key}.{name} must be > 0, got {getattr(scaling, name)}")
    if scaling.type in ("yarn", "dynamic-yarn") and not (scaling.beta_fast or 32) > (scaling.beta_slow or 1):
        raise UserError(f"{key}: beta_fast must be above beta_slow")
    if scaling.type == "llama3" and not (scaling.high_freq_factor or 4.0) > (scaling.low_freq_factor or 1.0):
        raise UserError(f"{key}: high_freq_factor must be above low_freq_factor")


def is_dynamic(scaling: ScalingConfig | None) -> bool:
    return scaling is not None and SCALINGS[scaling.type].dynamic


def rope_frequencies(head_dim: int, theta: float, scaling: ScalingConfig | None = None,
                     seq_len: int | None = None, device=None) -> tuple[torch.Tensor, float]:
    """(inv_freq [head_dim // 2], attention_factor) for RoPE with an optional scaling.

    `scaling` has passed check_scaling where it was parsed (a dynamic scaling comes here every forward)
    and needs original_max_position_embeddings unless its type is none. `seq_len` is the current
    length, used by the dynamic methods; `device` where the frequencies are built.
    """
    scaling = scaling or ScalingConfig()
    if head_dim % 2:
        raise UserError(f"RoPE needs an even head dimension, got {head_dim}")
    L = scaling.original_max_position_embeddings
    if scaling.type != "none" and not L:
        raise UserError(f"RoPE scaling {scaling.type!r} needs original_max_position_embeddings")
    with torch.device(device or "cpu"):  # built where it is used: no host-to-device copy in a step
        return SCALINGS[scaling.type].fn(head_dim, float(theta), L, float(scaling.factor), seq_len, scaling)


def rope_angles(positions: torch.Tensor, inv_freq: torch.Tensor, attention_factor: float = 1.0):
    """cos and sin of shape (T, d/2) for integer positions (T,)."""
    angles = positions.to(inv_freq.dtype)[:, None] * inv_freq[None, :]  # (T, d/2)
    return angles.cos() * attention_factor, angles.sin() * attention_factor


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate interleaved pairs of x (..., T, d) by the angles whose cos/sin are (T, d/2)."""
    x1, x2 = x.float().unflatten(-1, (-1, 2)).unbind(-1)  # each (..., T, d/2)
    out = torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1)
    return out.flatten(-2).type_as(x)
