"""The report on one pretrained model (`make smollm2-report`), from eval.extrapolation's and eval.passkey's rows in
one folder: perplexity by length with each RoPE scaling, the passkey heat map by length and depth, and for every
cell how many windows or trials it holds and the seconds it took.

    python -m eval.pretrained reports/smollm2 --model "SmolLM2-135M-Instruct ..." --data ../shared/corpora/gutenberg

Writes report.md and passkey.png beside results.json and passkey.json.
"""
from __future__ import annotations

import argparse
import os
from collections import defaultdict
from pathlib import Path

from config import ArgumentParser, UserError, run_cli
from eval.extrapolation import previous_rows
from eval import passkey as passkey_report
from eval.results import format_ppl

DESCRIPTION = """\
- Perplexity: the exp of the mean next-token loss over non-overlapping windows of the length inside test documents
  (eval.extrapolation), encoded with the model's own tokenizer; every length scores the same token budget. A static
  scaling (linear = PI, ntk, yarn) has s = length / L, so it is plain RoPE up to L (its cell is the plain RoPE
  measurement: "= none"). dynamic is transformers' dynamic NTK as it runs in generation: the first L tokens
  prefilled, the rest decoded through the cache in chunks of 16 tokens, each chunk with the frequencies of its last
  length, and every cached key keeps the rotation it was computed with. A context method (model/context.py) runs
  without a scaling, at its defaults for L unless set (its row names every setting), through transformers'
  attention (pretrained/hf.py): Self-Extend, ReRoPE, Leaky ReRoPE and DCA change the distances attention is shown
  at L too, attention sinks hide what has left their window, log-n changes nothing up to L.
- Passkey (eval.passkey): the prompt of Mohtashami & Jaggi, as the PI and YaRN papers use it: filler sentences
  repeated, a 5-digit key stated at a depth of them (0: first, 1: last), asked for at the end; a trial is right when
  the key is in what the model generates greedily (the key's tokens and 4 more). Static scalings only,
  s = max(1, length / L).
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
    cells = defaultdict(dict)
    for r in rows:
        cells[label(r)][r["length"]] = r
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


def write(folder: Path, model: str, data: str) -> Path:
    ppl = previous_rows(folder / "results.json", "eval.extrapolation", "ppl")
    passkey = previous_rows(folder / passkey_report.RESULTS, "eval.passkey", "depth")
    if not ppl and not passkey:
        raise UserError(f"{folder} holds neither results.json nor {passkey_report.RESULTS} (run eval.extrapolation "
                        f"and eval.passkey)")
    L = next(r["train_length"] for r in ppl + passkey)
    measured = [r for r in ppl if not same_as_none(r)]
    total = sum(map(seconds, measured)) + sum(r.get("seconds", 0) for r in passkey if not r.get("same_as"))
    lines = [f"# {model}: perplexity and passkey retrieval at and past its context", "",
             f"L = {L:,} tokens (its max_position_embeddings). Text: the test split of {data}. "
             f"This machine: {os.cpu_count()} CPU cores; {total / 3600:,.1f} hours of measurement in all.", "", DESCRIPTION]
    if ppl:
        lines += ["", "## Perplexity by length", "",
                  "Each cell: perplexity (windows × length; seconds).", "", *ppl_table(ppl)]
    if passkey:
        lines += ["", "## Passkey retrieval by length and depth", "", passkey_report.CELL + " passkey.png draws "
                  "the shares.", "", *passkey_report.tables(passkey, level="###")]
        passkey_report.plot_heatmap(passkey, folder / "passkey.png")
    (folder / "report.md").write_text("\n".join(lines) + "\n")
    return folder / "report.md"


def main(argv=None):
    parser = ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folder", type=Path, help="a folder holding results.json and/or passkey.json")
    parser.add_argument("--model", required=True, help="what the model is, as the report's title names it")
    parser.add_argument("--data", required=True, help="the text it was evaluated on (eval.extrapolation's --data)")
    args = parser.parse_args(argv)
    path = run_cli(lambda: write(args.folder, args.model, args.data))
    print(f"wrote {path}" + (f" and {args.folder / 'passkey.png'}" if (args.folder / "passkey.png").exists() else ""))


if __name__ == "__main__":
    main()
