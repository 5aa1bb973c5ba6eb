"""The task track's committed rows and logs (reports/tasks), and the sentences of other pages about them.

The track's page renders its measured paragraphs from these rows (render/task_track/, checked by
tests/test_rendered.py); what stays here checks the data itself, the model properties those paragraphs assume, and the
sentences about the track in reports/extrapolation/README.md (README.md's paragraph on it is rendered).
"""
import functools
import json
import re
import statistics
from pathlib import Path

import pytest
import torch
from conftest import context_defaults, prose, says

from render.rows import previous_rows

ROOT = Path(__file__).resolve().parents[1]
REPORT = ROOT / "reports" / "extrapolation"
L, X2, X4, X8, X16 = 128, 256, 512, 1024, 2048


STUDY = prose(REPORT / "README.md")


# --- the task track: reports/tasks/README.md ---------------------------

TASK_REPORT = ROOT / "reports" / "tasks"
TASKS_PAGE = prose(TASK_REPORT / "README.md")
TASK_NAMES = ("copy", "recall", "passkey", "recall1", "passkey1")
INDUCTION = ("copy", "recall", "passkey")


def recipe_log(name: str) -> dict[int, dict[str, float]]:
    """{step: {task: validation accuracy}} of one run of the recipe search (recipe-search/NAME.jsonl)."""
    rows = [json.loads(line) for line in (TASK_REPORT / "recipe-search" / f"{name}.jsonl").read_text().splitlines()]
    return {r["step"]: {k.removeprefix("val_acc_"): v for k, v in r.items() if k.startswith("val_acc_")} for r in rows}


def recipe_table() -> dict[int, dict[str, str]]:
    """The rows of the report's recipe-search table (rendered from recipe-search/rows.json and the logs), by number:
    {#: {recipe, log, step}}, the step as the table writes it."""
    rows = json.loads((TASK_REPORT / "recipe-search" / "rows.json").read_text())
    return {r["row"]: {"recipe": r["recipe"], "log": r["log"], "step": f"{r['step']}" + " (stopped)" * r["stopped"]}
            for r in rows}


def test_the_chance_of_recall1_is_among_4_values():
    from data.tasks import TASKS
    says(TASKS_PAGE, "16 (4 for `recall1`, whose values are drawn from 4; 10 digits for `passkey`)")
    import numpy as np
    answers = [TASKS["recall1"].make(np.random.default_rng(seed), 128) for seed in range(50)]
    assert len({int(s.tokens[a]) for s in answers for a in s.answers}) == 4 and TASKS["recall1"].chance == 1 / 4


def pct(x: float) -> str:
    return f"{100 * x:.0f}"


def withdrawn_track(commit: str) -> dict[tuple[str, int, str], bool]:
    """eval.tasks' learned-at-L of the track's results as committed at `commit` (withdrawn since; read from git)."""
    import gzip
    import subprocess
    from render.tasks import learned
    shown = subprocess.run(["git", "show", f"{commit}:reports/tasks/results.json.gz"], cwd=ROOT, capture_output=True)
    if shown.returncode:
        pytest.skip(f"commit {commit} is not in this clone's history (a shallow clone?)")
    return learned(json.loads(gzip.decompress(shown.stdout)))


def test_seed_5s_continuations_start_from_the_runs_themselves():
    table = recipe_table()
    for short, longer in ((32, 34), (33, 35)):  # the continuation starts from the run itself, at the final lr
        log, more = recipe_log(table[short]["log"]), recipe_log(table[longer]["log"])
        assert all(more[step] == acc for step, acc in log.items()) and max(more) == int(table[longer]["step"].split()[0])


def test_the_former_seeds_6_to_10_are_withdrawn_where_the_page_says():
    """In each former seed ALiBi missed a task and NoPE `copy` and `recall` (the page's status of the three-layer recipe)."""
    former = withdrawn_track("63f85c4")
    assert {s for _, s, _ in former} == {6, 7, 8, 9, 10}
    for seed in (6, 7, 8, 9, 10):
        assert sum(not former[("alibi", seed, t)] for t in TASK_NAMES) == 1
        assert not former[("nope", seed, "copy")] and not former[("nope", seed, "recall")]


