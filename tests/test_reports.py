"""The studies' sentences, recomputed from their committed rows: the text study, then the task track.

Every comparative sentence about the text study in README.md and reports/extrapolation/README.md has a
test here, named after its claim. The test finds the sentence in the page (verbatim or by a distinctive
fragment) and recomputes its numbers from reports/extrapolation/results.json, probes.json and
training*.md with the rounding the sentence uses, so that editing the sentence without the data, or the
data without the sentence, fails. "In every seed" means seeds 1-3 each; "level" means what the report
says it means: the difference does not have the same sign in every seed. Numbers from runs whose files
are not committed (the prose says so where it quotes them) are not tested.
"""
import functools
import json
import math
import re
import statistics
from pathlib import Path

import pytest
import torch

from config import Config, ModelConfig, PositionConfig, load_config
from eval.extrapolation import previous_rows
from eval.plots import read_results
from eval.results import relative_to_nope
from model.gpt import GPT
from model.positions import Kerple

ROOT = Path(__file__).resolve().parents[1]
REPORT = ROOT / "reports" / "extrapolation"
ROWS = read_results(REPORT / "results.json")
PROBES = previous_rows(REPORT / "probes.json", "eval.probe", "probe")
SEEDS = (1, 2, 3)
L, X2, X4, X8, X16 = 128, 256, 512, 1024, 2048
PAST_L = (X2, X4, X8, X16)


def prose(path: Path) -> str:
    return " ".join(path.read_text().split())


README, STUDY = prose(ROOT / "README.md"), prose(REPORT / "README.md")


def says(page: str, *fragments: str) -> None:
    """Each fragment is in the page (whitespace aside): the sentence a test checks is still there."""
    for fragment in fragments:
        present = " ".join(fragment.split()) in page
        assert present, f"the sentence changed or is gone: {fragment!r}"


# --- perplexity rows -------------------------------------------------------------------------------

PPL = {(r["run"], r["seed"], r["scaling"], r["factor_rule"], r["length"]): r["ppl"] for r in ROWS}


def ppl(run: str, seed: int, length: int, scaling: str = "none", rule: str | None = None) -> float | None:
    """The perplexity of one row: (run, seed, scaling, factor_rule, length)."""
    return PPL[(run, seed, scaling, rule, length)]


def curve(run: str, scaling: str = "none", rule: str | None = None) -> tuple:
    return run, scaling, rule


def seeds(c: tuple, length: int) -> list[float]:
    """One curve's perplexity at one length, seed by seed."""
    run, scaling, rule = c
    return [ppl(run, s, length, scaling, rule) for s in SEEDS]


def mean(c: tuple, length: int) -> float:
    return statistics.fmean(seeds(c, length))


def on(run: str, c: tuple) -> tuple:
    """The curve `c` (a scaling of the base RoPE run) on another run."""
    return curve(run, *c[1:])


ROPE, ALIBI, NOPE, SINUSOIDAL, LEARNED = (curve(r) for r in ("rope", "alibi", "nope", "sinusoidal", "learned"))
T5, KERPLE, FIRE, HALF = (curve(r) for r in ("t5", "kerple", "fire", "rope-half"))
BASE_1E5, BASE_1E6 = curve("rope-base1e5"), curve("rope-base1e6")
PI, NTK, YARN = (curve("rope", m, "length/L") for m in ("linear", "ntk", "yarn"))
DYNAMIC, DYNAMIC_YARN = curve("rope", "dynamic", "T/L"), curve("rope", "dynamic-yarn", "T/L")
FIXED = {m: curve("rope", m, "fixed") for m in ("linear", "ntk", "yarn")}  # s = 4 at every length
TRAINING_FREE = [ROPE, PI, NTK, YARN, DYNAMIC, DYNAMIC_YARN, *FIXED.values()]
PI_TUNED = curve("rope-pi", "linear (fine-tuned)", "fine-tuned")
YARN_TUNED = curve("rope-yarn", "yarn (fine-tuned)", "fine-tuned")
CONTROL = curve("rope-continued", "none (fine-tuned)")
POSE, POSE_CONTINUED = curve("rope-pose"), curve("rope-pose-continued", "none (fine-tuned)")
RANDOM_ROPE, RANDOM_ALIBI = curve("rope-randomized"), curve("alibi-randomized")


def minus(a: list[float], b: list[float]) -> list[float]:
    return [x - y for x, y in zip(a, b)]


def percent(a: list[float], b: list[float]) -> list[float]:
    """How much a is above b, in %, pairwise."""
    return [100 * (x / y - 1) for x, y in zip(a, b)]


def ratio(a: list[float], b: list[float]) -> list[float]:
    return [x / y for x, y in zip(a, b)]


def fmt(values: list[float], digits: int = 1, sep: str = " / ", sign: bool = False) -> str:
    """Values as the prose writes them: '107.4 / 104.9 / 110.0', or signed: '+4.3, -5.9, +6.1'."""
    spec = f"{'+' if sign else ''}.{digits}f"
    return sep.join(format(v, spec) for v in values)


def span(values: list[float], digits: int = 0) -> str:
    """A range as the prose writes it: '30-43' (the smallest and largest value, rounded)."""
    return f"{min(values):.{digits}f}-{max(values):.{digits}f}"


def level(a: list[float], b: list[float]) -> bool:
    """The report's rule: a difference is one only where it has the same sign in every seed."""
    signs = {x > y for x, y in zip(a, b)}
    return len(signs) > 1


def below_in_every_seed(a: list[float], b: list[float]) -> bool:
    """a is below b in every seed."""
    return all(x < y for x, y in zip(a, b))


def below_at(a: tuple, b: tuple, lengths) -> bool:
    """Curve a is below curve b in every seed at each of these lengths."""
    return all(below_in_every_seed(seeds(a, n), seeds(b, n)) for n in lengths)


def best_training_free(seed: int, length: int) -> tuple:
    return min(TRAINING_FREE, key=lambda c: ppl(c[0], seed, length, *c[1:]))


def pose_continued_gap_at_4x() -> float:
    """The largest gap, in %, between RoPE continued with PoSE and the YaRN fine-tune or the control at 4x."""
    pose = seeds(POSE_CONTINUED, X4)
    return max(abs(p) for other in (YARN_TUNED, CONTROL) for p in percent(pose, seeds(other, X4)))


# --- README.md: the text study's paragraphs ---------------------------------------------------------

def test_readme_alibi_flat_while_rope_and_sinusoidal_rise():
    says(README, "ALiBi stays flat to 16x while unscaled RoPE and sinusoidal rise")
    alibi, rope, sinusoidal = (ratio(seeds(c, X16), seeds(c, L)) for c in (ALIBI, ROPE, SINUSOIDAL))
    assert max(alibi) < 1.01 and min(sinusoidal + rope) > 1.15  # flat: 16x within 1% of 1x; rise: over 15%


def test_readme_dynamic_yarn_best_training_free_row_at_8x_and_16x():
    says(README, "at 8x and 16x the best training-free RoPE row is dynamic YaRN")
    assert all(best_training_free(s, n) == DYNAMIC_YARN for n in (X8, X16) for s in SEEDS)


def test_readme_yarn_finetune_within_0_4_percent_of_control_pi_behind_at_4x():
    says(README, "at 4x the YaRN fine-tune is within 0.4% of the unscaled control and PI behind it")
    yarn, control, pi = seeds(YARN_TUNED, X4), seeds(CONTROL, X4), seeds(PI_TUNED, X4)
    assert f"{max(abs(p) for p in percent(yarn, control)):.1f}" == "0.4"
    assert below_in_every_seed(control, pi) and below_in_every_seed(yarn, pi)


def test_readme_probes_find_no_model_using_distant_context():
    says(README, "But the probes find no model that uses more than a few dozen tokens back")
    assert max(statistics.fmean(g) for g in copy_gains(inside=False).values()) < 0.01
    assert all(r["value"] in (0.0, None) for r in PROBES if r["probe"] == "passkey")


def test_readme_kerple_below_rope_at_L_and_below_alibi_at_every_length():
    says(README, "KERPLE is below RoPE at L and below ALiBi at every length")
    assert below_at(KERPLE, ROPE, [L]) and below_at(KERPLE, ALIBI, [L, *PAST_L])


def test_readme_fire_beats_unscaled_rope_at_16x():
    says(README, "FIRE beats unscaled RoPE at 16x")
    assert below_in_every_seed(seeds(FIRE, X16), seeds(ROPE, X16))


def test_readme_bases_1e5_and_1e6_extrapolate_worse_than_1e4():
    says(README, "bases 1e5 and 1e6 extrapolate worse than 1e4 unscaled")
    assert below_at(ROPE, BASE_1E5, PAST_L) and below_at(ROPE, BASE_1E6, PAST_L)


def test_readme_pose_continued_within_1_4_percent_of_512_token_finetunes_at_4x():
    says(README, "RoPE continued with PoSE on 128-token windows is within 1.4% of the 512-token YaRN fine-tune and "
                 "control at 4x (PoSE's claim; its base retrained, up to 1.0% lower)")
    assert f"{pose_continued_gap_at_4x():.1f}" == "1.4"
    assert f"{max(retrained_base_percent()):.1f}" == "1.0"


def test_readme_randomized_positions_flatten_rope_but_cost_30_43_percent_at_L():
    says(README, "randomized positions flatten RoPE's curve past L but cost it 30-43% at L")
    assert max(ratio(seeds(RANDOM_ROPE, X16), seeds(RANDOM_ROPE, L))) < min(ratio(seeds(ROPE, X16), seeds(ROPE, L)))
    assert span(percent(seeds(RANDOM_ROPE, L), seeds(ROPE, L))) == "30-43"


def test_readme_one_seed_is_18_runs():
    says(README, "one seed: 18 runs (8 encodings, 3 RoPE variants, 3 fine-tunes, 4 with training positions)")
    runs = {r["run"] for r in ROWS}
    encodings = {r["position"] for r in ROWS}
    variants = {"rope-half", "rope-base1e5", "rope-base1e6"}
    tuned = {r["run"] for r in ROWS if "fine-tuned" in r["scaling"]} - {"rope-pose-continued"}
    positions = {run for run in runs if "randomized" in run or "pose" in run}
    assert (len(runs), len(encodings), len(variants & runs), len(tuned), len(positions)) == (18, 8, 3, 3, 4)


def test_study_recipe_1_31m_parameters_and_1_64m_tokens():
    says(README, "(`configs/study.yaml`: 1.31M parameters, L = 128, 1.64M tokens)")
    says(STUDY, "(1.31M parameters, L = 128, 400 steps of 32 x 128 tokens = 1.64M tokens; `learned` has 1.2% more "
                "parameters for its table)")

    def study(position: str) -> Config:
        return load_config(Config, ROOT / "configs" / "study.yaml", [f"model.position.type={position}"]).resolve()

    def parameters(position: str) -> int:
        return sum(p.numel() for p in GPT(study(position).model).parameters())

    cfg = study("rope")
    tokens = cfg.train.max_steps * cfg.train.batch_size * cfg.model.max_seq_len
    assert (cfg.model.max_seq_len, cfg.train.max_steps, cfg.train.batch_size) == (L, 400, 32)
    assert (f"{parameters('rope') / 1e6:.2f}", f"{tokens / 1e6:.2f}") == ("1.31", "1.64")
    assert f"{100 * (parameters('learned') / parameters('rope') - 1):.1f}" == "1.2"


# --- reports/extrapolation/README.md: at the training length ----------------------------------------

def training_table(name: str, first_column: str) -> list[dict]:
    """The rows of the table in reports/extrapolation/`name` whose first header cell is `first_column`."""
    rows, header = [], None
    for line in (REPORT / name).read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")] if line.startswith("|") else None
        if cells is None:
            header = None
        elif header is None:
            header = cells
        elif header[0] == first_column and not set(line) <= set("|-: "):
            rows.append(dict(zip(header, cells)))
    return rows


def val_ppl(name: str) -> dict[tuple, float]:
    """{(run, seed): validation perplexity at the end of training} from a training summary."""
    return {(r["run"], int(r["seed"])): float(r["val ppl"]) for r in training_table(name, "run") if "seed" in r}


def val_loss(name: str) -> dict[tuple, float]:
    return {(r["run"], int(r["seed"])): float(r["val loss"]) for r in training_table(name, "run") if "seed" in r}


def gap_to_rope(name: str) -> dict[tuple, tuple[float, float]]:
    """{(run, step): (mean, sd) of the validation-loss gap to RoPE} from a training summary."""
    out = {}
    for r in training_table(name, "run"):
        for column, cell in r.items():
            found = re.search(r"\(([+-][\d.]+) ± ([\d.]+)\)", cell)
            if column.startswith("step") and found:
                out[(r["run"], int(column.split()[1]))] = float(found[1]), float(found[2])
    return out


def retrained_base_percent() -> list[float]:
    """How much lower in perplexity the retrained RoPE runs (training-positions.md) are than the committed
    ones the PI, YaRN and control fine-tunes started from (training.md), seeds 2 and 3."""
    committed, retrained = val_ppl("training.md"), val_ppl("training-positions.md")
    return [100 * (1 - retrained[("rope", s)] / committed[("rope", s)]) for s in (2, 3)]


def test_rope_and_alibi_2_percent_apart_at_L():
    says(STUDY, "RoPE (107.4) and ALiBi (109.6) are 2.0% apart")
    assert (f"{mean(ROPE, L):.1f}", f"{mean(ALIBI, L):.1f}") == ("107.4", "109.6")
    assert f"{100 * (mean(ALIBI, L) / mean(ROPE, L) - 1):.1f}" == "2.0"


def test_learned_and_sinusoidal_15_16_percent_above_rope_and_no_better_than_nope():
    says(STUDY, "Learned (124.5) and sinusoidal (123.5) are 15-16% above RoPE and no better than NoPE (123.8): "
                "learned minus NoPE is +0.9, +0.2, +1.1, and sinusoidal minus NoPE is -2.7, +2.9, -1.0",
         "By step 400 they are 15-16% behind it in perplexity at L and level with NoPE")
    assert [f"{mean(c, L):.1f}" for c in (LEARNED, SINUSOIDAL, NOPE)] == ["124.5", "123.5", "123.8"]
    assert span([100 * (mean(c, L) / mean(ROPE, L) - 1) for c in (LEARNED, SINUSOIDAL)]) == "15-16"
    nope = seeds(NOPE, L)
    assert fmt(minus(seeds(LEARNED, L), nope), sep=", ", sign=True) == "+0.9, +0.2, +1.1"
    assert fmt(minus(seeds(SINUSOIDAL, L), nope), sep=", ", sign=True) == "-2.7, +2.9, -1.0"
    assert not below_in_every_seed(seeds(LEARNED, L), nope) and level(seeds(SINUSOIDAL, L), nope)


