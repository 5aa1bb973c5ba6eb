"""The GPU study's sentences (reports/extrapolation-gpu/README.md), recomputed from its committed rows:
results.json and probes.json (seeds 1-4), the budget runs' and the seeds' training tables, and the
config the budget chose. Each test finds its sentence in the page and recomputes the numbers it quotes
with the rounding it uses; a range "a-b" is the smallest and largest of the four seeds' values, and a
claim said to hold "in every seed" is checked in each."""
import re
import statistics
from pathlib import Path

import pytest

from config import Config, load_config
from render.rows import previous_rows
from render.plots import read_results
from render.summary import budget_step

ROOT = Path(__file__).resolve().parents[1]
REPORT = ROOT / "reports" / "extrapolation-gpu"
PAGE = " ".join((REPORT / "README.md").read_text().split())
README = " ".join((ROOT / "README.md").read_text().split())
ROWS = read_results(REPORT / "results.json")
PROBES = previous_rows(REPORT / "probes.json", "eval.probe", "probe")
CPU_ROWS = read_results(ROOT / "reports" / "extrapolation" / "results.json")
SEEDS = (1, 2, 3, 4)
L, X2, X4, X8, X16 = 256, 512, 1024, 2048, 4096
LENGTHS = (L, X2, X4, X8, X16)
FIXED, PER_LENGTH, DYNAMIC = "fixed", "length/L", "T/L"
PI = ("rope-pi", "linear (fine-tuned)", "fine-tuned")
YARN = ("rope-yarn", "yarn (fine-tuned)", "fine-tuned")
CONTROL = ("rope-continued", "none (fine-tuned)", None)


def says(*fragments: str, page: str = PAGE) -> None:
    for fragment in fragments:
        assert " ".join(fragment.split()) in page, f"the sentence changed or is gone: {fragment!r}"


def ppl(run: str, length: int, seed: int, scaling: str = "none", rule: str | None = None) -> float | None:
    (row,) = [r for r in ROWS if (r["run"], r["scaling"], r["factor_rule"], r["length"], r["seed"])
              == (run, scaling, rule, length, seed)]
    return row["ppl"]


def curve(run: str, seed: int, scaling: str = "none", rule: str | None = None) -> list:
    return [ppl(run, n, seed, scaling, rule) for n in LENGTHS]


def mean_curve(run: str, scaling: str = "none", rule: str | None = None) -> list:
    return [statistics.fmean(ppl(run, n, s, scaling, rule) for s in SEEDS) for n in LENGTHS]


def span(values, pattern: str = "{:.2f}") -> str:
    """The range of per-seed values as the page writes it: "1.85-1.90"."""
    return f"{pattern.format(min(values))}-{pattern.format(max(values))}"


def table(name: str) -> dict[int, dict[str, float]]:
    """{step: {run: validation loss}} from the by-step table of a training.md."""
    text = (REPORT / name).read_text().split("## Validation loss by step")[1].split("##")[0]
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in text.splitlines() if line.startswith("|")]
    steps = [int(c.split()[1]) for c in rows[0][1:]]
    return {step: {row[0]: float(row[i + 1].split()[0]) for row in rows[2:]} for i, step in enumerate(steps)}


BUDGET = table("budget/training.md")


def budget_curve(run: str) -> dict:
    return {"val_loss_by_step": {step: losses[run] for step, losses in BUDGET.items()}}


def throughput(seed: int) -> dict[str, int]:
    text = (REPORT / ("budget" if seed == 0 else f"seed{seed}") / "training.md").read_text()
    return {m[0]: int(m[1].replace(",", "")) for m in
            re.findall(rf"^\| (\S+) \| {max(seed, 1)} \|.*\| ([\d,]+) \|$", text, re.M)}


# --- the token budget -------------------------------------------------------------------------------