# --- the track's seeds (reports/tasks/results.json.gz, training.json) -----------------------------------

def track_results():
    from render.tasks import pooled
    rows = previous_rows(TASK_REPORT / "results.json.gz", "eval.tasks", "accuracy")
    return rows, pooled(rows)


TRACK_ROWS, TRACK_POOLED = track_results()
TRACK_SEEDS = (11, 12, 13, 14, 15, 16)
TRAINING = json.loads((TASK_REPORT / "training.json").read_text())
AT_L = {"rope": ("none", L), "alibi": ("none", L), "nope": ("none", L), "t5": ("none", L),
        "rope-pi": ("linear (fine-tuned)", X4), "rope-yarn": ("yarn (fine-tuned)", X4),
        "rope-continued": ("none (fine-tuned)", X4)}
SCALED = {m: f"{m} (s = length/L)" for m in ("linear", "ntk", "yarn")} | {"dynamic": "dynamic (s = T/L, cached)"}


def learned_at_L(run: str, seed: int = 11) -> set[str]:
    """The tasks a run learned by eval.tasks' own rule (results.md's †), not a copy of it."""
    from render.tasks import learned
    return {t for (r, s, t), ok in learned(TRACK_ROWS).items() if (r, s) == (run, seed) and ok}


def added_runs(seed: int) -> set[str]:
    """make extrapolation-tasks-added's runs in the rows of a seed (render.task_track.methods.ADDED), on its seeds 11-13."""
    from render.task_track.methods import ADDED
    added = {r["run"] for r in TRACK_ROWS if r["seed"] == seed} - set(AT_L)
    assert added <= set(ADDED) and (not added or seed in (11, 12, 13)), added
    return added


def test_the_track_is_every_run_of_every_seed_at_every_length_and_band():
    from render.rows import curve_label
    from render.task_track.methods import label_of
    from render.task_track.track import track
    assert {r["seed"] for r in TRACK_ROWS} == set(TRACK_SEEDS)
    for seed in TRACK_SEEDS:
        rows = [r for r in TRACK_ROWS if r["seed"] == seed]
        added = added_runs(seed)
        assert {r["run"] for r in rows} == set(AT_L) | added
        assert {curve_label(r) for r in rows if r["run"] == "rope"} == {"none", *SCALED.values()}
        own = [(r, label_of(track(TASK_REPORT), r)) for r in sorted(added)]
        for run, label in [(r, AT_L[r][0]) for r in AT_L] + [("rope", s) for s in SCALED.values()] + own:
            for task in TASK_NAMES:
                cells = {(r["length"], r["distance"]) for r in rows
                         if (r["run"], r["task"]) == (run, task) and curve_label(r) == label}
                assert {n for n, _ in cells} == {L, X2, X4, X8, X16}, (run, label, task)
                assert len(cells) == 1 + 2 + 3 + 4 + 5, (run, label, task)  # (0, L], then doubling bands to n
    from_scratch = {(run, s) for s in TRACK_SEEDS for run in AT_L if AT_L[run][1] == L}
    from_scratch |= {(run, s) for s in TRACK_SEEDS for run in added_runs(s) if run != "drope"}  # DroPE is continued
    # a continued run's curve counts its own steps and is marked: DroPE's recalibration, a fine-tune's
    assert {(r["run"], r["seed"]) for r in TRAINING if not r.get("continued")} == from_scratch
    assert {(r["run"], r["seed"]) for r in TRAINING if r.get("continued")} <= \
        {(run, s) for s in TRACK_SEEDS for run in ("drope", "rope-pi", "rope-yarn", "rope-continued")}


