"""The long-range task track: the task sequences (data/tasks.py), training on them through train.py,
and eval.tasks' rows by length, distance band, scaling and fine-tune."""
import gzip
import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch

import train
from config import DataConfig, UserError
from data.tasks import (
    ASKS,
    FILLER,
    FILLER_TARGETS,
    FOLLOW,
    KEY,
    KEYS,
    PAIRS,
    PASSES,
    QUERY,
    START,
    TASKS,
    VALUES,
    VOCAB_SIZE,
    TaskData,
    filler,
    sample,
    task_mix,
    task_names,
    to_batch,
)
from eval import tasks as eval_tasks
from eval.results import tasks as task_report
from conftest import logged_losses

REPO = Path(__file__).resolve().parents[1]
L = 64


@pytest.mark.parametrize("task", list(TASKS))
def test_every_answer_is_the_token_its_fact_holds(task):
    for i in range(20):
        s = sample(task, 129, seed=3, index=i)
        assert s.tokens.shape == (129,) and s.tokens.max() < VOCAB_SIZE and s.tokens.min() >= 0
        answers, facts = s.tokens[s.answers], s.tokens[s.facts]
        if task == "recall1":  # the fused token holds key and value
            assert ((facts - PAIRS) % 4 == answers - VALUES[0]).all()
            assert (ASKS[(facts - PAIRS) // 4] == s.tokens[s.answers - 1]).all()  # asked by its key
            assert len(set(s.tokens[s.answers - 1])) == 8  # each key asked once
        elif task == "passkey1":
            assert (facts - PASSES == answers - VALUES[0]).all() and s.tokens[-2] == QUERY
        else:
            assert (answers == facts).all()
        if task == "recall":
            assert (s.tokens[s.facts - 1] == s.tokens[s.answers - 1]).all()  # the key before the value, asked
        if task == "recall":
            assert len(set(s.tokens[s.answers - 1])) == 8  # each key asked once
        if task == "passkey":
            assert s.tokens[s.facts[0] - 1] == KEY and s.tokens[-6] == KEY
            assert len(set(answers)) == 5  # distinct digits: each names the next
        assert (s.distances > 0).all() and (s.answers >= 1).all()
        # the facts' alphabet never occurs in the filler, so nothing but the fact answers the question
        others = np.setdiff1d(np.arange(129), np.concatenate([s.facts, s.facts - 1, s.answers, s.answers - 1]))
        assert np.isin(s.tokens[others], FILLER).all()


def test_a_question_token_names_the_rule_that_answers_it():
    """The induction tasks (the answer follows an earlier copy of the asking token) and the single-hop ones
    (the answer is decoded from one fused token) ask with disjoint tokens: asked alike, recall and recall1
    competed for the same heads, and on seeds 3 and 4 one of the two stayed unlearned (studies/tasks)."""
    samples = {task: [sample(task, 129, 5, i) for i in range(50)] for task in TASKS}
    asking = {task: {int(t) for s in samples[task] for t in s.tokens[s.answers - 1]} for task in TASKS}
    induction = asking["copy"] | asking["recall"] | asking["passkey"]
    single_hop = asking["recall1"] | asking["passkey1"]
    assert not induction & single_hop
    assert asking["recall1"] == set(ASKS.tolist()) and asking["recall"] == set(KEYS.tolist())


def test_facts_cover_the_whole_window_so_no_fixed_offset_solves_a_task():
    for task in TASKS:
        distances = np.concatenate([sample(task, 129, seed=1, index=i).distances for i in range(300)])
        assert distances.min() < 16 and distances.max() > 100, task
        assert distances.max() < 128, task  # training at L = 128 never sees a distance of L or more


@pytest.mark.parametrize("task", list(TASKS))
def test_every_distance_lies_inside_its_band_on_both_sides(task):
    """Distances count from the token that asks back to the token that holds the answer, for every
    evaluation length and band of eval.tasks at L = 128 (and a band narrower than L)."""
    for n in (128, 256, 512, 2048):
        for lo, hi in eval_tasks.bands(n, 128) + ([(32, 96)] if n == 128 else []):
            distances = np.concatenate([sample(task, n + 1, seed=2, index=i, distances=(lo, hi)).distances
                                        for i in range(40)])
            assert (distances > lo).all() and (distances <= hi).all(), (n, lo, hi)
            assert distances.max() - distances.min() > (hi - lo) // 2, (n, lo, hi)  # the band is covered


def local_solver(s, task: str, k: int, rng) -> float:
    """Accuracy of a solver that knows every task's rule but reads only the last k tokens before each
    answer: it copies what followed an earlier occurrence of the asking token in its window (induction,
    which also reads a question answered earlier in the block), decodes a fused fact in its window, and
    otherwise guesses among the answers' alphabet, leaving out the symbols already in its window."""
    alphabet = {"copy": VALUES, "recall": VALUES, "passkey": VALUES[:10],
                "recall1": VALUES[:4], "passkey1": VALUES}[task]
    right = 0
    for a in s.answers:
        window = s.tokens[max(0, a - k):a]
        asking = window[-1]
        earlier = np.flatnonzero(window[:-1] == asking)
        if asking in ASKS:  # recall1: a key-value pair fused in one token
            pairs = window[(window >= PAIRS) & (window < PASSES)]
            fused = pairs[ASKS[(pairs - PAIRS) // 4] == asking]
        else:  # passkey1: the marker and the value in one token
            fused = window[window >= PASSES] if asking == QUERY else window[:0]
        if len(earlier):
            guess = window[earlier[-1] + 1]
        elif len(fused):
            guess = VALUES[(fused[-1] - PAIRS) % 4] if asking in ASKS else VALUES[fused[-1] - PASSES]
        else:
            unseen = np.setdiff1d(alphabet, window)
            guess = rng.choice(unseen if len(unseen) else alphabet)
        right += guess == s.tokens[a]
    return right / len(s.answers)


@pytest.mark.parametrize("task", list(TASKS))
def test_a_solver_reading_only_the_last_k_tokens_stays_at_chance(task):
    """Nothing near the question gives its answer away: past k tokens back, a local solver scores the
    task's chance (within a few points); with the facts inside its window it solves the task, so the
    solver is a real adversary."""
    rng = np.random.default_rng(0)
    spec = TASKS[task]
    for k in (16, 32, 64):
        for n, (lo, hi) in [(128, (k, 128)), (512, (128, 256)), (512, (256, 512))]:
            acc = np.mean([local_solver(sample(task, n + 1, seed=3, index=i, distances=(lo, hi)), task, k, rng)
                           for i in range(300)])
            assert acc < spec.chance + 0.04, (k, n, lo, hi, acc, spec.chance)
    near = np.mean([local_solver(sample(task, 129, seed=3, index=i, distances=(0, 48)), task, 64, rng)
                    for i in range(100)])
    assert near > 0.99


def test_the_filler_continues_the_token_two_back_and_training_predicts_some_of_it():
    """The filler's local structure (each token the symbol after the one two back, with probability FOLLOW)
    is what makes a previous-token head worth forming; training predicts one filler token in eight beside
    the answers, validation the answers only."""
    f = filler(np.random.default_rng(0), 20_000) - FILLER[0]
    assert np.mean(f[2:] == (f[:-2] + 1) % len(FILLER)) == pytest.approx(FOLLOW + (1 - FOLLOW) / 32, abs=0.01)
    assert np.mean(f[1:] == (f[:-1] + 1) % len(FILLER)) < 0.1  # nothing from the token just before
    assert np.bincount(f, minlength=32).min() > 0.8 * len(f) / 32  # every symbol, about evenly
    data = TaskData(DataConfig(source="tasks", vocab_size=VOCAB_SIZE))
    x, y = data.batch(64, 128, seed=1, step=0)
    scored = y != -1
    filler_scored = scored & torch.from_numpy(np.isin(y.numpy(), FILLER))
    assert filler_scored.sum() / torch.from_numpy(np.isin(x.numpy(), FILLER)).sum() == pytest.approx(FILLER_TARGETS, abs=0.02)
    for task, _, vy in data.validation(128, 8192, 16):
        assert not np.isin(vy[vy != -1].numpy(), FILLER).any()  # answers only


def test_sequences_are_a_pure_function_of_their_arguments():
    a, b = sample("recall", 129, 5, 7), sample("recall", 129, 5, 7)
    assert np.array_equal(a.tokens, b.tokens) and np.array_equal(a.answers, b.answers)
    assert not np.array_equal(a.tokens, sample("recall", 129, 6, 7).tokens)


def test_targets_are_the_answers_only():
    samples = [sample("passkey", 65, 1, i) for i in range(3)]
    x, y = to_batch(samples)
    assert x.shape == y.shape == (3, 64)
    for i, s in enumerate(samples):
        scored = (y[i] != -1).nonzero().flatten().numpy()
        assert np.array_equal(scored, s.answers - 1)  # y[t] predicts tokens[t + 1]
        assert torch.equal(y[i, scored], torch.from_numpy(s.tokens[s.answers]))


def test_a_global_batch_is_the_same_however_it_is_split():
    data = TaskData(DataConfig(source="tasks", vocab_size=VOCAB_SIZE))
    whole_x, whole_y = data.batch(8, 64, seed=1, step=3)
    parts = [data.batch(2, 64, seed=1, step=3, micro_step=m, micro_steps=2, rank=r, world_size=2)
             for m in range(2) for r in range(2)]
    assert torch.equal(torch.cat([p[0] for p in parts]), whole_x)
    assert torch.equal(torch.cat([p[1] for p in parts]), whole_y)


def test_a_start_token_puts_the_same_task_behind_a_token_of_its_own():
    """data.start_token (recipe-search row 68): every sequence, training and validation, is the task's sequence one
    token shorter behind START, its answers and facts one place later, its distances unchanged."""
    for i in range(20):
        started = sample("recall", 129, 5, i, start_token=True)
        assert started.tokens[0] == START and (started.tokens[1:] != START).all() and len(started.tokens) == 129
        assert (started.tokens[started.answers] == started.tokens[started.facts]).all() and started.facts.min() >= 2
        assert (started.tokens[started.facts - 1] == started.tokens[started.answers - 1]).all()  # the key, asked
    data = TaskData(DataConfig(source="tasks", vocab_size=VOCAB_SIZE + 1, start_token=True))
    x, _ = data.batch(8, 64, seed=1, step=0)
    assert (x[:, 0] == START).all() and (x[:, 1:] != START).all()
    assert all((vx[:, 0] == START).all() for _, vx, _ in data.validation(64, 4096, 8))


def test_a_curriculum_bounds_the_training_distances_and_lets_go_at_its_last_step():
    """data.curriculum [D, S] (recipe-search rows 73-74): training facts within D tokens of the token that asks at
    step 0, within a bound growing linearly to the whole sequence by step S, then anywhere: the batches of a run
    without a curriculum, whose validation is the same throughout."""
    data = TaskData(DataConfig(source="tasks", vocab_size=VOCAB_SIZE, curriculum=[32, 4000]))
    plain = TaskData(DataConfig(source="tasks", vocab_size=VOCAB_SIZE))
    assert data.distances_at(0, 129) == (0, 32) and data.distances_at(2000, 129) == (0, 80)
    assert data.distances_at(3990, 129) is None and data.distances_at(8000, 129) is None
    for step, bound in [(0, 32), (2000, 80)]:
        tasks = [data.task_at(1, step * 16 + i) for i in range(16)]
        drawn = [sample(t, 129, 1, step * 16 + i, (0, bound)) for i, t in enumerate(tasks)]
        assert max(s.distances.max() for s in drawn) <= bound
        assert torch.equal(data.batch(16, 128, seed=1, step=step)[0], to_batch(drawn)[0])
    assert torch.equal(data.batch(16, 128, seed=1, step=4000)[0], plain.batch(16, 128, seed=1, step=4000)[0])
    assert all(torch.equal(a[1], b[1]) for a, b in zip(data.validation(128, 8192, 16), plain.validation(128, 8192, 16)))


def test_task_sources_and_their_vocabulary_are_checked():
    assert task_names("tasks") == list(TASKS)
    assert task_names("tasks:passkey1,recall1") == ["recall1", "passkey1"]  # registry order
    with pytest.raises(UserError, match="unknown task 'recal'"):
        task_names("tasks:recal")
    with pytest.raises(UserError, match=f"at least {VOCAB_SIZE}"):
        TaskData(DataConfig(source="tasks", vocab_size=100))
    assert task_mix("tasks:passkey1*0.5,copy,recall*3") == {"copy": 1.0, "recall": 3.0, "passkey1": 0.5}
    for source, error in [("tasks:recall*x", "the weight of recall must be a positive number"),
                          ("tasks:recall*0", "the weight of recall must be a positive number"),
                          ("tasks:recall*inf", "the weight of recall must be a positive number"),
                          ("tasks:recall,copy,recall*2", "recall is named twice")]:
        with pytest.raises(UserError, match=error):
            task_mix(source)


def test_training_draws_each_task_in_proportion_to_its_weight():
    """studies/tasks/tasks.yaml draws recall three times as often as each other task; an unweighted mix draws as
    before (the committed runs' batches), and validation has the same sequences for every task either way."""
    def shares(source):
        data = TaskData(DataConfig(source=source, vocab_size=VOCAB_SIZE))
        picks = [data.tasks.index(data.task_at(1, i)) for i in range(7000)]
        return np.bincount(picks, minlength=5) / len(picks), data
    weighted, data = shares("tasks:copy,recall*3,passkey,recall1,passkey1")
    assert abs(weighted[1] - 3 / 7) < 0.02 and all(abs(w - 1 / 7) < 0.02 for w in np.delete(weighted, 1))
    uniform, plain = shares("tasks")
    assert plain.cdf is None and all(abs(u - 0.2) < 0.02 for u in uniform)
    # the weighted draw is Generator.choice(p=...)'s, index for index (the committed seeds' batches)
    p = np.array([1, 3, 1, 1, 1]) / 7
    assert [data.task_at(6, i) for i in range(2000)] == [
        data.tasks[np.random.default_rng([6, i]).choice(5, p=p)] for i in range(2000)]
    x, y = data.batch(64, 128, seed=1, step=0)
    recall_rows = sum(bool(np.isin(row.numpy(), KEYS).any()) for row in x)  # only recall uses the key tokens
    assert recall_rows == sum(data.task_at(1, i) == "recall" for i in range(64)) and 18 <= recall_rows <= 38
    for (task, vx, vy), (same, px, py) in zip(data.validation(128, 16384, 32), plain.validation(128, 16384, 32)):
        assert task == same and torch.equal(vx, px) and torch.equal(vy, py)


@pytest.fixture(scope="module")
def task_runs(tmp_path_factory):
    """rope and learned trained briefly on two tasks at L = 64; rope continued to 128 with yarn and without."""
    tmp = tmp_path_factory.mktemp("tasks")
    common = ["--config", str(REPO / "studies/tasks/tasks.yaml"), f"run.out_dir={tmp}", "run.device=cpu",
              "data.source=tasks:recall1,passkey1", f"model.max_seq_len={L}", "model.d_model=32",
              "train.max_steps=6", "train.batch_size=4", "train.warmup_steps=1", "train.log_every=2",
              "train.eval_every=3", "train.ckpt_every=3", "train.eval_tokens=256", "train.decay_steps=null"]
    for position in ("rope", "learned"):
        train.main([*common, f"run.name={position}", f"model.position.type={position}"])
    train.main([*common, "run.name=rope-yarn", "model.max_seq_len=128", "model.position.scaling={type: yarn, factor: 2}",
                f"train.init_from={tmp / 'rope'}", "train.max_steps=3"])
    train.main([*common, "run.name=rope-continued", "model.max_seq_len=128", f"train.init_from={tmp / 'rope'}",
                "train.max_steps=3"])
    return tmp


def test_training_on_tasks_logs_answer_accuracy_and_resumes_exactly(task_runs, tmp_path):
    rows = [json.loads(line) for line in (task_runs / "rope" / "metrics.jsonl").read_text().splitlines()]
    evals = [r for r in rows if "val_loss" in r]
    assert [r["step"] for r in evals] == [3, 6]
    assert all(0 <= r["val_acc_recall1"] <= 1 and 0 <= r["val_acc_passkey1"] <= 1 for r in evals)
    assert not (task_runs / "rope" / "tokenizer.model").exists()  # a task run has no tokenizer
    # stopped at step 3 and resumed: the same losses as the run trained straight through
    common = ["--config", str(REPO / "studies/tasks/tasks.yaml"), f"run.out_dir={tmp_path}", "run.device=cpu",
              "data.source=tasks:recall1,passkey1", f"model.max_seq_len={L}", "model.d_model=32",
              "train.batch_size=4", "train.warmup_steps=1", "train.log_every=2", "train.eval_every=3",
              "train.ckpt_every=3", "train.eval_tokens=256", "run.name=rope", "train.decay_steps=6"]
    train.main([*common, "train.max_steps=3"])
    train.main([*common, "train.max_steps=6", "--resume"])
    assert logged_losses(tmp_path / "rope") == pytest.approx(logged_losses(task_runs / "rope"), abs=1e-6)


def test_eval_tasks_rows_by_length_band_and_scaling(task_runs, tmp_path):
    rows = eval_tasks.main([str(task_runs / n) for n in ("rope", "learned", "rope-yarn", "rope-continued")] +
                           ["--multiples", "1,2,4", "--scaling", "none,linear,dynamic", "--samples", "3",
                            "--device", "cpu", "--out", str(tmp_path)])
    for r in rows:
        assert {"run", "position", "seed", "task", "scaling", "factor", "length", "distance", "accuracy",
                "answers"} <= set(r)
    rope = {(r["scaling"], r["factor_rule"], r["task"], r["length"], r["distance"]) for r in rows if r["run"] == "rope"}
    assert ("none", None, "recall1", 256, "128-256") in rope
    assert ("linear", "fixed", "passkey1", 64, "0-64") in rope
    assert ("dynamic", "T/L", "recall1", 128, "64-128") in rope
    bands = sorted({(r["distance_lo"], r["distance_hi"]) for r in rows if r["run"] == "rope" and r["length"] == 256})
    assert bands == [(0, 64), (64, 128), (128, 256)]
    for r in rows:
        assert r["run_length"] == (L if r["run"] in ("rope", "learned") else 2 * L)
        assert r["trained_distance"] == (r["distance_hi"] <= r["run_length"])  # a fine-tune saw up to 2L
        if r["run"] == "learned" and r["length"] > L:
            assert r["accuracy"] is None and "stop at" in r["note"]
        else:
            assert 0 <= r["accuracy"] <= 1 and r["answers"] == 3 * (8 if r["task"] == "recall1" else 1)
    assert {r["scaling"] for r in rows if r["run"] == "rope-yarn"} == {"yarn (fine-tuned)"}
    # the unscaled control is measured at its base run's lengths and bands, like the scaled fine-tune
    for name in ("rope-yarn", "rope-continued"):
        assert sorted({r["length"] for r in rows if r["run"] == name}) == [64, 128, 256]
        assert {r["train_length"] for r in rows if r["run"] == name} == {L}
    # the same sequences for every run: the plain rope and its s = 1 scalings agree at L
    at_l = {r["scaling"]: r["accuracy"] for r in rows if r["run"] == "rope" and r["length"] == L
            and r["task"] == "recall1" and r["factor_rule"] in (None, "length/L", "T/L")}
    assert len(set(at_l.values())) == 1
    assert json.loads(gzip.decompress((tmp_path / "results.json.gz").read_bytes())) == rows
    text = (tmp_path / "results.md").read_text()
    assert "## recall1: by length" in text and "## passkey1: by distance" in text
    assert "| rope † | none |" in text  # six steps learn nothing: marked as not learned
    for name in ("accuracy_vs_length.png", "accuracy_vs_distance.png", "training.png"):
        assert (tmp_path / name).read_bytes()[:4] == b"\x89PNG"
    curves = json.loads((tmp_path / "training.json").read_text())  # each reading with the clock train.py logged then
    # wall_s is logged to 0.1 s: an early reading of a short run may round to 0 on a fast machine
    assert curves and all(r["wall_s"] >= 0 and r["threads"] >= 1 for r in curves) and max(r["wall_s"] for r in curves) > 0
    # a continued run's curve counts its own steps: kept and marked, and left out of training.png's step axis
    assert {r["run"] for r in curves if r.get("continued")} == {"rope-yarn", "rope-continued"}
    assert {r["run"] for r in curves if not r.get("continued")} == {"rope", "learned"}
    assert {run for runs in task_report.training_curves(curves).values() for run in runs} == {"rope", "learned"}


def test_long_sequences_are_scored_in_batches_bounded_by_their_score_matrices(task_runs, monkeypatch):
    from checkpoint import load_model
    model = load_model(task_runs / "rope", device=torch.device("cpu"))
    n = 4 * L
    samples = [sample("recall1", n + 1, eval_tasks.EVAL_SEED, i, (L, n)) for i in range(5)]
    whole = eval_tasks.answer_scores(model, samples, None, 16, torch.device("cpu"))
    batches = []
    model.register_forward_pre_hook(lambda module, args, kwargs: batches.append(len(args[0])), with_kwargs=True)
    monkeypatch.setattr(eval_tasks, "TASK_SCORES_PER_FORWARD", 2 * n * n * model.cfg.n_heads)
    assert torch.equal(eval_tasks.answer_scores(model, samples, None, 16, torch.device("cpu")), whole)
    assert batches == [2, 2, 1]


def test_runs_evaluated_apart_and_merged_give_the_joint_report(task_runs, tmp_path):
    """make task-eval evaluates each run as soon as it is trained, then merges the folders (eval.merge)."""
    from eval import merge
    names = ("rope", "learned", "rope-yarn")
    common = ["--multiples", "1,2", "--scaling", "none,yarn", "--samples", "2", "--device", "cpu"]
    eval_tasks.main([str(task_runs / n) for n in names] + common + ["--out", str(tmp_path / "joint")])
    for n in names:
        eval_tasks.main([str(task_runs / n), *common, "--out", str(tmp_path / "apart" / n)])
    merge.main([str(tmp_path / "apart" / n) for n in names] + ["--out", str(tmp_path / "merged")])
    for name in ("results.json.gz", "training.json", "results.md"):
        assert (tmp_path / "merged" / name).read_bytes() == (tmp_path / "joint" / name).read_bytes(), name
    assert (tmp_path / "merged" / "accuracy_vs_distance.png").is_file()


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_evaluates_each_run_once_trained_then_merges():
    out = subprocess.run(["make", "--no-print-directory", "-n", "extrapolation-tasks", "SEED_NUMBERS=7", "RESUME=1"],
                         cwd=REPO, capture_output=True, text=True, check=True).stdout  # -n runs the inner make dry too
    lines = " ".join(out.replace("\\\n", " ").split())
    runs = ("rope", "alibi", "nope", "rope-pi", "rope-yarn", "rope-continued")  # T5 only where TASK_ENCODINGS asks
    for run in runs:
        assert (f"-m eval.tasks runs/tasks/seed7/{run} --scaling none,linear,ntk,dynamic,yarn --fixed-factors '' "
                f"--out runs/tasks/eval/seed7/{run} --resume") in lines
        assert lines.index(f"run.name={run} ") < lines.index(f"--out runs/tasks/eval/seed7/{run} ")
    folders = " ".join(f"runs/tasks/eval/seed7/{run}" for run in runs)
    assert f"-m eval.merge studies/tasks {folders} --out studies/tasks" in lines
    heads = "-m eval.heads runs/tasks/seed7/rope runs/tasks/seed7/alibi runs/tasks/seed7/nope --out studies/tasks/heads --resume"
    assert heads in lines and lines.index("-m eval.merge") < lines.index(heads)  # the trained encodings' probe
    assert "seed7/t5" not in lines


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_adds_an_encoding_to_a_seed_without_listing_rope():
    """TASK_ENCODINGS=t5 on a seed: the fine-tunes still find their RoPE run (once a "No rule to make target")."""
    out = subprocess.run(["make", "--no-print-directory", "-n", "extrapolation-tasks", "SEED_NUMBERS=7",
                          "TASK_ENCODINGS=t5", "RESUME=1"], cwd=REPO, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    lines = " ".join(out.stdout.replace("\\\n", " ").split())
    assert lines.index("run.name=rope ") < lines.index("run.name=rope-pi ")
    assert "--out runs/tasks/eval/seed7/t5 --resume" in lines and "--out runs/tasks/eval/seed7/rope --resume" not in lines


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_evaluates_each_context_method_seed_by_seed_then_merges_each_method():
    out = subprocess.run(["make", "--no-print-directory", "-n", "task-context", "SEED_NUMBERS=6 9",
                          "CONTEXT_METHODS=self-extend dca"], cwd=REPO, capture_output=True, text=True, check=True).stdout
    lines = " ".join(out.replace("\\\n", " ").split())
    for method in ("self-extend", "dca"):
        for seed in (6, 9):
            assert f"--context-method {method} --out runs/tasks/context/{method}/seed{seed}" in lines
        assert (f"-m eval.merge runs/tasks/context/{method}/seed6 runs/tasks/context/{method}/seed9 "
                f"--out studies/tasks/context/{method};") in lines
    assert lines.index("--out runs/tasks/context/dca/seed9") < lines.index("-m eval.merge")


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_study_context_trains_what_is_missing_and_always_measures_the_plain_rows():
    out = subprocess.run(["make", "--no-print-directory", "-n", "study-context", "SEED_NUMBERS=2",
                          "CONTEXT_METHODS=sinks"], cwd=REPO, capture_output=True, text=True, check=True).stdout
    lines = " ".join(out.replace("\\\n", " ").split())
    runs = " ".join(f"runs/study/seed2/{run}" for run in ("rope", "alibi", "t5"))
    for method in ("none", "sinks"):
        command = (f"-m eval.extrapolation {runs} --lengths 128,256,512,1024,2048 --scaling none "
                   f"--context-method {method} --out runs/study/context/{method}/seed2")
        assert command in lines
        assert f"-m eval.merge runs/study/context/{method}/seed2 --out studies/text/context/{method};" in lines
        assert lines.index("run.name=t5 ") < lines.index(command)
    assert lines.endswith("-m eval.results.plots studies/text/context/*/results.json --out studies/text/context")


def test_pooled_accuracy_weights_the_bands_by_their_answers():
    rows = [{"run": "r", "seed": 1, "task": "t", "scaling": "none", "factor_rule": None, "length": 64,
             "multiple": 2, "accuracy": a, "answers": n} for a, n in ((1.0, 10), (0.0, 30))]
    assert task_report.pooled(rows) == {("r", 1, "t", "none", 64): 0.25}


def test_a_run_counts_as_having_learned_a_task_at_the_length_it_was_trained_at():
    def row(run, factor_rule, length, accuracy):
        return {"run": run, "seed": 1, "task": "t", "scaling": "s", "factor_rule": factor_rule, "length": length,
                "run_length": 64 if run == "base" else 256, "multiple": length / 64, "accuracy": accuracy,
                "answers": 10}
    rows = [row("base", None, 64, 0.95), row("base", None, 256, 0.1),
            row("tuned", "fine-tuned", 64, 0.5), row("tuned", "fine-tuned", 256, 0.92),
            row("flop", "fine-tuned", 64, 1.0), row("flop", "fine-tuned", 256, 0.8)]
    assert task_report.learned(rows) == {("base", 1, "t"): True, ("tuned", 1, "t"): True, ("flop", 1, "t"): False}


def test_eval_tasks_refuses_a_text_run(tmp_path, capsys, tiny_args):
    train.main(tiny_args + ["train.max_steps=2", "train.eval_every=2", "train.ckpt_every=2"])
    with pytest.raises(SystemExit) as e:
        eval_tasks.main([str(tmp_path / "tiny"), "--out", str(tmp_path / "out")])
    assert e.value.code == 2
    assert "not tasks: evaluate it with python -m eval.extrapolation" in capsys.readouterr().err


def test_a_context_too_short_for_a_task_is_one_line_before_training(tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        train.main(["--config", str(REPO / "studies/tasks/tasks.yaml"), f"run.out_dir={tmp_path}", "model.max_seq_len=24"])
    assert e.value.code == 2
    assert "too short for the recall task, which needs at least 32" in capsys.readouterr().err
    assert not (tmp_path / "rope" / "checkpoint.json").exists()


def test_text_commands_refuse_a_task_run_in_one_line(task_runs, capsys):
    import generate
    from eval import extrapolation
    for main, args in ((extrapolation.main, [str(task_runs / "rope")]),
                       (generate.main, [str(task_runs / "rope"), "--prompt", "x"])):
        with pytest.raises(SystemExit) as e:
            main(args)
        assert e.value.code == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "eval.tasks" in err


def test_resume_measures_only_what_the_report_lacks(task_runs, tmp_path, capsys):
    common = ["--multiples", "1,2", "--scaling", "none", "--samples", "2", "--device", "cpu", "--out", str(tmp_path)]
    first = eval_tasks.main([str(task_runs / "rope"), *common])
    both = eval_tasks.main([str(task_runs / "rope"), str(task_runs / "learned"), *common, "--resume"])
    assert both[:len(first)] == first  # kept as they were
    assert {r["run"] for r in both[len(first):]} == {"learned"}  # only the new run measured
    # the training curves of a run not given again are kept from training.json
    eval_tasks.main([str(task_runs / "learned"), *common, "--resume"])
    training = json.loads((tmp_path / "training.json").read_text())
    assert {r["run"] for r in training} == {"rope", "learned"} and all(0 <= r["accuracy"] <= 1 for r in training)
    assert len(training) == len({(r["task"], r["run"], r["seed"], r["step"]) for r in training})
    again = eval_tasks.main([str(task_runs / "rope"), str(task_runs / "learned"), *common, "--resume"])
    assert again == both
    older = [{k: v for k, v in r.items() if k != "run_length"} for r in both]  # rows of an older eval.tasks
    (tmp_path / "results.json.gz").write_bytes(gzip.compress(json.dumps(older).encode()))
    with pytest.raises(SystemExit) as e:
        eval_tasks.main([str(task_runs / "rope"), *common, "--resume"])
    assert e.value.code == 2 and "older eval.tasks (rows without run_length)" in capsys.readouterr().err


def test_drawn_positions_evaluate_a_randomized_run_as_it_was_trained_and_coincide_at_max_position(task_runs, tmp_path,
                                                                                                 capsys, monkeypatch):
    train.main(["--config", str(REPO / "studies/tasks/tasks.yaml"), f"run.out_dir={tmp_path}", "run.device=cpu",
                "data.source=tasks:recall1,passkey1", f"model.max_seq_len={L}", "model.d_model=32",
                "train.max_steps=6", "train.batch_size=4", "train.warmup_steps=1", "train.eval_every=6",
                "train.ckpt_every=6", "train.eval_tokens=256", "train.decay_steps=null", "run.name=randomized",
                f"train.positions={{type: randomized, max_position: {2 * L}}}"])
    run = str(tmp_path / "randomized")
    common = ["--multiples", "1,2", "--samples", "3", "--device", "cpu"]
    given = []  # the positions each forward pass gets
    original = eval_tasks.Models.get

    def get(self, *args, **kwargs):
        model = original(self, *args, **kwargs)
        if not model._forward_pre_hooks:
            model.register_forward_pre_hook(lambda m, a, kw: given.append(kw.get("positions")), with_kwargs=True)
        return model
    monkeypatch.setattr(eval_tasks.Models, "get", get)
    drawn = eval_tasks.main([run, *common, "--drawn-positions", "--out", str(tmp_path / "drawn")])
    # every sequence of a length with its own draw (the same for each task): at L, 64 of [0, 128); at 2L, all of them
    at_l = [p for p in given if p.shape[1] == L]
    assert len(at_l) == 2 and all(torch.equal(p, torch.stack([eval_tasks.drawn_positions(L, 2 * L, j) for j in
                                                              range(3)])) for p in at_l)
    assert len({tuple(row.tolist()) for row in at_l[0]}) == 3 and int(at_l[0][:, -1].max()) >= L
    assert all(torch.equal(row, torch.arange(2 * L)) for p in given if p.shape[1] == 2 * L for row in p)
    given.clear()
    plain = eval_tasks.main([run, *common, "--scaling", "none", "--out", str(tmp_path / "plain")])
    assert given and all(p is None for p in given)
    assert {r["scaling"] for r in drawn} == {task_report.DRAWN} and {r["scaling"] for r in plain} == {"none"}
    loss = {(r["scaling"], r["task"], r["length"], r["distance"]): r["loss"] for r in drawn + plain}
    for task in ("recall1", "passkey1"):  # at 2L the two protocols coincide
        for band in (f"0-{L}", f"{L}-{2 * L}"):
            assert loss[(task_report.DRAWN, task, 2 * L, band)] == pytest.approx(loss[("none", task, 2 * L, band)])
    positions = eval_tasks.drawn_positions(L, 2 * L, 5)
    assert torch.equal(positions, eval_tasks.drawn_positions(L, 2 * L, 5))  # a fixed draw per sequence
    assert len(set(positions.tolist())) == L and bool((positions.diff() > 0).all()) and int(positions[-1]) < 2 * L
    assert torch.equal(eval_tasks.drawn_positions(2 * L, 2 * L, 5), torch.arange(2 * L))
    for args, message in (([str(task_runs / "rope")], "was trained on contiguous positions"),
                          ([run, "--scaling", "yarn"], "without --scaling (or with none)"),
                          ([run, "--multiples", "4"], f"draws positions below {2 * L}, fewer than the {4 * L} tokens")):
        with pytest.raises(SystemExit) as e:
            eval_tasks.main([*args, "--drawn-positions", "--out", str(tmp_path / "refused")])
        err = capsys.readouterr().err
        assert e.value.code == 2 and message in err and err.count("\n") == 1
    assert not (tmp_path / "refused" / "results.json.gz").exists()


def test_a_cell_gives_the_mean_the_spread_and_every_seed():
    assert task_report.cell([1.0, 0.5]) == "75 ± 35 (100/50)"
    assert task_report.cell([0.25]) == "25"
    assert task_report.cell([0.25, None]) == "n/a"


def test_interval_is_wilsons_over_sequences():
    from eval.results.tasks import interval
    lo, hi = interval(0.5, 100)  # the Wilson score interval's textbook value
    assert (round(lo, 3), round(hi, 3)) == (0.404, 0.596)
    assert interval(1.0, 24)[1] == 1.0 and round(interval(1.0, 24)[0], 3) == 0.862
    assert interval(0.78, 120)[0] < interval(0.68, 120)[1]  # log-n's +10 points on ALiBi's copy: within the noise


def test_the_tables_say_how_wide_an_interval_is_by_how_many_sequences_a_cell_holds():
    from eval.results.tasks import interval_note
    row = {"run": "rope", "seed": 1, "task": "copy", "scaling": "none", "factor_rule": None, "samples": 24}
    rows = [{**row, "length": 128, "multiple": 1.0}] + [{**row, "length": 256, "multiple": 2.0}] * 2
    note = interval_note(rows)
    assert "24 sequences at 1x (±19), 48 sequences at 2x (±14)" in note and "24 sequences a band (±19)" in note