def test_validation_gap_to_rope_by_step():
    says(STUDY, "At step 100 every encoding is within 0.03 nats of RoPE: learned +0.022 ± 0.024, sinusoidal "
                "-0.014 ± 0.031, NoPE +0.020 ± 0.030. By step 200 learned, sinusoidal and NoPE are 0.12-0.13 nats "
                "behind; by step 400, 0.18-0.19. ALiBi stays 0.04 behind from step 200 on.",
         "are also within 0.03 nats of RoPE at step 100")
    gap = gap_to_rope("training.md")
    assert max(abs(gap[(run, 100)][0]) for run in ("learned", "sinusoidal", "nope", "alibi")) < 0.03
    quoted = {run: f"{m:+.3f} ± {sd:.3f}" for (run, step), (m, sd) in gap.items() if step == 100}
    assert (quoted["learned"], quoted["sinusoidal"], quoted["nope"]) == ("+0.022 ± 0.024", "-0.014 ± 0.031",
                                                                        "+0.020 ± 0.030")
    absolute = ("learned", "sinusoidal", "nope")
    assert span([gap[(run, 200)][0] for run in absolute], 2) == "0.12-0.13"
    assert span([gap[(run, 400)][0] for run in absolute], 2) == "0.18-0.19"
    assert {f"{gap[('alibi', step)][0]:.2f}" for step in (200, 300, 400)} == {"0.04"}


def test_400_step_gap_of_seed_1_is_0_18_nats():
    says(STUDY, "against 0.18 for the 400-step runs of seed 1")
    loss = val_loss("training.md")
    assert f"{loss[('learned', 1)] - loss[('rope', 1)]:.2f}" == "0.18"


def test_committed_seed1_rope_validation_loss():
    says(STUDY, "ended at the committed seed-1 validation loss (4.662, perplexity 105.9;",
         "in seed 1 it ended at the committed 4.662")
    assert (val_loss("training.md")[("rope", 1)], val_ppl("training.md")[("rope", 1)]) == (4.662, 105.9)


def test_every_cell_scores_32768_tokens():
    says(STUDY, "(32,768 scored tokens per cell)")
    assert {r["tokens"] for r in ROWS if r["ppl"] is not None} == {32_768}


# --- past L -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("c, sentence, quoted, digits", [
    (ALIBI, "ALiBi stays flat: 16x over 1x is 1.007, 1.004, 1.001.", "1.007, 1.004, 1.001", 3),
    (SINUSOIDAL, "Sinusoidal degrades (1.25, 1.22, 1.19) but does not explode as in the paper.", "1.25, 1.22, 1.19", 2),
    (ROPE, "Unscaled RoPE degrades more (1.45, 1.38, 1.41).", "1.45, 1.38, 1.41", 2),
    (NOPE, "NoPE rises 3% (1.035, 1.032, 1.034).", "1.035, 1.032, 1.034", 3),
], ids=["alibi", "sinusoidal", "rope", "nope"])
def test_16x_over_1x(c, sentence, quoted, digits):
    says(STUDY, sentence)
    assert quoted in sentence and fmt(ratio(seeds(c, X16), seeds(c, L)), digits, ", ") == quoted


def test_nope_rises_3_percent_and_rope_exceeds_sinusoidal_rise():
    rise = ratio(seeds(NOPE, X16), seeds(NOPE, L))
    assert {f"{100 * (r - 1):.0f}" for r in rise} == {"3"}
    assert min(ratio(seeds(ROPE, X16), seeds(ROPE, L))) > max(ratio(seeds(SINUSOIDAL, X16), seeds(SINUSOIDAL, L)))


def test_rope_level_with_sinusoidal_at_16x():
    says(STUDY, "At 16x it ends level with sinusoidal: RoPE minus sinusoidal is +4.3, -5.9, +6.1.")
    rope, sinusoidal = seeds(ROPE, X16), seeds(SINUSOIDAL, X16)
    assert fmt(minus(rope, sinusoidal), sep=", ", sign=True) == "+4.3, -5.9, +6.1" and level(rope, sinusoidal)


def bucket_gaps(c: tuple, seed: int | None = None) -> list[float]:
    """The loss by position bucket at 2048 minus NoPE's on the same windows: seed `seed`, or the mean over seeds."""
    run, scaling, rule = c
    key = next(k for k in relative_to_nope(ROWS) if k[0] == run and k[2] == scaling and k[3] == L)
    per_seed = relative_to_nope(ROWS)[key][X16]
    if seed is not None:
        return per_seed[SEEDS.index(seed)]
    return [statistics.fmean(column) for column in zip(*per_seed)]


def test_loss_by_position_against_nope_at_2048():
    says(STUDY, "RoPE's and sinusoidal's loss climbs to +0.31 and +0.24 nats above NoPE in the last bucket. ALiBi "
                "stays 0.12 to 0.17 nats below NoPE in every bucket",
         "(ALiBi, three seeds: 0.12 to 0.17)")
    assert (f"{bucket_gaps(ROPE)[-1]:+.2f}", f"{bucket_gaps(SINUSOIDAL)[-1]:+.2f}") == ("+0.31", "+0.24")
    alibi = [-g for g in bucket_gaps(ALIBI)]
    assert f"{min(alibi):.2f} to {max(alibi):.2f}" == "0.12 to 0.17"


# --- the probes -------------------------------------------------------------------------------------

def copy_gains(inside: bool) -> dict[tuple, list[float]]:
    """{(run, scaling, distance): the copy probe's gain per seed}, at distances inside or past the run's L
    (inside: D = 33 and 64, the distances every run is probed at below its L)."""
    out: dict[tuple, list[float]] = {}
    for r in PROBES:
        if r["probe"] == "copy" and r.get("gain") is not None and (r["distance"] < L) == inside:
            if inside or r["distance"] > r["train_length"]:
                out.setdefault((r["run"], r["scaling"], r["distance"]), []).append(r["gain"])
    return out


def test_copy_probe_gain_inside_and_past_L():
    says(STUDY, "the gain from a first copy of a 32-token span is at most +0.017 nats for any encoding on the mean "
                "over seeds (+0.025 in one seed), inside L (D = 33 and 64). Past L the mean is below +0.01 at every "
                "distance (+0.014 in one seed",
         "against a loss of about 4.7 nats on those tokens")
    inside, past = copy_gains(inside=True), copy_gains(inside=False)
    assert {d for _, _, d in inside} == {33, 64}
    assert f"{max(statistics.fmean(g) for g in inside.values()):+.3f}" == "+0.017"
    assert f"{max(max(g) for g in inside.values()):+.3f}" == "+0.025"
    assert max(statistics.fmean(g) for g in past.values()) < 0.01
    assert f"{max(max(g) for g in past.values()):+.3f}" == "+0.014"
    losses = [r["value"] for r in PROBES if r["probe"] == "copy" and r["value"] is not None
              and r["distance"] > r["train_length"]]
    assert f"{statistics.fmean(losses):.1f}" == "4.7"


def test_passkey_accuracy_zero_for_every_run_length_and_depth():
    says(STUDY, "Passkey accuracy is 0 for every run, length and depth.")
    measured = [r["value"] for r in PROBES if r["probe"] == "passkey" and r["value"] is not None]
    assert measured and set(measured) == {0.0}


def test_the_passkey_heat_map_is_zero_in_every_cell():
    says(STUDY, "0 of 60 trials in every", "cell from 128 to 2,048 tokens, the key's one token never predicted")
    rows = json.loads((ROOT / "reports/extrapolation/passkey/passkey.json").read_text())
    assert {r["seed"] for r in rows} == {1, 2, 3} and {r["keys"] for r in rows} == {"a word"}
    assert {r["length"] for r in rows} == {128, 256, 512, 1024, 2048} and {r["scaling"] for r in rows} == {"none", "yarn"}
    assert {r["hits"] for r in rows} == {0} and {r["key_tokens"] for r in rows} == {0.0}
    assert {r["trials"] for r in rows} == {20}  # 60 a cell over the three seeds


# --- RoPE scalings without training -----------------------------------------------------------------

def test_yarn_and_ntk_below_unscaled_rope_at_16x():
    says(STUDY, "YaRN with s = length/L is below unscaled RoPE at 16x (-13.7, -10.9, -13.8), and so is NTK "
                "(-9.0, -3.1, -6.7).")
    rope = seeds(ROPE, X16)
    assert fmt(minus(seeds(YARN, X16), rope), sep=", ") == "-13.7, -10.9, -13.8"
    assert fmt(minus(seeds(NTK, X16), rope), sep=", ") == "-9.0, -3.1, -6.7"


def test_dynamic_yarn_best_training_free_row_at_8x_and_16x():
    says(STUDY, "At 8x and 16x the best training-free row in every seed is dynamic-yarn run as in generation: 129.4 "
                "at 16x, against 152.0 unscaled (-24.4, -21.5, -21.8) and against yarn with the matched static factor "
                "(-10.7, -10.6, -7.9). At 2x and 4x dynamic NTK is level with it (108.5 and 114.6 against 108.9 "
                "and 114.0).")
    assert all(best_training_free(s, n) == DYNAMIC_YARN for n in (X8, X16) for s in SEEDS)
    dynamic_yarn = seeds(DYNAMIC_YARN, X16)
    assert (f"{mean(DYNAMIC_YARN, X16):.1f}", f"{mean(ROPE, X16):.1f}") == ("129.4", "152.0")
    assert fmt(minus(dynamic_yarn, seeds(ROPE, X16)), sep=", ") == "-24.4, -21.5, -21.8"
    assert fmt(minus(dynamic_yarn, seeds(YARN, X16)), sep=", ") == "-10.7, -10.6, -7.9"
    for n, quoted in ((X2, ("108.5", "108.9")), (X4, ("114.6", "114.0"))):
        assert (f"{mean(DYNAMIC, n):.1f}", f"{mean(DYNAMIC_YARN, n):.1f}") == quoted
        assert level(seeds(DYNAMIC, n), seeds(DYNAMIC_YARN, n))


def test_dynamic_ntk_within_3_1_ppl_of_static_ntk():
    says(STUDY, "Dynamic NTK through the cache differs from static NTK by at most 3.1 ppl at any length and seed.")
    gaps = [abs(d) for n in PAST_L for d in minus(seeds(DYNAMIC, n), seeds(NTK, n))]
    assert f"{max(gaps):.1f}" == "3.1"


def test_fixed_factor_price_at_1x():
    says(STUDY, "At 1x, s = 4 costs +5% for NTK (112.6), +13% for YaRN (121.7) and +59% for PI (170.7).")
    quoted = {"ntk": ("+5", "112.6"), "yarn": ("+13", "121.7"), "linear": ("+59", "170.7")}
    for method, (cost, value) in quoted.items():
        fixed = mean(FIXED[method], L)
        assert (f"{100 * (fixed / mean(ROPE, L) - 1):+.0f}", f"{fixed:.1f}") == (cost, value)


def test_pi_without_finetuning_worse_than_no_scaling_past_L():
    says(STUDY, "PI without fine-tuning is worse than no scaling at every length past L here (146.2 against 109.6 "
                "at 2x).")
    assert below_at(ROPE, PI, PAST_L)
    assert (f"{mean(PI, X2):.1f}", f"{mean(ROPE, X2):.1f}") == ("146.2", "109.6")


# --- the fine-tunes ---------------------------------------------------------------------------------

def test_yarn_finetune_0_1_to_0_4_below_control_pi_behind_at_4x():
    says(STUDY, "YaRN reaches 102.6 at 4x and the unscaled control 102.8 (YaRN minus control: -0.2, -0.4, -0.1). PI "
                "is worse than both (106.9; PI minus control: +2.9, +5.6, +3.7).",
         "At 4x the fine-tunes gain at most 0.4% over the control.")
    yarn, control, pi = seeds(YARN_TUNED, X4), seeds(CONTROL, X4), seeds(PI_TUNED, X4)
    assert [f"{mean(c, X4):.1f}" for c in (YARN_TUNED, CONTROL, PI_TUNED)] == ["102.6", "102.8", "106.9"]
    assert fmt(minus(yarn, control), sep=", ") == "-0.2, -0.4, -0.1"
    assert fmt(minus(pi, control), sep=", ", sign=True) == "+2.9, +5.6, +3.7"
    assert f"{-min(percent(yarn, control)):.1f}" == "0.4" and below_in_every_seed(control, pi)


def test_control_degrades_least_past_512():
    says(STUDY, "Past 512 the control degrades least (112.2 at 2048, against 124.1 for YaRN and 128.0 for PI).")
    assert below_at(CONTROL, YARN_TUNED, (X8, X16)) and below_at(CONTROL, PI_TUNED, (X8, X16))
    assert [f"{mean(c, X16):.1f}" for c in (CONTROL, YARN_TUNED, PI_TUNED)] == ["112.2", "124.1", "128.0"]


def test_extra_steps_lower_loss_at_1x():
    says(STUDY, "The extra 100 steps also lower the loss at 1x (control minus base: -3.5, -3.8, -3.7).")
    assert fmt(minus(seeds(CONTROL, L), seeds(ROPE, L)), sep=", ") == "-3.5, -3.8, -3.7"


# --- more encodings and RoPE's base: seed 1's details -----------------------------------------------

def seed1(c: tuple, length: int) -> float:
    return ppl(c[0], 1, length, *c[1:])


def test_seed1_kerple_below_rope_alibi_and_nope_at_every_length():
    says(STUDY, "101.5 at L, 102.8 at 16x; below RoPE (107.4, 155.6), ALiBi (110.5, 111.3) and NoPE (124.0, 128.3) "
                "at every length. Its loss by position at 2048 is 0.20 to 0.24 nats below NoPE's in every bucket")
    assert fmt([seed1(KERPLE, L), seed1(KERPLE, X16)], sep=", ") == "101.5, 102.8"
    for c, quoted in ((ROPE, "107.4, 155.6"), (ALIBI, "110.5, 111.3"), (NOPE, "124.0, 128.3")):
        assert fmt([seed1(c, L), seed1(c, X16)], sep=", ") == quoted
        assert all(seed1(KERPLE, n) < seed1(c, n) for n in (L, *PAST_L))
    below = [-g for g in bucket_gaps(KERPLE, seed=1)]
    assert f"{min(below):.2f} to {max(below):.2f}" == "0.20 to 0.24"


def test_seed1_t5_level_with_nope_behind_rope():
    says(STUDY, "121.9 at L, 127.5 at 16x, level with NoPE (-1.7% and -0.6%) and 13.5% behind RoPE at L; its loss by "
                "position is NoPE's within 0.02 nats in every bucket")
    assert fmt([seed1(T5, L), seed1(T5, X16)], sep=", ") == "121.9, 127.5"
    assert fmt(percent([seed1(T5, L), seed1(T5, X16)], [seed1(NOPE, L), seed1(NOPE, X16)]), sep=", ") == "-1.7, -0.6"
    assert f"{100 * (seed1(T5, L) / seed1(ROPE, L) - 1):.1f}" == "13.5"
    assert max(abs(g) for g in bucket_gaps(T5, seed=1)) < 0.02


def test_seed1_fire_behind_rope_at_L_ahead_at_16x():
    says(STUDY, "111.4 at L (3.7% behind RoPE), 131.2 at 16x (RoPE 155.6, ALiBi 111.3).")
    assert fmt([seed1(FIRE, L), seed1(FIRE, X16)], sep=", ") == "111.4, 131.2"
    assert f"{100 * (seed1(FIRE, L) / seed1(ROPE, L) - 1):.1f}" == "3.7"