def test_every_randomized_run_of_the_track_is_also_measured_with_drawn_positions():
    """make task-drawn's rows (reports/tasks/drawn): each randomized-position run of the track, every task at 1x-8x L in
    every band, scored with positions drawn as in training; at 16x L (every position drawn) the track's own rows."""
    from render.tasks import DRAWN
    rows = previous_rows(TASK_REPORT / "drawn" / "results.json.gz", "eval.tasks", "accuracy")
    randomized = {(r["run"], r["seed"]) for r in TRACK_ROWS if r["run"].endswith("-randomized")}
    assert randomized and {(r["run"], r["seed"]) for r in rows} == randomized
    assert {r["scaling"] for r in rows} == {DRAWN}
    for run, seed in randomized:
        for task in TASK_NAMES:
            cells = {(r["length"], r["distance"]) for r in rows if (r["run"], r["seed"], r["task"]) == (run, seed, task)}
            assert {n for n, _ in cells} == {L, X2, X4, X8} and len(cells) == 1 + 2 + 3 + 4, (run, seed, task)



def test_what_a_randomized_run_left_unlearned_with_drawn_positions_is_said_with_its_seeds():
    """The page names each task a randomized run left below 90% at L even with drawn positions, with the seeds where it
    did, as the drawn rows have it (seed 12 of ALiBi's learned three of the four tasks seed 11 had not)."""
    from render.prose import seeds_named
    from render.task_track.methods import SHORT
    from render.tasks import learned
    ok = learned(previous_rows(TASK_REPORT / "drawn" / "results.json.gz", "eval.tasks", "accuracy"))
    seeds = sorted({s for _, s, _ in ok})
    assert len(seeds) > 1
    for run in {run for run, _, _ in ok}:
        lost = {task: [s for s in seeds if not ok[(run, s, task)]] for task in TASK_NAMES}
        named = [f"`{task}` ({seeds_named(ss)})" for task, ss in lost.items() if ss]
        if named:
            says(TASKS_PAGE, f"{SHORT[run]} leaves {named[0]}")
            assert all(n in TASKS_PAGE for n in named), (run, named)
        else:
            assert f"{SHORT[run]} leaves" not in TASKS_PAGE

def test_a_seed_that_some_added_methods_have_not_run_shows_as_such(tmp_path):
    """The added methods' seeds arrive a few runs at a time: a method without a seed gets '-' there, and what it learned
    or kept is said over the seeds it ran, not counted as a failure on the others (here KERPLE's seed 11 taken out)."""
    import gzip
    import shutil
    from render.task_track.methods import ADDED, added_sentence, every_method
    from render.task_track.track import track
    shutil.copytree(TASK_REPORT, tmp_path / "reports" / "tasks")
    for folder in ("make", "configs"):
        (tmp_path / folder).symlink_to(ROOT / folder)
    rows = [r for r in TRACK_ROWS if (r["run"], r["seed"]) != ("kerple", 11)]
    (tmp_path / "reports" / "tasks" / "results.json.gz").write_bytes(gzip.compress(json.dumps(rows).encode()))
    text = every_method(tmp_path / "reports")
    table = {line.split(" | ")[0].strip("| "): line for line in text.split("\n\n")[1].splitlines()}  # the first
    assert "; - where a run has not been trained on that seed yet" in " ".join(text.split())
    assert table["KERPLE"].split(" | ")[2].startswith("- ") and table["learned"].endswith("| n/a | n/a |")
    assert "(11)" not in table["KERPLE"].split(" | ")[1]  # not listed as unlearned on the seed it did not run
    assert "Learned all five tasks at L on every seed it ran: FIRE," in " ".join(text.split())
    present = {r["run"] for r in rows} & set(ADDED)
    assert f"seed 11 for {len(present) - 1}" in added_sentence(track(tmp_path / "reports" / "tasks"))


