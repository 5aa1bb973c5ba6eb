"""The network: positional encodings against worked examples and hand-built references."""
import math

import pytest
import torch

from config import ModelConfig, PositionConfig, UserError
from model import attention
from model.attention import KVCache
from model.gpt import GPT
from model.positions import ENCODINGS, PositionError, alibi_slopes
from model.rope import apply_rope, rope_angles, rope_frequencies

ALL = sorted(ENCODINGS)


BIASES = ["t5", "kerple", "fire"]  # learned score biases, added as a float mask


def tiny(position="rope", **kw):
    scaling = kw.pop("scaling", None)
    fraction = kw.pop("rotary_fraction", 1.0)
    kept = kw.pop("kept_frequencies", 1.0)
    kw.setdefault("n_layers", 2)
    kw.setdefault("max_seq_len", 64)
    cfg = ModelConfig(vocab_size=97, d_model=32, n_heads=4, n_kv_heads=2, **kw,
                      position=PositionConfig(type=position, scaling=scaling, rotary_fraction=fraction,
                                              kept_frequencies=kept))
    torch.manual_seed(0)
    return GPT(cfg).eval()


def test_rope_worked_example():
    # d = 4, theta = 10000, position 1: pair (0,1) turns by 1 rad, pair (2,3) by 0.01 rad.
    inv_freq, factor = rope_frequencies(4, 10000.0)
    cos, sin = rope_angles(torch.tensor([1]), inv_freq, factor)
    out = apply_rope(torch.tensor([[0.8, 0.3, -0.5, 0.2]]), cos, sin)
    assert out[0].tolist() == pytest.approx([0.179, 0.836, -0.502, 0.195], abs=1e-3)


def test_rope_scores_depend_only_on_relative_position():
    torch.manual_seed(0)
    q, k = torch.randn(1, 64), torch.randn(1, 64)
    inv_freq, _ = rope_frequencies(64, 10000.0)

    def score(m, n):
        qm = apply_rope(q, *rope_angles(torch.tensor([m]), inv_freq))
        kn = apply_rope(k, *rope_angles(torch.tensor([n]), inv_freq))
        return (qm * kn).sum().item()
    assert score(7, 3) == pytest.approx(score(104, 100), abs=1e-4)
    assert score(50, 0) == pytest.approx(score(250, 200), abs=1e-4)
    assert score(7, 3) != pytest.approx(score(8, 3), abs=1e-3)


def test_alibi_slopes():
    assert alibi_slopes(8).tolist() == [2.0 ** -i for i in range(1, 9)]
    # Not a power of two: the 4-head slopes, then every other slope of the 8-head sequence.
    assert alibi_slopes(6).tolist() == [2 ** -2, 2 ** -4, 2 ** -6, 2 ** -8, 2 ** -1, 2 ** -3]
    twelve = alibi_slopes(12).tolist()
    assert twelve[:8] == [2.0 ** -i for i in range(1, 9)]
    assert twelve[8:] == pytest.approx([2 ** -0.5, 2 ** -1.5, 2 ** -2.5, 2 ** -3.5])


def test_alibi_equals_hand_built_bias():
    model = tiny("alibi")
    attn, T = model.blocks[0].attn, 10
    torch.manual_seed(1)
    x = torch.randn(2, T, 32)
    pos = torch.arange(T)
    got = attn(x, model.position.context(pos, pos, pos, T), model.position)
    q = attn.q_proj(x).view(2, T, 4, 8).transpose(1, 2)
    k = attn.k_proj(x).view(2, T, 2, 8).transpose(1, 2).repeat_interleave(2, dim=1)
    v = attn.v_proj(x).view(2, T, 2, 8).transpose(1, 2).repeat_interleave(2, dim=1)
    scores = q @ k.transpose(-1, -2) / math.sqrt(8)
    slopes = torch.tensor([2 ** -2, 2 ** -4, 2 ** -6, 2 ** -8])
    for h in range(4):
        for i in range(T):
            for j in range(T):
                scores[:, h, i, j] += -slopes[h] * (i - j) if j <= i else -math.inf
    want = attn.o_proj((scores.softmax(-1) @ v).transpose(1, 2).reshape(2, T, 32))
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


@torch.no_grad()  # FlexAttention has no CPU backward
def test_flex_attention_equals_mask_path():
    model = tiny("alibi")
    idx = torch.randint(0, 97, (2, 48))
    want, _ = model(idx)
    model.use_flex_attention(True)
    got, _ = model(idx)
    torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)