def test_seed1_half_rotation_worse_past_L_unscaled_and_under_every_scaling():
    says(STUDY, "110.6 at L (3% behind full RoPE), then worse past L than full RoPE unscaled (190.6 at 16x against "
                "155.6) and under every scaling (dynamic YaRN 148.5 against 131.2).")
    assert f"{seed1(HALF, L):.1f}" == "110.6" and f"{100 * (seed1(HALF, L) / seed1(ROPE, L) - 1):.0f}" == "3"
    assert all(seed1(c, n) < seed1(on("rope-half", c), n) for c in TRAINING_FREE for n in PAST_L)
    assert fmt([seed1(HALF, X16), seed1(ROPE, X16)], sep=", ") == "190.6, 155.6"
    assert fmt([seed1(on("rope-half", DYNAMIC_YARN), X16), seed1(DYNAMIC_YARN, X16)], sep=", ") == "148.5, 131.2"


def test_seed1_bases_within_1_2_percent_at_L_larger_worse_unscaled_within_3_percent_scaled():
    says(STUDY, "At L the three bases are within 1.2% (107.4, 107.6, 106.4). Unscaled past L a larger base is worse "
                "(16x: 155.6, 174.9, 186.1); under YaRN (141.9, 141.2, 144.3) and dynamic YaRN (131.2, 130.0, 133.7) "
                "they are within 3%.")
    bases = [ROPE, BASE_1E5, BASE_1E6]
    at_L = [seed1(c, L) for c in bases]
    assert fmt(at_L, sep=", ") == "107.4, 107.6, 106.4" and f"{100 * (max(at_L) / min(at_L) - 1):.1f}" == "1.2"
    for n in PAST_L:
        assert seed1(ROPE, n) < seed1(BASE_1E5, n) < seed1(BASE_1E6, n)
    assert fmt([seed1(c, X16) for c in bases], sep=", ") == "155.6, 174.9, 186.1"
    for scaling, quoted in ((YARN, "141.9, 141.2, 144.3"), (DYNAMIC_YARN, "131.2, 130.0, 133.7")):
        scaled = [seed1(on(c[0], scaling), X16) for c in bases]
        assert fmt(scaled, sep=", ") == quoted and max(scaled) / min(scaled) < 1.03


