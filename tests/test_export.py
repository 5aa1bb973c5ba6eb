"""convert/to_hf.py: transformers' Llama, loaded from the exported directory with no custom code,
reproduces our logits, greedy generations and token ids."""
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml
from conftest import book_texts

transformers = pytest.importorskip("transformers", reason="transformers is the oracle here (pip install -e '.[dev]')")

from checkpoint import load_model, save_checkpoint
from config import Config, ModelConfig, PositionConfig, to_dict
from data import Tokenizer
from data.tokenizer import train_tokenizer
from convert.to_hf import main
from generate import generate_tokens
from model.gpt import GPT, RMSNorm

REPO = Path(__file__).resolve().parents[1]
VOCAB = 512
L = 32  # the original training length of the context-extended models
# Newlines, double spaces, a tab, accents outside the vocab (byte fallback), digits, a literal "<s>".
PARAGRAPH = ("CHAPTER XII.\n\nThe  café on the Rue Saint-Honoré opened at 7:45; naïve Zoë paid 1,203 francs\n"
             "for déjà-vu and Ærøskøbing herring.  \n\n   Indented,\tthen tabbed — “quoted” <s> end.\n")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """(tokenizer.model path, a text, that text as our token ids)."""
    texts = book_texts(4, 40_000)
    path = train_tokenizer(texts, VOCAB, tmp_path_factory.mktemp("tok") / "tok")
    text = "\n".join(texts)
    return path, text, Tokenizer(path).encode(text)


def make_run(root: Path, tokenizer_model: Path, name: str, position="rope", max_seq_len=128, scaling=None,
             rotary_fraction=1.0, kept_frequencies=1.0) -> Path:
    """A run directory as train.py writes it, holding random weights with non-trivial norms."""
    cfg = ModelConfig(vocab_size=VOCAB, d_model=64, n_layers=2, n_heads=4, n_kv_heads=2, max_seq_len=max_seq_len,
                      position=PositionConfig(type=position, scaling=scaling, rotary_fraction=rotary_fraction,
                                              kept_frequencies=kept_frequencies))
    torch.manual_seed(0)
    model = GPT(cfg)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, RMSNorm):
                m.weight.add_(0.3 * torch.randn_like(m.weight))
    config = Config(model=cfg)
    config.run.name, config.run.out_dir, config.data.vocab_size = name, str(root), VOCAB
    run_dir = root / name
    run_dir.mkdir()
    (run_dir / "config.yaml").write_text(yaml.safe_dump(to_dict(config), sort_keys=False))
    shutil.copyfile(tokenizer_model, run_dir / "tokenizer.model")
    save_checkpoint(run_dir, model, {"step": 1}, 1)
    return run_dir


def load_exported(out: Path):
    model, info = transformers.AutoModelForCausalLM.from_pretrained(out, local_files_only=True,
                                                                    output_loading_info=True)
    assert type(model).__name__ == "LlamaForCausalLM"
    assert not any(info.get(k) for k in ("missing_keys", "unexpected_keys", "mismatched_keys")), info
    return model.eval()


@pytest.fixture(scope="module")
def rope_export(corpus, tmp_path_factory):
    root = tmp_path_factory.mktemp("runs")
    run_dir = make_run(root, corpus[0], "rope")
    main([str(run_dir), str(root / "hf")])
    return run_dir, root / "hf"


def check_same_model(run_dir: Path, out: Path, ids: list[int], length: int):
    ours, theirs = load_model(run_dir), load_exported(out)
    x = torch.tensor([ids[:length]])
    with torch.no_grad():
        expected = ours(x)[0]
        got = theirs(x).logits
    assert got.shape == expected.shape
    torch.testing.assert_close(got, expected, atol=1e-4, rtol=0)

    tok = Tokenizer(run_dir / "tokenizer.model")
    prompt, eos = [tok.bos_id] + ids[:63], tok.eos_id
    mine = list(generate_tokens(ours, prompt, 32, temperature=0, stop_id=eos))
    out_ids = theirs.generate(torch.tensor([prompt]), attention_mask=torch.ones(1, len(prompt), dtype=torch.long),
                              do_sample=False, max_new_tokens=32)[0, len(prompt):].tolist()
    if out_ids and out_ids[-1] == eos:  # transformers keeps the EOS it stopped at; ours does not yield it
        out_ids = out_ids[:-1]
    assert out_ids == mine
    assert len(mine) >= 8  # a generation that stops at once would test little


def test_rope_model_matches_transformers(rope_export, corpus):
    check_same_model(*rope_export, corpus[2], 64)


