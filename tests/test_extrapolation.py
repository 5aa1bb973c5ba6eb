"""eval.extrapolation: rows for every (run, scaling, length), the token budget, not-applicable
rows, fine-tuned runs, sliding windows, the same span at every length, outputs, and one-line errors.
Trains four tiny runs once."""
import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import book_texts

import train
from checkpoint import FROM_RUN, load_model, read_run_config
from config import DataConfig, ModelConfig, PositionConfig, ScalingConfig, UserError, from_dict
from data import TokenData, prepare_shards
from eval import extrapolation, harness, probe
from eval.results import extrapolation as results, plots
from model.gpt import GPT

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


def row(rows, run, scaling, length, rule=None):
    (found,) = [r for r in rows if (r["run"], r["scaling"], r["length"]) == (run, scaling, length)
                and (rule is None or r["factor_rule"] == rule)]
    return found


def test_a_row_for_every_run_scaling_and_length(report):
    rows, _ = report
    expected = []  # run order, then scaling (per-length factor, then the fixed factor), then length
    for m in METHODS:
        rules = {"none": [None], "dynamic": ["T/L"], "dynamic-yarn": ["T/L"]}.get(m, ["length/L", "fixed"])
        expected += [("rope", m, rule, n) for rule in rules for n in LENGTHS]
    expected += [(run, "none", None, n) for run in ("learned", "alibi") for n in LENGTHS]
    expected += [("rope-yarn", "yarn (fine-tuned)", "fine-tuned", n) for n in LENGTHS]
    assert [(r["run"], r["scaling"], r["factor_rule"], r["length"]) for r in rows] == expected
    assert {r["position"] for r in rows} == {"rope", "learned", "alibi"}
    assert {r["seed"] for r in rows} == {1337}


def test_static_scalings_are_plain_rope_up_to_the_training_length(report):
    rows, _ = report
    for method in ("linear", "ntk", "yarn"):
        for n in (16, 32):
            r = row(rows, "rope", method, n, "length/L")
            assert r["ppl"] == row(rows, "rope", "none", n)["ppl"] and r["factor"] == 1.0
        beyond = row(rows, "rope", method, 128, "length/L")
        assert beyond["factor"] == 4.0 and beyond["multiple"] == 4.0
        assert beyond["ppl"] != row(rows, "rope", "none", 128)["ppl"]
    assert row(rows, "rope", "none", 128)["factor"] is None


def test_a_fixed_factor_applies_at_every_length(report):
    rows, _ = report
    for method in ("linear", "ntk", "yarn"):
        for n in LENGTHS:
            r = row(rows, "rope", method, n, "fixed")
            assert r["factor"] == 4.0 and r["ppl"] > 1
        # at the training length a fixed s = 4 is not plain RoPE: its cost is part of the answer
        assert row(rows, "rope", method, 32, "fixed")["ppl"] != row(rows, "rope", "none", 32)["ppl"]
        assert row(rows, "rope", method, 128, "fixed")["ppl"] == row(rows, "rope", method, 128, "length/L")["ppl"]


def test_dynamic_methods_run_through_the_cache_past_the_training_length(report):
    rows, _ = report
    for method, static in (("dynamic", "ntk"), ("dynamic-yarn", "yarn")):
        for n in (16, 32):  # the prefill covers the window: plain RoPE, one forward pass
            r = row(rows, "rope", method, n)
            assert not r["through_cache"]
            assert r["ppl"] == pytest.approx(row(rows, "rope", "none", n)["ppl"], rel=1e-6)
        for n in (64, 128):  # decoded token by token, the frequencies following the length
            r = row(rows, "rope", method, n)
            assert r["through_cache"] and r["factor_rule"] == "T/L" and r["tokens"] == BUDGET
            assert r["ppl"] != row(rows, "rope", static, n, "length/L")["ppl"]


