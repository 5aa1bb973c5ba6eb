"""Rotary position embedding (RoFormer, arXiv 2104.09864) and its context-extension scalings.

Convention: INTERLEAVED pairs. Dimensions (0, 1), (2, 3), ... of a head form the 2-D planes that
pair i rotates by angle `position * inv_freq[i]`, as in the RoFormer paper. (Llama / Hugging Face
use the half-split pairing (i, i + d/2); convert/to_hf.py permutes q/k rows to convert.)

Each scaling method is a pure function registered in SCALINGS under its name, with the keys it
takes, whether it is dynamic and its Hugging Face `rope_type` name, and returns
`(inv_freq, attention_factor)`; the attention factor multiplies cos and sin (so q.k scores are scaled
by its square), exactly as transformers' `modeling_rope_utils.py` does. A scaling is the typed
`config.ScalingConfig` (parsed by `config.parse_scaling` wherever it comes from) and `check_scaling`
is the one check of its method and keys: an unknown method, a missing factor, a key the method does
not take or a value out of range is a UserError naming it. Every method also takes `layers`, the layers it
acts on (global: the full_attention layers of model.layer_types, or all; positions.scaled_layers). A method's
entry carries its keys with their defaults (read through `setting`) and its own rule. Adding a method is one
`@register` entry and one test.
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
    fn: Callable[..., tuple[torch.Tensor, float]]  # (d, b, L, s, T, scaling, device) -> (inv_freq, attention_factor)
    keys: dict[str, float | None]  # the method's own keys and their defaults, besides the common ones
    dynamic: bool  # the frequencies depend on the current length (keys are cached before rotation)
    hf_name: str | None  # transformers' rope_type, None where it has no equivalent
    needs_factor: bool  # s is the user's (dynamic-yarn takes it from the length)
    rule: Callable[[ScalingConfig], str | None] | None  # a relation between keys: what is wrong, or None
    temperature: bool  # its attention factor sharpens the softmax for long inputs (as log-n scaling does)


SCALINGS: dict[str, Method] = {}
COMMON_KEYS = ("type", "factor", "original_max_position_embeddings", "layers")
SCALED_LAYERS = ("global", "all")  # what a scaling's `layers` may say: the full_attention layers of layer_types, or all


def register(name: str, keys: dict[str, float | None] | None = None, dynamic: bool = False,
             hf_name: str | None = None, needs_factor: bool = True, rule=None, temperature: bool = False):
    def wrap(fn):
        SCALINGS[name] = Method(fn, keys or {}, dynamic, hf_name, needs_factor, rule, temperature)
        return fn
    return wrap


def setting(scaling: ScalingConfig, key: str) -> float | None:
    """A method key's value, or its method's default when the scaling leaves it out."""
    value = getattr(scaling, key)
    return SCALINGS[scaling.type].keys[key] if value is None else value


def base_inv_freq(d: int, b: float, device=None) -> torch.Tensor:
    """inv_freq_i = b^(-2i/d), computed in float32 the way transformers does it, on `device`."""
    return 1.0 / (b ** (torch.arange(0, d, 2, dtype=torch.int64, device=device).float() / d))


@register("none", hf_name="default", needs_factor=False)
def _none(d, b, L, s, T, p, device):
    return base_inv_freq(d, b, device), 1.0


@register("linear", hf_name="linear")
def _linear(d, b, L, s, T, p, device):
    # Position Interpolation (Chen et al., arXiv 2306.15595): positions m -> m / s.
    return base_inv_freq(d, b, device) / s, 1.0


@register("ntk")
def _ntk(d, b, L, s, T, p, device):
    # NTK-aware scaling (bloc97, 2023; YaRN paper section 3.1): stretch the base so the slowest pair
    # is interpolated by s while the fastest pairs barely change.
    return base_inv_freq(d, b * s ** (d / (d - 2)), device), 1.0


def at_least(T: int | torch.Tensor | None, floor: float) -> float | torch.Tensor:
    """max(T, floor) for the current length T of a dynamic method: an int (None: the floor), or a tensor on
    the device where a static KV cache keeps the length (no read-back), in float64 as Python computes the
    int case, so both give the same frequencies."""
    if torch.is_tensor(T):
        return T.double().clamp(min=floor)
    return max(T or floor, floor)


@register("dynamic", dynamic=True, hf_name="dynamic")
def _dynamic(d, b, L, s, T, p, device):
    # Dynamic NTK (emozilla, 2023): NTK with a base that grows with the current length; plain
    # RoPE while T <= L.
    T = at_least(T, L)
    return base_inv_freq(d, b * ((s * T / L) - (s - 1)) ** (d / (d - 2)), device), 1.0


def yarn_correction_range(d: int, b: float, L: int, beta_fast: float, beta_slow: float) -> tuple[float, float]:
    """Indices of the pairs that make beta_fast and beta_slow full rotations over L (YaRN eq. 17-18)."""
    def dim_for(rotations):
        return d * math.log(L / (rotations * 2 * math.pi)) / (2 * math.log(b))
    low, high = math.floor(dim_for(beta_fast)), math.ceil(dim_for(beta_slow))
    return max(low, 0), min(high, d - 1)


YARN_KEYS = {"beta_fast": 32.0, "beta_slow": 1.0, "attention_factor": None}  # the YaRN paper's defaults (section 4)


def yarn_rule(p: ScalingConfig) -> str | None:
    return None if setting(p, "beta_fast") > setting(p, "beta_slow") else "beta_fast must be above beta_slow"


@register("yarn", keys=YARN_KEYS, hf_name="yarn", rule=yarn_rule, temperature=True)
def _yarn(d, b, L, s, T, p, device):
    # YaRN (Peng et al., arXiv 2309.00071): pairs that rotate many times within L keep their
    # frequency (extrapolate), pairs slower than one rotation are interpolated by s, a linear ramp
    # in between; plus an attention temperature 0.1 ln s + 1.
    low, high = yarn_correction_range(d, b, L, setting(p, "beta_fast"), setting(p, "beta_slow"))
    if low == high:
        high += 0.001
    ramp = ((torch.arange(d // 2, dtype=torch.float32, device=device) - low) / (high - low)).clamp(0, 1)
    inv = base_inv_freq(d, b, device)
    inv = (inv / s) * ramp + inv * (1 - ramp)
    if p.attention_factor is not None:  # transformers' override of the temperature
        return inv, float(p.attention_factor)
    if torch.is_tensor(s):  # dynamic-yarn's factor from a length on the device; 1 at s = 1 as below
        return inv, 0.1 * torch.log(s) + 1.0
    return inv, (0.1 * math.log(s) + 1.0) if s > 1 else 1.0


@register("dynamic-yarn", keys=YARN_KEYS, dynamic=True, needs_factor=False, rule=yarn_rule, temperature=True)
def _dynamic_yarn(d, b, L, s, T, p, device):
    # YaRN with the factor recomputed for the current length: s = max(1, T / L).
    return _yarn(d, b, L, at_least(T, L) / L, T, p, device)


def llama3_rule(p: ScalingConfig) -> str | None:
    return (None if setting(p, "high_freq_factor") > setting(p, "low_freq_factor")
            else "high_freq_factor must be above low_freq_factor")


@register("llama3", keys={"low_freq_factor": 1.0, "high_freq_factor": 4.0}, hf_name="llama3", rule=llama3_rule)
def _llama3(d, b, L, s, T, p, device):
    # Llama 3.1 (Meta, 2024; transformers' _compute_llama3_parameters): wavelengths shorter than
    # L / high_freq_factor keep their frequency, longer than L / low_freq_factor are divided by s,
    # and a smooth blend in between.
    low, high = setting(p, "low_freq_factor"), setting(p, "high_freq_factor")
    inv = base_inv_freq(d, b, device)
    wavelength = 2 * math.pi / inv
    smooth = ((L / wavelength - low) / (high - low)).clamp(0, 1)  # 0: long (divided by s), 1: short (kept)
    return (inv / s) * (1 - smooth) + inv * smooth, 1.0


def longrope_rule(p: ScalingConfig) -> str | None:
    return (None if p.short_factor and p.long_factor else
            "longrope needs short_factor and long_factor (one factor per rotated pair each)")


@register("longrope", keys={"short_factor": None, "long_factor": None, "attention_factor": None}, dynamic=True,
          hf_name="longrope", rule=longrope_rule, temperature=True)
def _longrope(d, b, L, s, T, p, device):
    # LongRoPE (Ding et al., arXiv 2402.13753; transformers' _compute_longrope_parameters, as Phi-3 uses it): each
    # pair's frequency divided by a factor of its own, the short ones up to L and the long ones past it (found by
    # the paper's evolutionary search, read from the checkpoint's config), and cos and sin scaled by
    # sqrt(1 + ln s / ln L) (section 3.2 of the paper; s = 1 leaves them).
    short, long = p.short_factor, p.long_factor
    if len(short) != d // 2 or len(long) != d // 2:
        raise UserError(f"longrope: short_factor and long_factor need {d // 2} values each (one per rotated pair), "
                        f"got {len(short)} and {len(long)}")
    short, long = (torch.tensor(f, dtype=torch.float32, device=device) for f in (short, long))
    beyond = T is not None and T > L  # a 0-d tensor for a static cache's length: chosen on the device
    factors = torch.where(beyond, long, short) if torch.is_tensor(beyond) else (long if beyond else short)
    inv = base_inv_freq(d, b, device) / factors
    if p.attention_factor is not None:
        return inv, float(p.attention_factor)
    return inv, math.sqrt(1 + math.log(s) / math.log(L)) if s > 1 else 1.0


def check_scaling(scaling: ScalingConfig | None, key: str = "scaling") -> None:
    """A UserError naming the key unless the method exists, has the factor it needs, and every key set
    belongs to it and is in range."""
    if scaling is None:
        return
    if scaling.type not in SCALINGS:
        raise UserError(f"{key}: unknown RoPE scaling {scaling.type!r}; choose one of {', '.join(SCALINGS)}")
    method = SCALINGS[scaling.type]
    allowed = (*COMMON_KEYS, *method.keys)
    for name, value in scaling.to_dict().items():
        if name not in allowed:
            raise UserError(f"{key}: RoPE scaling {scaling.type!r} takes no key {name!r}; its keys: {', '.join(allowed)}")
    if method.needs_factor and scaling.factor is None:
        raise UserError(f"{key}: RoPE scaling {scaling.type!r} requires 'factor' (the context multiple s, e.g. "
                        f"{{type: {scaling.type}, factor: 4}})")
    if scaling.layers is not None and scaling.layers not in SCALED_LAYERS:
        raise UserError(f"{key}.layers must be {' or '.join(SCALED_LAYERS)} (the layers it acts on), got "
                        f"{scaling.layers!r}")
    if scaling.factor is not None and not scaling.factor >= 1:
        raise UserError(f"{key}.factor must be >= 1, got {scaling.factor}")
    for name in ("original_max_position_embeddings", *method.keys):
        value = getattr(scaling, name)
        if value is not None and not all(v > 0 for v in (value if isinstance(value, list) else [value])):
            raise UserError(f"{key}.{name} must be > 0, got {value}")
    problem = method.rule(scaling) if method.rule else None
    if problem:
        raise UserError(f"{key}: {problem}")


def missing_settings(name: str) -> str | None:
    """What a method needs beyond its factor and the original length (longrope: its two factor lists), or None. A
    model that does not carry those settings cannot be given the method from a name alone (`--scaling longrope`), so
    "every scaling a model takes" leaves such a method out."""
    method = SCALINGS[name]
    return method.rule(ScalingConfig(name, None if not method.needs_factor else 2.0, 128)) if method.rule else None


FROM_A_NAME = tuple(name for name in SCALINGS if missing_settings(name) is None)  # set here: every method registered


def is_dynamic(scaling: ScalingConfig | None) -> bool:
    return scaling is not None and SCALINGS[scaling.type].dynamic


def rope_frequencies(head_dim: int, theta: float, scaling: ScalingConfig | None = None,
                     seq_len: int | None = None, device=None) -> tuple[torch.Tensor, float]:
    """(inv_freq [head_dim // 2], attention_factor) for RoPE with an optional scaling.

    `scaling` has passed check_scaling where it was parsed (a dynamic scaling comes here every forward)
    and needs original_max_position_embeddings unless its type is none. `seq_len` is the current
    length, used by the dynamic methods: an int, or a 0-d tensor (a static KV cache's, never read back;
    the attention factor is then a tensor too); `device` where the frequencies are built.
    """
    scaling = scaling or ScalingConfig()
    if head_dim % 2:
        raise UserError(f"RoPE needs an even head dimension, got {head_dim}")
    L = scaling.original_max_position_embeddings
    if scaling.type != "none" and not L:
        raise UserError(f"RoPE scaling {scaling.type!r} needs original_max_position_embeddings")
    # built where it is used: no host-to-device copy in a step
    return SCALINGS[scaling.type].fn(head_dim, float(theta), L, float(scaling.factor or 1.0), seq_len, scaling, device)


def rope_angles(positions: torch.Tensor, inv_freq: torch.Tensor, attention_factor: float | torch.Tensor = 1.0):
    """cos and sin of shape (..., T, d/2) for integer positions (..., T); inv_freq (d/2,), or with leading
    dimensions that broadcast against (T, d/2) (Rope.chunk_context: frequencies per query)."""
    angles = positions.to(inv_freq.dtype)[..., None] * inv_freq  # (..., T, d/2)
    return angles.cos() * attention_factor, angles.sin() * attention_factor


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate interleaved pairs of x (..., T, d) by the angles whose cos/sin are (T, d/2). On the CPU, eager,
    each pair is a complex number multiplied by cos + i sin, one kernel each way (a 2-core CPU training
    step is 4% faster than with the four real products, studies/bench/history.md). On CUDA or inside
    torch.compile, the real products: inductor generates no code for complex operators and falls back to
    eager kernels around them (measured on an H100: studies/bench/gpu/README.md)."""
    if x.is_cuda or torch.compiler.is_compiling():
        x1, x2 = x.float().unflatten(-1, (-1, 2)).unbind(-1)
        return torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1).flatten(-2).type_as(x)
    return rotate_pairs(x, torch.complex(cos, sin))


def rotate_pairs(x: torch.Tensor, rotor: torch.Tensor) -> torch.Tensor:
    """x (..., d) with each interleaved pair, a complex number, multiplied by rotor (..., d/2), cos + i sin:
    apply_rope's CPU path, and the rotation of keys whose rotor is built once for every layer (Rope.chunk_context)."""
    pairs = torch.view_as_complex(x.float().unflatten(-1, (-1, 2)))  # a view: d is even
    return torch.view_as_real(pairs * rotor).flatten(-2).type_as(x)
