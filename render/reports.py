"""Every report table rendered again from the committed results beside it, so that no table drifts from its data.

    python -m render.reports [FOLDER] [--check]      # make reports; FOLDER defaults to reports

Under FOLDER, each table file that sits beside its rows is rendered by the evaluator that wrote it: results.md from
results.json (eval.extrapolation) or results.json.gz (eval.tasks), probes.md from probes.json, passkey.md from
passkey.json, heads.md from heads.json; a folder with render.model_report's report.json gets its report.md again; and
the tables and measured paragraphs inside a report's README sit between <!-- rendered: NAME --> and <!-- /rendered -->
lines, filled by BLOCKS below (a paragraph's comparative sentences hold or the rendering stops: render.prose).
Plain `python -m render.reports` rewrites the files whose text differs; --check writes nothing, names each such file
and exits 1 (the test suite runs it). The plots are not rendered again: their pixels depend on matplotlib's version.

speed.bench's bench.md is rendered again from its bench.json where that file records every field the table describes
(`compile_mode` among them: written since `make bench-cpu` and the GPU pieces of today); the older bench.json files
and reports/bench's other tables are left as written (a rendering today would describe those measurements by what the
bench does now).
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Callable

from config import ArgumentParser, UserError, run_cli
from render import (bench_report, extrapolation, gpu_study, heads, model_report, passkey, probe, smollm2, task_track,
                    tasks, text_study)
from render.prose import FalseClaim
from render.rows import ppl_block, previous_rows

# (rows file, a field its every row has, table file, the evaluator's markdown of the rows)
TABLES: list[tuple[str, str, str, Callable[[list[dict]], str]]] = [
    ("results.json", "ppl", "results.md", extrapolation.markdown),
    (tasks.RESULTS, "accuracy", "results.md", tasks.markdown),
    ("probes.json", "probe", "probes.md", probe.markdown),
    (passkey.RESULTS, "depth", "passkey.md", passkey.markdown),
    (heads.RESULTS, "task", "heads.md", heads.markdown),
]
LEFT_OUT = ("bench",)


def rendered(folder: Path) -> dict[Path, str]:
    """{table file: its text rendered from the rows beside it} for every committed table under folder."""
    if not folder.is_dir():
        raise UserError(f"{folder}: no such folder (the reports are in reports/)")
    out = {}
    for rows_name, field, table_name, markdown in TABLES:
        for rows_path in sorted(folder.rglob(rows_name)):
            table = rows_path.parent / table_name
            if table.exists() and not set(LEFT_OUT) & set(table.relative_to(folder).parts[:-1]):
                out[table] = markdown(previous_rows(rows_path, markdown.__module__, field))
    for results in sorted(folder.rglob("bench.json")):  # speed.bench's, those written since it records every field
        measured = json.loads(results.read_text())
        if "compile_mode" in measured and (results.parent / "bench.md").exists():
            out[results.parent / "bench.md"] = bench_report.markdown(measured)
    for settings in sorted(folder.rglob(model_report.SETTINGS)):
        out[settings.parent / "report.md"] = model_report.render(settings.parent, **json.loads(settings.read_text()))
    for page, blocks in BLOCKS.items():  # pages named from the checkout's root, the folder above the reports
        if (folder.parent / page).exists():
            out[folder.parent / page] = with_blocks(folder.parent / page, blocks, folder)
    return out


# ----------------------------------------------------------------------------- tables inside a README

TEXT_STUDY = [("learned", "none", "learned", "none"), ("sinusoidal", "none", "sinusoidal", "none"),
              ("rope", "none", "rope", "none"), ("alibi", "none", "alibi", "none"), ("nope", "none", "nope", "none")]
DYNAMIC_YARN = "dynamic-yarn (s = T/L, cached)"
FINE_TUNES = [("rope-pi", "linear (fine-tuned)", "rope + PI, fine-tuned at 512", "linear x4"),
              ("rope-yarn", "yarn (fine-tuned)", "rope + YaRN, fine-tuned at 512", "yarn x4"),
              ("rope-continued", "none (fine-tuned)", "rope continued at 512 (control)", "none")]


# {README: {block name: its rendering from the reports folder}}; in the page a block sits between
# <!-- rendered: NAME --> and <!-- /rendered --> lines.
BLOCKS: dict[str, dict[str, Callable[[Path], str]]] = {
    "README.md": {"ppl-headline": lambda reports: ppl_block(reports / "extrapolation", [
        *TEXT_STUDY[1:], ("rope", "linear (s = length/L)", "rope", "linear (PI), s = length/L"),
        ("rope", "yarn (s = length/L)", "rope", "yarn, s = length/L"),
        ("rope", DYNAMIC_YARN, "rope", "dynamic-yarn, through the cache"), *FINE_TUNES[1:]], digits=1, multiples=True)},
    "reports/extrapolation/README.md": {
        "ppl-seeds-1-3": lambda reports: ppl_block(reports / "extrapolation", [
            *TEXT_STUDY, ("rope", "linear (s = length/L)", "rope", "linear (PI), s = length/L"),
            ("rope", "linear (s = 4)", "rope", "linear (PI), s = 4"),
            ("rope", "ntk (s = length/L)", "rope", "ntk, s = length/L"), ("rope", "ntk (s = 4)", "rope", "ntk, s = 4"),
            ("rope", "dynamic (s = T/L, cached)", "rope", "dynamic (NTK), through the cache"),
            ("rope", "yarn (s = length/L)", "rope", "yarn, s = length/L"),
            ("rope", "yarn (s = 4)", "rope", "yarn, s = 4"),
            ("rope", DYNAMIC_YARN, "rope", "dynamic-yarn, through the cache"), *FINE_TUNES], digits=1),
        "ppl-more-encodings": lambda reports: ppl_block(reports / "extrapolation", [
            ("rope", "none", "rope (base 1e4)", "none"), *TEXT_STUDY[3:],
            *[(run, "none", run, "none") for run in ("t5", "kerple", "fire")],
            ("rope-half", "none", "rope, half of each head rotated", "none"),
            ("rope-base1e5", "none", "rope, base 1e5", "none"), ("rope-base1e6", "none", "rope, base 1e6", "none"),
            ("rope", DYNAMIC_YARN, "rope (base 1e4)", "dynamic-yarn, through the cache"),
            ("rope-base1e5", DYNAMIC_YARN, "rope, base 1e5", "dynamic-yarn, through the cache"),
            ("rope-base1e6", DYNAMIC_YARN, "rope, base 1e6", "dynamic-yarn, through the cache")],
            digits=1, multiples=True, per_seed=(1, 16)),
        "context-16x": lambda reports: extrapolation.context_table(
            reports / "extrapolation" / "context", ["self-extend", "rerope", "leaky-rerope", "dca", "sinks", "logn"],
            ("rope", "alibi", "t5"), multiple=16),
        "ppl-training-positions": lambda reports: ppl_block(reports / "extrapolation", [
            ("rope", "none", "rope", "none"), ("rope", DYNAMIC_YARN, "rope", "dynamic-yarn, through the cache"),
            ("rope-randomized", "none", "rope, randomized positions (< 2048)", "none"), ("alibi", "none", "alibi", "none"),
            ("alibi-randomized", "none", "alibi, randomized positions (< 2048)", "none"),
            ("rope-pose", "none", "rope, PoSE to 512", "none"),
            ("rope-pose-continued", "none (fine-tuned)", "rope continued with PoSE to 512 (128-token windows)", "none"),
            *FINE_TUNES], digits=1, multiples=True, per_seed=(1, 4, 16))},
    "reports/tasks/README.md": {
        "recipe-search": lambda reports: tasks.recipe_search(reports / "tasks" / "recipe-search"),
        "tasks": lambda reports: tasks.task_table(L=128),
        "at-L": lambda reports: tasks.at_L_table(
            previous_rows(reports / "tasks" / tasks.RESULTS, "eval.tasks", "accuracy"),
            {"rope": "none", "alibi": "none", "nope": "none", "t5": "none", "rope-pi": "linear (fine-tuned)",
             "rope-yarn": "yarn (fine-tuned)", "rope-continued": "none (fine-tuned)"})},
    "reports/extrapolation-gpu/README.md": {"ppl-seeds-1-4": lambda reports: ppl_block(reports / "extrapolation-gpu", [
        *TEXT_STUDY[:3], ("rope", "yarn (s = length/L)", "rope", "yarn (s = length/L)"),
        ("rope", DYNAMIC_YARN, "rope", "dynamic-yarn (s = T/L)"), *TEXT_STUDY[3:],
        *[(run, label, run, label) for run, label, _, _ in FINE_TUNES]], digits=2)},
}
for module in (text_study, task_track, gpu_study, smollm2, bench_report):  # the pages' measured paragraphs
    for page, blocks in module.BLOCKS.items():
        BLOCKS.setdefault(page, {}).update(blocks)
BLOCK = re.compile(r"(<!-- rendered: (\S+) -->\n).*?(\n<!-- /rendered -->)", re.S)


def with_blocks(page: Path, blocks: dict[str, Callable[[Path], str]], reports: Path) -> str:
    """The page with each of its rendered blocks filled again; a block the page lacks or does not know is an error."""
    text = page.read_text()
    found = [m.group(2) for m in BLOCK.finditer(text)]
    if sorted(found) != sorted(blocks):
        raise UserError(f"{page}: rendered blocks {found}, expected {sorted(blocks)} (render/reports.py BLOCKS)")
    return BLOCK.sub(lambda m: m.group(1) + blocks[m.group(2)](reports) + m.group(3), text)




def main(argv: list[str] | None = None) -> None:
    parser = ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folder", type=Path, nargs="?", default=Path("reports"), help="where the reports are")
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if a table differs")
    args = parser.parse_args(argv)
    try:
        tables = run_cli(lambda: rendered(args.folder))
    except FalseClaim as e:  # the data changed under a sentence: a failed run, not a bad input
        print(f"error: {e}", file=sys.stderr)
        sys.exit(1)
    differ = {path: text for path, text in tables.items() if path.read_text() != text}
    if args.check:
        for path in differ:
            print(f"differs from its rows: {path} (make reports renders it)")
        sys.exit(1 if differ else 0)
    for path, text in differ.items():
        path.write_text(text)
        print(f"rendered {path}")
    print(f"{len(differ)} of {len(tables)} report tables rendered again; the others were current")


if __name__ == "__main__":
    main()
