"""RoPE scaling (model/rope.py) against Hugging Face transformers and against its own definitions.

The oracle is transformers' `modeling_rope_utils.py` (a test-only dependency): for the same
(d, theta, L, s, T) our inverse frequencies must match its float32 ones and our attention factor
must equal its own. The property tests restate each method's paper in one line:
RoFormer (arXiv 2104.09864), Position Interpolation (arXiv 2306.15595), NTK-aware and dynamic NTK
(as described in YaRN, arXiv 2309.00071, section 3.1-3.3) and YaRN itself.
"""
import itertools
import math

import pytest
import torch

from config import ModelConfig, PositionConfig, ScalingConfig, UserError, parse_scaling
from model.gpt import GPT
from model.positions import Rope
from model.rope import (
    SCALINGS,
    apply_rope,
    check_scaling,
    rope_angles,
    rope_frequencies,
    setting,
    yarn_correction_range,
)

HEAD_DIMS = (16, 32, 64, 128)
THETAS = (10000.0, 500000.0)
LENGTHS = (256, 2048)
FACTORS = (1, 2, 4, 8, 16)  # transformers accepts any factor >= 1


def scaling(kind, factor, L, **extra):
    return ScalingConfig(kind, factor, L, **extra)


def unit_factors(kind, d):
    """LongRoPE's per-pair factor lists, all 1 (plain RoPE's frequencies); nothing for the other methods."""
    return {"short_factor": [1.0] * (d // 2), "long_factor": [1.0] * (d // 2)} if kind == "longrope" else {}


def parsed(value):
    """A scaling as every entry point reads it: parsed, then checked against the registry."""
    value = parse_scaling(value)
    check_scaling(value)
    return value


def plain(d, theta=10000.0):
    return rope_frequencies(d, theta)[0]


# ---------------------------------------------------------------- oracle: transformers


def hf_config(kind, d, theta, L, factor, low_freq_factor=1.0, high_freq_factor=4.0, **extra):
    """A Llama config whose RoPE is `kind`. transformers' dynamic NTK reads the original length from
    `max_position_embeddings`, while linear ignores it and yarn reads `original_max_position_embeddings`."""
    from transformers import LlamaConfig
    params = {"rope_type": kind, "rope_theta": theta}
    if kind != "default":
        params["factor"] = factor
    if kind in ("yarn", "llama3", "longrope"):
        params["original_max_position_embeddings"] = L
    if kind == "llama3":
        params.update(low_freq_factor=low_freq_factor, high_freq_factor=high_freq_factor)
    params.update(extra)  # longrope's factor lists
    return LlamaConfig(hidden_size=2 * d, num_attention_heads=2, num_key_value_heads=2, head_dim=d,
                       max_position_embeddings=L, rope_parameters=params)


def hf_frequencies(kind, d, theta, L, factor=1, seq_len=None):
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
    return ROPE_INIT_FUNCTIONS[kind](hf_config(kind, d, theta, L, factor), None, seq_len=seq_len)


def assert_matches_hf(ours, ref):
    (inv, factor), (ref_inv, ref_factor) = ours, ref
    assert inv.dtype == ref_inv.dtype == torch.float32 and inv.shape == ref_inv.shape
    torch.testing.assert_close(inv, ref_inv, rtol=1e-6, atol=0)
    assert factor == pytest.approx(ref_factor, rel=1e-12)


def test_llama3_matches_transformers_over_grid():
    pytest.importorskip("transformers")
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
    for d, theta, L, s in itertools.product(HEAD_DIMS, THETAS, LENGTHS, FACTORS):
        for low, high in ((1.0, 4.0), (2.0, 8.0)):
            ours = rope_frequencies(d, theta, scaling("llama3", s, L, low_freq_factor=low, high_freq_factor=high))
            ref = ROPE_INIT_FUNCTIONS["llama3"](hf_config("llama3", d, theta, L, s, low, high), None)
            assert_matches_hf(ours, ref)


@pytest.mark.parametrize("kind", ["linear", "yarn", "dynamic"])
def test_frequencies_match_transformers_over_grid(kind):
    pytest.importorskip("transformers")
    for d, theta, L, s in itertools.product(HEAD_DIMS, THETAS, LENGTHS, FACTORS):
        seq_lens = (L // 2, L, 3 * L, 16 * L) if kind == "dynamic" else (None,)
        for T in seq_lens:
            ours = rope_frequencies(d, theta, scaling(kind, s, L), seq_len=T)
            assert_matches_hf(ours, hf_frequencies(kind, d, theta, L, s, T))


@pytest.mark.parametrize("d, theta, L, s, beta_fast, beta_slow", [
    (16, 10000.0, 32768, 4, None, None),  # ramp would end past the last pair: clamped to d - 1, not d/2 - 1
    (64, 500.0, 2048, 8, None, None),
    (64, 10000.0, 2048, 4, 16, 2),  # non-default betas
    (32, 10000.0, 4096, 2.5, 64, 0.5),
])
def test_yarn_edge_cases_match_transformers(d, theta, L, s, beta_fast, beta_slow):
    pytest.importorskip("transformers")
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
    config = hf_config("yarn", d, theta, L, s)
    betas = {k: v for k, v in (("beta_fast", beta_fast), ("beta_slow", beta_slow)) if v is not None}
    config.rope_parameters.update(betas)
    ours = rope_frequencies(d, theta, scaling("yarn", s, L, **betas))
    assert_matches_hf(ours, ROPE_INIT_FUNCTIONS["yarn"](config, None))


def test_longrope_matches_transformers_over_grid():
    # Per-pair factors as a checkpoint's config holds them (random here), the short ones up to L, the long past it.
    pytest.importorskip("transformers")
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
    g = torch.Generator().manual_seed(0)
    for d, theta, L, s in itertools.product(HEAD_DIMS, THETAS, LENGTHS, FACTORS):
        short, long = (1 + torch.rand(d // 2, generator=g) * k for k in (0.5, 2 * s))
        keys = {"short_factor": short.tolist(), "long_factor": long.tolist()}
        config = hf_config("longrope", d, theta, L, s, **keys)
        for T in (None, L // 2, L, L + 1, 4 * L):
            ours = rope_frequencies(d, theta, parsed({"type": "longrope", "factor": s,
                                                      "original_max_position_embeddings": L, **keys}), seq_len=T)
            assert_matches_hf(ours, ROPE_INIT_FUNCTIONS["longrope"](config, None, seq_len=T))


def test_longrope_needs_a_factor_per_pair_and_picks_them_on_the_device():
    with pytest.raises(UserError, match="needs short_factor and long_factor"):
        parsed({"type": "longrope", "factor": 4, "original_max_position_embeddings": 64, "short_factor": [1.0]})
    with pytest.raises(UserError, match="must be > 0"):
        parsed({"type": "longrope", "factor": 4, "short_factor": [1.0, -1.0], "long_factor": [1.0, 2.0]})
    three = scaling("longrope", 4, 64, short_factor=[1.0] * 3, long_factor=[2.0] * 3)
    with pytest.raises(UserError, match="need 8 values each"):
        rope_frequencies(16, 1e4, three)
    keys = {"short_factor": [1.0] * 8, "long_factor": [4.0] * 8}
    for T in (64, 65):  # a static cache's length is a 0-d tensor: the same frequencies as the int
        as_int = rope_frequencies(16, 1e4, scaling("longrope", 4, 64, **keys), seq_len=T)
        as_tensor = rope_frequencies(16, 1e4, scaling("longrope", 4, 64, **keys), seq_len=torch.tensor(T))
        torch.testing.assert_close(as_int[0], as_tensor[0], rtol=0, atol=0)
    torch.testing.assert_close(rope_frequencies(16, 1e4, scaling("longrope", 4, 64, **keys), seq_len=65)[0],
                               plain(16) / 4)  # past L: every pair divided by its long factor


def test_plain_rope_matches_transformers_default():
    pytest.importorskip("transformers")
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding
    for d, theta in itertools.product(HEAD_DIMS, THETAS):
        ref = LlamaRotaryEmbedding.compute_default_rope_parameters(hf_config("default", d, theta, 256, 1))
        assert_matches_hf(rope_frequencies(d, theta), ref)


def test_ntk_matches_transformers_dynamic_at_fixed_length():
    # transformers has no static NTK, but its dynamic NTK with factor 1 at length s*L uses the base
    # b * (s*L/L)^(d/(d-2)), which is exactly NTK-aware scaling by s.
    pytest.importorskip("transformers")
    for d, theta, L, s in itertools.product(HEAD_DIMS, THETAS, LENGTHS, (2, 4, 8, 16)):
        ours = rope_frequencies(d, theta, scaling("ntk", s, L))
        assert_matches_hf(ours, hf_frequencies("dynamic", d, theta, L, 1, seq_len=s * L))


@pytest.mark.parametrize("kind", ["linear", "dynamic", "yarn"])
def test_rope_module_rotates_like_transformers(kind):
    # The whole path (frequencies, attention factor on cos/sin, rotation) of the model's RoPE module
    # against Llama's, at 3x the training length. Llama pairs dimension i with i + d/2; ours pairs
    # (2i, 2i+1), so we compare after moving our even dims to the first half and odd dims to the second.
    pytest.importorskip("transformers")
    from transformers.models.llama.modeling_llama import (
        LlamaRotaryEmbedding,
        apply_rotary_pos_emb,
    )
    d, L, s, T = 16, 16, 4, 48
    cfg = ModelConfig(vocab_size=8, d_model=2 * d, n_heads=2, n_kv_heads=2, max_seq_len=L,
                      position=PositionConfig(type="rope", scaling=ScalingConfig(kind, s)))
    torch.manual_seed(0)
    q, k = torch.randn(1, 2, T, d), torch.randn(1, 2, T, d)  # (B, nh, T, hs)
    positions = torch.arange(T)
    rope = Rope(cfg)
    q_ours, k_ours = rope.rotate(q, k, rope.context(positions, positions, positions, T))

    def half_split(x):
        return torch.cat((x[..., 0::2], x[..., 1::2]), dim=-1)
    cos, sin = LlamaRotaryEmbedding(hf_config(kind, d, 10000.0, L, s))(q, positions[None])
    q_hf, k_hf = apply_rotary_pos_emb(half_split(q), half_split(k), cos, sin)
    torch.testing.assert_close(half_split(q_ours), q_hf, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(half_split(k_ours), k_hf, rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------- properties


@pytest.mark.parametrize("kind", sorted(SCALINGS))
def test_factor_one_is_plain_rope(kind):
    # Dynamic methods rescale with the current length even at factor 1, so check them up to L only.
    L = 256
    seq_lens = (None, L // 2, L) if SCALINGS[kind].dynamic else (None, L, 4 * L)
    for d, T in itertools.product(HEAD_DIMS, seq_lens):
        inv, factor = rope_frequencies(d, 10000.0, scaling(kind, 1, L, **unit_factors(kind, d)), seq_len=T)
        torch.testing.assert_close(inv, plain(d), rtol=1e-6, atol=0)
        assert factor == 1.0


@pytest.mark.parametrize("s", [2, 4, 16, 3, 2.5])
def test_linear_equals_dividing_positions(s):
    # PI: rotating position m with inv_freq / s is rotating position m / s with inv_freq.
    positions = torch.arange(4 * 256).float()
    scaled, factor = rope_frequencies(64, 10000.0, scaling("linear", s, 256))
    assert factor == 1.0
    by_positions = rope_angles(positions / s, plain(64))
    by_frequencies = rope_angles(positions, scaled)
    # A power-of-two s is exact in binary; otherwise products near 1000 rad differ by float32 rounding.
    tol = 0.0 if math.log2(s).is_integer() else 1e-4
    for a, b in zip(by_positions, by_frequencies):
        torch.testing.assert_close(a, b, rtol=0, atol=tol)


def test_linear_model_at_even_positions_equals_plain_model():
    # End to end: a PI model (s = 2) fed positions 0, 2, 4, ... sees exactly the angles the plain
    # model sees at 0, 1, 2, ..., so the logits agree (our positions are integers, so we scale them up
    # rather than divide them down). The scaling is not part of the weights, so one seed builds both.
    def build(scale):
        cfg = ModelConfig(vocab_size=61, d_model=32, n_layers=2, n_heads=4, n_kv_heads=2, max_seq_len=16,
                          position=PositionConfig(type="rope", scaling=scale))
        torch.manual_seed(0)
        return GPT(cfg).eval()
    plain_model = build(None)
    scaled_model = build({"type": "linear", "factor": 2, "original_max_position_embeddings": 16})
    idx = torch.randint(0, 61, (2, 24), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        expected, _ = plain_model(idx, positions=torch.arange(24))
        got, _ = scaled_model(idx, positions=2 * torch.arange(24))
        unscaled_positions, _ = scaled_model(idx, positions=torch.arange(24))
    # Power-of-two s: (2m) * (inv_freq / 2) == m * inv_freq in binary, so this is exact.
    assert torch.equal(got, expected)
    # Attention is nearly uniform at init, so positions move logits only a little, but they do move.
    assert (unscaled_positions - expected).abs().max() > 1e-5


def test_dynamic_is_plain_up_to_original_length_then_ntk():
    d, L, s = 64, 256, 4
    for T in (None, 1, L // 2, L):
        inv, _ = rope_frequencies(d, 10000.0, scaling("dynamic", s, L), seq_len=T)
        torch.testing.assert_close(inv, plain(d), rtol=1e-6, atol=0)
    previous = plain(d)
    for T in (L + 1, 3 * L, 16 * L):
        inv, factor = rope_frequencies(d, 10000.0, scaling("dynamic", s, L), seq_len=T)
        assert factor == 1.0
        assert inv[0] == 1.0 and (inv[1:] < previous[1:]).all()  # every pair but the fastest slows down
        # ...and it is NTK-aware scaling with the effective factor s*T/L - (s-1).
        ntk, _ = rope_frequencies(d, 10000.0, scaling("ntk", s * T / L - (s - 1), L))
        torch.testing.assert_close(inv, ntk, rtol=1e-6, atol=0)
        previous = inv


@pytest.mark.parametrize("s", [2, 4, 8, 16])
def test_dynamic_yarn_at_s_times_L_is_static_yarn(s):
    for d, L in itertools.product(HEAD_DIMS, LENGTHS):
        dynamic = rope_frequencies(d, 10000.0, scaling("dynamic-yarn", 1, L), seq_len=s * L)
        static = rope_frequencies(d, 10000.0, scaling("yarn", s, L))
        torch.testing.assert_close(dynamic[0], static[0], rtol=0, atol=0)
        assert dynamic[1] == static[1]


@pytest.mark.parametrize("s", [2, 4, 8, 16, 3])
def test_ntk_interpolates_slowest_pair_by_s_and_keeps_fastest(s):
    # b' = b s^(d/(d-2)) makes the last pair's frequency b'^(-(d-2)/d) = b^(-(d-2)/d) / s exactly.
    for d in HEAD_DIMS:
        inv, factor = rope_frequencies(d, 10000.0, scaling("ntk", s, 256))
        base = plain(d)
        assert factor == 1.0
        assert inv[0] == base[0] == 1.0
        torch.testing.assert_close(inv[-1] * s, base[-1], rtol=1e-6, atol=0)


def test_yarn_attention_factor():
    assert rope_frequencies(64, 10000.0, scaling("yarn", 4, 2048))[1] == pytest.approx(1.1386, abs=1e-4)
    for s in (2, 8, 16, 2.5):
        assert rope_frequencies(64, 10000.0, scaling("yarn", s, 2048))[1] == pytest.approx(0.1 * math.log(s) + 1)


def test_yarn_keeps_fast_pairs_and_interpolates_slow_pairs():
    # YaRN section 3.2 ("NTK-by-parts"): pairs that turn more than beta_fast = 32 times within L are
    # left alone, pairs that turn less than beta_slow = 1 time are divided by s, a ramp in between.
    d, theta, L, s = 64, 10000.0, 2048, 4
    low, high = yarn_correction_range(d, theta, L, 32, 1)
    # fcd(r) = d ln(L / (2 pi r)) / (2 ln b): fcd(32) = 8.06 -> 8 and fcd(1) = 20.11 -> 21.
    assert (low, high) == (8, 21)
    inv, _ = rope_frequencies(d, theta, scaling("yarn", s, L))
    base = plain(d)
    assert torch.equal(inv[:low], base[:low])
    assert torch.equal(inv[high + 1:], base[high + 1:] / s)
    ramp = inv[low + 1:high] / base[low + 1:high]
    assert ((ramp < 1) & (ramp > 1 / s)).all() and (ramp.diff() < 0).all()


def test_yarn_betas_move_the_ramp():
    d, theta, L = 64, 10000.0, 2048
    default = rope_frequencies(d, theta, scaling("yarn", 4, L))[0]
    explicit = rope_frequencies(d, theta, scaling("yarn", 4, L, beta_fast=32, beta_slow=1))[0]
    narrow = rope_frequencies(d, theta, scaling("yarn", 4, L, beta_fast=8, beta_slow=2))[0]
    assert torch.equal(default, explicit) and not torch.equal(default, narrow)


@pytest.mark.parametrize("head_dim, scale, message", [
    (64, {"type": "rotary-magic", "factor": 2, "original_max_position_embeddings": 256}, "unknown RoPE scaling"),
    (64, {"type": "yarn", "factor": 2}, "original_max_position_embeddings"),
    (64, {"type": "linear", "factor": 0.5, "original_max_position_embeddings": 256}, "factor must be >= 1"),
    (63, None, "even head dimension"),
])
def test_bad_arguments_raise_with_a_message(head_dim, scale, message):
    with pytest.raises(ValueError, match=message):
        rope_frequencies(head_dim, 10000.0, parsed(scale))


def test_apply_rope_rotates_interleaved_pairs():
    # Pair i is dims (2i, 2i+1) (RoFormer eq. 34): a vector in pair 1 only turns by m * inv_freq[1].
    inv = plain(8)
    x = torch.zeros(1, 8)
    x[0, 2] = 1.0
    out = apply_rope(x, *rope_angles(torch.tensor([5]), inv))
    angle = 5 * inv[1].item()
    expected = torch.zeros(1, 8)
    expected[0, 2], expected[0, 3] = math.cos(angle), math.sin(angle)
    torch.testing.assert_close(out, expected)


# ---------------------------------------------------------------- one typed scaling config


def test_rope_type_is_the_same_key_as_type():
    assert parse_scaling({"rope_type": "yarn", "factor": 4}) == ScalingConfig("yarn", 4)
    (a, fa), (b, fb) = (rope_frequencies(32, 1e4, scaling("yarn", 4, 256)),
                        rope_frequencies(32, 1e4, parsed({"rope_type": "yarn", "factor": 4,
                                                          "original_max_position_embeddings": 256})))
    assert torch.equal(a, b) and fa == fb
    with pytest.raises(ValueError, match="type 'yarn' and rope_type 'linear'"):
        parse_scaling({"type": "yarn", "rope_type": "linear"})


@pytest.mark.parametrize("bad, named", [
    ({"type": "yarn", "factr": 4}, "scaling.factr"),
    ({"type": "linear", "factor": 4, "beta_fast": 32}, "'beta_fast'"),  # a key of another method
    ({"type": "llama3", "factor": 4, "beta_slow": 1}, "'beta_slow'"),
    ({"type": "rotary"}, "'rotary'"),
    ({"type": "yarn", "factor": 0.5}, "factor must be >= 1"),
    ({"type": "yarn", "factor": "four"}, "scaling.factor: expected float"),
    ({"type": "yarn", "factor": 4, "beta_fast": 1, "beta_slow": 2}, "beta_fast must be above beta_slow"),
    ({"type": "llama3", "factor": 8, "low_freq_factor": 4, "high_freq_factor": 1}, "high_freq_factor"),
    ({"type": "ntk", "factor": 2, "original_max_position_embeddings": -1}, "original_max_position_embeddings must be > 0"),
    ("yarn", "a mapping"),
])
def test_a_bad_scaling_is_one_error_naming_the_key(bad, named):
    with pytest.raises(ValueError, match=named):
        parsed(bad)


def test_every_method_takes_its_own_keys():
    for name, method in SCALINGS.items():
        values = {"beta_fast": 64.0, "beta_slow": 2.0, "attention_factor": 1.2, "low_freq_factor": 1.0,
                  "high_freq_factor": 8.0, **unit_factors("longrope", 32)}
        extra = {k: values[k] for k in method.keys}
        assert parsed({"type": name, "factor": 2, "original_max_position_embeddings": 64, **extra}).type == name
    assert rope_frequencies(32, 1e4, scaling("yarn", 4, 256, attention_factor=1.5))[1] == 1.5


@pytest.mark.parametrize("kind", [k for k in SCALINGS if any(v is not None for v in SCALINGS[k].keys.values())])
def test_a_method_key_left_out_takes_its_registry_default(kind):
    defaults = {k: v for k, v in SCALINGS[kind].keys.items() if v is not None}
    bare, explicit = scaling(kind, 4, 256), scaling(kind, 4, 256, **defaults)
    assert {k: setting(bare, k) for k in defaults} == defaults
    for a, b in zip(rope_frequencies(64, 1e4, bare, seq_len=1024), rope_frequencies(64, 1e4, explicit, seq_len=1024)):
        torch.testing.assert_close(a, b, atol=0, rtol=0)
    off = {k: v * 3 for k, v in defaults.items()}  # moved from the defaults, the frequencies change
    assert not torch.equal(rope_frequencies(64, 1e4, scaling(kind, 4, 256, **off), seq_len=1024)[0],
                           rope_frequencies(64, 1e4, bare, seq_len=1024)[0])


@pytest.mark.parametrize("kind", [k for k in SCALINGS if SCALINGS[k].needs_factor])
def test_a_method_that_scales_by_s_requires_the_factor(kind):
    with pytest.raises(UserError, match=f"'{kind}' requires 'factor'"):
        parsed({"type": kind, "original_max_position_embeddings": 256})
    assert parsed({"type": "dynamic-yarn", "original_max_position_embeddings": 256}).factor is None