@pytest.mark.parametrize("method", ["dynamic", "dynamic-yarn"])
def test_cached_dynamic_decoding_sees_the_frequencies_of_the_current_length(method):
    """With one layer (so cached values do not depend on earlier frequencies, only the re-rotated keys
    do), each decoded token's loss equals the last loss of a full forward pass over the tokens up to
    it, whose frequencies are those of that length; it differs from one pass over the whole window.
    With more layers the cache keeps hidden states computed at shorter lengths, as in generation."""
    torch.manual_seed(0)
    scaling = {"type": method, "factor": 1.0, "original_max_position_embeddings": 16}
    cfg = ModelConfig(vocab_size=64, d_model=32, n_layers=1, n_heads=4, n_kv_heads=2, max_seq_len=16, init_std=0.3,
                      position=PositionConfig(scaling=scaling))
    model = GPT(cfg).eval()
    x = torch.randint(0, 64, (2, 48))
    y = torch.randint(0, 64, (2, 48))
    cached = extrapolation.window_losses(model, x, y, 16, 1)
    # the evaluators' default chunk of 16 decoded tokens gives the same losses (Rope.chunk_context)
    torch.testing.assert_close(extrapolation.window_losses(model, x, y, 16, 16), cached, rtol=1e-5, atol=1e-5)
    for t in (16, 30, 47):
        prefix = extrapolation.window_losses(model, x[:, :t + 1], y[:, :t + 1], None, 1)
        torch.testing.assert_close(cached[:, t], prefix[:, -1], rtol=1e-4, atol=1e-4)
    full = extrapolation.window_losses(model, x, y, None, 1)
    plain = extrapolation.window_losses(model, x[:, :16], y[:, :16], None, 1)  # T <= L: plain RoPE
    torch.testing.assert_close(cached[:, :16], plain, rtol=1e-4, atol=1e-4)
    assert (cached[:, 20:] - full[:, 20:]).abs().max() > 1e-3


@pytest.mark.parametrize("scaling", [None, ScalingConfig("yarn", 4.0, L)])
def test_decoding_through_the_cache_equals_one_forward_pass_for_a_static_scaling(runs, scaling):
    model = load_model(runs / "runs" / "rope", scaling=scaling)
    x = torch.randint(0, 512, (2, 3 * L + 5))
    y = torch.roll(x, -1, dims=1)
    full = extrapolation.window_losses(model, x, y, None, 1)
    for chunk in (1, 7):
        cached = extrapolation.window_losses(model, x, y, L, chunk)
        torch.testing.assert_close(cached, full, rtol=1e-4, atol=1e-4)


def test_nonfinite_losses_are_written_as_null(runs, tmp_path, monkeypatch):
    monkeypatch.setattr(extrapolation, "token_losses", lambda *a, **k: (torch.full((16,), float("nan"),
                                                                                   dtype=torch.float64),
                                                                        torch.ones(16, dtype=torch.int64)))
    (r,) = extrapolation.main([str(runs / "runs" / "alibi"), "--lengths", "16", "--max-tokens", "16",
                               "--device", "cpu", "--out", str(tmp_path)])
    assert r["ppl"] is None and r["nll"] is None
    assert json.loads((tmp_path / "results.json").read_text())[0]["ppl"] is None  # strict JSON, no NaN


def test_learned_past_its_table_is_not_applicable(report):
    rows, out = report
    assert row(rows, "learned", "none", 32)["ppl"] > 1
    for n in (64, 128):
        r = row(rows, "learned", "none", n)
        assert r["ppl"] is None and r["tokens"] == 0 and r["note"] == f"learned positions stop at {L - 1}"
    assert "| learned | learned | none | 32 | 1 |" in (out / "results.md").read_text()
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
    data = TokenData(prepare_shards(data_cfg, progress=False), "test")
    model = load_model(run_dir, scaling=scaling)
    windows = data.eval_windows(length, max_tokens=BUDGET)
    with torch.no_grad():
        losses = [model(w[None, :-1], w[None, 1:])[1].item() for w in (data.window_tensor(s, e) for s, e, _ in windows)]
    return sum(losses) / len(losses)


