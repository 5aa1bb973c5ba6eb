"""Each comparative sentence of studies/tasks/README.md and of README.md's track paragraph, proved from the committed
rows: a predicate of the track's cells (studies.tasks.values.track), which a changed row breaks."""
import json
import sys

import pytest

from data.tasks import TASKS as SPECS, values_only_level
from eval.results.tasks import DRAWN, LEARNED
from studies.report import filled
from studies.stats import wilson
from studies.tasks.values import (
    ADDED, AGAIN, INDUCTION, L, OWN, TASKS, X16, YARN, anchor, at, cells, learned, retrain_moves, rows, seeds,
    side, sides, study, track)

DROPE = OWN["drope"]  # DroPE's own curve: continued without a scaling


def every(c: dict, a: str, b: str, tasks, length: int, want: int, la="none", lb="none", runs=None) -> bool:
    """a (scaling la) is `want` (1 above, -1 below, 0 level) of b (lb) on every task and seed, for each pair of runs."""
    return all(side(c[(ra, s, t, la, length)], c[(rb, s, t, lb, length)]) == want for ra, rb in (runs or [(a, b)])
               for t in tasks for s in set(seeds(c, ra, la)) & set(seeds(c, rb, lb)))


def drope_below_yarn(c: dict, run: str, tasks) -> bool:
    return every(c, run, AGAIN, tasks, X16, -1, DROPE, YARN)


def test_claim_learned_at_l():
    c = track()
    assert all(learned(c, run, s) == set(TASKS) for run in ("rope", "alibi", AGAIN) for s in seeds(c, run))
    assert all(learned(c, "nope", s) == set(TASKS) - {"recall"} for s in seeds(c, "nope")) and seeds(c, AGAIN)


def test_claim_nope_recall_values_only():
    level = values_only_level("recall", L)
    assert all(lo <= level <= hi for lo, hi in (wilson(a * n, n) for a, n in at(track(), "nope", "recall", L).values()))


def test_claim_nope_no_recall_head():
    top = {(r["run"], r["seed"], r["task"]): max(map(max, r["share"]))
           for r in json.loads((study.folder / "heads" / "heads.json").read_text())}
    nope = seeds(track(), "nope")
    others = [top[("nope", s, t)] for s in nope for t in ("copy", "passkey")]
    assert max(top[("nope", s, "recall")] for s in nope) < min(others)


def test_claim_alibi_above_rope_16x():
    assert every(track(), "alibi", "rope", INDUCTION, X16, 1, runs=[("alibi", "rope"), ("alibi", AGAIN)])


def test_claim_yarn_above_rope_16x():
    assert every(track(), "rope", "rope", INDUCTION, X16, 1, YARN, runs=[("rope", "rope"), (AGAIN, AGAIN)])


def test_claim_retrain_moves_cell():
    assert {1, -1} <= {s for _, s in retrain_moves(track())}


def test_claim_yarn_alibi_mixed():
    c = track()
    assert {1, -1} <= {side(c[(r, s, "copy", YARN, X16)], c[("alibi", s, "copy", "none", X16)])
                       for r in ("rope", AGAIN) for s in seeds(c, r, YARN)}


def test_claim_nope_alibi_2x():
    found = sides(track(), "nope", "alibi", "copy", 2 * L)
    assert -1 in found and 1 not in found


def test_claim_anchor_rope_below_alibi():
    found = sides(anchor(), "rope", "alibi", "copy", L, "sinks")
    assert -1 in found and 1 not in found and len(found) == len(seeds(track(), "rope"))


def test_claim_context_lifts_alibi():
    methods = ("self-extend", "leaky-rerope")
    assert all(every(track(), "alibi", "alibi", ("copy", "passkey"), X16, 1, m) for m in methods)


def test_claim_context_breaks_rope_at_l():
    methods = ("self-extend", "rerope", "leaky-rerope")
    assert all(every(track(), "rope", "rope", ("copy", "passkey"), L, -1, m) for m in methods)


def test_claim_dca_rope_recall():
    assert every(track(), "rope", "rope", ["recall"], X16, 1, "dca")


def test_claim_sinks_window():
    far = [r for r in rows("context/sinks/results.json.gz") if r["distance_lo"] >= L and r["task"] in INDUCTION]
    assert far and all(wilson(r["accuracy"] * r["samples"], r["samples"])[0] <= SPECS[r["task"]].chance for r in far)


