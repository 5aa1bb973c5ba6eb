"""Merge reports measured apart (one folder per seed, each from its own GPU session; one per run of the task
track, each evaluated as soon as it is trained) into one report.

    python -m eval.merge studies/gpu/seed* --out studies/gpu
    python -m eval.merge studies/tasks runs/tasks/eval/seed7/* --out studies/tasks

Each folder may hold eval.extrapolation's results.json, eval.probe's probes.json, or eval.tasks'
results.json.gz and training.json. The rows are concatenated (a measurement found twice: the later folder's
wins) and the report is written as the evaluators write theirs: results.json, results.md and the plots,
probes.json, probes.md, probes.png; for tasks results.json.gz, results.md, training.json and their plots.
"""
from __future__ import annotations

import argparse
import contextlib
from pathlib import Path

from checkpoint import hold
from config import ArgumentParser, UserError, run_cli
from eval.results import extrapolation, probe, tasks
from eval.results.rows import previous_rows


def training_key(r: dict) -> tuple:
    return r["task"], r["run"], r["seed"], r["step"]


def merged(folders: list[Path], name: str, tool: str, field: str, key) -> list[dict]:
    rows: dict = {}
    for folder in folders:
        for r in previous_rows(folder / name, tool, field):
            rows[key(r)] = r
    return list(rows.values())


def main(argv=None):
    parser = ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folders", nargs="+", type=Path, help="report folders (results.json and/or probes.json)")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    held = contextlib.ExitStack()  # --out's lock, from before the rows are read to the last write

    def read():
        missing = [f for f in args.folders if not f.is_dir()]
        if missing:
            raise UserError(f"{missing[0]} is not a folder")
        if args.out.exists() and not args.out.is_dir():
            raise UserError(f"--out {args.out} is a file, not a folder")
        held.enter_context(hold(args.out, "eval.merge"))  # one evaluation writes a folder at a time
        rows = (merged(args.folders, "results.json", "eval.extrapolation", "ppl", extrapolation.row_key),
                merged(args.folders, "probes.json", "eval.probe", "probe", probe.row_key),
                merged(args.folders, tasks.RESULTS, "eval.tasks", "accuracy", tasks.row_key),
                merged(args.folders, "training.json", "eval.tasks training", "accuracy", training_key))
        if not any(rows[:3]):
            raise UserError(f"no results.json, probes.json or {tasks.RESULTS} in these folders")
        return rows
    with held:
        results, probes, task_rows, training = run_cli(read)
        if results:
            extrapolation.write_report(results, args.out)
        if probes:
            probe.write_report(probes, args.out)
        if task_rows:
            tasks.write_report(task_rows, training, args.out)
    seeds = sorted({r["seed"] for r in results + probes + task_rows})
    print(f"wrote {args.out}: {len(results)} perplexity rows, {len(probes)} probe rows, {len(task_rows)} task rows, "
          f"seeds {seeds}")


if __name__ == "__main__":
    main()
