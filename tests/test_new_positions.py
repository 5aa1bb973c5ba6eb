"""FoX's forget-gate bias, layer patterns (RNoPE, Llama 4's iRoPE), sliding-window attention and Llama 4's temperature
on NoPE layers: worked examples, cached decoding against the full pass, a run that trains and loads back, and the
config's refusals."""
import math

import pytest
import torch
import torch.nn.functional as F
import yaml
from conftest import logged_losses

import train
from checkpoint import load_model
from config import ModelConfig, PositionConfig, UserError
from generate import generate_tokens
from model.attention import KVCache, causal_mask
from model.gpt import GPT
from model.positions import NoPE, Rope, alibi_slopes


def tiny(position="rope", pattern=None, window=None, temperature=False, seed=0, **kw):
    pos = kw.pop("pos", {})
    kw.setdefault("n_layers", 2)
    kw.setdefault("max_seq_len", 16)
    cfg = ModelConfig(vocab_size=97, d_model=32, n_heads=4, n_kv_heads=2, sliding_window=window, **kw,
                      position=PositionConfig(type=position, layer_pattern=pattern, nope_temperature=temperature,
                                              **pos))
    cfg.validate()
    torch.manual_seed(seed)
    return GPT(cfg).eval()


def by_hand(attn, x, bias=None, q_scale=None):
    """One attention layer (head dim 8, 4 query heads on 2 key heads) with a float bias (..., T, T) that holds -inf
    on the keys a query does not read, and queries scaled per row."""
    B, T, _ = x.shape
    q = attn.q_proj(x).view(B, T, 4, 8).transpose(1, 2)
    k = attn.k_proj(x).view(B, T, 2, 8).transpose(1, 2).repeat_interleave(2, dim=1)
    v = attn.v_proj(x).view(B, T, 2, 8).transpose(1, 2).repeat_interleave(2, dim=1)
    if q_scale is not None:
        q = q * q_scale[:, None]
    scores = q @ k.transpose(-1, -2) / math.sqrt(8) + bias
    return attn.o_proj((scores.softmax(-1) @ v).transpose(1, 2).reshape(B, T, 32))


def causal(T):
    return torch.zeros(T, T).masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))


# FoX

def test_fox_bias_is_the_cumulative_log_forget_gate_by_hand():
    pe = tiny("fox").position
    w, b = [1.0, -2.0, 0.5, 0.0], [0.0, 1.0, 2.0, -1.0]
    with torch.no_grad():
        pe.gates["1"].weight.zero_()
        pe.gates["1"].weight[:, 0] = torch.tensor(w)
        pe.gates["1"].bias.copy_(torch.tensor(b))
    inputs = [0.3, -1.0, 2.0, 0.5, 0.0]
    T, x = len(inputs), torch.zeros(1, len(inputs), 32)
    x[0, :, 0] = torch.tensor(inputs)
    pos = torch.arange(T)
    ctx = pe.layer_context(1, x, pe.context(pos, pos, pos, T))

    def log_f(h, t):  # log sigmoid(w_h . x_t + b_h)
        return -math.log1p(math.exp(-(w[h] * inputs[t] + b[h])))
    for h in range(4):
        for i in range(T):
            for j in range(T):
                want = sum(log_f(h, t) for t in range(j + 1, i + 1)) if j <= i else -math.inf
                assert ctx.bias[0, h, i, j].item() == pytest.approx(want, rel=1e-6, abs=1e-6), (h, i, j)


def test_fox_gates_start_near_one_as_alibi():
    # the gate's bias is b_h = -log(expm1(m_h)), so f_h = exp(-m_h) at zero input: ALiBi's bias -m_h (i - j)
    pe = tiny("fox").position
    slopes = alibi_slopes(4)
    for gate in pe.gates.values():
        torch.testing.assert_close(torch.sigmoid(gate.bias), torch.exp(-slopes))
        assert gate.weight.std().item() == pytest.approx(0.02, rel=0.2)
    T, pos = 6, torch.arange(6)
    ctx = pe.layer_context(0, torch.zeros(1, T, 32), pe.context(pos, pos, pos, T))
    distance = (pos[:, None] - pos[None, :]).float()
    want = (-slopes[:, None, None] * distance).masked_fill(distance < 0, float("-inf"))
    torch.testing.assert_close(ctx.bias[0], want)


