"""Every command line answers a bad input with exit code 2 and one line on stderr that names the key
or option, and no traceback; it does so before preparing data or training anything.

The table is (id, argv, expected substring). argv[0] picks the command (train.py, generate.py,
data.prepare, export, eval.*) and these placeholders are filled in: {run} a trained tiny run, {runs}
its out_dir, {tmp} an empty directory, {file} an existing plain file, {binary} a config that is not UTF-8. Cases run in-process (fast);
the ones in SUBPROCESS also run as real subprocesses, to prove the command-line path.
"""
import subprocess
import sys
from pathlib import Path

import pytest

import data.prepare
import export.llama
import generate
import train
from eval import bench, extrapolation, plots, probe, summary, tasks

ROOT = Path(__file__).resolve().parents[1]
# The tiny_args overrides of conftest.py, so a case that wrongly passed validation would stay small.
TINY = ["data.vocab_size=512", "model.d_model=32", "model.n_layers=2", "model.max_seq_len=64",
        "train.batch_size=4", "train.max_steps=10", "train.warmup_steps=5", "train.log_every=5",
        "train.eval_every=10", "train.ckpt_every=10", "train.eval_tokens=512"]
TRAIN = ["train.py", "--config", str(ROOT / "configs/tiny.yaml"), "run.out_dir={tmp}", *TINY]
RESUME = TRAIN + ["run.out_dir={runs}", "run.name=gen", "--resume"]
GEN = ["generate.py", "{run}", "--max-new-tokens", "3"]
EVAL = ["eval.extrapolation", "{run}", "--out", "{tmp}/out"]
PREPARE = ["data.prepare", "--config", str(ROOT / "configs/tiny.yaml")]

