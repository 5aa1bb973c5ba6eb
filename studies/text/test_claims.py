"""The claims of studies/text/README.md and of the front page's text-study lines, each proved from the committed rows:
a gap "above" or "below" has its 95% interval over seeds on that side of zero, a "level" one has it across zero (for
a ratio of perplexities: of one)."""
from eval.results.rows import curve_label
from studies.stats import paired_interval, wilson
from studies.text.values import (CONTEXT_ROWS, COPYING, CURVES, FLAT, GAPS, METHODS, PASSKEY, PROBES, RATIOS, ROWS,
                                 TRAINING_FREE, copy_gains, gap, passkey_cells, ratio, seed_diffs)

PAST_L = (2, 4, 8, 16)


def side(interval: tuple[float, float, float], zero: float = 0.0) -> str:
    """A gap's (or, with zero=1, a ratio's) side: "above", "below" or "level" (the interval across zero)."""
    _, low, high = interval
    return "above" if low > zero else "below" if high < zero else "level"


def sides(*names: str, rows: list[dict] = ROWS) -> set[str]:
    return {side(gap(rows, *GAPS[name])) for name in names}


def against(a: str, b: str, multiples) -> set[str]:
    return {side(gap(ROWS, CURVES[a], CURVES[b], n)) for n in multiples}


def context(*names: str) -> set[str]:
    return {side(ratio(CONTEXT_ROWS, *RATIOS[name]), 1.0) for name in names}


def alibi_flat(rows: list[dict] = ROWS) -> bool:
    return sides("alibi_rise", rows=rows) == {"level"} and sides("rope_rise", "sinusoidal_rise", rows=rows) == {"above"}


def fine_tunes_4x(rows: list[dict] = ROWS) -> bool:
    return (sides("yarn_tuned_vs_control_4x", rows=rows), sides("pi_tuned_vs_control_4x", rows=rows)) == (
        {"level"}, {"above"})


def no_copying(probes: list[dict] = PROBES) -> bool:
    return all(high < COPYING for _, _, high in copy_gains(probes).values())


def test_claim_alibi_flat():
    assert alibi_flat()


def test_claim_dynamic_yarn_best():
    others = [label for label in TRAINING_FREE if label != CURVES["dyn_yarn"][1]]
    assert others and {side(gap(ROWS, CURVES["dyn_yarn"], ("rope", other), n))
                       for other in others for n in (8, 16)} == {"below"}


def test_claim_fine_tunes_4x():
    assert fine_tunes_4x()


def test_claim_no_copying():
    assert no_copying()


def test_claim_absolute_at_l():
    assert sides("learned_vs_rope_1x", "sinusoidal_vs_rope_1x") == {"above"}
    assert sides("alibi_vs_rope_1x", "learned_vs_nope_1x", "sinusoidal_vs_nope_1x") == {"level"}


def test_claim_rope_past_l():
    rise = {c: seed_diffs(ROWS, CURVES[c], CURVES[c], 16, 1) for c in ("rope", "sinusoidal")}
    assert side(paired_interval(rise["rope"], rise["sinusoidal"])) == "above"
    assert sides("rope_vs_sinusoidal_16x") == {"level"} and sides("alibi_vs_rope_16x") == {"below"}


def test_claim_scalings():
    assert sides("yarn_vs_rope_16x") == {"below"} and sides("ntk_vs_rope_16x") == {"level"}
    assert sides("fixed_pi_vs_rope_1x", "fixed_yarn_vs_rope_1x", "fixed_ntk_vs_rope_1x") == {"above"}
    assert against("pi", "rope", PAST_L) == {"above"}


def test_claim_fine_tunes_past_4x():
    assert sides("control_vs_rope_1x") == {"below"}
    for tuned in ("yarn_tuned", "pi_tuned"):
        assert all(max(seed_diffs(ROWS, CURVES["control"], CURVES[tuned], n)) < 0 for n in (8, 16))
        assert against("control", tuned, (8, 16)) == {"level"}


