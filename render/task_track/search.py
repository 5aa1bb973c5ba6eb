"""The page's sections on the recipe search (recipe-search/: each search run's validation log and the table's rows.json)
and the recipe it chose."""
from __future__ import annotations

import math
from pathlib import Path

from config import Config, load_config
from data.tasks import FILLER_TARGETS, FOLLOW
from render.prose import bullet, claim, listed, number, paragraph
from render.tasks import interval
from render.task_track.track import (
    ENCODINGS, INDUCTION, SINGLE_HOP, Search, TASKS, WORDS, alibi_slope, learned_step, pct, pct_span, per_seed, ranges,
    rate, track)


def first_learned(search: Search, row: int, task: str) -> int | None:
    """The first logged step of a search row from which the task stays at 90% or more (None: never)."""
    return learned_step({step: acc[task] for step, acc in search.log(search.table[row]["log"]).items()})


def learned_from(search: Search, row: int) -> int | None:
    """The first logged step from which every task of a search row stays at 90% or more (None: never)."""
    steps = [first_learned(search, row, task) for task in search.final(row)]
    return None if None in steps else max(steps)


def at_most(search: Search, rows, task: str) -> float:
    """The most a task reached at any logged step of the rows."""
    return max(a[task] for r in rows for a in search.log(search.table[r]["log"]).values())


