"""Every command line answers a bad input with exit code 2 and one line on stderr that names the key,
option or file and says what is wrong with it, and no traceback; it does so before preparing data or
training anything.

The table is (id, argv, expected substring). argv[0] picks the command (train.py, generate.py,
data.prepare, export, eval.*) and these placeholders are filled in: {run} a trained tiny run (conftest's ten_step_run), {runs}
its out_dir, {tmp} an empty directory, {file} an existing plain file, {binary} a config that is not
UTF-8, {held} a copy of the run that the test's own process holds (checkpoint.hold) while the case runs,
{hf} hf: and the run's transformers export (convert.to_hf), {notmodel} a folder whose config.json transformers
cannot read, {hf_pickle} the export with its weights as a pytorch_model.bin that unpickles an object (torch's
weights_only loader refuses it: nothing runs), {neox} and {window} configs of architectures the GPT cannot hold,
{hf_lacking} the export without one weight, {hf_wide_tokenizer} the export with a vocabulary smaller than its
tokenizer.
Cases run in-process (fast); the ones in SUBPROCESS also run as real subprocesses, to prove the
command-line path. Below the table, every file of a run directory is damaged in every command that reads it.
"""
import contextlib
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from checkpoint import hold
from conftest import TINY, copy_run
from safetensors.torch import load_file, save_file

import data.prepare
import convert.to_run
import convert.to_hf
import generate
import train
from eval import context_use, extrapolation, heads, passkey, probe, rope_settings, ruler, tasks
from eval import merge, summary
from eval.results import plots
from studies import report
from speed import bench

ROOT = Path(__file__).resolve().parents[1]
# The tiny_args overrides of conftest.py, so a case that wrongly passed validation would stay small.
TRAIN = ["train.py", "--config", str(ROOT / "configs/tiny.yaml"), "run.out_dir={tmp}", *TINY, "train.max_steps=10"]
RESUME = TRAIN + ["run.out_dir={runs}", "run.name=ten", "--resume"]  # the ten_step_run fixture
GEN = ["generate.py", "{run}", "--max-new-tokens", "3"]
EVAL = ["eval.extrapolation", "{run}", "--out", "{tmp}/out"]
PREPARE = ["data.prepare", "--config", str(ROOT / "configs/tiny.yaml")]

