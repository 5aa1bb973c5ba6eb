"""Training-free context methods (model/context.py): the distances each shows against its paper's formula,
attention under each against a hand-built softmax, plain attention wherever a method must be exact, cached
decoding against a full forward pass, the rolling cache of attention sinks, and the combinations refused."""
import math

import pytest
import torch
import yaml
from conftest import copy_run
from test_bad_inputs import check

import generate
from config import ContextConfig, ModelConfig, PositionConfig, ScalingConfig, UserError, parse_context
from eval import extrapolation, harness, probe
from eval.results import tasks as task_report
from generate import generate_tokens
from model import attention
from model.attention import KVCache
from model.context import CONTEXT_METHODS, build_context, check_context, pairing_problem
from model.gpt import GPT
from model.rope import SCALINGS, apply_rope, rope_angles

RELATIVE = ["rope", "alibi", "t5", "kerple", "fire"]
L = 16  # the tiny models' training length


def tiny(position="rope", context=None, scaling=None, rotary_fraction=1.0):
    """A two-layer float64 model (L = 16) whose logits are spread (init_std 0.3), with a context method."""
    cfg = ModelConfig(vocab_size=97, d_model=32, n_layers=2, n_heads=4, n_kv_heads=2, max_seq_len=L, init_std=0.3,
                      position=PositionConfig(type=position, scaling=scaling, rotary_fraction=rotary_fraction))
    torch.manual_seed(0)
    model = GPT(cfg).double().eval()
    model.use_context_method(parse_context(context))
    return model


def tokens(n, batch=2):
    return torch.randint(0, 97, (batch, n), generator=torch.Generator().manual_seed(n))


def shown(name, i, j, p):
    """The distance a method shows query i for key j (None: hidden), written out from its paper."""
    d = i - j
    if name == "self-extend":  # Jin et al. 2401.01325, Algorithm 1
        G, W = p["group_size"], p["window"]
        return d if d < W else i // G - j // G + W - W // G
    if name == "rerope":  # Su 2023
        return min(d, p["window"])
    if name == "leaky-rerope":
        W, k = p["window"], p["k"]
        return d if d < W else W + (d - W) / k
    if name == "dca":  # An et al. 2402.17463, section 3: c - 1 = s + w - 1
        s, w = p["chunk_size"], p["local_window"]
        if i // s == j // s:
            return d
        if i // s == j // s + 1:
            return min(s + i % s, s + w - 1) - j % s
        return s + w - 1 - j % s
    if name == "sinks":  # StreamingLLM 2309.17453: positions in the cache of n sinks and the last W tokens
        n, W = p["sinks"], p["window"]
        if d < W:
            return d
        return min(i, n + W - 1) - j if j < n else None
    return d


SETTINGS = {"self-extend": {"group_size": 3, "window": 5}, "rerope": {"window": 5},
            "leaky-rerope": {"window": 5, "k": 4.0}, "dca": {"chunk_size": 6, "local_window": 2},
            "sinks": {"sinks": 2, "window": 5}}


@pytest.mark.parametrize("name", SETTINGS)
def test_each_method_shows_the_distance_of_its_paper(name):
    method = build_context(ContextConfig(name, **SETTINGS[name]), L)
    pos = torch.arange(30)
    distance, hidden = method.distance(pos, pos), method.hidden(pos, pos)
    for i in range(30):
        for j in range(i + 1):
            want = shown(name, i, j, SETTINGS[name])
            assert bool(hidden[i, j]) == (want is None), (i, j)
            if want is not None:
                assert distance[i, j].item() == pytest.approx(want), (i, j)
        assert hidden[i, i + 1:].all()


