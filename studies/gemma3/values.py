"""The named values and tables of studies/gemma3/README.md, from its context-use rows (context-use/SPLIT) and the
forward-pass benchmark (bench/)."""
import json

import yaml

from eval.results import ruler
from eval.results.rows import previous_rows
from studies.report import Study
from studies.stats import mean_interval
from studies.tables import (context_use_rows, context_use_table, gains, losses_by_book, nats, ruler_table,
                            trained_tokens)

study = Study(__file__)
NATIVE = "none"  # eval.context_use's label of the model as it is
SHORT = 7936  # c + the 256 targets = 8,192 tokens read: SmolLM2's whole context
OURS, TRANSFORMERS = "ours, keys inside the window", "transformers Gemma3 (sdpa)"  # speed.bench's sliding-window cases


def rows() -> list[dict]:
    return context_use_rows(study.folder / "context-use")


def contexts() -> list[int]:
    return sorted({r["context_tokens"] for r in rows()})


def gain(short: int = SHORT, long: int | None = None, measured: list[dict] | None = None) -> tuple[float, float, float]:
    """The mean over books of the loss with `short` tokens of context minus the loss with `long` (default the
    longest), and its 95% t interval over books, of the committed rows or of `measured`."""
    return mean_interval(gains(measured or rows(), NATIVE, short, long or contexts()[-1]))


@study.table
def context_use() -> str:
    c = contexts()
    return context_use_table([("Gemma 3 270M, as it is", rows(), NATIVE, None)], c, [(c[0], SHORT), (SHORT, c[-1])])


def ruler_rows() -> list[dict]:
    return previous_rows(study.folder / "ruler" / "results.json", "eval.ruler", "expected")


@study.table
def ruler_by_length() -> str:
    return ruler_table(ruler_rows(), [("Gemma 3 270M, as it is", ruler_rows()[0]["run"], NATIVE)])


@study.named
def ruler_values() -> dict[str, str]:
    """The tasks, prompts, effective length by the relative rule, and each task's score by length."""
    (by_task,) = ruler.scores([r for r in ruler_rows() if "scores" in r]).values()
    relative = ruler.effective_lengths(ruler.mean_by_length(by_task))[1]
    out = {"ruler_tasks": str(len(by_task)), "ruler_trials": str(ruler_rows()[0]["trials"]),
           "ruler_relative": ruler.named(relative)}
    return out | {f"ruler_{task}_{n}": ruler.cell_text(group) for task, by_length in by_task.items()
                  for n, group in by_length.items()}


def benches() -> list[dict]:
    """The sliding-window forwards measured, shortest first: bench/bench.json and any bench/NAME/bench.json."""
    folder = study.folder / "bench"
    paths = [folder / "bench.json", *sorted(folder.glob("*/bench.json"))]
    return sorted((json.loads(p.read_text())["sliding_window"] for p in paths if p.exists()), key=lambda c: c["length"])


def bench() -> dict:
    return benches()[0]


@study.table
def forward() -> str:
    lines = ["| tokens | | tokens/s | peak MiB |", "|---:|---|---:|---:|"]
    lines += [f"| {case['length']:,} | {r['name']} | {r['tokens_per_s']:,.0f} | {r['peak_mib']:,.0f} |"
              for case in benches() for r in case["rows"]]
    return "\n".join(lines)


def speedup(name: str, case: dict | None = None) -> float:
    speeds = {r["name"]: r["tokens_per_s"] for r in (case or bench())["rows"]}
    return speeds[OURS] / speeds[name]


def train_section(path) -> dict:
    return yaml.safe_load(path.read_text())["train"]


def pilot_values() -> dict[str, str]:
    """The CPU pilot of configs/gemma3-extend.yaml (pilot/: each step's seconds its wall clock's steps apart) against
    the tokens of studies/smollm2's PoSE fine-tunes."""
    log = [json.loads(line) for line in (study.folder / "pilot" / "metrics.jsonl").read_text().splitlines()]
    walls = [0.0] + [r["wall_s"] for r in log]
    steps = [b - a for a, b in zip(walls, walls[1:])]
    window = trained_tokens(train_section(study.folder / "pilot" / "config.yaml") | {"max_steps": 1})
    hour = 3600 / (sum(steps) / len(steps))
    smollm2 = trained_tokens(train_section(study.folder.parent / "smollm2" / "extend" / "smollm2-yarn.yaml"))
    return {"pilot_steps": str(len(steps)), "pilot_fastest": f"{min(steps):.0f}", "pilot_slowest": f"{max(steps):.0f}",
            "pilot_window": f"{window:,}", "hour_steps": f"{hour:.0f}", "hour_tokens": f"{hour * window / 1000:.0f}k",
            "hour_share": f"{100 * hour * window / smollm2:.0f}%"}


def longest_bench() -> dict[str, str]:
    """The longest forward measured, where it is longer than the first."""
    case = benches()[-1]
    if case is bench():
        return {}
    peak = {r["name"]: r["peak_mib"] for r in case["rows"]}
    return {"long_length": f"{case['length']:,}", "long_speedup": f"{speedup(TRANSFORMERS, case):.2f}",
            "long_peak_ours": f"{peak[OURS]:,.0f}", "long_peak_transformers": f"{peak[TRANSFORMERS]:,.0f}"}


@study.named
def named() -> dict[str, str]:
    c, books = contexts(), losses_by_book(rows(), NATIVE)
    case = bench()
    return {"books": str(len(books)), "short": f"{SHORT:,}", "short_read": f"{SHORT + rows()[0]['targets']:,}",
            "longest": f"{c[-1]:,}", "longest_read": f"{c[-1] + rows()[0]['targets']:,}", "shortest": f"{c[0]:,}",
            "targets": str(rows()[0]["targets"]), "L": f"{rows()[0]['train_length']:,}",
            "gain_past_8k": nats(gain()), "gain_to_8k": nats(gain(c[0], SHORT)),
            "bench_length": f"{case['length']:,}", "window": f"{case['window']:,}",
            "sliding_layers": str(case["layers"]), "layers": str(case["n_layers"]),
            "speedup_transformers": f"{speedup(TRANSFORMERS):.2f}",
            "speedup_mask": f"{speedup('ours, (T, S) mask'):.2f}",
            "logit_difference": f"{case['max_logit_difference']['peer']:.0e}"} | pilot_values() | longest_bench()