CASES = [
    # train.py: types and names
    ("train-unknown-key", TRAIN + ["model.d_modle=64"], "unknown config key 'model.d_modle'"),
    ("train-int-type", TRAIN + ["train.max_steps=ten"], "train.max_steps: expected int, got str"),
    ("train-optional-int-type", TRAIN + ["train.decay_steps=abc"], "train.decay_steps: expected int, got str"),
    ("train-optional-str-type", TRAIN + ["train.init_from=5"], "train.init_from: expected str, got int"),
    ("train-scaling-type", TRAIN + ["model.position.scaling=yarn"],
     "model.position.scaling: a RoPE scaling is a mapping"),
    ("train-section-type", TRAIN + ["train=5"], "train: expected a mapping, got int"),
    ("train-not-a-section", TRAIN + ["train.lr.x=1"], "train.lr is not a section"),
    ("train-override-form", TRAIN + ["model.d_model"], "'model.d_model' is not of the form dotted.key=value"),
    ("train-override-yaml", TRAIN + ["model.position.scaling={type:"],
     "model.position.scaling: cannot parse '{type:' as YAML"),
    ("train-encoding-name", TRAIN + ["model.position.type=rotary"], "model.position.type: unknown encoding 'rotary'"),
    ("train-scaling-name", TRAIN + ["model.position.scaling={type: yarm, factor: 4, original_max_position_embeddings: 64}"],
     "model.position.scaling: unknown RoPE scaling 'yarm'"),
    ("train-scaling-factor-type", TRAIN + ["model.position.scaling={type: yarn, factor: [4], original_max_position_embeddings: 64}"],
     "model.position.scaling.factor: expected float, got list"),
    ("train-scaling-factor-range", TRAIN + ["model.position.scaling={type: yarn, factor: 0.5, original_max_position_embeddings: 64}"],
     "model.position.scaling.factor must be >= 1"),
    ("train-scaling-no-length", TRAIN + ["model.position.scaling={type: yarn, factor: 4}"],
     "model.position.scaling needs original_max_position_embeddings"),
    ("train-scaling-no-factor", TRAIN + ["model.position.scaling={type: yarn, original_max_position_embeddings: 64}"],
     "model.position.scaling: RoPE scaling 'yarn' requires 'factor'"),
    ("generate-rope-scaling-no-factor", GEN + ["--rope-scaling", "{type: linear}"],
     "RoPE scaling 'linear' requires 'factor'"),
    ("train-scaling-not-rope", TRAIN + ["model.position.type=alibi",
                                          "model.position.scaling={type: linear, factor: 2, original_max_position_embeddings: 64}"],
     "applies to rope only"),
    # train.py: model sizes and relations
    ("model-d-model", TRAIN + ["model.d_model=0"], "model.d_model must be > 0"),
    ("model-n-layers", TRAIN + ["model.n_layers=0"], "model.n_layers must be > 0"),
    ("model-n-heads", TRAIN + ["model.n_heads=0"], "model.n_heads must be > 0"),
    ("model-n-kv-heads", TRAIN + ["model.n_kv_heads=0"], "model.n_kv_heads must be > 0"),
    ("model-max-seq-len", TRAIN + ["model.max_seq_len=-1"], "model.max_seq_len must be > 0"),
    ("model-ffn-hidden", TRAIN + ["model.ffn_hidden=0"], "model.ffn_hidden must be > 0"),
    ("model-heads-divide-width", TRAIN + ["model.n_heads=3", "model.n_kv_heads=1"],
     "model.d_model (32) must be divisible by model.n_heads (3)"),
    ("model-kv-heads-divide-heads", TRAIN + ["model.n_kv_heads=3"],
     "model.n_heads (4) must be a multiple of model.n_kv_heads (3)"),
    ("model-rope-odd-head", TRAIN + ["model.d_model=36", "model.n_heads=4"],
     "model.position.type=rope needs an even head dimension"),
    ("model-rotary-fraction-odd", TRAIN + ["model.position.rotary_fraction=0.375"],
     "rope needs an even head dimension to rotate, got d_model/n_heads x rotary_fraction = 8 x 0.375 = 3"),
    ("model-rotary-fraction-range", TRAIN + ["model.position.rotary_fraction=0"],
     "model.position.rotary_fraction must be in (0, 1], got 0"),
    ("model-kept-frequencies-range", TRAIN + ["model.position.kept_frequencies=1.5"],
     "model.position.kept_frequencies must be in (0, 1], got 1.5"),
    ("model-kept-frequencies-none-left", TRAIN + ["model.position.kept_frequencies=0.1"],
     "model.position.kept_frequencies=0.1 keeps no frequency of the 4 a head has"),
    ("model-rotary-fraction-not-rope", TRAIN + ["model.position.type=alibi", "model.position.rotary_fraction=0.5"],
     "model.position.rotary_fraction applies to rope only, not 'alibi'"),
    ("model-t5-buckets", TRAIN + ["model.position.type=t5", "model.position.buckets=1"],
     "model.position.buckets must be at least 2, got 1"),
    ("model-t5-key-not-t5", TRAIN + ["model.position.max_distance=64"], "model.position.max_distance applies to t5 only"),
    ("train-positions-learned", TRAIN + ["model.position.type=learned", "train.positions={type: randomized, max_position: 256}"],
     "train.positions: randomized positions reach 255, but learned positions stop at 63 (model.max_seq_len)"),
    ("train-positions-no-max", TRAIN + ["train.positions={type: pose}"], "train.positions: pose positions need max_position"),
    ("train-positions-below-context", TRAIN + ["train.positions={type: randomized, max_position: 32}"],
     "train.positions.max_position (32) must be at least model.max_seq_len (64)"),
    ("train-positions-contiguous-max", TRAIN + ["train.positions={type: contiguous, max_position: 256}"],
     "train.positions.max_position must be null for contiguous positions, got 256"),
    ("train-positions-chunks-randomized", TRAIN + ["train.positions={type: randomized, max_position: 256, chunks: 3}"],
     "train.positions.chunks applies to pose only, not 'randomized'"),
    ("train-positions-type", TRAIN + ["train.positions={type: shuffled}"],
     "train.positions.type: 'shuffled' is not one of contiguous, randomized, pose"),
    ("model-dropout-one", TRAIN + ["model.dropout=1"], "model.dropout must be in [0, 1)"),
    ("model-dropout-negative", TRAIN + ["model.dropout=-0.1"], "model.dropout must be in [0, 1)"),
    ("model-init-std", TRAIN + ["model.init_std=0"], "model.init_std must be > 0"),
    ("model-norm-eps", TRAIN + ["model.norm_eps=0"], "model.norm_eps must be > 0"),
    ("model-theta", TRAIN + ["model.position.theta=-1"], "model.position.theta must be > 0"),
    ("model-vocab-mismatch", TRAIN + ["model.vocab_size=100"],
     "model.vocab_size (100) differs from data.vocab_size (512)"),
    # train.py: data
    ("data-vocab", TRAIN + ["data.vocab_size=100"], "data.vocab_size must be above 259"),
    ("data-source-empty", TRAIN + ["data.source="], "data.source: expected str, got NoneType"),
    ("data-val-fraction", TRAIN + ["data.val_fraction=1"], "data.val_fraction must be in [0, 1)"),
    ("data-test-fraction", TRAIN + ["data.test_fraction=-0.5"], "data.test_fraction must be in [0, 1)"),
    ("data-fractions-sum", TRAIN + ["data.val_fraction=0.5", "data.test_fraction=0.5"],
     "data.val_fraction + data.test_fraction must be below 1"),
    ("data-max-documents", TRAIN + ["data.max_documents=0"], "data.max_documents must be > 0"),
    # train.py: optimisation and cadence
    ("train-batch-size", TRAIN + ["train.batch_size=0"], "train.batch_size must be >= 1"),
    ("train-grad-accum", TRAIN + ["train.grad_accum=0"], "train.grad_accum must be >= 1"),
    ("train-max-steps", TRAIN + ["train.max_steps=0"], "train.max_steps must be >= 1"),
    ("train-lr-zero", TRAIN + ["train.lr=0"], "train.lr must be a finite number > 0"),
    ("train-lr-negative", TRAIN + ["train.lr=-1e-3"], "train.lr must be a finite number > 0"),
    ("train-lr-nan", TRAIN + ["train.lr=.nan"], "train.lr must be a finite number > 0, got nan"),
    ("train-min-lr-above-lr", TRAIN + ["train.min_lr=1"], "train.min_lr must be in [0, train.lr"),
    ("train-min-lr-negative", TRAIN + ["train.min_lr=-1e-4"], "train.min_lr must be in [0, train.lr"),
    ("train-beta1", TRAIN + ["train.beta1=1"], "train.beta1 must be in (0, 1)"),
    ("train-beta2", TRAIN + ["train.beta2=0"], "train.beta2 must be in (0, 1)"),
    ("train-grad-clip", TRAIN + ["train.grad_clip=-1"], "train.grad_clip must be a finite number >= 0"),
    ("train-warmup", TRAIN + ["train.warmup_steps=-1"], "train.warmup_steps must be >= 0"),
    ("train-decay-steps", TRAIN + ["train.decay_steps=0"], "train.decay_steps must be >= 1 or null"),
    ("train-weight-decay", TRAIN + ["train.weight_decay=-0.1"], "train.weight_decay must be a finite number >= 0"),
    ("train-eval-tokens", TRAIN + ["train.eval_tokens=0"], "train.eval_tokens must be >= 1"),
    ("train-log-every", TRAIN + ["train.log_every=0"], "train.log_every must be >= 1"),
    ("train-eval-every", TRAIN + ["train.eval_every=0"], "train.eval_every must be >= 1"),
    ("train-ckpt-every", TRAIN + ["train.ckpt_every=0"], "train.ckpt_every must be >= 1"),
    ("train-init-from-missing", TRAIN + ["train.init_from={tmp}/no-such-run"],
     "train.init_from: run directory not found"),
    # train.py: run
    ("run-device-missing", TRAIN + ["run.device=cuda:99"], "run.device: 'cuda:99' is not available here"),
    ("run-device-unknown", TRAIN + ["run.device=tpu"], "run.device: unknown device 'tpu'"),
    ("run-out-dir-file", TRAIN + ["run.out_dir={file}"], "run.out_dir: {file} is a file, not a directory"),
    ("run-seed", TRAIN + ["run.seed=-1"], "run.seed must be >= 0"),
    ("run-name-path", TRAIN + ["run.name=a/b"], "run.name must be a plain directory name"),
    ("run-compile-mode", TRAIN + ["run.compile_mode=fast"],
     "run.compile_mode must be default | reduce-overhead | max-autotune | max-autotune-no-cudagraphs, got 'fast'"),
    ("run-name-empty", TRAIN + ["run.name="], "run.name: expected str, got NoneType"),
    # train.py: command line and run directory
    ("train-no-config", ["train.py", "run.name=x"], "required: --config"),
    ("train-config-missing", ["train.py", "--config", "{tmp}/nope.yaml"], "config file not found: {tmp}/nope.yaml"),
    ("train-config-not-yaml", ["train.py", "--config", "{file}"], "a-file.txt: not valid YAML"),
    ("train-config-not-utf8", ["train.py", "--config", "{binary}"], "binary.yaml: not UTF-8 text"),
    ("prepare-record-not-text", PREPARE + ["data.source={tmp}/numbers.jsonl", "data.cache_dir={tmp}/cache"],
     "numbers.jsonl:2: the 'text' field holds 7 (int), not text"),
    ("train-unknown-flag", TRAIN + ["--resmue"], "unrecognized arguments: --resmue"),
    ("train-existing-run", TRAIN + ["run.out_dir={runs}", "run.name=ten"],
     "already holds a checkpoint (step 10); pass --resume"),
    ("resume-model-change", RESUME + ["model.d_model=64"], "cannot resume {run} with a different model.d_model"),
    ("resume-encoding-change", RESUME + ["model.position.type=alibi"],
     "with a different model.position.type ('rope' -> 'alibi')"),
    ("resume-data-change", RESUME + ["data.val_fraction=0.1"], "with a different data.val_fraction (0.05 -> 0.1)"),
    ("resume-seed-change", RESUME + ["run.seed=7"], "with a different run.seed (1337 -> 7)"),
    # one process writes a run directory or report folder at a time: {held} is held by another
    ("train-held", TRAIN + ["run.name=held"], "{held} is in use by test_bad_inputs (pid "),
    ("resume-held", TRAIN + ["run.name=held", "--resume"], "{held} is in use by test_bad_inputs (pid "),
    ("resume-held-wait", TRAIN + ["run.name=held", "--resume", "--wait-for-lock", "0.3"],
     "{held} is in use by test_bad_inputs (pid "),
    ("train-wait-for-lock", TRAIN + ["--wait-for-lock", "-1"], "--wait-for-lock must be a number of seconds >= 0"),
    ("eval-held-out", EVAL + ["--out", "{held}"], "{held} is in use by test_bad_inputs (pid "),
    ("probe-held-out", ["eval.probe", "{run}", "--out", "{held}"], "{held} is in use by test_bad_inputs (pid "),
    ("tasks-held-out", ["eval.tasks", "{run}", "--resume", "--out", "{held}"],
     "{held} is in use by test_bad_inputs (pid "),
    ("merge-held-out", ["eval.merge", "{tmp}", "--out", "{held}"], "{held} is in use by test_bad_inputs (pid "),
    # generate.py
    ("generate-top-k", GEN + ["--top-k", "0"], "--top-k must be >= 1"),
    ("generate-top-k-type", GEN + ["--top-k", "x"], "--top-k: invalid int value: 'x'"),
    ("generate-top-p-zero", GEN + ["--top-p", "0"], "--top-p must be in (0, 1]"),
    ("generate-top-p-above-one", GEN + ["--top-p", "1.5"], "--top-p must be in (0, 1]"),
    ("generate-temperature", GEN + ["--temperature", "-1"], "--temperature must be >= 0"),
    ("generate-max-new-tokens", GEN + ["--max-new-tokens", "-1"], "--max-new-tokens must be >= 0"),
    ("generate-rope-scaling-scalar", GEN + ["--rope-scaling", "5"], "--rope-scaling: a RoPE scaling is a mapping"),
    ("generate-rope-scaling-yaml", GEN + ["--rope-scaling", "{type:"], "--rope-scaling: cannot parse '{type:' as YAML"),
    ("generate-rope-scaling-name", GEN + ["--rope-scaling", "{type: yarm, factor: 4}"],
     "--rope-scaling: unknown RoPE scaling 'yarm'"),
    ("generate-rope-scaling-factor", GEN + ["--rope-scaling", "{type: yarn, factor: 0.5}"],
     "--rope-scaling.factor must be >= 1"),
    ("generate-device", GEN + ["--device", "cuda:99"], "--device: 'cuda:99' is not available here"),
    ("generate-no-run", ["generate.py", "{tmp}/no-such-run"], "run directory not found: {tmp}/no-such-run"),
    ("generate-not-a-run", ["generate.py", "{tmp}"], "{tmp} is not a run directory (no config.yaml)"),
    # python -m data.prepare
    ("prepare-config-missing", ["data.prepare", "--config", "{tmp}/nope.yaml"],
     "config file not found: {tmp}/nope.yaml"),
    ("prepare-no-config", ["data.prepare"], "required: --config"),
    ("prepare-vocab", PREPARE + ["data.vocab_size=100"], "data.vocab_size must be above 259"),
    ("prepare-val-fraction", PREPARE + ["data.val_fraction=2"], "data.val_fraction must be in [0, 1)"),
    ("prepare-unknown-key", PREPARE + ["data.sourc=x"], "unknown config key 'data.sourc'"),
    ("prepare-section-type", PREPARE + ["data=5"], "data: expected a mapping"),
    # python -m convert.to_hf
    ("to-hf-out-file", ["convert.to_hf", "{run}", "{file}"], "out_dir {file} is an existing file, not a directory"),
    ("to-hf-no-run", ["convert.to_hf", "{tmp}/no-such-run", "{tmp}/out"], "run directory not found: {tmp}/no-such-run"),
    ("to-hf-missing-argument", ["convert.to_hf", "{run}"], "required: out_dir"),
    ("to-hf-into-a-run", ["convert.to_hf", "{run}", "{run}"], "out_dir {run} is not empty (it holds checkpoint.json and"),
    # a misspelt RoPE scaling key, wherever a scaling is written
    ("train-scaling-misspelt-key", TRAIN + ["model.position.scaling={type: yarn, factr: 4}"],
     "unknown config key 'model.position.scaling.factr'"),
    ("train-scaling-foreign-key", TRAIN + ["model.position.scaling={type: linear, factor: 2, beta_fast: 8}"],
     "RoPE scaling 'linear' takes no key 'beta_fast'"),
    ("train-longrope-without-factors", TRAIN + ["model.position.scaling={type: longrope, factor: 4}"],
     "longrope needs short_factor and long_factor (one factor per rotated pair each)"),
    ("generate-longrope-short-list", GEN + ["--rope-scaling", "{type: longrope, factor: 4, short_factor: [1, 1], "
                                            "long_factor: [1, 2]}"], "need 4 values each (one per rotated pair), got 2 and 2"),
    ("generate-rope-scaling-misspelt-key", GEN + ["--rope-scaling", "{type: yarn, factr: 4}"],
     "unknown config key '--rope-scaling.factr'"),
    ("generate-rope-scaling-rope-type", GEN + ["--rope-scaling", "{rope_type: yarn, factr: 4}"],
     "unknown config key '--rope-scaling.factr'"),
    ("eval-scaling-misspelt-key", EVAL + ["--scaling", "{type: yarn, factr: 4}"],
     "--scaling takes method names; unknown: '{type: yarn', 'factr: 4}'"),
    ("generate-max-context", GEN + ["--max-context", "1"], "--max-context must be >= 2"),
    # a context method (model/context.py), wherever one is chosen
    ("generate-context-name", GEN + ["--context-method", "selfextend"],
     "--context-method: unknown context method 'selfextend'; choose one of self-extend, rerope"),
    ("generate-context-foreign-key", GEN + ["--context-method", "{type: rerope, group_size: 2}"],
     "--context-method: context method 'rerope' takes no key 'group_size'; its keys: window"),
    ("generate-context-misspelt-key", GEN + ["--context-method", "{type: dca, chunk: 8}"],
     "unknown config key '--context-method.chunk'"),
    ("generate-context-range", GEN + ["--context-method", "{type: self-extend, window: 0}"],
     "--context-method.window must be >= 1, got 0"),
    ("generate-context-type", GEN + ["--context-method", "{type: dca, chunk_size: 2.5}"],
     "--context-method.chunk_size: expected int, got float"),
    ("generate-context-no-name", GEN + ["--context-method", "{window: 8}"], "--context-method: name the method"),
    ("generate-context-yaml", GEN + ["--context-method", "{type:"], "--context-method: cannot parse '{type:' as YAML"),
    ("generate-context-dynamic",
     GEN + ["--rope-scaling", "{type: dynamic, factor: 2}", "--context-method", "self-extend"],
     "context method 'self-extend' keeps the distances attention is shown short, while the dynamic RoPE scaling"),
    ("generate-context-logn-yarn", GEN + ["--rope-scaling", "{type: yarn, factor: 2}", "--context-method", "logn"],
     "context method 'logn' and the yarn RoPE scaling both sharpen attention"),
    ("generate-context-max-context", GEN + ["--context-method", "sinks", "--max-context", "8"],
     "--max-context and --context-method both choose what attention reads"),
    ("generate-context-compile", GEN + ["--context-method", "logn", "--compile"],
     "--compile decodes through a static cache of every token; a context method decodes eagerly"),
    ("eval-context-dynamic", EVAL + ["--context-method", "dca", "--scaling", "none,dynamic-yarn"],
     "while the dynamic-yarn RoPE scaling follows the input's length"),
    ("eval-context-name", EVAL + ["--context-method", "chunks"], "--context-method: unknown context method 'chunks'"),
    ("probe-context-range", ["eval.probe", "{run}", "--context-method", "{type: leaky-rerope, k: 0.5}"],
     "--context-method.k must be >= 1, got 0.5"),
    ("probe-context-yarn", ["eval.probe", "{run}", "--context-method", "logn", "--scaling", "yarn"],
     "context method 'logn' and the yarn RoPE scaling both sharpen attention"),
    ("tasks-context-name", ["eval.tasks", "{run}", "--context-method", "ntk"], "unknown context method 'ntk'"),
    ("tasks-context-key", ["eval.tasks", "{run}", "--context-method", "{type: sinks, sinks: -1}"],
     "--context-method.sinks must be >= 0, got -1"),
    # python -m eval.extrapolation, eval.probe, eval.summary, speed.bench, eval.results.plots
    ("eval-no-run", ["eval.extrapolation", "{tmp}/no-such-run"], "run directory not found: {tmp}/no-such-run"),
    ("eval-not-a-run", ["eval.extrapolation", "{tmp}"], "no checkpoint in {tmp} (missing checkpoint.json)"),
    ("eval-lengths", EVAL + ["--lengths", "64,abc"], "--lengths must be comma-separated integers"),
    ("eval-lengths-zero", EVAL + ["--lengths", "0"], "--lengths must be positive integers"),
    ("eval-scaling-name", EVAL + ["--scaling", "rotary"], "unknown: 'rotary'"),
    ("eval-fixed-factors", EVAL + ["--fixed-factors", "0.5"], "--fixed-factors must be numbers above 1"),
    ("eval-stride", EVAL + ["--stride", "0"], "--stride must be >= 1"),
    ("eval-batch-size", EVAL + ["--batch-size", "0"], "--batch-size must be >= 1"),
    ("eval-decode-chunk", EVAL + ["--decode-chunk", "0"], "--decode-chunk must be >= 1"),
    ("eval-max-tokens", EVAL + ["--lengths", "64", "--max-tokens", "32"],
     "--max-tokens (32) must be at least the longest length (64)"),
    ("eval-span", EVAL + ["--span", "0"], "--span must be >= 1, got 0"),
    ("eval-span-stride", EVAL + ["--lengths", "64", "--span", "128", "--stride", "32"],
     "--span scores non-overlapping windows; it cannot be combined with --stride"),
    ("eval-span-length", EVAL + ["--lengths", "64,96", "--span", "128"],
     "--span 128 is not a multiple of length 96: every length must divide it"),
    ("eval-span-max-tokens", EVAL + ["--lengths", "64", "--span", "128", "--max-tokens", "64"],
     "--max-tokens (64) must be at least --span (128)"),
    ("eval-out-file", EVAL + ["--out", "{file}"], "--out {file} is a file, not a folder"),
    ("eval-device", EVAL + ["--device", "cuda:99"], "--device: 'cuda:99' is not available here"),
    ("eval-split", EVAL + ["--split", "dev"], "--split: invalid choice: 'dev'"),
    ("probe-no-run", ["eval.probe", "{tmp}/no-such-run"], "run directory not found: {tmp}/no-such-run"),
    ("probe-multiples", ["eval.probe", "{run}", "--multiples", "x"], "--multiples must be comma-separated numbers"),
    ("probe-empty-scaling", ["eval.probe", "{run}", "--scaling", ""], "--scaling takes method names; unknown: ''"),
    ("passkey-empty-scaling", ["eval.passkey", "{run}", "--scaling", ""], "--scaling takes method names; unknown: ''"),
    ("probe-span", ["eval.probe", "{run}", "--span", "1"], "--span must be >= 2"),
    ("probe-samples", ["eval.probe", "{run}", "--samples", "0"], "--samples must be >= 2"),
    ("probe-out-file", ["eval.probe", "{run}", "--out", "{file}"], "--out {file} is a file, not a folder"),
    ("tasks-no-run", ["eval.tasks", "{tmp}/no-such-run"], "run directory not found: {tmp}/no-such-run"),
    ("tasks-text-run", ["eval.tasks", "{run}"], "not tasks: evaluate it with python -m eval.extrapolation"),
    ("tasks-multiples", ["eval.tasks", "{run}", "--multiples", "x"], "--multiples must be comma-separated numbers"),
    ("tasks-lengths", ["eval.tasks", "{run}", "--lengths", "0"], "--lengths must be positive integers"),
    ("tasks-samples", ["eval.tasks", "{run}", "--samples", "0"], "--samples must be >= 1"),
    ("tasks-scaling-name", ["eval.tasks", "{run}", "--scaling", "rotary"], "unknown: 'rotary'"),
    ("tasks-out-file", ["eval.tasks", "{run}", "--out", "{file}"], "--out {file} is a file, not a folder"),
    ("heads-no-run", ["eval.heads", "{tmp}/no-such-run"], "run directory not found: {tmp}/no-such-run"),
    ("reports-no-study", ["studies.report", "--study", "no-such-run"], "--study no-such-run: no studies/no-such-run/values.py"),
    ("heads-text-run", ["eval.heads", "{run}", "--out", "{tmp}/out"], "not tasks: evaluate it with python -m eval.extrapolation"),
    ("heads-samples", ["eval.heads", "{run}", "--samples", "0"], "--samples must be >= 1"),
    ("heads-task-name", ["eval.heads", "{run}", "--tasks", "recal"], "unknown task 'recal'"),
    ("heads-out-file", ["eval.heads", "{run}", "--out", "{file}"], "--out {file} is a file, not a folder"),
    ("merge-no-folder", ["eval.merge", "{tmp}/no-such-run", "--out", "{tmp}/out"], "{tmp}/no-such-run is not a folder"),
    ("merge-out-file", ["eval.merge", "{tmp}", "--out", "{file}"], "--out {file} is a file, not a folder"),
    ("train-task-name", TRAIN + ["data.source=tasks:recal"], "unknown task 'recal'"),
    ("train-task-weight", TRAIN + ["data.source=tasks:copy,recall*x"], "the weight of recall must be a positive number"),
    ("train-task-twice", TRAIN + ["data.source=tasks:recall,recall*2"], "recall is named twice"),
    ("train-task-vocab", TRAIN + ["data.source=tasks", "data.vocab_size=100"], "data.vocab_size must be at least 162"),
    ("train-task-start-vocab", TRAIN + ["data.source=tasks", "data.vocab_size=162", "data.start_token=true"],
     "data.vocab_size must be at least 163 for task sources (their vocabulary, with the start token)"),
    ("train-task-curriculum", TRAIN + ["data.source=tasks", "data.vocab_size=162", "data.curriculum=[32]"],
     "data.curriculum must be [D, S]: positive integers"),
    ("train-text-curriculum", TRAIN + ["data.curriculum=[32, 100]"], "data.curriculum must be unset for a text source"),
    ("summary-no-run", ["eval.summary", "{tmp}/no-such-run"], "run directory not found: {tmp}/no-such-run"),
    ("bench-config-missing", ["speed.bench", "--config", "{tmp}/nope.yaml"], "config file not found: {tmp}/nope.yaml"),
    ("bench-encoding", ["speed.bench", "--config", str(ROOT / "configs/tiny.yaml"), "--positions", "rotary"],
     "--positions: unknown encoding 'rotary'"),
    ("bench-sliding-case", ["speed.bench", "--config", str(ROOT / "configs/tiny.yaml"), "--sliding-window", "16",
                            "--sliding-window-cases", "ours,masked"],
     "--sliding-window-cases: masked; choose from ours, mask, peer"),
    ("bench-peer-name", ["speed.bench", "--config", str(ROOT / "configs/tiny.yaml"), "--peer", "gpt3"],
     "--peer: expected gpt2, transformers or the path of nanoGPT's model.py, got 'gpt3'"),
    ("bench-peer-not-nanogpt", ["speed.bench", "--config", str(ROOT / "configs/tiny.yaml"), "--peer", "{tmp}/model.py"],
     "--peer {tmp}/model.py: not nanoGPT's model.py (AttributeError"),
    ("bench-decode-multiples", ["speed.bench", "--config", str(ROOT / "configs/tiny.yaml"), "--decode-multiples", "1,0"],
     "--decode-multiples must be positive, got '1,0'"),
    ("bench-rounds", ["speed.bench", "--config", str(ROOT / "configs/tiny.yaml"), "--rounds", "0"],
     "--rounds must be at least 1, got 0"),
    ("bench-attention", ["speed.bench", "--config", str(ROOT / "configs/tiny.yaml"), "--attention", "flash"],
     "--attention: invalid choice: 'flash'"),
    ("bench-device", ["speed.bench", "--config", str(ROOT / "configs/tiny.yaml"), "run.device=cuda:99"],
     "run.device: 'cuda:99' is not available here"),
    ("plots-no-results", ["eval.results.plots", "{tmp}/results.json"], "{tmp}/results.json not found"),
    ("passkey-no-run", ["eval.passkey", "{tmp}/no-such-run"], "run directory not found: {tmp}/no-such-run"),
    ("context-use-no-run", ["eval.context_use", "{tmp}/no-such-run"], "run directory not found: {tmp}/no-such-run"),
    ("context-use-global-layers", ["eval.context_use", "{run}", "--scaling", "yarn:global", "--out", "{tmp}/out"],
     "has no model.layer_types, so every layer is global; give yarn"),
    ("ruler-no-run", ["eval.ruler", "{tmp}/no-such-run"], "run directory not found: {tmp}/no-such-run"),
    ("ruler-unknown-task", ["eval.ruler", "{run}", "--tasks", "niah_nowhere", "--out", "{tmp}/out"],
     "--tasks: unknown 'niah_nowhere'; choose from niah_single_noise"),
    ("rope-settings-no-run", ["eval.rope_settings", "{tmp}/no-such-run"], "run directory not found: {tmp}/no-such-run"),
    ("rope-settings-no-factor", ["eval.rope_settings", "{run}", "--scaling", "{type: yarn}"],
     "--scaling: RoPE scaling 'yarn' requires 'factor'"),
    ("probe-dynamic", ["eval.probe", "{run}", "--scaling", "none,dynamic", "--out", "{tmp}/out"],
     "--scaling: eval.probe takes static scalings; dynamic change with the length"),
    ("passkey-depths", ["eval.passkey", "{run}", "--depths", "0.5,1.5", "--out", "{tmp}/out"],
     "--depths must be shares of the filler in [0, 1], got '0.5,1.5'"),
    ("passkey-depths-text", ["eval.passkey", "{run}", "--depths", "middle", "--out", "{tmp}/out"],
     "--depths must be shares of the filler in [0, 1], got 'middle'"),
    ("passkey-trials", ["eval.passkey", "{run}", "--trials", "0", "--out", "{tmp}/out"], "--trials must be >= 1, got 0"),
    ("passkey-context-yarn", ["eval.passkey", "{run}", "--context-method", "logn", "--scaling", "yarn", "--out",
                              "{tmp}/out"],
     "context method 'logn' and the yarn RoPE scaling both sharpen attention on long inputs"),
    ("passkey-context-unknown", ["eval.passkey", "{run}", "--context-method", "landmark", "--out", "{tmp}/out"],
     "--context-method: unknown context method 'landmark'"),
    ("passkey-short", ["eval.passkey", "{run}", "--lengths", "64", "--out", "{tmp}/out"],
     "a passkey prompt of 64 tokens leaves room for less than one filler repetition"),
    # hf:PATH, a transformers checkpoint, wherever a run directory is accepted (hf/checkpoints.py)
    ("passkey-hf-missing", ["eval.passkey", "hf:{tmp}/no-such-model"],
     "hf:{tmp}/no-such-model: no such folder or .gguf file"),
    ("passkey-hf-no-tokenizer", ["eval.passkey", "hf:{hf_no_tokenizer}", "--out", "{tmp}/out"],
     "hf:{hf_no_tokenizer}: transformers cannot load its tokenizer"),
    ("eval-hf-bad-weights", ["eval.extrapolation", "hf:{hf_bad_weights}", "--out", "{tmp}/out"],
     "hf:{hf_bad_weights}: transformers cannot load its weights"),
    ("passkey-hf-scaling", ["eval.passkey", "{hf}", "--scaling", "dynamic-yarn", "--out", "{tmp}/out"],
     "cannot take RoPE scaling 'dynamic-yarn'"),
    ("eval-hf-missing", ["eval.extrapolation", "hf:{tmp}/no-such-model"],
     "hf:{tmp}/no-such-model: no such folder or .gguf file (hf: reads a transformers checkpoint on disk"),
    ("eval-hf-empty", ["eval.extrapolation", "hf:"], "give a path after hf:"),
    ("generate-hf-run-directory", ["generate.py", "hf:{run}"],
     "hf:{run} is not a transformers checkpoint (no config.json); a run directory is given without hf:"),
    ("probe-hf-not-gguf", ["eval.probe", "hf:{file}"], "hf:{file} is a file but not a .gguf file"),
    ("eval-hf-not-a-model", ["eval.extrapolation", "hf:{notmodel}", "--out", "{tmp}/out"],
     "hf:{notmodel}: transformers cannot load its config"),
    ("tasks-hf", ["eval.tasks", "{hf}"], "was trained elsewhere, on text: the task track's sequences are ids"),
    ("eval-hf-scaling", ["eval.extrapolation", "{hf}", "--scaling", "none,dynamic-yarn", "--out", "{tmp}/out"],
     "cannot take RoPE scaling 'dynamic-yarn' from --scaling (transformers has no rope type for it)"),
    ("probe-hf-scaling", ["eval.probe", "{hf}", "--scaling", "yarn,dynamic-yarn", "--out", "{tmp}/out"],
     "--scaling: eval.probe takes static scalings; dynamic-yarn"),
    ("generate-hf-scaling", ["generate.py", "{hf}", "--rope-scaling", "{type: dynamic-yarn}"],
     "cannot take RoPE scaling 'dynamic-yarn': transformers has no rope type for it"),
    ("generate-hf-compile", ["generate.py", "{hf}", "--compile"], "--compile needs this repo's KV cache"),
    ("generate-hf-max-context", ["generate.py", "{hf}", "--max-context", "8"], "--max-context needs this repo's KV cache"),
    ("generate-hf-best", ["generate.py", "{hf}", "--best"], "is a transformers checkpoint: it has no best-validation"),
    ("to-hf-hf", ["convert.to_hf", "{hf}", "{tmp}/out"], "is a transformers checkpoint already"),
    # converting a transformers checkpoint into a run directory (convert/to_run.py), and fine-tuning one
    ("eval-hf-pickle", ["eval.extrapolation", "hf:{hf_pickle}", "--out", "{tmp}/out"],
     "hf:{hf_pickle}: transformers cannot load its weights"),
    ("generate-hf-pickle", ["generate.py", "hf:{hf_pickle}"], "hf:{hf_pickle}: transformers cannot load its weights"),
    ("convert-hf-pickle", ["convert.to_run", "hf:{hf_pickle}", "{tmp}/run"],
     "hf:{hf_pickle}: transformers cannot load its weights"),
    ("convert-neox", ["convert.to_run", "hf:{neox}", "{tmp}/run"],
     "cannot be converted: gpt_neox has a parallel residual"),
    ("convert-window", ["convert.to_run", "hf:{window}", "{tmp}/run"],
     "cannot be converted: its attention is a sliding window of 4096 tokens"),
    ("convert-lacking", ["convert.to_run", "hf:{hf_lacking}", "{tmp}/run"], "lacks model.layers.1.mlp.up_proj.weight"),
    ("convert-bad-weights", ["convert.to_run", "hf:{hf_bad_weights}", "{tmp}/run"],
     "transformers cannot load its weights"),
    ("convert-wide-tokenizer", ["convert.to_run", "hf:{hf_wide_tokenizer}", "{tmp}/run"],
     "its tokenizer has 512 tokens but the model's vocabulary 256"),
    ("convert-not-hf", ["convert.to_run", "{run}", "{tmp}/run"], "give the checkpoint as hf:PATH"),
    ("convert-no-such-run", ["convert.to_run", "hf:{tmp}/no-such-run", "{tmp}/run"], "no such folder or .gguf file"),
    ("convert-into-run", ["convert.to_run", "{hf}", "{run}"], "exists and is not an empty directory"),
    ("train-init-hf-contradicts", TRAIN + ["train.init_from={hf}", "model.n_layers=3", "data.cache_dir={tmp}/cache"],
     "model.n_layers: 3 contradicts {hf} (2)"),
    ("train-init-hf-vocab", TRAIN + ["train.init_from={hf}", "data.vocab_size=1024", "data.cache_dir={tmp}/cache"],
     "data.vocab_size: 1024 contradicts {hf}'s vocabulary (512)"),
    ("train-init-hf-neox", TRAIN + ["train.init_from=hf:{neox}"], "cannot be converted: gpt_neox has a parallel residual"),
    ("eval-data-tasks", EVAL + ["--data", "tasks:recall1"], "--data takes a text source"),
    ("generate-hf-context-yarn", ["generate.py", "{hf}", "--rope-scaling", "{type: yarn, factor: 4}",
                                  "--context-method", "logn"],
     "--context-method: context method 'logn' and the yarn RoPE scaling both sharpen attention on long inputs"),
    ("eval-hf-context-dynamic", ["eval.extrapolation", "{hf}", "--context-method", "dca", "--scaling", "dynamic",
                                 "--out", "{tmp}/out"],
     "--context-method: {hf}: context method 'dca' keeps the distances attention is shown short, while the dynamic"),
    ("probe-hf-context-key", ["eval.probe", "{hf}", "--context-method", "{type: logn, window: 8}", "--out", "{tmp}/out"],
     "--context-method: context method 'logn' takes no key 'window'; its keys: length"),
]
# Also run as subprocesses: one per command (the in-process cases cover the rest), the hf: path and a lock held by
# another process among them.
SUBPROCESS = ["resume-held", "generate-rope-scaling-scalar", "prepare-config-missing", "to-hf-out-file", "eval-no-run",
              "tasks-no-run", "passkey-short", "convert-hf-pickle"]
