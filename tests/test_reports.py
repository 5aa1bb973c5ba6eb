"""The text study's sentences, recomputed from their committed rows (README.md and reports/extrapolation/README.md).

The measured paragraphs of reports/extrapolation/README.md are rendered by `make reports` from their rows
(render/text_study.py: each comparative sentence written only while its predicate holds), and
tests/test_rendered.py fails on any difference, so they need no test here. What is left: README.md's sentences about
the study, each named after its claim and recomputed with the rounding it uses ("in every seed" means seeds 1-3 each;
"level" means the difference does not have the same sign in every seed), and what the page says that rows alone cannot
check (the recipe's parameter count, Kerple's clamp, Self-Extend's distances, the context rows' settings). Numbers from
runs whose files are not committed (the prose says so where it quotes them) are not tested.
"""
import functools
import statistics
from pathlib import Path

import torch
from conftest import context_defaults, prose, says

from config import Config, ModelConfig, PositionConfig, load_config
from render.rows import previous_rows
from render.plots import read_results
from render.text_study import (ALIBI, BASE_1E5, BASE_1E6, CONTROL, DYNAMIC_YARN, FIRE, KERPLE, PI_TUNED,
                               POSE_CONTINUED, RANDOM_ROPE, ROPE, SINUSOIDAL, TRAINING_FREE, YARN_TUNED,
                               retrained_lower)
from model.gpt import GPT
from model.positions import Kerple

ROOT = Path(__file__).resolve().parents[1]
REPORT = ROOT / "reports" / "extrapolation"
ROWS = read_results(REPORT / "results.json")
PROBES = previous_rows(REPORT / "probes.json", "eval.probe", "probe")
SEEDS = (1, 2, 3)
L, X2, X4, X8, X16 = 128, 256, 512, 1024, 2048
PAST_L = (X2, X4, X8, X16)


README, STUDY = prose(ROOT / "README.md"), prose(REPORT / "README.md")
TASKS_PAGE = prose(ROOT / "reports" / "tasks" / "README.md")


# --- perplexity rows -------------------------------------------------------------------------------

PPL = {(r["run"], r["seed"], r["scaling"], r["factor_rule"], r["length"]): r["ppl"] for r in ROWS}


def ppl(run: str, seed: int, length: int, scaling: str = "none", rule: str | None = None) -> float | None:
    """The perplexity of one row: (run, seed, scaling, factor_rule, length)."""
    return PPL[(run, seed, scaling, rule, length)]


def seeds(c: tuple, length: int) -> list[float]:
    """One curve's perplexity at one length, seed by seed."""
    run, scaling, rule = c
    return [ppl(run, s, length, scaling, rule) for s in SEEDS]


def percent(a: list[float], b: list[float]) -> list[float]:
    """How much a is above b, in %, pairwise."""
    return [100 * (x / y - 1) for x, y in zip(a, b)]


def ratio(a: list[float], b: list[float]) -> list[float]:
    return [x / y for x, y in zip(a, b)]


def span(values: list[float], digits: int = 0) -> str:
    """A range as the prose writes it: '30-43' (the smallest and largest value, rounded)."""
    return f"{min(values):.{digits}f}-{max(values):.{digits}f}"


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


def copy_gains(inside: bool) -> dict[tuple, list[float]]:
    """{(run, scaling, distance): the copy probe's gain per seed}, at distances inside or past the run's L
    (inside: D = 33 and 64, the distances every run is probed at below its L)."""
    out: dict[tuple, list[float]] = {}
    for r in PROBES:
        if r["probe"] == "copy" and r.get("gain") is not None and (r["distance"] < L) == inside:
            if inside or r["distance"] > r["train_length"]:
                out.setdefault((r["run"], r["scaling"], r["distance"]), []).append(r["gain"])
    return out


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
    assert f"{max(retrained_lower(REPORT)):.1f}" == "1.0"


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


# --- reports/extrapolation/README.md: what its rows alone cannot check ------------------------------

def test_every_cell_scores_32768_tokens():
    says(STUDY, "(32,768 scored tokens per cell)")
    assert {r["tokens"] for r in ROWS if r["ppl"] is not None} == {32_768}


def test_kerple_caveat_its_clamp_stops_the_gradient_below_0_01():
    says(STUDY, "Caveat: `Kerple` clamps r1 and r2 at 0.01 in its forward pass (`model/positions.py`), and a clamp "
                "passes no gradient below its bound, so a parameter that falls under 0.01 stops learning")
    kerple = Kerple(ModelConfig(n_heads=2, position=PositionConfig(type="kerple")))
    with torch.no_grad():
        kerple.r1.copy_(torch.tensor([0.005, 0.5]))
        kerple.r2.copy_(torch.tensor([0.005, 0.5]))
    kerple.distance_bias(torch.arange(8)).sum().backward()
    assert kerple.r1.grad[0] == kerple.r2.grad[0] == 0 and kerple.r1.grad[1] != 0 and kerple.r2.grad[1] != 0


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


def test_text_context_rows_are_at_the_methods_defaults():
    """The rows the page renders the methods' settings from were measured at model/context.py's defaults for L."""
    says(STUDY, 'make -j2 study-context THREADS=1 SEED_NUMBERS="1 2 3"')
    text_context()


def test_self_extend_shows_the_first_token_where_the_page_says():
    """The page renders Self-Extend's shown distance from its formula (render/text_study.py); the model agrees."""
    from model.context import CONTEXT_METHODS
    method = CONTEXT_METHODS["self-extend"](**context_defaults("self-extend"))
    shown = [int(method.distance(torch.tensor([n - 1]), torch.tensor([0]))[0, 0]) for n in (X4, X16)]
    says(STUDY, f"the first token at {shown[0]} at 512 tokens (near L), at {shown[1]} at 2,048.")


def test_readme_context_methods_sentence_of_the_text_study():
    says(README, "attention sinks keep RoPE's perplexity at 16x within 0.5% of L's (reading nothing past their window, "
         "says the task track); ReRoPE and DCA cost ALiBi 1.28-1.60x.")
    cells = text_context()
    assert all(abs(cells[("sinks", "rope", s, X16)] / cells[("sinks", "rope", s, L)] - 1) < 0.005 for s in SEEDS)
    assert x_span(to_none("rerope", "alibi", X16) + to_none("dca", "alibi", X16)) == "1.28-1.60x"
    says(TASKS_PAGE, "**Nothing past the window is read, by any encoding**")
