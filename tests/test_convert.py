"""Pretrained checkpoints converted into run directories (convert/to_run.py, hf/weights.py): for a random tiny
checkpoint of every covered architecture the GPT's logits equal transformers' to 1e-4 relative in float32, with and
without each RoPE scaling; greedy continuations are equal; transformers -> run -> export -> transformers gives the
same logits; the run needs no transformers once converted; and train.init_from: hf:PATH fine-tunes one. SmolLM2
(`make smollm2`) converts with the same parity where it is prepared."""
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

transformers = pytest.importorskip("transformers", reason="the oracle is transformers (pip install -e '.[dev]')")
from tokenizers import Tokenizer, models, pre_tokenizers, trainers  # noqa: E402

import train  # noqa: E402
from conftest import book_texts  # noqa: E402
from checkpoint import load_model, load_tokenizer, read_pointer  # noqa: E402
from eval import extrapolation  # noqa: E402
from config import ScalingConfig  # noqa: E402
from convert.to_run import convert  # noqa: E402
from convert.to_hf import export  # noqa: E402
from generate import generate_tokens  # noqa: E402
from hf import checkpoints as hf  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SMOLLM2 = ROOT / ".cache" / "smollm2" / "SmolLM2-135M-Instruct-Q4_1"
L, VOCAB = 32, 320  # a tokenizer of 300 tokens: ids below the vocabulary, as in Qwen2
SHAPE = dict(vocab_size=VOCAB, hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=2, max_position_embeddings=L, rms_norm_eps=1e-5, bos_token_id=1, eos_token_id=2)
ARCHITECTURES = {  # name: (config class, model class, settings beyond SHAPE)
    "llama-tied": ("LlamaConfig", "LlamaForCausalLM", dict(tie_word_embeddings=True, rope_theta=10000.0)),
    "llama3-untied": ("LlamaConfig", "LlamaForCausalLM", dict(tie_word_embeddings=False, rope_theta=500000.0)),
    "qwen2-biases": ("Qwen2Config", "Qwen2ForCausalLM", dict(tie_word_embeddings=False, use_sliding_window=False)),
    "mistral": ("MistralConfig", "MistralForCausalLM", dict(tie_word_embeddings=False, sliding_window=None)),
}
SCALINGS = [None, {"type": "linear", "factor": 4.0}, {"type": "ntk", "factor": 4.0}, {"type": "yarn", "factor": 4.0},
            {"type": "llama3", "factor": 4.0}, {"type": "dynamic", "factor": 1.0},
            {"type": "longrope", "factor": 4.0, "short_factor": [1.0, 1.0, 1.1, 1.2, 1.5, 2.0, 2.5, 3.0],
             "long_factor": [1.0, 1.2, 1.5, 2.0, 3.0, 4.0, 5.0, 6.0]}]  # head_dim 16: a factor per pair


