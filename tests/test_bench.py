"""speed.bench runs end to end on a small shape and reports every section (speed itself is not asserted);
the host-memory setting every command gets keeps large freed blocks for reuse."""
import json
import platform
import statistics
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from speed import bench

ROOT = Path(__file__).resolve().parents[1]


def test_bench_reports_training_evaluation_and_generation(tmp_path):
    bench.main(["--config", str(ROOT / "configs/tiny.yaml"), "--positions", "alibi,learned", "--steps", "1",
                "--warmup", "1", "--repeats", "1", "--multiples", "1,2,8", "--out", str(tmp_path),
                "model.d_model=32", "model.max_seq_len=64", "train.batch_size=2", "run.device=cpu"])
    results = json.loads((tmp_path / "bench.json").read_text())
    assert results["attention"] == "flex"  # the default, as train.py: FlexAttention for the score biases on CUDA
    alibi, learned = results["rows"]
    assert alibi["train_tokens_per_s"] > 0 and [e["multiple"] for e in alibi["eval"]] == [1, 2, 8]
    assert all(g["tokens_per_s"] > 0 for g in alibi["generation"])
    assert [g["note"] for g in learned["generation"]] == ["", "n/a (past the learned table)"]
    # attention sinks' rolling cache beside it, where the encoding is relative
    assert all(g["tokens_per_s"] > 0 for g in alibi["generation_sinks"]) and "generation_sinks" not in learned
    table = (tmp_path / "bench.md").read_text()
    assert "Generation (batch 1, KV cache, eager model" in table
    assert "| alibi, sinks |" in table and "| learned, sinks | n/a (absolute positions) |" in table


def test_the_score_biases_through_sdpa_are_named_in_the_table(tmp_path):
    bench.main(["--config", str(ROOT / "configs/tiny.yaml"), "--positions", "t5", "--steps", "1", "--warmup", "1",
                "--repeats", "1", "--multiples", "1", "--decode-multiples", "1", "--attention", "sdpa",
                "--out", str(tmp_path), "model.d_model=32", "model.max_seq_len=64", "train.batch_size=2",
                "run.device=cpu"])
    assert json.loads((tmp_path / "bench.json").read_text())["attention"] == "sdpa"
    assert "batch 2 x 64 tokens, score biases through SDPA." in (tmp_path / "bench.md").read_text()


def test_the_compile_mode_reaches_torch_compile(monkeypatch):
    modes = []
    monkeypatch.setattr(torch, "compile", lambda model, mode=None: modes.append(mode) or model)
    cfg = bench.bench_config(str(ROOT / "configs/tiny.yaml"), ["model.d_model=32", "model.max_seq_len=64",
                             "train.batch_size=2", "run.compile=true", "run.compile_mode=max-autotune"])
    bench.bench_training(cfg, torch.device("cpu"), steps=1, warmup=0)
    cfg.run.compile_mode = "default"
    bench.bench_training(cfg, torch.device("cpu"), steps=1, warmup=0)
    cfg.run.compile = False
    bench.bench_training(cfg, torch.device("cpu"), steps=1, warmup=0)
    assert modes == ["max-autotune", None]  # default: torch's own; compile off: not compiled
    # the tables of speed.bench and speed.profile name a mode other than the default
    from speed.results import mode_note
    assert [mode_note({"compile": c, "compile_mode": m}) for c, m in
            [(True, "max-autotune"), (True, "default"), (False, "max-autotune")]] == [" (max-autotune mode)", "", ""]


def test_generation_is_timed_after_its_compilations():
    # Through compiled decoding steps on a static cache (dynamo only, backend "eager": no code generation),
    # the untimed decoded tokens take the compilation, so none lands in the timed tokens; without them
    # the count shows the compilation that would have been timed.
    import torch
    from config import ModelConfig
    from model.gpt import GPT
    model = GPT(ModelConfig(vocab_size=64, d_model=32, n_layers=1, n_heads=4, n_kv_heads=2, max_seq_len=32)).eval()

    def compiles(warmup):
        torch._dynamo.reset()
        step = torch.compile(model, backend="eager", dynamic=False)
        return bench.bench_generation(model, step, torch.device("cpu"), multiples=(1,), new_tokens=16,
                                      warmup=warmup)[0]["compiles"]
    assert compiles(warmup=0) >= 1
    assert compiles(warmup=8) == 0


SMALL = ["model.d_model=32", "model.max_seq_len=64", "train.batch_size=2", "run.device=cpu"]