def each_step(reports: Path) -> str:
    """"What each step showed": the recipe search, row by row (the accuracies from the committed logs; the attention
    shares and per-answer accuracies from the runs' checkpoints, which are not committed, are quoted as measured)."""
    q = Search(reports / "tasks" / "recipe-search")
    f = q.final
    all_five = {r: all(v >= 0.9 for v in f(r).values()) for r in q.table}
    slowed = q.log(q.table[14]["log"])[q.table[15]["step"]]
    (from_20,) = [learned_from(q, 20)]
    stopped_25 = q.table[25]
    seed1_22 = q.log(q.table[22]["log"])[q.table[26]["step"]]
    more = q.last_step(34) - q.last_step(32)
    return "\n".join([
        "What each step showed (the attention shares and per-answer accuracies quoted come from the runs' checkpoints, "
        "which are not committed; the accuracy columns are in the logs):",
        bullet("**No previous-token head over uniform filler** (rows 1-10). Row 3's model, read head by head, gives the "
               "previous token 2-5% of its attention in every head of both layers (the mean attention from each position "
               "to the one before it, read from its checkpoint): the induction circuit never starts. Its "
               f"{pct_span(f(3)[t] for t in INDUCTION)} on the multi-token tasks is a bag of the fact's symbols: it attends "
               "to every fact token at once, and `passkey`'s last digit (94%) is the one digit the question has not yet "
               "shown.",
               claim(q.never_learned(range(1, 11), ("copy", "recall")),
                     "Longer training, a distance curriculum, width, a larger lr, shorter sequences and q/k/v biases did "
                     "not change that.")),
        bullet("**Then the filler got local structure**: each token the symbol after the one two back, with probability "
               "3/4, so that predicting it takes the token before the current one (a previous-token head), and training "
               "predicts one filler token in eight beside the answers (`data/tasks.py`, `filler`). The runs that chose "
               "that form (rows 11-13) ran on scratch copies of the generator and are left out."),
        bullet(claim(all_five[14],
                     "**Row 14, the first on the committed filler, changed two more things**, `copy`'s span drawn from "
                     "the values (every other task answers with a value) and two heads of 32 dimensions instead of four "
                     f"of 16, and reached every task by step {number(q.table[14]['step'])} on seed 101;"),
               "what each change contributed is not separated."),
        bullet(claim(any(f(18)[t] < 0.9 for t in INDUCTION) and any(f(19)[t] < 0.9 for t in INDUCTION),
                     "**That recipe does not hold on a seed it was not tuned on** (rows 18-19)."),
               "On seed 1, RoPE formed its previous-token head (88% of one layer-0 head's attention) but no induction "
               f"head by step {number(q.table[18]['step'])}, and ALiBi formed neither in layer 0: with two heads its "
               f"steepest slope is 2^-4 (the ALiBi paper's rule for 2 heads), so its bias separates the previous token "
               "from the one before by a factor of e^(1/16) only, and its previous-token head appears in layer 1 (57%), "
               "where no layer is left to read it."),
        bullet("**Why NoPE and few-headed ALiBi need three layers.** Without positions (NoPE), or with a bias too flat "
               "to pick one neighbour (ALiBi with few heads), layer 0 cannot single out the previous token; a "
               "previous-token head can form in layer 1 at the earliest, and the induction head that reads it needs a "
               "layer after that.",
               claim(q.never_learned((16, 23), INDUCTION) and all(f(16)[t] >= 0.9 for t in SINGLE_HOP)
                     and all(f(15)[t] < slowed[t] and q.apart(f(15)[t], slowed[t]) for t in INDUCTION),
                     "NoPE learned none of the induction tasks in 3 layers (rows 16 and 23), and both single-hop tasks "
                     f"where it ran {number(q.table[16]['step'])} steps (row 16); a third layer also slowed RoPE (row "
                     "15).")),
        bullet(claim(from_20 is not None and any(f(18)[t] < 0.9 for t in TASKS) and q.never_learned((21,), INDUCTION),
                     f"**Three layers and a longer schedule carry RoPE on seed 1** (row 20: all five tasks at 90% or "
                     f"more from step {number(from_20)}, where two layers failed, row 18), **but not two-headed ALiBi** "
                     f"(row 21: none of the induction tasks by step {number(q.last_step(21))}).")),
        bullet(claim(all(f(22)[t] >= 0.9 for t in INDUCTION) and f(22)["recall1"] < 0.9,
                     "**Four heads let ALiBi form the induction circuit in three layers** (row 22: `copy`, `recall` and "
                     f"`passkey` at {pct_span(f(22)[t] for t in INDUCTION)} by step {number(q.table[22]['step'])}, with a "
                     f"steepest slope of {alibi_slope(0, 4)} instead of {alibi_slope(0, 2)}), but its `recall1` stays at "
                     f"{pct(f(22)['recall1'])}%."),
               claim(q.never_learned((23,), INDUCTION),
                     f"**NoPE in three layers** learned no induction task by step {number(q.last_step(23))} of 5,000 "
                     "(row 23).")),
        bullet(claim(all(v >= 0.9 for v in q.log(q.table[24]["log"])[q.table[24]["step"]].values())
                     and q.never_learned((25,), INDUCTION) and all(f(25)[t] >= 0.9 for t in SINGLE_HOP)
                     and not stopped_25["stopped"],
                     f"**The recipe on seed 2** (rows 24-26): RoPE learned all five tasks by step "
                     f"{number(q.table[24]['step'])}. NoPE, run the whole {number(stopped_25['step'])} steps, learned "
                     "both single-hop tasks and no induction task (" + ", ".join(f"`{t}` {pct(f(25)[t])}%" for t in INDUCTION)
                     + ")."),
               claim(q.table[26]["stopped"] and pct(seed1_22["recall1"]) == pct(f(26)["recall1"]),
                     f"ALiBi was stopped at step {number(q.table[26]['step'])} to free the CPU for the track's seed 3: "
                     + ", ".join(f"`{t}` {pct(f(26)[t])}%" for t in ("copy", "passkey")) + f", and `recall1` "
                     f"{pct(f(26)['recall1'])}%, the same as seed 1's at that step (row 22).")),
        bullet("**`recall` and `recall1` were asked alike, and held each other back** (rows 22, 28-31). Both asked key k "
               "with the same token, so at a key in the question block a model had to tell from the facts before it "
               "whether to copy the token after an earlier k (`recall`) or decode a fused pair (`recall1`), and the two "
               "rules competed for the same heads. Where one was learned first, the other stayed behind: ALiBi on seed 1 "
               f"reached `recall` {pct(f(22)['recall'])}% and `recall1` {pct(f(22)['recall1'])}% (row 22), ALiBi on "
               f"seed 4 `recall1` {pct(f(28)['recall1'])}% and `recall` {pct(f(28)['recall'])}% (row 28), and RoPE on "
               f"seed 3 `recall` {pct(f(29)['recall'])}% (row 29).",
               claim(all_five[30] and all_five[31] and not any(all_five[r] for r in (22, 28, 29)),
                     "With `recall1` asked by tokens of its own, the two runs that had failed learned all five: RoPE on "
                     f"seed 3 from step {number(learned_from(q, 30))} (row 30), ALiBi on seed 4 from step "
                     f"{number(learned_from(q, 31))} (row 31)."),
               "Seed and config draw the same sequences as before, token for token, but for `recall1`'s question tokens; "
               "the initial weights differ, since the embedding table is 16 rows longer and every draw after it moves."),
        bullet(claim(q.never_learned((32, 33, 34, 35), ("recall",)),
                     "**On seed 5, never used before, `recall` failed for both** (rows 32-33: RoPE "
                     f"{pct(f(32)['recall'])}%, with `copy` at {pct(f(32)['copy'])}%; ALiBi {pct(f(33)['recall'])}%), and "
                     f"{number(more)} more steps at the final lr left it there (rows 34-35: {pct(f(34)['recall'])}% and "
                     f"{pct(f(35)['recall'])}%) while RoPE's `copy` reached {pct(f(34)['copy'])}%."),
               "`recall` is the task with the least shared structure: its keys occur in no other task, so the query side "
               "of its induction head learns from a fifth of the sequences only."),
        bullet(claim(all_five[36] and f(37)["recall"] >= 0.9 and f(37)["copy"] < 0.9 and f(37)["recall1"] < 0.9,
                     "**Drawing `recall` three times as often** (`data.source: tasks:copy,recall*3,passkey,recall1,"
                     "passkey1`, the same steps and batches) carried RoPE on seed 5 through all five tasks (row 36), and "
                     f"ALiBi through `recall` ({pct(f(37)['recall'])}%), but left ALiBi's `copy` at {pct(f(37)['copy'])}% "
                     f"and `recall1` at {pct(f(37)['recall1'])}% (row 37):"),
               "with a seventh of the sequences each instead of a fifth, the other tasks get less training, and ALiBi's "
               f"two did not reach 90% in {number(q.table[37]['step'])} steps."),
        bullet(claim(all_five[38] and all_five[39],
                     f"**{number(q.table[38]['step'])} steps** (the cosine decay over all of them) carried ALiBi through "
                     f"all five tasks on seed 5 (from step {number(learned_from(q, 38))} on, row 38) and on seed 6, never "
                     f"used before (from step {number(learned_from(q, 39))}, row 39)."),
               "That was the committed recipe until the track's seeds 6-10 were trained with it.",
               claim(all_five[40] and f(41)["recall1"] < 0.9,
                     "RoPE learned all five with it on seed 6 (row 40); ALiBi on seed 7, never used before, left "
                     f"`recall1` at {pct(f(41)['recall1'])}% (row 41).")),
    ])