def test_each_task_an_added_run_left_unlearned_is_shown_with_its_curve_and_the_values_only_level():
    """Every task an added run (but the randomized runs and DroPE, read elsewhere) left below 90% at L has a row: its
    validation readings at half, three quarters and the end of training from training.json, and its accuracy at L;
    the two lists under the table follow their rules (readings apart; the values-only level inside the interval)."""
    from data.tasks import values_only_level
    from render.task_track.methods import SHORT, unlearned_curves
    from render.task_track.track import track
    from render.tasks import interval, learned
    t = track(TASK_REPORT)
    present = [run for run in SHORT if run in t.ran]
    text = unlearned_curves(ROOT / "reports", t, present)
    rows = [line.split(" | ") for line in text.splitlines() if line.startswith("| ") and "---" not in line][1:]
    lost = {(run, s, task) for (run, s, task), ok in learned(TRACK_ROWS).items()
            if run in present and not ok and not run.endswith("-randomized") and run != "drope"}
    names = {SHORT[run]: run for run in present}
    shown = {(names[r[0].strip("| ")], int(r[1]), r[2].strip("`")) for r in rows}
    assert lost and shown == lost
    level = {task: values_only_level(task, L) for task in ("recall", "recall1")}
    for r in rows:
        run, s, task = names[r[0].strip("| ")], int(r[1]), r[2].strip("`")
        curve = {x["step"]: x["accuracy"] for x in TRAINING if (x["run"], x["seed"], x["task"]) == (run, s, task)}
        assert [int(c) for c in r[3:6]] == [round(100 * curve[step]) for step in (6000, 9000, 12000)]
        acc = t.acc(run, task, L, s)
        lo, hi = interval(acc, t.sequences[(run, s, task, L)])
        assert r[6] == f"{100 * acc:.0f} ({100 * lo:.0f}-{100 * hi:.0f})"
        said = f"{SHORT[run]} on `{task}` (seed {s})" in " ".join(text.split("Not told apart")[-1].split())
        assert said == (level.get(task) is not None and lo <= level[task] <= hi), (run, s, task)


def test_a_far_back_anchor():
    for setting, sinks, window in (("window64", 0, 64), ("window448", 0, 448), ("sinks64", 64, 384)):
        rows = previous_rows(TASK_REPORT / "anchor" / setting / "results.json.gz", "eval.tasks", "accuracy")
        assert {(r["context"]["sinks"], r["context"]["window"]) for r in rows} == {(sinks, window)}  # the Makefile's
        assert {r["seed"] for r in rows} == set(TRACK_SEEDS)


def test_the_repeated_run_equals_the_track():
    """The second clone's files (reports/tasks/reproduction) against the track's: its 75 eval.tasks rows and its
    validation curve (training.json holds the track's; its metrics.jsonl is not committed)."""
    says(TASKS_PAGE, "ALiBi's run of seed 11 trained to byte-identical weights, with a `metrics.jsonl` equal in every field "
                     "but tokens/s, and its 75 rows (five tasks, 15 length and band cells each) equal those of "
                     "results.json.gz in every field")
    again = TASK_REPORT / "reproduction"
    rows = [r for r in TRACK_ROWS if (r["run"], r["seed"]) == ("alibi", 11)]
    assert previous_rows(again / "results.json.gz", "eval.tasks", "accuracy") == rows
    assert len(rows) == 75 == len(TASK_NAMES) * (1 + 2 + 3 + 4 + 5)
    curve = {(t, r["step"]): r[f"val_acc_{t}"] for r in map(json.loads, (again / "metrics.jsonl").read_text().splitlines())
             if "val_loss" in r for t in TASK_NAMES}
    assert curve == {(r["task"], r["step"]): r["accuracy"] for r in TRAINING if (r["run"], r["seed"]) == ("alibi", 11)}


