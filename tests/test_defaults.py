"""Each evaluator called as a new user first calls it: a model and --out, every other option at its default (only
--lengths, --multiples, --max-tokens, --samples or --trials made small where they set nothing but the cost), on every
kind of model it takes: a plain RoPE run, ALiBi, a fine-tune, hf:PATH, and a task-track run for the task evaluators."""
import json
from pathlib import Path

import pytest
from conftest import ROOT, train_once

import train
from convert.to_hf import export
from eval import extrapolation, heads, passkey, probe
from eval import tasks as task_eval
from model.rope import FROM_A_NAME, SCALINGS

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def models(tmp_path_factory, tiny_run) -> dict[str, str]:
    """{kind: the model's path as a user gives it}."""
    alibi = train_once(tmp_path_factory, "alibi", "model.position.type=alibi")
    fine_tune = train_once(tmp_path_factory, "yarn-x2", f"train.init_from={tiny_run}", "model.max_seq_len=128",
                           "model.position.scaling={type: yarn, factor: 2}", "train.max_steps=4",
                           "train.warmup_steps=1", "train.eval_every=4", "train.ckpt_every=4")
    exported = export(tiny_run, tmp_path_factory.mktemp("hf") / "tiny")
    return {"rope": str(tiny_run), "alibi": str(alibi), "fine-tune": str(fine_tune), "hf": f"hf:{exported}"}


@pytest.fixture(scope="module")
def task_run(tmp_path_factory) -> Path:
    runs = tmp_path_factory.mktemp("task-runs")
    train.main(["--config", str(ROOT / "configs/tiny.yaml"), f"run.out_dir={runs}", "run.name=tasks",
                "data.source=tasks", "data.vocab_size=256", "model.max_seq_len=64", "model.d_model=32",
                "model.n_layers=2", "train.max_steps=2", "train.batch_size=2", "train.warmup_steps=1",
                "train.log_every=1", "train.eval_every=2", "train.ckpt_every=2", "train.eval_tokens=64"])
    return runs / "tasks"


@pytest.mark.parametrize("kind", ["rope", "alibi", "fine-tune", "hf"])
def test_extrapolation_with_its_default_scalings(models, kind, tmp_path):
    rows = extrapolation.main([models[kind], "--lengths", "64,128", "--max-tokens", "1024", "--out", str(tmp_path)])
    scalings = {r["scaling"] for r in rows}
    if kind == "rope":  # every scaling a plain run can be given by name; longrope needs factor lists it lacks
        assert scalings == set(FROM_A_NAME) and "longrope" in SCALINGS and "longrope" not in FROM_A_NAME
    elif kind == "hf":
        assert "none" in scalings and "yarn" in scalings
    else:
        assert scalings == {"none" if kind == "alibi" else "yarn (fine-tuned)"}
    assert all(r["ppl"] > 1 for r in rows) and (tmp_path / "results.md").exists()


def test_naming_a_scaling_the_run_lacks_settings_for_is_one_line(models, tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        extrapolation.main([models["rope"], "--lengths", "64", "--scaling", "longrope", "--out", str(tmp_path)])
    err = capsys.readouterr().err.strip()
    assert e.value.code == 2 and len(err.splitlines()) == 1 and "longrope needs short_factor and long_factor" in err


@pytest.mark.parametrize("kind", ["rope", "alibi", "hf"])
def test_probe_and_passkey_with_their_defaults(models, kind, tmp_path):
    probe.main([models[kind], "--multiples", "1,2", "--out", str(tmp_path / "probe")])
    assert json.loads((tmp_path / "probe" / "probes.json").read_text())
    # the default multiples start at L = 64 tokens, too short for a passkey prompt: that length is left out
    rows = passkey.main([models[kind], "--trials", "2", "--out", str(tmp_path / "passkey")])
    assert rows and min(r["length"] for r in rows) > 64 and all(r["value"] is not None for r in rows)


def test_the_task_evaluators_with_their_defaults(task_run, tmp_path):
    rows = task_eval.main([str(task_run), "--multiples", "1,2", "--samples", "8", "--out", str(tmp_path / "tasks")])
    assert {r["scaling"] for r in rows} >= {"none", "yarn", "dynamic-yarn"}  # every scaling it can be given by name
    assert rows and all(0 <= r["accuracy"] <= 1 for r in rows if r["accuracy"] is not None)
    heads.main([str(task_run), "--out", str(tmp_path / "heads")])
    assert (tmp_path / "heads" / "heads.md").exists()
