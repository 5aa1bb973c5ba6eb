"""train.py and generate.py end to end, on Shakespeare with a tiny model."""
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

import train
from eval.summary import summarize
from conftest import logged_losses
from generate import generate_tokens
from model.checkpoint import load_model
from model.positions import ENCODINGS

ROOT = Path(__file__).resolve().parents[1]


def losses(run_dir):
    """{step: (train loss, val loss or None)}"""
    val = logged_losses(run_dir, "val_loss")
    return {step: (loss, val[step]) for step, loss in logged_losses(run_dir).items()}


def cli(*args, timeout=300):
    return subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize("position", sorted(ENCODINGS))
def test_every_encoding_trains_and_writes_a_run_directory(position, tiny_args, tmp_path):
    train.main(tiny_args + [f"run.name={position}", f"model.position.type={position}"])
    run = tmp_path / position
    config = yaml.safe_load((run / "config.yaml").read_text())
    assert config["model"]["position"]["type"] == position
    assert config["model"]["vocab_size"] == 512 and config["train"]["max_steps"] == 20  # fully resolved
    assert (run / "tokenizer.model").is_file()
    assert list(run.glob("model_*.safetensors")) and json.loads((run / "checkpoint.json").read_text())["step"] == 20
    curve = losses(run)
    assert sorted(curve) == [5, 10, 15, 20]
    assert curve[20][0] < curve[5][0] - 0.3  # it learns (ln 512 = 6.24 at the start)
    assert curve[20][1] is not None


def test_resume_is_exact(tiny_args, tmp_path):
    train.main(tiny_args + ["run.name=straight"])
    train.main(tiny_args + ["run.name=resumed", "train.max_steps=10", "train.decay_steps=20"])
    assert max(losses(tmp_path / "resumed")) == 10
    train.main(tiny_args + ["run.name=resumed", "train.decay_steps=20", "--resume"])
    assert losses(tmp_path / "resumed") == losses(tmp_path / "straight")
    summary = summarize(tmp_path / "resumed")
    assert (summary["steps"], summary["val_loss"]) == (20, losses(tmp_path / "straight")[20][1])


def test_sigint_checkpoints_and_resume_continues_the_same_run(tiny_args, tmp_path):
    train.main(tiny_args + ["run.name=straight"])
    args = [a for a in tiny_args if not a.startswith("train.max_steps")] + ["run.name=stopped", "train.max_steps=200"]
    proc = subprocess.Popen([sys.executable, "train.py", *args], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    pointer = tmp_path / "stopped" / "checkpoint.json"
    deadline = time.time() + 240
    while not pointer.exists() and time.time() < deadline and proc.poll() is None:
        time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert "checkpoint saved" in err + _
    stopped_at = json.loads(pointer.read_text())["step"]
    assert 10 <= stopped_at < 200
    # The interrupted run's losses so far equal a straight run's with the same schedule.
    train.main(tiny_args + ["run.name=reference", "train.max_steps=200", "train.eval_every=1000"])
    ref, got = losses(tmp_path / "reference"), losses(tmp_path / "stopped")
    assert all(got[s][0] == ref[s][0] for s in got if s % 5 == 0)


def test_kv_cache_generation_equals_recomputing_the_whole_sequence(tiny_args, tmp_path):
    import torch
    train.main(tiny_args + ["run.name=gen"])
    model = load_model(tmp_path / "gen")
    prompt = [1, 40, 41, 42]
    cached = list(generate_tokens(model, prompt, 30, temperature=0))
    ids = list(prompt)
    for _ in range(30):
        logits, _ = model(torch.tensor([ids]))
        ids.append(int(logits[0, -1].argmax()))
    assert cached == ids[len(prompt):]


def test_generate_cli_is_reproducible_and_handles_long_prompts(tiny_args, tmp_path):
    train.main(tiny_args + ["run.name=gen"])
    run = str(tmp_path / "gen")
    a = cli("generate.py", run, "--prompt", "KING:", "--max-new-tokens", "40", "--seed", "3")
    b = cli("generate.py", run, "--prompt", "KING:", "--max-new-tokens", "40", "--seed", "3")
    c = cli("generate.py", run, "--prompt", "KING:", "--max-new-tokens", "40", "--seed", "4")
    assert a.returncode == 0, a.stderr
    assert a.stdout == b.stdout and a.stdout.startswith("KING:") and len(a.stdout) > 20
    assert c.stdout != a.stdout
    # RoPE attends over the whole prompt and what follows, far past L = 64; with a sliding cache of
    # 32 tokens the same sampled continuation changes.
    prompt = ["--prompt", "To be or not to be. " * 40, "--max-new-tokens", "100", "--temperature", "1", "--seed", "1"]
    long = cli("generate.py", run, *prompt)
    window = cli("generate.py", run, *prompt, "--max-context", "32")
    assert long.returncode == window.returncode == 0 and not long.stderr, long.stderr
    assert long.stdout != window.stdout
    train.main(tiny_args + ["run.name=learned", "model.position.type=learned"])
    learned = cli("generate.py", str(tmp_path / "learned"), *prompt)
    assert learned.returncode == 0, learned.stderr
    assert "keeping its last 63" in learned.stderr and "positions stop at 63" in learned.stderr


@pytest.mark.parametrize("args, message", [
    (["model.d_modle=64"], "unknown config key 'model.d_modle'"),
    (["train.max_steps=ten"], "train.max_steps: expected int"),
    (["model.position.type=rotary"], "choose one of alibi, learned, nope, rope, sinusoidal"),
    (["model.position.scaling={type: yarm, factor: 4, original_max_position_embeddings: 256}"], "unknown RoPE scaling 'yarm'"),
    (["model.d_model=60", "model.n_heads=4", "model.n_kv_heads=2"], "even head dimension"),
])
def test_bad_config_gets_one_clear_line(args, message):
    result = cli("train.py", "--config", "configs/tiny.yaml", *args, timeout=60)
    assert result.returncode == 2
    assert result.stderr.strip().count("\n") == 0 and message in result.stderr


def test_missing_and_corrupt_checkpoints_get_one_clear_line(tiny_args, tmp_path):
    missing = cli("generate.py", str(tmp_path / "nope"), timeout=60)
    assert missing.returncode != 0 and "run directory not found" in missing.stderr
    assert missing.stderr.strip().count("\n") == 0
    train.main(tiny_args + ["run.name=broken", "train.max_steps=10"])
    weights = next((tmp_path / "broken").glob("model_*.safetensors"))
    weights.write_bytes(weights.read_bytes()[:100])
    corrupt = cli("generate.py", str(tmp_path / "broken"), timeout=60)
    assert corrupt.returncode != 0 and "corrupt checkpoint" in corrupt.stderr
    assert corrupt.stderr.strip().count("\n") == 0
    again = cli("train.py", *tiny_args, "run.name=broken", timeout=60)  # no silent overwrite
    assert again.returncode == 2 and "--resume" in again.stderr
