"""eval.context_use: the same targets at every context c, losses as eval.extrapolation computes them, one static
factor for every c, the sinks floor, LongPPL's key tokens by hand, the report's intervals, resume and one-line errors.
Reads the session's tiny run (L = 64, 2 layers)."""
import json
import math
import statistics

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from checkpoint import load_model
from config import ScalingConfig
from data import TokenData
from eval import context_use, extrapolation
from eval.harness import read_run, text_shards
from eval.results import context_use as results

L, T, CONTEXTS = 64, 16, [16, 32, 64, 128]
ARGS = ["--targets", str(T), "--contexts", ",".join(map(str, CONTEXTS)), "--device", "cpu"]
SCALINGS = ["none", "linear", "ntk", "dynamic", "yarn", "dynamic-yarn", "llama3"]  # every one a run takes by name


@pytest.fixture(scope="module")
def report(tiny_run, tmp_path_factory):
    out = tmp_path_factory.mktemp("context-use")
    return context_use.main([str(tiny_run), *ARGS, "--out", str(out)]), out


def fake_data(offsets: list[int]) -> TokenData:
    """A TokenData of documents at `offsets` whose tokens are their positions (0, 1, 2 ...)."""
    data = object.__new__(TokenData)
    data.doc_offsets = np.array(offsets)
    data.names = [f"doc{i}" for i in range(len(offsets) - 1)]
    data.tokens = np.arange(offsets[-1], dtype=np.uint16)
    return data


def row(rows, scaling, document, c):
    (found,) = [r for r in rows if (r["scaling"], r["document"], r["context_tokens"]) == (scaling, document, c)]
    return found


def test_spans_and_windows_end_in_the_same_targets_at_every_c():
    data = fake_data([0, 40, 50, 130])  # documents of 40, 10 and 80 tokens
    spans, skipped = context_use.document_spans(data, 20, per_doc=2)
    assert skipped == 1  # the 10-token document
    assert [(s.name, s.index, s.start, s.end, s.offset) for s in spans] == [
        ("doc0", 0, 0, 20, 0), ("doc0", 1, 20, 40, 20), ("doc2", 0, 50, 70, 0), ("doc2", 1, 70, 90, 20)]
    assert [s.name for s in context_use.document_spans(data, 20, per_doc=2, max_docs=1)[0]] == ["doc0", "doc0"]
    assert len(context_use.document_spans(data, 20, per_doc=9)[0]) == 2 + 4  # non-overlapping, from the start
    assert context_use.document_spans(data, 81, per_doc=1) == ([], 3)
    for s in spans:  # spans of max(c) + T + 1 = 20 tokens, T = 4
        for c in (1, 7, 15):
            start, end = context_use.window(s, c, 4)
            tokens = data.window_tensor(start, end)
            assert len(tokens) == c + 4 + 1 and start >= s.start
            assert tokens[-4:].tolist() == list(range(s.end - 4, s.end))  # the targets, whatever c
    with pytest.raises(ValueError):
        context_use.window(spans[0], 16, 4)


def test_a_row_for_every_scaling_document_and_c(report, tiny_run):
    rows, out = report
    data = TokenData(text_shards(read_run(tiny_run, "tiny")), "test")
    documents = [n for n, a, b in zip(data.names, data.doc_offsets[:-1], data.doc_offsets[1:]) if b - a > 128 + T]
    assert len(documents) == 3
    assert [(r["scaling"], r["document"], r["context_tokens"]) for r in rows] == [
        (s, d, c) for s in SCALINGS for d in documents for c in CONTEXTS]
    assert all(r["loss"] > 0 and r["targets"] == T and r["train_length"] == L and r["span"] == 0 for r in rows)
    assert json.loads((out / "results.json").read_text()) == rows
    md = (out / "results.md").read_text()
    assert "| tiny | rope | linear (s = 2.25) | 64 | 3 |" in md and "| tiny | none | 64 | 64 | 128 |" in md
    for scaling, document in {(r["scaling"], r["document"]) for r in rows}:
        span = [r for r in rows if (r["scaling"], r["document"]) == (scaling, document)]
        assert len({r["targets_hash"] for r in span}) == 1  # the same target tokens at every c
        by_c = {r["context_tokens"]: r for r in span}
        assert all(r["short_context"] == 64 and r["long_context"] == 128 for r in span)
        assert span[0]["gain_past_L"] == pytest.approx(by_c[64]["loss"] - by_c[128]["loss"], abs=1e-9)
    assert len({r["targets_hash"] for r in rows}) == 3  # one per document


