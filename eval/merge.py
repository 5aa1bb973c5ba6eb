"""Merge reports measured apart (one folder per seed, each from its own GPU session) into one report.

    python -m eval.merge reports/extrapolation-gpu/seed* --out reports/extrapolation-gpu

Each folder may hold eval.extrapolation's results.json and eval.probe's probes.json. The rows are
concatenated (a measurement found twice: the later folder's wins) and the report is written as the
evaluators write theirs: results.json, results.md and the plots, probes.json, probes.md, probes.png.
"""
from __future__ import annotations

import argparse
import contextlib
from pathlib import Path

from checkpoint import hold
from config import ArgumentParser, UserError, run_cli
from eval import probe
from eval.extrapolation import measurement_key, previous_rows, write_report


def probe_key(r: dict) -> tuple:
    return r["run"], r["seed"], r["scaling"], r["probe"], r.get("distance"), r.get("length"), r.get("depth")


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
        rows = (merged(args.folders, "results.json", "eval.extrapolation", "ppl", measurement_key),
                merged(args.folders, "probes.json", "eval.probe", "probe", probe_key))
        if not any(rows):
            raise UserError("no results.json or probes.json in these folders")
        return rows
    with held:
        results, probes = run_cli(read)
        if results:
            write_report(results, args.out)
        if probes:
            probe.write_report(probes, args.out)
    seeds = sorted({r["seed"] for r in results + probes})
    print(f"wrote {args.out}: {len(results)} perplexity rows, {len(probes)} probe rows, seeds {seeds}")


if __name__ == "__main__":
    main()