CASES = [
    # train.py: types and names
    ("train-unknown-key", TRAIN + ["model.d_modle=64"], "model.d_modle"),
    ("train-int-type", TRAIN + ["train.max_steps=ten"], "train.max_steps"),
    ("train-optional-int-type", TRAIN + ["train.decay_steps=abc"], "train.decay_steps"),
    ("train-optional-str-type", TRAIN + ["train.init_from=5"], "train.init_from"),
    ("train-scaling-type", TRAIN + ["model.position.scaling=yarn"], "model.position.scaling"),
    ("train-section-type", TRAIN + ["train=5"], "train"),
    ("train-not-a-section", TRAIN + ["train.lr.x=1"], "train.lr"),
    ("train-override-form", TRAIN + ["model.d_model"], "model.d_model"),
    ("train-override-yaml", TRAIN + ["model.position.scaling={type:"], "model.position.scaling"),
    ("train-encoding-name", TRAIN + ["model.position.type=rotary"], "model.position.type"),
    ("train-scaling-name", TRAIN + ["model.position.scaling={type: yarm, factor: 4, original_max_position_embeddings: 64}"],
     "model.position.scaling"),
    ("train-scaling-factor-type", TRAIN + ["model.position.scaling={type: yarn, factor: [4], original_max_position_embeddings: 64}"],
     "model.position.scaling"),
    ("train-scaling-factor-range", TRAIN + ["model.position.scaling={type: yarn, factor: 0.5, original_max_position_embeddings: 64}"],
     "model.position.scaling"),
    ("train-scaling-no-length", TRAIN + ["model.position.scaling={type: yarn, factor: 4}"], "model.position.scaling"),
    ("train-scaling-no-factor", TRAIN + ["model.position.scaling={type: yarn, original_max_position_embeddings: 64}"],
     "model.position.scaling: RoPE scaling 'yarn' requires 'factor'"),
    ("generate-rope-scaling-no-factor", GEN + ["--rope-scaling", "{type: linear}"], "RoPE scaling 'linear' requires 'factor'"),
    ("train-scaling-not-rope", TRAIN + ["model.position.type=alibi",
                                          "model.position.scaling={type: linear, factor: 2, original_max_position_embeddings: 64}"],
     "applies to rope only"),
    # train.py: model sizes and relations
    ("model-d-model", TRAIN + ["model.d_model=0"], "model.d_model"),
    ("model-n-layers", TRAIN + ["model.n_layers=0"], "model.n_layers"),
    ("model-n-heads", TRAIN + ["model.n_heads=0"], "model.n_heads"),
    ("model-n-kv-heads", TRAIN + ["model.n_kv_heads=0"], "model.n_kv_heads"),
    ("model-max-seq-len", TRAIN + ["model.max_seq_len=-1"], "model.max_seq_len"),
    ("model-ffn-hidden", TRAIN + ["model.ffn_hidden=0"], "model.ffn_hidden"),
    ("model-heads-divide-width", TRAIN + ["model.n_heads=3", "model.n_kv_heads=1"], "model.n_heads"),
    ("model-kv-heads-divide-heads", TRAIN + ["model.n_kv_heads=3"], "model.n_kv_heads"),
    ("model-rope-odd-head", TRAIN + ["model.d_model=36", "model.n_heads=4"], "model.position.type"),
    ("model-dropout-one", TRAIN + ["model.dropout=1"], "model.dropout"),
    ("model-dropout-negative", TRAIN + ["model.dropout=-0.1"], "model.dropout"),
    ("model-init-std", TRAIN + ["model.init_std=0"], "model.init_std"),
    ("model-norm-eps", TRAIN + ["model.norm_eps=0"], "model.norm_eps"),
    ("model-theta", TRAIN + ["model.position.theta=-1"], "model.position.theta"),
    ("model-vocab-mismatch", TRAIN + ["model.vocab_size=100"], "model.vocab_size"),
    # train.py: data
    ("data-vocab", TRAIN + ["data.vocab_size=100"], "data.vocab_size"),
    ("data-source-empty", TRAIN + ["data.source="], "data.source"),
    ("data-val-fraction", TRAIN + ["data.val_fraction=1"], "data.val_fraction"),
    ("data-test-fraction", TRAIN + ["data.test_fraction=-0.5"], "data.test_fraction"),
    ("data-fractions-sum", TRAIN + ["data.val_fraction=0.5", "data.test_fraction=0.5"], "data.val_fraction"),
    ("data-max-documents", TRAIN + ["data.max_documents=0"], "data.max_documents"),
    # train.py: optimisation and cadence
    ("train-batch-size", TRAIN + ["train.batch_size=0"], "train.batch_size"),
    ("train-grad-accum", TRAIN + ["train.grad_accum=0"], "train.grad_accum"),
    ("train-max-steps", TRAIN + ["train.max_steps=0"], "train.max_steps"),
    ("train-lr-zero", TRAIN + ["train.lr=0"], "train.lr"),
    ("train-lr-negative", TRAIN + ["train.lr=-1e-3"], "train.lr"),
    ("train-lr-nan", TRAIN + ["train.lr=.nan"], "train.lr"),
    ("train-min-lr-above-lr", TRAIN + ["train.min_lr=1"], "train.min_lr"),
    ("train-min-lr-negative", TRAIN + ["train.min_lr=-1e-4"], "train.min_lr"),
    ("train-beta1", TRAIN + ["train.beta1=1"], "train.beta1"),
    ("train-beta2", TRAIN + ["train.beta2=0"], "train.beta2"),
    ("train-grad-clip", TRAIN + ["train.grad_clip=-1"], "train.grad_clip"),
    ("train-warmup", TRAIN + ["train.warmup_steps=-1"], "train.warmup_steps"),
    ("train-decay-steps", TRAIN + ["train.decay_steps=0"], "train.decay_steps"),
    ("train-weight-decay", TRAIN + ["train.weight_decay=-0.1"], "train.weight_decay"),
    ("train-eval-tokens", TRAIN + ["train.eval_tokens=0"], "train.eval_tokens"),
    ("train-log-every", TRAIN + ["train.log_every=0"], "train.log_every"),
    ("train-eval-every", TRAIN + ["train.eval_every=0"], "train.eval_every"),
    ("train-ckpt-every", TRAIN + ["train.ckpt_every=0"], "train.ckpt_every"),
    ("train-init-from-missing", TRAIN + ["train.init_from={tmp}/no-such-run"], "train.init_from"),
    # train.py: run
    ("run-device-missing", TRAIN + ["run.device=cuda:99"], "run.device"),
    ("run-device-unknown", TRAIN + ["run.device=tpu"], "run.device"),
    ("run-out-dir-file", TRAIN + ["run.out_dir={file}"], "run.out_dir"),
    ("run-seed", TRAIN + ["run.seed=-1"], "run.seed"),
    ("run-name-path", TRAIN + ["run.name=a/b"], "run.name"),
    ("run-name-empty", TRAIN + ["run.name="], "run.name"),
    # train.py: command line and run directory
    ("train-no-config", ["train.py", "run.name=x"], "--config"),
    ("train-config-missing", ["train.py", "--config", "{tmp}/nope.yaml"], "nope.yaml"),
    ("train-config-not-yaml", ["train.py", "--config", "{file}"], "not valid YAML"),
    ("train-config-not-utf8", ["train.py", "--config", "{binary}"], "not UTF-8 text"),
    ("prepare-record-not-text", PREPARE + ["data.source={tmp}/numbers.jsonl", "data.cache_dir={tmp}/cache"],
     "numbers.jsonl:2: the 'text' field holds 7 (int), not text"),
    ("train-unknown-flag", TRAIN + ["--resmue"], "--resmue"),
    ("train-existing-run", TRAIN + ["run.out_dir={runs}", "run.name=gen"], "--resume"),
    ("resume-model-change", RESUME + ["model.d_model=64"], "model.d_model"),
    ("resume-encoding-change", RESUME + ["model.position.type=alibi"], "model.position.type"),
    ("resume-data-change", RESUME + ["data.val_fraction=0.1"], "data.val_fraction"),
    ("resume-seed-change", RESUME + ["run.seed=7"], "run.seed"),
    # generate.py
    ("generate-top-k", GEN + ["--top-k", "0"], "--top-k"),
    ("generate-top-k-type", GEN + ["--top-k", "x"], "--top-k"),
    ("generate-top-p-zero", GEN + ["--top-p", "0"], "--top-p"),
    ("generate-top-p-above-one", GEN + ["--top-p", "1.5"], "--top-p"),
    ("generate-temperature", GEN + ["--temperature", "-1"], "--temperature"),
    ("generate-max-new-tokens", GEN + ["--max-new-tokens", "-1"], "--max-new-tokens"),
    ("generate-rope-scaling-scalar", GEN + ["--rope-scaling", "5"], "--rope-scaling"),
    ("generate-rope-scaling-yaml", GEN + ["--rope-scaling", "{type:"], "--rope-scaling"),
    ("generate-rope-scaling-name", GEN + ["--rope-scaling", "{type: yarm, factor: 4}"], "--rope-scaling"),
    ("generate-rope-scaling-factor", GEN + ["--rope-scaling", "{type: yarn, factor: 0.5}"], "--rope-scaling"),
    ("generate-device", GEN + ["--device", "cuda:99"], "--device"),
    ("generate-no-run", ["generate.py", "{tmp}/no-such-run"], "run directory not found"),
    ("generate-not-a-run", ["generate.py", "{tmp}"], "no config.yaml"),
    # python -m data.prepare
    ("prepare-config-missing", ["data.prepare", "--config", "{tmp}/nope.yaml"], "nope.yaml"),
    ("prepare-no-config", ["data.prepare"], "--config"),
    ("prepare-vocab", PREPARE + ["data.vocab_size=100"], "data.vocab_size"),
    ("prepare-val-fraction", PREPARE + ["data.val_fraction=2"], "data.val_fraction"),
    ("prepare-unknown-key", PREPARE + ["data.sourc=x"], "data.sourc"),
    ("prepare-section-type", PREPARE + ["data=5"], "data"),
    # python -m export
    ("export-out-file", ["export", "{run}", "{file}"], "{file}"),
    ("export-no-run", ["export", "{tmp}/no-such-run", "{tmp}/out"], "run directory not found"),
    ("export-missing-argument", ["export", "{run}"], "out_dir"),
    ("export-into-a-run", ["export", "{run}", "{run}"], "is not empty (it holds checkpoint.json and"),
    # a misspelt RoPE scaling key, wherever a scaling is written (issue 9)
    ("train-scaling-misspelt-key", TRAIN + ["model.position.scaling={type: yarn, factr: 4}"], "factr"),
    ("train-scaling-foreign-key", TRAIN + ["model.position.scaling={type: linear, factor: 2, beta_fast: 8}"],
     "'beta_fast'"),
    ("generate-rope-scaling-misspelt-key", GEN + ["--rope-scaling", "{type: yarn, factr: 4}"], "factr"),
    ("generate-rope-scaling-rope-type", GEN + ["--rope-scaling", "{rope_type: yarn, factr: 4}"], "factr"),
    ("eval-scaling-misspelt-key", EVAL + ["--scaling", "{type: yarn, factr: 4}"], "factr"),
    ("generate-max-context", GEN + ["--max-context", "1"], "--max-context"),
    # python -m eval.extrapolation, eval.probe, eval.summary, eval.bench, eval.plots
    ("eval-no-run", ["eval.extrapolation", "{tmp}/no-such-run"], "run directory not found"),
    ("eval-not-a-run", ["eval.extrapolation", "{tmp}"], "no checkpoint"),
    ("eval-lengths", EVAL + ["--lengths", "64,abc"], "--lengths"),
    ("eval-lengths-zero", EVAL + ["--lengths", "0"], "--lengths"),
    ("eval-scaling-name", EVAL + ["--scaling", "rotary"], "'rotary'"),
    ("eval-fixed-factors", EVAL + ["--fixed-factors", "0.5"], "--fixed-factors"),
    ("eval-stride", EVAL + ["--stride", "0"], "--stride"),
    ("eval-batch-size", EVAL + ["--batch-size", "0"], "--batch-size"),
    ("eval-decode-chunk", EVAL + ["--decode-chunk", "0"], "--decode-chunk"),
    ("eval-max-tokens", EVAL + ["--lengths", "64", "--max-tokens", "32"], "--max-tokens"),
    ("eval-out-file", EVAL + ["--out", "{file}"], "--out"),
    ("eval-device", EVAL + ["--device", "cuda:99"], "--device"),
    ("eval-split", EVAL + ["--split", "dev"], "--split"),
    ("probe-no-run", ["eval.probe", "{tmp}/no-such-run"], "run directory not found"),
    ("probe-multiples", ["eval.probe", "{run}", "--multiples", "x"], "--multiples"),
    ("probe-span", ["eval.probe", "{run}", "--span", "1"], "--span"),
    ("probe-samples", ["eval.probe", "{run}", "--samples", "0"], "--samples"),
    ("probe-out-file", ["eval.probe", "{run}", "--out", "{file}"], "--out"),
    ("tasks-no-run", ["eval.tasks", "{tmp}/no-such-run"], "run directory not found"),
    ("tasks-text-run", ["eval.tasks", "{run}"], "not tasks: evaluate it with python -m eval.extrapolation"),
    ("tasks-multiples", ["eval.tasks", "{run}", "--multiples", "x"], "--multiples"),
    ("tasks-lengths", ["eval.tasks", "{run}", "--lengths", "0"], "--lengths"),
    ("tasks-samples", ["eval.tasks", "{run}", "--samples", "0"], "--samples"),
    ("tasks-scaling-name", ["eval.tasks", "{run}", "--scaling", "rotary"], "'rotary'"),
    ("tasks-out-file", ["eval.tasks", "{run}", "--out", "{file}"], "--out"),
    ("train-task-name", TRAIN + ["data.source=tasks:recal"], "unknown task 'recal'"),
    ("train-task-vocab", TRAIN + ["data.source=tasks", "data.vocab_size=100"], "at least 146"),
    ("summary-no-run", ["eval.summary", "{tmp}/no-such-run"], "run directory not found"),
    ("bench-config-missing", ["eval.bench", "--config", "{tmp}/nope.yaml"], "nope.yaml"),
    ("bench-encoding", ["eval.bench", "--config", str(ROOT / "configs/tiny.yaml"), "--positions", "rotary"], "'rotary'"),
    ("bench-device", ["eval.bench", "--config", str(ROOT / "configs/tiny.yaml"), "run.device=cuda:99"], "run.device"),
    ("plots-no-results", ["eval.plots", "{tmp}/results.json"], "results.json"),
]
# Also run as subprocesses: one or two per command.
SUBPROCESS = ["train-optional-int-type", "run-device-missing", "resume-model-change", "generate-rope-scaling-scalar",
              "prepare-config-missing", "export-out-file", "eval-no-run", "train-scaling-misspelt-key", "tasks-no-run"]
