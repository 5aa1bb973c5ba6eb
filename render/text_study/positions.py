"""The page's section on training positions: PoSE and randomized positions against the base RoPE runs."""
from __future__ import annotations

from pathlib import Path

from render.prose import bullet, claim, paragraph, seeds_named, span
from render.text_study.study import (
    ALIBI, CONTROL, DYNAMIC_YARN, PI_TUNED, POSE, POSE_CONTINUED, RANDOM_ALIBI, RANDOM_ROPE, ROPE, YARN_TUNED, Study,
    above, below, fmt, gap_to_rope, level, ratio, retrained_lower, training_table, val)


def positions_base(folder: Path) -> str:
    """Training positions: the retrained base RoPE runs against the committed ones."""
    committed, retrained = val(folder, "training.md", "val loss"), val(folder, "training-positions.md", "val loss")
    seeds = sorted(s for run, s in retrained if run == "rope")
    named, lower = " and ".join(map(str, seeds)), retrained_lower(folder)
    (steps,) = {int(r["steps"]) for r in training_table(folder / "training-positions.md")
                if r["run"] == "rope" and "steps" in r}
    return paragraph(
        f"Seeds {named} trained (the five runs, the base RoPE run included) and were evaluated on one core while the task "
        "track used the other. The run directories of the "
        "other rows were not kept between sessions, so the base RoPE run that `rope-pose-continued` starts from was "
        f"retrained with the same command: its validation loss at step {steps} in seeds {named} is "
        f"{fmt([retrained[('rope', s)] for s in seeds], 3)} against "
        f"{fmt([committed[('rope', s)] for s in seeds], 3)} for the committed RoPE runs that the PI, YaRN and control "
        "fine-tunes started from,",
        claim(min(lower) > 0, f"so its base is {fmt(lower, sep='% and ')}% lower in perplexity "
                              "([training-positions.md](training-positions.md) against [training.md](training.md));"),
        f"in seed 1 it ended at the committed {committed[('rope', 1)]:.3f} (above). PoSE here shifts positions only: "
        "each window's tokens stay contiguous text and its chunks get the skips u_i, the v_i = 0 variant of the "
        "paper's section 3.2 (`data/train_positions.py`). The tables at the end of this page have their rows.")


def positions_validation(folder: Path) -> str:
    """Training positions: the validation loss during training."""
    s = Study(folder)
    L, X16 = s.L, s.lengths[-1]
    loss, gap = val(folder, "training-positions.md", "val loss"), gap_to_rope(folder, "training-positions.md")
    seeds = sorted(seed for run, seed in loss if run == "rope")
    (steps,) = {int(r["steps"]) for r in training_table(folder / "training-positions.md")
                if r["run"] == "rope" and "steps" in r}
    behind = [loss[("rope-randomized", seed)] - loss[("rope", seed)] for seed in seeds]
    pose = [m for (run, _), (m, _) in gap.items() if run == "rope-pose"]
    return paragraph(
        "Validation during training uses contiguous positions like every evaluation, so the randomized runs' "
        "validation loss is already their perplexity at L: [training-positions.md](training-positions.md) "
        f"(seeds {span(seeds)}, `python -m render.summary runs/study/seed{{{','.join(map(str, seeds))}}}/"
        "{rope,rope-randomized,alibi-randomized,rope-pose,rope-pose-continued} --out "
        "reports/extrapolation/training-positions.md`).",
        claim(min(behind) > 0,
              f"At step {steps} the randomized RoPE runs are {span(behind, 2)} nats behind RoPE on validation"),
        "while their training loss, on their own random positions, stays close to RoPE's (in the runs' "
        "metrics.jsonl, which is not committed): they learn what they are shown, and contiguous positions are not "
        f"what they are shown (neighbouring tokens are {X16 // L} positions apart on average when {L} are drawn from "
        f"{X16:,}).",
        claim(max(map(abs, pose)) < 0.01,
              "PoSE costs nothing on the way (within 0.01 nats of RoPE at every evaluation, on average over the two "
              "seeds)."))


