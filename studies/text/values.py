"""The text study's tables and named values, from its rows: results.json, context/METHOD/, probes.json, probes-newer/,
passkey/. A curve is (run, scaling label as eval.results.rows.curve_label writes it); a gap is curve a at n L minus
curve b at m L, paired by seed, with its 95% t interval over the seeds."""
import re
from collections import defaultdict

from config import Config, load_config
from eval.results.rows import curve_label, previous_rows
from studies.report import Study
from studies.stats import mean_interval, paired_interval
from studies.tables import ppl_rows, ppl_table

study = Study(__file__)
FOLDER = study.folder
ROWS = ppl_rows(FOLDER)
METHODS = ("self-extend", "rerope", "leaky-rerope", "dca", "sinks", "logn")
CONTEXT_ROWS = [r for m in ("none", *METHODS)
                for r in previous_rows(FOLDER / "context" / m / "results.json", "eval.extrapolation", "ppl")]
COPYING = 0.1  # nats: a first copy that lowers the loss on the second by this much is being read
FLAT = 1.01  # "within 1%": a ratio of perplexities whose interval lies inside [1 / FLAT, FLAT]

CURVES = {name: (name, "none") for name in ("rope", "alibi", "nope", "sinusoidal", "learned", "t5", "kerple", "fire",
                                           "fox")} | {
    "half": ("rope-half", "none"), "base1e5": ("rope-base1e5", "none"), "base1e6": ("rope-base1e6", "none"),
    "p_rope": ("p-rope", "none"), "rnope_swa": ("rnope-swa", "none"), "drope": ("drope", "none (fine-tuned)"),
    "pi": ("rope", "linear (s = length/L)"), "ntk": ("rope", "ntk (s = length/L)"),
    "yarn": ("rope", "yarn (s = length/L)"), "fixed_pi": ("rope", "linear (s = 4)"),
    "fixed_ntk": ("rope", "ntk (s = 4)"), "fixed_yarn": ("rope", "yarn (s = 4)"),
    "dynamic": ("rope", "dynamic (s = T/L, cached)"), "dyn_yarn": ("rope", "dynamic-yarn (s = T/L, cached)"),
    "base1e5_dyn_yarn": ("rope-base1e5", "dynamic-yarn (s = T/L, cached)"),
    "base1e6_dyn_yarn": ("rope-base1e6", "dynamic-yarn (s = T/L, cached)"),
    "pi_tuned": ("rope-pi", "linear (fine-tuned)"), "yarn_tuned": ("rope-yarn", "yarn (fine-tuned)"),
    "control": ("rope-continued", "none (fine-tuned)"), "pose_continued": ("rope-pose-continued", "none (fine-tuned)"),
    "random_rope": ("rope-randomized", "none"), "random_alibi": ("alibi-randomized", "none"),
    "pose": ("rope-pose", "none")}
TRAINING_FREE = sorted({curve_label(r) for r in ROWS if r["run"] == "rope"})  # the labels of the base RoPE run


def ppl(rows: list[dict], curve: tuple[str, str], multiple: int) -> dict[int, float]:
    """{seed: perplexity} of one curve at `multiple` x L."""
    L = min(r["train_length"] for r in rows)
    return {r["seed"]: r["ppl"] for r in rows if (r["run"], curve_label(r), r["length"]) == (*curve, multiple * L)}


def paired(rows: list[dict], a: tuple, b: tuple, n: int, m: int | None = None) -> tuple[list[float], list[float]]:
    x, y = ppl(rows, a, n), ppl(rows, b, m or n)
    if not x or x.keys() != y.keys():
        raise ValueError(f"{a} at {n}x and {b} at {m or n}x are not measured on the same seeds")
    return [x[s] for s in sorted(x)], [y[s] for s in sorted(x)]


def gap(rows: list[dict], a: tuple, b: tuple, n: int, m: int | None = None) -> tuple[float, float, float]:
    """Curve a at n x L minus curve b at m x L (default n), paired by seed: (mean, low, high)."""
    return paired_interval(*paired(rows, a, b, n, m))


def ratio(rows: list[dict], a: tuple, b: tuple, n: int, m: int | None = None) -> tuple[float, float, float]:
    """Curve a over curve b, seed by seed: the mean ratio and its 95% interval."""
    x, y = paired(rows, a, b, n, m)
    return mean_interval([p / q for p, q in zip(x, y)])


def seed_diffs(rows: list[dict], a: tuple, b: tuple, n: int, m: int | None = None) -> list[float]:
    x, y = paired(rows, a, b, n, m)
    return [p - q for p, q in zip(x, y)]