def test_claim_added_learned_at_l():
    c = track()
    assert all(seeds(c, run, OWN.get(run, "none")) for run in ADDED)
    assert ({run for run in ADDED if all(learned(c, run, s) == set(TASKS) for s in seeds(c, run, OWN.get(run, "none")))}
            == {"fire", "learned", "rope-half", "p-rope", "rnope-swa"})


def test_claim_drawn_rope_learns():
    c, drawn, run = track(), cells(rows("drawn/results.json.gz")), "rope-randomized"
    assert seeds(c, run) and all(drawn[(run, s, t, DRAWN, L)][0] >= LEARNED for t in TASKS for s in seeds(c, run))
    assert all(side(drawn[(run, s, "copy", DRAWN, L)], c[(run, s, "copy", "none", L)]) == 1 for s in seeds(c, run))


def test_claim_drope_below_yarn():
    assert drope_below_yarn(track(), "drope", ("copy", "passkey"))


def broken(monkeypatch, claim, key: tuple, cell: tuple[float, int]) -> None:
    """A claim's test fails once one cell of the rows it reads is changed."""
    c = {**track(), key: cell}
    monkeypatch.setattr(sys.modules[__name__], "track", lambda: c)
    with pytest.raises(AssertionError):
        claim()


def test_a_run_trained_again_that_keeps_copy_breaks_alibi_above_rope(monkeypatch):
    key = (AGAIN, seeds(track(), AGAIN)[0], "copy", "none", X16)
    broken(monkeypatch, test_claim_alibi_above_rope_16x, key, (0.8, 120))


def test_a_drope_level_with_yarn_on_one_seed_breaks_its_sentence(monkeypatch):
    key = ("drope", seeds(track(), "drope", DROPE)[-1], "passkey", DROPE, X16)
    broken(monkeypatch, test_claim_drope_below_yarn, key, (1.0, 120))


def test_claim_drope_long():
    c = track()
    unlearned = {run: sum(len(set(TASKS) - learned(c, run, s)) for s in seeds(c, run, DROPE))
                 for run in ("drope", "drope-long")}
    assert unlearned["drope-long"] < unlearned["drope"] and drope_below_yarn(c, "drope-long", INDUCTION)
    assert not any(every(c, "drope-long", "drope", [t], X16, 1, DROPE, DROPE) for t in TASKS)


def test_claim_alibi_rerun_identical():
    """The second clone's rows, validation curve and weights' hash (reproduction/) against the track's run."""
    again, folder = rows("reproduction/results.json.gz"), study.folder / "reproduction"
    ((run, seed),) = {(r["run"], r["seed"]) for r in again}
    assert again == [r for r in rows("results.json.gz") if (r["run"], r["seed"]) == (run, seed)]
    log = map(json.loads, (folder / "metrics.jsonl").read_text().splitlines())
    curve = {(t, r["step"]): r[f"val_acc_{t}"] for r in log if "val_loss" in r for t in TASKS}
    training = json.loads((study.folder / "training.json").read_text())
    assert curve == {(r["task"], r["step"]): r["accuracy"] for r in training if (r["run"], r["seed"]) == (run, seed)}
    digest, name = (folder / "weights.sha256").read_text().split()
    assert len(bytes.fromhex(digest)) == 32 and name.startswith(f"runs/tasks/seed{seed}/{run}/")


def test_every_run_holds_every_band_and_each_search_continuation_starts_from_its_run():
    found, n = {}, len({r["length"] for r in rows("results.json.gz")})
    for r in rows("results.json.gz"):
        found.setdefault((r["run"], r["seed"], r["task"], r["scaling"]), set()).add((r["length"], r["distance"]))
    assert {len(v) for v in found.values()} == {n * (n + 1) // 2}  # bands (0, L], then (n/2, n] at each doubling
    for longer in (study.folder / "recipe-search").glob("*-longer.jsonl"):
        log, more = ({r["step"]: r for r in map(json.loads, f.read_text().splitlines())}
                     for f in (longer.with_name(longer.name.replace("-longer", "")), longer))
        assert all(more[step] == r for step, r in log.items()) and max(more) > max(log)


def test_the_recipe_search_page_is_its_rows():
    """recipe-search.md is not a page make reports fills: its table is checked against the logs here."""
    page = study.folder / "recipe-search.md"
    assert filled(page, study.name, {study.name: study}) == page.read_text()