MAINS = {"train.py": train.main, "generate.py": generate.main, "data.prepare": data.prepare.main,
         "convert.to_hf": convert.to_hf.main, "convert.to_run": convert.to_run.main,
         "eval.extrapolation": extrapolation.main, "eval.probe": probe.main,
         "eval.summary": summary.main, "speed.bench": bench.main, "eval.results.plots": plots.main, "eval.tasks": tasks.main,
         "eval.merge": merge.main, "eval.passkey": passkey.main, "eval.heads": heads.main,
         "eval.context_use": context_use.main, "eval.ruler": ruler.main, "eval.rope_settings": rope_settings.main,
         "studies.report": report.main}


@pytest.fixture(scope="module")
def hf_export(ten_step_run, tmp_path_factory) -> Path:
    """The tiny run exported as a transformers checkpoint."""
    return convert.to_hf.export(ten_step_run, tmp_path_factory.mktemp("hf") / "ten")


def exported(argv, request) -> Path | None:
    """The hf_export fixture where a case names {hf} (transformers loads it), else None."""
    if not any(key in " ".join(argv) for key in ("{hf}", "{hf_no_tokenizer}", "{hf_bad_weights}", "{hf_pickle}",
                                                  "{neox}", "{window}", "{hf_lacking}", "{hf_wide_tokenizer}")):
        return None
    pytest.importorskip("transformers", reason="transformers loads hf: checkpoints (pip install -e '.[dev]')")
    return request.getfixturevalue("hf_export")