MAINS = {"train.py": train.main, "generate.py": generate.main, "data.prepare": data.prepare.main,
         "export": export.llama.main, "eval.extrapolation": extrapolation.main, "eval.probe": probe.main,
         "eval.summary": summary.main, "eval.bench": bench.main, "eval.plots": plots.main, "eval.tasks": tasks.main}


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    runs = tmp_path_factory.mktemp("runs")
    train.main(["--config", str(ROOT / "configs/tiny.yaml"), f"run.out_dir={runs}", "run.name=gen", *TINY])
    return runs


def fill(items, trained, tmp_path):
    (tmp_path / "a-file.txt").write_text("not: [a, run\n")
    (tmp_path / "binary.yaml").write_bytes(b"run: {name: \xff\xfe}\n")
    (tmp_path / "numbers.jsonl").write_text('{"text": "a play"}\n{"text": 7}\n')
    places = {"{run}": str(trained / "gen"), "{runs}": str(trained), "{tmp}": str(tmp_path),
              "{file}": str(tmp_path / "a-file.txt"), "{binary}": str(tmp_path / "binary.yaml")}
    filled = []
    for item in items:
        for key, value in places.items():
            item = item.replace(key, value)
        filled.append(item)
    return filled


def check(code, out, err, expected):
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2, (code, err)
    assert len(lines) == 1, err
    assert "Traceback" not in out + err
    assert expected in lines[0], lines[0]