def test_fox_attention_adds_its_bias_to_the_scores():
    model = tiny("fox")
    attn, pe, T = model.blocks[0].attn, model.position, 9
    x = torch.randn(2, T, 32, generator=torch.Generator().manual_seed(1))
    pos = torch.arange(T)
    ctx = pe.layer_context(0, x, pe.context(pos, pos, pos, T))
    c = F.logsigmoid(x @ pe.gates["0"].weight.T + pe.gates["0"].bias).transpose(1, 2).cumsum(-1)  # (B, H, T)
    want = by_hand(attn, x, (c[..., :, None] - c[..., None, :]) + causal(T))
    torch.testing.assert_close(attn(x, ctx, pe), want, atol=1e-5, rtol=1e-5)


def test_fox_has_a_gate_on_each_layer_that_applies_it():
    model = tiny("fox", pattern="fox,nope", n_layers=3)
    assert sorted(model.position.gates) == ["0", "2"]
    assert not any(True for _ in model.plain.parameters())


# sliding window

def test_a_sliding_window_hides_exactly_the_keys_older_than_it():
    model = tiny("nope", window=4, n_layers=1)
    attn, pe, T = model.blocks[0].attn, model.position, 10
    pos = torch.arange(T)
    ctx = model.shared_context(pe, pos, pos, T, True, None, 4, False)
    hidden = [[j > i or i - j >= 4 for j in range(T)] for i in range(T)]
    assert ctx.bias is None and ctx.window == 4  # scores without a bias: attention reads only the window's keys
    assert (~causal_mask(pos, pos, ctx.window)).tolist() == hidden
    x = torch.randn(2, T, 32, generator=torch.Generator().manual_seed(1))
    want = by_hand(attn, x, torch.zeros(T, T).masked_fill(torch.tensor(hidden), float("-inf")))
    torch.testing.assert_close(attn(x, ctx, pe), want, atol=1e-5, rtol=1e-5)


@torch.no_grad()
def test_a_token_past_the_window_changes_nothing_and_one_inside_it_does():
    # one layer, window 4: the last query (position 9) reads positions 6 .. 9
    model = tiny("rope", window=4, n_layers=1)
    idx = torch.randint(0, 97, (1, 10), generator=torch.Generator().manual_seed(2))
    last = model(idx)[0][0, -1]
    for position, seen in [(5, False), (6, True), (0, False), (9, True)]:
        other = idx.clone()
        other[0, position] = (other[0, position] + 1) % 97
        change = (model(other)[0][0, -1] - last).abs().max().item()
        assert change > 1e-6 if seen else change < 1e-7, (position, change)


def test_alibi_under_a_window_keeps_its_bias_inside_it():
    model = tiny("alibi", window=3)
    T, pos = 8, torch.arange(8)
    ctx = model.shared_context(model.position, pos, pos, T, True, None, 3, False)
    distance = (pos[:, None] - pos[None, :]).float()
    want = (-alibi_slopes(4)[:, None, None] * distance).masked_fill((distance < 0) | (distance >= 3), float("-inf"))
    torch.testing.assert_close(ctx.bias, want)


# layer patterns and Llama 4's temperature

def test_a_layer_pattern_repeats_over_the_layers_and_adds_no_weight():
    cfg = ModelConfig(vocab_size=10, n_layers=6, position=PositionConfig(layer_pattern="rope, rope,rope,nope"))
    cfg.validate()
    assert cfg.positional_layers == [True, True, True, False, True, True]
    assert cfg.nope_layers == [False, False, False, True, False, False]
    model = GPT(cfg)
    assert [block.kind for block in model.blocks] == ["positional"] * 3 + ["nope"] + ["positional"] * 2
    assert model.state_dict().keys() == GPT(ModelConfig(vocab_size=10, n_layers=6)).state_dict().keys()
    assert ModelConfig(vocab_size=10, position=PositionConfig(type="nope")).nope_layers == [True] * 4