def test_both_budget_runs_overfit():
    says("RoPE's validation loss is lowest at step 800 (4.066) and sinusoidal's at step 900 (4.104); at step "
         "3,052 they have risen to 5.234 and 4.796.")
    for run, step, low, last in (("rope", 800, 4.066, 5.234), ("sinusoidal", 900, 4.104, 4.796)):
        losses = budget_curve(run)["val_loss_by_step"]
        assert min(losses, key=losses.get) == step and losses[step] == low and losses[3052] == last


def test_the_budget_is_the_later_first_step_within_1_percent_and_the_config_holds_it():
    says("RoPE is within 1% of its lowest from step 600, sinusoidal from step 700.",
         "**700 steps, 22.9M tokens, about 3.5 epochs**, now `configs/study-gpu.yaml`'s `max_steps`")
    assert budget_step(budget_curve("rope"), 0.01) == 600 and budget_step(budget_curve("sinusoidal"), 0.01) == 700
    assert "budget: 700 steps" in (REPORT / "budget" / "training.md").read_text()
    cfg = load_config(Config, ROOT / "configs" / "study-gpu.yaml")
    tokens = cfg.train.max_steps * cfg.train.batch_size * cfg.model.max_seq_len
    assert cfg.train.max_steps == 700 and f"{tokens / 1e6:.1f}M" == "22.9M"
    assert f"{tokens / 6_612_709:.1f}" == "3.5"  # the corpus's training tokens with this vocabulary (data.prepare)


def test_a_full_schedule_to_700_ends_below_the_budget_run_at_700():
    says("(RoPE 4.013-4.026 in the four seeds, against 4.082)")
    finals = [table(f"seed{s}/training.md")[700]["rope"] for s in SEEDS]
    assert BUDGET[700]["rope"] == 4.082 and span(finals, "{:.3f}") == "4.013-4.026"


# --- perplexity by length ---------------------------------------------------------------------------

def test_every_seed_is_in_the_rows():
    assert {r["seed"] for r in ROWS} == set(SEEDS) and {r["seed"] for r in PROBES} == set(SEEDS)
    says("**Four seeds (1, 2, 3, 4)**")


@pytest.mark.parametrize("run, scaling, rule, label", [
    ("learned", "none", None, "none"), ("sinusoidal", "none", None, "none"), ("rope", "none", None, "none"),
    ("rope", "yarn", PER_LENGTH, "yarn (s = length/L)"), ("rope", "dynamic-yarn", DYNAMIC, "dynamic-yarn (s = T/L)"),
    ("alibi", "none", None, "none"), ("nope", "none", None, "none"), (*PI, PI[1]), (*YARN, YARN[1]), (*CONTROL, CONTROL[1])])
def test_table_row_is_the_mean_and_sd_over_seeds(run, scaling, rule, label):
    line = next(l for l in (REPORT / "README.md").read_text().splitlines() if l.startswith(f"| {run} | {label} |"))
    cells = []
    for n in LENGTHS:
        values = [ppl(run, n, s, scaling, rule) for s in SEEDS]
        cells.append("n/a" if None in values else f"{statistics.fmean(values):.2f} ± {statistics.stdev(values):.2f}")
    assert line.endswith(f"| {' | '.join(cells)} |"), line


def test_alibi_falls_at_every_longer_length_in_every_seed():
    says("its perplexity falls at every longer length in every seed, from 51.65 at 1x to 49.98 at 16x (means)")
    for seed in SEEDS:
        alibi = curve("alibi", seed)
        assert all(a > b for a, b in zip(alibi, alibi[1:])), seed
    mean = mean_curve("alibi")
    assert f"{mean[0]:.2f} {mean[-1]:.2f}" == "51.65 49.98"


def test_sinusoidal_blows_up_where_the_cpu_study_did_not():
    says("Sinusoidal blows up: 1.80-1.90x its 1x perplexity at 2x L and 3.51-4.96x at 16x.",
         "which the CPU study did not show (1.19-1.25x at 16x)")
    s = [curve("sinusoidal", seed) for seed in SEEDS]
    assert span([c[1] / c[0] for c in s]) == "1.80-1.90" and span([c[4] / c[0] for c in s]) == "3.51-4.96"
    cpu = {seed: {r["length"]: r["ppl"] for r in CPU_ROWS if r["run"] == "sinusoidal" and r["seed"] == seed}
           for seed in (1, 2, 3)}
    assert span([c[2048] / c[128] for c in cpu.values()]) == "1.19-1.25"