@pytest.mark.parametrize("argv, expected", [case[1:] for case in CASES], ids=[case[0] for case in CASES])
def test_bad_input_in_process(argv, expected, trained, tmp_path, capsys):
    command, *args = fill(argv, trained, tmp_path)
    with pytest.raises(SystemExit) as exit_:
        MAINS[command](args)
    out, err = capsys.readouterr()
    check(exit_.value.code, out, err, fill([expected], trained, tmp_path)[0])


@pytest.mark.parametrize("case_id", SUBPROCESS)
def test_bad_input_from_the_command_line(case_id, trained, tmp_path):
    _, argv, expected = next(case for case in CASES if case[0] == case_id)
    command, *args = fill(argv, trained, tmp_path)
    prefix = [command] if command.endswith(".py") else ["-m", command]
    result = subprocess.run([sys.executable, *prefix, *args], cwd=ROOT, capture_output=True, text=True, timeout=120)
    check(result.returncode, result.stdout, result.stderr, fill([expected], trained, tmp_path)[0])


def test_every_command_has_a_missing_run_or_config_case():
    missing = {argv[0] for _, argv, _ in CASES if any(m in " ".join(argv) for m in ("no-such-run", "nope.yaml", "{tmp}/results.json"))}
    assert missing == set(MAINS)


