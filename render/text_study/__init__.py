"""The measured prose of the text study (reports/extrapolation/README.md), rendered by `make reports` from the committed
rows beside it (results.json, probes.json, passkey/, context/, training*.md): each paragraph between
<!-- rendered: NAME --> and <!-- /rendered --> lines of its page, each comparative sentence written only while its
predicate over the rows holds (render.prose). "In every seed" means seeds 1-3 each; "level" means the difference does
not have the same sign in every seed (the report's rule).

study.py reads the rows; encodings.py, positions.py, context.py and newer.py write the page's sections from them."""
from __future__ import annotations

import statistics
from pathlib import Path
from typing import Callable

from render.prose import claim, named, paragraph, span
from render.rows import previous_rows
from render.text_study.context import Context, context_checkpoints, context_methods, context_settings
from render.text_study.encodings import (
    at_L, embedding_scale, every_seed, fine_tunes, past_L, probes, scalings, seed_1, seed_1_intro)
from render.text_study.newer import NEWER, newer_lists, newer_methods
from render.text_study.positions import positions_base, positions_every_seed, positions_validation
from render.text_study.study import (
    ALIBI, BASE_1E5, BASE_1E6, CONTROL, DYNAMIC_YARN, FIRE, KERPLE, PAGE, PI_TUNED, POSE_CONTINUED, RANDOM_ROPE, ROPE,
    SINUSOIDAL, YARN_TUNED, Study, above, below, bound, ratio, retrained_lower, x_span)


def readme_summary(folder: Path) -> str:
    """README.md's paragraphs on the text study: what its headline table and the more-encodings tables show."""
    s = Study(folder)
    L, X4, X8, X16 = s.L, s.past_L[1], s.past_L[2], s.lengths[-1]
    rise = {c: ratio(s.at(c, X16), s.at(c, L)) for c in (ALIBI, SINUSOIDAL, ROPE)}
    yarn, control, pi = s.at(YARN_TUNED, X4), s.at(CONTROL, X4), s.at(PI_TUNED, X4)
    probe_rows = previous_rows(folder / "probes.json", "eval.probe", "probe")
    far: dict[tuple, list[float]] = {}
    for r in probe_rows:
        if r["probe"] == "copy" and r.get("gain") is not None and r["distance"] > r["train_length"]:
            far.setdefault((r["run"], r["scaling"], r["distance"]), []).append(r["gain"])
    no_passkey = all(r["value"] in (0.0, None) for r in probe_rows if r["probe"] == "passkey")
    pose = s.at(POSE_CONTINUED, X4)
    pose_gap = max(abs(p) for other in (yarn, control) for p in above(pose, other))
    randomized_cost = above(s.at(RANDOM_ROPE, L), s.at(ROPE, L))
    c = Context(folder)
    sinks_flat = max(abs(v - 1) for v in c.over_L("sinks", "rope", X16))
    alibi_cost = c.to_none("rerope", "alibi", X16) + c.to_none("dca", "alibi", X16)
    first = paragraph(
        claim(max(rise[ALIBI]) < 1.01 and min(rise[SINUSOIDAL] + rise[ROPE]) > 1.15,
              f"ALiBi stays flat to {X16 // L}x while unscaled RoPE and sinusoidal rise, the ALiBi paper's pattern (Figure "
              "1), though sinusoidal degrades far less than there;"),
        claim(all(s.best_training_free(i, n) == DYNAMIC_YARN for n in (X8, X16) for i in range(len(s.seeds))),
              f"at {X8 // L}x and {X16 // L}x the best training-free RoPE row is dynamic YaRN;"),
        claim(below(control, pi) and below(yarn, pi),
              f"at {X4 // L}x the YaRN fine-tune is within {bound(max(abs(p) for p in above(yarn, control)), 1)}% of the "
              "unscaled control and PI behind it."),
        claim(max(statistics.fmean(g) for g in far.values()) < 0.01 and no_passkey,
              "But the probes find no model that uses more than a few dozen tokens back, so these rows measure local "
              "prediction under unseen positions, not the use of distant context."),
        "Every row, per-seed values, the probes: [reports/extrapolation/README.md](reports/extrapolation/README.md).")
    more = paragraph(
        "**More encodings, RoPE's base and training positions**, all in every seed:",
        claim(s.below_at(KERPLE, ROPE, [L]) and s.below_at(KERPLE, ALIBI, s.lengths),
              "KERPLE is below RoPE at L and below ALiBi at every length;"),
        claim(s.below_at(FIRE, ROPE, [X16]), f"FIRE beats unscaled RoPE at {X16 // L}x;"),
        claim(s.below_at(ROPE, BASE_1E5, s.past_L) and s.below_at(ROPE, BASE_1E6, s.past_L),
              "bases 1e5 and 1e6 extrapolate worse than 1e4 unscaled;"),
        f"RoPE continued with PoSE on {L}-token windows is within {bound(pose_gap, 1)}% of the {X4}-token YaRN fine-tune "
        f"and control at {X4 // L}x (PoSE's claim; its base retrained, up to {bound(max(retrained_lower(folder)), 1)}% "
        "lower);",
        claim(max(ratio(s.at(RANDOM_ROPE, X16), s.at(RANDOM_ROPE, L))) < min(rise[ROPE]),
              f"randomized positions flatten RoPE's curve past L but cost it {span(randomized_cost)}% at L, read with "
              "contiguous positions ([tables](reports/extrapolation/README.md#tables-more-encodings-ropes-base-and-"
              "training-positions))."),
        "[Context methods](reports/extrapolation/README.md#training-free-context-methods-three-seeds):",
        f"attention sinks keep RoPE's perplexity at {X16 // L}x within {bound(100 * sinks_flat, 1)}% of L's (reading "
        f"nothing past their window, says the task track); ReRoPE and DCA cost ALiBi {x_span(alibi_cost)}.")
    present = [run for run in NEWER if any(r["run"] == run for r in s.rows)]
    if not present:
        return "\n\n".join([first, more])
    better, worse, flat, beats_yarn = newer_lists(s, present)
    newer = paragraph(
        f"**[Newer methods](reports/extrapolation/README.md#newer-methods-fox-p-rope-rnope-swa-and-drope)**, in every "
        f"seed: below RoPE at L, {named(better)}; above it, {named(worse)}; as flat as ALiBi to {X16 // L}x, "
        f"{named(flat)}; below dynamic YaRN at {X16 // L}x, {named(beats_yarn)}.")
    return "\n\n".join([first, more, newer])



