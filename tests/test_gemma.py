"""Gemma 3 (transformers' Gemma3ForCausalLM, gemma3_text) as this repo's GPT (hf/weights.py, convert/to_run.py,
convert/to_hf.py): for a random tiny checkpoint with a head width of its own, q/k norms, sandwich norms, GeGLU,
query_pre_attn_scalar and a mix of sliding and full layers with their own RoPE bases, the GPT's logits equal
transformers' to 1e-4 relative in float32 on sequences longer than the window, with no scaling, with a scaling of the
full layers only (Gemma 3's way) and with one of every layer; greedy continuations are equal; decoding through the
KV cache equals the full forward; the export gives transformers the same model back; and what the GPT cannot hold
is refused in one line (exit code 2)."""
import json
import math
import shutil
from pathlib import Path

import pytest
import torch

transformers = pytest.importorskip("transformers", reason="the oracle is transformers (pip install -e '.[dev]')")
from safetensors.torch import load_file, save_file  # noqa: E402

import convert.to_run  # noqa: E402
import train  # noqa: E402
from checkpoint import load_model, load_tokenizer  # noqa: E402
from config import ModelConfig, PositionConfig, ScalingConfig, UserError  # noqa: E402
from convert.to_hf import export  # noqa: E402
from generate import generate_tokens  # noqa: E402
from model.attention import KVCache  # noqa: E402
from model.gpt import GPT  # noqa: E402
from model.positions import check  # noqa: E402
from test_convert import tokenizer_files  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
L, VOCAB, WINDOW = 32, 320, 8
TYPES = ["sliding_attention", "sliding_attention", "full_attention", "sliding_attention", "full_attention",
         "sliding_attention"]
THETA, LOCAL_THETA = 10000.0, 100.0
PLAIN = {"full_attention": {"rope_type": "default", "rope_theta": THETA},
         "sliding_attention": {"rope_type": "default", "rope_theta": LOCAL_THETA}}
# d 64 with 4 heads of 32 (not 64 / 4), 2 key-value heads, scores scaled by 24^-0.5 (not 32^-0.5)
SHAPE = dict(vocab_size=VOCAB, hidden_size=64, intermediate_size=96, num_hidden_layers=len(TYPES),
             num_attention_heads=4, num_key_value_heads=2, head_dim=32, query_pre_attn_scalar=24,
             max_position_embeddings=L, sliding_window=WINDOW, layer_types=TYPES, rms_norm_eps=1e-6,
             pad_token_id=0, bos_token_id=1, eos_token_id=2)


def scaled(kind: str, theta: float, factor: float = 4.0) -> dict:
    """One layer type's rope parameters under `kind` (transformers 5 names)."""
    params = {"rope_type": kind, "rope_theta": theta, "factor": factor}
    return {**params, "original_max_position_embeddings": L} if kind == "yarn" else params


def rope_of(kind: str | None, layers: str) -> dict:
    """Per-layer-type rope parameters of a scaling `kind` (None: none) acting on the full layers or on all."""
    if kind is None:
        return PLAIN
    full = scaled(kind, THETA)
    return {"full_attention": full,
            "sliding_attention": scaled(kind, LOCAL_THETA) if layers == "all" else PLAIN["sliding_attention"]}


def checkpoint(folder: Path, rope: dict = PLAIN, **settings) -> Path:
    """A random tiny Gemma 3 with large norm weights (Gemma's are w in (1 + w): every norm sharp and none 1), large
    embeddings (large logits) and q/k norms of about 2 (sharp attention), so positions, the window and scalings move
    its logits by far more than the tolerance."""
    config = transformers.Gemma3TextConfig(**{**SHAPE, **settings}, rope_parameters=json.loads(json.dumps(rope)))
    torch.manual_seed(0)
    model = transformers.Gemma3ForCausalLM(config)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith(("q_norm.weight", "k_norm.weight")):
                p.normal_(1.0, 0.5)
            elif "norm" in name:
                p.normal_(0.0, 0.5)
            elif "embed" in name:
                p.mul_(5)
            else:
                p.mul_(3)
    model.save_pretrained(folder)
    tokenizer_files(folder)
    return folder


