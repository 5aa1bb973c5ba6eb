"""eval.bench runs end to end on a small shape and reports every section (speed itself is not asserted)."""
import json
from pathlib import Path

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
