"""Every report table rendered again from the committed results beside it, so that no table drifts from its data.

    python -m eval.reports [FOLDER] [--check]      # make reports; FOLDER defaults to reports

Under FOLDER, each table file that sits beside its rows is rendered by the evaluator that wrote it: results.md from
results.json (eval.extrapolation) or results.json.gz (eval.tasks), probes.md from probes.json, passkey.md from
passkey.json, heads.md from heads.json; and a folder with eval.pretrained's report.json gets its report.md again.
Plain `python -m eval.reports` rewrites the files whose text differs; --check writes nothing, names each such file
and exits 1 (the test suite runs it). The plots are not rendered again: their pixels depend on matplotlib's version.

Left out: reports/bench (its older bench.json files lack fields the current table describes, so a rendering today
would describe those measurements by what the bench does now).
"""
from __future__ import annotations

import argparse
import gzip
import json
import sys
from pathlib import Path
from typing import Callable

from config import ArgumentParser, UserError, run_cli
from eval import heads, passkey, pretrained, probe, results, tasks

# (rows file, table file, the evaluator's markdown of the rows)
TABLES: list[tuple[str, str, Callable[[list[dict]], str]]] = [
    ("results.json", "results.md", results.markdown),
    (tasks.RESULTS, "results.md", tasks.markdown),
    ("probes.json", "probes.md", probe.markdown),
    (passkey.RESULTS, "passkey.md", passkey.markdown),
    ("heads.json", "heads.md", heads.markdown),
]
LEFT_OUT = ("bench",)


def read_rows(path: Path) -> list[dict]:
    return json.loads(gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_text())


def rendered(folder: Path) -> dict[Path, str]:
    """{table file: its text rendered from the rows beside it} for every committed table under folder."""
    if not folder.is_dir():
        raise UserError(f"{folder}: no such folder (the reports are in reports/)")
    out = {}
    for rows_name, table_name, markdown in TABLES:
        for rows_path in sorted(folder.rglob(rows_name)):
            table = rows_path.parent / table_name
            if table.exists() and not set(LEFT_OUT) & set(table.relative_to(folder).parts[:-1]):
                out[table] = markdown(read_rows(rows_path))
    for settings in sorted(folder.rglob(pretrained.SETTINGS)):
        out[settings.parent / "report.md"] = pretrained.render(settings.parent, **json.loads(settings.read_text()))
    return out


def stale(folder: Path) -> dict[Path, str]:
    """The table files whose committed text differs from their rendering, with the rendering."""
    return {path: text for path, text in rendered(folder).items() if path.read_text() != text}


def main(argv: list[str] | None = None) -> None:
    parser = ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folder", type=Path, nargs="?", default=Path("reports"), help="where the reports are")
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if a table differs")
    args = parser.parse_args(argv)
    differ = run_cli(lambda: stale(args.folder))
    if args.check:
        for path in differ:
            print(f"differs from its rows: {path} (make reports renders it)")
        sys.exit(1 if differ else 0)
    for path, text in differ.items():
        path.write_text(text)
        print(f"rendered {path}")
    print(f"{len(differ)} of {len(rendered(args.folder))} report tables rendered again; the others were current")


if __name__ == "__main__":
    main()