def test_a_static_scaling_has_one_factor_and_a_dynamic_one_decodes_past_L(report):
    rows, _ = report
    for method in ("linear", "ntk", "yarn", "llama3"):
        assert {(r["factor"], r["factor_rule"]) for r in rows if r["scaling"] == method} == {((128 + T) / L, "fixed")}
    for method in ("dynamic", "dynamic-yarn"):
        assert [r["through_cache"] for r in rows if r["scaling"] == method][:4] == [False, False, True, True]
        for c in (16, 32):  # c + T <= L: plain RoPE in one forward pass
            assert row(rows, method, "hamlet", c)["loss"] == pytest.approx(row(rows, "none", "hamlet", c)["loss"], rel=1e-6)


def test_losses_are_eval_extrapolations_next_token_losses_on_the_last_targets(report, tiny_run):
    rows, _ = report
    data = TokenData(text_shards(read_run(tiny_run, "tiny")), "test")
    a = int(data.doc_offsets[0])  # hamlet, the first document: its span is tokens[a : a + 128 + T + 1]
    end = a + 128 + T + 1
    for scaling, label, decode_from in ((None, "none", None), (ScalingConfig("linear", 2.25, L), "linear", None),
                                        (ScalingConfig("dynamic", 1.0, L), "dynamic", L)):
        model = load_model(tiny_run, scaling=scaling)
        for c in (32, 128):
            n = c + T
            decode = decode_from if decode_from is not None and n > decode_from else None
            loss_sum, count = extrapolation.token_losses(model, data, [(end - n - 1, end, T)], n, 1, "cpu", decode)
            assert int(count.sum()) == T
            assert row(rows, label, "hamlet", c)["loss"] == pytest.approx(float(loss_sum.sum()) / T, rel=1e-5)
    model = load_model(tiny_run, scaling=None)  # and by hand, for plain RoPE
    window = data.window_tensor(end - 64 - T - 1, end)[None]
    with torch.no_grad():
        logits, _ = model(window[:, :-1])
    loss = F.cross_entropy(logits[0, -T:].float(), window[0, -T:])
    assert row(rows, "none", "hamlet", 64)["loss"] == pytest.approx(float(loss), rel=1e-5)


def test_sinks_without_sink_tokens_read_the_same_at_every_c_past_the_layers_reach(tiny_run, tmp_path):
    """A window of W and no sink tokens: a target reaches n_layers (W - 1) = 2 x 31 = 62 tokens back, so every
    c >= 62 gives it the same loss (float rounding aside): the floor's gain past L is 0."""
    rows = context_use.main([str(tiny_run), "--targets", str(T), "--contexts", "32,62,64,128", "--device", "cpu",
                             "--context-method", "{type: sinks, sinks: 0, window: 32}", "--out", str(tmp_path)])
    assert {r["scaling"] for r in rows} == {"sinks (window=32, sinks=0)"} and rows[0]["context"] == {"type": "sinks", "sinks": 0, "window": 32}
    for document in {r["document"] for r in rows}:
        by_c = {r["context_tokens"]: r for r in rows if r["document"] == document}
        assert by_c[62]["loss"] == pytest.approx(by_c[128]["loss"], abs=1e-5)
        assert by_c[64]["loss"] == pytest.approx(by_c[128]["loss"], abs=1e-5)
        assert by_c[128]["gain_past_L"] == pytest.approx(0, abs=1e-5) and by_c[128]["key_share"] == 0


def test_longppl_key_tokens_and_losses_by_hand():
    # log-probabilities of 6 targets, exact in binary: with the short context (c = 64) and the long (c = 128)
    short = torch.tensor([-3.0, -1.5, -6.0, -2.25, -2.5, -5.0], dtype=torch.float64)
    long = torch.tensor([-0.5, -1.0, -3.0, -0.125, -0.5, -2.0], dtype=torch.float64)
    # differences 2.5, 0.5, 3, 2.125, 2 (not above the margin), 3 (long not above the floor): targets 0 and 3
    assert context_use.key_tokens(short, long).tolist() == [True, False, False, True, False, False]
    mid = torch.full((6,), -1.0, dtype=torch.float64)
    span, key_loss = context_use.summarize({32: mid, 64: short, 128: long}, 64, 128)
    assert span == {"gain_past_L": pytest.approx(short.neg().mean() - long.neg().mean()), "key_share": 2 / 6,
                    "key_tokens": 2}
    assert key_loss == {32: 1.0, 64: pytest.approx((3.0 + 2.25) / 2), 128: pytest.approx((0.5 + 0.125) / 2)}
    span, key_loss = context_use.summarize({64: short, 128: short}, 64, 128)  # no key token: no key loss
    assert span["key_share"] == 0 and key_loss == {64: None, 128: None}
    assert context_use.summarize({64: short, 128: None}, 64, 128)[0]["gain_past_L"] is None  # not applicable
    assert context_use.reference_contexts([16, 32, 48, 128], 64) == (48, 128)
    assert context_use.reference_contexts([16, 32], 64) == (None, None)  # nothing past L
    assert context_use.reference_contexts([128, 256], 64) == (None, None)  # nothing inside


