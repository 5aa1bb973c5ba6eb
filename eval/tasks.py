"""Accuracy on the long-range tasks (data/tasks.py) at and beyond the training length, by length and by
distance, for every run, seed, RoPE scaling and fine-tune.

    python -m eval.tasks runs/tasks/seed1/rope runs/tasks/seed1/alibi [--multiples 1,2,4,8,16] [--lengths ...] \
        [--scaling none,linear,ntk,dynamic,yarn,dynamic-yarn,llama3] [--fixed-factors 4] [--samples 24] \
        [--decode-chunk 16] [--device cpu] [--out runs/eval/tasks]

Which scalings apply to which run is eval.extrapolation's rule (`plan`): an unscaled RoPE run gets every
method, static ones at s = length / L and at each fixed factor, dynamic ones through the KV cache as in
generation; a fine-tune gets its own scaling; other encodings none; `learned` past its table is n/a.
--context-method applies a training-free context method to every measurement, as in eval.extrapolation.
--drawn-positions evaluates runs trained on randomized positions (train.positions) as Ruoss et al.'s code does
(arXiv 2305.16843; google-deepmind/randomized_positional_encodings draws positions in every forward pass, test
included): each sequence of n tokens gets n positions drawn from [0, max_position) and sorted, a fixed draw per
sequence, instead of 0, 1, ..., n - 1; its rows' scaling column reads "drawn positions" (give it an --out of its own).
At n = max_position the draw is every position, so the two protocols coincide.

At each length n the facts are placed in distance bands, counted from the token that asks for an answer
back to the token that holds it (data/tasks.py): (0, L], (L, 2L], (2L, 4L] ... (n/2, n], --samples
sequences per band and task. A band with hi <= L in a sequence longer than L puts the facts at positions
past L but at a distance seen in training; a band with lo >= L holds only distances longer than any seen
in training: two different failures. The accuracy at a length pools its bands. Every run sees the same
sequences (a fixed seed).

Only runs trained on a task source are evaluated: an hf:PATH checkpoint (hf/checkpoints.py) was trained on text, and
its tokenizer has no tokens for the tasks' own vocabulary, so it is refused in one line.

A run has learned a task when its accuracy at L (no scaling, or its own) is at least 90%; results.md
marks the rows of a task a run has not learned. Writes results.json.gz (one row per run, scaling, task,
length and band; rewritten after each measurement), results.md (mean ± sd over seeds) and plots:
accuracy_vs_length.png, accuracy_vs_distance.png, training.json and training.png (validation accuracy by step).
"""
from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from tqdm import tqdm

from checkpoint import read_metrics
from config import UserError
from data.tasks import sample, task_names, to_batch
from data.train_positions import randomized
from device import pick_device
from eval.harness import (
    CONTEXT_HELP,
    DECODE_CHUNK,
    DECODE_CHUNK_HELP,
    Measurement,
    Models,
    Run,
    check_applicable,
    context_settings,
    evaluate,
    evaluator_parser,
    logits_in_parts,
    parse_factors,
    parse_lengths,
    parse_multiples,
    parse_scalings,
    plan,
    read_runs,
    scalings_option,
)
from eval.results.rows import previous_rows
from eval.results.tasks import DRAWN, RESULTS, markdown, write_report
from model.context import parse_checked


DEFAULT_MULTIPLES = "1,2,4,8,16"
DEFAULT_SAMPLES = 24
EVAL_SEED = 31_415_926  # the evaluation sequences: the same for every run, never a training sequence
# Tiny task models: many sequences in one batch, so decoding takes fewer steps, up to two bounds. A score bias built
# per forward (FoX's gates: B x H x T x S floats) grows with the square of the length: at 16x L, 120 sequences of
# 2,048 tokens in one batch held 8 GB a copy and the evaluation peaked at 17.8 GB.
TASK_TOKENS_PER_FORWARD = 1 << 18
TASK_SCORES_PER_FORWARD = 1 << 28  # elements of one batch's B x H x T x T scores: 1 GiB in float32


def bands(length: int, L: int) -> list[tuple[int, int]]:
    """Distance bands (lo, hi] back from the token that asks: (0, L], then doubling up to the length."""
    edges = [0, min(L, length)]
    while edges[-1] < length:
        edges.append(min(2 * edges[-1], length))
    return list(zip(edges, edges[1:]))


def drawn_positions(length: int, below: int, index: int) -> torch.Tensor:
    """The positions --drawn-positions gives evaluation sequence `index` of `length` tokens: a sorted random subset
    of [0, below), the same for every run."""
    return torch.from_numpy(randomized(np.random.default_rng([EVAL_SEED, length, index]), length, below))