def test_worked_examples():
    pos = torch.arange(12)
    dca = build_context(ContextConfig("dca", chunk_size=4, local_window=2), L)  # c - 1 = 5
    # i = 9 (chunk 8-11, first two tokens): the chunk before at its true distance, chunk 0 from position 5
    assert dca.distance(pos, pos)[9, :10].tolist() == [5, 4, 3, 2, 5, 4, 3, 2, 1, 0]
    # i = 11 (past the local window): the chunk before from position 5 too
    assert dca.distance(pos, pos)[11].tolist() == [5, 4, 3, 2, 5, 4, 3, 2, 3, 2, 1, 0]
    sinks = build_context(ContextConfig("sinks", sinks=2, window=3), L)  # cache positions 0 1 | 2 3 4
    assert sinks.distance(pos, pos)[10, [0, 1, 8, 9, 10]].tolist() == [4, 3, 2, 1, 0]
    assert sinks.hidden(pos, pos)[10].tolist() == [False, False] + [True] * 6 + [False] * 3 + [True]
    logn = build_context(ContextConfig("logn"), L)
    assert logn.query_scale(torch.tensor([0, 15, 255])).tolist() == pytest.approx([1, 1, 2])  # ln 256 / ln 16


def test_defaults_come_from_the_papers_at_the_models_length():
    settings = {name: build_context(ContextConfig(name), 4096).settings for name in CONTEXT_METHODS}
    assert settings == {"self-extend": {"group_size": 4, "window": 1024}, "rerope": {"window": 512},
                        "leaky-rerope": {"window": 512, "k": 16.0}, "dca": {"chunk_size": 2816, "local_window": 256},
                        "sinks": {"sinks": 4, "window": 4092}, "logn": {"length": 4096}}
    assert build_context(ContextConfig("sinks", sinks=8), 64).settings == {"sinks": 8, "window": 56}
    assert tiny(context="dca").context_method.settings == {"chunk_size": 11, "local_window": 1}