# A stand-in for nanoGPT's model.py: its contract (GPTConfig's fields, GPT(config), forward(idx, targets) ->
# (logits, loss), transformer.wpe), not its code.
NANOGPT_LIKE = """
from dataclasses import dataclass
import torch, torch.nn as nn, torch.nn.functional as F

@dataclass
class GPTConfig:
    block_size: int = 1024
    vocab_size: int = 50304
    n_layer: int = 12
    n_head: int = 12
    n_embd: int = 768
    dropout: float = 0.0
    bias: bool = True

class GPT(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.transformer = nn.ModuleDict(dict(wte=nn.Embedding(config.vocab_size, config.n_embd),
                                              wpe=nn.Embedding(config.block_size, config.n_embd)))
        self.head = nn.Linear(config.n_embd, config.vocab_size)

    def forward(self, idx, targets=None):
        pos = torch.arange(idx.shape[1])
        logits = self.head(self.transformer.wte(idx) + self.transformer.wpe(pos))
        return logits, F.cross_entropy(logits.flatten(0, 1), targets.flatten())
"""


@pytest.mark.parametrize("peer", ["gpt2", "transformers", "nanogpt"])
def test_a_peer_trains_in_turns_with_ours_and_the_ratio_is_of_model_flops(peer, tmp_path):
    if peer == "nanogpt":
        (tmp_path / "nanoGPT").mkdir()
        (tmp_path / "nanoGPT" / "model.py").write_text(NANOGPT_LIKE)
        peer = str(tmp_path / "nanoGPT" / "model.py")
    bench.main(["--config", str(ROOT / "configs/tiny.yaml"), "--positions", "alibi", "--peer", peer, "--steps", "1",
                "--warmup", "1", "--rounds", "3", "--repeats", "1", "--multiples", "1", "--decode-multiples", "2",
                "--out", str(tmp_path), *SMALL])
    results = json.loads((tmp_path / "bench.json").read_text())
    got = results["peer"]
    d, T, V, layers = 32, 64, 4096, 4  # configs/tiny.yaml with SMALL: 4 layers, 4 heads, head size 8
    attention = 12 * layers * 4 * 8 * T
    if peer == "gpt2":  # (4 d^2 + 4 d) attention + (8 d^2 + 5 d) MLP + 4 d LayerNorms per layer, 2 d final, tied V d
        n = layers * (12 * d * d + 13 * d) + 2 * d + V * d
        assert got["name"].startswith("GPT-2 reference") and got["params"] == n + T * d
        assert got["flops_per_token"] == 6 * n + attention  # the position table is not a matmul
    elif peer == "transformers":  # our shape in their code: the same parameters
        assert got["name"].startswith("transformers") and got["flops_per_token"] == got["ours_flops_per_token"]
    else:
        assert got["params"] == 2 * V * d + V + T * d and got["flops_per_token"] == 6 * (2 * V * d + V) + attention
    assert got["ours_flops_per_token"] == 6 * results["rows"][0]["params"] + attention  # alibi has rope's parameters
    assert len(got["round_ratios"]) == 3 and got["ratio"] == statistics.median(got["round_ratios"])
    assert "over the peer in model FLOP/s" in (tmp_path / "bench.md").read_text()
    decoding = results.get("peer_decoding")
    if peer == "transformers":  # batch-1 decoding against transformers' generate on the exported model
        [row] = decoding["rows"]  # at 2 L = 128: a 56-token prompt, 8 untimed tokens, 64 timed
        assert row["multiple"] == 2 and row["peer_tokens"] == 72 and row["ratio"] == \
            row["ours_tokens_per_s"] / row["peer_tokens_per_s"] and min(row["ours_tokens_per_s"], row["peer_tokens_per_s"]) > 0
        assert f"| ours / transformers | {row['ratio']:.2f}x |" in (tmp_path / "bench.md").read_text()
    else:
        assert decoding is None


GLIBC = sys.platform == "linux" and "glibc" in " ".join(platform.libc_ver())

FAULTS_PER_STEP = """
import resource, sys, torch
from device import keep_freed_host_memory
if sys.argv[1] == "keep":
    keep_freed_host_memory()
faults = []
for _ in range(16):  # a training step's pattern: allocate, write and free the same 64 MiB tensor
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    x = torch.ones(16 << 20)
    del x
    faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
print(*faults[-4:])
"""


@pytest.mark.skipif(not GLIBC, reason="keep_freed_host_memory tunes glibc's malloc; this is not glibc on Linux")
def test_freed_host_memory_is_reused_instead_of_faulted_in_every_step():
    def last_steps(mode):
        out = subprocess.run([sys.executable, "-c", FAULTS_PER_STEP, mode], cwd=ROOT, capture_output=True,
                             text=True, timeout=120, check=True).stdout
        return [int(n) for n in out.split()]
    assert all(n >= 16_000 for n in last_steps("default"))  # glibc's default: 64 MiB of fresh pages, every step
    assert last_steps("keep") == [0, 0, 0, 0]
