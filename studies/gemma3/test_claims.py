"""The claims of studies/gemma3/README.md from the committed rows, taken as defaults: changed rows can be passed."""
from eval.results import ruler
from studies.gemma3.values import OURS, SHORT, TRANSFORMERS, bench, benches, contexts, gain, rows, ruler_rows, speedup
from studies.stats import above_zero

MIN_BOOKS = 8  # the bar: every real-model number from at least 8 held-out books


def test_claim_uses_context_past_8k(r=rows()):
    books = {(x["split"], x["document"]) for x in r}
    assert len(books) >= MIN_BOOKS and {x["split"] for x in r} == {"test", "val"}
    assert contexts()[-1] > 3 * SHORT and above_zero(gain())


def test_claim_uses_context_within_8k():
    assert above_zero(gain(contexts()[0], SHORT))


def test_claim_window_faster(case=bench()):
    speeds = {x["name"]: x["tokens_per_s"] for x in case["rows"]}
    ours = speeds["ours, keys inside the window"]
    assert ours > speeds["transformers Gemma3 (sdpa)"] and ours > speeds["ours, (T, S) mask"]
    assert case["max_logit_difference"]["peer"] < 1e-3  # the same model


def test_a_changed_row_breaks_the_positive_control():
    longest = contexts()[-1]
    worse = [dict(x, loss=x["loss"] + 1.0 if x["context_tokens"] == longest else x["loss"]) for x in rows()]
    assert not above_zero(gain(measured=worse))


def test_claim_window_faster_at_32k():
    short, long = bench(), benches()[-1]
    assert long["length"] == 2 * short["length"] and long["max_logit_difference"]["peer"] < 1e-3
    assert speedup(TRANSFORMERS, long) > speedup(TRANSFORMERS, short)  # the gap grows with the length
    peak = {r["name"]: r["peak_mib"] for r in long["rows"]}
    assert peak[OURS] < peak[TRANSFORMERS]


def test_claim_ruler_effective_length(measured=None):
    (by_task,) = ruler.scores([x for x in measured or ruler_rows() if "scores" in x]).values()
    means = ruler.mean_by_length(by_task)
    assert set(means) == {4096, 8192} and all(v < ruler.THRESHOLD for v in means.values())
    assert ruler.effective_lengths(means) == (None, max(means))


def test_a_needle_found_everywhere_breaks_the_ruler_claim():
    import pytest
    perfect = [dict(x, scores=[1.0] * len(x["scores"])) for x in ruler_rows()]
    with pytest.raises(AssertionError):
        test_claim_ruler_effective_length(perfect)