def fill(items, ten_step_run, tmp_path, hf: Path | None = None):
    (tmp_path / "a-file.txt").write_text("not: [a, run\n")
    (tmp_path / "notmodel").mkdir(exist_ok=True)
    (tmp_path / "notmodel" / "config.json").write_text('{"model_type": "no-such-architecture"}\n')
    (tmp_path / "binary.yaml").write_bytes(b"run: {name: \xff\xfe}\n")
    (tmp_path / "numbers.jsonl").write_text('{"text": "a play"}\n{"text": 7}\n')
    (tmp_path / "model.py").write_text("x = 1\n")  # a model.py that is not nanoGPT's
    if hf is not None:  # the export without its tokenizer files, and with its weights cut short
        for name, keep in (("hf_no_tokenizer", lambda f: not f.name.startswith("tokenizer")), ("hf_bad_weights", None)):
            shutil.copytree(hf, tmp_path / name, ignore=lambda _, names: [n for n in names if keep and not keep(Path(n))],
                            dirs_exist_ok=True)
        weights = tmp_path / "hf_bad_weights" / "model.safetensors"
        weights.write_bytes(weights.read_bytes()[:300])  # a second fill cuts nothing more
        damaged(hf, tmp_path)
    places = {"{run}": str(ten_step_run), "{runs}": str(ten_step_run.parent), "{tmp}": str(tmp_path),
              "{file}": str(tmp_path / "a-file.txt"), "{binary}": str(tmp_path / "binary.yaml"),
              "{held}": str(tmp_path / "held"), "{hf}": f"hf:{hf}", "{notmodel}": str(tmp_path / "notmodel"),
              "{hf_no_tokenizer}": str(tmp_path / "hf_no_tokenizer"), "{hf_bad_weights}": str(tmp_path / "hf_bad_weights"),
              **{f"{{{name}}}": str(tmp_path / name) for name in ("hf_pickle", "neox", "window", "hf_lacking",
                                                                   "hf_wide_tokenizer")}}
    filled = []
    for item in items:
        for key, value in places.items():
            item = item.replace(key, value)
        filled.append(item)
    return filled


