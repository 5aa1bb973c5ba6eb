"""eval.extrapolation: rows for every (run, scaling, length), the token budget, not-applicable
rows, fine-tuned runs, sliding windows, outputs, and one-line errors. Trains four tiny runs once."""
import json
import math
from pathlib import Path

import pytest
from conftest import book_texts
import torch

import train
from data import DataConfig, TokenData, prepare
from eval import extrapolation, plots
from model.checkpoint import load_model, read_run_config
from model.config import from_dict

REPO = Path(__file__).resolve().parents[1]
L = 32  # training length of the tiny runs
LENGTHS = [16, 32, 64, 128]
BUDGET = 512
METHODS = ["none", "linear", "ntk", "dynamic", "yarn", "dynamic-yarn"]


def write_corpus(root: Path, n: int = 5, chars: int = 20_000) -> None:
    root.mkdir(parents=True)
    for i, text in enumerate(book_texts(n, chars, offset=10_000)):
        (root / f"doc{i}.txt").write_text(text, encoding="utf-8")


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Runs rope, learned, alibi (L = 32) and rope-yarn, a yarn fine-tune of rope to 64 tokens."""
    tmp = tmp_path_factory.mktemp("extrapolation")
    write_corpus(tmp / "corpus")
    common = ["model.d_model=32", "model.n_layers=1", f"model.max_seq_len={L}", "train.max_steps=3",
              "train.batch_size=2", "train.eval_every=3", "train.ckpt_every=3", "train.eval_tokens=256",
              "train.warmup_steps=1", "data.vocab_size=512", f"data.source={tmp / 'corpus'}",
              f"data.cache_dir={tmp / 'cache'}", "data.val_fraction=0.2", "data.test_fraction=0.2",
              f"run.out_dir={tmp / 'runs'}", "run.device=cpu"]
    for position in ("rope", "learned", "alibi"):
        train.main(["--config", str(REPO / "configs" / "tiny.yaml"), *common,
                    f"run.name={position}", f"model.position.type={position}"])
    train.main(["--config", str(REPO / "configs" / "tiny.yaml"), *common, "run.name=rope-yarn",
                "model.max_seq_len=64", "model.position.scaling={type: yarn, factor: 2.0}",
                f"train.init_from={tmp / 'runs' / 'rope'}"])
    return tmp


@pytest.fixture(scope="module")
def report(runs):
    out = runs / "report"
    names = ["rope", "learned", "alibi", "rope-yarn"]
    rows = extrapolation.main([*(str(runs / "runs" / n) for n in names), "--lengths", ",".join(map(str, LENGTHS)),
                               "--scaling", ",".join(METHODS), "--max-tokens", str(BUDGET), "--device", "cpu",
                               "--out", str(out)])
    return rows, out


def row(rows, run, scaling, length):
    (found,) = [r for r in rows if (r["run"], r["scaling"], r["length"]) == (run, scaling, length)]
    return found


def test_a_row_for_every_run_scaling_and_length(report):
    rows, _ = report
    expected = [("rope", m, n) for m in METHODS for n in LENGTHS]  # run order, then scaling, then length
    expected += [(run, "none", n) for run in ("learned", "alibi") for n in LENGTHS]
    expected += [("rope-yarn", "yarn (fine-tuned)", n) for n in LENGTHS]
    assert [(r["run"], r["scaling"], r["length"]) for r in rows] == expected
    assert {r["position"] for r in rows} == {"rope", "learned", "alibi"}


def test_static_scalings_are_plain_rope_up_to_the_training_length(report):
    rows, _ = report
    for method in ("linear", "ntk", "yarn"):
        for n in (16, 32):
            r = row(rows, "rope", method, n)
            assert r["ppl"] == row(rows, "rope", "none", n)["ppl"] and r["factor"] == 1.0
        beyond = row(rows, "rope", method, 128)
        assert beyond["factor"] == 4.0 and beyond["multiple"] == 4.0
        assert beyond["ppl"] != row(rows, "rope", "none", 128)["ppl"]
    assert row(rows, "rope", "dynamic", 64)["factor"] == 1.0  # follows the current length, no target factor
    # In full-length windows dynamic NTK at T = 2L is static NTK with s = 2, and dynamic-yarn is yarn.
    assert row(rows, "rope", "dynamic", 64)["ppl"] == pytest.approx(row(rows, "rope", "ntk", 64)["ppl"], rel=1e-5)
    assert row(rows, "rope", "dynamic-yarn", 128)["ppl"] == pytest.approx(row(rows, "rope", "yarn", 128)["ppl"], rel=1e-5)
    assert row(rows, "rope", "dynamic-yarn", 128)["factor"] == 4.0
    assert row(rows, "rope", "none", 128)["factor"] is None


def test_learned_past_its_table_is_not_applicable(report):
    rows, out = report
    assert row(rows, "learned", "none", 32)["ppl"] > 1
    for n in (64, 128):
        r = row(rows, "learned", "none", n)
        assert r["ppl"] is None and r["tokens"] == 0 and r["note"] == f"learned positions stop at {L - 1}"
    assert "| learned | learned | none | 32 |" in (out / "results.md").read_text()
    assert "n/a | n/a |" in (out / "results.md").read_text()


def test_same_token_budget_at_every_length(report):
    rows, _ = report
    for r in rows:
        if r["ppl"] is not None:
            assert (r["tokens"], r["windows"], r["stride"]) == (BUDGET, BUDGET // r["length"], r["length"])
            assert r["ppl"] == pytest.approx(math.exp(r["nll"]), rel=1e-12)
            assert r["tokens_per_s"] > 0 and r["peak_mib"] > 0 and r["split"] == "test"


def test_loss_by_position_buckets_cover_the_window_and_average_to_the_loss(report):
    rows, _ = report
    r = row(rows, "alibi", "none", 128)
    buckets = r["loss_by_position"]
    assert [(b["start"], b["end"]) for b in buckets] == [(16 * i, 16 * (i + 1)) for i in range(8)]
    # every position holds the same number of targets in non-overlapping windows
    assert sum(b["loss"] for b in buckets) / 8 == pytest.approx(r["nll"], rel=1e-4)


def hand_nll(run_dir: Path, scaling, length: int) -> float:
    """Mean loss over the evaluation windows, computed the plain way with the model's own loss."""
    data_cfg = from_dict(DataConfig, read_run_config(run_dir)["data"], "data")
    data = TokenData(prepare(data_cfg, progress=False), "test")
    model = load_model(run_dir, scaling=scaling)
    windows = data.eval_windows(length, max_tokens=BUDGET)
    with torch.no_grad():
        losses = [model(w[None, :-1], w[None, 1:])[1].item() for w in (data.window_tensor(s, e) for s, e, _ in windows)]
    return sum(losses) / len(losses)