# {page, from the checkout's root: {block name: its rendering from the reports folder}} (render.reports merges these)
BLOCKS: dict[str, dict[str, Callable[[Path], str]]] = {"README.md": {
    "study-summary": lambda reports: readme_summary(reports / "extrapolation")}, PAGE: {
    "at-l": lambda reports: at_L(reports / "extrapolation"),
    "newer-methods": lambda reports: newer_methods(reports / "extrapolation"),
    "past-l": lambda reports: past_L(reports / "extrapolation"),
    "probes": lambda reports: probes(reports / "extrapolation"),
    "scalings": lambda reports: scalings(reports / "extrapolation"),
    "fine-tunes": lambda reports: fine_tunes(reports / "extrapolation"),
    "seed-1": lambda reports: seed_1(reports / "extrapolation"),
    "seed-1-intro": lambda reports: seed_1_intro(reports / "extrapolation"),
    "embedding-scale": lambda reports: embedding_scale(reports / "extrapolation"),
    "every-seed": lambda reports: every_seed(reports / "extrapolation"),
    "positions-base": lambda reports: positions_base(reports / "extrapolation"),
    "positions-validation": lambda reports: positions_validation(reports / "extrapolation"),
    "positions-every-seed": lambda reports: positions_every_seed(reports / "extrapolation"),
    "context-settings": lambda reports: context_settings(reports / "extrapolation"),
    "context-checkpoints": lambda reports: context_checkpoints(reports / "extrapolation"),
    "context-methods": lambda reports: context_methods(reports / "extrapolation"),
}}