def test_claim_passkey_none():
    cells = passkey_cells(PROBES)
    assert all(k == 0 for (file, *_), (k, _, _) in cells.items() if file == "probes.json")
    assert {r["hits"] for r in PASSKEY} == {0}
    newer = [wilson(k, n) + (1 / c,) for (file, *_), (k, n, c) in cells.items() if file != "probes.json"]
    assert newer and all(low <= chance <= high for low, high, chance in newer)


def test_claim_more_encodings():
    assert sides("kerple_vs_alibi_1x") == {"below"} and sides("kerple_vs_alibi_16x", "kerple_vs_rope_1x") == {"level"}
    assert sides("fire_vs_rope_1x", "fire_vs_alibi_16x") == {"above"} and sides("fire_vs_rope_16x") == {"below"}
    assert sides("t5_vs_nope_1x", "t5_vs_nope_16x", "half_vs_rope_1x", "base1e6_vs_rope_16x") == {"level"}
    assert against("half", "rope", PAST_L) == {"above"} and sides("base1e5_vs_rope_16x") == {"above"}
    for base in ("base1e5", "base1e6"):
        assert "below" not in against(base, "rope", (1, *PAST_L)) | against(
            f"{base}_dyn_yarn", "dyn_yarn", (1, *PAST_L))


def test_claim_newer_methods():
    assert sides("drope_vs_rope_1x") == {"above"} and sides("drope_vs_nope_1x", "fox_vs_rope_1x") == {"level"}
    assert against("p_rope", "rope", [1]) | against("rnope_swa", "rope", [1]) == {"level"}
    assert sides("fox_rise", "rnope_swa_rise") == {"level"} and sides("drope_rise") == {"above"}
    assert sides("fox_vs_dyn_yarn_16x", "rnope_swa_vs_dyn_yarn_16x") == {"below"}


def test_claim_randomized():
    assert sides("random_rope_vs_rope_1x", "random_alibi_vs_alibi_1x", "random_rope_vs_dyn_yarn_16x") == {"above"}
    assert sides("random_rope_rise", "random_rope_vs_rope_16x") == {"level"}


def test_claim_pose():
    assert sides("pose_continued_vs_control_4x", "pose_vs_dyn_yarn_16x") == {"level"}
    assert sides("pose_continued_vs_pi_tuned_4x", "pose_vs_rope_16x") == {"below"}
    assert sides("pose_continued_vs_control_16x") == {"above"}
    rise = {c: seed_diffs(ROWS, CURVES[c], CURVES[c], 4, 1) for c in ("pose", "rope")}
    assert side(paired_interval(rise["pose"], rise["rope"])) == "below"


def test_claim_context():
    assert context(*(f"{m.replace('-', '_')}_rope_16x" for m in METHODS if m != "logn"), "sinks_t5_16x") == {"below"}
    assert context("logn_rope_16x", "logn_t5_16x") == {"level"}
    assert context(*(f"{m}_alibi_16x" for m in ("rerope", "dca", "leaky_rerope", "logn"))) == {"above"}
    within_1_percent = ["sinks_rope_rise", "self_extend_alibi_16x", "sinks_alibi_16x",
                        *(f"{m}_t5_16x" for m in ("self_extend", "rerope", "leaky_rerope", "dca"))]
    assert all(1 / FLAT < low and high < FLAT
               for _, low, high in (ratio(CONTEXT_ROWS, *RATIOS[name]) for name in within_1_percent))


def scaled(rows: list[dict], curve: str, multiple: int, factor: float) -> list[dict]:
    """The rows with one curve's perplexity at one multiple of L multiplied by factor."""
    return [dict(r, ppl=r["ppl"] * factor) if (r["run"], curve_label(r), r["length"] // r["train_length"])
            == (*CURVES[curve], multiple) else r for r in rows]


def test_alibi_rising_at_16x_breaks_alibi_flat():
    assert alibi_flat() and not alibi_flat(scaled(ROWS, "alibi", 16, 1.2))


def test_a_pi_fine_tune_level_with_the_control_breaks_fine_tunes_4x():
    assert fine_tunes_4x() and not fine_tunes_4x(scaled(ROWS, "pi_tuned", 4, 0.96))


def test_a_copying_row_breaks_no_copying():
    assert not no_copying([dict(r, gain=r["gain"] + 1) if r["probe"] == "copy" and r["value"] is not None else r
                           for r in PROBES])