def fake_row(document, span, c, loss, gain=None, share=None, key_loss=None):
    return {"run": "r", "seed": 1, "position": "rope", "scaling": "none", "factor_rule": None, "factor": None,
            "train_length": 64, "split": "test", "document": document, "span": span, "context_tokens": c,
            "targets": 16, "loss": loss, "key_loss": key_loss, "short_context": 64, "long_context": 128,
            "gain_past_L": gain, "key_share": share, "margin": 2.0, "floor": -2.0, "note": None}


def test_the_table_averages_spans_within_a_document_then_gives_a_t_interval_over_documents():
    rows = [fake_row("a", 0, 64, 4.0), fake_row("a", 0, 128, 3.0, 1.0, 0.25, 1.5),
            fake_row("a", 1, 64, 6.0), fake_row("a", 1, 128, 5.0, 1.0, 0.75, 2.5),  # document a: 5, 4; gain 1
            fake_row("b", 0, 64, 3.0), fake_row("b", 0, 128, 3.0, 0.0, 0.0)]  # document b: 3, 3; gain 0
    md = results.markdown(rows)
    half = 12.706 * statistics.stdev([5.0, 3.0]) / math.sqrt(2)
    assert f"| r | rope | none | 64 | 2 | {4.0:.3f} ± {half:.3f} |" in md
    gain_half = 12.706 * statistics.stdev([1.0, 0.0]) / math.sqrt(2)
    # the key loss of document b (no key token) is left out: one document, no interval
    assert f"| r | none | 64 | 64 | 128 | +0.500 ± {gain_half:.3f} | 0.250 ± {gain_half / 2:.3f} | n/a | 2.000 |" in md
    assert results.t975(1) == 12.706 and results.t975(30) == 2.042
    assert results.t975(31) == pytest.approx(2.0395, abs=2e-4) and results.t975(120) == pytest.approx(1.9799, abs=2e-4)


def test_resume_measures_only_the_spans_a_report_lacks(tiny_run, tmp_path, monkeypatch, capsys):
    argv = [str(tiny_run), *ARGS, "--scaling", "none,linear", "--out", str(tmp_path)]
    measure, calls = context_use.Evaluator.measure, []

    def interrupt_second(self, *args):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return measure(self, *args)
    monkeypatch.setattr(context_use.Evaluator, "measure", interrupt_second)
    with pytest.raises(SystemExit) as stop:
        context_use.main(argv)
    assert stop.value.code == 130 and "12 finished measurements" in capsys.readouterr().err
    kept = json.loads((tmp_path / "results.json").read_text())
    assert {r["scaling"] for r in kept} == {"none"} and len(kept) == 3 * len(CONTEXTS)
    calls.clear()
    monkeypatch.setattr(context_use.Evaluator, "measure", lambda self, *a: calls.append(1) or measure(self, *a))
    rows = context_use.main([*argv, "--resume"])
    assert rows[:len(kept)] == kept and len(rows) == 2 * len(kept) and len(calls) == 1
    assert context_use.main([*argv, "--resume"]) == rows and len(calls) == 1  # nothing left to measure
    for other in (["--targets", "8"], ["--contexts", "16,128"]):
        with pytest.raises(SystemExit) as stop:
            context_use.main([*argv, *other, "--resume"])
        assert stop.value.code == 2


def error_line(capsys, argv) -> tuple[int, str]:
    with pytest.raises(SystemExit) as stop:
        context_use.main(argv)
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ")
    return stop.value.code, lines[0]


@pytest.mark.parametrize("options, message", [
    (["--targets", "0"], "--targets must be >= 1, got 0"),
    (["--contexts", "0,16"], "--contexts must be positive integers"),
    (["--contexts", "16,abc"], "--contexts must be comma-separated integers"),
    (["--multiples", "-1"], "--multiples must be positive numbers"),
    (["--contexts", "16", "--multiples", "1"], "not allowed with argument"),
    (["--spans-per-doc", "0"], "--spans-per-doc must be >= 1"),
    (["--contexts", "100000"], "holds 100017 tokens (the longest context 100000 + 16 targets + 1)"),
    (["--context-method", "sinks", "--scaling", "dynamic"], "--context-method"),
])
def test_bad_inputs_are_one_line_and_exit_2(tiny_run, tmp_path, capsys, options, message):
    code, line = error_line(capsys, [str(tiny_run), "--targets", "16", *options, "--out", str(tmp_path / "out")])
    assert code == 2 and message in line
    assert not (tmp_path / "out" / "results.json").exists()