def test_perplexity_matches_a_hand_computation(runs, report):
    rows, _ = report
    assert row(rows, "alibi", "none", 128)["nll"] == pytest.approx(hand_nll(runs / "runs" / "alibi", None, 128), rel=1e-5)
    scaling = {"type": "linear", "factor": 2.0, "original_max_position_embeddings": L}
    assert row(rows, "rope", "linear", 64)["nll"] == pytest.approx(hand_nll(runs / "runs" / "rope", scaling, 64), rel=1e-5)


def test_fine_tuned_run_is_evaluated_with_its_own_scaling(runs, report, tmp_path, monkeypatch):
    rows, out = report
    run_dir = runs / "runs" / "rope-yarn"
    for n in LENGTHS:
        r = row(rows, "rope-yarn", "yarn (fine-tuned)", n)
        assert (r["factor"], r["train_length"], r["multiple"]) == (2.0, L, n / L)
    assert "| rope-yarn | rope | yarn (fine-tuned) | 32 |" in (out / "results.md").read_text()
    r = row(rows, "rope-yarn", "yarn (fine-tuned)", 128)
    assert r["nll"] == pytest.approx(hand_nll(run_dir, "from-run", 128), rel=1e-5)
    # the models it builds carry the run's scaling, whatever --scaling asks for
    built = []
    monkeypatch.setattr(extrapolation, "load_model", lambda *a, **k: built.append(load_model(*a, **k)) or built[-1])
    extrapolation.main([str(run_dir), "--lengths", "64", "--scaling", "linear", "--max-tokens", "64",
                        "--device", "cpu", "--out", str(tmp_path)])
    (model,) = built
    assert model.position.scaling == {"type": "yarn", "factor": 2.0, "original_max_position_embeddings": L}
    assert model.position.attention_factor == pytest.approx(0.1 * math.log(2.0) + 1)


