"""The claims of studies/smollm2/README.md from the committed rows, taken as defaults: changed rows can be passed."""
import pytest

from checkpoint import load_tokenizer
from eval.passkey import Prompts
from eval.results import ruler
from studies.gemma3 import values as gemma3
from studies.report import ROOT
from studies.smollm2.values import (BASE, CU_SHORT, SLACK, cells, cu_contexts, cu_gain, cu_of, cu_over_floor, cu_rows,
                                    curves, interval, key_rows, named, ppl_rows, rise, ruler_rows)
from studies.stats import above_zero, apart, below_zero
from studies.tables import losses_by_book, ruler_means

PPL, KEYS = curves(ppl_rows()), cells(key_rows())
L = min(PPL["none"])
PAST = (2 * L, 4 * L)
FAR = 1.5  # "far above": more than half as much again
ALIKE = 0.01  # "as low as": within 1%


def test_claim_no_ppl_evidence_past_L(c=PPL):  # sinks read nothing past their window of L - 4 tokens
    assert all(r["span"] == r["tokens"] == r["windows"] * r["length"] == 4 * L for r in ppl_rows())  # the same tokens
    assert all(rise(c["yarn_ft"], n) > rise(c["sinks"], n) and rise(c["yarn_ft"], n) >= 0 for n in PAST)


def test_claim_sinks_match_methods(c=PPL):
    best = {n: min(c[m][n] for m in ("self_extend", "dca", "rerope", "leaky", "yarn", "ntk")) for n in PAST}
    assert all(c["sinks"][n] <= (1 + ALIKE) * best[n] for n in PAST)


def test_claim_unscaled_past_L(c=PPL):
    assert all(c["none"][n] > FAR * c["yarn"][n] for n in PAST)


def test_claim_fine_tunes(c=PPL, v=named()):
    pi, yarn = (float(v[f"val_{k}"]) for k in ("pi_ft", "yarn_ft"))  # the validation loss each ended at
    assert c["yarn_ft"][L] < c["none"][L] and c["control"][L] < c["none"][L] < c["pi_ft"][L] and pi > yarn
    assert all(c["pi_ft"][n] > FAR * c["yarn_ft"][n] for n in c["pi_ft"])
    assert all(c["control"][n] > FAR * c["yarn_ft"][n] for n in PAST)


def test_claim_middle_only_at_L(k=KEYS):
    found = interval(k[("none", L, 0.5)])
    assert all(interval(k[("none", L, d)])[1] < found[0] for d in (0.0, 1.0))
    assert all(r["hits"] == r["trials"] for (who, n, _), r in k.items() if who == "none" and n < L)


def test_claim_held_not_found(k=KEYS):
    assert all(interval(k[key], "held")[0] > interval(k[key])[1] for key in (("none", L, 1.0), ("yarn_ft", L, 0.5)))


def test_claim_first_key_fine_tune(k=KEYS):
    ft = {n: interval(k[("yarn_ft", n, 0.0)]) for n in (L, *PAST)}
    assert ft[L][0] > interval(k[("none", L, 0.0)])[1] and ft[2 * L][0] > interval(k[("yarn", 2 * L, 0.0)])[1]
    assert ft[4 * L][1] < ft[2 * L][0]


def test_claim_not_apart_at_4L(k=KEYS):
    assert (4 * L - SLACK) / 2 > L and k[("yarn", 4 * L, 0.5)]["hits"] == k[("yarn", 4 * L, 0.5)]["trials"]
    assert not any(apart(interval(k[("yarn_ft", 4 * L, d)]), interval(k[("yarn", 4 * L, d)])) for d in (0.5, 1.0))


def test_claim_below_pose_paper(k=KEYS):
    assert interval(k[("yarn_ft", 4 * L, 0.0)])[1] < 0.9  # the PoSE paper's >= 90% (its Figure 2b)


def test_claim_retrained_matches(v=named()):
    assert float(v["again_gap"]) < 1e-4