def reference(folder: Path, rope: dict | None = None):
    """transformers' model of the checkpoint in `folder`, with `rope` as its rope parameters (None: its own)."""
    config = transformers.AutoConfig.from_pretrained(folder)
    if rope is not None:
        config.rope_parameters = json.loads(json.dumps(rope))
    return transformers.AutoModelForCausalLM.from_pretrained(folder, config=config, dtype=torch.float32).eval()


@pytest.fixture(scope="module")
def gemma(tmp_path_factory) -> tuple[Path, Path]:
    """(a tiny Gemma 3 checkpoint folder, its converted run)."""
    root = tmp_path_factory.mktemp("gemma")
    folder = checkpoint(root / "gemma")
    return folder, convert.to_run.convert(f"hf:{folder}", root / "run")


def logits(model, x: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        out = model(x)
    return out[0] if isinstance(out, tuple) else out.logits


def test_a_converted_gemma_has_gemmas_options(gemma):
    cfg = load_model(gemma[1]).cfg
    assert (cfg.head_dim, cfg.n_heads, cfg.d_model, cfg.attention_scalar) == (32, 4, 64, 24.0)
    assert (cfg.qk_norm, cfg.post_norms, cfg.mlp_activation, cfg.scale_embeddings) == (True, True, "gelu_tanh", True)
    assert cfg.layer_types == TYPES and cfg.sliding_window == WINDOW
    assert (cfg.position.theta, cfg.position.local_theta, cfg.position.scaling) == (THETA, LOCAL_THETA, None)
    # the (1 + w) norms folded: ours are 1 + theirs
    theirs = reference(gemma[0]).state_dict()
    ours = load_model(gemma[1]).state_dict()
    torch.testing.assert_close(ours["blocks.1.attn_post_norm.weight"],
                               1 + theirs["model.layers.1.post_attention_layernorm.weight"], atol=0, rtol=0)
    torch.testing.assert_close(ours["norm.weight"], 1 + theirs["model.norm.weight"], atol=0, rtol=0)


# (scaling kind, the layers it acts on): none; the full layers only, as Gemma 3 extends its context; every layer
SCALED = [(None, None), ("linear", "global"), ("yarn", "global"), ("linear", "all"), ("yarn", "all")]


@pytest.mark.parametrize("kind, layers", SCALED)
def test_logits_equal_transformers(gemma, kind, layers):
    folder, run = gemma
    torch.manual_seed(1)
    x = torch.randint(0, VOCAB, (2, 4 * L))  # 16 windows long, four times L: where every scaling acts
    scaling = ScalingConfig(kind, 4.0, L, layers=layers) if kind else None
    ours, theirs = logits(load_model(run, scaling=scaling), x), logits(reference(folder, rope_of(kind, layers)), x)
    scale = theirs.abs().max()
    assert scale > 2  # logits far from 0, so a relative tolerance means something
    assert (ours - theirs).abs().max() <= 1e-4 * scale, (kind, layers)
    if kind:  # the scaling mattered, and so did the layers it acts on
        assert (ours - logits(load_model(run, scaling=None), x)).abs().max() > 1e-2 * scale
        other = ScalingConfig(kind, 4.0, L, layers="global" if layers == "all" else "all")
        assert (ours - logits(load_model(run, scaling=other), x)).abs().max() > 1e-2 * scale


def test_a_scaling_without_layers_acts_on_the_full_layers(gemma):
    _, run = gemma
    x = torch.randint(0, VOCAB, (1, 3 * L))
    unnamed, named = (logits(load_model(run, scaling=ScalingConfig("yarn", 4.0, L, layers=layers)), x)
                      for layers in (None, "global"))
    assert torch.equal(unnamed, named)
    model = load_model(run, scaling=ScalingConfig("yarn", 4.0, L))
    assert model.position.scaling.type == "yarn" and model.local.scaling is None  # the evaluators read the full ones
    assert model.local.theta == LOCAL_THETA and model.position.theta == THETA


def test_the_window_and_the_local_base_matter(gemma):
    """The sliding layers read only the last WINDOW keys, and rotate with their own base."""
    folder, run = gemma
    x = torch.randint(0, VOCAB, (1, 3 * L))
    ours = logits(load_model(run), x)
    scale = ours.abs().max()
    model = load_model(run)
    model.kinds["sliding"] = (model.kinds["sliding"][0], None, False)  # the sliding layers reading every key
    assert (logits(model, x) - ours).abs().max() > 1e-2 * scale
    same_base = reference(folder, {**PLAIN, "sliding_attention": PLAIN["full_attention"]})
    assert (logits(same_base, x) - ours).abs().max() > 1e-2 * scale
    # inside the window the sliding layers see every key: the first WINDOW logits do not depend on it
    model.kinds["sliding"] = (model.kinds["sliding"][0], 10 ** 6, False)
    torch.testing.assert_close(logits(model, x[:, :WINDOW]), ours[:, :WINDOW], atol=1e-5, rtol=0)


@pytest.mark.parametrize("kind, layers", [("yarn", "global"), ("linear", "all")])
def test_a_checkpoints_own_scaling_converts_with_the_layers_it_acts_on(tmp_path, kind, layers):
    rope = rope_of(kind, layers)
    folder = checkpoint(tmp_path / "gemma", rope)
    run = convert.to_run.convert(f"hf:{folder}", tmp_path / "run")
    model = load_model(run)
    assert model.position.scaling.type == kind and model.position.scaling.layers == layers
    assert model.position.scaling.factor == 4.0 and model.position.scaling.original_max_position_embeddings == L
    x = torch.randint(0, VOCAB, (2, 4 * L))
    ours, theirs = logits(model, x), logits(reference(folder), x)
    assert (ours - theirs).abs().max() <= 1e-4 * theirs.abs().max()
    # exported, the scaling is on the same layer types
    out = export(run, tmp_path / "hf")
    written = json.loads((out / "config.json").read_text())["rope_parameters"]
    assert written["full_attention"]["rope_type"] == kind
    assert written["sliding_attention"]["rope_type"] == (kind if layers == "all" else "default")
    assert written["sliding_attention"]["rope_theta"] == LOCAL_THETA
    again = transformers.AutoModelForCausalLM.from_pretrained(out, dtype=torch.float32)
    assert (logits(again, x) - theirs).abs().max() <= 1e-4 * theirs.abs().max()


def test_greedy_continuations_are_equal(gemma):
    folder, run = gemma
    prompt = load_tokenizer(run).encode("the quick brown fox")
    ours = list(generate_tokens(load_model(run), prompt, max_new_tokens=3 * L, temperature=0.0))
    theirs = reference(folder).generate(torch.tensor([prompt]), max_new_tokens=3 * L, do_sample=False,
                                        min_new_tokens=3 * L)
    assert ours == theirs[0, len(prompt):].tolist()
    assert len(set(ours)) > 5  # a continuation that repeats one token would test little


def decoded(model, x, cache: KVCache, held: list | None = None) -> torch.Tensor:
    """The logits of x through `cache`: a chunked prefill, then a token at a time (`held`: after each, the number of
    keys each of a rolling cache's windows holds)."""
    with torch.no_grad():
        steps = [model(x[:, :5], cache=cache)[0], model(x[:, 5:2 * WINDOW + 3], cache=cache)[0]]
        for t in range(2 * WINDOW + 3, x.shape[1]):
            steps.append(model(x[:, t:t + 1], cache=cache)[0])
            if held is not None:
                held.append({len(c) for c in cache.windowed.values()})
    return torch.cat(steps, 1)


@pytest.mark.parametrize("scaling, rolling", [
    (None, False), (ScalingConfig("yarn", 4.0, L), False), (ScalingConfig("linear", 4.0, L, layers="all"), False),
    (ScalingConfig("linear", 4.0, L, layers="all"), True), (ScalingConfig("dynamic", 4.0, L), True)])
def test_decoding_through_the_kv_cache_equals_the_full_forward(gemma, scaling, rolling):
    _, run = gemma
    model = load_model(run, scaling=scaling)
    torch.manual_seed(3)
    x = torch.randint(0, VOCAB, (2, 3 * L))
    # a dynamic scaling decodes each token at the frequencies of its own length, so its reference decodes too
    full = decoded(model, x, KVCache(len(TYPES))) if model.position.dynamic else logits(model, x)
    cache, held = KVCache(len(TYPES), rolling=rolling), []
    steps = decoded(model, x, cache, held)
    torch.testing.assert_close(steps, full, atol=1e-4 * float(full.abs().max()), rtol=0)
    full_layers = [i for i, kind in enumerate(TYPES) if kind == "full_attention"]
    assert all(cache.keys[i].shape[-2] >= x.shape[1] for i in full_layers)
    if rolling:  # the sliding layers' keys apart, at most 2 windows of them; the full layers' in the cache given
        (local,) = cache.windowed.values()
        assert all(local.keys[i] is None for i in full_layers) and all(cache.keys[i] is None for i in range(len(TYPES))
                                                                        if i not in full_layers)
        assert max(max(h) for h in held) == 2 * WINDOW and min(min(h) for h in held) == WINDOW
        assert local.rolled
    else:
        assert not cache.windowed


def test_the_export_gives_transformers_the_same_model(gemma, tmp_path):
    folder, run = gemma
    out = export(run, tmp_path / "hf")
    config = json.loads((out / "config.json").read_text())
    assert config["architectures"] == ["Gemma3ForCausalLM"] and config["layer_types"] == TYPES
    assert (config["head_dim"], config["query_pre_attn_scalar"], config["sliding_window"]) == (32, 24, WINDOW)
    again, info = transformers.AutoModelForCausalLM.from_pretrained(out, dtype=torch.float32, output_loading_info=True)
    assert not any(info.get(k) for k in ("missing_keys", "unexpected_keys", "mismatched_keys")), info
    original = reference(folder).state_dict()
    for name, tensor in again.state_dict().items():  # unfolded norms and half-split q/k rows: the same tensors
        torch.testing.assert_close(tensor, original[name], atol=1e-6, rtol=0)
    x = torch.randint(0, VOCAB, (1, 3 * L))
    theirs = logits(reference(folder), x)
    assert (logits(again, x) - theirs).abs().max() <= 1e-4 * theirs.abs().max()


def write_gguf(folder: Path, out: Path) -> Path:
    """A float32 .gguf of a Gemma 3 checkpoint folder, laid out as llama.cpp's converter lays one out (its norms stored
    as 1 + w, q and k rows as transformers has them). It says what a Gemma 3 .gguf says: transformers then takes the
    layer pattern (5 sliding layers, then a full one), the sliding layers' base (10000) and query_pre_attn_scalar
    (256) from Gemma3TextConfig's defaults, as llama.cpp does."""
    gguf = pytest.importorskip("gguf", reason="transformers reads .gguf files with it (pip install -e '.[dev]')")
    import numpy as np
    cfg = json.loads((folder / "config.json").read_text())
    writer = gguf.GGUFWriter(str(out), "gemma3")
    writer.add_name("tiny")
    writer.add_context_length(cfg["max_position_embeddings"])
    writer.add_block_count(cfg["num_hidden_layers"])
    writer.add_feed_forward_length(cfg["intermediate_size"])
    writer.add_embedding_length(cfg["hidden_size"])
    writer.add_head_count(cfg["num_attention_heads"])
    writer.add_head_count_kv(cfg["num_key_value_heads"])
    writer.add_key_length(cfg["head_dim"])
    writer.add_value_length(cfg["head_dim"])
    writer.add_layer_norm_rms_eps(cfg["rms_norm_eps"])
    writer.add_rope_freq_base(cfg["rope_parameters"]["full_attention"]["rope_theta"])
    writer.add_sliding_window(cfg["sliding_window"])
    writer.add_vocab_size(cfg["vocab_size"])
    writer.add_tokenizer_model("llama")
    writer.add_token_list([f"<t{i}>" for i in range(cfg["vocab_size"])])
    writer.add_token_scores([0.0] * cfg["vocab_size"])
    writer.add_token_types([1] * cfg["vocab_size"])
    names = {"input_layernorm": "attn_norm", "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k",
             "self_attn.v_proj": "attn_v", "self_attn.o_proj": "attn_output", "self_attn.q_norm": "attn_q_norm",
             "self_attn.k_norm": "attn_k_norm", "post_attention_layernorm": "post_attention_norm",
             "pre_feedforward_layernorm": "ffn_norm", "post_feedforward_layernorm": "post_ffw_norm",
             "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down"}
    for key, tensor in load_file(folder / "model.safetensors").items():
        array = tensor.numpy() + (1 if key.endswith("norm.weight") else 0)
        if key == "model.embed_tokens.weight" or key == "model.norm.weight":
            name = {"model.embed_tokens.weight": "token_embd", "model.norm.weight": "output_norm"}[key]
        else:
            name = f"blk.{key.split('.')[2]}.{names['.'.join(key.split('.')[3:-1])]}"
        writer.add_tensor(f"{name}.weight", np.ascontiguousarray(array))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return out


def test_a_gguf_file_converts_with_parity(tmp_path):
    types = ["sliding_attention"] * 5 + ["full_attention"]
    rope = {"full_attention": {"rope_type": "default", "rope_theta": 1e6},
            "sliding_attention": {"rope_type": "default", "rope_theta": 1e4}}
    folder = checkpoint(tmp_path / "gemma", rope, layer_types=types, query_pre_attn_scalar=256)
    gpt = convert.to_run.convert_model(f"hf:{write_gguf(folder, tmp_path / 'tiny.gguf')}")
    assert gpt.cfg.layer_types == types and gpt.cfg.attention_scalar == 256
    assert (gpt.cfg.position.theta, gpt.cfg.position.local_theta, gpt.cfg.head_dim) == (1e6, 1e4, 32)
    x = torch.randint(0, VOCAB, (1, 3 * L))
    theirs = logits(reference(folder), x)
    assert (logits(gpt, x) - theirs).abs().max() <= 1e-4 * theirs.abs().max()


def test_the_embedding_scale_is_gemmas():
    """Gemma multiplies its embeddings by sqrt(hidden_size) cast to the weights' dtype; scale_embeddings multiplies
    by sqrt(d_model): the same float32 numbers, at widths whose root is not a float32 number."""
    from transformers.models.gemma3.modeling_gemma3 import Gemma3TextScaledWordEmbedding
    for d in (640, 1152, 2560):
        theirs = Gemma3TextScaledWordEmbedding(50, d, 0, embed_scale=d ** 0.5)
        ours = GPT(ModelConfig(vocab_size=50, d_model=d, n_layers=1, n_heads=4, n_kv_heads=1, ffn_hidden=64))
        ours.embed.weight.data.copy_(theirs.weight.data)
        ids = torch.arange(50)
        with torch.no_grad():
            a, b = ours.embed(ids) * ours.embed_scale, theirs(ids)
        assert (a - b).abs().max() <= 1e-6 * b.abs().max()
        assert ours.embed_scale == math.sqrt(d)


# ----------------------------------------------------------------------------- what is refused, in one line

def refused(capsys, main, argv: list[str]) -> str:
    """The one line a command answers with exit code 2."""
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("error: ") and "Traceback" not in err
    return err


@pytest.mark.parametrize("weight", ["model.layers.0.self_attn.q_norm.weight",
                                    "model.layers.2.post_feedforward_layernorm.weight"])
def test_a_checkpoint_lacking_a_norm_is_refused(gemma, tmp_path, capsys, weight):
    folder = tmp_path / "lacking"
    shutil.copytree(gemma[0], folder)
    weights = load_file(folder / "model.safetensors")
    del weights[weight]
    save_file(weights, folder / "model.safetensors", metadata={"format": "pt"})
    err = refused(capsys, convert.to_run.main, [f"hf:{folder}", str(tmp_path / "run")])
    assert f"lacks {weight}" in err
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("settings, message", [
    ({"attn_logit_softcapping": 50.0}, "it soft-caps its attention scores (attn_logit_softcapping=50.0)"),
    ({"final_logit_softcapping": 30.0}, "it soft-caps its logits (final_logit_softcapping=30.0)"),
    ({"use_bidirectional_attention": True}, "its attention is bidirectional"),
    ({"hidden_activation": "gelu"}, "its MLP activation is gelu, not GeGLU's gelu_pytorch_tanh"),
])
def test_what_the_gpt_lacks_is_refused(tmp_path, capsys, settings, message):
    folder = checkpoint(tmp_path / "gemma", **settings)
    err = refused(capsys, convert.to_run.main, [f"hf:{folder}", str(tmp_path / "run")])
    assert "cannot be converted: " + message in err


def test_a_sliding_scaling_of_its_own_is_refused(tmp_path, capsys):
    rope = {"full_attention": scaled("linear", THETA), "sliding_attention": scaled("linear", LOCAL_THETA, 2.0)}
    folder = checkpoint(tmp_path / "gemma", rope)
    err = refused(capsys, convert.to_run.main, [f"hf:{folder}", str(tmp_path / "run")])
    assert "its sliding layers' RoPE scaling (linear) is not its full layers' (linear)" in err


def test_hf_path_refuses_a_rope_per_layer_type_and_says_to_convert(gemma, capsys):
    import generate
    err = refused(capsys, generate.main, [f"hf:{gemma[0]}", "--prompt", "the", "--max-new-tokens", "2"])
    assert "a RoPE per layer type" in err and "python -m convert.to_run" in err


TINY = ["--config", str(ROOT / "configs/tiny.yaml"), "--print-config", "model.n_layers=3"]


@pytest.mark.parametrize("overrides, message", [
    (["model.layer_types=[full_attention, sliding_attention]", "model.sliding_window=8"],
     "model.layer_types must be one entry per layer (3 entries), got 2"),
    (["model.layer_types=[full_attention, local_attention, full_attention]", "model.sliding_window=8"],
     "model.layer_types: 'local_attention' is not a layer type; each entry is sliding_attention or full_attention"),
    (["model.layer_types=[full_attention, sliding_attention, full_attention]"],
     "model.layer_types lists sliding_attention layers, which need model.sliding_window"),
    (["model.layer_types=[full_attention, sliding_attention, full_attention]", "model.sliding_window=8",
      "model.position.layer_pattern=rope,nope"], "model.layer_types and model.position.layer_pattern both say"),
    (["model.position.local_theta=100"], "model.position.local_theta is the base of the sliding layers of "
                                         "model.layer_types, which is unset"),
    (["model.position.scaling={type: yarn, factor: 4, original_max_position_embeddings: 64, layers: global}"],
     "model.position.scaling.layers: global means the full_attention layers, and this model sets no "
     "model.layer_types; give layers: all"),
    (["model.layer_types=[sliding_attention, sliding_attention, sliding_attention]", "model.sliding_window=8",
      "model.position.scaling={type: yarn, factor: 4, original_max_position_embeddings: 64}"],
     "has no full_attention layer in model.layer_types; give layers: all"),
    (["model.position.scaling={type: yarn, factor: 4, original_max_position_embeddings: 64, layers: local}"],
     "model.position.scaling.layers must be global or all"),
    (["model.mlp_activation=gelu"], "model.mlp_activation: 'gelu' is not one of silu, gelu_tanh"),
    (["model.attention_scalar=0"], "model.attention_scalar must be a finite number > 0 or null"),
])
def test_bad_layer_settings_are_one_line(capsys, overrides, message):
    assert message in refused(capsys, train.main, [*TINY, *overrides])


def test_a_scaling_given_at_load_time_is_checked_against_the_layers():
    cfg = ModelConfig(vocab_size=10, n_layers=2, position=PositionConfig(
        scaling=ScalingConfig("yarn", 4.0, 64, layers="global")))
    with pytest.raises(UserError, match="global means the full_attention layers, and this model sets no"):
        GPT(cfg)
    with pytest.raises(UserError, match="has no full_attention layer"):  # a model of sliding layers only
        GPT(ModelConfig(vocab_size=10, n_layers=2, layer_types=["sliding_attention"] * 2, sliding_window=4,
                        position=PositionConfig(scaling=ScalingConfig("yarn", 4.0, 64))))


def test_head_dim_is_free_only_where_given():
    cfg = ModelConfig(vocab_size=10, d_model=36, n_heads=4, n_kv_heads=2, head_dim=16)
    cfg.validate()
    check(cfg)
    model = GPT(cfg)
    assert model.blocks[0].attn.q_proj.weight.shape == (4 * 16, 36)
    assert model(torch.zeros(1, 5, dtype=torch.long))[0].shape == (1, 5, 10)
    with pytest.raises(UserError, match=r"model.d_model \(36\) must be divisible by model.n_heads \(8\)"):
        ModelConfig(vocab_size=10, d_model=36, n_heads=8, n_kv_heads=2).validate()
    assert ModelConfig(d_model=128, n_heads=4).head_dim == 32  # as before: d_model / n_heads


def test_a_scaling_at_the_command_line_names_the_layers_it_acts_on(gemma, tmp_path):
    from eval import context_use
    rows = context_use.main([str(gemma[1]), "--contexts", "8,24,56", "--targets", "8", "--max-docs", "2",
                             "--scaling", "linear,linear:global,linear:all", "--out", str(tmp_path)])
    losses = {}
    for r in rows:
        losses.setdefault(r["scaling"], []).append(r["loss"])
    assert sorted(losses) == ["linear", "linear:all", "linear:global"] and all(r["factor"] == 2 for r in rows)
    assert losses["linear"] == losses["linear:global"]  # a model with layer types scales its full layers by default
    assert all(abs(a - b) > 1e-3 for a, b in zip(losses["linear"], losses["linear:all"]))


@pytest.mark.parametrize("scaling, message", [
    ("yarn:global", "has no model.layer_types, so every layer is global; give yarn"),
    ("yarn:local", "--scaling yarn:local: after a method, ':global' (the full_attention layers of model.layer_types) "
                   "or ':all' names the layers it acts on"),
])
def test_layers_a_plain_model_lacks_are_refused_at_the_command_line(tiny_run, tmp_path, capsys, scaling, message):
    from eval import extrapolation
    assert message in refused(capsys, extrapolation.main, [str(tiny_run), "--lengths", "64", "--scaling", scaling,
                                                           "--out", str(tmp_path)])


def test_rope_settings_print_each_layer_type_and_flag_what_users_trip_on(gemma, capsys):
    from eval import rope_settings
    for model in (str(gemma[1]), f"hf:{gemma[0]}"):  # a run, and the checkpoint that hf: itself does not evaluate
        rope_settings.main([model])
        out = capsys.readouterr().out
        assert f"trained at {L} tokens, {len(TYPES)} layers" in out and out.rstrip().endswith("nothing to check")
        assert f"| 2, 4 (2) | full_attention | rope | {THETA:,.0f} | none | 1 | - | - |" in out
        assert f"| 0-1, 3, 5 (4) | sliding_attention | rope | {LOCAL_THETA:,.0f} | none | 1 | {WINDOW} | - |" in out
    rope_settings.main([str(gemma[1]), "--scaling", "{type: yarn, factor: 4}"])
    out = capsys.readouterr().out
    assert f"| full_attention | rope | {THETA:,.0f} | yarn s = 4 | {0.1 * math.log(4) + 1:.4g} | - | {L} |" in out
    assert "| sliding_attention | rope | 100 | none | 1 |" in out and "nothing to check" in out
    rope_settings.main([str(gemma[1]), "--scaling", "{type: yarn, factor: 4, layers: all, attention_factor: 1, "
                                                    "original_max_position_embeddings: 16}"])
    checks = [line for line in capsys.readouterr().out.splitlines() if line.startswith("check: ")]
    assert len(checks) == 3 and "original_max_position_embeddings is 16, but the model was trained at 32" in checks[0]
    assert "acts on the 4 sliding-window layers too, which read only 8 tokens" in checks[1]
    assert "attention_factor 1 drops YaRN's temperature: 0.1 ln s + 1 = 1.1386 at s = 4" in checks[2]
