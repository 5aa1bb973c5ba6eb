"""One process writes a run directory or an evaluator's --out folder at a time (checkpoint.hold): a second
train.py or evaluation on a held folder is refused in one line (exit 2) and writes nothing; the hold dies
with its process, SIGKILL included, so the run resumes at once; --wait-for-lock waits for the holder to end.
Each holder here is another process: a real train.py, or a Python process that holds the folder and sleeps."""
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import copy_run

import train
from checkpoint import LOCK, hold
from eval import extrapolation, probe, tasks
from eval import merge

ROOT = Path(__file__).resolve().parents[1]
HOLDER = """import sys, time
from checkpoint import hold
with hold(sys.argv[1], sys.argv[2]):
    print("held", flush=True)
    time.sleep(float(sys.argv[3]))
"""


def start_holders(*directories: Path, who: str) -> list[subprocess.Popen]:
    """A process per directory that holds it (for a minute); returned once each holds its own."""
    processes = [subprocess.Popen([sys.executable, "-c", HOLDER, str(d), who, "60"], cwd=ROOT, stdout=subprocess.PIPE,
                                  text=True) for d in directories]
    for process in processes:
        assert process.stdout.readline() == "held\n"
    return processes


def start_training(args: list[str], run: Path) -> subprocess.Popen:
    """A real train.py on `run`; returned once it holds the run directory (its lock file names its pid)."""
    process = subprocess.Popen([sys.executable, "train.py", *args], cwd=ROOT, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 60
    while f"train.py (pid {process.pid} " not in ((run / LOCK).read_text() if (run / LOCK).exists() else ""):
        assert process.poll() is None and time.time() < deadline, process.stderr.read() if process.poll() else "timeout"
        time.sleep(0.05)
    return process


def files(root: Path) -> dict[str, tuple[int, int]]:
    """{path: (mtime_ns, size)} of everything under `root`, folders included (a file created and removed
    again changes its folder's mtime)."""
    return {str(p.relative_to(root)): (p.stat().st_mtime_ns, p.stat().st_size) for p in [root, *root.rglob("*")]}


def refusal(capsys) -> str:
    out, err = capsys.readouterr()
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in out + err, err
    return lines[0]


def held_by(directory: Path, who: str, pid: int) -> str:
    return f"error: {directory} is in use by {who} (pid {pid} on {socket.gethostname()}, since "


def test_a_held_run_refuses_a_second_train_with_and_without_resume(tiny_args, ten_step_run, tmp_path, capsys):
    run = copy_run(ten_step_run, tmp_path, "held")
    holder, fresh = start_holders(run, tmp_path / "fresh", who="train.py")
    try:
        before = files(tmp_path)
        for name, pid, resume in (("held", holder.pid, ["--resume"]), ("held", holder.pid, []),
                                  ("fresh", fresh.pid, [])):  # a trained run, and one not saved yet
            with pytest.raises(SystemExit) as exit_:
                train.main(tiny_args + [f"run.name={name}", *resume])
            line = refusal(capsys)
            assert exit_.value.code == 2 and line.startswith(held_by(tmp_path / name, "train.py", pid)), line
            assert line.endswith("; wait for it to end (or pass --wait-for-lock SECONDS) or stop it")
        with pytest.raises(SystemExit) as exit_:  # waiting less than the holder takes is the same refusal
            train.main(tiny_args + ["run.name=held", "--resume", "--wait-for-lock", "0.5"])
        assert exit_.value.code == 2 and ") after waiting 0.5 s; wait for it" in refusal(capsys)
        assert files(tmp_path) == before  # the refused processes wrote nothing
        assert sorted(p.name for p in (tmp_path / "fresh").iterdir()) == [LOCK]
    finally:
        for process in (holder, fresh):
            process.kill()
            process.wait()


def test_after_sigkill_of_the_training_holder_the_run_resumes_at_once(tiny_args, ten_step_run, tmp_path):
    run = copy_run(ten_step_run, tmp_path, "killed")
    holder = start_training([*tiny_args, "run.name=killed", "train.max_steps=100000", "train.ckpt_every=100000",
                             "--resume"], run)
    holder.send_signal(signal.SIGKILL)
    holder.wait(timeout=30)
    text = (run / LOCK).read_text()  # left behind, and says it is harmless
    assert text.startswith(f"train.py (pid {holder.pid} ") and "a file left behind locks nothing" in text
    train.main(tiny_args + ["run.name=killed", "train.max_steps=12", "--resume"])
    assert json.loads((run / "checkpoint.json").read_text())["step"] == 12
    assert (run / LOCK).read_text().startswith(f"train.py (pid {os.getpid()} ")


def test_wait_for_lock_resumes_from_the_checkpoint_the_holder_leaves(tiny_args, ten_step_run, tmp_path):
    """A requeued job: the holder trains from step 10 to 14; the second waits for it, then resumes at 14."""
    run = copy_run(ten_step_run, tmp_path, "requeued")
    holder = start_training([*tiny_args, "run.name=requeued", "train.max_steps=14", "--resume"], run)
    train.main(tiny_args + ["run.name=requeued", "train.max_steps=16", "--resume", "--wait-for-lock", "120"])
    assert holder.wait(timeout=30) == 0, holder.stderr.read()
    history = [json.loads(line) for line in (run / "config_changes.jsonl").read_text().splitlines()]
    assert [h["resumed_at_step"] for h in history] == [10, 14]  # the holder's resume, then this one's
    assert json.loads((run / "checkpoint.json").read_text())["step"] == 16
    steps = [json.loads(line)["step"] for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert steps == sorted(set(steps)) and steps[-1] == 16  # one process's rows, in order


def test_two_evaluators_on_one_out_refuse(ten_step_run, tmp_path, capsys, monkeypatch):
    """While eval.extrapolation measures into --out, every evaluator on that --out is refused (this process
    calls them from inside its measurement, each with a lock file descriptor of its own), and one held by
    another process refuses eval.extrapolation; the refused write nothing."""
    out, run = tmp_path / "out", str(ten_step_run)
    second = {"eval.extrapolation": (extrapolation.main, [run, "--lengths", "64", "--out", str(out), "--resume"]),
              "eval.tasks": (tasks.main, [run, "--resume", "--out", str(out)]),
              "eval.probe": (probe.main, [run, "--out", str(out)]),
              "eval.merge": (merge.main, [str(tmp_path), "--out", str(out)])}
    refused, tried = {}, []
    measure = extrapolation.Evaluator.measure

    def measure_and_try_the_others(self, m):
        if not tried:  # once, and not again inside a second evaluation that was let in
            tried.append(m)
            before = files(out)
            for name, (main, argv) in second.items():
                with pytest.raises(SystemExit) as exit_:
                    main(argv)
                refused[name] = (exit_.value.code, refusal(capsys))
            assert files(out) == before
        return measure(self, m)
    monkeypatch.setattr(extrapolation.Evaluator, "measure", measure_and_try_the_others)
    rows = extrapolation.main([run, "--lengths", "64", "--max-tokens", "256", "--scaling", "none", "--fixed-factors",
                               "", "--out", str(out)])
    assert set(refused) == set(second)
    for code, line in refused.values():
        assert code == 2 and line.startswith(held_by(out, "eval.extrapolation", os.getpid())), line
        assert line.endswith("; wait for it to end or stop it")
    assert json.loads((out / "results.json").read_text()) == rows and len(rows) == 1  # the first one's rows only

    holder, = start_holders(out, who="eval.probe")
    try:
        before = files(tmp_path)
        result = subprocess.run([sys.executable, "-m", "eval.extrapolation", run, "--lengths", "64", "--resume",
                                 "--out", str(out)], cwd=ROOT, capture_output=True, text=True, timeout=120)
        lines = result.stderr.strip().splitlines()
        assert result.returncode == 2 and len(lines) == 1, result.stderr
        assert lines[0].startswith(held_by(out, "eval.probe", holder.pid))
        assert files(tmp_path) == before
    finally:
        holder.kill()
        holder.wait()


def test_folders_made_for_a_command_that_failed_are_removed_and_others_are_not(tmp_path):
    with pytest.raises(RuntimeError), hold(tmp_path / "new" / "run", "test"):
        raise RuntimeError("failed before writing")
    assert not (tmp_path / "new").exists()
    with pytest.raises(RuntimeError), hold(tmp_path, "test"):
        raise RuntimeError("failed before writing")
    assert (tmp_path / LOCK).is_file()  # the folder was there before: kept, with its lock file
    with hold(tmp_path / "made" / "run", "test"):
        (tmp_path / "made" / "run" / "config.yaml").write_text("run: {}\n")
    assert sorted(p.name for p in (tmp_path / "made" / "run").iterdir()) == ["config.yaml", LOCK]