def test_rope_degrades_more_slowly_than_sinusoidal_at_first():
    says("RoPE degrades more slowly than sinusoidal at first (+20-37% at 2x against +80-90%) and ends at "
         "3.57-4.06x at 16x. It does not stay behind: in seed 4 its 16x ratio passes sinusoidal's (4.06x against "
         "3.51x), and its perplexity there is level with it (208.05 against 209.98).")
    r = [curve("rope", seed) for seed in SEEDS]
    s = [curve("sinusoidal", seed) for seed in SEEDS]
    assert all(a[1] / a[0] < b[1] / b[0] for a, b in zip(r, s))
    assert span([100 * (c[1] / c[0] - 1) for c in r], "{:.0f}") == "20-37"
    assert span([100 * (c[1] / c[0] - 1) for c in s], "{:.0f}") == "80-90"
    assert span([c[4] / c[0] for c in r]) == "3.57-4.06"
    assert [seed for seed, a, b in zip(SEEDS, r, s) if a[4] / a[0] > b[4] / b[0]] == [4]
    assert f"{ppl('rope', X16, 4):.2f} {ppl('sinusoidal', X16, 4):.2f}" == "208.05 209.98"


def test_rope_best_at_L_alibi_0_to_4_percent_behind():
    says("At L, RoPE is best in every seed and ALiBi 0.2-3.8% behind")
    for seed in SEEDS:
        at_l = {run: ppl(run, L, seed) for run in ("learned", "sinusoidal", "rope", "alibi", "nope")}
        assert min(at_l, key=at_l.get) == "rope", seed
    assert span([100 * (ppl("alibi", L, s) / ppl("rope", L, s) - 1) for s in SEEDS], "{:.1f}") == "0.2-3.8"


def test_nope_fails_worst_past_L_where_the_cpu_study_had_it_nearly_flat():
    says("NoPE, nearly flat in the CPU study (+3% at 16x), fails worst past L, but by a margin that varies "
         "five-fold across seeds: 4.98-25.09x its 1x perplexity at 16x.",
         "In seed 2 it is barely worse than sinusoidal (4.98x against 4.96x).")
    ratios = {}
    for seed in SEEDS:
        ratios[seed] = {run: (lambda c: c[4] / c[0])(curve(run, seed)) for run in ("nope", "sinusoidal", "rope", "alibi")}
        assert max(ratios[seed], key=ratios[seed].get) == "nope", seed
    nope = [r["nope"] for r in ratios.values()]
    assert span(nope) == "4.98-25.09" and round(max(nope) / min(nope)) == 5
    assert f"{ratios[2]['nope']:.2f} {ratios[2]['sinusoidal']:.2f}" == "4.98 4.96"
    cpu = [r["ppl"] for r in CPU_ROWS if r["run"] == "nope" and r["length"] == 2048]
    cpu_l = [r["ppl"] for r in CPU_ROWS if r["run"] == "nope" and r["length"] == 128]
    assert all(f"{a / b - 1:.0%}" == "3%" for a, b in zip(cpu, cpu_l))