class Unpickled:
    """An object torch's weights_only loader refuses to build (it would run code on a plain torch.load)."""

    def __reduce__(self):
        return (print, ("this ran",))


def damaged(hf: Path, tmp_path: Path) -> None:
    """The export's weights as a pickle holding an object; configs of architectures the GPT cannot hold; the export
    without one weight; the export whose model's vocabulary is half its tokenizer's."""
    import json
    weights = load_file(hf / "model.safetensors")
    for name, change in (("hf_pickle", None), ("hf_lacking", "lack"), ("hf_wide_tokenizer", "narrow")):
        shutil.copytree(hf, tmp_path / name, dirs_exist_ok=True)
        if change == "lack":
            save_file({k: v for k, v in weights.items() if k != "model.layers.1.mlp.up_proj.weight"},
                      tmp_path / name / "model.safetensors")
    (tmp_path / "hf_pickle" / "model.safetensors").unlink()
    torch.save({**weights, "extra": Unpickled()}, tmp_path / "hf_pickle" / "pytorch_model.bin")
    config = json.loads((hf / "config.json").read_text())
    narrow = {k: v[:256] if v.shape[0] == config["vocab_size"] else v for k, v in weights.items()}
    save_file(narrow, tmp_path / "hf_wide_tokenizer" / "model.safetensors")
    (tmp_path / "hf_wide_tokenizer" / "config.json").write_text(json.dumps({**config, "vocab_size": 256}))
    for name, settings in (("neox", {"model_type": "gpt_neox"}), ("window", {**config, "model_type": "mistral",
                                                                          "sliding_window": 4096})):
        (tmp_path / name).mkdir(exist_ok=True)
        (tmp_path / name / "config.json").write_text(json.dumps(settings))