@torch.no_grad()  # FlexAttention has no CPU backward; a training-mode forward traces the same graph
def test_a_compiled_flex_model_does_not_recompile_after_its_first_step(monkeypatch):
    # The block mask is built outside the traced region (one graph break per forward), so new batches
    # of the same shape reuse the compiled frames; and after the model's compile, eager calls still go
    # through the kernel compiled_flex built, not one left behind by the trace.
    from torch._dynamo.testing import CompileCounter

    from model import attention
    torch._dynamo.reset()
    model = tiny("alibi").train()
    model.use_flex_attention(True)
    counter = CompileCounter()
    compiled = torch.compile(model, backend=counter)
    frames = []
    for step in range(3):
        torch.manual_seed(step)
        compiled(torch.randint(0, 97, (2, 64)), torch.randint(0, 97, (2, 64)))
        frames.append(counter.frame_count)
    assert frames[0] >= 1 and frames[1:] == [frames[0]] * 2, frames
    kernel, calls = attention.compiled_flex("cpu"), []
    monkeypatch.setitem(attention._flex_kernels, "cpu", lambda *a, **kw: calls.append(1) or kernel(*a, **kw))
    model.eval()(torch.randint(0, 97, (1, 32)))
    assert len(calls) == model.cfg.n_layers


def test_the_commands_import_the_model_without_torch_dynamo():
    """torch._dynamo takes seconds to import: the model wraps its flex block mask in torch.compiler.disable when
    flex is switched on (GPT.use_flex_attention), not at import, so train.py, generate.py and the evaluators
    start without it."""
    import subprocess
    import sys
    from pathlib import Path
    code = "import sys, train, generate, eval.tasks, eval.extrapolation; print('torch._dynamo' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], cwd=Path(__file__).resolve().parents[1], capture_output=True,
                         text=True, check=True).stdout
    assert out.strip() == "False"


@pytest.mark.parametrize("position", ALL)
@pytest.mark.parametrize("own_positions", [False, True])
def test_a_compiled_training_step_is_one_graph_without_host_reads(position, own_positions):
    # nothing in the step reads a tensor back to the host (a graph break and a device sync each): the
    # learned biases know their positions are consecutive from GPT.forward instead of checking them, and
    # per-sequence positions (train.positions) are read back only to check a learned table's end
    from torch._dynamo.testing import CompileCounter
    torch._dynamo.reset()
    model, counter = tiny(position).train(), CompileCounter()
    compiled = torch.compile(model, backend=counter)
    for step in range(2):
        torch.manual_seed(step)
        top = 64 if position == "learned" else 200  # learned: inside its table
        positions = per_sequence_positions(B=2, T=64, top=top) if own_positions else None
        compiled(torch.randint(0, 97, (2, 64)), torch.randint(0, 97, (2, 64)), positions=positions)[1].backward()
    assert counter.frame_count == (2 if position == "learned" and own_positions else 1)