def positions_every_seed(folder: Path) -> str:
    """Training positions: what holds in every seed, and what each paper claims."""
    s = Study(folder)
    L, X4, X8, X16 = s.L, s.past_L[1], s.past_L[2], s.lengths[-1]
    k4, k16 = f"{X4 // L}x", f"{X16 // L}x"
    pose_c, control, yarn, pi = (s.at(c, X4) for c in (POSE_CONTINUED, CONTROL, YARN_TUNED, PI_TUNED))
    gap = max(abs(p) for other in (yarn, control) for p in above(pose_c, other))
    ahead = [x < y for x, y in zip(pose_c, control)]
    faster = ratio(s.at(POSE_CONTINUED, X16), pose_c), ratio(s.at(CONTROL, X16), control)
    pose_L, rope_L = s.at(POSE, L), s.at(ROPE, L)
    flat = max(p for n in s.past_L if n <= X4 for p in above(s.at(POSE, n), pose_L))
    pose16, dyn16, rope16 = s.at(POSE, X16), s.at(DYNAMIC_YARN, X16), s.at(ROPE, X16)
    rises = {c: above(s.at(c, X16), s.at(c, L)) for c in (RANDOM_ROPE, ROPE, RANDOM_ALIBI, ALIBI)}
    random16 = s.at(RANDOM_ROPE, X16)
    lower = [x < y for x, y in zip(random16, rope16)]

    def those(values: list[float], flags: list[bool]) -> str:
        return fmt([v for v, f in zip(values, flags) if f], sep=" and ")

    higher = [not f for f in lower]
    return "\n".join([
        bullet("**PoSE continued** (Zhu et al., arXiv 2309.10400, section 4: a short training window extended to the "
               "target length matches full-length fine-tuning within it).",
               claim(gap < 2 and below(pose_c, pi) and level(pose_c, control),
                     f"Reproduced: at {k4}, RoPE continued with PoSE on {L}-token windows is within {gap:.1f}% of the "
                     f"unscaled {X4}-token control ({fmt(pose_c)} against {fmt(control)}: ahead in "
                     f"{seeds_named(s.where(ahead))}, behind in {seeds_named(s.where([not a for a in ahead]))}) and of "
                     f"the YaRN fine-tune ({fmt(yarn)}), and ahead of the PI fine-tune in every seed ({fmt(pi)})."),
               "Its base is the retrained RoPE run (above), up to "
               f"{max(retrained_lower(folder)):.1f}% lower in perplexity, and it uses PoSE's v_i = 0 variant (above).",
               claim(all(p > c for p, c in zip(*faster)),
                     f"Past its target it rises faster than the {X4}-token control ({k16}: "
                     f"{fmt(s.at(POSE_CONTINUED, X16))} against {fmt(s.at(CONTROL, X16))}).")),
        bullet(claim(flat < 1 and below(rope_L, pose_L),
                     f"**PoSE from scratch** (target {k4}): flat to {k4} in every seed (at most {flat:.1f}% above its "
                     f"own value at L; RoPE rises {span(above(s.at(ROPE, X4), rope_L))}%), at "
                     f"{span(above(pose_L, rope_L), 1)}% more perplexity at L than RoPE of the same seed."),
               claim(all(a < b < c for a, b, c in zip(s.at(POSE, X4), s.at(POSE, X8), pose16))
                     and below(pose16, rope16) and not below(pose16, dyn16),
                     f"Past {k4} it rises; at {k16} it is {span([-p for p in above(pose16, rope16)])}% below unscaled "
                     f"RoPE in every seed but not below RoPE under dynamic YaRN ({fmt(pose16)} against {fmt(dyn16)}), "
                     "which needs no training.")),
        bullet("**Randomized positions** (Ruoss et al., arXiv 2305.16843: +12.0% mean test accuracy over 15 "
               "algorithmic tasks, abstract):",
               claim(max(rises[RANDOM_ROPE]) < 5 < min(rises[ROPE])
                     and below(s.at(ROPE, L), s.at(RANDOM_ROPE, L)) and below(s.at(ALIBI, L), s.at(RANDOM_ALIBI, L)),
                     f"RoPE becomes nearly flat past L (it rises {span(rises[RANDOM_ROPE], 1)}% from L to {k16}, "
                     f"against {span(rises[ROPE])}% without) and ALiBi rises {span(rises[RANDOM_ALIBI], 1)}% "
                     f"({span(rises[ALIBI], 1)}% without), but read with contiguous positions they pay at L: RoPE "
                     f"{span(above(s.at(RANDOM_ROPE, L), s.at(ROPE, L)))}% and ALiBi "
                     f"{span(above(s.at(RANDOM_ALIBI, L), s.at(ALIBI, L)))}% more perplexity than without "
                     "randomization, in every seed."),
               f"At {k16} the evaluated positions 0-{X16 - 1} are all of max_position, so there our protocol and the "
               "paper's coincide (the paper's reference code, google-deepmind/randomized_positional_encodings, draws "
               "positions at evaluation too, `experiments/range_evaluation.py`, so at shorter lengths it reads with "
               "gaps as in training):",
               claim(any(lower) and any(higher) and below(dyn16, random16)
                     and below(s.at(ALIBI, X16), s.at(RANDOM_ALIBI, X16)),
                     f"randomized RoPE is below unscaled RoPE in {seeds_named(s.where(lower))} "
                     f"({those(random16, lower)} against {those(rope16, lower)}) and above it in "
                     f"{seeds_named(s.where(higher))} ({those(random16, higher)} against {those(rope16, higher)}), and "
                     "above dynamic YaRN in every seed; randomized ALiBi is above ALiBi in every seed."),
               "On language modelling at this scale, randomized positions do not pay; Ruoss et al.'s gains are on "
               "algorithmic tasks, which the task track measures."),
    ])