@contextlib.contextmanager
def holding(case, ten_step_run, tmp_path):
    """While a case whose argv or expected line names {held} runs, this process holds {held}, a copy of the
    run: the command (in this process on a file descriptor of its own, or a subprocess) finds it held."""
    if "{held}" not in " ".join(case):
        yield
        return
    with hold(copy_run(ten_step_run, tmp_path, "held"), "test_bad_inputs"):
        yield


def check(code, out, err, expected):
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2, (code, err)
    assert len(lines) == 1, err
    assert "Traceback" not in out + err
    assert expected in lines[0], lines[0]


@pytest.mark.parametrize("argv, expected", [case[1:] for case in CASES], ids=[case[0] for case in CASES])
def test_bad_input_in_process(argv, expected, ten_step_run, tmp_path, capsys, request):
    hf = exported(argv, request)
    command, *args = fill(argv, ten_step_run, tmp_path, hf)
    with holding([*argv, expected], ten_step_run, tmp_path), pytest.raises(SystemExit) as exit_:
        MAINS[command](args)
    out, err = capsys.readouterr()
    check(exit_.value.code, out, err, fill([expected], ten_step_run, tmp_path, hf)[0])


@pytest.mark.parametrize("case_id", SUBPROCESS)
def test_bad_input_from_the_command_line(case_id, ten_step_run, tmp_path, request):
    _, argv, expected = next(case for case in CASES if case[0] == case_id)
    hf = exported(argv, request)
    command, *args = fill(argv, ten_step_run, tmp_path, hf)
    prefix = [command] if command.endswith(".py") else ["-m", command]
    with holding([*argv, expected], ten_step_run, tmp_path):
        result = subprocess.run([sys.executable, *prefix, *args], cwd=ROOT, capture_output=True, text=True, timeout=120)
    check(result.returncode, result.stdout, result.stderr, fill([expected], ten_step_run, tmp_path, hf)[0])