def test_scalings_at_16x():
    says("At 16x, PI with s = length/L is worse than no scaling at every length past L in every seed (230.06 "
         "against 190.40 at 16x, means).",
         "PI at a fixed s = 4 is within 9% of unscaled RoPE at 16x, below it in seeds 1, 2 and 4 and above it in seed 3 "
         "(0.91-1.05x). Every other scaling is below unscaled RoPE at 16x in every seed.",
         "Dynamic YaRN, run as in generation, is the best in every seed (66.15-71.71, against 72.49-81.02 for "
         "static YaRN at the matched factor). ALiBi at 16x is below every RoPE row in every seed.")
    fixed_pi = {}
    for seed in SEEDS:
        scaled = {(r["scaling"], r["factor_rule"]): r["ppl"] for r in ROWS if r["run"] == "rope"
                  and r["length"] == X16 and r["seed"] == seed and r["scaling"] != "none"}
        unscaled = ppl("rope", X16, seed)
        fixed_pi[seed] = scaled.pop(("linear", FIXED)) / unscaled
        assert {k for k, v in scaled.items() if v >= unscaled} == {("linear", PER_LENGTH)}, seed
        assert all(ppl("rope", n, seed, "linear", PER_LENGTH) > ppl("rope", n, seed) for n in LENGTHS[1:])
        assert min(scaled, key=scaled.get) == ("dynamic-yarn", DYNAMIC), seed
        assert ppl("alibi", X16, seed) < min(r["ppl"] for r in ROWS if r["run"].startswith("rope")
                                               and r["length"] == X16 and r["seed"] == seed)
    assert [seed for seed in SEEDS if fixed_pi[seed] < 1] == [1, 2, 4]
    assert span(fixed_pi.values()) == "0.91-1.05" and max(abs(v - 1) for v in fixed_pi.values()) < 0.09
    assert f"{mean_curve('rope', 'linear', PER_LENGTH)[4]:.2f} {mean_curve('rope')[4]:.2f}" == "230.06 190.40"
    assert span([ppl("rope", X16, s, "dynamic-yarn", DYNAMIC) for s in SEEDS]) == "66.15-71.71"
    assert span([ppl("rope", X16, s, "yarn", PER_LENGTH) for s in SEEDS]) == "72.49-81.02"


def test_pi_finetune_falls_to_its_window_then_fails():
    says("The PI fine-tune's perplexity falls from 49.17 at 1x to 48.16 at 2x and 47.55 at 4x, its window "
         "(means; it falls in every seed).",
         "Past its window it fails: 85.28 at 8x and 166.88 at 16x.")
    for seed in SEEDS:
        pi = curve(PI[0], seed, PI[1], PI[2])
        assert pi[0] > pi[1] > pi[2] < pi[3] < pi[4], seed
    assert " ".join(f"{v:.2f}" for v in mean_curve(*PI)) == "49.17 48.16 47.55 85.28 166.88"


def test_finetunes_within_0_4_percent_at_4x_control_far_ahead_past_it():
    says("At 4x the three fine-tunes are within 0.4% of each other in every seed (means: PI 47.55, YaRN 47.57, "
         "control 47.53), and the lowest is PI in seeds 1 and 4 and the control in seeds 2 and 3.",
         "Past 4x YaRN is ahead of PI in every seed (72.33 against 85.28 at 8x), but the control, trained at 1,024 "
         "tokens without scaling, is far ahead of both (48.97 at 8x, 58.55 at 16x).",
         "The fine-tunes also lower the loss at 1x in every seed (49.17-49.21 against 50.53, means)")
    lowest = {}
    for seed in SEEDS:
        pi, yarn, control = (curve(run, seed, scaling, rule) for run, scaling, rule in (PI, YARN, CONTROL))
        at_4x = {"PI": pi[2], "YaRN": yarn[2], "control": control[2]}
        assert max(at_4x.values()) / min(at_4x.values()) - 1 < 0.004, seed
        lowest[seed] = min(at_4x, key=at_4x.get)
        assert all(yarn[i] < pi[i] and control[i] < yarn[i] for i in (3, 4)), seed
        assert max(pi[0], yarn[0], control[0]) < ppl("rope", L, seed), seed
    assert lowest == {1: "PI", 2: "control", 3: "control", 4: "PI"}
    pi, yarn, control = (mean_curve(*run) for run in (PI, YARN, CONTROL))
    assert f"{pi[2]:.2f} {yarn[2]:.2f} {control[2]:.2f}" == "47.55 47.57 47.53"
    assert f"{yarn[3]:.2f} {pi[3]:.2f} {control[3]:.2f} {control[4]:.2f}" == "72.33 85.28 48.97 58.55"
    assert span([pi[0], yarn[0], control[0]]) == "49.17-49.21" and f"{mean_curve('rope')[0]:.2f}" == "50.53"