def run_of(search: Search, row: int) -> tuple[str, int]:
    """(encoding, seed) of a search row, from its log's name (…-alibi-s7)."""
    log = search.table[row]["log"]
    return next(e for e in ENCODINGS if f"-{e}-" in f"-{log}-"), int(log.rsplit("-s", 1)[1])


def search_status(reports: Path) -> str:
    """The search's status after the three-layer recipe, the fourth layer, the longer schedule and the new seeds."""
    q = Search(reports / "tasks" / "recipe-search")
    f = q.final
    all_five = {r: all(v >= 0.9 for v in f(r).values()) for r in q.table}
    recipe = [r for r in q.table if q.table[r]["log"].startswith("recall3-8k-")]
    tried = [r for r in recipe if run_of(q, r)[0] != "nope"]
    (nope_6,) = [r for r in recipe if run_of(q, r)[0] == "nope"]
    won = [r for r in tried if all_five[r]]
    (lost,) = [r for r in tried if not all_five[r]]
    by_run = {run: [run_of(q, r)[1] for r in won if run_of(q, r)[0] == run] for run in ("alibi", "rope")}
    (late,) = [r for r in won if learned_from(q, r) == q.table[r]["step"]]
    late_log = q.log(q.table[late]["log"])
    steps = sorted(late_log)
    last_of = {r: max(TASKS, key=lambda t: first_learned(q, r, t) or math.inf) for r in (31, *won, lost)
               if run_of(q, r)[0] == "alibi"}
    recall1_last = [r for r in last_of if last_of[r] == "recall1"]
    recall_last = [r for r in last_of if last_of[r] == "recall"]
    lost_log = q.log(q.table[lost]["log"])
    rising = [lost_log[s]["recall1"] for s in sorted(lost_log)[-4:]]
    up_to_then = (16, 23, 25, nope_6)
    status = paragraph(
        claim(len(won) == 4 and len(tried) == 5,
              f"**Status of the three-layer recipe.** Of the five RoPE and ALiBi runs of it in this search, four learned "
              f"all five tasks at L: ALiBi on seeds {listed([str(x) for x in by_run['alibi']])} and RoPE on seed "
              f"{listed([str(x) for x in by_run['rope']])} (rows {ranges([r for r in won if r != late])}, {late}; seed "
              f"{run_of(q, late)[1]}'s `{min(f(late), key=f(late).get)}` reached {pct(min(f(late).values()))}% only at "
              f"the last step, from {pct(late_log[steps[-2]][min(f(late), key=f(late).get)])}% at step "
              f"{number(steps[-2])})."),
        claim(rising == sorted(rising) and rising[0] < rising[-1],
              f"ALiBi on seed {run_of(q, lost)[1]}, never used before, did not: its `recall1` reached "
              f"{pct(f(lost)['recall1'])}% by step {number(q.table[lost]['step'])}, still rising (row {lost})."),
        f"ALiBi's last task to stay at 90% or more was `recall1` in rows {listed([str(r) for r in recall1_last])} (at "
        f"step {listed([number(first_learned(q, r, 'recall1')) for r in recall1_last if first_learned(q, r, 'recall1')])}, "
        f"or never) and `recall` in row{'s' if len(recall_last) > 1 else ''} {listed([str(r) for r in recall_last])} "
        f"(step {listed([number(first_learned(q, r, 'recall')) for r in recall_last])}).",
        claim(q.never_learned((nope_6,), INDUCTION) and all(f(nope_6)[t] >= 0.9 for t in SINGLE_HOP),
              f"NoPE on seed {run_of(q, nope_6)[1]} learned both single-hop tasks and no induction task (row {nope_6}: "
              + ", ".join(f"`{t}` {pct(f(nope_6)[t])}%" for t in INDUCTION) + ")."),
        claim(q.never_learned(up_to_then, INDUCTION),
              "NoPE learned no induction task under any recipe tried up to then (rows "
              f"{', '.join(map(str, up_to_then))}: three layers, two or four heads, up to "
              f"{number(max(q.last_step(r) for r in up_to_then))} steps)."),
        "The track's former seeds 6-10 were trained with it; in each ALiBi missed a task and NoPE `copy` and `recall`, "
        "and their results are withdrawn with the recipe (they remain in the git history: reports/tasks at commit "
        "63f85c4), as are the results measured under the former generators (`recall1` asked twice, bands counted from "
        "the last token, uniform filler) and seed 3's results under the generators before rows 30-31 (commit 2842f18), "
        "which remain in the git history too.")

    four = {run_of(q, r): r for r in range(44, 49)}
    alibi_won = [r for r in range(44, 48) if run_of(q, r)[0] == "alibi" and all_five[r]]
    alibi_lost = [r for r in range(44, 48) if run_of(q, r)[0] == "alibi" and not all_five[r]]
    (missed,) = alibi_lost
    nope_7, rope_7 = four[("nope", 7)], four[("rope", 7)]
    fourth = paragraph(
        "**After the three-layer track: a fourth layer** (rows 44-48: the recipe with `model.n_layers=4` and nothing "
        "else changed; `python train.py --config "
        "configs/tasks.yaml run.seed=7 run.out_dir=runs/recipe-search run.name=l4-alibi-s7 model.position.type=alibi "
        "model.n_layers=4`). The heads (below) suggested it: where ALiBi learned `recall1`, it read the fact through its "
        "induction head of the flattest slope, and three layers of four heads have three such heads.",
        f"With four layers ALiBi learned all five tasks on seeds {listed([str(run_of(q, r)[1]) for r in alibi_won])}, "
        f"from step {listed([number(learned_from(q, r)) for r in alibi_won])} on (rows "
        f"{listed([str(r) for r in alibi_won])}), where three layers had left `recall1` unlearned in the former track;",
        claim(f(missed)["recall"] >= 0.9 and first_learned(q, missed, "recall1") is None,
              f"on seed {run_of(q, missed)[1]}, where three layers had left `recall` unlearned, it learned `recall` and "
              f"left `recall1` at {pct(f(missed)['recall1'])}% (row {missed})."),
        claim(first_learned(q, nope_7, "copy") is None and first_learned(q, nope_7, "recall") is None
              and all(f(nope_7)[t] >= 0.9 for t in ("passkey", *SINGLE_HOP)),
              f"NoPE on seed 7 learned `passkey` ({pct(f(nope_7)['passkey'])}%) and both single-hop tasks, not `copy` "
              f"({pct(f(nope_7)['copy'])}%) or `recall` ({pct(f(nope_7)['recall'])}%; row {nope_7}). So a fourth layer "
              f"is not a recipe for every seed either: ALiBi missed a task on {WORDS.get(len(alibi_lost), 'one')} seed of "
              f"{WORDS[len(alibi_won) + len(alibi_lost)]}, NoPE two tasks on its one seed."),
        claim(all_five[rope_7], f"RoPE on seed 7 learned all five with it, from step {number(learned_from(q, rope_7))} "
                                f"on (row {rope_7})."))

    nope_12, alibi_12 = 49, 50
    a12, a8 = q.log(q.table[alibi_12]["log"]), q.log(q.table[missed]["log"])
    early = [a12[x]["recall1"] for x in a12 if x <= 6000]
    n12 = q.log(q.table[nope_12]["log"])
    tail = [n12[x]["recall"] for x in n12 if x > q.last_step(nope_12) - 4000]
    no_copy_recall = (16, 23, 25, nope_6, nope_7, nope_12)
    longer = paragraph(
        f"**And a longer schedule** (rows {nope_12}-{alibi_12}: four layers and {number(q.table[alibi_12]['step'])} "
        "steps, the cosine decay over all of them, `model.n_layers=4 train.max_steps=12000`). Both curves of the 8,000-step runs were still rising at their "
        "last step.",
        claim(all_five[alibi_12],
              f"ALiBi on seed {run_of(q, alibi_12)[1]} learned all five tasks from step "
              f"{number(learned_from(q, alibi_12))} on (row {alibi_12}): its `recall1` sat at {pct_span(early)} to step "
              f"6,000, then reached {pct(a12[6500]['recall1'])}% at 6,500 and {100 * a12[7000]['recall1']:.1f}% at "
              f"7,000, where the 8,000-step run was at {pct(a8[7250]['recall1'])}% by step 7,250 (its learning rate, "
              "decayed over 8,000 steps, lower at every step)."),
        claim(q.never_learned((nope_12,), ("copy", "recall")),
              f"NoPE on seed 7 reached `copy` {pct(f(nope_12)['copy'])}% and `recall` {pct(f(nope_12)['recall'])}% (row "
              f"{nope_12}; {pct(f(nope_7)['copy'])}% and {pct(f(nope_7)['recall'])}% with 8,000 steps), its `recall` "
              f"between {pct(min(tail))}% and {pct(max(tail))}% over the last 4,000 steps: more steps did not teach "
              "NoPE either task."),
        f"So four layers and 12,000 steps is the next candidate for RoPE and ALiBi, tried then on one seed each (rows "
        f"{rope_7} and {alibi_12} with 8,000 and 12,000 steps), not yet on seeds it was not chosen on; a run costs 1.5 "
        "times one of 8,000 steps.",
        claim(q.never_learned(no_copy_recall, ("copy", "recall")),
              f"NoPE learned `copy` and `recall` in no run of this search (rows {', '.join(map(str, no_copy_recall))})."))

    fresh = {run_of(q, r): r for r in range(51, 61)}
    seeds = sorted({s for _, s in fresh})
    ok = all(all_five[r] and q.table[r]["step"] == 12000 for r in fresh.values())
    last = {s: max(TASKS, key=lambda t: first_learned(q, fresh[("alibi", s)], t)) for s in seeds}
    by_last = {t: [s for s in seeds if last[s] == t] for t in ("recall1", "copy")}
    taught = [s for s in by_last["recall1"] if first_learned(q, fresh[("alibi", s)], "recall1") > 8000]
    s11, s13 = (q.log(q.table[fresh[("alibi", s)]]["log"]) for s in taught)
    alibi_seeds = [s for (run, s), r in {**fresh, ("alibi", 10): alibi_12}.items() if run == "alibi" and all_five[r]]
    t = track(reports / "tasks")
    curves: dict[tuple, dict] = {}  # the track's validation curves of those runs, as the search's logs hold them
    for r in t.training:
        curves.setdefault((r["run"], r["seed"]), {}).setdefault(r["step"], {})[r["task"]] = r["accuracy"]
    never = paragraph(
        f"**On seeds never used before** (rows {min(fresh.values())}-{max(fresh.values())}: four layers and 12,000 steps "
        f"on seeds {seeds[0]}-{seeds[-1]}, RoPE and ALiBi, the command above with `run.seed=11` and so on).",
        claim(ok, f"Both learned all five tasks on each of the {WORDS[len(seeds)]} seeds: RoPE from step "
                  f"{listed([number(learned_from(q, fresh[('rope', s)])) for s in seeds])} on, ALiBi from step "
                  f"{listed([number(learned_from(q, fresh[('alibi', s)])) for s in seeds])}."),
        claim(sorted(by_last["recall1"] + by_last["copy"]) == seeds and len(taught) == 2,
              f"ALiBi's last task was `recall1` on seeds {listed([str(s) for s in by_last['recall1']])} (`copy` on "
              f"{listed([str(s) for s in by_last['copy']])}), and on {listed([str(s) for s in taught])} the steps past "
              f"8,000 taught it: seed {taught[0]}'s climbed from {pct(s11[5000]['recall1'])}% at step 5,000 to "
              f"{pct(s11[8000]['recall1'])}% at 8,000 and {pct(s11[10750]['recall1'])}% at 10,750, seed {taught[1]}'s "
              f"sat at {100 * s13[8000]['recall1']:.1f}% at step 8,000 and reached {100 * s13[8750]['recall1']:.1f}% at "
              "8,750."),
        claim(all_five[alibi_12] and all_five[rope_7],
              f"With seed 10 (row {alibi_12}), ALiBi has learned all five tasks under this recipe on "
              f"{WORDS[len(alibi_seeds)]} seeds, {WORDS[len(seeds)]} of them never used before; RoPE on "
              f"{WORDS[len(seeds)]} never used before, and on seed 7 with 8,000 steps (row {rope_7})."),
        "That is the committed recipe, frozen here:",
        claim(all(curves[key] == q.log(q.table[r]["log"]) for key, r in fresh.items()),
              f"the track's seeds {t.seeds[0]}-{t.seeds[-1]} below are trained with it, their RoPE and ALiBi runs of "
              f"seeds {seeds[0]}-{seeds[-1]} those of rows {min(fresh.values())}-{max(fresh.values())}"),
        "(the "
        "Makefile's command trains them bit for bit: seed 11's RoPE gave the same losses and accuracies over its first "
        "500 steps), and a run that does not learn a task is a result, marked †, with its curve in "
        "[training.png](training.png).")
    return "\n\n".join([status, fourth, longer, never])