@pytest.mark.parametrize("scaling", [None, {"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64}])
def test_rope_reads_a_training_step_angles_from_its_table_with_the_same_numbers(scaling):
    # cos and sin of positions 0 .. max_seq_len - 1 are computed once (with a static scaling's attention
    # factor), bit for bit those computed per forward; longer inputs and a cache still compute them
    model = tiny(scaling=scaling)
    pe, idx = model.position, torch.randint(0, 97, (2, 64))
    pos = torch.arange(48)
    ctx = pe.context(pos, pos, pos, 48, consecutive=True)
    assert ctx.q_angles[0].data_ptr() == pe.cos_table.data_ptr()  # read from the table, not computed
    for got, want in zip(ctx.q_angles, rope_angles(pos, pe.inv_freq, pe.attention_factor)):
        assert torch.equal(got, want)
    with torch.no_grad():
        from_table = model(idx)[0]
        pe.cos_table = pe.sin_table = None
        assert torch.equal(model(idx)[0], from_table)


def test_a_compiled_rope_training_step_does_no_trigonometry():
    # inductor would otherwise recompute cos and sin inside every layer's rotation kernel
    from torch._dynamo.testing import EagerAndRecordGraphs
    torch._dynamo.reset()
    model, backend = tiny("rope").train(), EagerAndRecordGraphs()
    torch.compile(model, backend=backend)(torch.randint(0, 97, (2, 64)), torch.randint(0, 97, (2, 64)))[1].backward()
    code = "".join(graph.code for graph in backend.graphs)
    assert len(backend.graphs) == 1 and ".cos(" not in code and ".sin(" not in code and "torch.cos" not in code


@torch.no_grad()
def test_a_compiled_model_decodes_without_recompiling_per_token():
    # the cache keeps its next position as a Python int: no read-back from the device, and no new frame
    # for each key length once the second step has made the shapes dynamic
    from torch._dynamo.testing import CompileCounter
    torch._dynamo.reset()
    model, counter = tiny("rope"), CompileCounter()
    compiled = torch.compile(model, backend=counter)
    idx, cache = torch.randint(0, 97, (1, 40)), KVCache(2)
    steps = [compiled(idx[:, :16], cache=cache)[0]]
    frames = []
    for i in range(16, 40):
        steps.append(compiled(idx[:, i:i + 1], cache=cache)[0])
        frames.append(counter.frame_count)
    assert frames[-1] == frames[2] <= 4, frames
    torch.testing.assert_close(torch.cat(steps, dim=1), model(idx)[0], atol=1e-4, rtol=1e-4)


DECODED = ALL + ["dynamic", "dynamic-yarn"]  # every encoding, and RoPE's scalings that follow the length


def decoding_model(position: str) -> GPT:
    """A model to decode 100 tokens with, past L = 32 (learned: inside its table of 128), its logits spread
    (init_std 0.3) so that float rounding between attention paths does not decide a greedy choice."""
    scaling = None
    if position.startswith("dynamic"):
        position, scaling = "rope", {"type": position, "factor": 2.0, "original_max_position_embeddings": 32}
    return tiny(position, scaling=scaling, init_std=0.3, max_seq_len=128 if position == "learned" else 32)


@torch.no_grad()
@pytest.mark.parametrize("position", DECODED)
def test_a_compiled_decode_is_one_graph_for_every_token_with_the_tokens_of_eager_decoding(position):
    # generate_tokens with a compiled step fills a static cache: every step has the same shapes and reads
    # nothing back, so the first step's graph serves all 100 tokens (the prefill runs eagerly)
    from torch._dynamo.testing import CompileCounter

    from generate import generate_tokens
    torch._dynamo.reset()
    model, counter = decoding_model(position), CompileCounter()
    step = torch.compile(model, backend=counter, dynamic=False)
    prompt = list(range(8))
    want = list(generate_tokens(model, prompt, 100, temperature=0))
    got, graphs = [], []
    for token in generate_tokens(model, prompt, 100, temperature=0, step=step):
        got.append(token)
        graphs.append(counter.frame_count)
    assert got == want
    assert graphs == [0] + [1] * 99


@torch.no_grad()
@pytest.mark.parametrize("position", DECODED)
def test_a_static_cache_decodes_as_a_growing_one_also_as_a_sliding_window(position):
    # the growing cache starts at 5 slots and doubles; the static one holds 60, its window hides by mask
    # the keys that trim() removes
    model = decoding_model(position)
    idx = torch.randint(0, 97, (1, 60), generator=torch.Generator().manual_seed(1))
    for window in (None, 12):
        growing, static = KVCache(model.cfg.n_layers, capacity=5), KVCache(model.cfg.n_layers, capacity=60)
        want, got = [model(idx[:, :9], cache=growing)[0][:, -1]], [model(idx[:, :9], cache=static)[0][:, -1]]
        static.make_static(window)
        for i in range(9, 60):
            if window:
                growing.trim(window - 1)
            want.append(model(idx[:, i:i + 1], cache=growing)[0][:, -1])
            got.append(model(idx[:, i:i + 1], cache=static)[0][:, -1])
        torch.testing.assert_close(torch.stack(got), torch.stack(want), atol=1e-5, rtol=1e-5)
        assert static.slots.tolist() == list(range(60)) and len(growing) == (window or 60)


@torch.no_grad()
@pytest.mark.parametrize("position", ["rope", "alibi", "dynamic"])
def test_matrices_held_in_bf16_decode_as_autocast_does_with_float32_weights(position):
    # generate.for_decoding on CUDA: autocast rounds each float32 matrix to bf16 at every step; holding them in
    # bf16 once must give the same logits bit for bit (checked under the CPU's own bf16 autocast)
    import copy

    from model.gpt import round_matrices
    model = decoding_model(position)
    rounded = round_matrices(copy.deepcopy(model), torch.bfloat16)
    linears = [m for m in rounded.modules() if isinstance(m, torch.nn.Linear)]
    assert len(linears) == 7 * model.cfg.n_layers + 1 and all(m.weight.dtype == torch.bfloat16 for m in linears)
    floats = [rounded.embed.weight, rounded.norm.weight, rounded.blocks[0].attn_norm.weight]
    assert all(p.dtype == torch.float32 for p in floats)  # the embedding is untied from the output projection
    assert torch.equal(rounded.embed.weight, model.embed.weight)
    idx = torch.randint(0, 97, (1, 40), generator=torch.Generator().manual_seed(2))
    logits = []
    for m in (model, rounded):
        cache, out = KVCache(m.cfg.n_layers, capacity=40), []
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out.append(m(idx[:, :20], cache=cache)[0])
            out += [m(idx[:, i:i + 1], cache=cache)[0] for i in range(20, 40)]  # past L = 32
        logits.append(torch.cat(out, dim=1))
    assert logits[0].dtype == torch.bfloat16 and torch.equal(logits[1], logits[0])


@torch.no_grad()
@pytest.mark.parametrize("position", ["alibi", "t5"])
def test_flex_decoding_compiles_a_bounded_number_of_times(position, monkeypatch):
    # The kernel is compiled with dynamic shapes (as on CUDA; counted with dynamo's counting backend,
    # since the CPU's own compiled flex is not used): the prefill and one-token decoding compile once
    # each, not once per key length, and the cached decoding equals a full pass.
    from torch._dynamo.testing import CompileCounter
    from torch.nn.attention.flex_attention import flex_attention

    from model import attention
    torch._dynamo.reset()
    counter = CompileCounter()
    monkeypatch.setitem(attention._flex_kernels, "cpu", torch.compile(flex_attention, dynamic=True, backend=counter))
    model = tiny(position)
    idx = torch.randint(0, 97, (1, 80))
    want, _ = model(idx)
    model.use_flex_attention(True)
    cache = KVCache(model.cfg.n_layers)
    steps = [model(idx[:, :16], cache=cache)[0]] + [model(idx[:, i:i + 1], cache=cache)[0] for i in range(16, 80)]
    assert 1 <= counter.frame_count <= 3
    torch.testing.assert_close(torch.cat(steps, dim=1), want, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("T", [64, 4096])
def test_folded_alibi_equals_the_explicit_bias(T):
    """ALiBi's bias folded into q and k gives the scores of the bias added to them, also at 4k tokens
    where the folded products are large."""
    model = tiny("alibi", n_layers=1)
    attn, pe = model.blocks[0].attn, model.position
    torch.manual_seed(2)
    q, k, v = torch.randn(1, 4, T, 8), torch.randn(1, 2, T, 8), torch.randn(1, 2, T, 8)
    pos = torch.arange(T)
    got = attn.attend(q, k, v, pe.context(pos, pos, pos, T), pe)
    mask = torch.zeros(T, T).masked_fill_(pos[None, :] > pos[:, None], float("-inf")) + pe.score_bias(pos, pos)
    want = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)
    torch.testing.assert_close(got, want, atol=2e-4, rtol=1e-4)


@pytest.mark.parametrize("position", ALL + ["rope-yarn", "rope-partial", "p-rope"])
def test_kv_cache_decoding_past_the_training_length_equals_full_forward(position):
    # L = 16 here, decoded to 40 tokens (learned: within its table). Dynamic scalings: the next test.
    scaling, L, n, fraction, kept = None, 16, 40, 1.0, 1.0
    if position == "rope-yarn":
        position, scaling = "rope", {"type": "yarn", "factor": 2.0, "original_max_position_embeddings": L}
    if position == "rope-partial":
        position, fraction = "rope", 0.5
    if position == "p-rope":
        position, kept = "rope", 0.5
    if position == "learned":
        L = 64
    model = tiny(position, scaling=scaling, max_seq_len=L, rotary_fraction=fraction, kept_frequencies=kept)
    idx = torch.randint(0, 97, (2, n))
    full, _ = model(idx)
    cache = KVCache(model.cfg.n_layers)
    steps = [model(idx[:, :9], cache=cache)[0]]
    steps += [model(idx[:, i:i + 1], cache=cache)[0] for i in range(9, n)]
    torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("position", ["rope", "alibi", "nope"])
def test_a_long_chunk_after_a_cache_is_attended_in_query_blocks_reading_only_the_keys_they_see(position, monkeypatch):
    model = tiny(position)
    idx = torch.randint(0, 97, (2, 49))
    full, _ = model(idx)

    def chunk_after_cache(block: int) -> tuple[torch.Tensor, list[int]]:
        monkeypatch.setattr(attention, "QUERY_BLOCK", block)
        keys, sdpa = [], torch.nn.functional.scaled_dot_product_attention

        def counted(q, k, *args, **kw):
            keys.append(k.shape[-2])
            return sdpa(q, k, *args, **kw)
        cache = KVCache(model.cfg.n_layers)
        model(idx[:, :9], cache=cache)
        with monkeypatch.context() as m:
            m.setattr(torch.nn.functional, "scaled_dot_product_attention", counted)
            logits, _ = model(idx[:, 9:], cache=cache)
        return logits, keys

    one_call, keys = chunk_after_cache(block=64)
    assert keys == [49] * model.cfg.n_layers  # 40 queries after 9 cached keys: one call over every key
    blocked, keys = chunk_after_cache(block=16)
    assert keys == [25, 41, 49] * model.cfg.n_layers  # each block up to its last query
    torch.testing.assert_close(blocked, one_call, atol=1e-6, rtol=1e-6)
    torch.testing.assert_close(blocked, full[:, 9:], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("position", ["rope", "alibi", "nope", "sinusoidal", *BIASES])
def test_sliding_kv_cache_equals_a_forward_over_the_window_at_absolute_positions(position):
    # One layer: with more, cached keys of later layers also carry what their tokens saw of
    # tokens that have left the window (as in any rolling KV cache).
    model = tiny(position, max_seq_len=16, n_layers=1)
    idx = torch.randint(0, 97, (1, 40))
    window, cache = 12, KVCache(model.cfg.n_layers)
    model(idx[:, :window], cache=cache)
    for i in range(window, 40):
        cache.trim(window - 1)
        step, _ = model(idx[:, i:i + 1], cache=cache)
        want, _ = model(idx[:, i - window + 1:i + 1], positions=torch.arange(i - window + 1, i + 1))
        torch.testing.assert_close(step[0, -1], want[0, -1], atol=1e-5, rtol=1e-5)
    assert cache.positions.tolist() == list(range(40 - window, 40))


@pytest.mark.parametrize("kind", ["dynamic", "dynamic-yarn"])
def test_kv_cache_re_rotates_keys_for_dynamic_scaling(kind):
    # Frequencies change with the length, so the cache holds keys before rotation: every decoding
    # step past L = 16 must equal a full forward over the prefix (one layer, so no earlier outputs
    # computed at a shorter length are reused).
    model = tiny("rope", n_layers=1, scaling={"type": kind, "factor": 2.0, "original_max_position_embeddings": 16})
    idx = torch.randint(0, 97, (1, 40))
    cache = KVCache(1)
    model(idx[:, :9], cache=cache)
    for i in range(9, 40):
        step, _ = model(idx[:, i:i + 1], cache=cache)
        full, _ = model(idx[:, :i + 1])
        torch.testing.assert_close(step[0, -1], full[0, -1], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("kind,fraction", [("dynamic", 1.0), ("dynamic-yarn", 1.0), ("dynamic-yarn", 0.5)])
def test_dynamic_scaling_decodes_a_chunk_exactly_as_token_by_token(kind, fraction):
    # In a chunk of decoded tokens each takes the frequencies of its own length, for its query and
    # every key it reads: chunks of 7 (crossing L = 16, then growing past it) give the logits of
    # one-token steps, over two layers, grouped heads and a partly rotated head.
    model = tiny("rope", rotary_fraction=fraction, init_std=0.3,
                 scaling={"type": kind, "factor": 2.0, "original_max_position_embeddings": 16})
    idx = torch.randint(0, 97, (2, 45))

    def decode(chunk):
        cache = KVCache(model.cfg.n_layers)
        edges = [0, 12, *range(12 + chunk, 45, chunk), 45]
        return torch.cat([model(idx[:, a:b], cache=cache)[0] for a, b in zip(edges, edges[1:])], dim=1)
    torch.testing.assert_close(decode(7), decode(1), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("position", ALL)
def test_only_nope_ignores_the_order_of_the_context(position):
    # One attention layer; the last token (the query) is the same, the context [A, B, C] is reversed.
    model = tiny(position, n_layers=1)
    a, b, c, query = 5, 17, 42, 8
    forward, _ = model(torch.tensor([[a, b, c, query]]))
    backward, _ = model(torch.tensor([[c, b, a, query]]))
    same = torch.allclose(forward[0, -1], backward[0, -1], atol=1e-6)
    assert same == (position == "nope")


def test_learned_positions_stop_at_the_table():
    model = tiny("learned")
    model(torch.zeros(1, 64, dtype=torch.long))
    with pytest.raises(PositionError, match="past|stop"):
        model(torch.zeros(1, 65, dtype=torch.long))


def test_config_errors_name_the_problem():
    # Shapes are checked by the config layer; the registry names where the registry lives (model/), once,
    # where a config is parsed (train.resolve, checkpoint.model_config): GPT trusts a parsed config.
    from model.positions import check
    with pytest.raises(UserError, match="model.n_heads .4. must be a multiple of model.n_kv_heads .3."):
        ModelConfig(vocab_size=10, n_kv_heads=3).validate()
    with pytest.raises(UserError, match="unknown encoding 'rotary'.*alibi, fire, fox, kerple, learned, nope, rope, sinusoidal, t5"):
        check(ModelConfig(vocab_size=10, position=PositionConfig(type="rotary")))
    with pytest.raises(UserError, match="even head dimension"):
        check(ModelConfig(vocab_size=10, d_model=60, n_heads=4, n_kv_heads=2))
    check(ModelConfig(vocab_size=10, position=PositionConfig(rotary_fraction=0.25)))  # 8 of 32 dims
    with pytest.raises(UserError, match=r"to rotate, got d_model/n_heads x rotary_fraction = 32 x 0.3 = 9.6"):
        check(ModelConfig(vocab_size=10, position=PositionConfig(rotary_fraction=0.3)))
    with pytest.raises(UserError, match=r"32 x 0.03125 = 1"):
        check(ModelConfig(vocab_size=10, position=PositionConfig(rotary_fraction=1 / 32)))
    with pytest.raises(UserError, match="model.position.rotary_fraction applies to rope only, not 'alibi'"):
        ModelConfig(vocab_size=10, position=PositionConfig(type="alibi", rotary_fraction=0.5)).validate()
    with pytest.raises(UserError, match="model.position.buckets applies to t5 only, not 'rope'"):
        ModelConfig(vocab_size=10, position=PositionConfig(buckets=16)).validate()
    with pytest.raises(UserError, match=r"model.position.max_distance must be above buckets / 2 = 16"):
        ModelConfig(vocab_size=10, position=PositionConfig(type="t5", max_distance=16)).validate()


def test_gradients_reach_every_parameter():
    model = tiny("learned").train()
    idx, targets = torch.randint(0, 97, (2, 2, 16))
    _, loss = model(idx, targets)
    loss.backward()
    assert loss.item() == pytest.approx(math.log(97), rel=0.1)  # near-uniform predictions at init
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in model.parameters())


def encoding_to_token_rms(position: str, d_model: int = 128) -> float:
    """RMS of what the encoding adds to the embeddings over positions 0..L-1, over the RMS of the
    scaled token embeddings, at init."""
    cfg = ModelConfig(vocab_size=4096, d_model=d_model, max_seq_len=256, position=PositionConfig(type=position))
    torch.manual_seed(0)
    model = GPT(cfg)
    with torch.no_grad():
        tokens = model.embed.weight * model.embed_scale
        added = model.position.embed(torch.zeros(256, d_model), torch.arange(256))
    return float(added.pow(2).mean().sqrt() / tokens.pow(2).mean().sqrt())


def test_additive_encodings_start_at_the_token_scale():
    # one rule (model/positions.py): a fixed encoding matches the tokens' RMS; a learned table is
    # initialised like every weight and added unscaled, 1/sqrt(d) of the tokens
    assert encoding_to_token_rms("sinusoidal") == pytest.approx(1.0, rel=0.01)
    assert encoding_to_token_rms("sinusoidal", d_model=512) == pytest.approx(1.0, rel=0.01)
    assert encoding_to_token_rms("learned") == pytest.approx(128 ** -0.5, rel=0.05)
    assert encoding_to_token_rms("learned", d_model=512) == pytest.approx(512 ** -0.5, rel=0.05)


def test_sinusoid_is_sin_at_even_and_cos_at_odd_dimensions():
    from model.positions import sinusoid_table
    d, pos = 8, torch.tensor([0, 1, 5])
    table = sinusoid_table(pos, d)
    for j in range(d // 2):
        angle = pos.float() / 10000.0 ** (2 * j / d)  # Vaswani et al. (arXiv 1706.03762) section 3.5
        torch.testing.assert_close(table[:, 2 * j], angle.sin())
        torch.testing.assert_close(table[:, 2 * j + 1], angle.cos())


def test_t5_buckets_match_a_hand_computation():
    # 32 buckets, max distance 128 (T5's defaults): distances 0-15 exact, then
    # 16 + floor(log(n / 16) / log(128 / 16) * 16): n = 31 -> 16 + floor(5.09) = 21, 64 -> 16 + floor(10.67) = 26,
    # 127 -> 16 + floor(15.94) = 31; 128 and beyond: the last bucket, 31.
    from model.positions import t5_bucket
    n = torch.tensor([0, 1, 15, 16, 31, 32, 64, 127, 128, 1000])
    assert t5_bucket(n, 32, 128).tolist() == [0, 1, 15, 16, 21, 21, 26, 31, 31, 31]
    assert t5_bucket(torch.tensor([3, 4, 7, 8, 100]), 8, 16).tolist() == [3, 4, 5, 6, 7]  # 4 + floor(log(n/4)/log 4 * 4)


def test_t5_bias_looks_up_one_scalar_per_head_and_bucket():
    model = tiny("t5")
    with torch.no_grad():
        model.position.table.weight.copy_(torch.arange(32 * 4, dtype=torch.float32).view(32, 4))
    pos = torch.arange(40)
    bias = model.position.score_bias(pos, pos)
    assert bias[2, 35, 5].item() == 20 * 4 + 2  # distance 30: 16 + floor(4.84) = bucket 20, head 2
    assert bias[0, 7, 7].item() == 0 and bias[3, 9, 1].item() == 8 * 4 + 3


def test_kerple_bias_matches_a_hand_computation():
    model = tiny("kerple")
    with torch.no_grad():
        model.position.r1.copy_(torch.tensor([1.5, 0.5, 2.0, -3.0]))  # the last is clamped to 0.01
        model.position.r2.copy_(torch.tensor([0.2, 1.0, 0.0, 1.0]))  # r2 = 0 is clamped to 0.01 too
    bias = model.position.score_bias(torch.tensor([10]), torch.tensor([7]))[:, 0, 0]
    want = [-1.5 * math.log(1 + 0.2 * 3), -0.5 * math.log(4), -2.0 * math.log(1 + 0.01 * 3), -0.01 * math.log(4)]
    assert bias.tolist() == pytest.approx(want, rel=1e-6)


@pytest.mark.parametrize("grad", [True, False])  # training's MLP, evaluation's piecewise-linear segments
def test_fire_bias_matches_a_hand_computation(grad):
    model = tiny("fire")  # L = 64
    pe = model.position
    with torch.no_grad():
        pe.c.fill_(0.5)
        pe.w1.zero_(), pe.b1.zero_(), pe.w2.zero_()
        pe.w1[:2] = torch.tensor([1.0, -1.0])
        pe.b1[:2] = torch.tensor([0.0, 0.5])
        pe.w2[:, :2] = torch.tensor([[1.0, 0.0], [0.0, 1.0], [2.0, 3.0], [0.0, 0.0]])
        pe.b2.copy_(torch.tensor([0.0, 0.0, 0.0, 0.25]))

    def f(x):  # the MLP by hand: hidden units relu(x) and relu(0.5 - x)
        return [max(x, 0), max(0.5 - x, 0), 2 * max(x, 0) + 3 * max(0.5 - x, 0), 0.25]
    psi = lambda x: math.log(0.5 * x + 1)  # noqa: E731
    for i, j in [(10, 4), (100, 0), (100, 99), (5, 5)]:
        with torch.set_grad_enabled(grad):
            got = pe.score_bias(torch.tensor([i]), torch.tensor([j]))[:, 0, 0].tolist()
        assert got == pytest.approx(f(psi(i - j) / psi(max(64, i))), rel=1e-5, abs=1e-7), (i, j)


def test_fire_segments_are_the_mlp():
    model = tiny("fire")
    pos = torch.arange(500)
    with torch.no_grad():
        model.position.w1[:3] = 0  # units with no slope: constant, no kink
        segments = model.position.score_bias(pos, pos)
    torch.testing.assert_close(segments, model.position.score_bias(pos, pos).detach(), atol=1e-5, rtol=1e-5)


def test_fire_bias_is_the_same_built_in_row_chunks():
    model = tiny("fire")
    pos = torch.arange(300)
    whole = model.position.score_bias(pos, pos)
    model.position.chunk = 32 * 300 * 7  # 7 query rows a chunk
    torch.testing.assert_close(model.position.score_bias(pos, pos), whole, atol=0, rtol=0)
    assert whole.shape == (4, 300, 300)


@pytest.mark.parametrize("position", BIASES)
def test_learned_bias_attention_equals_hand_built_scores(position):
    model = tiny(position)
    attn, pe, T = model.blocks[0].attn, model.position, 12
    torch.manual_seed(1)
    x = torch.randn(2, T, 32)
    pos = torch.arange(T)
    ctx = pe.context(pos, pos, pos, T)
    got = attn(x, ctx, pe)
    q = attn.q_proj(x).view(2, T, 4, 8).transpose(1, 2)
    k = attn.k_proj(x).view(2, T, 2, 8).transpose(1, 2).repeat_interleave(2, dim=1)
    v = attn.v_proj(x).view(2, T, 2, 8).transpose(1, 2).repeat_interleave(2, dim=1)
    bias = pe.score_bias(pos, pos)
    scores = q @ k.transpose(-1, -2) / math.sqrt(8)
    for i in range(T):
        for j in range(T):
            scores[:, :, i, j] += bias[:, i, j] if j <= i else -math.inf
    want = attn.o_proj((scores.softmax(-1) @ v).transpose(1, 2).reshape(2, T, 32))
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
    assert ctx.bias.shape == (4, T, T) and int(torch.isinf(ctx.bias).sum()) == 4 * T * (T - 1) // 2  # future keys


@pytest.mark.parametrize("position", ["t5", "kerple"])
def test_distance_biases_build_the_mask_from_one_bias_per_distance(position):
    # consecutive positions: a Toeplitz matrix of the T + S - 1 distances; any other positions: per pair
    pe = tiny(position).position
    for q_pos, k_pos in [(torch.arange(10, 15), torch.arange(3, 15)), (torch.arange(7), torch.arange(7)),
                         (torch.tensor([20]), torch.arange(0, 21)), (torch.tensor([4, 9]), torch.tensor([0, 2, 5, 9]))]:
        future = k_pos[None, :] > q_pos[:, None]
        want = pe.score_bias(q_pos, k_pos).masked_fill(future, float("-inf"))
        torch.testing.assert_close(pe.mask(q_pos, k_pos), want, atol=0, rtol=0)
    d = torch.tensor([0, 3, 40])
    torch.testing.assert_close(pe.score_bias(torch.tensor([40]), torch.tensor([40, 37, 0]))[:, 0], pe.distance_bias(d))


@torch.no_grad()
def test_fire_evaluation_mask_computes_only_the_seen_keys_with_the_same_values():
    # FIRE's bias depends on the query position too (no Toeplitz): in evaluation, consecutive positions
    # build it block by block of rows, each up to the keys its last query sees; the rest is -inf
    pe = tiny("fire").position
    for q_pos, k_pos in [(torch.arange(600), torch.arange(600)), (torch.arange(140, 700), torch.arange(100, 700)),
                         (torch.tensor([900]), torch.arange(0, 901))]:
        future = k_pos[None, :] > q_pos[:, None]
        want = pe.score_bias(q_pos, k_pos).masked_fill(future, float("-inf"))
        torch.testing.assert_close(pe.mask(q_pos, k_pos), want, atol=1e-6, rtol=1e-6)


@torch.no_grad()  # FlexAttention has no CPU backward
@pytest.mark.parametrize("position", BIASES)
def test_flex_attention_equals_the_float_mask_for_learned_biases(position):
    model = tiny(position)
    idx = torch.randint(0, 97, (2, 48))
    want, _ = model(idx)
    model.use_flex_attention(True)
    got, _ = model(idx)
    torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)


def test_partial_rope_rotates_only_the_first_dimensions_with_their_own_frequencies():
    model = tiny("rope", rotary_fraction=0.5, scaling={"type": "yarn", "factor": 4.0})  # head dim 8: rotates 4
    pe = model.position
    want_freq, want_factor = rope_frequencies(4, 10000.0, pe.scaling)  # the scaling acts on the rotated part
    torch.testing.assert_close(pe.inv_freq, want_freq)
    assert pe.attention_factor == want_factor
    torch.manual_seed(0)
    q, k = torch.randn(1, 4, 5, 8), torch.randn(1, 2, 5, 8)
    pos = torch.arange(10, 15)
    rq, rk = pe.rotate(q, k, pe.context(pos, pos, pos, 15))
    torch.testing.assert_close(rq[..., 4:], q[..., 4:], atol=0, rtol=0)
    torch.testing.assert_close(rq[..., :4], apply_rope(q[..., :4], *rope_angles(pos, want_freq, want_factor)))
    torch.testing.assert_close(rk[..., :4], apply_rope(k[..., :4], *rope_angles(pos, want_freq, want_factor)))


@pytest.mark.parametrize("scaling", [None, {"type": "yarn", "factor": 4.0}, {"type": "dynamic", "factor": 2.0}])
def test_p_rope_leaves_the_lowest_frequencies_unrotated(scaling):
    # p-RoPE (arXiv 2410.06205) with p = 0.5 on a head of 8: pairs 0-1 (the highest frequencies) rotate as RoPE's,
    # under any scaling, pairs 2-3 do not rotate at all, whatever the position.
    model, plain = (tiny("rope", kept_frequencies=p, scaling=scaling) for p in (0.5, 1.0))
    torch.manual_seed(0)
    q, k = torch.randn(1, 4, 5, 8), torch.randn(1, 2, 5, 8)
    pos = torch.arange(100, 105)
    (rq, rk), (pq, pk) = (m.position.rotate(q, k, m.position.context(pos, pos, pos, 105)) for m in (model, plain))
    factor = plain.position.frequencies(105)[1]
    torch.testing.assert_close(rq[..., 4:], q[..., 4:] * factor, atol=1e-6, rtol=1e-6)
    torch.testing.assert_close(rk[..., 4:], k[..., 4:] * factor, atol=1e-6, rtol=1e-6)
    torch.testing.assert_close(rq[..., :4], pq[..., :4], atol=0, rtol=0)
    assert not torch.allclose(pk[..., 4:], k[..., 4:] * factor, atol=1e-3)  # RoPE rotates them


@pytest.mark.parametrize("position", ALL)
def test_explicit_contiguous_positions_equal_the_default(position):
    model = tiny(position)
    idx = torch.randint(0, 97, (3, 20))
    want, _ = model(idx)
    torch.testing.assert_close(model(idx, positions=torch.arange(20))[0], want, atol=0, rtol=0)
    torch.testing.assert_close(model(idx, positions=torch.arange(20).expand(3, 20))[0], want, atol=1e-6, rtol=1e-6)


def per_sequence_positions(B=3, T=20, top=60):
    g = torch.Generator().manual_seed(5)
    return torch.stack([torch.randperm(top, generator=g)[:T].sort().values for _ in range(B)])


@pytest.mark.parametrize("position", ALL + ["rope-yarn"])
def test_each_sequence_is_computed_at_its_own_positions(position):
    # a batch with (B, T) positions gives each sequence what a forward of it alone at its positions gives
    scaling = None
    if position == "rope-yarn":
        position, scaling = "rope", {"type": "yarn", "factor": 2.0, "original_max_position_embeddings": 16}
    model = tiny(position, scaling=scaling)
    idx, pos = torch.randint(0, 97, (3, 20)), per_sequence_positions()
    got, _ = model(idx, positions=pos)
    for b in range(3):
        want, _ = model(idx[b:b + 1], positions=pos[b])
        torch.testing.assert_close(got[b], want[0], atol=1e-5, rtol=1e-5)
    # nope and fox read the tokens' order, not their positions
    assert not torch.allclose(got[0], model(idx[:1])[0][0], atol=1e-4) or position in ("nope", "fox")


@pytest.mark.parametrize("position", ALL)
def test_kv_cache_decoding_with_per_sequence_positions_equals_full_forward(position):
    model = tiny(position)
    idx, pos = torch.randint(0, 97, (3, 20)), per_sequence_positions()
    full, _ = model(idx, positions=pos)
    cache = KVCache(model.cfg.n_layers)
    steps = [model(idx[:, :8], positions=pos[:, :8], cache=cache)[0]]
    steps += [model(idx[:, i:i + 1], positions=pos[:, i:i + 1], cache=cache)[0] for i in range(8, 20)]
    torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=1e-5, rtol=1e-5)
    # without explicit positions a decoding step continues after each sequence's last position
    step, _ = model(idx[:, :1], cache=cache)
    want, _ = model(torch.cat([idx, idx[:, :1]], dim=1), positions=torch.cat([pos, pos[:, -1:] + 1], dim=1))
    torch.testing.assert_close(step[:, 0], want[:, -1], atol=1e-5, rtol=1e-5)