def test_outputs_are_written_and_plots_redraw_from_json(report, tmp_path):
    rows, out = report
    assert json.loads((out / "results.json").read_text()) == rows
    for name in ("ppl_vs_length.png", "loss_vs_position.png"):
        assert (out / name).read_bytes()[:4] == b"\x89PNG"
    plots.main([str(out / "results.json"), "--out", str(tmp_path)])
    assert (tmp_path / "ppl_vs_length.png").stat().st_size > 1000
    assert (tmp_path / "loss_vs_position.png").stat().st_size > 1000


def test_sliding_window_scores_every_target_once(runs, tmp_path):
    run_dir, length, stride = runs / "runs" / "rope", 32, 8
    (r,) = extrapolation.main([str(run_dir), "--lengths", str(length), "--scaling", "none", "--stride", str(stride),
                               "--max-tokens", str(10**9), "--device", "cpu", "--out", str(tmp_path)])
    data = TokenData(prepare(from_dict(DataConfig, read_run_config(run_dir)["data"], "data"), progress=False), "test")
    covered = 0  # targets a + 1 .. last_start + length of each document, each exactly once
    for a, b in zip(data.doc_offsets[:-1].tolist(), data.doc_offsets[1:].tolist()):
        if b - a > length:
            last_start = a + (b - a - length - 1) // stride * stride
            covered += last_start - a + length
    assert r["tokens"] == covered and r["stride"] == stride
    assert r["windows"] == (covered - length) // stride + 1  # one test document


def error_line(capsys, argv, progress=False) -> tuple[int, str]:
    """Exit code and the one error line; stderr holds nothing else unless progress bars ran."""
    with pytest.raises(SystemExit) as exit_info:
        extrapolation.main(argv)
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines[-1].startswith("error: ") and (progress or len(lines) == 1)
    return exit_info.value.code, lines[-1]


def test_user_errors_are_one_line(runs, capsys, tmp_path):
    run_dir, out = str(runs / "runs" / "rope"), ["--out", str(tmp_path / "out")]
    code, line = error_line(capsys, [run_dir, "--scaling", "none,rotary", *out])
    assert code != 0 and "'rotary'" in line and "none, linear, ntk, dynamic, yarn, dynamic-yarn" in line
    code, line = error_line(capsys, [run_dir, "--lengths", "64,abc", *out])
    assert code != 0 and "--lengths" in line
    code, line = error_line(capsys, [run_dir, str(tmp_path / "missing"), *out])
    assert code != 0 and "run directory not found" in line
    (tmp_path / "empty").mkdir()
    code, line = error_line(capsys, [str(tmp_path / "empty"), *out])
    assert code != 0 and "no checkpoint" in line
    code, line = error_line(capsys, [run_dir, "--lengths", "64", "--max-tokens", "32", *out])
    assert code != 0 and "--max-tokens" in line
    assert not (tmp_path / "out" / "results.json").exists()  # nothing was measured


def test_interrupt_keeps_finished_measurements(runs, capsys, tmp_path, monkeypatch):
    compute, calls = extrapolation.Evaluator.compute, []

    def interrupt_third(self, *args):
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return compute(self, *args)
    monkeypatch.setattr(extrapolation.Evaluator, "compute", interrupt_third)
    code, line = error_line(capsys, [str(runs / "runs" / "alibi"), "--lengths", "16,32,64", "--max-tokens", "128",
                                     "--out", str(tmp_path)], progress=True)
    assert code == 130 and "2 finished measurements" in line
    rows = json.loads((tmp_path / "results.json").read_text())
    assert [r["length"] for r in rows] == [16, 32] and all(r["ppl"] for r in rows)
    assert (tmp_path / "results.md").exists() and (tmp_path / "ppl_vs_length.png").exists()