def test_what_seed_4_changed():
    says("Every \"in every seed\" above held in it", "dynamic YaRN is the best scaling (70.02 at 16x, inside seeds 1-3's range)",
         "seed 4's RoPE is the weakest of the four at L (51.24 against 49.81-50.64) and degrades fastest (+37% at 2x, "
         "4.06x at 16x, against seeds 1-3's +20-26% and 3.57-3.79x), while its sinusoidal degrades least (3.51x at "
         "16x, against 4.39-4.96x).", "ALiBi is 0.2% behind RoPE at L there (2.2-3.8% in seeds 1-3)")
    first = SEEDS[:3]
    rope, sin = ({seed: curve(run, seed) for seed in SEEDS} for run in ("rope", "sinusoidal"))
    assert f"{rope[4][0]:.2f}" == "51.24" and span([rope[s][0] for s in first]) == "49.81-50.64"
    assert max(SEEDS, key=lambda s: rope[s][1] / rope[s][0]) == 4 and f"{100 * (rope[4][1] / rope[4][0] - 1):.0f}" == "37"
    assert span([100 * (rope[s][1] / rope[s][0] - 1) for s in first], "{:.0f}") == "20-26"
    assert span([rope[s][4] / rope[s][0] for s in first]) == "3.57-3.79" and f"{rope[4][4] / rope[4][0]:.2f}" == "4.06"
    assert min(SEEDS, key=lambda s: sin[s][4] / sin[s][0]) == 4 and f"{sin[4][4] / sin[4][0]:.2f}" == "3.51"
    assert span([sin[s][4] / sin[s][0] for s in first]) == "4.39-4.96"
    assert f"{ppl('rope', X16, 4, 'dynamic-yarn', DYNAMIC):.2f}" == "70.02"
    gap = {s: 100 * (ppl("alibi", L, s) / ppl("rope", L, s) - 1) for s in SEEDS}
    assert f"{gap[4]:.1f}" == "0.2" and span([gap[s] for s in first], "{:.1f}") == "2.2-3.8"


# --- the probes -------------------------------------------------------------------------------------

def test_no_model_copies():
    says("lowers the loss on the second by at most 0.129 nats at any distance",
         "against a loss of 3.9 nats or more on those tokens")
    copies = [r for r in PROBES if r["probe"] == "copy" and r.get("gain") is not None]
    assert {r["seed"] for r in copies} == set(SEEDS)
    assert f"{max(r['gain'] for r in copies):.3f}" == "0.129"
    assert f"{min(r['baseline'] for r in copies):.1f}" == "3.9"


def test_passkey_at_chance():
    says("the true key's mean rank among 32 candidates is 12.4 to 19.7 at every length (chance 16.5); ranked first "
         "in at most 4 of a seed's 24 trials of any cell")
    cells_ = {}
    for r in (r for r in PROBES if r["probe"] == "passkey" and r.get("rank") is not None):
        cell = cells_.setdefault((r["run"], r["scaling"], r["length"], r["seed"]), {"ranks": [], "firsts": 0, "trials": 0})
        cell["ranks"].append(r["rank"])
        cell["firsts"] += round(r["value"] * r["samples"])
        cell["trials"] += r["samples"]
    ranks = [sum(c["ranks"]) / len(c["ranks"]) for c in cells_.values()]
    assert f"{min(ranks):.1f} {max(ranks):.1f}" == "12.4 19.7"
    assert {c["trials"] for c in cells_.values()} == {24} and max(c["firsts"] for c in cells_.values()) == 4


# --- cost -------------------------------------------------------------------------------------------