def answer_scores(model, samples, decode_from: int | None, chunk: int, device,
                  positions: torch.Tensor | None = None) -> torch.Tensor:
    """(correct answers, answers, summed answer loss) of each sample (N, 3), from greedy next-token
    predictions over samples of one length, in batches that bound memory; `positions` (N, n): each sample's own."""
    n = len(samples[0].tokens) - 1
    batch = max(1, min(TASK_TOKENS_PER_FORWARD // n, TASK_SCORES_PER_FORWARD // (n * n * model.cfg.n_heads)))
    out = []
    for i in range(0, len(samples), batch):
        x, y = (t.to(device) for t in to_batch(samples[i:i + batch]))
        given = None if positions is None else positions[i:i + batch].to(device)
        scores = torch.zeros(len(x), 3, dtype=torch.float64)
        for a, b, logits in logits_in_parts(model, x, decode_from, chunk, given):
            target = y[:, a:b]
            scored = target != -1
            if scored.any():
                right = (logits.argmax(-1) == target) & scored
                loss = F.cross_entropy(logits.float().transpose(1, 2), target.clamp(min=0), reduction="none") * scored
                scores += torch.stack([right.sum(1), scored.sum(1), loss.sum(1)], dim=1).double().cpu()
        out.append(scores)
    return torch.cat(out)


def job_row(m: Measurement, task: str) -> dict:
    """What identifies a measurement in its rows."""
    return {"run": m.run.name, "seed": m.run.seed, "task": task, "scaling": m.label, "factor_rule": m.factor_rule,
            "factor": None if m.factor is None else round(m.factor, 6), "length": m.length}


def job_key(row: dict) -> tuple:
    """What identifies a job (a measurement on one task), from its job_row or any of its rows (one per band)."""
    return tuple(row[k] for k in ("run", "seed", "task", "scaling", "factor_rule", "factor", "length"))


def task_rows(path: Path) -> list[dict]:
    rows = previous_rows(path, "eval.tasks", "accuracy")
    if not all("run_length" in r for r in rows):
        raise UserError(f"--resume: {path} comes from an older eval.tasks (rows without run_length); "
                        "measure again without --resume")
    return rows


class TaskEvaluator:
    def __init__(self, samples: int, device: torch.device, decode_chunk: int):
        self.samples, self.device, self.decode_chunk = samples, device, decode_chunk
        self.models = Models(device)
        self.done: dict[tuple, dict] = {}

    def measure(self, m: Measurement, task: str) -> list[dict]:
        run, n = m.run, m.length
        base = {**job_row(m, task), "position": run.position, "train_length": run.train_length,
                "multiple": round(n / run.train_length, 4), "through_cache": m.decode_from is not None,
                "decode_chunk": self.decode_chunk if m.decode_from is not None else None}
        model = self.models.get(run.path, m.scaling, m.context)
        base["run_length"] = model.cfg.max_seq_len  # the length this run was trained at (4x L for a fine-tune)
        base["context"] = context_settings(model, m.context)
        limit = model.position.max_positions
        applicable = limit is None or n <= limit
        drawn = m.label == DRAWN
        key = (self.models.key, task, n, m.decode_from, drawn)
        if applicable and key not in self.done:  # every band of the length in one pass, fewer decoding steps
            samples = [sample(task, n + 1, EVAL_SEED, i, band, run.data.start_token) for band in bands(n, run.train_length)
                       for i in range(self.samples)]
            positions = (torch.stack([drawn_positions(n, run.randomized_below, j) for j in range(len(samples))])
                         if drawn else None)
            self.done[key] = answer_scores(model, samples, m.decode_from, self.decode_chunk, self.device, positions)
        rows = []
        for b, (lo, hi) in enumerate(bands(n, run.train_length)):
            row = {**base, "distance": f"{lo}-{hi}", "distance_lo": lo, "distance_hi": hi,
                   "trained_distance": hi <= base["run_length"], "accuracy": None, "answers": 0, "loss": None,
                   "samples": self.samples, "note": None}
            if not applicable:
                rows.append({**row, "note": f"{run.position} positions stop at {limit - 1}"})
                continue
            right, count, loss = self.done[key][b * self.samples:(b + 1) * self.samples].sum(0).tolist()
            rows.append({**row, "accuracy": round(right / count, 5), "answers": int(count), "loss": round(loss / count, 5)})
        return rows


# ----------------------------------------------------------------------------- report


def training_rows(runs: list[Run]) -> list[dict]:
    """{task, run, seed, step, accuracy} for every validation answer accuracy in the metrics.jsonl of the runs;
    a continued run's rows (its own steps: a fine-tune, DroPE's recalibration) are marked continued."""
    out = []
    for run in runs:
        mark = {"continued": True} if run.continued else {}
        for row in read_metrics(run.path):
            clock = {k: row[k] for k in ("wall_s", "threads") if k in row}  # runs trained since train.py logs them
            for key, value in row.items():
                if key.startswith("val_acc_"):
                    out.append({"task": key.removeprefix("val_acc_"), "run": run.name, "seed": run.seed,
                                "step": row["step"], "accuracy": value, **clock, **mark})
    return out


def runs_drawn(runs: list[Run], scaling: str | None, context, lengths: list[int] | None,
               multiples: list[float]) -> None:
    """Refuse --drawn-positions where it means nothing: a run trained on contiguous positions, a scaling or a context
    method besides it, a length with more tokens than positions to draw from."""
    if scaling not in (None, "none") or context is not None:
        raise UserError("--drawn-positions measures a run as it was trained: without --scaling (or with none) and "
                        "without --context-method")
    for run in runs:
        if run.randomized_below is None:
            raise UserError(f"--drawn-positions: {run.path} was trained on contiguous positions; it takes runs trained "
                            f"with train.positions {{type: randomized, ...}}")
        longest = max(lengths or [round(k * run.train_length) for k in multiples])
        if longest > run.randomized_below:
            raise UserError(f"--drawn-positions: {run.path} draws positions below {run.randomized_below}, fewer than "
                            f"the {longest} tokens asked for")


# ----------------------------------------------------------------------------- command line

def main(argv: list[str] | None = None) -> list[dict]:
    parser = evaluator_parser(__doc__, "run directories trained on a task source", "runs/eval/tasks",
                              f"keep the rows already in --out/{RESULTS} and measure only the missing ones "
                              "(add seeds to a report, or finish an interrupted evaluation)")
    parser.add_argument("--multiples", default=DEFAULT_MULTIPLES,
                        help=f"evaluation lengths as multiples of each run's L (default {DEFAULT_MULTIPLES})")
    parser.add_argument("--lengths", default=None, help="evaluation lengths in tokens (instead of --multiples)")
    parser.add_argument("--scaling", default=None,
                        help="RoPE scaling methods for unscaled rope runs (default: all; none with --context-method)")
    parser.add_argument("--fixed-factors", default="4",
                        help="fixed factors at which static methods are also evaluated ('' for none; default 4)")
    parser.add_argument("--context-method", default="none", help=CONTEXT_HELP)
    parser.add_argument("--samples", type=int, default=DEFAULT_SAMPLES,
                        help=f"sequences per task, length and distance band (default {DEFAULT_SAMPLES})")
    parser.add_argument("--decode-chunk", type=int, default=DECODE_CHUNK, help=DECODE_CHUNK_HELP)
    parser.add_argument("--drawn-positions", action="store_true",
                        help="give each sequence positions drawn as the run was trained (runs trained on randomized "
                             "positions only; no scaling or context method), as Ruoss et al.'s code evaluates")
    args = parser.parse_args(argv)
    training: list[dict] = []

    def work(rows: list[dict], lock) -> None:
        context = parse_checked(args.context_method, "--context-method")
        methods = parse_scalings(scalings_option(args.scaling, context))
        fixed_factors = parse_factors(args.fixed_factors)
        lengths = parse_lengths(args.lengths) if args.lengths else None
        multiples = parse_multiples(args.multiples)
        for option, value in (("--samples", args.samples), ("--decode-chunk", args.decode_chunk)):
            if value < 1:
                raise UserError(f"{option} must be >= 1, got {value}")
        lock()
        runs = read_runs(args.runs, tasks=True)
        training.extend(training_rows(runs))  # read before measuring: a broken metrics.jsonl stops it now
        for run in runs:  # a control continued without a scaling takes its base run's L, as the scaled fine-tunes
            run.train_length = run.base_length or run.train_length  # do: all three share lengths, bands, "learned"
        check_applicable(runs, methods, context, named=args.scaling is not None)
        if args.drawn_positions:
            runs_drawn(runs, args.scaling, context, lengths, multiples)
            methods = ["none"]
        jobs = [(dataclasses.replace(m, label=DRAWN) if args.drawn_positions else m, task) for run in runs
                for m in plan(run, methods, lengths or [round(k * run.train_length) for k in multiples], fixed_factors,
                              context)
                for task in task_names(run.data.source)]
        if args.resume:
            given = {(run.name, run.seed) for run in runs}
            training[:0] = [r for r in previous_rows(args.out / "training.json", "eval.tasks training", "accuracy")
                            if (r["run"], r["seed"]) not in given]
            rows.extend(task_rows(args.out / RESULTS))
            done = {job_key(r) for r in rows}
            jobs = [(m, task) for m, task in jobs if job_key(job_row(m, task)) not in done]
        evaluator = TaskEvaluator(args.samples, pick_device(args.device, "--device"), args.decode_chunk)
        bar = tqdm(jobs, unit="measurement", dynamic_ncols=True, disable=None)  # off when not a terminal
        for m, task in bar:
            bar.set_description(f"{m.run.name} | {m.label} | {task} | {m.length}")
            rows.extend(evaluator.measure(m, task))
            write_report(rows, training, args.out, plots=False)  # finished rows survive a crash or Ctrl-C
        bar.close()
    rows = evaluate(args.out, "eval.tasks", work, lambda rows: write_report(rows, training, args.out))
    print(markdown(rows))
    print(f"wrote {args.out}/{RESULTS}, results.md, training.json, accuracy_vs_length.png, accuracy_vs_distance.png, "
          "training.png")
    return rows

if __name__ == "__main__":
    main()