def test_the_table_is_big_and_ids_are_unique():
    assert len(CASES) >= 45 and len({case[0] for case in CASES}) == len(CASES)
    assert set(SUBPROCESS) <= {case[0] for case in CASES}


# Every file a run directory holds, missing, corrupt or non-finite, in every command that reads it:
# one line that names the file, exit 2.
def damage(run, file, how):
    path = run / file if "*" not in file else next(run.glob(file))
    if how == "missing":
        path.unlink()
    elif how == "corrupt":
        path.write_bytes(b"\xff\xfe not what it should be {[")
    elif how == "truncated":
        path.write_bytes(path.read_bytes()[:200])
    elif how == "nan":
        from safetensors.torch import load_file, save_file
        weights = load_file(path)
        next(iter(weights.values())).view(-1)[0] = float("nan")
        save_file(weights, path)
    return path.name


READERS = {  # what reads each file
    "config.yaml": ["generate.py", "eval.extrapolation", "eval.probe", "eval.summary", "export", "eval.tasks", "resume"],
    "checkpoint.json": ["generate.py", "eval.extrapolation", "eval.probe", "export"],  # resume: starts afresh
    "model_*.safetensors": ["generate.py", "eval.extrapolation", "eval.probe", "export", "resume"],
    "state_*.pt": ["resume"],
    "tokenizer.model": ["generate.py", "eval.probe", "export"],  # eval.extrapolation reads the cached shards
    "metrics.jsonl": ["eval.summary"],
}
DAMAGES = {"model_*.safetensors": ["missing", "truncated", "nan"]}
BROKEN = [(file, how, command) for file, commands in READERS.items()
          for how in DAMAGES.get(file, ["missing", "corrupt"]) for command in commands]


@pytest.mark.parametrize("file, how, command", BROKEN, ids=[f"{c}-{f}-{h}" for f, h, c in BROKEN])
def test_a_broken_run_file_is_one_line_naming_it(file, how, command, trained, tmp_path, capsys):
    import shutil
    run = tmp_path / "runs" / "gen"
    shutil.copytree(trained / "gen", run)
    name = damage(run, file, how)
    argv = {"generate.py": [str(run), "--max-new-tokens", "3"],
            "eval.extrapolation": [str(run), "--lengths", "64", "--max-tokens", "256", "--out", str(tmp_path / "out")],
            "eval.probe": [str(run), "--multiples", "1", "--samples", "2", "--out", str(tmp_path / "out")],
            "eval.summary": [str(run)], "export": [str(run), str(tmp_path / "hf")],
            "eval.tasks": [str(run), "--out", str(tmp_path / "out")],
            "resume": fill(TRAIN, trained, tmp_path)[1:] + [f"run.out_dir={run.parent}", "run.name=gen",
                                                          "train.max_steps=12", "--resume"]}[command]
    with pytest.raises(SystemExit) as exit_:
        MAINS["train.py" if command == "resume" else command](argv)
    out, err = capsys.readouterr()
    check(exit_.value.code, out, err, name if "*" not in file else name)