def search_nope(reports: Path) -> str:
    """The search for NoPE's `recall` after the track: alone, deeper, other learning rates and widths, positions, a
    curriculum (rows 61-69, 73-74)."""
    t, q = track(reports / "tasks"), Search(reports / "tasks" / "recipe-search")
    f = q.final
    alone, six = 61, 62
    mix = [t.acc("nope", "recall", t.L, s) for s in t.seeds]
    alone_most = at_most(q, (alone,), "recall")
    after = paragraph(
        f"**After the track: NoPE's `recall`** (rows {alone}-{six}, seed 101, one thread each, side by side; `python "
        "train.py --config configs/tasks.yaml run.seed=101 run.out_dir=runs/recipe-search run.name=nope-recall-only-s101 "
        f"model.position.type=nope data.source=tasks:recall train.max_steps={q.table[alone]['step']}`).",
        claim(set(f(alone)) == {"recall"} and alone_most < min(mix),
              f"Trained on `recall` alone, NoPE reached {pct(f(alone)['recall'])}% by step "
              f"{number(q.table[alone]['step'])} ({pct(alone_most)}% at most at any step), no higher than the "
              f"{pct_span(mix)} of the mix in the track: the other tasks are not what holds it back."),
        claim(all(f(six)[x] >= 0.9 for x in ("passkey", *SINGLE_HOP)) and f(six)["copy"] < 0.9
              and q.never_learned((alone, six), ("recall",)),
              f"With six layers (row {six}: `model.n_layers=6 train.max_steps={q.table[six]['step']}`) it learned "
              f"`passkey` and both single-hop tasks, and left `copy` at {pct(f(six)['copy'])}% and `recall` at "
              f"{pct(f(six)['recall'])}%. Neither is a recipe for NoPE's `recall`."))

    base, slow, fast, wide, faster = 45, 63, 64, 65, 66
    fb, fs, ff, fw, fx = f(base), f(slow), f(fast), f(wide), f(faster)
    most = at_most(q, (slow, fast, wide, faster), "recall")
    ends = [pct(f(r)["recall"]) for r in (slow, fast, faster, wide)]  # by lr, then width
    rate = paragraph(
        f"**A learning rate and width for NoPE** (rows {slow}-{faster}, seed 7 with four layers and 8,000 steps as in row "
        f"{base}, whose lr was 3e-3; one thread each, side by side; `python train.py --config configs/tasks.yaml "
        "run.seed=7 run.out_dir=runs/recipe-search run.name=nope-lr1e-2-s7 model.position.type=nope train.max_steps=8000 "
        "train.lr=1e-2 train.min_lr=1e-3`, or `model.d_model=128`). Zoology tunes "
        "both for every model on MQAR: the configs of its figure 2 sweep the lr from 1e-4 to 1e-2 and d_model from 64 to "
        "512 (Arora et al., arXiv 2312.04927; `zoology/experiments/paper_configs/iclr24_zoology_figure2/configs.py` in "
        "HazyResearch/zoology), for attention with learned absolute positions, not NoPE.",
        f"A validation reading is {q.sequences} sequences a task, so two readings are told apart only where their 95% "
        f"intervals over those sequences do not overlap (±{50 * (interval(0.5, q.sequences)[1] - interval(0.5, q.sequences)[0]):.0f} "
        "points at 50%).",
        claim(all(q.apart(fs[x], fb[x]) for x in ("copy", "passkey")) and q.apart(fx["copy"], ff["copy"])
              and first_learned(q, base, "copy") is None,
              f"With lr 1e-3 NoPE learned less than with 3e-3 (`copy` {pct(fs['copy'])}% and `passkey` "
              f"{pct(fs['passkey'])}%, against {pct(fb['copy'])}% and {pct(fb['passkey'])}%); with 1e-2 it learned "
              f"`copy` from step {number(first_learned(q, fast, 'copy'))} ({pct(ff['copy'])}% at 8,000) and `passkey` "
              f"from step {number(first_learned(q, fast, 'passkey'))}, where 3e-3 had left `copy` at {pct(fb['copy'])}% "
              f"(and {pct(f(49)['copy'])}% after 12,000 steps, row 49); with 3e-2 `copy` fell back to "
              f"{pct(fx['copy'])}%."),
        claim(all(fw[x] <= fb[x] and not q.apart(fw[x], fb[x]) for x in INDUCTION),
              f"d 128 learned no more than d 64 (`copy` {pct(fw['copy'])}%, `passkey` {pct(fw['passkey'])}%: within "
              f"row {base}'s intervals)."),
        claim(most <= fb["recall"] and q.never_learned((slow, fast, wide, faster), ("recall",)),
              f"`recall` ended at {'%, '.join(ends[:-1])}% and {ends[-1]}%, {pct(most)}% at most at any step, no higher "
              f"than row {base}'s {pct(fb['recall'])}%: neither a learning rate nor width is a recipe for NoPE's "
              "`recall`."))

    shown = (67, 68, 69)
    rows = [f(r) for r in shown]
    start_token_clock = q.minutes([shown[1]])
    most = at_most(q, shown, "recall")
    positions = paragraph(
        f"**Positions for NoPE** (rows {shown[0]}-{shown[-1]}, seed 7 with four layers and 8,000 steps as in row {base}). "
        "NoPE answers `recall` like a solver that knows which "
        "values the facts hold but not which key holds each ([Where the heads look](#where-the-heads-look)); binding a "
        "value to the key just before it takes telling neighbouring positions apart, which NoPE can only infer. Three "
        f"ways to make that easier: half the length (row {shown[0]}, `model.max_seq_len=64`: half the positions to tell "
        f"apart), a start token before every sequence (row {shown[1]}, `data.start_token=true data.vocab_size=163`: each "
        "sequence one token right behind a token of its own, id 162; a head attending evenly over the prefix gives a "
        "fixed first token the share 1/(t+1) at position t, from which a later layer can read t"
        + (f"; {start_token_clock}, beside another run" if start_token_clock else "") + ") "
        f"and eight heads of 8 instead of four of 16 (row {shown[2]}, `model.n_heads=8 model.n_kv_heads=8`).",
        claim(all(r[x] >= 0.9 for r in rows for x in ("copy", "passkey", *SINGLE_HOP))
              and q.never_learned(shown, ("recall",)) and fb["copy"] < 0.9,
              f"Each learned `copy` ({per_seed(r['copy'] for r in rows)}, where row {base} left {pct(fb['copy'])}%), "
              f"`passkey` and both single-hop tasks, and none `recall`: {per_seed(r['recall'] for r in rows)} at step "
              f"8,000, {pct(most)}% at most at any step. Shorter sequences, a start token and more heads are not a "
              "recipe for NoPE's `recall` either."))

    curr = (73, 74)
    curriculum_clock = q.minutes(curr)
    most = at_most(q, curr, "recall")
    curriculum = paragraph(
        f"**A curriculum over distance for NoPE** (rows {curr[0]}-{curr[1]}, seed 7 as row {base}, 8,000 steps"
        + (f"; {curriculum_clock}, each beside another run" if curriculum_clock else "")
        + "): of the remedies the track was asked to try "
        "(models per task, a curriculum over distance, more heads or width, a longer schedule, a learning-rate sweep), the "
        "one no NoPE run had tried. `data.curriculum=[32, 4000]` places every training fact within 32 tokens of the "
        "token that asks for it at step 0, a bound growing linearly to the whole sequence by step 4,000 (validation as "
        "always, facts anywhere), at lr 3e-3 and 1e-2 (`train.lr=1e-2 train.min_lr=1e-3`).",
        claim(q.never_learned(curr, ("recall",)) and all(f(r)[x] >= 0.9 for r in curr for x in SINGLE_HOP),
              f"`recall` ended at {per_seed(f(r)['recall'] for r in curr)} ({pct(most)}% at most at any step), `copy` "
              f"at {per_seed(f(r)['copy'] for r in curr)}: near facts first do not teach NoPE to bind a key to its "
              "value either."))
    return "\n\n".join([after, rate, positions, curriculum])