def test_the_repeated_runs_weights_hash_is_recorded_for_sha256sum():
    """The weights are not committed (runs/ never is); the hash sits where `sha256sum -c` reads it."""
    says(TASKS_PAGE, "`sha256sum -c reports/tasks/reproduction/weights.sha256` checks the weights of a run trained again")
    digest, name = (TASK_REPORT / "reproduction" / "weights.sha256").read_text().split()
    assert re.fullmatch(r"[0-9a-f]{64}", digest) and name == "runs/tasks/seed11/alibi/model_0012000.safetensors"


def test_each_rope_run_trained_again_for_drope_is_set_beside_the_committed_one():
    """reproduction/rope-seedN (the RoPE run each DroPE run continues): the page gives its `copy`, `recall` and
    `passkey` at 16x L with training-free YaRN beside the committed run's, and says `copy` went both ways only while
    one such run is above its committed run and another below."""
    from render.tasks import pooled
    yarn, retrieval = SCALED["yarn"], ("copy", "recall", "passkey")
    folders = sorted((TASK_REPORT / "reproduction").glob("rope-seed*"))
    assert [f.name for f in folders][:2] == ["rope-seed11", "rope-seed12"]
    assert all((f / "metrics.jsonl").exists() for f in folders)  # complete: the page leaves out a folder without it
    moved = set()
    for folder in folders:
        seed = int(folder.name.removeprefix("rope-seed"))
        again = pooled(previous_rows(folder / "results.json.gz", "eval.tasks", "accuracy"))
        now = [round(100 * again[("rope", seed, task, yarn, X16)]) for task in retrieval]
        then = [round(100 * TRACK_POOLED[("rope", seed, task, yarn, X16)]) for task in retrieval]
        says(TASKS_PAGE, f"keeps `copy` {now[0]}%, `recall` {now[1]}% and `passkey` {now[2]}%, the committed run "
                         f"{then[0]}%, {then[1]}% and {then[2]}%")
        moved.add((now[0] > then[0]) - (now[0] < then[0]))
    assert ("`copy` at 16x L with YaRN went both ways" in TASKS_PAGE) == ({-1, 1} <= moved)


def wilson(p: float, n: int) -> tuple[float, float]:
    """The 95% Wilson interval of an accuracy over n sequences, written out here rather than imported."""
    centre, half = (p + 1.96 ** 2 / (2 * n)) / (1 + 1.96 ** 2 / n), 1.96 * (
        p * (1 - p) / n + 1.96 ** 2 / (4 * n * n)) ** 0.5 / (1 + 1.96 ** 2 / n)
    return centre - half, centre + half


DROPE_SEEDS = (11, 12, 13)


def at_16x(path: Path, run: str, scaling: str) -> dict[tuple, float]:
    """{(seed, task): accuracy at 16x L pooled over the bands} of one run and scaling (or context method) in an
    eval.tasks folder, counted here."""
    hits = {}
    for r in previous_rows(path, "eval.tasks", "accuracy"):
        if (r["run"], r["length"], r["scaling"]) == (run, X16, scaling):
            h = hits.setdefault((r["seed"], r["task"]), [0, 0])
            h[0], h[1] = h[0] + round(r["accuracy"] * r["answers"]), h[1] + r["answers"]
    return {k: a / n for k, (a, n) in hits.items()}


def sides(one: dict, other: dict) -> tuple[str, str]:
    """The tasks where `one` is above `other` in every DroPE seed, and below, their 95% intervals over the 120
    sequences of a 16x cell apart: ('`copy` and `recall`', 'no task')."""
    out = {}
    for task in TASK_NAMES:
        got = set()
        for s in DROPE_SEEDS:
            (lo_a, hi_a), (lo_b, hi_b) = wilson(one[(s, task)], 120), wilson(other[(s, task)], 120)
            got.add("above" if lo_a > hi_b else "below" if hi_a < lo_b else "level")
        out[task] = got.pop() if len(got) == 1 else "mixed"

    def listed(side):
        items = [f"`{t}`" for t in TASK_NAMES if out[t] == side] or ["no task"]
        return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]
    return listed("above"), listed("below")