def test_every_command_has_a_missing_run_or_config_case():
    missing = {argv[0] for _, argv, _ in CASES if any(m in " ".join(argv) for m in ("no-such-run", "nope.yaml", "{tmp}/results.json"))}
    assert missing == set(MAINS)


def test_the_table_is_big_and_ids_are_unique():
    assert len(CASES) >= 45 and len({case[0] for case in CASES}) == len(CASES)
    assert set(SUBPROCESS) <= {case[0] for case in CASES}


# Every file a run directory holds, missing, corrupt or non-finite, in every command that reads it: one
# line naming the file and what is wrong with it, exit 2. eval.tasks reads a task run (no tokenizer.model).
TEXT_READERS = ["generate.py", "eval.extrapolation", "eval.probe", "convert.to_hf"]
RUN_FILES = [  # (file, damages, commands that read it)
    ("config.yaml", ["missing", "corrupt", "not-a-mapping"], [*TEXT_READERS, "eval.tasks", "eval.summary", "resume"]),
    ("checkpoint.json", ["missing", "corrupt"], [*TEXT_READERS, "eval.tasks"]),
    ("checkpoint.json", ["corrupt"], ["resume"]),  # a run without one has no checkpoint yet: resume starts it afresh
    ("model_*.safetensors", ["missing", "truncated", "nan", "inf"], [*TEXT_READERS, "eval.tasks", "resume"]),
    ("state_*.pt", ["missing", "corrupt", "truncated", "nan"], ["resume"]),
    ("tokenizer.model", ["missing", "corrupt"], ["generate.py", "eval.probe", "convert.to_hf"]),  # eval.extrapolation reads shards
    ("metrics.jsonl", ["missing", "corrupt", "torn-line"], ["eval.summary", "eval.tasks"]),
    ("metrics.jsonl", ["corrupt", "torn-line"], ["resume"]),  # missing: resume starts a new log
]
BROKEN = [(file, how, command) for file, damages, commands in RUN_FILES for how in damages for command in commands]