def test_a_changed_row_breaks_its_claims():
    sinks = curves([{**r, "ppl": r["ppl"] * 1.05} if r["scaling"] == "sinks" and r["length"] > L else r
                    for r in ppl_rows()])
    keys = key_rows()
    middle = cells([{**r, "hits": 5} if (r["length"], r["depth"]) == (L, 0.5) else r for r in keys])
    lost = cells([{**r, "hits": 19} if r["run"] == "smollm2-yarn" and r["depth"] == 0 else r for r in keys])
    for claim, rows in ((test_claim_no_ppl_evidence_past_L, sinks), (test_claim_sinks_match_methods, sinks),
                        (test_claim_middle_only_at_L, middle), (test_claim_first_key_fine_tune, lost),
                        (test_claim_below_pose_paper, lost)):
        with pytest.raises(AssertionError):
            claim(rows)


def test_a_first_key_lies_more_than_length_minus_slack_back():
    """In a passkey prompt of SmolLM2's tokenizer everything but the filler takes fewer than SLACK tokens, so a key at
    depth 0 lies more than length - SLACK tokens before the question: at 2L, farther back than sinks read."""
    run = ROOT / "runs" / "SmolLM2-135M-Instruct-Q4_1"
    if not (run / "tokenizer").exists():
        pytest.skip("SmolLM2 is not prepared here (make runs/SmolLM2-135M-Instruct-Q4_1/config.yaml)")
    assert 0 < Prompts(load_tokenizer(run), seed=0, trials=20).fixed < SLACK


def level_past_L(rows: list[dict], longest: int) -> list[dict]:
    """The rows with each book's loss at the longest context set to its loss at L: no rise past L."""
    at_L = {(r["split"], r["document"], r["span"]): r["loss"] for r in rows if r["context_tokens"] == CU_SHORT}
    return [dict(r, loss=at_L[r["split"], r["document"], r["span"]]) if r["context_tokens"] == longest else r
            for r in rows]


def test_claim_unscaled_reads_nothing_past_L():
    longest = cu_contexts()[-1]
    assert longest > 2 * CU_SHORT - 1 and below_zero(cu_gain(CU_SHORT, longest))
    assert all(r["train_length"] == CU_SHORT + r["targets"] for r in cu_rows() if r["run"] == BASE)  # c = 7,936: L
    level = [dict(r, loss=3.0) for r in cu_rows()]  # the same loss at every c: no rise, so no claim
    assert not below_zero(cu_gain(CU_SHORT, longest, measured=level))


def test_claim_yarn_no_use_past_L():
    longest = cu_contexts()[-1]
    assert not above_zero(cu_gain(CU_SHORT, longest, "yarn")) and not above_zero(cu_over_floor("yarn"))
    # had the longest context lowered YaRN's loss well below both, the claim would fail
    helped = [dict(r, loss=r["loss"] - 0.5) if r["scaling"] == "yarn" and r["context_tokens"] == longest else r
              for r in cu_rows()]
    assert above_zero(cu_gain(CU_SHORT, longest, "yarn", measured=helped))
    assert above_zero(cu_over_floor("yarn", measured=[r for r in helped if r["scaling"] == "yarn"]))


def test_claim_gemma_uses_past_L():
    longest = cu_contexts()[-1]  # SmolLM2's longest c, which Gemma's rows hold too
    assert gemma3.SHORT == CU_SHORT and above_zero(gemma3.gain(CU_SHORT, longest))
    level = [dict(r, loss=3.0) for r in gemma3.rows()]
    assert not above_zero(gemma3.gain(CU_SHORT, longest, measured=level))


def test_claim_pi_no_use_past_L():
    pi, yarn = cu_over_floor("pi"), cu_over_floor("yarn")
    assert not above_zero(cu_gain(CU_SHORT, cu_contexts()[-1], "pi"))
    assert pi[0] < yarn[0] and apart(pi[1:], yarn[1:])


def test_claim_yarn_ft_worse_past_L():
    longest = cu_contexts()[-1]
    assert below_zero(cu_gain(CU_SHORT, longest, "yarn_ft")) and not above_zero(cu_over_floor("yarn_ft"))
    assert above_zero(cu_over_floor("yarn_ft", c=CU_SHORT))
    mine = [r for r in cu_rows() if r["run"] == "smollm2-yarn"]
    level = level_past_L(mine, longest)
    assert not below_zero(cu_gain(CU_SHORT, longest, "yarn_ft", measured=level))  # no rise past L, no claim