@torch.no_grad()
def test_the_nope_layers_of_a_pattern_attend_without_positions():
    # a rope model whose every layer is a nope entry is NoPE with the same weights; in "rope,nope" the first layer
    # rotates q and k and the second does not
    idx = torch.randint(0, 97, (2, 20), generator=torch.Generator().manual_seed(3))
    torch.testing.assert_close(tiny("rope", pattern="nope")(idx)[0], tiny("nope")(idx)[0], atol=0, rtol=0)
    model, seen = tiny("rope", pattern="rope,nope"), []
    for block in model.blocks:
        block.attn.register_forward_pre_hook(lambda m, args: seen.append((type(args[2]), args[1].q_angles is None)))
    model(idx)
    assert seen == [(Rope, False), (NoPE, True)]
    assert not torch.allclose(model(idx)[0], tiny("rope")(idx)[0], atol=1e-6)


def test_the_nope_temperature_is_llama_4s():
    # transformers' Llama4TextAttention: q * (log(floor((position + 1) / floor_scale) + 1) * attn_scale + 1), on the
    # layers without positions only
    model = tiny("rope", pattern="rope,nope", temperature=True, pos={"floor_scale": 4.0, "attn_scale": 0.5})
    T, pos = 12, torch.arange(12)
    plain = model.shared_context(model.plain, pos, pos, T, True, None, None, True)
    want = [math.log(math.floor((p + 1) / 4) + 1) * 0.5 + 1 for p in range(T)]
    assert plain.q_scale.tolist() == pytest.approx(want, rel=1e-6)
    assert plain.q_scale[:3].tolist() == [1.0, 1.0, 1.0]
    x = torch.randn(1, T, 32, generator=torch.Generator().manual_seed(4))
    attn = model.blocks[1].attn
    torch.testing.assert_close(attn(x, plain, model.plain), by_hand(attn, x, causal(T), torch.tensor(want)),
                               atol=1e-5, rtol=1e-5)
    pos_ctx = model.shared_context(model.position, pos, pos, T, True, None, None, False)
    assert pos_ctx.q_scale is None


# cached decoding equals the full pass

CASES = {
    "fox": dict(position="fox"),
    "fox-window": dict(position="fox", window=5),
    "rope-nope": dict(position="rope", pattern="rope,nope"),
    "rope-window": dict(position="rope", window=5),
    "nope-window": dict(position="nope", window=5),
    "alibi-window": dict(position="alibi", window=5),
    "t5-window": dict(position="t5", window=5),
    "rope-nope-window-temperature": dict(position="rope", pattern="rope,nope", window=5, temperature=True,
                                         pos={"floor_scale": 8.0}),
    "fox-nope-window": dict(position="fox", pattern="fox,fox,nope", window=5, n_layers=3),
}


def decoding_model(case):
    return tiny(**CASES[case])


@torch.no_grad()
@pytest.mark.parametrize("case", CASES)
def test_cached_decoding_token_by_token_equals_the_full_pass(case):
    # L = 16, decoded to 40 tokens: past L and far past the window
    model = decoding_model(case)
    idx = torch.randint(0, 97, (2, 40), generator=torch.Generator().manual_seed(5))
    full, _ = model(idx)
    cache = KVCache(model.cfg.n_layers)
    steps = [model(idx[:, :9], cache=cache)[0]] + [model(idx[:, i:i + 1], cache=cache)[0] for i in range(9, 40)]
    torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=1e-5, rtol=1e-5)


@torch.no_grad()
@pytest.mark.parametrize("case", ["fox", "fox-window", "rope-window", "rope-nope-window-temperature"])
def test_a_static_cache_decodes_as_the_full_pass(case):
    model = decoding_model(case)
    idx = torch.randint(0, 97, (1, 40), generator=torch.Generator().manual_seed(6))
    full, _ = model(idx)
    cache = KVCache(model.cfg.n_layers, capacity=40)
    steps = [model(idx[:, :9], cache=cache)[0]]
    cache.make_static()
    steps += [model(idx[:, i:i + 1], cache=cache)[0] for i in range(9, 40)]
    torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=1e-5, rtol=1e-5)