# The gaps the page names, "a b N": curve a minus curve b at N x L, named a_vs_b_Nx; "a a N": its rise from 1x to
# N x L, named a_rise (16x) or a_rise_Nx.
GAPS = {(f"{a}_rise" + (f"_{n}x" if n != "16" else "") if a == b else f"{a}_vs_{b}_{n}x"):
        (CURVES[a], CURVES[b], int(n), 1 if a == b else int(n)) for a, b, n in (spec.split() for spec in """
    alibi alibi 16, rope rope 16, sinusoidal sinusoidal 16, rope sinusoidal 16, alibi rope 16, alibi rope 1,
    learned rope 1, sinusoidal rope 1, learned nope 1, sinusoidal nope 1, dyn_yarn rope 16, dyn_yarn yarn 16,
    yarn rope 16, ntk rope 16, pi rope 2, fixed_pi rope 1, fixed_ntk rope 1, fixed_yarn rope 1, yarn_tuned control 4,
    pi_tuned control 4, control yarn_tuned 16, control pi_tuned 16, control rope 1, kerple alibi 1, kerple rope 1,
    kerple alibi 16, fire rope 1, fire rope 16, fire alibi 16, t5 nope 1, t5 nope 16, half rope 1, half rope 16,
    base1e5 rope 16, base1e6 rope 16, fox rope 1, drope rope 1, drope nope 1, fox fox 16, rnope_swa rnope_swa 16,
    drope drope 16, fox dyn_yarn 16, rnope_swa dyn_yarn 16, random_rope rope 1, random_alibi alibi 1,
    random_rope random_rope 16, random_rope rope 16, random_rope dyn_yarn 16, pose_continued control 4,
    pose_continued pi_tuned 4, pose_continued control 16, pose pose 4, rope rope 4, pose rope 16, pose dyn_yarn 16
    """.split(","))}
# The ratios the page names, on the context methods' rows: a method over `none` on the same checkpoints
RATIOS = {f"{m.replace('-', '_')}_{run}_16x": ((run, m), (run, "none"), 16) for m in METHODS
          for run in ("rope", "alibi", "t5")} | {"sinks_rope_rise": (("rope", "sinks"), ("rope", "sinks"), 16, 1)}


def times(interval: tuple[float, float, float]) -> str:
    return "{:.3f}x ({:.3f}-{:.3f})".format(*interval)


study.values.update({name: (lambda spec=spec: "{:+.1f} ({:+.1f} to {:+.1f})".format(*gap(ROWS, *spec)))
                     for name, spec in GAPS.items()})
study.values.update({name: (lambda spec=spec: times(ratio(CONTEXT_ROWS, *spec))) for name, spec in RATIOS.items()})


TABLES = {"headline": ["sinusoidal", "rope", "alibi", "nope", "pi", "yarn", "dyn_yarn", "pi_tuned", "yarn_tuned",
                       "control"],
          "encodings_and_scalings": ["learned", "sinusoidal", "rope", "alibi", "nope", "pi", "fixed_pi", "ntk",
                                     "fixed_ntk", "dynamic", "yarn", "fixed_yarn", "dyn_yarn", "pi_tuned",
                                     "yarn_tuned", "control"],
          "more_encodings": ["rope", "alibi", "nope", "t5", "kerple", "fire", "half", "base1e5", "base1e6", "dyn_yarn",
                             "base1e5_dyn_yarn", "base1e6_dyn_yarn"],
          "newer_methods": ["rope", "alibi", "nope", "dyn_yarn", "fox", "p_rope", "rnope_swa", "drope"],
          "training_positions": ["rope", "dyn_yarn", "random_rope", "alibi", "random_alibi", "pose", "pose_continued",
                                 "pi_tuned", "yarn_tuned", "control"]}
study.tables.update({name: (lambda shown=shown: ppl_table(FOLDER, [2 * CURVES[c] for c in shown]))
                     for name, shown in TABLES.items()})


@study.table
def context_16x() -> str:
    """Each method's mean perplexity at 16x L on RoPE, ALiBi and T5, and its ratio to `none` on the same checkpoints."""
    def cell(run: str, m: str) -> str:
        mean, low, high = mean_interval(list(ppl(CONTEXT_ROWS, (run, m), 16).values()))
        return f"{mean:.1f} ({low:.1f}-{high:.1f})" if m == "none" else f"{mean:.1f}; " + times(
            ratio(CONTEXT_ROWS, (run, m), (run, "none"), 16))
    return "\n".join(["| method | RoPE | ALiBi | T5 |", "|---|---:|---:|---:|"] + [
        f"| {m} | " + " | ".join(cell(run, m) for run in ("rope", "alibi", "t5")) + " |" for m in ("none", *METHODS)])


