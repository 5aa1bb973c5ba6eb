"""The page's section on the newer methods: FoX, p-RoPE, RNoPE-SWA and DroPE beside RoPE, ALiBi and NoPE."""
from __future__ import annotations

import statistics
from pathlib import Path

from config import Config, load_config
from render.prose import named, paragraph, span
from render.rows import ppl_block, previous_rows
from render.text_study.study import ALIBI, DYNAMIC_YARN, NOPE, ROOT, ROPE, Study, above, below, bound, fmt, ratio


NEWER = {"fox": "FoX", "p-rope": "p-RoPE", "rnope-swa": "RNoPE-SWA", "drope": "DroPE"}
NEWER_ROWS = {"fox": "FoX (forget gate, no positions)", "p-rope": "p-RoPE (p = 0.75)",
              "rnope-swa": "RNoPE-SWA (3 RoPE layers over L/4, 1 NoPE)",
              "drope": "DroPE (RoPE recalibrated without positions)"}  # the table's names


def own_curve(s: Study, run: str) -> tuple:
    """A run's own curve: unscaled, or a continued run's 'none (fine-tuned)'."""
    (scaling,) = {r["scaling"] for r in s.rows if r["run"] == run and r["scaling"] in ("none", "none (fine-tuned)")}
    return (run, scaling, None)


def newer_lists(s: Study, present: list[str]) -> tuple[list[str], ...]:
    """The newer methods, by name, that in every seed are below RoPE at L, above it, within 5% of ALiBi's flatness
    at 16x L (16x over 1x), and below RoPE with dynamic YaRN at 16x."""
    L, X16 = s.L, s.lengths[-1]
    curves = {run: own_curve(s, run) for run in present}
    at_L = {run: s.at(c, L) for run, c in curves.items()}
    rise = {run: ratio(s.at(c, X16), at_L[run]) for run, c in curves.items()}
    return ([NEWER[r] for r in present if below(at_L[r], s.at(ROPE, L))],
            [NEWER[r] for r in present if below(s.at(ROPE, L), at_L[r])],
            [NEWER[r] for r in present if max(rise[r]) < max(ratio(s.at(ALIBI, X16), s.at(ALIBI, L))) + 0.05],
            [NEWER[r] for r in present if below(s.at(curves[r], X16), s.at(DYNAMIC_YARN, X16))])


def newer_methods(folder: Path) -> str:
    """"Newer methods": FoX, p-RoPE, RNoPE-SWA and DroPE beside RoPE, ALiBi and NoPE, from the rows of the seeds they
    ran (make extrapolation RUNS="fox p-rope rnope-swa drope")."""
    s = Study(folder)
    present = [run for run in NEWER if any(r["run"] == run for r in s.rows)]
    if not present:
        return paragraph("Not measured yet: `make -j2 study-eval study-probe SEED_NUMBERS=\"1 2 3\" RUNS=\"rope fox p-rope "
                         "rnope-swa drope\" RESUME=1 THREADS=1` trains and measures them.")
    L, X16 = s.L, s.lengths[-1]
    curves = {run: own_curve(s, run) for run in present}
    better, worse, flat, beats_yarn = newer_lists(s, present)
    steps = load_config(Config, ROOT / "configs" / "extend-4x.yaml").train.max_steps
    table = ppl_block(folder, [("rope", "none", "rope", "none"), ("alibi", "none", "alibi", "none"),
                               ("nope", "none", "nope", "none"),
                               ("rope", "dynamic-yarn (s = T/L, cached)", "rope", "dynamic-yarn, through the cache")]
                      + [(run, curves[run][1], NEWER_ROWS[run], "none") for run in present],
                      digits=1, multiples=True, per_seed=(1, 16))
    out = [
        paragraph(f"`make -j2 study-eval study-probe SEED_NUMBERS=\"{' '.join(map(str, s.seeds))}\" RUNS=\"rope fox "
                  "p-rope rnope-swa drope\" RESUME=1 THREADS=1` trains them with the study's recipe (DroPE: the seed's "
                  f"RoPE run continued without positions for the 4x fine-tunes' {steps} steps and tokens, at L) and "
                  "measures them as the other rows; the table gives mean ± sd over the seeds and each seed's value at L "
                  "and 16x."),
        table,
        paragraph(f"In every seed, below RoPE's perplexity at L: {named(better)}; above it: {named(worse)}.",
                  f"At {X16 // L}x L within 5% of ALiBi's flatness (16x over 1x): {named(flat)}.",
                  f"Below RoPE with training-free dynamic YaRN (the best training-free RoPE row) at {X16 // L}x in every "
                  f"seed: {named(beats_yarn)}."),
    ]
    probes = folder / "probes-newer" / "probes.json"
    if probes.exists():  # eval.probe of these runs alone (the committed probes.json is of an older eval.probe)
        rows = previous_rows(probes, "eval.probe", "probe")
        gains: dict[tuple, list[float]] = {}
        for r in rows:
            if r["probe"] == "copy" and r.get("gain") is not None and r["distance"] > r["train_length"]:
                gains.setdefault((r["run"], r["distance"]), []).append(r["gain"])
        most = max(statistics.fmean(g) for g in gains.values())
        keys = [r for r in rows if r["probe"] == "passkey" and r["value"] is not None]
        best = max(keys, key=lambda r: r["value"])
        out.append(paragraph(
            "The context-use probes of these runs ([probes-newer/probes.md](probes-newer/probes.md)):",
            f"a first copy of a span past L lowers the loss on the second by {most:+.3f} nats at most (mean over "
            f"seeds), and the passkey is ranked first in at most {round(best['value'] * best['samples'])} of a cell's "
            f"{best['samples']} trials (chance 1 in {best['candidates']}):",
            "none of them copies from past L; their flat rows measure local prediction, as ALiBi's do." if most < 0.01
            else "some copying past L shows."))
    if "drope" in present:
        drope, base, nope = s.at(curves["drope"], L), s.at(ROPE, L), s.at(NOPE, L)
        out.append(paragraph(
            f"**DroPE here**: after {steps} steps without positions its perplexity at L is "
            f"{span(above(drope, base))}% above the RoPE runs' it started from,",
            f"{fmt(drope)} against {fmt(nope)} for NoPE trained from scratch (seeds {s.seeds[0]}-{s.seeds[-1]});",
            f"past L it stays within {bound(100 * (max(ratio(s.at(curves['drope'], X16), drope)) - 1), 1)}% of its L "
            "(the paper's recalibration runs far longer on far larger models, arXiv 2512.12167; its code's QK-norm "
            "variant is not tried here)."))
    return "\n\n".join(out)