@pytest.fixture(scope="module")
def task_run(tmp_path_factory):
    """A task-track run (it has no tokenizer.model), trained two steps."""
    runs = tmp_path_factory.mktemp("task-runs")
    train.main(["--config", str(ROOT / "studies/tasks/tasks.yaml"), f"run.out_dir={runs}", "run.name=tasks",
                "data.source=tasks:recall1", "model.max_seq_len=64", "model.d_model=32", "train.max_steps=2",
                "train.batch_size=2", "train.warmup_steps=1", "train.log_every=1", "train.eval_every=2",
                "train.ckpt_every=2", "train.eval_tokens=64", "run.device=cpu"])
    return runs / "tasks"


def damage(path: Path, how: str) -> None:
    if how == "missing":
        path.unlink()
    elif how == "corrupt":  # neither UTF-8 text nor YAML, JSON, safetensors, sentencepiece or torch
        path.write_bytes(b"\xff\xfe not what it should be {[")
    elif how == "truncated":
        path.write_bytes(path.read_bytes()[:200])
    elif how == "not-a-mapping":
        path.write_text("- run\n- model\n")
    elif how == "torn-line":  # a line cut short, then more rows
        first, *rest = path.read_text().splitlines()
        path.write_text("\n".join([first, first[:10], *rest]) + "\n")
    elif path.suffix == ".safetensors":  # one weight, deep inside the model
        weights = load_file(path)
        weights["blocks.1.mlp.up_proj.weight"][3, 5] = float(how)
        save_file(weights, path)
    else:  # an Adam moment of the optimizer state
        state = torch.load(path, weights_only=True)
        next(iter(state["optimizer"]["state"].values()))["exp_avg_sq"].view(-1)[7] = float(how)
        torch.save(state, path)


def broken_run(file, how, command, ten_step_run, task_run, tmp_path) -> tuple[list[str], str, tuple[str, ...]]:
    """(argv of `command` on a copy of the run with `file` damaged, the file's name, the words of which
    the error line must hold one)."""
    source = task_run if command == "eval.tasks" else ten_step_run
    run = tmp_path / "runs" / source.name
    shutil.copytree(source, run)
    path = next(run.glob(file))
    damage(path, how)
    out = str(tmp_path / "out")
    argv = {"generate.py": [str(run), "--max-new-tokens", "3"],
            "eval.extrapolation": [str(run), "--lengths", "64", "--max-tokens", "256", "--out", out],
            "eval.probe": [str(run), "--multiples", "1", "--samples", "2", "--out", out],
            "eval.tasks": [str(run), "--multiples", "1", "--samples", "1", "--scaling", "none", "--out", out],
            "eval.summary": [str(run)],
            "convert.to_hf": [str(run), str(tmp_path / "hf")],
            "resume": [*fill(TRAIN, ten_step_run, tmp_path)[1:], f"run.out_dir={run.parent}", f"run.name={run.name}",
                       "train.max_steps=12", "--resume"]}[command]
    reasons = {"missing": ("missing", "not found", f"no {path.name}"),
               "nan": ("holds non-finite",), "inf": ("holds non-finite",)}.get(how, ("corrupt",))
    return argv, path.name, reasons


def check_names_file(code, out, err, name, reasons):
    check(code, out, err, name)
    assert any(reason in err for reason in reasons), err


@pytest.mark.parametrize("file, how, command", BROKEN, ids=[f"{c}-{f}-{h}" for f, h, c in BROKEN])
def test_a_broken_run_file_is_one_line_naming_it(file, how, command, ten_step_run, task_run, tmp_path, capsys):
    argv, name, reasons = broken_run(file, how, command, ten_step_run, task_run, tmp_path)
    with pytest.raises(SystemExit) as exit_:
        MAINS["train.py" if command == "resume" else command](argv)
    out, err = capsys.readouterr()
    check_names_file(exit_.value.code, out, err, name, reasons)
    if command == "convert.to_hf":
        assert not (tmp_path / "hf").exists()


def test_an_export_into_the_run_directory_writes_nothing_there(ten_step_run, capsys):
    run = ten_step_run
    before = {p.name: p.stat().st_mtime_ns for p in run.iterdir()}
    with pytest.raises(SystemExit) as exit_:
        convert.to_hf.main([str(run), str(run)])
    check(exit_.value.code, *capsys.readouterr(), f"out_dir {run} is not empty")
    assert {p.name: p.stat().st_mtime_ns for p in run.iterdir()} == before


@pytest.mark.parametrize("file, how", [("model_*.safetensors", "nan"), ("tokenizer.model", "corrupt")])
def test_a_broken_run_file_from_the_command_line(file, how, ten_step_run, tmp_path):
    argv, name, reasons = broken_run(file, how, "generate.py", ten_step_run, None, tmp_path)
    result = subprocess.run([sys.executable, "generate.py", *argv], cwd=ROOT, capture_output=True, text=True,
                            timeout=120)
    check_names_file(result.returncode, result.stdout, result.stderr, name, reasons)


def test_every_run_file_is_damaged_in_every_command_that_reads_it():
    commands = {"generate.py", "eval.extrapolation", "eval.probe", "eval.tasks", "eval.summary", "convert.to_hf", "resume"}
    assert {c for _, _, c in BROKEN} == commands
    assert {f for f, _, _ in BROKEN} == {"config.yaml", "checkpoint.json", "model_*.safetensors", "state_*.pt",
                                        "tokenizer.model", "metrics.jsonl"}
    assert {"nan", "inf"} <= {h for f, h, _ in BROKEN if f == "model_*.safetensors"}
