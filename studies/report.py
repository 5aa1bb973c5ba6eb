"""`make reports`: every study page's tables and named values filled again from the committed rows, and every
evaluator's table beside its rows written again, so that nothing on a page drifts from its data.

    python -m studies.report [--check] [--study NAME]   # --check writes nothing, names each file that differs, exits 1

A page is markdown written by a person. The renderer touches three kinds of marks in it and nothing else:

    <!-- table: NAME -->          a table or figure line, filled by the function NAME of the study's values.py
    ...
    <!-- /table -->
    <!--v:NAME-->110.0<!--/v-->   a number inside a sentence, filled by the function NAME of values.py
    <!--claim:ID-->               after a comparative sentence: the test test_claim_ID of the study's test_claims.py
                                  proves it from the rows (tests/test_studies.py checks each id has its test)

In studies/NAME/README.md a bare NAME or ID is the study's own; README.md names them as STUDY.NAME (text.alibi_16x).
A study's values.py registers its functions with `study = Study(__file__)` and the decorators `@study.table` and
`@study.value`; each returns the markdown it stands for, computed from the rows in the study's folder.
"""
from __future__ import annotations

import functools
import importlib
import json
import re
import sys
from pathlib import Path
from typing import Callable

from config import ArgumentParser, UserError, run_cli
from eval import model_report
from eval.results import context_use, extrapolation, heads, passkey, probe, ruler, tasks
from eval.results.rows import previous_rows
from speed import results as bench

ROOT = Path(__file__).resolve().parents[1]
STUDIES = ROOT / "studies"
TABLE = re.compile(r"(<!-- table: ([\w.]+) -->\n).*?(<!-- /table -->)", re.S)
VALUE = re.compile(r"(<!--v:([\w.]+)-->).*?(<!--/v-->)", re.S)
CLAIM = re.compile(r"<!--claim:([\w.-]+)-->")

# Each evaluator's own table, written again from the rows beside it: (rows file, a field every row has, table file,
# the evaluator's markdown of the rows); three evaluators write results.json, told apart by that field.
EVALUATOR_TABLES: list[tuple[str, str, str, Callable[[list[dict]], str]]] = [
    ("results.json", "ppl", "results.md", extrapolation.markdown),
    ("results.json", "context_tokens", "results.md", context_use.markdown),
    (ruler.RESULTS, "expected", "results.md", ruler.markdown),
    (tasks.RESULTS, "accuracy", "results.md", tasks.markdown),
    ("probes.json", "probe", "probes.md", probe.markdown),
    (passkey.RESULTS, "depth", "passkey.md", passkey.markdown),
    (heads.RESULTS, "task", "heads.md", heads.markdown),
]


class Study:
    """The named tables and values of one study, registered by its values.py."""

    def __init__(self, values_file: str):
        self.folder = Path(values_file).resolve().parent
        self.name = self.folder.name
        self.tables: dict[str, Callable[[], str]] = {}
        self.values: dict[str, Callable[[], str]] = {}

    def table(self, fn: Callable[[], str]) -> Callable[[], str]:
        self.tables[fn.__name__] = fn
        return fn

    def value(self, fn: Callable[[], str]) -> Callable[[], str]:
        self.values[fn.__name__] = fn
        return fn

    def named(self, fn: Callable[[], dict[str, str]]) -> Callable[[], dict[str, str]]:
        """A function giving many values at once, {name: value}: each registered, the function run once."""
        once = functools.cache(fn)
        for name in once():
            self.values[name] = lambda name=name: once()[name]
        return once


def studies() -> dict[str, Study]:
    """{study name: its Study} for every studies/NAME/values.py."""
    out = {}
    for values in sorted(STUDIES.glob("*/values.py")):
        module = importlib.import_module(f"studies.{values.parent.name}.values")
        out[values.parent.name] = module.study
    return out


def lookup(kind: str, name: str, own: str | None, known: dict[str, Study], page: Path) -> Callable[[], str]:
    study, _, short = name.rpartition(".") if "." in name else (own, "", name)
    found = getattr(known.get(study), kind, {}).get(short) if study else None
    if found is None:
        where = f"studies/{study}/values.py" if study else "a study (write it as STUDY.NAME on this page)"
        raise UserError(f"{page}: no {kind[:-1]} {name!r} in {where}")
    return found


def filled(page: Path, own: str | None, known: dict[str, Study]) -> str:
    """The page with every table block and named value filled again from the rows."""
    text = page.read_text()
    text = TABLE.sub(lambda m: m.group(1) + lookup("tables", m.group(2), own, known, page)().rstrip("\n") + "\n"
                     + m.group(3), text)
    return VALUE.sub(lambda m: m.group(1) + lookup("values", m.group(2), own, known, page)() + m.group(3), text)


def pages() -> dict[Path, str | None]:
    """{page: the study whose names it uses unqualified (None for the front page)}."""
    return {ROOT / "README.md": None, **{p: p.parent.name for p in sorted(STUDIES.glob("*/README.md"))}}


def first_row(path: Path) -> dict:
    """The first row of an evaluator's rows file ({} where it has none)."""
    rows = previous_rows(path, "evaluator", "run")
    return rows[0] if rows else {}


def evaluator_tables(folder: Path) -> dict[Path, str]:
    out = {}
    for rows_name in dict.fromkeys(name for name, *_ in EVALUATOR_TABLES):
        for rows_path in sorted(folder.rglob(rows_name)):
            for name, field, table_name, markdown in EVALUATOR_TABLES:
                if name == rows_name and (rows_path.parent / table_name).exists() and field in first_row(rows_path):
                    out[rows_path.parent / table_name] = markdown(previous_rows(rows_path, markdown.__module__, field))
                    break
    for rows_path in sorted(folder.rglob("bench.json")):  # those written since speed.bench records every field
        measured = json.loads(rows_path.read_text())
        if "compile_mode" in measured and (rows_path.parent / "bench.md").exists():
            out[rows_path.parent / "bench.md"] = bench.markdown(measured)
    for settings in sorted(folder.rglob(model_report.SETTINGS)):
        out[settings.parent / "report.md"] = model_report.render(settings.parent, **json.loads(settings.read_text()))
    return out


def rendered(only: str | None = None) -> dict[Path, str]:
    """{file: its text rendered from the rows}: every evaluator table under studies/ and every page (with `only`, one
    study's folder and page)."""
    if only is not None and not (STUDIES / only / "values.py").is_file():
        raise UserError(f"--study {only}: no studies/{only}/values.py")
    known = studies() if only is None else {only: importlib.import_module(f"studies.{only}.values").study}
    out = evaluator_tables(STUDIES if only is None else STUDIES / only)
    for page, own in pages().items():
        if only is None or own == only:
            out[page] = filled(page, own, known)
    return out


def main(argv: list[str] | None = None) -> None:
    parser = ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if a file differs from its rows")
    parser.add_argument("--study", help="render only this study's folder and page (studies/NAME)")
    args = parser.parse_args(argv)
    files = run_cli(lambda: rendered(args.study))
    differ = {path: text for path, text in files.items() if path.read_text() != text}
    for path, text in differ.items():
        print(f"{'differs from its rows' if args.check else 'rendered'}: {path.relative_to(ROOT)}")
        if not args.check:
            path.write_text(text)
    if args.check and differ:
        sys.exit(1)
    print(f"{len(differ)} of {len(files)} files {'differ' if args.check else 'rendered again'}")


if __name__ == "__main__":
    main()
