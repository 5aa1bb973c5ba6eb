"""train.py and generate.py end to end, on Shakespeare with a tiny model."""
import errno
import fractions
import itertools
import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import yaml
from conftest import copy_run, logged_losses

import checkpoint
import generate
import train
from checkpoint import load_model, load_state, load_weights, read_metrics
from config import UserError
from eval.summary import main as summary_main
from eval.summary import budget, budget_step, markdown, summarize
from generate import generate_tokens
from model.positions import ENCODINGS

ROOT = Path(__file__).resolve().parents[1]


def losses(run_dir):
    """{step: (train loss, val loss or None)}"""
    val = logged_losses(run_dir, "val_loss")
    return {step: (loss, val[step]) for step, loss in logged_losses(run_dir).items()}


def cli(*args, timeout=300):
    return subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize("position", sorted(ENCODINGS))
def test_every_encoding_trains_and_writes_a_run_directory(position, tiny_args, tmp_path):
    train.main(tiny_args + [f"run.name={position}", f"model.position.type={position}"])
    run = tmp_path / position
    config = yaml.safe_load((run / "config.yaml").read_text())
    assert config["model"]["position"]["type"] == position
    assert config["model"]["vocab_size"] == 512 and config["train"]["max_steps"] == 20  # fully resolved
    assert (run / "tokenizer.model").is_file()
    assert list(run.glob("model_*.safetensors")) and json.loads((run / "checkpoint.json").read_text())["step"] == 20
    curve = losses(run)
    assert sorted(curve) == [5, 10, 15, 20]
    assert curve[20][0] < curve[5][0] - 0.3  # it learns (ln 512 = 6.24 at the start)
    assert curve[20][1] is not None


def test_resume_is_exact(tiny_args, tiny_run, tmp_path, monkeypatch):
    straight = tiny_run
    ticks = itertools.count()  # a clock that moves 1 s a reading, so that the times below do not depend on the machine
    monkeypatch.setattr(train.time, "perf_counter", lambda: float(next(ticks)))
    train.main(tiny_args + ["run.name=resumed", "train.max_steps=10", "train.decay_steps=20"])
    assert max(losses(tmp_path / "resumed")) == 10
    before = read_metrics(tmp_path / "resumed")[-1]["wall_s"]
    train.main(tiny_args + ["run.name=resumed", "train.decay_steps=20", "--resume"])
    assert losses(tmp_path / "resumed") == losses(straight)
    rows = read_metrics(tmp_path / "resumed")  # the run's training time carries on across the resume
    walls = [r["wall_s"] for r in rows]
    after = [r["wall_s"] for r in rows if r["step"] > 10]
    assert walls == sorted(walls) and before > 0 and min(after) > before
    assert {(r["threads"], r["processes"]) for r in rows} == {(torch.get_num_threads(), 1)}
    summary = summarize(tmp_path / "resumed")
    assert (summary["steps"], summary["val_loss"]) == (20, losses(straight)[20][1])
    assert summary["from_scratch"] and summary["val_loss_by_step"] == {s: v for s, (_, v) in losses(straight).items()
                                                                      if v is not None}
    summary_main([str(straight), str(tmp_path / "resumed"), "--out", str(tmp_path / "report/training.md")])
    assert "## Validation loss by step" in (tmp_path / "report/training.md").read_text()
    assert (tmp_path / "report/training.png").stat().st_size > 10_000


def test_fifty_steps_train_as_with_the_real_valued_rotation(tiny_args, tmp_path, monkeypatch):
    # apply_rope multiplies complex pairs for speed; a run's losses are those of the textbook rotation
    import model.positions

    def rotate_pairs(x, cos, sin):  # RoFormer's rotation (arXiv 2104.09864, section 3.4.2): four real products
        x1, x2 = x.float().unflatten(-1, (-1, 2)).unbind(-1)
        return torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1).flatten(-2).type_as(x)
    args = tiny_args + ["train.max_steps=50", "train.log_every=1", "train.eval_every=25", "train.ckpt_every=50"]
    train.main(args + ["run.name=complex"])
    monkeypatch.setattr(model.positions, "apply_rope", rotate_pairs)
    train.main(args + ["run.name=real"])
    complex_, real = losses(tmp_path / "complex"), losses(tmp_path / "real")
    assert sorted(complex_) == list(range(1, 51))
    for step in complex_:  # logged to 5 decimals; a rotation with one product swapped is off by 2e-4 at step 50
        assert complex_[step][0] == pytest.approx(real[step][0], abs=2e-5)
        assert complex_[step][1] == pytest.approx(real[step][1], abs=2e-5)