def test_perplexity_matches_a_hand_computation(runs, report):
    rows, _ = report
    assert row(rows, "alibi", "none", 128)["nll"] == pytest.approx(hand_nll(runs / "runs" / "alibi", None, 128), rel=1e-5)
    scaling = ScalingConfig("linear", 2.0, L)
    assert row(rows, "rope", "linear", 64, "length/L")["nll"] == pytest.approx(hand_nll(runs / "runs" / "rope", scaling, 64), rel=1e-5)


def test_fine_tuned_run_is_evaluated_with_its_own_scaling(runs, report, tmp_path, monkeypatch):
    rows, out = report
    run_dir = runs / "runs" / "rope-yarn"
    for n in LENGTHS:
        r = row(rows, "rope-yarn", "yarn (fine-tuned)", n)
        assert (r["factor"], r["train_length"], r["multiple"]) == (2.0, L, n / L)
    assert "| rope-yarn | rope | yarn (fine-tuned) | 32 | 1 |" in (out / "results.md").read_text()
    r = row(rows, "rope-yarn", "yarn (fine-tuned)", 128)
    assert r["nll"] == pytest.approx(hand_nll(run_dir, FROM_RUN, 128), rel=1e-5)
    # the models it builds carry the run's scaling, whatever --scaling asks for
    built = []
    monkeypatch.setattr(harness, "load_model", lambda *a, **k: built.append(load_model(*a, **k)) or built[-1])
    extrapolation.main([str(run_dir), "--lengths", "64", "--scaling", "linear", "--max-tokens", "64",
                        "--device", "cpu", "--out", str(tmp_path)])
    (model,) = built
    assert model.position.scaling.to_dict() == {"type": "yarn", "factor": 2.0, "original_max_position_embeddings": L}
    assert model.position.attention_factor == pytest.approx(0.1 * math.log(2.0) + 1)


def test_outputs_are_written_and_plots_redraw_from_json(report, tmp_path):
    rows, out = report
    assert json.loads((out / "results.json").read_text()) == rows
    assert (out / "ppl_vs_length.png").read_bytes()[:4] == b"\x89PNG"
    assert not (out / "loss_vs_position.png").exists()  # no NoPE run to subtract: no empty figure
    with_nope = rows + [{**r, "run": "nope", "position": "nope"} for r in rows if r["run"] == "rope" and r["scaling"] == "none"]
    (tmp_path / "results.json").write_text(json.dumps(with_nope))
    plots.main([str(tmp_path / "results.json")])
    assert (tmp_path / "ppl_vs_length.png").stat().st_size > 1000
    assert (tmp_path / "loss_vs_position.png").stat().st_size > 1000


def test_sliding_window_scores_only_targets_with_full_context(runs, tmp_path):
    run_dir, length, stride = runs / "runs" / "rope", 32, 8
    (r,) = extrapolation.main([str(run_dir), "--lengths", str(length), "--scaling", "none", "--stride", str(stride),
                               "--max-tokens", str(10**9), "--device", "cpu", "--out", str(tmp_path)])
    data = TokenData(prepare_shards(from_dict(DataConfig, read_run_config(run_dir)["data"], "data"), progress=False), "test")
    windows = 0  # every window, a document's first included, scores its last `stride` targets
    for a, b in zip(data.doc_offsets[:-1].tolist(), data.doc_offsets[1:].tolist()):
        if b - a > length:
            windows += (b - a - length - 1) // stride + 1
    assert r["windows"] == windows and r["tokens"] == windows * stride and r["stride"] == stride
    buckets = r["loss_by_position"]  # nothing scored in the first length - stride positions
    assert [b["loss"] is None for b in buckets] == [True] * 6 + [False] * 2


