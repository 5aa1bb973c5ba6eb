"""Accuracy on the long-range tasks (data/tasks.py) at and beyond the training length, by length and by
distance, for every run, seed, RoPE scaling and fine-tune.

    python -m eval.tasks runs/tasks/seed1/rope runs/tasks/seed1/alibi [--multiples 1,2,4,8,16] [--lengths ...] \
        [--scaling none,linear,ntk,dynamic,yarn,dynamic-yarn,llama3] [--fixed-factors 4] [--samples 24] \
        [--decode-chunk 16] [--device cpu] [--out reports/tasks]

Which scalings apply to which run is eval.extrapolation's rule (`plan`): an unscaled RoPE run gets every
method, static ones at s = length / L and at each fixed factor, dynamic ones through the KV cache as in
generation; a fine-tune gets its own scaling; other encodings none; `learned` past its table is n/a.
--context-method applies a training-free context method to every measurement, as in eval.extrapolation.

At each length n the facts are placed in distance bands, counted from the token that asks for an answer
back to the token that holds it (data/tasks.py): (0, L], (L, 2L], (2L, 4L] ... (n/2, n], --samples
sequences per band and task. A band with hi <= L in a sequence longer than L puts the facts at positions
past L but at a distance seen in training; a band with lo >= L holds only distances longer than any seen
in training: two different failures. The accuracy at a length pools its bands. Every run sees the same
sequences (a fixed seed).

Only runs trained on a task source are evaluated: an hf:PATH checkpoint (pretrained/hf.py) was trained on text, and
its tokenizer has no tokens for the tasks' own vocabulary, so it is refused in one line.

A run has learned a task when its accuracy at L (no scaling, or its own) is at least 90%; results.md
marks the rows of a task a run has not learned. Writes results.json.gz (one row per run, scaling, task,
length and band; rewritten after each measurement), results.md (mean ± sd over seeds) and plots:
accuracy_vs_length.png, accuracy_vs_distance.png, training.json and training.png (validation accuracy by step).
"""
from __future__ import annotations

import argparse
import contextlib
import gzip
import json
from pathlib import Path

import torch
import torch.nn.functional as F

from tqdm import tqdm

from checkpoint import atomic_write, atomic_write_text, hold, model_config, read_metrics, read_run_config
from config import ArgumentParser, UserError
from data.tasks import TASKS, sample, task_names, to_batch
from device import keep_freed_host_memory, pick_device
from eval.extrapolation import (
    CONTEXT_HELP,
    DECODE_CHUNK,
    DECODE_CHUNK_HELP,
    Measurement,
    Models,
    Run,
    context_settings,
    keep_finished,
    logits_in_parts,
    parse_factors,
    parse_lengths,
    parse_multiples,
    parse_scalings,
    plan,
    previous_rows,
    read_runs,
    scalings_option,
)
from eval.results import curve_label, spread
from model.context import parse_checked

RESULTS = "results.json.gz"  # the rows; results.md is their table

DEFAULT_MULTIPLES = "1,2,4,8,16"
DEFAULT_SAMPLES = 24
EVAL_SEED = 31_415_926  # the evaluation sequences: the same for every run, never a training sequence
LEARNED = 0.9  # accuracy at L from which a run counts as having learned a task
TOKENS_PER_FORWARD = 1 << 18  # tiny task models: a whole (task, length) in one batch, so decoding takes fewer steps


def bands(length: int, L: int) -> list[tuple[int, int]]:
    """Distance bands (lo, hi] back from the token that asks: (0, L], then doubling up to the length."""
    edges = [0, min(L, length)]
    while edges[-1] < length:
        edges.append(min(2 * edges[-1], length))
    return list(zip(edges, edges[1:]))