@pytest.mark.parametrize("position", ["rope", "t5"])
def test_a_compiled_run_builds_no_graph_after_its_first_step_across_evaluations(position, tiny_args, tmp_path,
                                                                                 monkeypatch):
    # train.py's own compile path, with dynamo's eager backend (graphs captured, no code generated):
    # evaluating (the eager model in eval mode without gradients, validation shapes, a checkpoint) leaves
    # nothing that makes the training step trace again, so its one graph serves every step
    from torch._dynamo.utils import counters
    torch._dynamo.reset()
    compile_, before = torch.compile, counters["stats"]["unique_graphs"]
    monkeypatch.setattr(torch, "compile", lambda model, **kw: compile_(model, backend="eager"))
    graphs, step_ = [], train.train_step

    def counted(s, p, step):
        lr = step_(s, p, step)
        graphs.append(counters["stats"]["unique_graphs"])
        return lr
    monkeypatch.setattr(train, "train_step", counted)
    train.main(tiny_args + [f"run.name={position}", f"model.position.type={position}", "run.compile=true",
                            "train.max_steps=14", "train.eval_every=4", "train.ckpt_every=4"])
    assert graphs == [before + 1] * 14, graphs
    assert losses(tmp_path / position)[12][1] is not None  # evaluated at 4, 8, 12


def test_summary_tables_the_gap_to_rope_by_step_and_skips_fine_tunes():
    def run(name, seed, curve, init_from=None):
        return {"run": name, "seed": seed, "position": name, "scaling": None, "context": 128, "steps": max(curve),
                "val_loss": curve[max(curve)], "val_ppl": 1.0, "tokens_per_s": 1.0, "from_scratch": init_from is None,
                "val_loss_by_step": curve}
    summaries = [run("rope", 1, {100: 5.0, 200: 4.5}), run("rope", 2, {100: 5.2, 200: 4.7}),
                 run("nope", 1, {100: 5.1, 200: 4.8}), run("nope", 2, {100: 5.2, 200: 4.9}),
                 run("rope-yarn", 1, {100: 4.4}, init_from="rope")]
    table = markdown(summaries).split("## Validation loss by step")[1]
    assert "| nope | 5.150 (+0.050 ± 0.071) | 4.850 (+0.250 ± 0.071) |" in table
    assert "| rope | 5.100 | 4.600 |" in table and "rope-yarn" not in table


def test_budget_is_the_latest_runs_first_step_within_the_fraction_of_its_lowest_loss():
    def run(name, curve):
        return {"run": name, "seed": 1, "tokens_per_step": 1000, "val_loss_by_step": curve}
    overfits = run("rope", {100: 5.0, 200: 4.1, 300: 4.0, 400: 4.3})  # within 1% of 4.0 from step 200 (4.1 > 4.04: 300)
    slower = run("sinusoidal", {100: 5.0, 200: 4.5, 300: 4.2, 400: 4.15})
    assert budget_step(overfits, 0.01) == 300 and budget_step(overfits, 0.03) == 200
    assert budget_step(slower, 0.01) == 400 and budget_step(slower, 0.02) == 300
    steps, section = budget([overfits, slower], 0.01)
    assert steps == 400 and section.rstrip().endswith("budget: 400 steps")
    assert "| rope | 1 | 4.000 | 300 | 300 | 0.3M |" in section