def offsets_only(offsets: list[int]) -> TokenData:
    """A TokenData holding only document offsets, which is all span_windows reads."""
    data = object.__new__(TokenData)
    data.doc_offsets = np.array(offsets)
    return data


def scored_targets(windows) -> list[int]:
    """Token positions of the scored targets, window after window (each scores its last n)."""
    return [p for _, end, n in windows for p in range(end - n, end)]


def test_span_windows_score_the_same_targets_at_every_length():
    data = offsets_only([0, 40, 50, 100])  # documents of 40, 10 and 50 tokens
    for n in (4, 8, 16):
        windows = data.span_windows(n, 16)
        assert windows == sorted(windows) and all(e - s == n + 1 and k == n for s, e, k in windows)
        # each document's first 16 targets, tokens[a+1 : a+17], once each; the 10-token document is skipped
        assert scored_targets(windows) == [*range(1, 17), *range(51, 67)]
    with pytest.raises(UserError):
        data.span_windows(6, 16)


def test_span_windows_skip_short_documents_and_keep_the_first_documents():
    data = offsets_only([0, 16, 33, 83, 133])  # 16 tokens (one short of span + 1), 17, 50 and 50
    assert scored_targets(data.span_windows(8, 16)) == [*range(17, 33), *range(34, 50), *range(84, 100)]
    assert data.span_windows(8, 16, max_documents=2) == data.span_windows(8, 16)[:4]
    assert data.span_windows(8, 64) == []