def test_throughputs_are_the_training_tables():
    says("the two runs side by side at 679,491 and 744,620 tokens/s each",
         "282 s for the five runs from scratch side by side (322,079 to 375,120 tokens/s each)",
         "the five runs from scratch at 272,134 to 299,632 tokens/s each",
         "why each encoding trained 9-20% slower than in seed 1 was not investigated")
    budget = throughput(0)
    assert (budget["rope"], budget["sinusoidal"]) == (679_491, 744_620)
    scratch = ("learned", "sinusoidal", "rope", "alibi", "nope")
    first = [throughput(1)[r] for r in scratch]
    assert (min(first), max(first)) == (322_079, 375_120)
    later = [throughput(s)[r] for s in (2, 3) for r in scratch]
    assert (min(later), max(later)) == (272_134, 299_632)
    says("369 s, the shards built first", "the five runs from scratch at 296,654 to 302,695 tokens/s each, 8-21% "
         "below seed 1's as seeds 2 and 3 were (9-20%)")
    fourth = [throughput(4)[r] for r in scratch]
    assert (min(fourth), max(fourth)) == (296_654, 302_695)
    def slower(seeds):
        return span([100 * (1 - throughput(s)[r] / throughput(1)[r]) for s in seeds for r in scratch], "{:.0f}")
    assert slower((2, 3)) == "9-20" and slower((4,)) == "8-21"


# --- README.md --------------------------------------------------------------------------------------

def test_readme_paragraph():
    says("**On a GPU** ([report](reports/extrapolation-gpu/README.md), seeds 1-4): 26M parameters, L = 256, 22.9M "
         "tokens a run (where validation loss came within 1% of its lowest; the lowest came later). The ALiBi paper's pattern, in every seed: ALiBi falls "
         "at every longer length, while at 16x sinusoidal reaches 3.51-4.96x its 1x perplexity and unscaled RoPE "
         "3.57-4.06x (the two swap places in seed 4). No model copies (a first copy lowers the loss by at most 0.129 "
         "nats).", "a GPU study seed in 282-369 s.", page=README)
    test_both_budget_runs_overfit()  # the lowest came after the budget's step 700
    test_the_budget_is_the_later_first_step_within_1_percent_and_the_config_holds_it()
    test_sinusoidal_blows_up_where_the_cpu_study_did_not()
    test_rope_degrades_more_slowly_than_sinusoidal_at_first()
    test_alibi_falls_at_every_longer_length_in_every_seed()
    test_no_model_copies()
    says("282 s for the five runs from scratch", "358 s and 334 s")


def test_the_encodings_without_a_distance_trail_at_L():
    above = {run: span([100 * (ppl(run, L, s) / ppl("rope", L, s) - 1) for s in SEEDS], "{:.0f}")
             for run in ("sinusoidal", "learned", "nope")}
    says(f"sinusoidal {above['sinusoidal']}%, learned {above['learned']}% and NoPE {above['nope']}% above RoPE in every "
         "seed", "stop at 700 steps, 3.5 epochs of a 6.6M-token corpus, where validation loss turns up soon after "
         "(step 800-900")
    assert min(min(100 * (ppl(r, L, s) / ppl("rope", L, s) - 1) for s in SEEDS) for r in above) > 15
    assert abs(20.05 / 20.07 - 1) < 0.02 and abs(19.73 / 20.07 - 1) < 0.02  # the paper's Table 2 at L = 512
    test_both_budget_runs_overfit()


def test_cpu_report_sentence_on_the_gap_at_L():
    says("there, at L, sinusoidal is 16-17% and learned 18-22% above RoPE, ALiBi 0.2-3.8%.",
         page=" ".join((ROOT / "reports" / "extrapolation" / "README.md").read_text().split()))
    above = {run: [100 * (ppl(run, L, s) / ppl("rope", L, s) - 1) for s in SEEDS] for run in ("sinusoidal", "learned", "alibi")}
    assert span(above["sinusoidal"], "{:.0f}") == "16-17" and span(above["learned"], "{:.0f}") == "18-22"
    assert span(above["alibi"], "{:.1f}") == "0.2-3.8"
