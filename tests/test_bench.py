"""eval.bench runs end to end on a small shape and reports every section (speed itself is not asserted);
the host-memory setting every command gets keeps large freed blocks for reuse."""
import json
import platform
import subprocess
import sys
from pathlib import Path

import pytest

from eval import bench

ROOT = Path(__file__).resolve().parents[1]


def test_bench_reports_training_evaluation_and_generation(tmp_path):
    bench.main(["--config", str(ROOT / "configs/tiny.yaml"), "--positions", "alibi,learned", "--steps", "1",
                "--warmup", "1", "--repeats", "1", "--multiples", "1,2,8", "--out", str(tmp_path),
                "model.d_model=32", "model.max_seq_len=64", "train.batch_size=2", "run.device=cpu"])
    results = json.loads((tmp_path / "bench.json").read_text())
    alibi, learned = results["rows"]
    assert alibi["train_tokens_per_s"] > 0 and [e["multiple"] for e in alibi["eval"]] == [1, 2, 8]
    assert all(g["tokens_per_s"] > 0 for g in alibi["generation"])
    assert [g["note"] for g in learned["generation"]] == ["", "n/a (past the learned table)"]
    assert "Generation (batch 1, KV cache)" in (tmp_path / "bench.md").read_text()


def test_the_peer_is_transformers_llama_of_the_same_shape(tmp_path):
    bench.main(["--config", str(ROOT / "configs/tiny.yaml"), "--positions", "rope", "--peer", "transformers",
                "--steps", "1", "--warmup", "1", "--repeats", "1", "--multiples", "1", "--out", str(tmp_path),
                "model.d_model=32", "model.max_seq_len=64", "train.batch_size=2", "run.device=cpu"])
    results = json.loads((tmp_path / "bench.json").read_text())
    ours, peer = results["rows"][0], results["peer"]
    assert peer["name"].startswith("transformers") and peer["params"] == ours["params"]
    assert peer["ratio"] == ours["train_tokens_per_s"] / peer["train_tokens_per_s"]
    assert "over the peer" in (tmp_path / "bench.md").read_text()
    # (tests/test_export.py shows that this shape computes our function once the embeddings are untied)


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