def test_base_pairs_that_never_turn_in_training():
    says(STUDY, "that is pairs 6-15 at base 1e4, 5-15 at 1e5 and 4-15 at 1e6")
    d = 32  # rotary dims per head: d_model 128 / 4 heads
    for base, first in ((1e4, 6), (1e5, 5), (1e6, 4)):
        slow = [i for i in range(d // 2) if 2 * math.pi * base ** (2 * i / d) > L]
        assert slow == list(range(first, d // 2))


def test_kerple_caveat_its_clamp_stops_the_gradient_below_0_01():
    says(STUDY, "Caveat: `Kerple` clamps r1 and r2 at 0.01 in its forward pass (`model/positions.py`), and a clamp "
                "passes no gradient below its bound, so a parameter that falls under 0.01 stops learning")
    kerple = Kerple(ModelConfig(n_heads=2, position=PositionConfig(type="kerple")))
    with torch.no_grad():
        kerple.r1.copy_(torch.tensor([0.005, 0.5]))
        kerple.r2.copy_(torch.tensor([0.005, 0.5]))
    kerple.distance_bias(torch.arange(8)).sum().backward()
    assert kerple.r1.grad[0] == kerple.r2.grad[0] == 0 and kerple.r1.grad[1] != 0 and kerple.r2.grad[1] != 0


# --- more encodings and RoPE's base: every seed -----------------------------------------------------

def test_kerple_below_rope_at_L_below_alibi_everywhere_and_flat():
    says(STUDY, "In every seed, KERPLE is below RoPE at L (by 2.1-5.5%) and below ALiBi at every length, and flat to "
                "16x (it rises 1.3-1.7%, ALiBi 0.1-0.7%)")
    assert below_at(KERPLE, ROPE, [L]) and below_at(KERPLE, ALIBI, [L, *PAST_L])
    assert span([-p for p in percent(seeds(KERPLE, L), seeds(ROPE, L))], 1) == "2.1-5.5"
    assert span(percent(seeds(KERPLE, X16), seeds(KERPLE, L)), 1) == "1.3-1.7"
    assert span(percent(seeds(ALIBI, X16), seeds(ALIBI, L)), 1) == "0.1-0.7"


def test_fire_behind_rope_at_L_ahead_of_unscaled_rope_at_16x_behind_alibi():
    says(STUDY, "FIRE is behind RoPE at L (3.7-5.7%) and ahead of unscaled RoPE at 16x, but behind ALiBi")
    assert span(percent(seeds(FIRE, L), seeds(ROPE, L)), 1) == "3.7-5.7"
    assert below_in_every_seed(seeds(FIRE, X16), seeds(ROPE, X16))
    assert below_at(ALIBI, FIRE, [L, *PAST_L])


def test_t5_below_nope_at_L_level_at_16x():
    says(STUDY, "T5 sits a little below NoPE at L (1.7-4.6% in each seed), level with it at 16x (ahead in seeds 1 "
                "and 3, behind in seed 2)")
    assert span([-p for p in percent(seeds(T5, L), seeds(NOPE, L))], 1) == "1.7-4.6"
    t5, nope = seeds(T5, X16), seeds(NOPE, X16)
    assert [x < y for x, y in zip(t5, nope)] == [True, False, True] and level(t5, nope)


def test_half_rotation_costs_0_7_to_3_0_percent_at_L_and_extrapolates_worse_but_under_pi():
    says(STUDY, "rotating half of each head costs 0.7-3.0% at L and extrapolates worse than the full rotation unscaled "
                "and under every scaling but PI")
    assert span(percent(seeds(HALF, L), seeds(ROPE, L)), 1) == "0.7-3.0"
    for c in TRAINING_FREE:
        assert below_at(c, on("rope-half", c), PAST_L) == (c[1] != "linear"), c


def test_larger_base_not_better():
    says(STUDY, "at L the three bases differ by less than the seed spread, unscaled past L bases 1e5 and 1e6 are worse "
                "than 1e4 in every seed (1e6 is below 1e5 in 5 of the 12 seed-length cells), and at 16x under "
                "dynamic YaRN the three are within 7% with 1e6 last in every seed")
    bases = [ROPE, BASE_1E5, BASE_1E6]
    means = [mean(c, L) for c in bases]
    assert max(means) - min(means) < min(statistics.stdev(seeds(c, L)) for c in bases)
    assert below_at(ROPE, BASE_1E5, PAST_L) and below_at(ROPE, BASE_1E6, PAST_L)
    assert sum(x < y for n in PAST_L for x, y in zip(seeds(BASE_1E6, n), seeds(BASE_1E5, n))) == 5
    scaled = [seeds(on(c[0], DYNAMIC_YARN), X16) for c in bases]
    assert all(max(per_seed) / min(per_seed) < 1.07 and max(per_seed) == per_seed[2] for per_seed in zip(*scaled))


# --- training positions -----------------------------------------------------------------------------

def test_pose_continued_base_retrained_0_3_and_1_0_percent_lower():
    says(STUDY, "its validation loss at step 400 in seeds 2 and 3 is 4.643 / 4.680 against 4.646 / 4.689 for the "
                "committed RoPE runs that the PI, YaRN and control fine-tunes started from, so its base is 0.3% and "
                "1.0% lower in perplexity",
         "Its base is the retrained RoPE run (above), up to 1.0% lower in perplexity")
    committed, retrained = val_loss("training.md"), val_loss("training-positions.md")
    assert fmt([retrained[("rope", s)] for s in (2, 3)], 3) == "4.643 / 4.680"
    assert fmt([committed[("rope", s)] for s in (2, 3)], 3) == "4.646 / 4.689"
    assert fmt(retrained_base_percent(), sep=" and ") == "0.3 and 1.0"


def test_randomized_runs_behind_on_validation_pose_costs_nothing():
    says(STUDY, "At step 400 the randomized RoPE runs are 0.31-0.37 nats behind RoPE on validation",
         "PoSE costs nothing on the way (within 0.01 nats of RoPE at every evaluation, on average over the two seeds)")
    loss = val_loss("training-positions.md")
    assert span([loss[("rope-randomized", s)] - loss[("rope", s)] for s in (2, 3)], 2) == "0.31-0.37"
    gap = gap_to_rope("training-positions.md")
    assert all(abs(m) < 0.01 for (run, _), (m, _) in gap.items() if run == "rope-pose")


def test_pose_continued_within_1_4_percent_of_512_token_finetunes_at_4x():
    says(STUDY, "at 4x, RoPE continued with PoSE on 128-token windows is within 1.4% of the unscaled 512-token "
                "control (102.0 / 101.2 / 105.3 against 102.7 / 100.2 / 105.5: ahead in seeds 1 and 3, behind in "
                "seed 2) and of the YaRN fine-tune (102.5 / 99.8 / 105.4), and ahead of the PI fine-tune in every "
                "seed (105.6 / 105.8 / 109.2).",
         "Past its target it rises faster than the 512-token control (16x: 119.4 / 116.6 / 126.3 against 112.9 / "
         "107.3 / 116.5).")
    assert f"{pose_continued_gap_at_4x():.1f}" == "1.4"
    pose, control = seeds(POSE_CONTINUED, X4), seeds(CONTROL, X4)
    assert (fmt(pose), fmt(control), fmt(seeds(YARN_TUNED, X4)), fmt(seeds(PI_TUNED, X4))) == (
        "102.0 / 101.2 / 105.3", "102.7 / 100.2 / 105.5", "102.5 / 99.8 / 105.4", "105.6 / 105.8 / 109.2")
    assert [x < y for x, y in zip(pose, control)] == [True, False, True]
    assert below_in_every_seed(pose, seeds(PI_TUNED, X4))
    assert (fmt(seeds(POSE_CONTINUED, X16)), fmt(seeds(CONTROL, X16))) == ("119.4 / 116.6 / 126.3",
                                                                         "112.9 / 107.3 / 116.5")
    assert all(p > c for p, c in zip(ratio(seeds(POSE_CONTINUED, X16), pose), ratio(seeds(CONTROL, X16), control)))


def test_pose_from_scratch_flat_to_4x_then_rises():
    says(STUDY, "flat to 4x in every seed (at most 0.8% above its own value at L; RoPE rises 9-13%), at 0.2-2.7% more "
                "perplexity at L than RoPE of the same seed. Past 4x it rises; at 16x it is 8-16% below unscaled RoPE "
                "in every seed but not below RoPE under dynamic YaRN (131.3 / 133.1 / 133.6 against 131.2 / 123.7 / "
                "133.3)")
    pose_at_L = seeds(POSE, L)
    assert f"{max(p for n in (X2, X4) for p in percent(seeds(POSE, n), pose_at_L)):.1f}" == "0.8"
    assert span(percent(seeds(ROPE, X4), seeds(ROPE, L))) == "9-13"
    assert span(percent(pose_at_L, seeds(ROPE, L)), 1) == "0.2-2.7"
    assert all(seeds(POSE, X8)[i] > seeds(POSE, X4)[i] < seeds(POSE, X16)[i] for i in range(len(SEEDS)))
    assert span([-p for p in percent(seeds(POSE, X16), seeds(ROPE, X16))]) == "8-16"
    pose, dynamic_yarn = seeds(POSE, X16), seeds(DYNAMIC_YARN, X16)
    assert (fmt(pose), fmt(dynamic_yarn)) == ("131.3 / 133.1 / 133.6", "131.2 / 123.7 / 133.3")
    assert not below_in_every_seed(pose, dynamic_yarn)


def test_randomized_positions_flatten_rope_cost_at_L():
    says(STUDY, "RoPE becomes nearly flat past L (it rises 1.5-3.2% from L to 16x, against 38-45% without) and ALiBi "
                "rises 4.7-5.8% (0.1-0.7% without), but read with contiguous positions they pay at L: RoPE 30-43% and "
                "ALiBi 21-25% more perplexity than without randomization, in every seed",
         "randomized RoPE is below unscaled RoPE in seeds 2 and 3 (138.6 and 150.7 against 145.1 and 155.1) and above "
         "it in seed 1 (158.3 against 155.6), and above dynamic YaRN in every seed; randomized ALiBi is above ALiBi in "
         "every seed")
    rises = {c: percent(seeds(c, X16), seeds(c, L)) for c in (RANDOM_ROPE, ROPE, RANDOM_ALIBI, ALIBI)}
    assert (span(rises[RANDOM_ROPE], 1), span(rises[ROPE]), span(rises[RANDOM_ALIBI], 1), span(rises[ALIBI], 1)) == (
        "1.5-3.2", "38-45", "4.7-5.8", "0.1-0.7")
    assert span(percent(seeds(RANDOM_ROPE, L), seeds(ROPE, L))) == "30-43"
    assert span(percent(seeds(RANDOM_ALIBI, L), seeds(ALIBI, L))) == "21-25"
    random_rope, rope = seeds(RANDOM_ROPE, X16), seeds(ROPE, X16)
    assert [x < y for x, y in zip(random_rope, rope)] == [False, True, True]
    assert (fmt(random_rope[1:], sep=" and "), fmt(rope[1:], sep=" and ")) == ("138.6 and 150.7", "145.1 and 155.1")
    assert (f"{random_rope[0]:.1f}", f"{rope[0]:.1f}") == ("158.3", "155.6")
    assert below_in_every_seed(seeds(DYNAMIC_YARN, X16), random_rope)
    assert below_in_every_seed(seeds(ALIBI, X16), seeds(RANDOM_ALIBI, X16))


# --- the tables -------------------------------------------------------------------------------------

TABLE_CURVES = {  # (run, scaling) as the tables write them -> the curve of results.json
    ("learned", "none"): LEARNED, ("sinusoidal", "none"): SINUSOIDAL, ("rope", "none"): ROPE,
    ("rope (base 1e4)", "none"): ROPE, ("alibi", "none"): ALIBI, ("nope", "none"): NOPE,
    ("rope", "linear (PI), s = length/L"): PI, ("rope", "linear (PI), s = 4"): FIXED["linear"],
    ("rope", "ntk, s = length/L"): NTK, ("rope", "ntk, s = 4"): FIXED["ntk"],
    ("rope", "dynamic (NTK), through the cache"): DYNAMIC,
    ("rope", "yarn, s = length/L"): YARN, ("rope", "yarn, s = 4"): FIXED["yarn"],
    ("rope", "dynamic-yarn, through the cache"): DYNAMIC_YARN,
    ("rope + PI, fine-tuned at 512", "linear x4"): PI_TUNED, ("rope + YaRN, fine-tuned at 512", "yarn x4"): YARN_TUNED,
    ("rope continued at 512 (control)", "none"): CONTROL,
    ("t5", "none"): T5, ("kerple", "none"): KERPLE, ("fire", "none"): FIRE,
    ("rope, half of each head rotated", "none"): HALF, ("rope, base 1e5", "none"): BASE_1E5,
    ("rope, base 1e6", "none"): BASE_1E6,
    ("rope, randomized positions (< 2048)", "none"): RANDOM_ROPE,
    ("alibi, randomized positions (< 2048)", "none"): RANDOM_ALIBI,
    ("rope, PoSE to 512", "none"): POSE,
    ("rope continued with PoSE to 512 (128-token windows)", "none"): POSE_CONTINUED,
}
BASES_ROW = ("rope, base 1e4 / 1e5 / 1e6", "dynamic-yarn, through the cache")  # three runs in one row


def column_length(header: str) -> tuple[int, bool] | None:
    """'16x' or '2048 (16x)' -> (2048, False); '16x, per seed' or 'L, per seed' -> (length, True); else None."""
    found = re.fullmatch(r"(?:\d+ \()?(\d+|L)x?\)?(, per seed)?", header)
    if not found:
        return None
    multiple = 1 if found[1] == "L" else int(found[1])
    return L * multiple, bool(found[2])


def perplexity_tables(page: Path) -> list[tuple[str, dict[str, str]]]:
    """(page: run | scaling, {column: cell}) for each row of the page's perplexity tables (columns: lengths)."""
    rows, header = [], None
    for line in page.read_text().splitlines():
        if not line.startswith("|"):
            header = None
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if header is None:
            header = cells
        elif (header[:2] == ["run", "scaling"] and all(column_length(h) for h in header[2:])
              and not set(line) <= set("|-: ")):
            rows.append((f"{page.relative_to(ROOT)}: {cells[0]} | {cells[1]}", dict(zip(header, cells))))
    return rows


TABLE_ROWS = perplexity_tables(ROOT / "README.md") + perplexity_tables(REPORT / "README.md")


def test_the_pages_have_their_tables():
    """The headline table (9 rows), and the report's three tables (16, 10 and 10 rows) are all checked."""
    assert sum(1 for name, _ in TABLE_ROWS if name.startswith("README.md")) == 9
    assert sum(1 for name, _ in TABLE_ROWS if name.startswith("reports")) == 16 + 10 + 10


@pytest.mark.parametrize("name, row", TABLE_ROWS, ids=[name for name, _ in TABLE_ROWS])
def test_table_row(name, row):
    """Every cell of the study's perplexity tables: mean ± sd over seeds, or each seed's value."""
    key = (row["run"], row["scaling"])
    if key == BASES_ROW:
        bases = [on(run, DYNAMIC_YARN) for run in ("rope", "rope-base1e5", "rope-base1e6")]
        assert row["16x"] == fmt([mean(c, X16) for c in bases])
        per_seed = [f"{base}: {fmt(seeds(c, X16))}" for base, c in zip(("1e4", "1e5", "1e6"), bases)]
        assert row["16x, per seed"] == "; ".join(per_seed)
        return
    c = TABLE_CURVES[key]
    for header, cell in list(row.items())[2:]:
        length, per_seed = column_length(header)
        values = seeds(c, length)
        if not cell:
            continue
        if cell == "n/a":
            assert all(v is None for v in values), header
        elif per_seed:
            assert cell == fmt(values), header
        else:
            assert cell == f"{statistics.fmean(values):.1f} ± {statistics.stdev(values):.1f}", header


# --- the task track: reports/tasks/README.md and the README's task section ---------------------------

TASK_REPORT = ROOT / "reports" / "tasks"
TASKS_PAGE = prose(TASK_REPORT / "README.md")
TASK_NAMES = ("copy", "recall", "passkey", "recall1", "passkey1")
INDUCTION = ("copy", "recall", "passkey")
SINGLE_HOP = ("recall1", "passkey1")


def recipe_log(name: str) -> dict[int, dict[str, float]]:
    """{step: {task: validation accuracy}} of one run of the recipe search (recipe-search/NAME.jsonl)."""
    rows = [json.loads(line) for line in (TASK_REPORT / "recipe-search" / f"{name}.jsonl").read_text().splitlines()]
    return {r["step"]: {k.removeprefix("val_acc_"): v for k, v in r.items() if k.startswith("val_acc_")} for r in rows}


def recipe_table() -> dict[int, dict[str, str]]:
    """The rows of the report's recipe-search table, by number: {#: {recipe, log, step, task: cell}}."""
    text = (TASK_REPORT / "README.md").read_text()
    section = text[text.index("### How the recipe was found"):text.index("What each step showed")]
    out = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 9 and cells[0].isdigit():
            out[int(cells[0])] = dict(zip(("recipe", "log", "step", *TASK_NAMES), cells[1:]))
    return out


def final(row: int) -> dict[str, float]:
    """A recipe-search row's accuracies at the step the table quotes."""
    entry = recipe_table()[row]
    return recipe_log(entry["log"])[int(entry["step"].split()[0])]


def never_learned(rows, tasks) -> bool:
    """Below 90% at every logged step of each row, for each task the row trained."""
    logs = [recipe_log(recipe_table()[r]["log"]) for r in rows]
    return all(accuracy.get(t, 0) < 0.9 for log in logs for accuracy in log.values() for t in tasks)


def test_every_cell_of_the_recipe_search_is_its_log():
    table = recipe_table()
    assert sorted(table) == list(range(1, 61))
    for number, entry in table.items():
        logged = final(number)
        for task in TASK_NAMES:
            assert entry[task] == (f"{100 * logged[task]:.0f}" if task in logged else ""), (number, task)


def test_row_14_holds_on_its_tuning_seed_and_not_on_seed_1():
    says(TASKS_PAGE, "**That recipe does not hold on a seed it was not tuned on** (rows 18-19)")
    assert all(v >= 0.9 for v in final(14).values())
    assert any(final(18)[t] < 0.9 for t in INDUCTION) and any(final(19)[t] < 0.9 for t in INDUCTION)


def test_the_committed_recipe_is_three_layers_of_four_heads_recall_three_times_8000_steps():
    says(TASKS_PAGE, "d 64, 3 layers of 4 heads (16 dimensions each, no grouped KV), L = 128, a mix of the five tasks with "
                     "`recall` drawn three times as often as each other (`data.source: tasks:copy,recall*3,passkey,recall1,"
                     "passkey1`), 8,000 steps of 32 sequences, lr 3e-3 with warmup 100 and a cosine decay to 3e-4")
    cfg = load_config(Config, ROOT / "configs" / "tasks.yaml")
    m, t = cfg.model, cfg.train
    assert (m.d_model, m.n_layers, m.n_heads, m.n_kv_heads, m.max_seq_len) == (64, 3, 4, 4, 128)
    assert (t.max_steps, t.decay_steps, t.batch_size, t.lr, t.min_lr, t.warmup_steps) == (8000, None, 32, 3e-3, 3e-4, 100)
    assert cfg.data.source == "tasks:copy,recall*3,passkey,recall1,passkey1"
    extend = load_config(Config, ROOT / "configs" / "extend-4x-tasks.yaml")
    assert extend.data.source == cfg.data.source
    e = extend.model
    assert (e.d_model, e.n_layers, e.n_heads, e.n_kv_heads) == (m.d_model, m.n_layers, m.n_heads, m.n_kv_heads)


def test_uniform_filler_never_taught_an_induction_task():
    says(TASKS_PAGE, "Longer training, a distance curriculum, width, a larger lr, shorter sequences and q/k/v biases did not change that.")
    assert never_learned(range(1, 11), ("copy", "recall"))


def test_structured_filler_one_in_eight_brings_recall_and_passkey_to_100_percent():
    says(TASKS_PAGE, "one in eight lets `recall` and `passkey` reach 100% (row 12)")
    assert round(100 * final(12)["recall"]) == round(100 * final(12)["passkey"]) == 100
    assert final(11)["recall"] < 0.1  # every filler token predicted: the answers drowned


def test_nope_learns_no_induction_task_and_both_single_hop_tasks_in_3000_steps():
    says(TASKS_PAGE, "NoPE learned none of the induction tasks in 2 or 3 layers (rows 13, 16, 17), and both "
                     "single-hop tasks where it ran 3,000 steps (rows 13, 16)")
    assert never_learned((13, 16, 17), INDUCTION)
    assert all(final(r)[t] >= 0.9 for r in (13, 16) for t in SINGLE_HOP)


def test_a_third_layer_slowed_rope():
    says(TASKS_PAGE, "a third layer also slowed RoPE (row 15)")
    two, three = recipe_log("r2-rope")[2000], final(15)
    assert all(three[t] < two[t] for t in INDUCTION)


def test_three_layers_carry_rope_on_seed_1_but_not_two_headed_alibi():
    says(TASKS_PAGE, "(row 20: all five tasks at 90% or more from step 1,500, where two layers failed, row 18)",
         "(row 21: none of the induction tasks by step 2,750)")
    log = recipe_log("x-l3-rope-s1")
    assert min(step for step, acc in log.items() if all(v >= 0.9 for v in acc.values())) == 1500
    assert all(all(v >= 0.9 for v in acc.values()) for step, acc in log.items() if step >= 1500)
    assert never_learned((21,), INDUCTION) and max(recipe_log("x-l3-alibi-s1")) == 2750


def test_four_heads_let_alibi_form_the_induction_circuit_in_three_layers_not_recall1():
    says(TASKS_PAGE, "(row 22: `copy`, `recall` and `passkey` at 95-100% by step 5,000, with a steepest slope of 1/4 "
                     "instead of 1/16), but its `recall1` stays at 52%",
         "learned no induction task by step 3,000 of 5,000 (row 23)")
    alibi = final(22)
    assert [f"{100 * alibi[t]:.0f}" for t in INDUCTION] == ["95", "98", "100"] and f"{100 * alibi['recall1']:.0f}" == "52"
    assert never_learned((23,), INDUCTION)


def test_the_recipe_on_seed_2_carries_rope_not_nope():
    says(TASKS_PAGE, "RoPE learned all five tasks by step 3,000. NoPE, run the whole 5,000 steps, learned both "
                     "single-hop tasks and no induction task (`copy` 24%, `recall` 17%, `passkey` 55%)",
         "`copy` 67%, `passkey` 80%, and `recall1` 30%, the same as seed 1's at that step (row 22)")
    assert all(v >= 0.9 for v in recipe_log("c-l3h4-rope-s2")[3000].values())
    assert never_learned((25,), INDUCTION) and all(final(25)[t] >= 0.9 for t in SINGLE_HOP)
    assert recipe_table()[25]["step"] == "5000"
    assert [f"{100 * final(25)[t]:.0f}" for t in INDUCTION] == ["24", "17", "55"]
    alibi = final(26)
    assert recipe_table()[26]["step"] == "2250 (stopped)"
    assert [f"{100 * alibi[t]:.0f}" for t in ("copy", "passkey", "recall1")] == ["67", "80", "30"]
    assert f"{100 * recipe_log('x-l3h4-alibi-s1')[2250]['recall1']:.0f}" == "30"


def first_learned(log: str, task: str) -> int | None:
    """The first logged step from which the task stays at 90% or more to the end of the log (None: never)."""
    steps = sorted(recipe_log(log).items())
    return next((step for i, (step, _) in enumerate(steps) if all(acc[task] >= 0.9 for _, acc in steps[i:])), None)


def learned_from(log: str) -> int:
    """The first logged step from which every task stays at 90% or more to the end of the log."""
    return max(first_learned(log, task) for task in TASK_NAMES)


def test_twelve_thousand_steps_carry_alibi_on_seed_10_and_not_nope():
    says(TASKS_PAGE, "ALiBi on seed 10 learned all five tasks from step 6,750 on (row 50): its `recall1` sat at 20-42% to "
                     "step 6,000, then reached 83% at 6,500 and 99.5% at 7,000, where the 8,000-step run was at 62% by "
                     "step 7,250",
         "NoPE on seed 7 reached `copy` 77% and `recall` 32% (row 49; 67% and 38% with 8,000 steps), its `recall` "
         "between 28% and 38% over the last 4,000 steps",
         "NoPE learned `copy` and `recall` under no recipe here (rows 13, 16, 17, 23, 25, 42, 45, 49).")
    table = recipe_table()
    assert [table[r]["log"] for r in (49, 50)] == ["l4-12k-nope-s7", "l4-12k-alibi-s10"]
    assert all(table[r]["step"] == "12000" for r in (49, 50))
    alibi, eight = recipe_log("l4-12k-alibi-s10"), recipe_log("l4-alibi-s10")
    assert learned_from("l4-12k-alibi-s10") == 6750
    early = [alibi[s]["recall1"] for s in alibi if s <= 6000]
    assert [pct(min(early)), pct(max(early))] == ["20", "42"]
    assert [pct(alibi[6500]["recall1"]), f"{100 * alibi[7000]['recall1']:.1f}", pct(eight[7250]["recall1"])] == ["83", "99.5", "62"]
    nope = recipe_log("l4-12k-nope-s7")
    assert [pct(final(49)[t]) for t in ("copy", "recall")] == ["77", "32"]
    late = [nope[s]["recall"] for s in nope if s > 8000]
    assert [pct(min(late)), pct(max(late))] == ["28", "38"]
    assert never_learned((13, 16, 17, 23, 25, 42, 45, 49), ("copy", "recall"))


def test_four_layers_and_twelve_thousand_steps_hold_on_seeds_never_used_before():
    says(TASKS_PAGE, "Both learned all five tasks on each of the five seeds: RoPE from step 2,750, 5,500, 2,500, 2,500 and 2,250 "
                     "on, ALiBi from step 10,750, 3,750, 8,750, 6,500 and 4,500.",
         "ALiBi's last task was `recall1` on seeds 11, 13 and 14 (`copy` on 12 and 15), and on 11 and 13 the steps past 8,000 "
         "taught it",
         "seed 11's climbed from 29% at step 5,000 to 59% at 8,000 and 90% at 10,750, seed 13's sat at 44.5% at step 8,000 "
         "and reached 93.5% at 8,750",
         "ALiBi has learned all five tasks under this recipe on six seeds, five of them never used before; RoPE on five "
         "never used before, and on seed 7 with 8,000 steps (row 48)")
    table = recipe_table()
    fresh = {(p, s): n for n, (s, p) in enumerate(((s, p) for s in (11, 12, 13, 14, 15) for p in ("alibi", "rope")), start=51)}
    for (p, s), n in fresh.items():
        assert table[n]["log"] == f"l4-12k-{p}-s{s}" and table[n]["step"] == "12000"
        assert f"seed {s}, {'ALiBi' if p == 'alibi' else 'RoPE'} (never used before)" in table[n]["recipe"]
        assert all(v >= 0.9 for v in final(n).values()), n
    assert [learned_from(f"l4-12k-rope-s{s}") for s in (11, 12, 13, 14, 15)] == [2750, 5500, 2500, 2500, 2250]
    assert [learned_from(f"l4-12k-alibi-s{s}") for s in (11, 12, 13, 14, 15)] == [10750, 3750, 8750, 6500, 4500]
    last = {s: max(TASK_NAMES, key=lambda t: first_learned(f"l4-12k-alibi-s{s}", t)) for s in (11, 12, 13, 14, 15)}
    assert last == {11: "recall1", 12: "copy", 13: "recall1", 14: "recall1", 15: "copy"}
    assert [first_learned(f"l4-12k-alibi-s{s}", "recall1") > 8000 for s in (11, 13, 14)] == [True, True, False]
    s11, s13 = recipe_log("l4-12k-alibi-s11"), recipe_log("l4-12k-alibi-s13")
    assert [pct(s11[step]["recall1"]) for step in (5000, 8000, 10750)] == ["29", "59", "90"]
    assert [f"{100 * s13[step]['recall1']:.1f}" for step in (8000, 8750)] == ["44.5", "93.5"]
    assert all(v >= 0.9 for v in final(50).values()) and "seed 10, ALiBi" in table[50]["recipe"]
    assert all(v >= 0.9 for v in final(48).values()) and "seed 7, RoPE" in table[48]["recipe"]


def test_asked_alike_recall_and_recall1_held_each_other_back_asked_apart_both_learned():
    says(TASKS_PAGE, "ALiBi on seed 1 reached `recall` 98% and `recall1` 52% (row 22), ALiBi on seed 4 `recall1` 94% "
                     "and `recall` 17% (row 28), and RoPE on seed 3 `recall` 26% (row 29)",
         "RoPE on seed 3 from step 2,000 (row 30), ALiBi on seed 4 from step 3,750 (row 31)")
    assert [pct(final(22)[t]) for t in ("recall", "recall1")] == ["98", "52"]
    assert [pct(final(28)[t]) for t in ("recall1", "recall")] == ["94", "17"]
    assert pct(final(29)["recall"]) == "26" and all(final(29)[t] >= 0.9 for t in TASK_NAMES if t != "recall")
    table = recipe_table()
    assert "seed 3" in table[29]["recipe"] and table[30]["recipe"].startswith("as 29,") and table[31]["recipe"].startswith("as 28,")
    assert "alibi" in table[28]["log"] and "alibi" in table[31]["log"] and "rope" in table[30]["log"]
    assert learned_from(table[30]["log"]) == 2000 and learned_from(table[31]["log"]) == 3750
    assert recipe_log("recipe-seed3-rope")[5000]["recall"] < 0.9  # RoPE's seed 3 with recall1 asked by the keys
    assert all(v >= 0.9 for row in (30, 31) for v in final(row).values())


def test_the_task_table_gives_each_task_its_chance():
    from data.tasks import TASKS
    for task, spec in TASKS.items():
        row = next(line for line in (TASK_REPORT / "README.md").read_text().splitlines() if line.startswith(f"| `{task}` |"))
        assert row.rstrip(" |").endswith(f"{100 * spec.chance:.1f}%".replace(".0%", "%")), task


def pct(x: float) -> str:
    return f"{100 * x:.0f}"


def test_nope_learned_no_induction_task_under_any_recipe():
    says(TASKS_PAGE, "NoPE learned no induction task under any recipe tried (rows 13, 16, 17, 23, 25, 42: two or three "
                     "layers, two or four heads, up to 8,000 steps)",
         "of the track's seeds below, seeds 7, 9 and 10 learned `passkey`, and none `copy` or `recall`, so at this scale the track "
         "has nothing to say about NoPE past L on those two")
    assert never_learned((13, 16, 17, 23, 25, 42), INDUCTION)
    assert [learned_at_L("nope", s) & set(INDUCTION) for s in TRACK_SEEDS] == [set(), {"passkey"}, set(), {"passkey"}, {"passkey"}]
    assert all("nope" in recipe_table()[r]["log"] for r in (13, 16, 17, 23, 25, 42))


def test_seed_5_recall_failed_for_both_and_more_steps_at_the_final_lr_left_it():
    says(TASKS_PAGE, "(rows 32-33: RoPE 27%, with `copy` at 70%; ALiBi 24%)", "(rows 34-35: 32% and 26%) while RoPE's "
                     "`copy` reached 91%")
    table = recipe_table()
    assert table[32]["log"] == "recipe-seed5-rope" and table[33]["log"] == "recipe-seed5-alibi"
    assert [pct(final(32)[t]) for t in ("recall", "copy")] == ["27", "70"] and pct(final(33)["recall"]) == "24"
    assert [pct(final(34)["recall"]), pct(final(35)["recall"]), pct(final(34)["copy"])] == ["32", "26", "91"]
    for short, longer in ((32, 34), (33, 35)):  # the continuation starts from the run itself, at the final lr
        log, more = recipe_log(table[short]["log"]), recipe_log(table[longer]["log"])
        assert all(more[step] == acc for step, acc in log.items()) and max(more) == int(table[longer]["step"].split()[0])
        assert all(acc["recall"] < 0.9 for step, acc in more.items())


def test_drawing_recall_three_times_as_often():
    says(TASKS_PAGE, "carried RoPE on seed 5 through all five tasks (row 36), and ALiBi through `recall` (100%), but left "
                     "ALiBi's `copy` at 79% and `recall1` at 22% (row 37)")
    assert all(v >= 0.9 for v in final(36).values())
    assert [pct(final(37)[t]) for t in ("recall", "copy", "recall1")] == ["100", "79", "22"]


def test_8000_steps_carry_alibi_through_all_five():
    says(TASKS_PAGE, "carried ALiBi through all five tasks on seed 5 (from step 7,250 on, row 38) and on seed 6, never used "
                     "before (from step 5,750, row 39)")
    table = recipe_table()
    assert table[38]["recipe"].startswith("as 37, 8,000 steps") and "seed 6, ALiBi" in table[39]["recipe"]
    assert [learned_from(table[r]["log"]) for r in (38, 39)] == [7250, 5750]
    assert all(table[r]["step"] == "8000" and "alibi" in table[r]["log"] for r in (38, 39))



def test_status_of_the_committed_recipe():
    says(TASKS_PAGE, "Of the five RoPE and ALiBi runs of the committed recipe in this search, four learned all five tasks at "
                     "L: ALiBi on "
                     "seeds 5, 6 and 8 and RoPE on seed 6 (rows 38-40, 43; seed 8's `recall` reached 92% only at the last "
                     "step, from 57% at step 7,750). ALiBi on seed 7, never used before, did not: its `recall1` reached "
                     "46% by step 8,000, still rising (row 41)",
         "was `recall1` in rows 31, 38, 39 and 41 (at step 3,750, 7,250 and 5,750, or never) and `recall` in row 43 "
         "(step 8,000)",
         "NoPE on seed 6 learned both single-hop tasks and no induction task (row 42: `copy` 32%, `recall` 16%, "
         "`passkey` 67%)")
    table = recipe_table()
    recipe_rows = [r for r in table if table[r]["log"].startswith("recall3-8k-")]
    assert recipe_rows == [38, 39, 40, 41, 42, 43] and all(table[r]["step"] == "8000" for r in recipe_rows)
    learned = {r: all(v >= 0.9 for v in final(r).values()) for r in recipe_rows if "nope" not in table[r]["log"]}
    assert learned == {38: True, 39: True, 40: True, 41: False, 43: True}
    assert "rope-s6" in table[40]["log"] and "alibi-s7" in table[41]["log"] and "alibi-s8" in table[43]["log"]
    seven = recipe_log(table[41]["log"])
    assert pct(seven[8000]["recall1"]) == "46" and all(v >= 0.9 for t, v in seven[8000].items() if t != "recall1")
    last = [seven[s]["recall1"] for s in (7250, 7500, 7750, 8000)]
    assert last == sorted(last) and last[0] < last[-1]
    eight = recipe_log(table[43]["log"])
    assert [pct(eight[7750]["recall"]), pct(eight[8000]["recall"])] == ["57", "92"]
    orders = {r: [first_learned(table[r]["log"], t) for t in TASK_NAMES] for r in (31, 38, 39, 41, 43)}
    recall1, recall = TASK_NAMES.index("recall1"), TASK_NAMES.index("recall")
    assert [orders[r][recall1] for r in (31, 38, 39, 41)] == [3750, 7250, 5750, None]
    assert all(orders[r][recall1] == max(orders[r]) for r in (31, 38, 39)) and orders[41][recall1] is None
    assert orders[43][recall] == 8000 == max(orders[43])
    nope = final(42)
    assert "nope-s6" in table[42]["log"] and all(nope[t] >= 0.9 for t in SINGLE_HOP)
    assert [pct(nope[t]) for t in INDUCTION] == ["32", "16", "67"] and never_learned((42,), INDUCTION)


# --- the track's seeds (reports/tasks/results.json.gz, training.json) -----------------------------------

def track_results():
    from eval.tasks import pooled
    rows = previous_rows(TASK_REPORT / "results.json.gz", "eval.tasks", "accuracy")
    return rows, pooled(rows)


TRACK_ROWS, TRACK_POOLED = track_results()
TRACK_SEEDS = (6, 7, 8, 9, 10)
TRAINING = json.loads((TASK_REPORT / "training.json").read_text())
AT_L = {"rope": ("none", L), "alibi": ("none", L), "nope": ("none", L), "t5": ("none", L),
        "rope-pi": ("linear (fine-tuned)", X4), "rope-yarn": ("yarn (fine-tuned)", X4),
        "rope-continued": ("none (fine-tuned)", X4)}
SCALED = {m: f"{m} (s = length/L)" for m in ("linear", "ntk", "yarn")} | {"dynamic": "dynamic (s = T/L, cached)"}


T5_SEEDS = (6, 7, 8)  # T5 is not in the Makefile's default TASK_ENCODINGS (the budget): trained on these seeds


def track_runs(seed: int) -> set[str]:
    """The runs of a seed: RoPE, ALiBi, NoPE and RoPE's fine-tunes, and T5 on T5_SEEDS."""
    return set(AT_L) - ({"t5"} if seed not in T5_SEEDS else set())


def task_acc(run: str, task: str, length: int, label: str = "none", seed: int = 6) -> float:
    """A run's accuracy on a task at a length, pooled over the distance bands (results.md's by-length cell)."""
    return TRACK_POOLED[(run, seed, task, label, length)]


def band_acc(run: str, task: str, label: str = "none", length: int = X16, seed: int = 6) -> list[float]:
    """The accuracy in each distance band at a length, nearest the question first (results.md's by-distance row)."""
    from eval.results import curve_label
    rows = sorted((r for r in TRACK_ROWS if (r["run"], r["seed"], r["task"], r["length"]) == (run, seed, task, length)
                   and curve_label(r) == label), key=lambda r: r["distance_lo"])
    return [r["accuracy"] for r in rows]


def learned_at_L(run: str, seed: int = 6) -> set[str]:
    """The tasks a run learned by eval.tasks' own rule (results.md's †), not a copy of it."""
    from eval.tasks import learned
    return {t for (r, s, t), ok in learned(TRACK_ROWS).items() if (r, s) == (run, seed) and ok}


def test_the_track_is_every_run_of_every_seed_at_every_length_and_band():
    from eval.results import curve_label
    assert {r["seed"] for r in TRACK_ROWS} == set(TRACK_SEEDS)
    for seed in TRACK_SEEDS:
        rows = [r for r in TRACK_ROWS if r["seed"] == seed]
        assert {r["run"] for r in rows} == track_runs(seed)
        assert {curve_label(r) for r in rows if r["run"] == "rope"} == {"none", *SCALED.values()}
        for run, label in [(r, AT_L[r][0]) for r in track_runs(seed)] + [("rope", s) for s in SCALED.values()]:
            for task in TASK_NAMES:
                cells = {(r["length"], r["distance"]) for r in rows
                         if (r["run"], r["task"]) == (run, task) and curve_label(r) == label}
                assert {n for n, _ in cells} == {L, X2, X4, X8, X16}, (run, label, task)
                assert len(cells) == 1 + 2 + 3 + 4 + 5, (run, label, task)  # (0, L], then doubling bands to n
    assert {(r["run"], r["seed"]) for r in TRAINING} == {(run, s) for s in TRACK_SEEDS for run in track_runs(s)
                                                         if AT_L[run][1] == L}  # fine-tunes have no curves


def test_the_table_at_L_is_the_results():
    text = (TASK_REPORT / "README.md").read_text()
    for seed in TRACK_SEEDS:
        for run in sorted(track_runs(seed), key=list(AT_L).index):
            label, n = AT_L[run]
            accuracy = [task_acc(run, t, n, label, seed) for t in TASK_NAMES]
            cells = [pct(a) + (" †" if a < 0.9 else "") for a in accuracy]
            assert f"| {run} | {seed} | " + " | ".join(cells) + " |" in text, (run, seed)


def per_seed(values) -> str:
    """'15% and 7%' for two seeds, '15%, 7% and 9%' for three: the report's way of quoting a value per seed."""
    values = [f"{v}%" for v in values]
    return values[0] if len(values) == 1 else ", ".join(values[:-1]) + " and " + values[-1]


def test_what_each_encoding_learned():
    says(TASKS_PAGE, "RoPE learned all five tasks at L in every seed. ALiBi learned four: all but `recall1` on seeds 6, "
                     f"7 and 9 ({per_seed([pct(task_acc('alibi', 'recall1', L, seed=s)) for s in (6, 7, 9)])}), all but `copy` "
                     f"on seed 8 ({pct(task_acc('alibi', 'copy', L, seed=8))}%, where its validation during training gave "
                     f"{pct(final_validation('alibi', 8)['copy'])}%), all but `recall` on seed 10 "
                     f"({pct(task_acc('alibi', 'recall', L, seed=10))}%; in validation {pct(validation('alibi', 10, 5000)['recall'])}% at "
                     f"step 5,000 and {pct(final_validation('alibi', 10)['recall'])}% at step 8,000, as ALiBi's `recall` on seed 5 before it was "
                     f"drawn three times as often, row 33). NoPE learned the single-hop ones and, on seeds 7, 9 and 10, `passkey`",
         "T5 learned all five on seeds 7 and 8, and all but `copy` and `recall` on seed 6 "
         f"({pct(task_acc('t5', 'copy', L))}% and {pct(task_acc('t5', 'recall', L))}%)")
    assert [set(TASK_NAMES) - learned_at_L("alibi", s) for s in TRACK_SEEDS] == [{"recall1"}, {"recall1"}, {"copy"}, {"recall1"},
                                                                                     {"recall"}]
    for seed in TRACK_SEEDS:
        assert learned_at_L("rope", seed) == set(TASK_NAMES)
    assert [learned_at_L("nope", s) for s in TRACK_SEEDS] == [set(SINGLE_HOP), {*SINGLE_HOP, "passkey"}, set(SINGLE_HOP),
                                                             {*SINGLE_HOP, "passkey"}, {*SINGLE_HOP, "passkey"}]
    assert [learned_at_L("t5", s) for s in T5_SEEDS] == [set(TASK_NAMES) - {"copy", "recall"}, set(TASK_NAMES),
                                                          set(TASK_NAMES)]
    says(TASKS_PAGE, "So over five seeds the recipe meets the track's bar, all five tasks at L, for RoPE alone: ALiBi "
                     "missed one task in every seed, not always the same one, and NoPE `copy` and `recall` in every seed.")
    missed = [set(TASK_NAMES) - learned_at_L("alibi", s) for s in TRACK_SEEDS]
    assert len(TRACK_SEEDS) == 5 and all(len(m) == 1 for m in missed) and len({*map(frozenset, missed)}) > 1
    assert all({"copy", "recall"} <= set(TASK_NAMES) - learned_at_L("nope", s) for s in TRACK_SEEDS)
    assert final(33)["recall"] < 0.9 and "alibi" in recipe_table()[33]["log"]
    says(README, "RoPE learned all five tasks at L in every seed, ALiBi four (not `recall1` on 6, 7 and 9, `copy` on 8, "
                 "`recall` on 10), NoPE the single-hop ones (and `passkey` on 7, 9 and 10), T5 all five on 7 and 8 (of 6-8).")
    assert [s for s in T5_SEEDS if learned_at_L("t5", s) == set(TASK_NAMES)] == [7, 8]


def validation(run: str, seed: int, step: int) -> dict[str, float]:
    """A run's validation accuracy by task at a step (training.json, from metrics.jsonl)."""
    return {r["task"]: r["accuracy"] for r in TRAINING if (r["run"], r["seed"], r["step"]) == (run, seed, step)}


def final_validation(run: str, seed: int) -> dict[str, float]:
    """A run's validation accuracy by task at its last step."""
    return validation(run, seed, max(r["step"] for r in TRAINING if (r["run"], r["seed"]) == (run, seed)))


def test_the_same_seed_learned_differently_in_the_search():
    says(TASKS_PAGE, "ALiBi on seed 6 learned all five tasks in row 39; in the track it left `recall1` at 33% at step "
                     "8,000 (its curve sits at 20-36% from step 250 on)",
         "(step 250: RoPE's `copy` 10% here, 7% in row 40)",
         "with seeds 7 to 10, ALiBi has missed `recall1` in four of the recipe's nine ALiBi runs (rows 41 and the "
         "track's seeds 6, 7 and 9; rows 38, 39 and 43 and the track's seeds 8 and 10 learned it), and some task in six.")
    table = recipe_table()
    assert table[39]["log"] == "recall3-8k-alibi-s6" and all(v >= 0.9 for v in final(39).values())
    curve = {r["step"]: r["accuracy"] for r in TRAINING if (r["run"], r["seed"], r["task"]) == ("alibi", 6, "recall1")}
    assert pct(curve[8000]) == "33" and min(curve) == 250
    assert [pct(min(curve.values())), pct(max(curve.values()))] == ["20", "36"]
    copy_at_250 = next(r["accuracy"] for r in TRAINING if (r["run"], r["seed"], r["task"], r["step"]) == ("rope", 6, "copy", 250))
    assert [pct(copy_at_250), pct(recipe_log("recall3-8k-rope-s6")[250]["copy"])] == ["10", "7"]
    assert table[40]["log"] == "recall3-8k-rope-s6"
    missed = {r: final(r)["recall1"] < 0.9 for r in (38, 39, 41, 43)}
    assert missed == {38: False, 39: False, 41: True, 43: False} and all("alibi" in table[r]["log"] for r in missed)
    assert [("recall1" in learned_at_L("alibi", s)) for s in TRACK_SEEDS] == [False, False, True, False, True]
    missed_any = [r for r in (38, 39, 41, 43) if min(final(r).values()) < 0.9]
    missed_any += [s for s in TRACK_SEEDS if learned_at_L("alibi", s) != set(TASK_NAMES)]
    assert len(missed_any) == 6


def test_rope_fails_past_L_at_trained_distances_too():
    says(TASKS_PAGE, "At 16x L its `copy`, `recall` and `passkey` are at 24% or less in every seed",
         "are copied 100% at L and " + per_seed([pct(band_acc("rope", "copy", length=X4, seed=s)[0]) for s in TRACK_SEEDS])
         + " in a sequence of 4x L (seeds 6 to 10)")
    assert max(task_acc("rope", t, X16, seed=s) for t in INDUCTION for s in TRACK_SEEDS) >= 0.235
    for seed in TRACK_SEEDS:
        assert max(task_acc("rope", t, X16, seed=seed) for t in INDUCTION) < 0.245
        assert pct(band_acc("rope", "copy", length=L, seed=seed)[0]) == "100"
        assert band_acc("rope", "copy", length=X4, seed=seed)[0] < 0.4  # distances up to L only: seen in training


def test_training_free_yarn_carries_rope_to_16x():
    yarn = SCALED["yarn"]
    at_16x = {s: [pct(task_acc("rope", t, X16, yarn, s)) for t in TASK_NAMES] for s in TRACK_SEEDS}
    says(TASKS_PAGE, "63% or more on every task at 2,048 tokens in every seed (seed 6: `copy` 78%, `recall` 85%, "
                     "`passkey` 79%; seed 9: 78%, 63%, 75%; seeds 7, 8 and 10: 96-100%)",
         "Seeds 6-8 had all been at 78% or more; seed 9, never used before, was the one more seed run to check that, and "
         "it did not hold. PI (linear, s = length/L) falls to "
         + per_seed([pct(task_acc("rope", "copy", X2, SCALED["linear"], s)) for s in TRACK_SEEDS])
         + " on `copy` at 2x already, and NTK and dynamic NTK to 20% or less on `copy` at 16x")
    assert at_16x[6][:3] == ["78", "85", "79"] and at_16x[9][:3] == ["78", "63", "75"]
    assert min(int(v) for s in (6, 9) for v in at_16x[s]) == 63
    assert min(int(v) for s in (6, 7, 8) for v in at_16x[s]) == 78
    later = [int(v) for s in (7, 8, 10) for v in at_16x[s]]
    assert [min(later), max(later)] == [96, 100]
    assert max(int(pct(task_acc("rope", "copy", X16, SCALED[m], s))) for m in ("ntk", "dynamic") for s in TRACK_SEEDS) == 20
    assert min(int(v) for s in TRACK_SEEDS if s != 9 for v in at_16x[s]) == 78
    says(README, "At 16x L training-free YaRN keeps RoPE at 63% or more on every task in every seed (78% on all but seed 9), "
                 "where unscaled RoPE falls to 24% or less on `copy`, `recall` and `passkey`; ALiBi keeps `copy` at 64-85%")
    # the unscaled and ALiBi halves are test_rope_fails_past_L_at_trained_distances_too's and test_alibi_reads_back...


def test_alibi_reads_back_farther_than_trained_then_fades():
    says(TASKS_PAGE, "`copy` at 2x L within 3 points of its value at L or above it, at 4x L within 6, 64-85% at 16x in "
                     "every seed, and 8-43% for the facts 1,024-2,048 tokens back")
    at_16x = sorted(int(pct(task_acc("alibi", "copy", X16, seed=s))) for s in TRACK_SEEDS)
    far = sorted(int(pct(band_acc("alibi", "copy", seed=s)[-1])) for s in TRACK_SEEDS)
    assert [at_16x[0], at_16x[-1], far[0], far[-1]] == [64, 85, 8, 43]
    drop = {n: max(task_acc("alibi", "copy", L, seed=s) - task_acc("alibi", "copy", n, seed=s) for s in TRACK_SEEDS)
            for n in (X2, X4)}
    assert drop[X2] <= 0.03 and 0.03 < drop[X4] <= 0.06


def test_the_yarn_fine_tune_works_at_the_one_length_it_was_fine_tuned_at():
    yarn, pi, control = (AT_L[r][0] for r in ("rope-yarn", "rope-pi", "rope-continued"))
    near = {s: {n: band_acc("rope-yarn", "copy", yarn, n, s)[0] for n in (L, X2, X4, X8, X16)} for s in TRACK_SEEDS}
    says(TASKS_PAGE, "It copies the facts within L of the question "
         + per_seed([pct(near[s][X4]) for s in TRACK_SEEDS]) + " in a 512-token sequence (seeds 6 to 10) and 40% "
         "or less in the shorter ones, 128 and 256 tokens, on seeds 6-9 (seed 10: "
         + per_seed([pct(near[10][n]) for n in (L, X2)]) + "). PI's fine-tune did not learn `copy` at 4x L ("
         + per_seed([pct(task_acc("rope-pi", "copy", X4, pi, s)) for s in TRACK_SEEDS]) + "). The control, continued "
         "without a scaling, copies such facts " + per_seed([pct(band_acc("rope-continued", "copy", control, L, s)[0])
                                                              for s in TRACK_SEEDS]) + " at 128 tokens")
    for seed in TRACK_SEEDS:
        assert near[seed][X4] >= 0.985 and (seed == 10 or max(near[seed][L], near[seed][X2]) < 0.405)
        assert "copy" not in learned_at_L("rope-pi", seed)


def anchor_acc(setting: str, run: str, task: str, seed: int) -> float:
    """make task-anchor's accuracy on the facts within L of the question (the first distance band)."""
    rows = previous_rows(TASK_REPORT / "anchor" / setting / "results.json.gz", "eval.tasks", "accuracy")
    return next(r["accuracy"] for r in rows if (r["run"], r["task"], r["seed"], r["distance_lo"]) == (run, task, seed, 0))


def test_a_far_back_anchor():
    def quoted(setting, run, task):
        return per_seed([pct(anchor_acc(setting, run, task, s)) for s in TRACK_SEEDS])
    says(TASKS_PAGE, f"`copy` {quoted('window64', 'rope', 'copy')}, `passkey` {quoted('window64', 'rope', 'passkey')}",
         f"ALiBi under the same hiding keeps `copy` at {quoted('window64', 'alibi', 'copy')}",
         f"`copy` {quoted('window448', 'rope-yarn', 'copy')} on the facts within L, from "
         + per_seed([pct(band_acc("rope-yarn", "copy", AT_L["rope-yarn"][0], X4, s)[0]) for s in TRACK_SEEDS]),
         f"gives {quoted('sinks64', 'rope-yarn', 'copy')}. The control keeps 98% or more under either",
         "half of RoPE's `copy` and `passkey` survive the hiding at L, and most of the YaRN fine-tune's `copy` at 4x L, "
         "where seeds 6-9 keep 19% or less and 42% or less")
    says(README, f"With keys 64 or more back hidden, RoPE's `copy` at L falls to {quoted('window64', 'rope', 'copy')}, "
                 f"ALiBi's to {quoted('window64', 'alibi', 'copy')}")
    for setting, sinks, window in (("window64", 0, 64), ("window448", 0, 448), ("sinks64", 64, 384)):
        rows = previous_rows(TASK_REPORT / "anchor" / setting / "results.json.gz", "eval.tasks", "accuracy")
        assert {(r["context"]["sinks"], r["context"]["window"]) for r in rows} == {(sinks, window)}  # the Makefile's
        assert {r["seed"] for r in rows} == set(TRACK_SEEDS)
    for seed in TRACK_SEEDS:
        hidden = [anchor_acc("window64", "rope", t, seed) for t in ("copy", "passkey")]  # from 100%
        yarn = [anchor_acc(setting, "rope-yarn", "copy", seed) for setting in ("window448", "sinks64")]
        if seed == 10:
            assert 0.45 <= min(hidden) and max(hidden) < 0.55 and min(yarn) > 0.8
        else:
            assert max(hidden) < 0.195 and max(yarn) < 0.425
        assert anchor_acc("window64", "alibi", "copy", seed) > 0.6
        for setting in ("window448", "sinks64"):
            assert anchor_acc(setting, "rope-continued", "copy", seed) >= 0.975


def test_copy_beside_kazemnejad():
    def copy(run, n, label="none"):
        return per_seed([pct(task_acc(run, "copy", n, label, s)) for s in TRACK_SEEDS])
    def t5(n, run="t5"):
        return per_seed([pct(task_acc(run, "copy", n, seed=s)) for s in (7, 8)])
    says(TASKS_PAGE, f"NoPE, their best, did not learn `copy` at L ({copy('nope', L)} on seeds 6 to 10). T5, their second, "
                     f"did on seeds 7 and 8 ({pct(task_acc('t5', 'copy', L))}% on seed 6), and at 2x L, the farthest they "
                     f"tested, it copies {t5(X2)}, at or above ALiBi on the same seeds ({t5(X2, 'alibi')}), as their ranking "
                     f"has it. Past 2x it falls ({t5(X4)} at 4x, {t5(X16)} at 16x), where",
         "ALiBi keeps `copy` to 4x L without a scaling in every seed (within 6 points of L or above it) and RoPE has fallen "
         "by 4x "
         f"({copy('rope', X4)}; {copy('rope', X16)} at 16x)", f"RoPE copies {copy('rope', X16, SCALED['yarn'])} at 16x")
    assert "copy" not in learned_at_L("t5") and all("copy" in learned_at_L("t5", s) for s in (7, 8))
    assert all(task_acc("t5", "copy", X2, seed=s) >= task_acc("alibi", "copy", X2, seed=s) for s in (7, 8))
    assert not any("copy" in learned_at_L("nope", s) for s in TRACK_SEEDS)
    assert all(task_acc("rope", "copy", X4, seed=s) < 0.35 for s in TRACK_SEEDS)  # ALiBi's: test_alibi_reads_back...


# --- training-free context methods on the track (reports/tasks/context) ----------------------------------

CONTEXT_SEEDS = {"self-extend": TRACK_SEEDS} | {m: (6, 7, 8) for m in ("rerope", "leaky-rerope", "dca", "sinks", "logn")}


def context_defaults(method: str) -> dict:
    """A method's settings left at their defaults for the track's L (model/context.py's registry)."""
    from config import ContextConfig
    from model.context import CONTEXT_METHODS, build_context
    built = build_context(ContextConfig(method), L)
    return {key: getattr(built, key) for key in CONTEXT_METHODS[method].keys}


@functools.cache
def context_rows(method: str) -> list[dict]:
    """make task-context's rows of one method: its seeds, at its defaults, on RoPE and ALiBi (and T5 of T5_SEEDS)."""
    rows = previous_rows(TASK_REPORT / "context" / method / "results.json.gz", "eval.tasks", "accuracy")
    assert {r["seed"] for r in rows} == set(CONTEXT_SEEDS[method])
    assert all(r["context"] == {"type": method, **context_defaults(method)} for r in rows)
    assert {(r["run"], r["seed"]) for r in rows} == {(run, s) for s in CONTEXT_SEEDS[method]
                                                     for run in ("rope", "alibi", *(("t5",) if s in T5_SEEDS else ()))}
    return rows


@functools.cache
def context_pooled(method: str) -> dict[tuple, float]:
    from eval.tasks import pooled
    return pooled(context_rows(method))


def context_acc(method: str, run: str, task: str, length: int, seed: int) -> float:
    """A run's accuracy under a context method, pooled over the distance bands."""
    return context_pooled(method)[(run, seed, task, method, length)]


def context_bands(method: str, run: str, task: str, length: int, seed: int) -> list[float]:
    """The accuracy in each distance band under a context method, nearest the question first."""
    rows = (r for r in context_rows(method) if (r["run"], r["seed"], r["task"], r["length"]) == (run, seed, task, length))
    return [r["accuracy"] for r in sorted(rows, key=lambda r: r["distance_lo"])]


def test_context_methods_on_the_track_are_the_makefiles():
    says(TASKS_PAGE, 'make -j2 task-context THREADS=1 SEED_NUMBERS="6 7 8 9 10" CONTEXT_METHODS=self-extend',
         'make -j2 task-context THREADS=1 SEED_NUMBERS="6 7 8" CONTEXT_METHODS="rerope leaky-rerope dca sinks logn"',
         "Self-Extend ran on seeds 6-10, the others on seeds 6-8")
    for method in CONTEXT_SEEDS:
        context_rows(method)
    assert sorted(p.name for p in (TASK_REPORT / "context").iterdir()) == sorted(CONTEXT_SEEDS)


def self_extend(run: str, task: str, length: int, seeds=None) -> list[str]:
    """Self-Extend's pooled accuracy of a run at a length, seed by seed (every track seed, or `seeds`), as the report
    rounds it, in increasing order."""
    return sorted((pct(context_acc("self-extend", run, task, length, s)) for s in seeds or TRACK_SEEDS), key=int)


def test_self_extend_keeps_alibi_to_16x_and_breaks_rope_at_L():
    def span(values):
        return f"{values[0]}-{values[-1]}%"
    learned = {t: [s for s in TRACK_SEEDS if t in learned_at_L("alibi", s)] for t in INDUCTION}
    assert learned["recall"] == [6, 7, 8, 9] and learned["passkey"] == list(TRACK_SEEDS)
    leaned_least = max(TRACK_SEEDS, key=lambda s: min(anchor_acc("window64", "rope", t, s) for t in ("copy", "passkey")))
    assert leaned_least == 10
    says(TASKS_PAGE, f"at 2,048 tokens `copy` {span(self_extend('alibi', 'copy', X16))} in every seed, `recall` "
                     f"{span(self_extend('alibi', 'recall', X16, learned['recall']))} and `passkey` "
                     f"{span(self_extend('alibi', 'passkey', X16))} in every seed that learned them at L (seed 10's ALiBi "
                     f"left `recall` at {pct(task_acc('alibi', 'recall', L, seed=10))}%), where unscaled ALiBi keeps `copy` "
                     "at 64-85%",
         f"`copy` {span(self_extend('rope', 'copy', L, (6, 7, 8, 9)))} and `passkey` "
         f"{span(self_extend('rope', 'passkey', L, (6, 7, 8, 9)))} at 128 tokens (100% without Self-Extend). Seed 10, whose "
         f"RoPE leaned least on the far anchor (previous section), keeps {self_extend('rope', 'copy', L, (10,))[0]}% and "
         f"{self_extend('rope', 'passkey', L, (10,))[0]}% there. Every seed is best at 4x L (`copy` "
         f"{span(self_extend('rope', 'copy', X4))}) and back at {span(self_extend('rope', 'copy', X16))} at 16x")
    assert min(int(v) for t in INDUCTION for v in self_extend("alibi", t, X16, learned[t])) >= 94
    assert max(int(pct(task_acc("alibi", "copy", X16, seed=s))) for s in TRACK_SEEDS) < 94
    assert all(pct(task_acc("rope", t, L, seed=s)) == "100" for t in ("copy", "passkey") for s in TRACK_SEEDS)
    for task in ("copy", "passkey"):
        at = {n: [int(v) for v in self_extend("rope", task, n)] for n in (L, X2, X4, X8, X16)}
        assert min(at[X4]) > max(max(at[n]) for n in (L, X2, X8, X16)) - 10 and max(at[X16]) < 25
        assert max(int(v) for v in self_extend("rope", task, L, (6, 7, 8, 9))) < 25


def test_self_extend_shows_the_first_tokens_near_L_at_4x_and_within_56_at_L():
    from model.context import CONTEXT_METHODS
    says(TASKS_PAGE, "At 512 tokens the grouping shows the sequence's first tokens about 150 back, near L, where the base "
                     "run's anchor sat (previous section); at 128 it shows them within 56.")
    method = CONTEXT_METHODS["self-extend"](group_size=4, window=32)  # the defaults at L = 128
    for n, shown in ((512, 151), (128, 55)):
        assert int(method.distance(torch.tensor([n - 1]), torch.tensor([0]))[0, 0]) == shown


def test_attention_sinks_read_nothing_past_the_window_and_keep_what_is_within_it():
    seeds = CONTEXT_SEEDS["sinks"]
    far = {t: max(a for run in ("rope", "alibi", "t5") for s in seeds for n in (X2, X4, X8, X16)
                  for a in context_bands("sinks", run, t, n, s)[1:]) for t in INDUCTION}
    says(TASKS_PAGE, f"`copy` is at {pct(far['copy'])}% or less, `recall` at {pct(far['recall'])}% or less and `passkey` at "
                     f"{pct(far['passkey'])}% or less, at or near chance (8.6%, 6.2% and 12.9%)")

    def near(run, s):
        return [int(pct(context_bands("sinks", run, "copy", n, s)[0])) for n in (X2, X4, X8, X16)]
    alibi = [v for s in seeds for v in near("alibi", s)]
    rope = [v for s in (7, 8) for v in near("rope", s)]
    says(TASKS_PAGE, f"by ALiBi (`copy` {min(alibi)}-{max(alibi)}% at 2x-16x L) and by RoPE on seeds 7 and 8 "
                     f"({min(rope)}-{max(rope)}%). RoPE on seed 6 keeps {min(near('rope', 6))}-{max(near('rope', 6))}%")
    assert min(alibi + rope) > 85 and max(near("rope", 6)) < 50


def test_log_n_helps_the_biases_read_far_back_and_not_rope():
    seeds = CONTEXT_SEEDS["logn"]

    def at_16x(run, task, with_logn, s=None):
        return [context_acc("logn", run, task, X16, s) if with_logn else task_acc(run, task, X16, seed=s)
                for s in ([s] if s else seeds)]

    def quoted(run, task, with_logn):
        return per_seed([pct(v) for v in at_16x(run, task, with_logn)])
    says(TASKS_PAGE, f"ALiBi's `copy` at 16x L is {quoted('alibi', 'copy', True)} with it, {quoted('alibi', 'copy', False)} "
                     f"without; its `recall` {quoted('alibi', 'recall', True)}, from {quoted('alibi', 'recall', False)}. T5 "
                     f"gains most: at 16x its `copy` is {quoted('t5', 'copy', True)} with it ({quoted('t5', 'copy', False)} "
                     f"without) and its `passkey` {quoted('t5', 'passkey', True)} ({quoted('t5', 'passkey', False)})",
         f"ALiBi's `passkey` at 16x gains on seed 6 ({pct(at_16x('alibi', 'passkey', True, 6)[0])}%, from "
         f"{pct(at_16x('alibi', 'passkey', False, 6)[0])}%) and loses on seeds 7 and 8 "
         f"({per_seed([pct(v) for s in (7, 8) for v in at_16x('alibi', 'passkey', True, s)])}, from "
         f"{per_seed([pct(v) for s in (7, 8) for v in at_16x('alibi', 'passkey', False, s)])})",
         f"`copy` at 16x {quoted('rope', 'copy', True)}, from {quoted('rope', 'copy', False)}")
    for run, task in (("alibi", "copy"), ("alibi", "recall"), ("t5", "copy"), ("t5", "passkey")):
        assert all(x > y for x, y in zip(at_16x(run, task, True), at_16x(run, task, False))), (run, task)
    t5_gain = [x - y for task in ("copy", "passkey") for x, y in zip(at_16x("t5", task, True), at_16x("t5", task, False))]
    alibi_gain = [x - y for task in ("copy", "passkey") for x, y in zip(at_16x("alibi", task, True), at_16x("alibi", task, False))]
    assert min(t5_gain) > max(alibi_gain)  # "T5 gains most"
    gains = [x > y for x, y in zip(at_16x("alibi", "passkey", True), at_16x("alibi", "passkey", False))]
    assert gains == [True, False, False]
    assert max(at_16x("rope", "copy", True)) < 0.1


def test_rerope_makes_distance_stop_mattering():
    seeds = CONTEXT_SEEDS["rerope"]

    def bands(run, task, s):
        return [a for n in (L, X2, X4, X8, X16) for a in context_bands("rerope", run, task, n, s)]
    copy_at_L = [context_acc("rerope", "rope", "copy", L, s) for s in seeds]
    recall7 = context_bands("rerope", "rope", "recall", X16, 7)
    says(TASKS_PAGE, f"`copy` falls at L to {per_seed([pct(v) for v in copy_at_L])} (100% without) and stays at "
                     f"{pct(max(a for s in seeds for a in bands('rope', 'copy', s)))}% or less in every distance band to 16x",
         f"seed 7 keeps `recall` at {pct(min(bands('rope', 'recall', 7)))}-{pct(max(bands('rope', 'recall', 7)))}% in every "
         f"band, {pct(recall7[-1])}% for the facts 1,024-2,048 back ({pct(band_acc('rope', 'recall', seed=7)[-1])}% unscaled)")
    assert all(task_acc("rope", "copy", L, seed=s) == 1 for s in seeds)
    alibi = {n: [pct(context_acc("rerope", "alibi", "copy", n, s)) for s in seeds] for n in (L, X16)}
    says(TASKS_PAGE, f"`copy` at L {per_seed(alibi[L])} ({per_seed([pct(task_acc('alibi', 'copy', L, seed=s)) for s in seeds])} "
                     f"without), {per_seed(alibi[X16])} at 16x")
    t5 = [max(abs(context_acc("rerope", "t5", t, n, s) - task_acc("t5", t, n, seed=s)) for t in TASK_NAMES
              for n in (L, X2, X4, X8, X16)) for s in T5_SEEDS]
    within = per_seed([math.ceil(round(100 * d, 6)) for d in t5]).replace("%", "")  # an upper bound: 12.5 is "13"
    says(TASKS_PAGE, f"T5 is within {within} points of its plain rows** "
                     "(seeds 6, 7 and 8) on every task at every length")


def test_dca_lifts_ropes_recall_with_length():
    seeds = CONTEXT_SEEDS["dca"]

    def quoted(run, task, n, acc=None):
        return per_seed([pct((acc or (lambda s: context_acc("dca", run, task, n, s)))(s)) for s in seeds])
    says(TASKS_PAGE, f"`recall` rises with length**: {quoted('rope', 'recall', L)} at L (where 128 tokens already span two "
                     f"chunks), {quoted('rope', 'recall', X16)} at 16x ({quoted('rope', 'recall', X16, lambda s: task_acc('rope', 'recall', X16, seed=s))} "
                     f"unscaled; training-free YaRN "
                     f"{quoted('rope', 'recall', X16, lambda s: task_acc('rope', 'recall', X16, SCALED['yarn'], s))}), and "
                     f"{min(int(pct(context_bands('dca', 'rope', 'recall', X16, s)[-1])) for s in seeds)}% or more for the facts "
                     "1,024-2,048 back. `copy` and `passkey` stay at 32% or less at every length",
         f"`copy` at L {quoted('alibi', 'copy', L)}, {quoted('alibi', 'copy', X16)} at 16x "
         f"({quoted('alibi', 'copy', X16, lambda s: task_acc('alibi', 'copy', X16, seed=s))} unscaled)")
    for s in seeds:
        rise = [context_acc("dca", "rope", "recall", n, s) for n in (L, X2, X4, X8, X16)]
        assert rise[-1] > rise[0] or rise[0] > 0.95
    assert max(int(pct(context_acc("dca", "rope", t, n, s))) for t in ("copy", "passkey") for n in (L, X2, X4, X8, X16)
               for s in seeds) == 32


def test_leaky_rerope_keeps_alibi_flat_and_shows_rope_its_far_anchor():
    from model.context import CONTEXT_METHODS
    seeds = CONTEXT_SEEDS["leaky-rerope"]

    def quoted(run, task, n, plain=False):
        return per_seed([pct(task_acc(run, task, n, seed=s) if plain else context_acc("leaky-rerope", run, task, n, s))
                         for s in seeds])
    says(TASKS_PAGE, "ALiBi's retrieval stays within 7 points of its level at L to 16x",
         f"at 2,048 tokens `recall` {quoted('alibi', 'recall', X16)} and `passkey` {quoted('alibi', 'passkey', X16)} "
                     f"({quoted('alibi', 'recall', X16, True)}, and {quoted('alibi', 'passkey', X16, True)} unscaled), `copy` "
                     f"{quoted('alibi', 'copy', X16)} ({quoted('alibi', 'copy', X16, True)}). It costs `copy` at L: "
                     f"{quoted('alibi', 'copy', L)}, from {quoted('alibi', 'copy', L, True)}")
    for s in seeds:
        for t in ("copy", "recall", "passkey"):
            assert context_acc("leaky-rerope", "alibi", t, X16, s) >= task_acc("alibi", t, X16, seed=s)
            at_L = context_acc("leaky-rerope", "alibi", t, L, s)
            assert all(abs(context_acc("leaky-rerope", "alibi", t, n, s) - at_L) <= 0.07 for n in (X2, X4, X8, X16))
    far, near = ([pct(context_bands("leaky-rerope", "rope", "copy", X16, s)[i]) for s in seeds] for i in (-1, 0))
    says(TASKS_PAGE, f"at 16x its `copy` of the facts 1,024-2,048 back is {per_seed(far)}, and of those within L "
                     f"{per_seed(near)}; at L, where every fact is shown within 23, {quoted('rope', 'copy', L)}")
    assert all(int(f) > 90 and int(n) < 65 for f, n in zip(far, near))
    method = CONTEXT_METHODS["leaky-rerope"](window=16, k=16.0)  # the defaults at L = 128
    shown = [float(method.distance(torch.tensor([X16 - 1]), torch.tensor([X16 - 1 - d]))[0, 0]) for d in (127, 1024, 2047)]
    assert [round(v) for v in shown] == [23, 79, 143]


def test_the_readme_sums_up_the_context_methods():
    says(README, "Self-Extend keeps ALiBi's retrieval to 16x L (Leaky ReRoPE its `recall` and `passkey`); DCA lifts RoPE's "
                 "`recall`; sinks read nothing past their window; log-n helps T5.")
    assert all(context_acc("logn", "t5", t, X16, s) > task_acc("t5", t, X16, seed=s) for s in T5_SEEDS
               for t in ("copy", "passkey"))
    for method, tasks in (("self-extend", INDUCTION), ("leaky-rerope", ("recall", "passkey"))):
        for s in CONTEXT_SEEDS[method]:  # ALiBi at 16x L within 7 points of plain ALiBi at L, where it learned the task
            for t in tasks:
                if t in learned_at_L("alibi", s):
                    assert context_acc(method, "alibi", t, X16, s) >= task_acc("alibi", t, L, seed=s) - 0.07, (method, s, t)
    for s in CONTEXT_SEEDS["dca"]:
        assert context_acc("dca", "rope", "recall", X16, s) > 0.8 > task_acc("rope", "recall", X16, seed=s)
    far = [a for s in CONTEXT_SEEDS["sinks"] for run in ("rope", "alibi") for t in INDUCTION
           for n in (X2, X4, X8, X16) for a in context_bands("sinks", run, t, n, s)[1:]]
    assert max(far) <= 0.12


# --- training-free context methods in the text study (reports/extrapolation/context) ---------------------

TEXT_LENGTHS = (L, X2, X4, X8, X16)
TEXT_METHODS = ("self-extend", "rerope", "leaky-rerope", "dca", "sinks", "logn")
CONTEXT_RUNS = ("rope", "alibi", "t5")


@functools.cache
def text_context() -> dict[tuple, float]:
    """{(method, run, seed, length): ppl} from make study-context's rows: `none` and each method at its defaults,
    on RoPE, ALiBi and T5 of seeds 1-3, every length, no scaling."""
    cells = {}
    for method in ("none", *TEXT_METHODS):
        rows = read_results(REPORT / "context" / method / "results.json")
        for r in rows:
            assert r["scaling"] == ("none" if method == "none" else method) and r["factor_rule"] is None
            assert r["tokens"] == 32_768
            if method != "none":
                assert r["context"] == {"type": method, **context_defaults(method)}
            cells[(method, r["run"], r["seed"], r["length"])] = r["ppl"]
        assert {k[1:] for k in cells if k[0] == method} == {(run, s, n) for run in CONTEXT_RUNS for s in SEEDS
                                                            for n in TEXT_LENGTHS}
    return cells


def to_none(method: str, run: str, length: int) -> list[float]:
    """Each seed's perplexity under the method over its perplexity without one, same checkpoint."""
    cells = text_context()
    return [cells[(method, run, s, length)] / cells[("none", run, s, length)] for s in SEEDS]


def x_span(values: list[float]) -> str:
    return f"{min(values):.2f}-{max(values):.2f}x"


def test_text_context_rows_are_the_makefiles():
    says(STUDY, 'make -j2 study-context THREADS=1 SEED_NUMBERS="1 2 3"',
         "a neighbour window of 32 and groups of 4", "every distance past 16 shown at 16", "growing at 1/16 past 16",
         "chunks of 88 and a local window of 8", "the first 4 tokens and the last 124")
    assert context_defaults("self-extend") == {"group_size": 4, "window": 32}
    assert context_defaults("rerope") == {"window": 16}
    assert context_defaults("dca") == {"chunk_size": 88, "local_window": 8}
    assert context_defaults("sinks") == {"sinks": 4, "window": 124}
    text_context()


def test_text_context_retrained_checkpoints_against_the_committed_rows():
    says(STUDY, "their plain rows agree with results.json within 0.02% for T5, 1.1% for ALiBi, 1.4% for RoPE at L and 4.8% "
         "for RoPE at 16x (seed 1)")
    cells = text_context()
    gap = {run: {(s, n): abs(cells[("none", run, s, n)] / PPL[(run, s, "none", None, n)] - 1) for s in SEEDS
                 for n in TEXT_LENGTHS} for run in CONTEXT_RUNS}
    assert max(gap["t5"].values()) < 0.0002 and max(gap["alibi"].values()) < 0.011
    assert max(gap["rope"][(s, L)] for s in SEEDS) < 0.014
    worst = max(gap["rope"], key=gap["rope"].get)
    assert worst == (1, X16) and f"{gap['rope'][worst]:.1%}" == "4.8%"


def test_text_context_table_at_16x():
    page = (REPORT / "README.md").read_text()
    cells = text_context()
    for method in ("none", *TEXT_METHODS):
        row = [f"{statistics.fmean(cells[(method, run, s, X16)] for s in SEEDS):.2f}"
               + ("" if method == "none" else f" ({x_span(to_none(method, run, X16))})") for run in CONTEXT_RUNS]
        assert f"| {method} | {' | '.join(row)} |" in page, method


def test_text_context_every_method_but_logn_helps_rope_and_sinks_keep_it_flat():
    says(STUDY, "**Every method but log-n lowers RoPE's perplexity past 2x L in every seed**, and at 16x their order is "
         "the same in every seed: the attention sinks, Leaky ReRoPE, ReRoPE, DCA, Self-Extend. With the sinks RoPE's "
         "perplexity at 16x is within 0.5% of its own at L in every seed (+36% to +43% without a method).")
    cells = text_context()
    for method in TEXT_METHODS:
        helps = all(r < 1 for n in (X4, X8, X16) for r in to_none(method, "rope", n))
        assert helps == (method != "logn"), method
    for s in SEEDS:
        at_16x = {m: cells[(m, "rope", s, X16)] for m in TEXT_METHODS if m != "logn"}
        assert sorted(at_16x, key=at_16x.get) == ["sinks", "leaky-rerope", "rerope", "dca", "self-extend"], s
    assert all(abs(cells[("sinks", "rope", s, X16)] / cells[("sinks", "rope", s, L)] - 1) < 0.005 for s in SEEDS)
    rise = [cells[("none", "rope", s, X16)] / cells[("none", "rope", s, L)] - 1 for s in SEEDS]
    assert f"+{min(rise):.0%} to +{max(rise):.0%}" == "+36% to +43%"


def test_text_context_self_extend_flat_to_4x_then_rising_short_of_dynamic_yarn():
    says(STUDY, "within 0.4% of its perplexity at L at 512 tokens, +19% to +24% at 16x in every seed",
         "Relative to no method it does a little less for RoPE at 16x (0.86-0.89x) than dynamic YaRN, the study's best "
         "scaling, does relative to no scaling (0.84-0.86x, on the checkpoints of the tables above); the other four "
         "methods do more.")
    cells = text_context()
    se = {s: [cells[("self-extend", "rope", s, n)] for n in TEXT_LENGTHS] for s in SEEDS}
    assert all(abs(c[2] / c[0] - 1) < 0.004 for c in se.values())
    rise = [c[4] / c[0] - 1 for c in se.values()]
    assert f"+{min(rise):.0%} to +{max(rise):.0%}" == "+19% to +24%"
    assert x_span(to_none("self-extend", "rope", X16)) == "0.86-0.89x"
    dynamic_yarn = [PPL[("rope", s, "dynamic-yarn", "T/L", X16)] / PPL[("rope", s, "none", None, X16)] for s in SEEDS]
    assert x_span(dynamic_yarn) == "0.84-0.86x" and min(to_none("self-extend", "rope", X16)) > max(dynamic_yarn)
    for method in ("rerope", "leaky-rerope", "dca", "sinks"):
        assert max(to_none(method, "rope", X16)) < min(dynamic_yarn), method
    from model.context import CONTEXT_METHODS
    method = CONTEXT_METHODS["self-extend"](**context_defaults("self-extend"))
    shown = [int(method.distance(torch.tensor([n - 1]), torch.tensor([0]))[0, 0]) for n in (X4, X16)]
    assert shown == [151, 535] and shown[0] > L
    says(STUDY, "A key d > 32 back is shown at about d/4 + 24: the first token at 151 at 512 tokens (near L), at 535 at "
                "2,048.")


def test_text_context_methods_that_shorten_distances_cost_alibi():
    says(STUDY, "at 16x ReRoPE leaves it at 1.41-1.60x, DCA at 1.28-1.39x and Leaky ReRoPE at 1.06-1.08x its "
         "perplexity without a method", "Self-Extend and the sinks, which keep the nearest 32 and 124 tokens exact, "
         "leave ALiBi within 1% in every seed.")
    for method, quoted in (("rerope", "1.41-1.60x"), ("dca", "1.28-1.39x"), ("leaky-rerope", "1.06-1.08x")):
        assert x_span(to_none(method, "alibi", X16)) == quoted
    for method in ("self-extend", "sinks"):
        assert all(abs(r - 1) < 0.01 for n in TEXT_LENGTHS for r in to_none(method, "alibi", n)), method


def test_text_context_t5_barely_moves_and_logn_costs_all_three():
    says(STUDY, "Self-Extend, ReRoPE, Leaky ReRoPE and DCA move its perplexity by 0.11% or less at every length in "
         "every seed, and the sinks lower it by at most 2.5% (at 16x).",
         "at 16x RoPE 1.02-1.05x, ALiBi 1.06-1.10x and T5 1.01-1.06x their perplexity without it")
    for method in ("self-extend", "rerope", "leaky-rerope", "dca"):
        assert max(abs(r - 1) for n in TEXT_LENGTHS for r in to_none(method, "t5", n)) <= 0.0011, method
    sinks = {(n, s): r for n in TEXT_LENGTHS for s, r in zip(SEEDS, to_none("sinks", "t5", n))}
    assert max(sinks.values()) <= 1 and f"{1 - min(sinks.values()):.1%}" == "2.5%" and min(sinks, key=sinks.get)[0] == X16
    assert [x_span(to_none("logn", run, X16)) for run in CONTEXT_RUNS] == ["1.02-1.05x", "1.06-1.10x", "1.01-1.06x"]
    assert all(r > 1 for run in CONTEXT_RUNS for r in to_none("logn", run, X16))


def test_readme_context_methods_sentence_of_the_text_study():
    says(README, "attention sinks keep RoPE's perplexity at 16x within 0.5% of L's (reading nothing past their window, "
         "says the task track); ReRoPE and DCA cost ALiBi 1.28-1.60x.")
    cells = text_context()
    assert all(abs(cells[("sinks", "rope", s, X16)] / cells[("sinks", "rope", s, L)] - 1) < 0.005 for s in SEEDS)
    assert x_span(to_none("rerope", "alibi", X16) + to_none("dca", "alibi", X16)) == "1.28-1.60x"
    says(TASKS_PAGE, "**Nothing past the window is read, by any encoding**")


# --- where the heads look: reports/tasks/heads/heads.json (eval.heads) ------------------------------------

def heads() -> dict[tuple[str, int, str], dict]:
    """{(encoding, seed, task): {accuracy, share (layers x heads), top: (layer, head), most: largest share}}."""
    out = {}
    for r in json.loads((TASK_REPORT / "heads" / "heads.json").read_text()):
        share = torch.tensor(r["share"])
        layer, head = divmod(int(share.argmax()), share.shape[1])
        out[(r["run"], r["seed"], r["task"])] = {**r, "top": (layer, head), "most": share.max().item()}
    return out


def test_the_heads_probe_covers_every_recipe_run_of_the_track():
    runs = {(run, seed) for run, seed, _ in heads()}
    assert runs == {(e, s) for e in ("rope", "alibi", "nope") for s in TRACK_SEEDS} | {("t5", s) for s in T5_SEEDS}
    answers = {"copy": 7, "recall": 8, "passkey": 5, "recall1": 8, "passkey1": 1}  # a sequence's
    assert all(r["answers"] == 64 * answers[task] for (_, _, task), r in heads().items())


def test_alibi_misses_recall1_where_no_head_looks_at_the_fact():
    says(TASKS_PAGE, "The largest share any head gives it from the asking token is 2%, 38% and 12% on seeds 6, 7 and 9 "
         "(`recall1` 34%, 76% and 33% on these sequences), against 88% and 77% on seeds 8 and 10, which learned it.")
    h = heads()
    cells = {s: h[("alibi", s, "recall1")] for s in TRACK_SEEDS}
    assert [round(100 * cells[s]["most"]) for s in (6, 7, 9, 8, 10)] == [2, 38, 12, 88, 77]
    assert [round(100 * cells[s]["accuracy"]) for s in (6, 7, 9)] == [34, 76, 33]
    assert [s for s in TRACK_SEEDS if cells[s]["accuracy"] >= 0.9] == [8, 10]


def test_where_alibi_learned_recall1_it_shares_the_flattest_induction_head():
    says(TASKS_PAGE, "head 3 of layer 1 on seed 8 and head 3 of layer 2 on seed 10, the head with ALiBi's flattest slope "
         "(1/256), the one that looks most in `copy` and `passkey` too on those seeds.",
         "RoPE's heads that look most for `recall1` are in layers 0 and 1, heads 0, 2 and 3.")
    from model.positions import alibi_slopes
    assert alibi_slopes(4)[3].item() == 1 / 256 == alibi_slopes(4).min().item()
    h = heads()
    for seed, top in ((8, (1, 3)), (10, (2, 3))):
        assert all(h[("alibi", seed, task)]["top"] == top for task in ("recall1", "copy", "passkey"))
    rope = [h[("rope", s, "recall1")]["top"] for s in TRACK_SEEDS]
    assert {layer for layer, _ in rope} == {0, 1} and {head for _, head in rope} == {0, 2, 3}


def test_nope_forms_no_induction_head_for_recall():
    says(TASKS_PAGE, "its largest share on the value to recall is 11% or 12% in every seed, while for `recall1`, learned "
         "in every seed, a head gives the fact 33-90%.")
    h = heads()
    assert {round(100 * h[("nope", s, "recall")]["most"]) for s in TRACK_SEEDS} == {11, 12}
    recall1 = [h[("nope", s, "recall1")] for s in TRACK_SEEDS]
    assert all(r["accuracy"] >= 0.9 for r in recall1)
    assert (round(100 * min(r["most"] for r in recall1)), round(100 * max(r["most"] for r in recall1))) == (33, 90)


def test_a_fourth_layer_carries_alibi_on_seeds_7_and_9_not_10_and_not_nope():
    says(TASKS_PAGE, "With four layers ALiBi learned all five tasks on seeds 7 and 9, from step 4,000 and 4,500 on "
                     "(rows 44 and 46), where three layers had left `recall1` at 72% and 29% in the track",
         "it learned `recall` and left `recall1` at 67% (row 47)",
         "learned `passkey` (95%) and both single-hop tasks, not `copy` (67%) or `recall` (38%; three layers in the "
         "track: 44% and 26%; row 45)", "ALiBi missed a task on one seed of three, NoPE two tasks on its one seed.")
    table = recipe_table()
    assert [table[r]["log"] for r in (44, 45, 46, 47)] == ["l4-alibi-s7", "l4-nope-s7", "l4-alibi-s9", "l4-alibi-s10"]
    assert [learned_from("l4-alibi-s7"), learned_from("l4-alibi-s9")] == [4000, 4500]
    says(TASKS_PAGE, "RoPE on seed 7 learned all five with it, from step 3,500 on (row 48).")
    assert table[48]["log"] == "l4-rope-s7" and learned_from("l4-rope-s7") == 3500
    assert first_learned("l4-alibi-s10", "recall1") is None
    assert first_learned("l4-nope-s7", "copy") is None and first_learned("l4-nope-s7", "recall") is None
    assert pct(final(47)["recall1"]) == "67" and all(final(47)[t] >= 0.9 for t in TASK_NAMES if t != "recall1")
    assert [pct(final(45)[t]) for t in ("copy", "recall", "passkey")] == ["67", "38", "95"]
    assert all(final(45)[t] >= 0.9 for t in SINGLE_HOP + ("passkey",))
    assert [pct(task_acc("alibi", "recall1", L, seed=seed)) for seed in (7, 9)] == ["72", "29"]
    assert pct(task_acc("alibi", "recall", L, seed=10)) == "31"
    assert [pct(task_acc("nope", t, L, seed=7)) for t in ("copy", "recall")] == ["44", "26"]
