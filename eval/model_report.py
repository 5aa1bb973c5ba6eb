"""The report on one pretrained model (`make smollm2-report`), from eval.extrapolation's and eval.passkey's rows in
one folder: perplexity by length with each RoPE scaling and context method and after each fine-tune, the passkey
heat map by length and depth, for every cell how many windows or trials it holds and the seconds it took, and for
every fine-tune (its training log and config in extend/) its windows, steps, tokens and minutes.

    python -m eval.model_report studies/smollm2 --model "SmolLM2-135M-Instruct ..." --data ../shared/corpora/gutenberg

Writes report.md, passkey.png and report.json (its settings, for `make reports`) beside results.json and
passkey.json.
"""
from __future__ import annotations

import argparse
import json
import os
from collections import defaultdict
from pathlib import Path

import yaml

from config import ArgumentParser, UserError, run_cli
from eval.results import passkey as passkey_report
from eval.results.extrapolation import format_ppl
from eval.results.rows import previous_rows

DESCRIPTION = """\
- Perplexity: the exp of the mean next-token loss over non-overlapping windows of the length (eval.extrapolation),
  encoded with the model's own tokenizer, {tokens}. Measured natively, on the checkpoint converted into a run directory (convert/to_run.py; logits equal
  to transformers' to 1e-4). A static scaling (linear = PI, ntk, yarn) has s = length / L, so it is plain RoPE up to
  L (its cell is the plain RoPE measurement: "= none"). dynamic is dynamic NTK as it runs in generation here: the
  first L tokens prefilled, the rest decoded through the KV cache in chunks of 16 tokens, every cached key rotated
  again with the frequencies of the current length. A context method (model/context.py) runs without a scaling, at
  its defaults for L unless set (its row names every setting). A fine-tune's row ("(fine-tuned)") is the model
  continued by this repo's training loop with its scaling (none: the control), loaded with it.
- Passkey (eval.passkey): the prompt of Mohtashami & Jaggi, as the PI and YaRN papers use it: filler sentences
  repeated, a 5-digit key stated at a depth of them (0: first, 1: last), asked for at the end; a trial is right when
  the key is in what the model generates greedily (the key's tokens and 4 more). Static scalings only,
  s = max(1, length / L); a fine-tune runs with its own scaling (its factor at every length).
- Seconds: the wall-clock time of the cell's measurement on this machine's CPU, loading aside."""


def label(r: dict) -> str:
    """The row's scaling, or its context method with every setting (the defaults it took included)."""
    context = r.get("context")
    if not context:
        return r["scaling"]
    settings = ", ".join(f"{k} {v:,g}" for k, v in context.items() if k != "type")
    return f"{r['scaling'].split(' (')[0]} ({settings})"


def same_as_none(r: dict) -> bool:
    """A static scaling at s = 1 with no context method: plain RoPE, measured as none."""
    return r["factor_rule"] == "length/L" and r["factor"] == 1.0 and not r.get("context")


def ppl_table(rows: list[dict]) -> list[str]:
    lengths = sorted({r["length"] for r in rows})
    runs = defaultdict(set)
    for r in rows:
        runs[label(r)].add(r["run"])
    cells = defaultdict(dict)
    for r in rows:  # a label two runs share (two fine-tunes alike) is named with each run
        cells[label(r) + (f" ({r['run']})" if len(runs[label(r)]) > 1 else "")][r["length"]] = r
    lines = ["| scaling or context method | " + " | ".join(f"{n:,}" for n in lengths) + " |",
             "|---|" + "---:|" * len(lengths)]
    for scaling, by_length in cells.items():
        values = []
        for n in lengths:
            r = by_length.get(n)
            if r is None:
                values.append("not measured")
            elif same_as_none(r):
                values.append("= none")
            elif r["ppl"] is None:
                values.append(f"n/a ({r['note']})")
            else:
                values.append(f"{format_ppl(r['ppl'])} ({r['windows']} × {r['length']:,}; {seconds(r):,.0f} s)")
        lines.append(f"| {scaling} | " + " | ".join(values) + " |")
    return lines


def seconds(r: dict) -> float:
    return r["tokens"] / r["tokens_per_s"] if r.get("tokens_per_s") else 0.0


def logged_minutes(rows: list[dict], per_step: int) -> float:
    """A run's training minutes from its log: its recorded wall time (train.py's wall_s, evaluations included) or,
    in a log written before that was recorded, the minutes its logged throughput adds up to."""
    if "wall_s" in rows[-1]:
        return rows[-1]["wall_s"] / 60
    minutes, previous = 0.0, 0
    for r in rows:  # each logged rate covers the steps since the previous log
        if r.get("tokens_per_s"):
            minutes += (r["step"] - previous) * per_step / r["tokens_per_s"] / 60
            previous = r["step"]
    return minutes