def fewer_steps(reports: Path) -> str:
    """"Fewer steps at a higher learning rate": ALiBi with 8,000 steps at lr 1e-2 (rows 70-72)."""
    q = Search(reports / "tasks" / "recipe-search")
    f = q.final
    ten, eleven, thirteen = 70, 71, 72
    committed = {run_of(q, r)[1]: r for r in range(51, 61) if run_of(q, r)[0] == "alibi"}
    eight_k = 47  # seed 10 with 8,000 steps at 3e-3
    return paragraph(
        f"**Fewer steps at a higher learning rate** (rows {ten}-{thirteen}: ALiBi, the encoding that learned last, with "
        "8,000 steps at lr 1e-2 decayed to 1e-3, `train.max_steps=8000 train.lr=1e-2 train.min_lr=1e-3`).",
        claim(learned_from(q, ten) == q.table[ten]["step"] and first_learned(q, eight_k, "recall1") is None
              and learned_from(q, eleven) < learned_from(q, committed[11])
              and q.never_learned((thirteen,), ("recall", "recall1")),
              f"On seed 10, where 8,000 steps at 3e-3 left `recall1` at {pct(f(eight_k)['recall1'])}% (row {eight_k}), "
              f"it learned all five tasks at its last step (`recall1` {pct(f(ten)['recall1'])}%); on seed 11 from step "
              f"{number(learned_from(q, eleven))}, where the committed recipe took to step "
              f"{number(learned_from(q, committed[11]))}; on seed 13 it left `recall` at {pct(f(thirteen)['recall'])}% "
              f"and `recall1` at {pct(f(thirteen)['recall1'])}% ({pct(at_most(q, (thirteen,), 'recall1'))}% at most), "
              f"where the committed recipe learned both by step {number(learned_from(q, committed[13]))}. A higher "
              "learning rate does not carry ALiBi through 8,000 steps on every seed, so the recipe stays at 12,000 "
              "steps and a seed over the budget."))