@torch.no_grad()
@pytest.mark.parametrize("case", ["fox-window", "rope-window", "alibi-window"])
def test_per_sequence_positions_decode_as_their_full_pass(case):
    # the window counts positions: with each sequence's own (train.positions), the cache hides what the full pass does
    model = decoding_model(case)
    g = torch.Generator().manual_seed(7)
    pos = torch.stack([torch.randperm(60, generator=g)[:20].sort().values for _ in range(3)])
    idx = torch.randint(0, 97, (3, 20), generator=g)
    full, _ = model(idx, positions=pos)
    cache = KVCache(model.cfg.n_layers)
    steps = [model(idx[:, :8], positions=pos[:, :8], cache=cache)[0]]
    steps += [model(idx[:, i:i + 1], positions=pos[:, i:i + 1], cache=cache)[0] for i in range(8, 20)]
    torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=1e-5, rtol=1e-5)


@torch.no_grad()
@pytest.mark.parametrize("window, part",
                         [(6, {}), (None, {"rotary_fraction": 0.5}), (None, {"kept_frequencies": 0.75})])
def test_a_dynamic_scaling_decodes_a_chunk_as_token_by_token(window, part):
    # each query of a chunk reads its own rotation of the keys (per_query_attention, through Rope.rotate_part): under
    # a window that hides the old ones, on half of each head (GPT-NeoX's partial rotary) and without p-RoPE's lowest
    # frequencies
    scaling = {"type": "dynamic", "factor": 2.0, "original_max_position_embeddings": 16}
    model = tiny("rope", window=window, init_std=0.3, pos={"scaling": scaling, **part})
    idx = torch.randint(0, 97, (2, 40), generator=torch.Generator().manual_seed(8))

    def decode(chunk):
        cache = KVCache(model.cfg.n_layers)
        edges = [0, 12, *range(12 + chunk, 40, chunk), 40]
        return torch.cat([model(idx[:, a:b], cache=cache)[0] for a, b in zip(edges, edges[1:])], dim=1)
    torch.testing.assert_close(decode(7), decode(1), atol=1e-5, rtol=1e-5)