# ----------------------------------------------------------------------------- the recipe, from the configs

def config(name: str = "study.yaml", *overrides: str) -> Config:
    return load_config(Config, FOLDER / name, list(overrides)).resolve()


def run_tokens(cfg: Config) -> int:
    return cfg.train.max_steps * cfg.train.batch_size * cfg.train.grad_accum * cfg.model.max_seq_len


def parameters_of(position: str) -> int:
    from model.gpt import GPT
    return sum(p.numel() for p in GPT(config("study.yaml", f"model.position.type={position}").model).parameters())


def make_args(run: str) -> list[str]:
    """What text.mk adds to a run's config (its ARGS_run)."""
    return re.search(rf"^ARGS_{run} := (.+)$", (FOLDER / "text.mk").read_text(), re.M).group(1).split()


study.values.update({
    "parameters": lambda: f"{parameters_of('rope') / 1e6:.2f}M",
    "learned_extra": lambda: f"{100 * (parameters_of('learned') / parameters_of('rope') - 1):.1f}%",
    "tokens": lambda: f"{run_tokens(config()) / 1e6:.2f}M",
    "train_length": lambda: str(config().model.max_seq_len),
    "steps": lambda: str(config().train.max_steps),
    "batch": lambda: str(config().train.batch_size),
    "extend_steps": lambda: str(config("extend-4x.yaml").train.max_steps),
    "extend_length": lambda: str(config("extend-4x.yaml").model.max_seq_len),
    "seeds": lambda: str(len({r["seed"] for r in ROWS})),
    "tokens_per_cell": lambda: "{:,}".format(*{r["tokens"] for r in ROWS + CONTEXT_ROWS if r["ppl"] is not None}),
    "drope_share": lambda: "{:.0%}".format(run_tokens(config("extend-4x.yaml", *make_args("drope")))
                                           / run_tokens(config())),
})


# ----------------------------------------------------------------------------- probes and context checkpoints

PROBES = [dict(r, file=name) for name in ("probes.json", "probes-newer/probes.json")
          for r in previous_rows(FOLDER / name, "eval.probe", "probe")]
PASSKEY = previous_rows(FOLDER / "passkey" / "passkey.json", "eval.passkey", "depth")


def grouped(probes: list[dict], probe: str, where: str) -> dict[tuple, list[dict]]:
    """{(file, run, scaling, distance or length): that cell's rows over seeds (and depths)} of one probe."""
    cells = defaultdict(list)
    for r in probes:
        if r["probe"] == probe and r["value"] is not None:
            cells[(r["file"], r["run"], r["scaling"], r[where])].append(r)
    return cells


def copy_gains(probes: list[dict]) -> dict[tuple, tuple[float, float, float]]:
    """{copy cell: the mean gain from a first copy over seeds and its 95% interval}."""
    return {key: mean_interval([r["gain"] for r in rows]) for key, rows in grouped(probes, "copy", "distance").items()}


def passkey_cells(probes: list[dict]) -> dict[tuple, tuple[int, int, int]]:
    """{passkey cell: (keys ranked first, trials, candidates)}."""
    return {key: (sum(round(r["value"] * r["samples"]) for r in rows), sum(r["samples"] for r in rows),
                  rows[0].get("candidates", 0)) for key, rows in grouped(probes, "passkey", "length").items()}


study.values.update({
    "copying": lambda: f"{COPYING:g}", "flat": lambda: f"{FLAT - 1:.0%}",
    "fox_below_rope": lambda: (lambda d: f"{sum(x < 0 for x in d)} of {len(d)}")(
        seed_diffs(ROWS, CURVES["fox"], CURVES["rope"], 1)),
    "copy_gain_max": lambda: f"{max(m for m, _, _ in copy_gains(PROBES).values()):+.3f}",
    "copy_gain_high": lambda: f"{max(h for _, _, h in copy_gains(PROBES).values()):+.3f}",
    "copy_loss": lambda: f"{mean_interval([r['value'] for r in PROBES if r['probe'] == 'copy' and r['value']])[0]:.1f}",
    "passkey_best": lambda: f"{max(k / n for k, n, c in passkey_cells(PROBES).values() if c):.0%}",
})


@study.value
def context_drift() -> str:
    """How far the context study's `none` rows (retrained checkpoints) are from results.json's, at most."""
    runs = [((run, "none"), n) for run in ("rope", "alibi", "t5") for n in (1, 2, 4, 8, 16)]
    drift = [abs(p / ppl(ROWS, c, n)[s] - 1) for c, n in runs for s, p in ppl(CONTEXT_ROWS, c, n).items()]
    return f"{max(drift):.1%}"