def recipe(reports: Path) -> str:
    """"The recipe": configs/tasks.yaml and the fine-tunes' configs/extend-4x-tasks.yaml, as data/tasks.py draws."""
    root = reports.parent
    cfg, extend = (load_config(Config, root / "configs" / name) for name in ("tasks.yaml", "extend-4x-tasks.yaml"))
    m, t, e = cfg.model, cfg.train, extend.model
    drawn = dict(part.split("*") if "*" in part else (part, "1") for part in cfg.data.source.split(":")[1].split(","))
    (often,) = [name for name, k in drawn.items() if k != "1"]
    times = {2: "twice", 3: "three times", 4: "four times"}[int(drawn[often])]
    grouped = "no grouped KV" if m.n_kv_heads == m.n_heads else f"{m.n_kv_heads} KV heads"
    decay = "a cosine decay" if t.decay_steps in (None, t.max_steps) else f"a cosine decay over {number(t.decay_steps)}"
    factor = e.position.scaling.factor
    return paragraph(
        "One recipe for every encoding, `configs/tasks.yaml` (rows 50-60 below): "
        f"d {m.d_model}, {m.n_layers} layers of {m.n_heads} heads ({m.d_model // m.n_heads} dimensions each, {grouped}), "
        f"L = {m.max_seq_len}, a mix of the {WORDS[len(drawn)]} tasks with `{often}` drawn {times} as often as each other "
        f"(`data.source: {cfg.data.source}`), {number(t.max_steps)} steps of {t.batch_size * t.grad_accum} sequences, "
        f"lr {rate(t.lr)} with warmup {t.warmup_steps} and {decay} to {rate(t.min_lr)}. The filler is not uniform noise: each "
        "filler token continues the one two back (the next symbol) with probability "
        f"{FOLLOW:g}, and training predicts one filler token in {WORDS[round(1 / FILLER_TARGETS)]} "
        "beside the answers (validation and `eval.tasks` score the answers only). Predicting that filler needs the token "
        "before the current one, which is what makes a previous-token head worth forming: text has such local structure, "
        f"uniform noise has none. `configs/extend-4x-tasks.yaml` continues the RoPE run {extend.train.max_steps} steps "
        f"at {e.max_seq_len} tokens with PI (s = {factor:g}), YaRN (s = {factor:g}), or no scaling (the control).")