@torch.no_grad()  # FlexAttention has no CPU backward
@pytest.mark.parametrize("case", ["fox", "fox-window", "alibi-window"])  # fox's score_mod, the window's table
def test_flex_attention_equals_the_float_mask(case):
    # the full pass (a window by index in the block mask) and a few cached steps (the window by position)
    model = decoding_model(case)
    idx = torch.randint(0, 97, (2, 30), generator=torch.Generator().manual_seed(9))
    want, _ = model(idx)
    model.use_flex_attention(True)
    got, _ = model(idx)
    torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)
    cache = KVCache(model.cfg.n_layers)
    steps = [model(idx[:, :27], cache=cache)[0]] + [model(idx[:, i:i + 1], cache=cache)[0] for i in range(27, 30)]
    torch.testing.assert_close(torch.cat(steps, dim=1), want, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("case", ["fox-window", "rope-nope-window-temperature"])
def test_a_compiled_training_step_is_one_graph(case):
    from torch._dynamo.testing import CompileCounter
    torch._dynamo.reset()
    model, counter = tiny(**CASES[case], max_seq_len=32).train(), CompileCounter()
    compiled = torch.compile(model, backend=counter)
    for step in range(2):
        torch.manual_seed(step)
        compiled(torch.randint(0, 97, (2, 32)), torch.randint(0, 97, (2, 32)))[1].backward()
    assert counter.frame_count == 1


# a run with the new keys

@pytest.mark.parametrize("overrides", [
    ["model.position.type=fox", "model.sliding_window=24"],
    ["model.position.layer_pattern=rope,nope", "model.sliding_window=16", "model.position.nope_temperature=true",
     "model.position.floor_scale=32"],
], ids=["fox-window", "rope-nope-window-temperature"])
def test_a_run_with_the_new_keys_trains_and_loads_back(overrides, tiny_args, tmp_path):
    train.main(tiny_args + ["run.name=new", "train.max_steps=4", "train.warmup_steps=1", "train.log_every=2",
                            "train.eval_every=4", "train.ckpt_every=4", *overrides])
    run = tmp_path / "new"
    model_section = yaml.safe_load((run / "config.yaml").read_text())["model"]
    for override in overrides:
        key, value = override.split("=")
        node = {"model": model_section}
        for part in key.split("."):
            node = node[part]
        assert node == yaml.safe_load(value), key
    losses = [loss for loss in logged_losses(run).values() if loss is not None]
    assert losses and all(math.isfinite(loss) for loss in losses)
    model = load_model(run)  # strictly: every weight, with the model's shape
    assert model.cfg.sliding_window == model_section["sliding_window"]
    if model.cfg.position.type == "fox":  # the gates are the trained ones, not a fresh init
        assert not torch.allclose(torch.sigmoid(model.position.gates["0"].bias), torch.exp(-alibi_slopes(4)))
    tokens = list(generate_tokens(model, [1, 2, 3], 70, seed=1))  # through the KV cache, past L = 64 and the window
    assert len(tokens) == 70


# refusals

BAD = [
    (["model.position.layer_pattern=rope,alibi"], "model.position.layer_pattern: 'alibi' is not rope or nope"),
    (["model.position.layer_pattern=rope,nope,rope"], "model.position.layer_pattern must be at most model.n_layers = 2 "
                                                      "entries, got 'rope,nope,rope'"),
    (["model.position.type=nope", "model.position.layer_pattern=nope"], "with type nope every layer is one already"),
    (["model.position.type=learned", "model.position.layer_pattern=learned,nope"],
     "learned adds its positions to the tokens, before every layer"),
    (["model.sliding_window=0"], "model.sliding_window must be >= 1 or null, got 0"),
    (["model.sliding_window=1.5"], "model.sliding_window: expected int, got float (1.5)"),
    (["model.position.floor_scale=16"], "model.position.floor_scale applies to model.position.nope_temperature only"),
    (["model.position.nope_temperature=true"], "model.position.nope_temperature scales the queries of layers "
                                               "without positions, and this rope model has none"),
    (["model.position.nope_temperature=true", "model.position.layer_pattern=rope,nope", "model.position.floor_scale=0"],
     "model.position.floor_scale must be a finite number > 0, got 0.0"),
]


@pytest.mark.parametrize("overrides, message", BAD, ids=[" ".join(o) for o, _ in BAD])
def test_misuse_is_one_line_naming_the_key(overrides, message, tiny_args, capsys):
    with pytest.raises(SystemExit) as exit_:
        train.main(tiny_args + ["--print-config", *overrides])
    out, err = capsys.readouterr()
    assert exit_.value.code == 2 and not out
    assert err.count("\n") == 1 and message in err, err


def test_export_refuses_layer_patterns_windows_and_the_temperature():
    from convert.to_hf import check_exportable
    for cfg in (ModelConfig(position=PositionConfig(layer_pattern="rope,nope")), ModelConfig(sliding_window=16),
                ModelConfig(position=PositionConfig(layer_pattern="rope,nope", nope_temperature=True))):
        with pytest.raises(UserError, match="cannot export model.* transformers' Llama gives every layer the same"):
            check_exportable(cfg)


def test_the_studies_name_each_new_method_as_a_run():
    """The runs of the new methods, in the text study (run/1/NAME) and on the track (task-run/1/NAME): the keys each
    adds, DroPE continuing its seed's RoPE run at L."""
    import subprocess
    from pathlib import Path
    root = Path(__file__).resolve().parents[1]

    def command(run, *settings, target="run"):
        out = subprocess.run(["make", "-n", "--no-print-directory", f"{target}/1/{run}", *settings], cwd=root,
                             capture_output=True, text=True, check=True).stdout.replace("\\\n", " ")
        return " ".join(next(line for line in out.splitlines() if f"run.name={run} " in line).split())
    assert "model.position.type=fox" in command("fox")
    assert "model.position.kept_frequencies=0.75" in command("p-rope")
    assert "layer_pattern=rope,rope,rope,nope model.sliding_window=32" in command("rnope-swa")
    drope = command("drope", target="task-run")  # studies/tasks/tasks.mk's own run target
    assert "--config studies/tasks/extend-4x-tasks.yaml train.init_from=runs/tasks/seed1/rope" in drope
    assert "model.position.type=nope model.position.scaling=null model.max_seq_len=128 train.batch_size=32" in drope
    longer = command("drope-long", target="task-run")  # make task-drope-long: the same, 8x the steps
    assert longer == drope.replace("run.name=drope ", "run.name=drope-long ").replace(
        "train.batch_size=32", "train.batch_size=32 train.max_steps=2000")
