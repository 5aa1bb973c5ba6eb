"""Data-parallel training on two CPU processes (gloo) matches one process with the same global batch."""
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import logged_losses as losses

import train

ROOT = Path(__file__).resolve().parents[1]


def torchrun(args, n=2):
    result = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={n}",
                             "train.py", *args], cwd=ROOT, capture_output=True, text=True, timeout=600,
                            env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert result.returncode == 0, result.stderr[-2000:]
    return result


def test_two_processes_match_one_and_resume_across_process_counts(tiny_args, tmp_path):
    train.main(tiny_args + ["run.name=single", "train.grad_accum=2"])  # a global batch of 2 x 4 sequences
    # configs/tiny.yaml has grad_accum 1: on two processes each runs one micro-step, the same global batch of 2 x 4
    result = torchrun(tiny_args + ["run.name=ddp"])
    assert "train.grad_accum 1 does not divide over 2 processes; using 2" in result.stdout
    assert result.stdout.count("done:") == 1
    assert yaml.safe_load((tmp_path / "ddp" / "config.yaml").read_text())["train"]["grad_accum"] == 2
    single, ddp = losses(tmp_path / "single"), losses(tmp_path / "ddp")
    assert sorted(ddp) == sorted(single)
    assert all(ddp[s] == pytest.approx(single[s], abs=2e-4) for s in single)

    # Half the run on two processes, the rest on one: the same run.
    args = tiny_args + ["train.grad_accum=2"]
    torchrun(args + ["run.name=switch", "train.max_steps=10", "train.decay_steps=20"])
    train.main(args + ["run.name=switch", "train.decay_steps=20", "--resume"])
    switched = losses(tmp_path / "switch")
    assert all(switched[s] == pytest.approx(single[s], abs=2e-4) for s in single)