def test_sigint_checkpoints_and_resume_continues_the_same_run(tiny_args, tmp_path):
    args = [a for a in tiny_args if not a.startswith("train.max_steps")] + ["run.name=stopped", "train.max_steps=200"]
    proc = subprocess.Popen([sys.executable, "train.py", *args], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    pointer = tmp_path / "stopped" / "checkpoint.json"
    deadline = time.time() + 240
    while not pointer.exists() and time.time() < deadline and proc.poll() is None:
        time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert "checkpoint saved" in err + _
    stopped_at = json.loads(pointer.read_text())["step"]
    assert 10 <= stopped_at < 200
    # The interrupted run's losses so far equal a straight run's with the same schedule.
    train.main(tiny_args + ["run.name=reference", "train.max_steps=200", "train.eval_every=1000"])
    ref, got = losses(tmp_path / "reference"), losses(tmp_path / "stopped")
    assert all(got[s][0] == ref[s][0] for s in got if s % 5 == 0)
    # Resumed, it finishes as the straight run does: every logged loss of the 200 steps equal.
    train.main(args + ["--resume"])
    got = losses(tmp_path / "stopped")
    assert max(got) == 200
    # the logged loss is the mean since the last log: the one log step that straddles the stop averages
    # fewer steps after a resume, every other one is the straight run's
    straddle = -(-stopped_at // 5) * 5 if stopped_at % 5 else None
    same = [s for s in ref if s != straddle]
    assert {s: got[s][0] for s in same} == pytest.approx({s: ref[s][0] for s in same}, abs=1e-6)


def test_kv_cache_generation_equals_recomputing_the_whole_sequence(tiny_run):
    model = load_model(tiny_run)
    prompt = [1, 40, 41, 42]
    cached = list(generate_tokens(model, prompt, 30, temperature=0))
    ids = list(prompt)
    for _ in range(30):
        logits, _ = model(torch.tensor([ids]))
        ids.append(int(logits[0, -1].argmax()))
    assert cached == ids[len(prompt):]


def test_generate_compile_prints_what_eager_decoding_prints(tiny_run, capsys, monkeypatch):
    # --compile decodes through a static cache with compiled steps (dynamo's eager backend here, to stay
    # fast): the same sampled text, with the whole context and with a sliding window of 32 tokens
    compile_ = torch.compile
    monkeypatch.setattr(torch, "compile", lambda model, **kw: compile_(model, backend="eager", dynamic=False))
    args = [str(tiny_run), "--prompt", "To be or not to be. " * 10, "--max-new-tokens", "60", "--temperature", "1",
            "--seed", "1"]
    for extra in ([], ["--max-context", "32"]):
        capsys.readouterr()
        generate.main(args + extra)
        eager = capsys.readouterr().out
        generate.main(args + extra + ["--compile"])
        assert capsys.readouterr().out == eager


def test_generate_cli_is_reproducible_and_handles_long_prompts(tiny_run, tiny_args, tmp_path, capsys):
    run = str(tiny_run)
    a = cli("generate.py", run, "--prompt", "KING:", "--max-new-tokens", "40", "--seed", "3")
    assert a.returncode == 0, a.stderr
    assert a.stdout.startswith("KING:") and len(a.stdout) > 20

    def generated(*args):  # in-process: the same command line, without starting Python again
        capsys.readouterr()
        generate.main([*args])
        return capsys.readouterr()
    assert generated(run, "--prompt", "KING:", "--max-new-tokens", "40", "--seed", "3").out == a.stdout  # across processes
    assert generated(run, "--prompt", "KING:", "--max-new-tokens", "40", "--seed", "4").out != a.stdout
    # RoPE attends over the whole prompt and what follows, far past L = 64; with a sliding cache of
    # 32 tokens the same sampled continuation changes.
    prompt = ["--prompt", "To be or not to be. " * 40, "--max-new-tokens", "100", "--temperature", "1", "--seed", "1"]
    long = generated(run, *prompt)
    assert not long.err, long.err
    assert long.out != generated(run, *prompt, "--max-context", "32").out
    train.main(tiny_args + ["run.name=learned", "model.position.type=learned"])
    learned = generated(str(tmp_path / "learned"), *prompt).err
    assert "keeping its last 63" in learned and "positions stop at 63" in learned


def last_error(capsys):
    return [line for line in capsys.readouterr().err.splitlines() if line.strip()][-1]


def test_divergence_keeps_only_finite_checkpoints(tiny_args, ten_step_run, tmp_path, capsys):
    # From scratch at a huge lr with a checkpoint every step: the kept checkpoint is finite and loads.
    with pytest.raises(SystemExit) as stop:
        train.main(tiny_args + ["run.name=fresh", "train.lr=1e6", "train.ckpt_every=1", "train.log_every=1"])
    assert stop.value.code == 1
    kept = json.loads((tmp_path / "fresh" / "checkpoint.json").read_text())["step"]
    assert f"last good checkpoint (step {kept})" in last_error(capsys)
    assert all(bool(t.isfinite().all()) for t in load_weights(tmp_path / "fresh").values())
    assert cli("generate.py", str(tmp_path / "fresh"), "--max-new-tokens", "5", timeout=60).returncode == 0
    # With no checkpoint yet, the message says so instead of naming one.
    with pytest.raises(SystemExit):
        train.main(tiny_args + ["run.name=none", "train.lr=1e6", "train.log_every=1"])
    assert "no checkpoint was saved" in last_error(capsys)
    assert not (tmp_path / "none" / "checkpoint.json").exists()
    # A healthy run resumed at a huge lr (min_lr too: its decay has ended) stops and keeps step 10; resumed at a sane lr it carries on from there.
    copy_run(ten_step_run, tmp_path, "sane")
    with pytest.raises(SystemExit) as stop:
        train.main(tiny_args + ["run.name=sane", "--resume", "train.lr=1e6", "train.min_lr=1e6", "train.log_every=1"])
    assert stop.value.code == 1 and "last good checkpoint (step 10)" in last_error(capsys)
    train.main(tiny_args + ["--resume", "run.name=sane"])  # overrides before and after --resume
    curve = losses(tmp_path / "sane")
    assert max(curve) == 20 and all(math.isfinite(loss) for loss, _ in curve.values())
    assert json.loads((tmp_path / "sane" / "checkpoint.json").read_text())["step"] == 20
    changes = [json.loads(line)["changes"] for line in (tmp_path / "sane" / "config_changes.jsonl").open()]
    assert changes[0]["train.lr"] == [0.002, 1e6] and changes[1]["train.lr"] == [1e6, 0.002]


def test_resume_refuses_another_model_and_records_safe_changes(tiny_args, ten_step_run, tmp_path, capsys):
    copy_run(ten_step_run, tmp_path, "r")
    for change in (["model.position.type=alibi"], ["run.seed=7", "data.vocab_size=600"]):
        with pytest.raises(SystemExit) as stop:
            train.main(tiny_args + ["run.name=r", "--resume", *change])
        assert stop.value.code == 2
        line = last_error(capsys)
        assert all(item.split("=")[0] in line for item in change), line
    train.main(tiny_args + ["run.name=r", "--resume", "train.max_steps=15", "train.eval_every=5"])
    run = tmp_path / "r"
    assert yaml.safe_load((run / "config.yaml").read_text())["train"]["max_steps"] == 15
    rows = [json.loads(line) for line in (run / "config_changes.jsonl").read_text().splitlines()]
    assert rows == [{"resumed_at_step": 10, "time": rows[0]["time"],
                     "changes": {"train.max_steps": [10, 15], "train.eval_every": [10, 5]}}]


def test_tokens_per_s_counts_training_steps_only(tiny_args, tmp_path, monkeypatch):
    # on a clock that advances 1 s a training step and 1,000 s a checkpoint or an evaluation, every logged
    # rate is one step's tokens a second: the window after a checkpoint does not pay for it
    now = [0.0]

    def advancing(work, seconds):
        def run(*args, **kwargs):
            now[0] += seconds
            return work(*args, **kwargs)
        return run
    monkeypatch.setattr(train.time, "perf_counter", lambda: now[0])
    for name, seconds in [("train_step", 1.0), ("save", 1000.0), ("save_best", 1000.0), ("evaluate", 1000.0)]:
        monkeypatch.setattr(train, name, advancing(getattr(train, name), seconds))
    train.main(tiny_args + ["run.name=clock", "train.max_steps=12", "train.eval_every=4", "train.ckpt_every=3",
                            "train.log_every=2"])
    rows = [json.loads(line) for line in (tmp_path / "clock" / "metrics.jsonl").read_text().splitlines()]
    per_step = 4 * 64  # TINY: batch 4 x 64 tokens
    assert [row["step"] for row in rows] == [2, 3, 4, 6, 8, 9, 10, 12]
    assert {row["tokens_per_s"] for row in rows} == {per_step}


def test_a_failed_save_keeps_the_previous_checkpoint(tiny_args, ten_step_run, tmp_path, capsys, monkeypatch):
    run = copy_run(ten_step_run, tmp_path, "f")
    # What a killed process leaves: a torn metrics line, a temp file, checkpoint files nothing points to.
    with open(run / "metrics.jsonl", "a") as f:
        f.write('{"step": 11, "lo')
    (run / ".model_0000011.safetensors.x1y2.tmp").write_bytes(b"half")
    (run / "model_0000005.safetensors").write_bytes(b"old")
    (run / "state_0000005.pt").write_bytes(b"old")
    real_save = checkpoint.torch.save
    failures = [(OSError(errno.ENOSPC, "No space left on device"), "no space left on device"),
                (RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 1088 vs 1010"),
                 "no space left on device"),
                (OSError(errno.EROFS, "Read-only file system"), "read-only file system"),
                (PermissionError(errno.EACCES, "Permission denied"), "permission denied")]
    for error, reason in failures:
        def fail(*args, **kwargs):
            raise error
        monkeypatch.setattr(checkpoint.torch, "save", fail)
        with pytest.raises(SystemExit) as stop:
            train.main(tiny_args + ["run.name=f", "--resume", "train.max_steps=11"])
        assert stop.value.code == 1
        assert last_error(capsys) == (f"error: {reason} while saving the step 11 checkpoint in {run}; "
                                      f"the step 10 checkpoint is kept")
        assert sorted(p.name for p in run.iterdir() if p.name.startswith(("model_", "state_", "."))) == \
            ["model_0000010.safetensors", "state_0000010.pt"]
        assert all(json.loads(line)["step"] <= 11 for line in (run / "metrics.jsonl").read_text().splitlines())
    monkeypatch.setattr(checkpoint.torch, "save", real_save)
    train.main(tiny_args + ["run.name=f", "--resume", "train.max_steps=11"])
    assert json.loads((run / "checkpoint.json").read_text())["step"] == 11


def test_a_state_file_with_pickled_objects_is_refused(ten_step_run, tmp_path):
    run = copy_run(ten_step_run, tmp_path, "p")
    state = run / json.loads((run / "checkpoint.json").read_text())["state"]
    torch.save({"step": 10, "note": fractions.Fraction(1, 3)}, state)
    with pytest.raises(UserError) as refused:
        load_state(run)
    message = str(refused.value)
    assert "not a plain checkpoint" in message and "weights_only=False" not in message and "\n" not in message


def test_repeated_sigkill_while_checkpointing_leaves_a_clean_loadable_run(tiny_args, tmp_path):
    """A checkpoint every step and SIGKILL at arbitrary moments, three times: the next start removes
    what the killed saves left, every checkpoint it finds loads, and the run finishes exactly."""
    import random
    args = ["train.py", *tiny_args, "run.name=killed", "train.max_steps=80", "train.ckpt_every=1", "train.log_every=1",
            "train.eval_every=1000", "--resume"]
    delays = random.Random(0)
    landed = []  # the step of the checkpoint each kill left
    run = tmp_path / "killed"
    for target in (8, 40, 72):  # kill once the run has passed this step, a random moment later
        process = subprocess.Popen([sys.executable, *args], cwd=ROOT, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL)
        deadline = time.time() + 240
        while time.time() < deadline and process.poll() is None:
            try:
                if json.loads((run / "checkpoint.json").read_text())["step"] >= target:
                    break
            except (FileNotFoundError, json.JSONDecodeError):
                pass
            time.sleep(0.01)
        time.sleep(delays.uniform(0.0, 0.05))
        process.send_signal(signal.SIGKILL)
        assert process.wait() == -signal.SIGKILL  # killed, not finished before the signal came
        assert load_weights(run) and load_state(run)["step"] >= 1  # the pointer names a whole checkpoint
        landed.append(load_state(run)["step"])
    assert all(target <= step < 80 for target, step in zip((8, 40, 72), landed)), landed  # mid-run
    result = cli(*args)
    assert result.returncode == 0, result.stderr
    pointer = json.loads((run / "checkpoint.json").read_text())
    assert pointer["step"] == 80
    assert not list(run.glob("*.tmp")) and not list(run.glob(".*.tmp"))
    assert sorted(p.name for p in run.glob("model_*")) == [pointer["weights"]]
    assert sorted(p.name for p in run.glob("state_*")) == [pointer["state"]]
    steps = [json.loads(line)["step"] for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert steps == list(range(1, 81))  # no step lost or logged twice across the kills
    load_model(run)
    # and the killed-and-resumed run's losses are an uninterrupted run's
    train.main([*args[1:-1], "run.name=straight"])
    assert logged_losses(run) == pytest.approx(logged_losses(tmp_path / "straight"), abs=1e-6)


def test_a_fine_tune_starts_from_the_base_runs_exact_weights(tiny_args, ten_step_run, tmp_path):
    # lr 1e-12: one AdamW step moves a weight by about 1e-12, so the fine-tune holds what init_from loaded
    still = ["train.max_steps=1", "train.lr=1e-12", "train.min_lr=1e-12", "train.warmup_steps=0",
             "train.eval_every=1", "train.ckpt_every=1"]
    train.main(tiny_args + ["run.name=tuned", f"train.init_from={ten_step_run}", *still])
    train.main(tiny_args + ["run.name=scratch", *still])  # the same step from the run's own init
    base, tuned, scratch = (load_weights(run) for run in (ten_step_run, tmp_path / "tuned", tmp_path / "scratch"))
    assert base.keys() == tuned.keys()
    for name in base:
        torch.testing.assert_close(tuned[name], base[name], atol=1e-9, rtol=0)
    assert (scratch["embed.weight"] - base["embed.weight"]).abs().max() > 1e-3


def test_a_fine_tune_may_drop_weightless_positions_as_drope_does(tiny_args, ten_step_run, tmp_path, capsys):
    """DroPE: the RoPE run's weights, every one, recalibrated without positions; a table of weights cannot be dropped."""
    still = ["train.max_steps=1", "train.lr=1e-12", "train.min_lr=1e-12", "train.warmup_steps=0", "train.eval_every=1"]
    train.main(tiny_args + ["run.name=dropped", f"train.init_from={ten_step_run}", "model.position.type=nope", *still])
    dropped, base = load_model(tmp_path / "dropped"), load_model(ten_step_run)
    assert dropped.cfg.position.type == "nope" and base.cfg.position.type == "rope"
    x = torch.randint(0, 512, (1, 48))
    assert (dropped(x)[0] - base(x)[0]).abs().max() > 1e-3  # the same weights, read without positions
    nope = type(base)(dropped.cfg)
    nope.load_state_dict(base.state_dict())
    torch.testing.assert_close(nope.eval()(x)[0], dropped(x)[0], atol=1e-5, rtol=0)
    train.main(tiny_args + ["run.name=learned", "train.max_steps=2", "model.position.type=learned"])
    with pytest.raises(SystemExit) as failed:
        train.main(tiny_args + ["run.name=refused", f"train.init_from={tmp_path / 'learned'}", "model.position.type=nope"])
    assert failed.value.code == 2 and "model.position.type: 'nope' contradicts" in last_error(capsys)


def test_resume_names_a_weight_the_checkpoint_lacks(tiny_args, ten_step_run, tmp_path, capsys):
    from safetensors.torch import save_file
    run_dir = copy_run(ten_step_run, tmp_path, "r")
    weights = load_weights(run_dir)
    del weights["blocks.1.mlp.up_proj.weight"]
    save_file(weights, run_dir / json.loads((run_dir / "checkpoint.json").read_text())["weights"])
    for resume in (lambda: train.main(tiny_args + ["run.name=r", "train.max_steps=20", "--resume"]),
                   lambda: load_model(run_dir)):
        with pytest.raises((SystemExit, UserError)) as failed:
            resume()
        message = last_error(capsys) if failed.type is SystemExit else str(failed.value)
        assert failed.type is UserError or failed.value.code == 2
        assert "lacks blocks.1.mlp.up_proj.weight" in message and "\n" not in message


def test_init_from_a_shorter_learned_table_extends_it(tiny_args, tmp_path):
    # The one loader is strict, and says so for a longer context, except where init_from extends a run.
    train.main(tiny_args + ["run.name=base", "train.max_steps=10", "model.position.type=learned"])
    longer = ["model.position.type=learned", "model.max_seq_len=128", "train.max_steps=10"]
    train.main(tiny_args + ["run.name=long", f"train.init_from={tmp_path / 'base'}", *longer])
    base, long = load_weights(tmp_path / "base"), load_weights(tmp_path / "long")
    assert base["position.table.weight"].shape[0] == 64 and long["position.table.weight"].shape[0] == 128
    model = load_model(tmp_path / "base")
    with pytest.raises(UserError, match="position.table.weight of shape .64, 32., the model .128, 32."):
        checkpoint.load_weights_into(type(model)(load_model(tmp_path / "long").cfg), tmp_path / "base")


def test_extending_a_finished_run_continues_its_schedule_and_its_wandb_run(tiny_args, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    args = tiny_args + ["run.name=ext", "run.wandb=true", "train.log_every=1"]
    train.main(args)
    run_id = (tmp_path / "ext" / "wandb_id").read_text().strip()
    capsys.readouterr()
    train.main(args + ["train.max_steps=30", "--resume", "--print-config"])
    assert yaml.safe_load(capsys.readouterr().out)["train"]["decay_steps"] == 20  # the resumed run's, shown first
    train.main(args + ["train.max_steps=30", "--resume"])
    lr = logged_losses(tmp_path / "ext", "lr")
    assert max(lr[s] for s in range(21, 31)) <= lr[20]  # no re-warming: the decay length was fixed at the start
    assert yaml.safe_load((tmp_path / "ext" / "config.yaml").read_text())["train"]["decay_steps"] == 20
    assert (tmp_path / "ext" / "wandb_id").read_text().strip() == run_id
    offline = sorted(p.name for p in (tmp_path / "ext" / "wandb").glob("offline-run-*"))
    assert len(offline) == 2 and all(name.endswith(run_id) for name in offline)  # both parts log to one run


def test_run_files_follow_the_umask(tiny_args, tmp_path):
    old = os.umask(0o022)
    try:
        train.main(tiny_args + ["run.name=shared", "train.max_steps=10"])
    finally:
        os.umask(old)
    modes = {p.name: p.stat().st_mode & 0o777 for p in (tmp_path / "shared").iterdir() if p.is_file()}
    assert modes and set(modes.values()) == {0o644}, modes


def test_keep_checkpoints_keeps_the_newest_and_the_best(tiny_args, tmp_path):
    train.main(tiny_args + ["run.name=k", "train.max_steps=30", "train.ckpt_every=5", "train.eval_every=5",
                            "train.keep_checkpoints=3"])
    run = tmp_path / "k"
    pointer = json.loads((run / "checkpoint.json").read_text())
    assert [pointer["step"]] + [c["step"] for c in pointer["older"]] == [30, 25, 20]
    assert sorted(p.name for p in run.glob("model_*")) == [f"model_{s:07d}.safetensors" for s in (20, 25, 30)]
    val = {s: v for s, v in logged_losses(run, "val_loss").items() if v is not None}
    best = min(val, key=val.get)
    assert pointer["best"]["step"] == best and pointer["best"]["val_loss"] == pytest.approx(val[best], abs=1e-5)
    assert pointer["best"]["weights"] == f"model_{best:07d}.safetensors"  # its checkpoint's weights, not a copy
    kept = {f"model_{s:07d}.safetensors" for s in (20, 25, 30)} | {pointer["best"]["weights"]}
    assert {p.name for p in run.glob("*.safetensors")} == kept
    assert checkpoint.remove_leftovers(run) == []  # everything the pointer names survives a restart
    weights = load_weights(run, best=True)
    assert torch.equal(weights["embed.weight"], load_weights(run)["embed.weight"]) == (best == 30)
    assert cli("generate.py", str(run), "--best", "--max-new-tokens", "3", timeout=60).returncode == 0


def test_the_best_weights_outlive_the_checkpoints_that_rotate_out(tmp_path):
    from config import ModelConfig
    from model.gpt import GPT
    model, run = GPT(ModelConfig(vocab_size=97, d_model=32, n_layers=1)), tmp_path
    checkpoint.save_checkpoint(run, model, {"step": 10}, 10, keep=1)
    assert checkpoint.save_best(run, model, 15, 3.0)  # no checkpoint at step 15: a file of its own
    assert not checkpoint.save_best(run, model, 16, 3.5)
    checkpoint.save_checkpoint(run, model, {"step": 20}, 20, keep=1)
    assert sorted(p.name for p in run.glob("*.safetensors")) == ["best_0000015.safetensors", "model_0000020.safetensors"]
    assert checkpoint.save_best(run, model, 20, 2.0)  # the step's own checkpoint serves as the best
    checkpoint.save_checkpoint(run, model, {"step": 30}, 30, keep=1)
    assert sorted(p.name for p in run.glob("*.safetensors")) == ["model_0000020.safetensors", "model_0000030.safetensors"]
    checkpoint.drop_best_after(run, 10)  # resuming from an earlier step forgets it
    assert "best" not in json.loads((run / "checkpoint.json").read_text())
    assert sorted(p.name for p in run.glob("*.safetensors")) == ["model_0000030.safetensors"]


def test_print_config_shows_every_key(tiny_args, capsys):
    train.main([*tiny_args, "--print-config"])
    printed = yaml.safe_load(capsys.readouterr().out)
    assert printed["model"]["position"]["theta"] == 10000.0 and printed["train"]["max_steps"] == 20
    assert set(printed["train"]) >= {"keep_checkpoints", "decay_steps", "init_from", "beta2"}
    assert printed["train"]["decay_steps"] == 20  # derived while resolving: the config records the run as it trains


def test_logs_are_plain_lines_when_not_a_terminal(tiny_args, tmp_path):
    result = cli("train.py", *tiny_args, "run.name=plain", "train.max_steps=10", timeout=120)
    assert result.returncode == 0, result.stderr
    assert "step 5/10 | loss" in result.stdout and "\r" not in result.stdout + result.stderr


@pytest.mark.parametrize("position", ["t5", "kerple", "fire"])
def test_learned_bias_runs_train_generate_400_tokens_past_L_and_evaluate_at_4x(position, tiny_args, tmp_path, capsys):
    from eval import extrapolation
    train.main(tiny_args + [f"run.name={position}", f"model.position.type={position}", "train.max_steps=10"])
    run = tmp_path / position
    model = load_model(run)
    assert isinstance(model.position, ENCODINGS[position])
    assert len(list(generate_tokens(model, [1, 40, 41], 400, seed=1))) == 400  # to position 403, L = 64
    capsys.readouterr()
    generate.main([str(run), "--prompt", "KING:", "--max-new-tokens", "400", "--seed", "1"])
    assert len(capsys.readouterr().out) > 400
    rows = extrapolation.main([str(run), "--lengths", "64,256", "--max-tokens", "512", "--out", str(tmp_path / "eval")])
    ppl = {r["length"]: r["ppl"] for r in rows}
    assert set(ppl) == {64, 256} and all(math.isfinite(p) and 1 < p < 512 for p in ppl.values())


@pytest.mark.parametrize("position, kind", [("rope", "pose"), ("rope", "randomized"), ("alibi", "randomized")])
def test_training_positions_train_resume_exactly_and_evaluate_at_4x(position, kind, tiny_args, tmp_path):
    from eval import extrapolation
    chosen = [f"model.position.type={position}", f"train.positions={{type: {kind}, max_position: 256}}"]
    train.main(tiny_args + ["run.name=straight", "train.max_steps=10", *chosen])
    train.main(tiny_args + ["run.name=resumed", "train.max_steps=5", "train.decay_steps=10", *chosen])
    train.main(tiny_args + ["run.name=resumed", "train.max_steps=10", "train.decay_steps=10", *chosen, "--resume"])
    straight, resumed = losses(tmp_path / "straight"), losses(tmp_path / "resumed")
    assert resumed[10] == pytest.approx(straight[10], abs=1e-6)  # the same positions after the resume
    contiguous = tmp_path / "contiguous"
    train.main(tiny_args + ["run.name=contiguous", "train.max_steps=10", f"model.position.type={position}"])
    moved = [float((a - b).abs().max()) for a, b in zip(load_model(contiguous).state_dict().values(),
                                                        load_model(tmp_path / "straight").state_dict().values())]
    assert max(moved) > 1e-4  # the sampled positions changed the training, not only the logs
    config = yaml.safe_load((tmp_path / "straight" / "config.yaml").read_text())
    assert config["train"]["positions"] == {"type": kind, "max_position": 256, "chunks": 2}
    rows = extrapolation.main([str(tmp_path / "straight"), "--lengths", "64,256", "--scaling", "none",
                               "--max-tokens", "512", "--out", str(tmp_path / "eval")])
    assert {r["length"] for r in rows} == {64, 256} and all(math.isfinite(r["ppl"]) for r in rows)
    with pytest.raises(SystemExit) as stop:  # the positions are part of the run, like its data
        train.main(tiny_args + ["run.name=straight", "train.max_steps=12", f"model.position.type={position}",
                                "--resume"])
    assert stop.value.code == 2
