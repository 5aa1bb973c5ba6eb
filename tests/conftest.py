import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


@pytest.fixture
def tiny_args(tmp_path):
    """Overrides that make configs/tiny.yaml train in seconds on Shakespeare (vocab 512)."""
    return ["--config", str(ROOT / "configs/tiny.yaml"), f"run.out_dir={tmp_path}", "data.vocab_size=512",
            "model.d_model=32", "model.n_layers=2", "model.max_seq_len=64", "train.batch_size=4",
            "train.max_steps=20", "train.warmup_steps=5", "train.log_every=5", "train.eval_every=10",
            "train.ckpt_every=10", "train.eval_tokens=512"]


def logged_losses(run_dir, key="loss"):
    """{step: value} from a run's metrics.jsonl."""
    rows = [json.loads(line) for line in (Path(run_dir) / "metrics.jsonl").read_text().splitlines()]
    return {r["step"]: r.get(key) for r in rows}