def said(one: dict, other: dict) -> str:
    above, below = sides(one, other)
    return f"above on {above}, below on {below}"


def test_drope_against_yarn_and_the_context_methods_is_said_as_the_rows_are():
    """DroPE at 16x L against training-free YaRN (the README's sentence) and against each context method on the same
    seeds' RoPE runs (the page): above or below on a task only where the 95% intervals over its 120 sequences are apart
    in every seed."""
    assert {r["seed"] for r in TRACK_ROWS if r["run"] == "drope"} == set(DROPE_SEEDS)
    cells = [(r["seed"], r["task"], r["samples"]) for r in TRACK_ROWS if (r["run"], r["length"]) == ("drope", X16)]
    assert {sum(n for s_, t_, n in cells if (s_, t_) == (s, t)) for s in DROPE_SEEDS for t in TASK_NAMES} == {120}
    drope = at_16x(TASK_REPORT / "results.json.gz", "drope", "none (fine-tuned)")
    yarn = at_16x(TASK_REPORT / "results.json.gz", "rope", "yarn")
    says(prose(ROOT / "README.md"), f"DroPE against training-free YaRN at 16x (intervals apart in every seed): "
                                    f"{said(drope, yarn)}")
    names = {"self-extend": "Self-Extend", "rerope": "ReRoPE", "leaky-rerope": "Leaky ReRoPE", "dca": "DCA",
             "sinks": "the attention sinks", "logn": "log-n"}
    for method, name in names.items():
        above, below = sides(drope, at_16x(TASK_REPORT / "context" / method / "results.json.gz", "rope", method))
        says(TASKS_PAGE, f"above {name} on {above} and below it on {below}")


def test_drope_recalibrated_8x_as_long_is_said_as_its_rows_are():
    """make task-drope-long's rows (reports/tasks/drope-long): each DroPE seed recalibrated again for 2,000 steps, and
    the page's sentence on what the extra steps changed at 16x L, recomputed here."""
    folder = TASK_REPORT / "drope-long"
    rows = previous_rows(folder / "results.json.gz", "eval.tasks", "accuracy")
    assert {(r["run"], r["seed"]) for r in rows} == {("drope-long", s) for s in DROPE_SEEDS}
    curves = json.loads((folder / "training.json").read_text())
    assert {max(r["step"] for r in curves if r["seed"] == s) for s in DROPE_SEEDS} == {2000}
    assert all(r["continued"] for r in curves)
    longer = at_16x(folder / "results.json.gz", "drope-long", "none (fine-tuned)")
    drope = at_16x(TASK_REPORT / "results.json.gz", "drope", "none (fine-tuned)")
    yarn = at_16x(TASK_REPORT / "results.json.gz", "rope", "yarn")
    says(TASKS_PAGE, f"With 2,000 steps against 250, at 16x L (95% intervals over sequences apart in every seed): "
                     f"{said(longer, drope)}. Against training-free YaRN: {said(longer, yarn)}.")
    from render.tasks import learned
    unlearned = {run: sum(not ok for (r, _, _), ok in learned(cells).items() if r == run)
                 for run, cells in (("drope", TRACK_ROWS), ("drope-long", rows))}
    assert unlearned["drope"] > unlearned["drope-long"]
    says(prose(ROOT / "README.md"), f"with 8x the recalibration, fewer tasks below 90% at L, at 16x against the "
                                    f"shorter: {said(longer, drope)}")


def test_the_16x_heads_probe_covers_every_run_on_copy():
    far = {(r["run"], r["seed"]): r for r in json.loads((TASK_REPORT / "heads-16x" / "heads.json").read_text())}
    assert set(far) == {(run, s) for run in ("rope", "alibi", "nope", "t5") for s in TRACK_SEEDS}
    assert {(r["task"], r["length"]) for r in far.values()} == {("copy", X16)}