def test_claim_control_beats_yarn_ft():
    assert above_zero(cu_over_floor("control", c=CU_SHORT))  # fine-tuning's own gain within L
    assert below_zero(cu_over_floor("yarn_ft", c=CU_SHORT, floor="control"))
    assert below_zero(cu_over_floor("yarn_ft", floor="control"))  # its longest context against the control's L
    assert below_zero(cu_gain(CU_SHORT, cu_contexts()[-1], "control"))
    # had the YaRN fine-tune's loss been 0.1 nats lower at every c, it would be level with the control or above it
    better = [dict(r, loss=r["loss"] - 0.1) for r in cu_rows() if r["run"] == "smollm2-yarn"]
    assert not below_zero(cu_over_floor("yarn_ft", measured=better, c=CU_SHORT, floor="control"))
    assert not below_zero(cu_over_floor("yarn_ft", measured=better, floor="control"))


def test_claim_first_key_not_fine_tuning(k=KEYS):
    control, tuned, base = (interval(k[(who, L, 0.0)]) for who in ("control", "yarn_ft", "none"))
    assert control[1] < tuned[0] and not apart(control, base)


def test_a_control_that_found_the_first_key_breaks_its_claim():
    found = cells([{**r, "hits": 20} if r["run"] == "smollm2-continued" and r["depth"] == 0 else r for r in key_rows()])
    with pytest.raises(AssertionError):
        test_claim_first_key_not_fine_tuning(found)


def test_claim_ntk_worse_past_L():
    longest = cu_contexts()[-1]
    assert below_zero(cu_gain(CU_SHORT, longest, "ntk")) and below_zero(cu_over_floor("ntk"))
    # had NTK's loss with the longest context been its loss at L, neither would hold
    mine = [r for r in cu_rows() if r["scaling"] == "ntk"]
    level = level_past_L(mine, longest)
    assert not below_zero(cu_gain(CU_SHORT, longest, "ntk", measured=level))


def test_claim_pi_ft_worse_past_L():
    longest = cu_contexts()[-1]
    assert below_zero(cu_over_floor("pi_ft", c=CU_SHORT, floor="control"))
    assert below_zero(cu_gain(CU_SHORT, longest, "pi_ft"))
    # had its loss been level past L and 0.8 nats lower, it would neither rise nor fall short of the control
    mine = [r for r in cu_rows() if r["run"] == "smollm2-pi"]
    better = [dict(r, loss=r["loss"] - 0.8) for r in level_past_L(mine, longest)]
    assert not below_zero(cu_gain(CU_SHORT, longest, "pi_ft", measured=better))
    assert not below_zero(cu_over_floor("pi_ft", measured=better, c=CU_SHORT, floor="control"))


def test_claim_ruler_effective_length_none(measured=None):
    by_task, means = ruler_means(measured or ruler_rows(), BASE, "none")
    assert set(means) == {4096, 8192} and len(by_task) == 6 and all(v < ruler.THRESHOLD for v in means.values())
    assert means[8192] < ruler.RELATIVE * means[4096] and ruler.effective_lengths(means) == (None, 4096)
    first = [x for x in measured or ruler_rows()
             if (x["scaling"], x["length"], x["depth"]) == ("none", 8192, 0.0) and "scores" in x]
    assert len(first) == 3 and all(x["value"] == 0 for x in first) and KEYS[("none", L, 0.0)]["hits"] == 0


def test_a_model_as_good_at_8k_breaks_the_ruler_claim():
    perfect_at_L = [dict(x, scores=[1.0] * len(x["scores"])) if x["length"] == 8192 and x.get("scores") else x
                    for x in ruler_rows()]
    with pytest.raises(AssertionError):
        test_claim_ruler_effective_length_none(perfect_at_L)


def test_claim_sinks_at_floor(measured=None):
    rows, label = cu_of("sinks")
    over = cu_over_floor("sinks", measured=measured)
    assert not above_zero(over) and not below_zero(over) and abs(over[0]) < 0.01
    assert len(losses_by_book(measured or rows, label)) >= 8


def test_sinks_that_read_past_L_break_their_claim():
    longest = cu_contexts()[-1]
    read = [dict(r, loss=r["loss"] - 0.05) if r["context_tokens"] == longest else r for r in cu_of("sinks")[0]]
    with pytest.raises(AssertionError):
        test_claim_sinks_at_floor(read)