def fine_tunes(folder: Path) -> list[str]:
    """A table of the fine-tunes whose training log and config lie in folder/extend (NAME.jsonl, NAME.yaml): windows,
    positions, steps, tokens, the minutes their logged throughput adds up to, and the validation loss."""
    logs = sorted((folder / "extend").glob("*.jsonl"))
    if not logs:
        return []
    lines = ["| fine-tune | scaling | windows × batch | positions | steps | tokens | minutes | validation loss (at step) |",
             "|---|---|---:|---|---:|---:|---:|---|"]
    for log in logs:
        config = yaml.safe_load(log.with_suffix(".yaml").read_text())
        t, position = config["train"], config["model"]["position"]
        rows = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
        per_step = t["seq_len"] * t["batch_size"] * t["grad_accum"]
        steps = max(r["step"] for r in rows)
        minutes = logged_minutes(rows, per_step)
        val = [(r["val_loss"], r["step"]) for r in rows if r.get("val_loss") is not None]
        scaling = position.get("scaling") or {"type": "none"}
        kind = scaling["type"] + (f" s = {scaling['factor']:g}" if scaling.get("factor") else "")
        positions = t["positions"]
        where = positions["type"] + (f" below {positions['max_position']:,}" if positions.get("max_position") else "")
        lines.append(f"| {log.stem} | {kind} | {t['seq_len']:,} × {t['batch_size'] * t['grad_accum']} | {where} | "
                     f"{steps:,} | {steps * per_step:,} | {minutes:,.0f} | "
                     + (" → ".join(f"{v:.3f} ({step:,})" for v, step in val) if val else "not logged") + " |")
    return lines


SETTINGS = "report.json"  # what render takes beside the rows, so that `make reports` renders the report again


def write(folder: Path, model: str, data: str, hardware: str | None = None) -> Path:
    """report.md (and passkey.png) from the rows in folder; report.json keeps the model, the text and the hardware
    (default: this machine's CPU cores) for a later rendering (studies/report.py)."""
    settings = {"model": model, "data": data, "hardware": hardware or f"{os.cpu_count()} CPU cores"}
    text = render(folder, **settings)
    (folder / SETTINGS).write_text(json.dumps(settings, indent=1) + "\n")
    passkey = previous_rows(folder / passkey_report.RESULTS, "eval.passkey", "depth")
    if passkey:
        passkey_report.plot_heatmap(passkey, folder / "passkey.png")
    (folder / "report.md").write_text(text)
    return folder / "report.md"


def render(folder: Path, model: str, data: str, hardware: str | None = None, cores: int | None = None) -> str:
    """The text of report.md, from the rows in folder and the settings write records (`cores`: an older record's
    CPU cores, for `hardware`)."""
    hardware = hardware or f"{cores} CPU cores"
    ppl = previous_rows(folder / "results.json", "eval.extrapolation", "ppl")
    passkey = previous_rows(folder / passkey_report.RESULTS, "eval.passkey", "depth")
    if not ppl and not passkey:
        raise UserError(f"{folder} holds neither results.json nor {passkey_report.RESULTS} (run eval.extrapolation "
                        f"and eval.passkey)")
    L = next(r["train_length"] for r in ppl + passkey)
    measured = [r for r in ppl if not same_as_none(r)]
    total = sum(map(seconds, measured)) + sum(r.get("seconds", 0) for r in passkey if not r.get("same_as"))
    spans = sorted({r.get("span") for r in ppl} - {None})
    books = sorted({r["tokens"] // r["span"] for r in ppl if r.get("span") and r["tokens"]})
    tokens = (f"on the same tokens at every length (--span): the first {', '.join(f'{n:,}' for n in spans)} tokens of "
              f"each of the first {' or '.join(map(str, books))} test book(s) long enough, cut into windows of the "
              f"length, so a column differs from another only by the context each token has" if spans else
              "the same token budget at every length, in windows taken round-robin over the books, so that lengths "
              "read different text: compare rows within a column")
    lines = [f"# {model}: perplexity and passkey retrieval at and past its context", "",
             f"L = {L:,} tokens (its max_position_embeddings). Text: the test split of {data}. "
             f"Measured on {hardware}; {total / 3600:,.1f} hours of measurement in all.", "",
             DESCRIPTION.format(tokens=tokens)]
    if ppl:
        lines += ["", "## Perplexity by length", "",
                  "Each cell: perplexity (windows × length; seconds).", "", *ppl_table(ppl)]
    tuned = fine_tunes(folder)
    if tuned:
        lines += ["", "## The fine-tunes", "", "From each run's config and training log (extend/): its training windows "
                  "and the positions they carry (PoSE: chunks shifted below the target length), steps, tokens, the "
                  "minutes it trained (its logged wall time, or what its logged tokens per second add up to) on "
                  f"{hardware}, and the loss on "
                  "validation windows of its training length at each evaluation.", "", *tuned]
    if passkey:
        lines += ["", "## Passkey retrieval by length and depth", "", passkey_report.CELL + " passkey.png draws "
                  "the shares.", "", *passkey_report.tables(passkey, level="###")]
    return "\n".join(lines) + "\n"


def main(argv=None):
    parser = ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folder", type=Path, help="a folder holding results.json and/or passkey.json")
    parser.add_argument("--model", required=True, help="what the model is, as the report's title names it")
    parser.add_argument("--data", required=True, help="the text it was evaluated on (eval.extrapolation's --data)")
    parser.add_argument("--hardware", help="what it was measured on (default: this machine's CPU cores)")
    args = parser.parse_args(argv)
    path = run_cli(lambda: write(args.folder, args.model, args.data, args.hardware))
    print(f"wrote {path}" + (f" and {args.folder / 'passkey.png'}" if (args.folder / "passkey.png").exists() else ""))


if __name__ == "__main__":
    main()