# --- training-free context methods on the track (reports/tasks/context) ----------------------------------

CONTEXT_SEEDS = {"self-extend": TRACK_SEEDS} | {m: (11, 12, 13) for m in ("rerope", "leaky-rerope", "dca", "sinks", "logn")}


@functools.cache
def context_rows(method: str) -> list[dict]:
    """make task-context's rows of one method: its seeds, at its defaults, on RoPE and ALiBi."""
    rows = previous_rows(TASK_REPORT / "context" / method / "results.json.gz", "eval.tasks", "accuracy")
    assert {r["seed"] for r in rows} == set(CONTEXT_SEEDS[method])
    assert all(r["context"] == {"type": method, **context_defaults(method)} for r in rows)
    assert {(r["run"], r["seed"]) for r in rows} == {(run, s) for s in CONTEXT_SEEDS[method] for run in ("rope", "alibi")}
    return rows


def test_context_methods_on_the_track_are_the_makefiles():
    for method in CONTEXT_SEEDS:
        context_rows(method)
    assert sorted(p.name for p in (TASK_REPORT / "context").iterdir()) == sorted(CONTEXT_SEEDS)


def test_the_pages_shown_distances_are_the_models():
    from model.context import CONTEXT_METHODS
    from render.task_track.context import leaky_rerope_distance, self_extend_distance
    method = CONTEXT_METHODS["self-extend"](group_size=4, window=32)  # the defaults at L = 128
    for n in (128, 512):
        assert int(method.distance(torch.tensor([n - 1]), torch.tensor([0]))[0, 0]) == self_extend_distance(n - 1, 4, 32)
    method = CONTEXT_METHODS["leaky-rerope"](window=16, k=16.0)
    for d in (127, 1024, 2047):
        shown = float(method.distance(torch.tensor([X16 - 1]), torch.tensor([X16 - 1 - d]))[0, 0])
        assert shown == pytest.approx(leaky_rerope_distance(d, 16, 16.0))


def test_the_extrapolation_study_sums_up_log_n_on_the_track():
    says(STUDY, "on the task track (RoPE and ALiBi; T5 was not run there) it moved ALiBi's far retrieval both ways, "
                "mostly within the noise of a cell.")
    assert {r["run"] for r in context_rows("logn")} == {"rope", "alibi"}


# --- where the heads look: reports/tasks/heads/heads.json (eval.heads) ------------------------------------

@functools.cache
def heads() -> dict[tuple[str, int, str], dict]:
    """{(encoding, seed, task): {accuracy, share (layers x heads), top: (layer, head), most: largest share}}."""
    out = {}
    for r in json.loads((TASK_REPORT / "heads" / "heads.json").read_text()):
        share = torch.tensor(r["share"])
        layer, head = divmod(int(share.argmax()), share.shape[1])
        out[(r["run"], r["seed"], r["task"])] = {**r, "top": (layer, head), "most": share.max().item()}
    return out


def test_the_heads_probe_covers_every_recipe_run_of_the_track():
    from render.task_track.methods import ADDED
    runs = {(run, seed) for run, seed, _ in heads()}
    encodings = {(e, s) for s in TRACK_SEEDS for e in AT_L if AT_L[e][1] == L}  # the fine-tunes aside
    assert encodings <= runs and {run for run, _ in runs - encodings} <= set(ADDED)  # and the added encodings


def test_the_pages_alibi_slopes_are_the_models():
    from model.positions import alibi_slopes
    from render.task_track.track import alibi_slope
    assert [f"1/{round(1 / v)}" for v in alibi_slopes(4).tolist()] == [alibi_slope(h, 4) for h in range(4)]


def test_the_bag_solvers_level_in_heads_is_the_task_tables():
    from data.tasks import values_only_level
    bag = heads()[("nope", 11, "recall")]["bag_by_order"]
    assert abs(values_only_level("recall", 128) - statistics.mean(bag)) < 0.01  # the task table's level, its sequences
