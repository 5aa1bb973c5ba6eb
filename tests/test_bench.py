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