def reference_attention(attn, x, pe, name, p, scale_q=None):
    """Attention of one layer built by hand: each pair scored at the distance `shown` gives it (RoPE: the
    query turned by that distance against the unrotated key; ALiBi: -slope x distance), one softmax per row."""
    B, T, _ = x.shape
    H, nkv, hs = attn.n_heads, attn.n_kv_heads, attn.head_dim
    q = attn.q_proj(x).view(B, T, H, hs).transpose(1, 2)
    k = attn.k_proj(x).view(B, T, nkv, hs).transpose(1, 2).repeat_interleave(H // nkv, dim=1)
    v = attn.v_proj(x).view(B, T, nkv, hs).transpose(1, 2).repeat_interleave(H // nkv, dim=1)
    if scale_q is not None:
        q = q * scale_q[:, None]
    scores = torch.full((B, H, T, T), -math.inf, dtype=x.dtype)
    for i in range(T):
        for j in range(i + 1):
            d = shown(name, i, j, p)
            if d is None:
                continue
            if pe.name == "rope":
                turned = apply_rope(q[:, :, i], *rope_angles(torch.tensor([d], dtype=torch.float64), pe.inv_freq))
                scores[:, :, i, j] = (turned * k[:, :, j]).sum(-1) / math.sqrt(hs)
            else:
                scores[:, :, i, j] = (q[:, :, i] * k[:, :, j]).sum(-1) / math.sqrt(hs) - pe.slopes * d
    return attn.o_proj((scores.softmax(-1) @ v).transpose(1, 2).reshape(B, T, -1))


@torch.no_grad()
@pytest.mark.parametrize("rows", [None, 3])  # merged_attention's blocks: one, or 3 query rows each
@pytest.mark.parametrize("position", ["rope", "alibi"])
@pytest.mark.parametrize("name", [*SETTINGS, "logn"])
def test_attention_under_each_method_equals_a_hand_built_softmax(name, position, rows, monkeypatch):
    if rows is not None:
        monkeypatch.setattr(attention, "QUERY_BLOCK", rows)
    p = SETTINGS.get(name, {"length": 8})
    model = tiny(position, {"type": name, **p})
    seen = {}
    model.blocks[0].attn.register_forward_hook(lambda module, args, out: seen.update(x=args[0], y=out))
    model(tokens(24))
    scale_q = (torch.log1p(torch.arange(24.0)) / math.log(8)).clamp(min=1) if name == "logn" else None
    want = reference_attention(model.blocks[0].attn, seen["x"], model.position, name, p, scale_q)
    torch.testing.assert_close(seen["y"], want, atol=1e-6, rtol=1e-6)


# Where each method must be plain attention, over inputs of n = 40 tokens (L = 16): (method, n)
PLAIN = {"self-extend-within-window": ({"type": "self-extend", "window": 40}, 40),
         "self-extend-group-1": ({"type": "self-extend", "group_size": 1, "window": 4}, 40),
         "rerope-window-at-n": ({"type": "rerope", "window": 40}, 40),
         "leaky-rerope-within-window": ({"type": "leaky-rerope", "window": 40}, 40),
         "leaky-rerope-k-1": ({"type": "leaky-rerope", "window": 4, "k": 1}, 40),
         "dca-chunk-at-n": ({"type": "dca", "chunk_size": 40}, 40),
         "sinks-window-at-n": ({"type": "sinks", "window": 40}, 40),
         "logn-up-to-L": ({"type": "logn"}, L)}


@torch.no_grad()
@pytest.mark.parametrize("position", RELATIVE)
@pytest.mark.parametrize("case", PLAIN)
def test_each_method_is_plain_attention_where_it_must_be(case, position):
    context, n = PLAIN[case]
    idx = tokens(n)
    plain, _ = tiny(position)(idx)
    got, _ = tiny(position, context)(idx)
    torch.testing.assert_close(got, plain, atol=1e-9, rtol=1e-9)
    # ... and not plain one step further: a shorter window, a larger group, k or length
    further = {"window": n // 4, "group_size": 2, "k": 2.0, "chunk_size": n // 4, "length": n // 4}
    changed = {key: further[key] for key in context if key != "type"} or {"length": 4}
    moved, _ = tiny(position, {**context, **changed})(idx)
    assert (moved - plain).abs().max() > 1e-4


@torch.no_grad()
@pytest.mark.parametrize("position", RELATIVE)
def test_leaky_rerope_tends_to_rerope_as_k_grows(position):
    idx = tokens(40)
    rerope, _ = tiny(position, {"type": "rerope", "window": 6})(idx)
    leaky, _ = tiny(position, {"type": "leaky-rerope", "window": 6, "k": 1e9})(idx)
    steeper, _ = tiny(position, {"type": "leaky-rerope", "window": 6, "k": 2})(idx)
    torch.testing.assert_close(leaky, rerope, atol=1e-6, rtol=1e-6)
    assert (steeper - rerope).abs().max() > 1e-3


CACHED = [(p, name) for p in RELATIVE for name in CONTEXT_METHODS] + [("nope", "sinks"), ("nope", "logn")]


@torch.no_grad()
@pytest.mark.parametrize("position, name", CACHED)
def test_cached_decoding_equals_the_full_forward_pass(position, name):
    # every method at its defaults for L = 16 over 48 tokens, decoded one token at a time and in chunks of 5
    model = tiny(position, name)
    idx = tokens(48)
    full, _ = model(idx)
    for chunk in (1, 5):
        cache = KVCache(model.cfg.n_layers)
        edges = [0, 9, *range(9 + chunk, 48, chunk), 48]
        steps = torch.cat([model(idx[:, a:b], cache=cache)[0] for a, b in zip(edges, edges[1:])], dim=1)
        assert (steps - full).abs().max() <= 1e-5
    model.use_context_method(None)
    assert (model(idx)[0] - full).abs().max() > 1e-4  # the method changed the logits


@torch.no_grad()
@pytest.mark.parametrize("name, scaling", [("self-extend", "linear"), ("dca", "yarn"), ("rerope", "llama3"),
                                           ("sinks", "ntk"), ("logn", "linear")])
def test_a_method_composes_with_a_scaling_and_decodes_exactly(name, scaling):
    model = tiny("rope", name, scaling={"type": scaling, "factor": 2.0, "original_max_position_embeddings": L},
                 rotary_fraction=0.5)
    idx = tokens(40)
    full, _ = model(idx)
    cache = KVCache(model.cfg.n_layers)
    steps = [model(idx[:, :10], cache=cache)[0]] + [model(idx[:, i:i + 1], cache=cache)[0] for i in range(10, 40)]
    assert (torch.cat(steps, dim=1) - full).abs().max() <= 1e-5


@torch.no_grad()
@pytest.mark.parametrize("position", ["rope", "alibi", "t5", "nope"])
def test_the_rolling_sinks_cache_equals_the_full_forward_pass(position):
    # the cache holds only the 2 sinks and the last 6 tokens, as generate.py keeps it: the evicted keys were
    # hidden in the full pass anyway, so every step's logits are the full pass's
    model = tiny(position, {"type": "sinks", "sinks": 2, "window": 6})
    idx = tokens(40)
    full, _ = model(idx)
    cache = KVCache(model.cfg.n_layers)
    steps = [model(idx[:, :10], cache=cache)[0]]
    for i in range(10, 40):
        cache.trim(5, first=2)
        steps.append(model(idx[:, i:i + 1], cache=cache)[0])
        assert cache.positions.tolist() == [0, 1, *range(i - 5, i + 1)]
    assert (torch.cat(steps, dim=1) - full).abs().max() <= 1e-5


class CountingCache(KVCache):
    """A KVCache that records its length and its buffers' size after every write."""
    made = []

    def __init__(self, *args, **kw):
        super().__init__(*args, **kw)
        self.sizes = []
        CountingCache.made.append(self)

    def update(self, layer, k, v, positions):
        out = super().update(layer, k, v, positions)
        if layer == 0:
            self.sizes.append((len(self), self.keys[0].shape[-2]))
        return out


@torch.no_grad()
@pytest.mark.parametrize("position", ["rope", "alibi"])
def test_sinks_generation_keeps_the_cache_flat_for_32_times_L(position, monkeypatch):
    monkeypatch.setattr(generate, "KVCache", CountingCache)
    CountingCache.made.clear()
    model = tiny(position, "sinks")  # 4 sinks and a window of 12: a cache of L = 16 tokens
    out = list(generate_tokens(model, list(range(5)), 32 * L, temperature=1.0, seed=3))
    assert len(out) == 32 * L
    sizes = CountingCache.made[0].sizes
    assert len(sizes) == 32 * L + 1  # (length, slots) after the prompt, then after each step
    assert sizes[0] == (5, 16) and all(size == (16, 16) for size in sizes[11:])


@torch.no_grad()
@pytest.mark.parametrize("position", ["rope", "alibi", "fire"])
def test_sinks_generation_with_a_window_covering_everything_equals_the_full_cache(position):
    # sampled (the same draws for each): tokens that follow the logits closely
    def sample(context=None):
        return list(generate_tokens(tiny(position, context), list(range(1, 8)), 60, temperature=1.0, seed=5))
    want = sample()
    assert sample({"type": "sinks", "window": 67}) == want  # the prompt and every new token
    assert sample({"type": "sinks", "window": 12}) != want


@torch.no_grad()
@pytest.mark.parametrize("position, name", [("alibi", "self-extend"), ("alibi", "sinks"), ("alibi", "logn"),
                                            ("t5", "dca"), ("t5", "sinks"), ("nope", "sinks")])
def test_flex_attention_reads_the_bias_a_method_shows(position, name):
    model = tiny(position, name).float()
    idx = tokens(40)
    want, _ = model(idx)
    model.use_flex_attention(True)
    got, _ = model(idx)
    torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)


REFUSED = [(name, enc, None) for name in CONTEXT_METHODS for enc in ("learned", "sinusoidal")]
REFUSED += [(name, "nope", None) for name in ("self-extend", "rerope", "leaky-rerope", "dca")]
REFUSED += [(name, "rope", kind) for name in ("self-extend", "rerope", "leaky-rerope", "dca", "sinks")
            for kind in ("dynamic", "dynamic-yarn", "longrope")]  # the length-following scalings
REFUSED += [("logn", "rope", kind) for kind in ("yarn", "dynamic-yarn", "longrope")]  # a second temperature


def scaling_of(kind):
    return None if kind is None else ScalingConfig(kind, 2.0, L)


def test_which_combinations_are_refused():
    refused = {(name, enc, kind) for name, enc, kind in REFUSED}
    for name in CONTEXT_METHODS:
        for enc in ("learned", "sinusoidal", "nope", *RELATIVE):
            for kind in (None, *SCALINGS) if enc == "rope" else (None,):
                problem = pairing_problem(ContextConfig(name), enc, scaling_of(kind))
                assert (problem is not None) == ((name, enc, kind) in refused), (name, enc, kind, problem)


@pytest.mark.parametrize("name, encoding, kind", REFUSED[:2] + REFUSED[-4:-2] + REFUSED[-1:])
def test_a_refused_combination_is_one_line_naming_both(name, encoding, kind):
    problem = pairing_problem(ContextConfig(name), encoding, scaling_of(kind))
    assert f"'{name}'" in problem and (kind or encoding) in problem and "\n" not in problem


@pytest.mark.parametrize("value, message", [
    ("selfextend", "unknown context method 'selfextend'; choose one of self-extend, rerope"),
    ("{type: rerope, group_size: 2}", "context method 'rerope' takes no key 'group_size'; its keys: window"),
    ("{type: self-extend, window: 0}", "ctx.window must be >= 1, got 0"),
    ("{type: leaky-rerope, k: .nan}", "ctx.k must be >= 1, got nan"),
    ("{type: sinks, sinks: -1}", "ctx.sinks must be >= 0, got -1"),
    ("{type: logn, length: 1}", "ctx.length must be >= 2, got 1"),
    ("{type: dca, chunk_size: 2.5}", "ctx.chunk_size: expected int, got float"),
    ("{window: 8}", "ctx: name the method"),
    ("[dca]", "ctx: a context method is a name or a mapping"),
])
def test_a_bad_method_is_one_error_naming_the_key(value, message):
    with pytest.raises(UserError, match=None) as e:
        check_context(parse_context(value, "ctx"), "ctx")
    assert message in str(e.value)


def test_none_is_no_method():
    assert parse_context("none") is None and parse_context(None) is None
    assert parse_context("dca") == ContextConfig("dca")


@pytest.fixture
def relabelled(ten_step_run, tmp_path):
    """Copies of the tiny rope run whose config.yaml names another encoding (refused before its weights are read)."""
    def make(position):
        run = copy_run(ten_step_run, tmp_path, position)
        config = yaml.safe_load((run / "config.yaml").read_text())
        config["model"]["position"]["type"] = position
        (run / "config.yaml").write_text(yaml.safe_dump(config))
        return run
    return make


@pytest.mark.parametrize("position, method", [("learned", "sinks"), ("sinusoidal", "logn"), ("nope", "dca")])
@pytest.mark.parametrize("command", ["generate.py", "eval.extrapolation", "eval.probe"])
def test_the_clis_refuse_an_encoding_the_method_does_not_apply_to(position, method, command, relabelled, tmp_path,
                                                                   capsys):
    run = str(relabelled(position))
    main = {"generate.py": generate.main, "eval.extrapolation": extrapolation.main, "eval.probe": probe.main}[command]
    args = [run, "--context-method", method] + ([] if command == "generate.py" else ["--out", str(tmp_path / "o")])
    with pytest.raises(SystemExit) as exit_:
        main(args)
    out, err = capsys.readouterr()
    check(exit_.value.code, out, err, f"context method '{method}'")
    assert position in err


def test_generate_runs_sinks_past_the_training_length(ten_step_run, capsys):
    generate.main([str(ten_step_run), "--context-method", "sinks", "--max-new-tokens", str(4 * 64), "--seed", "1"])
    out, err = capsys.readouterr()
    assert out.strip() and "error" not in err


def test_eval_rows_name_the_method_and_equal_plain_where_it_is_exact(ten_step_run, tmp_path):
    common = [str(ten_step_run), "--lengths", "32,64", "--max-tokens", "256", "--device", "cpu"]
    plain = extrapolation.main([*common, "--scaling", "none", "--out", str(tmp_path / "plain")])
    rows = extrapolation.main([*common, "--context-method", "{type: rerope, window: 64}", "--out", str(tmp_path / "c")])
    assert [r["scaling"] for r in rows] == ["rerope (window=64)"] * 2
    assert [r["context"] for r in rows] == [{"type": "rerope", "window": 64}] * 2
    assert [r["ppl"] for r in rows] == pytest.approx([r["ppl"] for r in plain], rel=1e-5)
    dca = extrapolation.main([*common, "--context-method", "dca", "--scaling", "none,yarn", "--fixed-factors", "",
                              "--out", str(tmp_path / "c"), "--resume"])
    labels = [r["scaling"] for r in dca]
    assert labels == ["rerope (window=64)"] * 2 + ["dca"] * 2 + ["yarn + dca"] * 2
    assert dca[2]["context"] == {"type": "dca", "chunk_size": 44, "local_window": 4}  # L = 64


def test_a_long_window_under_a_context_method_is_read_in_query_chunks_with_the_full_passs_perplexity(
        ten_step_run, tmp_path, monkeypatch):
    common = [str(ten_step_run), "--lengths", "128", "--max-tokens", "512", "--device", "cpu", "--scaling", "none"]
    for method in ("self-extend", "dca", "sinks"):
        whole = extrapolation.main([*common, "--context-method", method, "--out", str(tmp_path / method)])
        monkeypatch.setattr(extrapolation, "QUERY_CHUNK", 48)  # 128-token windows in parts of 48 queries
        parts = extrapolation.main([*common, "--context-method", method, "--out", str(tmp_path / f"{method}-parts")])
        monkeypatch.undo()
        assert parts[0]["ppl"] == pytest.approx(whole[0]["ppl"], rel=1e-5) and not parts[0]["through_cache"]


def test_tasks_and_probes_plan_with_the_method(ten_step_run):
    run = harness.read_run(ten_step_run, "ten")
    context = ContextConfig("logn")
    variants = probe.model_variants(run, ["none", "ntk", "dynamic"], 128, context)
    assert [label for label, _ in variants] == ["logn", "ntk + logn", "dynamic + logn"]
    rows = [{"run": "r", "seed": 1, "task": "copy", "scaling": s, "factor_rule": None, "length": 64, "run_length": 64,
             "accuracy": a, "answers": 10, "context": c}
            for s, a, c in (("none", 0.95, None), ("logn", 0.1, {"type": "logn", "length": 64}))]
    assert task_report.learned(rows) == {("r", 1, "copy"): True}  # the plain row decides, whatever the order
    assert task_report.learned(rows[::-1]) == {("r", 1, "copy"): True}


def test_probe_resume_measures_a_method_the_report_lacks(ten_step_run, tmp_path):
    """--resume skips a row whose label (which names the method) the report has: another method's are measured."""
    common = [str(ten_step_run), "--multiples", "1", "--passkey-multiples", "1", "--passkey-depths", "0.5",
              "--samples", "2", "--passkey-samples", "2", "--scaling", "none", "--device", "cpu", "--out", str(tmp_path)]
    plain = probe.main(common)
    rows = probe.main([*common, "--context-method", "logn", "--resume"])
    assert rows[:len(plain)] == plain and [r["scaling"] for r in rows[len(plain):]] == ["logn"] * len(plain)
    assert all(r["context"] == {"type": "logn", "length": 64} for r in rows[len(plain):])
    assert probe.main([*common, "--context-method", "logn", "--resume"]) == rows  # nothing left to measure
