"""studies/gpu/README.md's tables and values from its rows; a mean or gap over seeds has its 95% interval over seeds."""
from config import Config, load_config
from eval.results.rows import curve_label, previous_rows
from studies.report import Study
from studies.stats import mean_interval, paired_interval, wilson
from studies.tables import ppl_rows, ppl_table

study = Study(__file__)
ROWS, CONFIG = ppl_rows(study.folder), load_config(Config, study.folder / "study-gpu.yaml")
PROBES = previous_rows(study.folder / "probes.json", "eval.probe", "probe")
L, SEEDS = min(r["train_length"] for r in ROWS), sorted({r["seed"] for r in ROWS})
MULTIPLES = sorted({r["length"] // L for r in ROWS})
X = MULTIPLES[-1]
NONE, DYN, PI = ("rope", "none"), ("rope", "dynamic-yarn (s = T/L, cached)"), ("rope", "linear (s = length/L)")
TUNED = {"PI": ("rope-pi", "linear (fine-tuned)"), "YaRN": ("rope-yarn", "yarn (fine-tuned)"),
         "control": ("rope-continued", "none (fine-tuned)")}
SCALINGS = sorted({("rope", curve_label(r)) for r in ROWS if r["run"] == "rope"} - {NONE})
CANDIDATES = next(r["candidates"] for r in PROBES if r["probe"] == "passkey")

def ppl(run, label, x, rows=ROWS):  # the perplexity at x L of one run under one scaling label, one per seed
    at = {r["seed"]: r["ppl"] for r in rows if (r["run"], curve_label(r), r["length"]) == (run, label, x * L)}
    return [at[s] for s in SEEDS]
ratio = lambda run, x, rows=ROWS: [a / b for a, b in zip(*(ppl(run, "none", n, rows) for n in (x, 1)))]  # noqa: E731

def gap(a, b, x, rows=ROWS, percent=False):  # (run, label) a minus b at x L over the seeds; percent: 100 (a / b - 1)
    pa, pb = ppl(*a, x, rows), ppl(*b, x, rows)
    return mean_interval([100 * (p / q - 1) for p, q in zip(pa, pb)]) if percent else paired_interval(pa, pb)

def ci(t, f="{:.1f}", unit=""):
    m, lo, hi = (f.format(v) for v in t)
    return f"{m}{unit} ({lo}{unit} to {hi}{unit})" if t[1] < 0 else f"{m}{unit} ({lo}-{hi}{unit})"

def cells(probe, key, probes=PROBES):  # {(run, scaling, distance or length): the probe's rows there, over seeds}
    out = {}
    for r in (r for r in probes if r["probe"] == probe and r.get("gain" if probe == "copy" else "rank") is not None):
        out.setdefault((r["run"], r["scaling"], r[key]), []).append(r)
    return out
copies = lambda probes=PROBES: sum(cells("copy", "distance", probes).values(), [])  # noqa: E731

def copy_above(probes=PROBES):  # {copy cell measured in several seeds: its gain's interval over seeds lies above 0}
    return {k: mean_interval([r["gain"] for r in c])[1] > 0 for k, c in cells("copy", "distance", probes).items()
            if c[1:]}

def firsts(rows):  # the share of keys ranked first in the passkey rows, and its Wilson interval over their trials
    hits, trials = sum(round(r["value"] * r["samples"]) for r in rows), sum(r["samples"] for r in rows)
    return hits / trials, *wilson(hits, trials)
passkey_above = lambda: [k for k, c in cells("passkey", "length").items() if firsts(c)[1] > 1 / CANDIDATES]  # noqa

@study.table
def ppl_by_length():
    shown = [("learned", "none"), ("sinusoidal", "none"), NONE, ("rope", "yarn (s = length/L)"), DYN,
             ("alibi", "none"), ("nope", "none"), *TUNED.values()]
    return ppl_table(study.folder, [(r, lab, r, lab.replace(", cached", "")) for r, lab in shown])

@study.table
def scalings_16x():
    rows = [f"| {lab} | {ci(mean_interval(ppl(r, lab, X)))} | {ci(gap((r, lab), NONE, X))} |" for r, lab in SCALINGS]
    return "\n".join([f"| rope, scaling | perplexity at {X}x | minus unscaled RoPE |", "|---|---:|---:|", *rows])

value = study.values.__setitem__  # value(NAME, fn): the one-line values, registered under their names on the page
for run, x in [(run, x) for run in ("sinusoidal", "rope", "nope") for x in (2, X)]:
    value(f"{run}_{x}x", lambda run=run, x=x: ci(mean_interval(ratio(run, x)), "{:.2f}", "x"))
for run in ("alibi", "sinusoidal", "learned", "nope"):
    value(f"{run}_at_L", lambda run=run: ci(gap((run, "none"), NONE, 1, percent=True), unit="%"))
for c in [(run, label, x) for run, label in [("alibi", "none"), *TUNED.values()] for x in MULTIPLES]:
    value(f"{c[0].replace('-', '_')}_{c[2]}x", lambda c=c: f"{mean_interval(ppl(*c))[0]:.1f}")
value("rope_minus_sinusoidal_16x", lambda: ci(gap(NONE, ("sinusoidal", "none"), X)))
value("yarn_minus_pi_4x", lambda: ci(gap(TUNED["YaRN"], TUNED["PI"], 4), "{:.2f}"))
value("seeds", lambda: f"{SEEDS[0]}-{SEEDS[-1]}")
value("steps", lambda: f"{CONFIG.train.max_steps:,}")
value("tokens", lambda: f"{CONFIG.train.max_steps * CONFIG.train.batch_size * CONFIG.model.max_seq_len / 1e6:.1f}M")
value("copy_max", lambda: f"{max(r['gain'] for r in copies()):.3f}")
value("copy_share", lambda: f"{100 * max(r['gain'] / r['baseline'] for r in copies()):.1f}%")
value("copy_above", lambda: f"{sum(copy_above().values())} of {len(copy_above())}")
value("passkey_first", lambda: ci([100 * v for v in firsts(sum(cells("passkey", "length").values(), []))], unit="%"))
value("chance", lambda: f"{100 / CANDIDATES:.1f}%")
value("passkey_above", lambda: f"{len(passkey_above())} of {len(cells('passkey', 'length'))}")