@pytest.mark.parametrize("kind", ["yarn", "linear", "llama3"])
def test_context_extended_model_matches_transformers(kind, corpus, tmp_path):
    scaling = {"type": kind, "factor": 4.0, "original_max_position_embeddings": L}
    run_dir = make_run(tmp_path, corpus[0], kind, max_seq_len=4 * L, scaling=scaling)
    main([str(run_dir), str(tmp_path / "hf")])
    check_same_model(run_dir, tmp_path / "hf", corpus[2], 4 * L)
    # The Hugging Face convention for scaled RoPE, which every transformers version reads alike:
    # max_position_embeddings is the original length, the context is that times the factor.
    assert json.loads((tmp_path / "hf" / "config.json").read_text())["max_position_embeddings"] == L


def test_static_ntk_gives_the_same_logits(corpus, tmp_path):
    scaling = {"type": "ntk", "factor": 2.0, "original_max_position_embeddings": L}
    run_dir = make_run(tmp_path, corpus[0], "ntk", max_seq_len=2 * L, scaling=scaling)
    main([str(run_dir), str(tmp_path / "hf")])
    ours, theirs = load_model(run_dir), load_exported(tmp_path / "hf")
    x = torch.tensor([corpus[2][:3 * L]])
    with torch.no_grad():
        torch.testing.assert_close(theirs(x).logits, ours(x)[0], atol=1e-4, rtol=0)


def test_tokenizer_encodes_to_our_ids(rope_export, corpus):
    run_dir, out = rope_export
    ours = Tokenizer(run_dir / "tokenizer.model")
    theirs = transformers.AutoTokenizer.from_pretrained(out, local_files_only=True)
    assert ours.sp.encode("é") == [ours.sp.piece_to_id(f"<0x{b:02X}>") for b in "é".encode()], \
        "the paragraph should exercise byte fallback"
    # add_special_tokens=True prepends BOS, like generate.py's prompts and every training document;
    # add_special_tokens=False gives the bare ids of ours.encode(text).
    assert theirs(PARAGRAPH)["input_ids"] == ours.encode(PARAGRAPH, bos=True)
    assert theirs(PARAGRAPH, add_special_tokens=False)["input_ids"] == ours.encode(PARAGRAPH)
    text = corpus[1][:20_000]
    assert theirs(text, add_special_tokens=False)["input_ids"] == ours.encode(text)
    assert theirs.decode(ours.encode(PARAGRAPH, bos=True, eos=True), skip_special_tokens=True) == PARAGRAPH
    assert (theirs.bos_token_id, theirs.eos_token_id, theirs.unk_token_id) == (ours.bos_id, ours.eos_id, 0)


def test_export_refuses_learned_positions(corpus, tmp_path):
    run_dir = make_run(tmp_path, corpus[0], "learned", position="learned")
    result = subprocess.run([sys.executable, "-m", "convert.to_hf", str(run_dir), str(tmp_path / "hf")],
                            cwd=REPO, capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("error: ")
    assert "'learned'" in result.stderr
    assert not (tmp_path / "hf").exists()


@pytest.mark.parametrize("case", ["missing", "corrupt", "dynamic-yarn", "dynamic", "partial", "p-rope", "t5"])
def test_export_errors_are_one_line(case, corpus, tmp_path, capsys):
    run_dir = tmp_path / "missing"
    if case == "partial":
        run_dir = make_run(tmp_path, corpus[0], case, rotary_fraction=0.5)
    elif case == "p-rope":
        run_dir = make_run(tmp_path, corpus[0], case, kept_frequencies=0.5)
    elif case == "t5":
        run_dir = make_run(tmp_path, corpus[0], case, position="t5")
    elif case != "missing":
        scaling = {"type": case, "factor": 2.0, "original_max_position_embeddings": L} if "dynamic" in case else None
        run_dir = make_run(tmp_path, corpus[0], case, scaling=scaling)
    if case == "corrupt":
        weights = next(run_dir.glob("model_*.safetensors"))
        weights.write_bytes(weights.read_bytes()[:1000])
    with pytest.raises(SystemExit) as exit_info:
        main([str(run_dir), str(tmp_path / "hf")])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: "), err
    if "dynamic" in case:
        assert f"RoPE scaling '{case}' is not exported" in err and "only static scalings export: ntk" in err
    if case == "partial":
        assert "cannot export partial RoPE (model.position.rotary_fraction=0.5)" in err
    if case == "p-rope":
        assert "cannot export p-RoPE (model.position.kept_frequencies=0.5)" in err
    if case == "t5":
        assert "cannot export a model with 't5' positions" in err
    if case not in ("missing", "corrupt"):
        assert not (tmp_path / "hf").exists()