def answer_scores(model, samples, decode_from: int | None, chunk: int, device) -> torch.Tensor:
    """(correct answers, answers, summed answer loss) of each sample (N, 3), from greedy next-token
    predictions over samples of one length, in batches that bound memory."""
    n = len(samples[0].tokens) - 1
    batch = max(1, TOKENS_PER_FORWARD // n)
    out = []
    for i in range(0, len(samples), batch):
        x, y = (t.to(device) for t in to_batch(samples[i:i + batch]))
        scores = torch.zeros(len(x), 3, dtype=torch.float64)
        for a, b, logits in logits_in_parts(model, x, decode_from, chunk):
            target = y[:, a:b]
            scored = target != -1
            if scored.any():
                right = (logits.argmax(-1) == target) & scored
                loss = F.cross_entropy(logits.float().transpose(1, 2), target.clamp(min=0), reduction="none") * scored
                scores += torch.stack([right.sum(1), scored.sum(1), loss.sum(1)], dim=1).double().cpu()
        out.append(scores)
    return torch.cat(out)


def base_length(run: Run) -> int:
    """The L a run is measured against: a run continued without scaling (the 4x control) takes its base
    run's, as the scaled fine-tunes do, so all three share lengths, bands and the 'learned at L' rule."""
    init_from = (read_run_config(run.path).get("train") or {}).get("init_from")
    if run.continued and not run.scaling and init_from:
        try:
            return model_config(Path(init_from)).max_seq_len
        except UserError:
            pass  # the base run is gone: its own length
    return run.train_length


def job_row(m: Measurement, task: str) -> dict:
    """What identifies a measurement in its rows."""
    return {"run": m.run.name, "seed": m.run.seed, "task": task, "scaling": m.label, "factor_rule": m.factor_rule,
            "factor": None if m.factor is None else round(m.factor, 6), "length": m.length}


def measurement_key(row: dict) -> tuple:
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
        key = (self.models.key, task, n, m.decode_from)
        if applicable and key not in self.done:  # every band of the length in one pass, fewer decoding steps
            samples = [sample(task, n + 1, EVAL_SEED, i, band) for band in bands(n, run.train_length)
                       for i in range(self.samples)]
            self.done[key] = answer_scores(model, samples, m.decode_from, self.decode_chunk, self.device)
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

def pooled(rows: list[dict]) -> dict[tuple, float | None]:
    """{(run, seed, task, curve label, length): accuracy over every band}; None where not applicable."""
    out: dict[tuple, list[int]] = {}
    for r in rows:
        key = (r["run"], r["seed"], r["task"], curve_label(r), r["length"])
        if r["accuracy"] is None:
            out[key] = None
        elif out.setdefault(key, [0, 0]) is not None:
            out[key][0] += round(r["accuracy"] * r["answers"])
            out[key][1] += r["answers"]
    return {k: (v[0] / v[1] if v else None) for k, v in out.items()}


def interval(accuracy: float, sequences: int, z: float = 1.96) -> tuple[float, float]:
    """A 95% interval for an accuracy over `sequences` independent sequences, each scored on several answers.
    Answers within a sequence are correlated (a copied span is one fact), so the units are the sequences; a
    sequence's own accuracy lies in [0, 1], so the variance of their mean is at most p (1 - p) / sequences, and
    the Wilson score interval with that variance is conservative (exact when a sequence is all right or all wrong)."""
    p, n = accuracy, sequences
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * (p * (1 - p) / n + z * z / (4 * n * n)) ** 0.5 / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def learned(rows: list[dict]) -> dict[tuple, bool]:
    """{(run, seed, task): accuracy >= 90% at the length the run was trained at (L, or 4x L for a
    fine-tune), measured without scaling or with the run's own, and without a context method where the rows
    have such a measurement."""
    acc = pooled(rows)
    out = {}
    for r in sorted(rows, key=lambda r: r.get("context") is None):  # plain rows last: they decide
        if r["length"] == r["run_length"] and r["factor_rule"] in (None, "fine-tuned"):
            out[(r["run"], r["seed"], r["task"])] = (acc[(r["run"], r["seed"], r["task"], curve_label(r), r["length"])]
                                                    or 0) >= LEARNED
    return out


def cell(values: list[float | None]) -> str:
    """Mean ± sd over seeds, and each seed's value in seed order: 77 ± 24 (100/79/51)."""
    if not values or any(v is None for v in values):
        return "n/a"
    mean, std = spread(values)
    if std is None:
        return f"{100 * mean:.0f}"
    return f"{100 * mean:.0f} ± {100 * std:.0f} ({'/'.join(f'{100 * v:.0f}' for v in values)})"


def curves(rows: list[dict], by: str) -> dict[tuple, dict]:
    """{(task, run, curve label): {x: {seed: accuracy}}} with x the length (pooled over bands) or, at each
    run's longest length, the distance band."""
    acc = pooled(rows)
    out: dict[tuple, dict] = {}
    longest = {}
    for r in rows:
        longest[r["run"]] = max(longest.get(r["run"], 0), r["length"])
    for r in rows:
        key = (r["task"], r["run"], curve_label(r))
        if by == "length":
            out.setdefault(key, {}).setdefault(r["multiple"], {})[r["seed"]] = \
                acc[(r["run"], r["seed"], r["task"], curve_label(r), r["length"])]
        elif r["length"] == longest[r["run"]]:
            out.setdefault(key, {}).setdefault((r["distance_lo"], r["distance_hi"]), {})[r["seed"]] = r["accuracy"]
    return out


def interval_note(rows: list[dict]) -> str:
    """How wide a 95% interval over sequences is around one seed's value, by how many sequences its cell holds."""
    per_cell: dict[tuple, int] = {}
    for r in rows:
        key = (r["run"], r["seed"], r["task"], curve_label(r), r["length"], r["multiple"])
        per_cell[key] = per_cell.get(key, 0) + r["samples"]
    sizes = sorted({(key[-1], n) for key, n in per_cell.items()})
    band = sorted({r["samples"] for r in rows})

    def half(n: int) -> str:
        lo, hi = interval(0.5, n)
        return f"±{100 * (hi - lo) / 2:.0f}"
    by_length = ", ".join(f"{n} sequences at {m:g}x ({half(n)})" for m, n in sizes)
    return ("- Intervals: answers within a sequence are not independent (a copied span is one fact), so a 95% interval "
            "for one seed's value counts sequences (eval.tasks.interval, conservative). Half-widths at 50%, narrower "
            f"towards 0 and 100: by length, {by_length}; by distance, {', '.join(map(str, band))} sequences a band "
            f"({', '.join(half(n) for n in band)}). Two values whose intervals overlap are not told apart here.")


def markdown(rows: list[dict]) -> str:
    ok = learned(rows)
    seeds = sorted({r["seed"] for r in rows})
    tasks = list(dict.fromkeys(r["task"] for r in rows))
    lines = ["# Long-range tasks: answer accuracy (%) by length and by distance", "",
             f"Mean ± sample standard deviation over seeds ({', '.join(map(str, seeds))}), then each seed's value "
             "in that order; greedy prediction of "
             "every answer token, the question's own tokens given. Chance (a blind guess among the answers' "
             "alphabet): " + ", ".join(f"{t} {100 * TASKS[t].chance:.1f}" for t in tasks) + ".", "",
             f"- †: a seed of this run did not learn the task (below {LEARNED:.0%} at the length it was trained "
             "at: L, or 4x L for a fine-tune): its rows past that length say nothing about extrapolation.",
             "- By length: the facts in every distance band, (0, L] to (n/2, n], pooled. A distance counts from "
             "the token that asks for an answer back to the token that holds it.",
             "- By distance from the question, at each run's longest length: (0, L] is positions past L at "
             "distances seen in training; the other bands are distances longer than any the base run saw "
             "(a fine-tune saw up to 4x L).",
             "- s = length/L, s = 4, s = T/L (cached): the scalings as in eval.extrapolation; \"(fine-tuned)\": "
             "continued at 4x L with that scaling, \"none (fine-tuned)\" the control.",
             interval_note(rows)]
    for by, title in (("length", "by length (multiples of L)"),
                      ("distance", "by distance from the question, at the longest length")):
        table = curves(rows, by)
        for task in tasks:
            keys = [k for k in table if k[0] == task]
            xs = sorted({x for k in keys for x in table[k]})
            head = [f"{x:g}x" for x in xs] if by == "length" else [f"{lo}-{hi}" for lo, hi in xs]
            lines += ["", f"## {task}: {title}", "", "| run | scaling | " + " | ".join(head) + " |",
                      "|---|---|" + "---:|" * len(xs)]
            for key in keys:
                _, run, label = key
                mark = "" if all(ok.get((run, s, task), True) for s in seeds) else " †"
                values = [cell([v for _, v in sorted(table[key][x].items())]) if x in table[key] else "" for x in xs]
                lines.append(f"| {run}{mark} | {label} | " + " | ".join(values) + " |")
    return "\n".join(lines) + "\n"


def training_rows(runs: list[Run]) -> list[dict]:
    """{task, run, seed, step, accuracy} for every validation answer accuracy in the metrics.jsonl of
    the runs trained from scratch (fine-tunes count their own steps)."""
    out = []
    for run in runs:
        if run.continued:
            continue
        for row in read_metrics(run.path):
            for key, value in row.items():
                if key.startswith("val_acc_"):
                    out.append({"task": key.removeprefix("val_acc_"), "run": run.name, "seed": run.seed,
                                "step": row["step"], "accuracy": value})
    return out


def training_curves(training: list[dict]) -> dict[str, dict[str, dict[int, list[float]]]]:
    """{task: {run: {step: [accuracy per seed]}}} from training_rows."""
    out: dict[str, dict[str, dict[int, list[float]]]] = {}
    for r in training:
        out.setdefault(r["task"], {}).setdefault(r["run"], {}).setdefault(r["step"], []).append(r["accuracy"])
    return out


def write_report(rows: list[dict], training: list[dict], out: Path, plots: bool = True) -> None:
    """results.json, results.md, training.json (training_rows) and (with plots) the plots."""
    # a row per line: a three-seed report has thousands of rows
    text = "[\n" + ",\n".join(json.dumps(r, allow_nan=False) for r in rows) + "\n]\n"
    # gzip: the rows of three seeds by task, scaling, length and distance band are megabytes of JSON
    atomic_write(out / RESULTS, lambda tmp: Path(tmp).write_bytes(gzip.compress(text.encode(), mtime=0)))
    atomic_write_text(out / "training.json", "[\n" + ",\n".join(json.dumps(r, allow_nan=False) for r in training) + "\n]\n")
    atomic_write_text(out / "results.md", markdown(rows))
    if plots:
        from eval.plots import plot_task_accuracy, plot_task_training
        plot_task_accuracy(curves(rows, "length"), curves(rows, "distance"), learned(rows), out)
        plot_task_training(training_curves(training), out / "training.png")


# ----------------------------------------------------------------------------- command line

def main(argv: list[str] | None = None) -> list[dict]:
    keep_freed_host_memory()  # process-wide: CPU steps reuse freed memory (device.py)
    parser = ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="+", type=Path, help="run directories trained on a task source")
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
    parser.add_argument("--device", default="auto", help="auto (cuda, then mps, then cpu), cpu, cuda ...")
    parser.add_argument("--out", type=Path, default=Path("reports/tasks"))
    parser.add_argument("--resume", action="store_true",
                        help=f"keep the rows already in --out/{RESULTS} and measure only the missing ones "
                             "(add seeds to a report, or finish an interrupted evaluation)")
    args = parser.parse_args(argv)
    rows: list[dict] = []
    training: list[dict] = []
    held = contextlib.ExitStack()  # --out's lock, from when the options are checked to the last write

    def work():
        context = parse_checked(args.context_method, "--context-method")
        methods = parse_scalings(scalings_option(args.scaling, context))
        fixed_factors = parse_factors(args.fixed_factors)
        lengths = parse_lengths(args.lengths) if args.lengths else None
        multiples = parse_multiples(args.multiples)
        for option, value in (("--samples", args.samples), ("--decode-chunk", args.decode_chunk)):
            if value < 1:
                raise UserError(f"{option} must be >= 1, got {value}")
        if args.out.exists() and not args.out.is_dir():
            raise UserError(f"--out {args.out} is a file, not a folder")
        held.enter_context(hold(args.out, "eval.tasks"))  # one evaluation writes a folder at a time
        runs = read_runs(args.runs, tasks=True)
        training.extend(training_rows(runs))  # read before measuring: a broken metrics.jsonl stops it now
        for run in runs:
            run.train_length = base_length(run)
        jobs = [(m, task) for run in runs
                for m in plan(run, methods, lengths or [round(k * run.train_length) for k in multiples], fixed_factors,
                              context)
                for task in task_names(run.data.source)]
        if args.resume:
            given = {(run.name, run.seed) for run in runs}
            training[:0] = [r for r in previous_rows(args.out / "training.json", "eval.tasks training", "accuracy")
                            if (r["run"], r["seed"]) not in given]
            rows.extend(task_rows(args.out / RESULTS))
            done = {measurement_key(r) for r in rows}
            jobs = [(m, task) for m, task in jobs if measurement_key(job_row(m, task)) not in done]
        evaluator = TaskEvaluator(args.samples, pick_device(args.device, "--device"), args.decode_chunk)
        bar = tqdm(jobs, unit="measurement", dynamic_ncols=True, disable=None)  # off when not a terminal
        for m, task in bar:
            bar.set_description(f"{m.run.name} | {m.label} | {task} | {m.length}")
            rows.extend(evaluator.measure(m, task))
            write_report(rows, training, args.out, plots=False)  # finished rows survive a crash or Ctrl-C
        bar.close()
    with held:
        keep_finished(work, rows, args.out, lambda: write_report(rows, training, args.out))
        write_report(rows, training, args.out)
    print(markdown(rows))
    print(f"wrote {args.out}/{RESULTS}, results.md, training.json, accuracy_vs_length.png, accuracy_vs_distance.png, "
          "training.png")
    return rows


if __name__ == "__main__":
    main()