def tokenizer_files(folder: Path) -> None:
    """A byte-level BPE of VOCAB tokens, learned from a little text, saved as transformers saves a fast tokenizer."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    from tokenizers import decoders
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=300, special_tokens=["<unk>", "<s>", "</s>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(["the quick brown fox jumps over the lazy dog " * 20, "to be or not to be " * 20], trainer)
    fast = transformers.PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>",
                                                unk_token="<unk>")
    fast.save_pretrained(folder)


def checkpoint(kind: str, folder: Path) -> Path:
    """A random tiny checkpoint of `kind` with large weights (sharp attention), so that positions and scalings move
    its logits by far more than the tolerance."""
    config_class, model_class, settings = ARCHITECTURES[kind]
    config = getattr(transformers, config_class)(**SHAPE, **settings)
    torch.manual_seed(0)
    model = getattr(transformers, model_class)(config)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "proj" in name:
                p.mul_(12 if "q_proj" in name or "k_proj" in name else 4)
            if name.endswith("bias"):
                p.normal_(0, 0.5)
    model.save_pretrained(folder)
    tokenizer_files(folder)
    return folder


@pytest.fixture(scope="module")
def pairs(tmp_path_factory) -> dict[str, tuple[str, Path]]:
    """{kind: (hf:PATH, its converted run)}."""
    root = tmp_path_factory.mktemp("convert")
    out = {}
    for kind in ARCHITECTURES:
        path = f"hf:{checkpoint(kind, root / kind)}"
        out[kind] = path, convert(path, root / f"{kind}-run")
    return out


def logits(model, x: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return model(x)[0]


@pytest.mark.parametrize("kind", ARCHITECTURES)
def test_converted_logits_equal_transformers_with_every_scaling(pairs, kind):
    path, run = pairs[kind]
    torch.manual_seed(1)
    x = torch.randint(0, VOCAB, (2, 4 * L))  # four times L: where every scaling acts
    for scaling in SCALINGS:
        parsed = ScalingConfig(**scaling, original_max_position_embeddings=L) if scaling else None
        ours, theirs = logits(load_model(run, scaling=parsed), x), logits(hf.load_model(path, parsed, "cpu"), x)
        scale = theirs.abs().max()
        assert (ours - theirs).abs().max() <= 1e-4 * scale, (kind, scaling)
        if scaling:  # the scaling mattered
            assert (ours - logits(load_model(run, scaling=None), x)).abs().max() > 1e-2 * scale


@pytest.mark.parametrize("kind", ["llama-tied", "qwen2-biases"])
def test_greedy_continuations_are_equal(pairs, kind):
    path, run = pairs[kind]
    prompt = load_tokenizer(run).encode("the quick brown fox")
    ours = generate_tokens(load_model(run), prompt, max_new_tokens=3 * L, temperature=0.0)
    ref = hf.load_model(path, None, "cpu", own=True).hf
    theirs = ref.generate(torch.tensor([prompt]), max_new_tokens=3 * L, do_sample=False, min_new_tokens=3 * L)
    assert list(ours)[-3 * L:] == theirs[0, len(prompt):].tolist()


@pytest.mark.parametrize("kind", ARCHITECTURES)
def test_round_trip_through_the_export(pairs, kind, tmp_path):
    path, run = pairs[kind]
    out = export(run, tmp_path / "hf")
    torch.manual_seed(2)
    x = torch.randint(0, VOCAB, (1, 2 * L))
    again = transformers.AutoModelForCausalLM.from_pretrained(out, dtype=torch.float32)
    original = hf.load_model(path, None, "cpu", own=True).hf
    with torch.no_grad():
        a, b = again(x).logits, original(x).logits
    assert (a - b).abs().max() <= 1e-4 * b.abs().max()
    assert transformers.AutoTokenizer.from_pretrained(out)("to be or not")["input_ids"] == \
        transformers.AutoTokenizer.from_pretrained(path[3:])("to be or not")["input_ids"]


def test_a_converted_run_holds_safetensors_its_tokenizer_and_no_optimizer_state(pairs):
    _, run = pairs["llama-tied"]
    pointer = read_pointer(run)
    assert pointer["state"] is None and pointer["weights"].endswith(".safetensors")
    assert sorted(p.name for p in run.iterdir() if p.is_file() and p.name != "lock") == [
        "SOURCE.md", "checkpoint.json", "config.yaml", pointer["weights"]]
    assert {"tokenizer.json", "tokenizer_config.json"} <= {p.name for p in (run / "tokenizer").iterdir()}
    assert load_tokenizer(run).decode(load_tokenizer(run).encode("to be or not")) == "to be or not"


def test_tools_run_a_converted_model_without_transformers(pairs, tmp_path):
    """generate.py and eval.extrapolation on the converted run, in a process where importing transformers fails."""
    _, run = pairs["qwen2-biases"]
    code = ("import sys; sys.modules['transformers'] = None; sys.argv[0] = 'x'; "
            "import generate; from eval import extrapolation; "
            f"generate.main([{str(run)!r}, '--prompt', 'the', '--max-new-tokens', '8', '--seed', '1']); "
            f"extrapolation.main([{str(run)!r}, '--lengths', '16,64', '--max-tokens', '256', '--data', 'shakespeare', "
            f"'--scaling', 'none,yarn,dynamic', '--out', {str(tmp_path)!r}])")
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    rows = json.loads((tmp_path / "results.json").read_text())
    assert {r["scaling"] for r in rows} >= {"none", "yarn", "dynamic"} and all(r["ppl"] for r in rows)


def test_train_init_from_hf_fine_tunes_with_the_checkpoints_tokenizer(pairs, tmp_path):
    path, _ = pairs["llama3-untied"]
    books = tmp_path / "books"  # eight documents of real text, so the test split holds one whole
    books.mkdir()
    for i, text in enumerate(book_texts(8, 4_000)):
        (books / f"{i}.txt").write_text(text)
    (tmp_path / "extend.yaml").write_text(f"data: {{source: {books}}}\n")  # no model section: the checkpoint's
    train.main(["--config", str(tmp_path / "extend.yaml"), f"run.out_dir={tmp_path}", "run.name=extended",
                f"train.init_from={path}", f"data.cache_dir={tmp_path / 'cache'}", "model.max_seq_len=128",
                "model.position.scaling={type: yarn, factor: 4}", "train.seq_len=32", "train.batch_size=2",
                "train.max_steps=4", "train.warmup_steps=1", "train.eval_every=2", "train.ckpt_every=2",
                "train.eval_tokens=256", "train.positions={type: pose, max_position: 128}"])  # PoSE windows of L / 4
    run = tmp_path / "extended"
    config = load_model(run).cfg
    assert (config.tie_embeddings, config.scale_embeddings, config.max_seq_len) == (False, False, 128)
    assert config.position.scaling.original_max_position_embeddings == L
    assert load_tokenizer(run).encode("to be") == load_tokenizer(path).encode("to be")
    # its own text, evaluated without --data, is read with the checkpoint's tokenizer (no sentencepiece is trained)
    rows = extrapolation.main([str(run), "--lengths", "32,128", "--max-tokens", "256", "--out", str(tmp_path / "eval")])
    assert [r["scaling"] for r in rows] == ["yarn (fine-tuned)"] * 2 and all(r["ppl"] for r in rows)
    assert not list((tmp_path / "cache").glob("*/tokenizer.model"))
    # exported with its rope parameters, it loads in transformers with no custom code and gives our logits
    out = export(run, tmp_path / "exported")
    assert json.loads((out / "config.json").read_text())["rope_parameters"]["rope_type"] == "yarn"
    theirs = transformers.AutoModelForCausalLM.from_pretrained(out, dtype=torch.float32)
    x = torch.randint(0, VOCAB, (1, 128))
    with torch.no_grad():
        expected = logits(load_model(run), x)
        assert (theirs(x).logits - expected).abs().max() <= 1e-4 * expected.abs().max()


@pytest.mark.skipif(not SMOLLM2.is_dir(), reason="SmolLM2 is not prepared here (make smollm2)")
def test_smollm2_converts_with_parity(tmp_path):
    path = f"hf:{SMOLLM2}"
    run = convert(path, tmp_path / "smollm2")
    x = torch.tensor([load_tokenizer(run).encode("The capital of France is Paris. " * 40)])
    for scaling in (None, ScalingConfig("yarn", 4.0, 8192)):
        ours, theirs = logits(load_model(run, scaling=scaling), x), logits(hf.load_model(path, scaling, "cpu"), x)
        assert (ours - theirs).abs().max() <= 1e-4 * theirs.abs().max()
    assert load_tokenizer(run).encode("Hello world") == load_tokenizer(path).encode("Hello world")