def test_span_scores_the_same_documents_at_every_length(runs, tmp_path):
    common = [str(runs / "runs" / "alibi"), "--scaling", "none", "--split", "train", "--device", "cpu"]
    # the train split holds three documents longer than 256 tokens: a budget short of three spans takes two
    argv = [*common, "--lengths", "16,32,64", "--span", "256", "--max-tokens", str(3 * 256 - 1), "--out", str(tmp_path)]
    rows = extrapolation.main(argv)
    assert [(r["length"], r["tokens"], r["windows"], r["stride"], r["span"], r["note"]) for r in rows] == [
        (n, 2 * 256, 2 * 256 // n, n, 256, None) for n in (16, 32, 64)]
    assert all(r["ppl"] > 1 for r in rows)
    # --resume keeps to one span: the same span measures nothing more, no span is another protocol
    assert extrapolation.main([*argv, "--resume"]) == rows
    with pytest.raises(SystemExit) as stop:
        extrapolation.main([*common, "--lengths", "16", "--out", str(tmp_path), "--resume"])
    assert stop.value.code == 2
    (r,) = extrapolation.main([*common, "--lengths", "16", "--span", "65536", "--max-tokens", "65536",
                               "--out", str(tmp_path / "long")])
    assert (r["ppl"], r["tokens"], r["note"]) == (None, 0, "no train document is longer than 65536 tokens")


def test_resume_reads_a_report_from_before_span_as_no_span(runs, tmp_path):
    argv = [str(runs / "runs" / "alibi"), "--lengths", "16", "--scaling", "none", "--max-tokens", "64",
            "--device", "cpu", "--out", str(tmp_path)]
    (first,) = extrapolation.main(argv)
    older = [{k: v for k, v in first.items() if k != "span"}]
    (tmp_path / "results.json").write_text(json.dumps(older))
    assert extrapolation.main([*argv, "--resume"]) == older
    with pytest.raises(SystemExit) as stop:
        extrapolation.main([*argv, "--span", "64", "--resume"])
    assert stop.value.code == 2


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


def test_resume_measures_only_what_the_report_lacks(runs, tmp_path, monkeypatch):
    out = ["--max-tokens", "128", "--scaling", "none,linear", "--fixed-factors", "", "--out", str(tmp_path)]
    first = extrapolation.main([str(runs / "runs" / "alibi"), "--lengths", "16,32", *out])
    measured = []
    compute = extrapolation.Evaluator.compute

    def counting(self, *args):
        measured.append(1)
        return compute(self, *args)
    monkeypatch.setattr(extrapolation.Evaluator, "compute", counting)
    rows = extrapolation.main([str(runs / "runs" / "alibi"), str(runs / "runs" / "rope"), "--lengths", "16,32,64",
                               "--resume", *out])
    # alibi at 64 and rope at 16, 32, 64 with none and linear (linear is plain rope up to L = 32, measured once)
    assert [(r["run"], r["scaling"], r["length"]) for r in rows[:2]] == [("alibi", "none", 16), ("alibi", "none", 32)]
    assert rows[:2] == first and len(rows) == 2 + 1 + 6
    assert len({(r["run"], r["scaling"], r["length"]) for r in rows}) == len(rows)
    assert 0 < len(measured) <= 7
    with pytest.raises(SystemExit):  # another protocol: one line, exit 2
        extrapolation.main([str(runs / "runs" / "alibi"), "--lengths", "16", "--stride", "8", "--resume", *out])


def test_results_md_gives_mean_and_spread_over_seeds_and_buckets_against_nope():
    def fake(run, position, seed, ppl, bucket_losses):
        return {"run": run, "seed": seed, "position": position, "scaling": "none", "factor_rule": None, "factor": None,
                "length": 64, "train_length": 32, "ppl": ppl, "tokens": 64, "split": "test", "stride": 64, "note": None,
                "loss_by_position": [{"start": 32 * i, "end": 32 * (i + 1), "loss": v} for i, v in enumerate(bucket_losses)]}
    rows = [fake("alibi", "alibi", 1, 10.0, [3.0, 3.5]), fake("alibi", "alibi", 2, 12.0, [3.2, 3.9]),
            fake("nope", "nope", 1, 11.0, [3.1, 3.3]), fake("nope", "nope", 2, 13.0, [3.1, 3.3])]
    text = results.markdown(rows)
    assert "| alibi | alibi | none | 32 | 2 | 11.00 ± 1.41 |" in text  # mean, sample std of 10 and 12
    assert "| alibi | none | +0.000 | +0.400 |" in text  # (3.0-3.1 + 3.2-3.1) / 2, (3.5-3.3 + 3.9-3.3) / 2


def test_copy_samples_repeat_the_span_and_the_control_differs_only_there(runs):
    data_cfg = from_dict(DataConfig, read_run_config(runs / "runs" / "rope")["data"], "data")
    data = TokenData(prepare_shards(data_cfg, progress=False), "test")
    repeat, control = probe.copy_samples(data, distance=40, span=8, n=4, seed=0)
    assert repeat.shape == control.shape == (4, 48)
    assert torch.equal(repeat[:, 40:], repeat[:, :8])  # the second copy is the first
    assert torch.equal(control[:, 8:], repeat[:, 8:])  # same filler, same second copy
    assert not torch.equal(control[:, :8], repeat[:, :8])  # only the first copy is replaced
    again, _ = probe.copy_samples(data, distance=40, span=8, n=4, seed=0)
    assert torch.equal(again, repeat)  # every run sees the same samples


def test_probe_rows_for_every_run_scaling_and_distance(runs, tmp_path):
    names = ["rope", "learned", "alibi", "rope-yarn"]
    rows = probe.main([*(str(runs / "runs" / n) for n in names), "--multiples", "0.5,1,2,8", "--span", "8",
                       "--samples", "2", "--passkey-samples", "2", "--device", "cpu", "--out", str(tmp_path)])
    copy = [r for r in rows if r["probe"] == "copy"]
    for r in rows:
        assert {"run", "position", "scaling", "seed", "probe", "value"} <= set(r)
    assert {(r["run"], r["scaling"]) for r in copy} == {
        ("rope", "none"), ("rope", "linear"), ("rope", "ntk"), ("rope", "yarn"), ("learned", "none"),
        ("alibi", "none"), ("rope-yarn", "yarn (fine-tuned)")}
    assert sorted({r["distance"] for r in copy}) == [16, 32, 64, 256]  # multiples of L = 32
    for r in copy:
        if r["run"] == "learned" and r["distance"] + 8 > L:
            assert r["value"] is None and "stop at" in r["note"]
        else:
            assert r["gain"] == pytest.approx(r["baseline"] - r["value"], abs=1e-4) and r["value"] > 0
    passkey = [r for r in rows if r["probe"] == "passkey" and r["run"] == "alibi"]
    assert sorted({r["length"] for r in passkey}) == [32, 64, 128, 256, 512]
    assert all(0 <= r["value"] <= 1 for r in passkey if r["length"] >= 128)
    assert all(r["value"] is None and "does not fit" in r["note"] for r in passkey if r["length"] == 32)
    assert json.loads((tmp_path / "probes.json").read_text()) == rows
    assert "## Copy" in (tmp_path / "probes.md").read_text()
    assert (tmp_path / "probes.png").read_bytes()[:4] == b"\x89PNG"
    # --resume probes only runs the report lacks: nothing here, so the rows come back as they were
    again = probe.main([str(runs / "runs" / "alibi"), "--multiples", "0.5,1,2,8", "--span", "8", "--samples", "2",
                        "--passkey-samples", "2", "--device", "cpu", "--out", str(tmp_path), "--resume"])
    assert again == rows
    older = [{k: v for k, v in r.items() if k != "rank"} for r in rows]  # an older eval.probe's passkey rows
    (tmp_path / "probes.json").write_text(json.dumps(older))
    with pytest.raises(SystemExit) as stop:
        probe.main([str(runs / "runs" / "alibi"), "--out", str(tmp_path), "--resume"])
    assert stop.value.code == 2


class CopyingOracle(torch.nn.Module):
    """A stand-in model that copies: it predicts the token that followed the first earlier occurrence
    of the current token (an ideal induction head), or nothing in particular when there is none."""

    def __init__(self, vocab: int):
        super().__init__()
        self.vocab = vocab
        self.position = type("NoLimit", (), {"max_positions": None})()

    def forward(self, idx, targets=None, last_only=False):
        B, T = idx.shape
        logits = torch.zeros(B, T, self.vocab)
        for b in range(B):
            first = {}
            for t, token in enumerate(idx[b].tolist()):
                if token in first and first[token] + 1 < T:
                    logits[b, t, idx[b, first[token] + 1]] = 20.0
                first.setdefault(token, t)
        return (logits[:, -1:] if last_only else logits), None

    def token_losses(self, idx, targets):  # GPT.token_losses, from the whole logits
        return torch.nn.functional.cross_entropy(self(idx)[0].transpose(1, 2), targets, reduction="none")


class Ignoring(CopyingOracle):
    def forward(self, idx, targets=None, last_only=False):
        return torch.zeros(idx.shape[0], 1 if last_only else idx.shape[1], self.vocab), None


def test_copy_probe_detects_a_model_that_copies_and_not_one_that_does_not(runs, monkeypatch):
    """The positive control: the same probe that reports ~0 gain for the study's models reports a large
    gain at every distance for a model that copies, and exactly 0 for one that ignores its context."""
    run = harness.read_run(runs / "runs" / "rope", "rope")
    gains = {}
    for model in (CopyingOracle(512), Ignoring(512)):
        monkeypatch.setattr(probe, "load_model", lambda *a, **k: model)
        rows = probe.probe_run(run, ["none"], [1, 4, 16], span=8, n_copy=4, n_passkey=2, seed=0, device=torch.device("cpu"))
        gains[type(model).__name__] = {r["distance"]: r["gain"] for r in rows if r["probe"] == "copy"}
    assert set(gains["CopyingOracle"]) == {32, 128, 512}
    assert all(g > 3 for g in gains["CopyingOracle"].values())  # nats: most of the span copied at any distance
    assert all(g == 0 for g in gains["Ignoring"].values())


def test_a_model_blind_to_its_context_gets_the_hand_computed_values(runs, monkeypatch):
    """Zero logits: every token costs ln 512 nats with or without the first copy, and every candidate key
    ties, so the true key's mean rank is (candidates + 1) / 2 and it is never ranked first."""
    run = harness.read_run(runs / "runs" / "rope", "rope")
    monkeypatch.setattr(probe, "load_model", lambda *a, **k: Ignoring(512))
    rows = probe.probe_run(run, ["none"], [1, 4], span=8, n_copy=4, n_passkey=2, seed=0, device=torch.device("cpu"))
    measured = [r for r in rows if r["value"] is not None]  # a passkey too long for a length is a note
    copy, passkey = [r for r in measured if r["probe"] == "copy"], [r for r in measured if r["probe"] == "passkey"]
    assert copy and passkey
    for r in copy:
        assert r["value"] == pytest.approx(math.log(512), abs=1e-4) and r["gain"] == 0
    for r in passkey:
        assert r["value"] == 0 and r["rank"] == (r["candidates"] + 1) / 2


def test_passkey_keys_are_single_token_words_and_ranked(runs):
    run = harness.read_run(runs / "runs" / "alibi", "alibi")
    tokenizer = probe.Tokenizer(run.path / "tokenizer.model")
    words = probe.key_words(tokenizer)
    assert len(words) >= 2 and all(tokenizer.encode(f" {w}") == [t] for w, t in words)
    data = TokenData(prepare_shards(run.data, progress=False), "test")
    sequences, keys = probe.passkey_samples(tokenizer, words, data, 128, 0.0, 6, seed=0)
    candidates = [t for _, t in words]
    assert [int(s[-1]) for s in sequences] == [candidates[k] for k in keys]  # the answer is the key token
    # with the fact first, the copying model finds the key after the first " is": rank 1 every time
    assert probe.key_ranks(CopyingOracle(512), sequences, keys, candidates, torch.device("cpu")) == [1] * 6


def test_probe_plans_scalings_as_the_evaluator_does_and_keeps_finished_rows_on_an_error(tmp_path, monkeypatch, capsys):
    run = harness.Run(tmp_path, "rope", 1, "rope", 128, None, False, DataConfig())
    variants = probe.model_variants(run, ["linear", "dynamic", "none", "yarn"], 512)
    assert [label for label, _ in variants] == ["none", "linear", "dynamic", "yarn"]  # the unscaled model first
    planned = harness.plan(run, ["none", "linear", "dynamic", "yarn"], [512], [])
    assert [scaling for _, scaling in variants] == [m.scaling for m in planned]
    within_L = probe.model_variants(run, ["none", "dynamic", "yarn"], 128)
    assert [scaling for _, scaling in within_L] == [None] * 3  # plain RoPE, each loaded as such
    assert variants[1][1].factor == 4 and variants[1][1].original_max_position_embeddings == 128

    calls = []

    def probe_run(*args):  # the first run measured, the second one broken
        calls.append(1)
        if len(calls) == 2:
            raise UserError("corrupt checkpoint x")
        return [finished]
    finished = {"probe": "copy", "run": "a", "seed": 1, "scaling": "none", "train_length": 128, "distance": 64,
                "multiple": 0.5, "gain": 0.25}
    monkeypatch.setattr(probe, "read_runs", lambda paths, data=None: [run, run])
    monkeypatch.setattr(probe, "probe_run", probe_run)
    with pytest.raises(SystemExit) as e:
        probe.main([str(tmp_path), "--out", str(tmp_path / "out"), "--device", "cpu"])
    assert e.value.code == 1  # as eval.extrapolation: measuring had begun
    assert "corrupt checkpoint x (1 finished measurements are in" in capsys.readouterr().err
    assert json.loads((tmp_path / "out" / "probes.json").read_text()) == [finished]
    assert "| a | none | 128 | +0.250 |" in (tmp_path / "out" / "probes.md").read_text()  # the report of what finished
