"""The named values and tables of studies/smollm2/README.md, from its rows, extend/ and passkey-fine-tune/."""
import json

import yaml

from eval.results import ruler
from eval.results.rows import previous_rows
from studies.gemma3 import values as gemma3
from studies.report import Study
from studies.stats import mean_interval, wilson
from studies.tables import (below_floor, context_use_rows, context_use_table, gains, grid, losses_by_book, nats,
                            ruler_means, ruler_table, trained_tokens)

study = Study(__file__)
# each curve as the page names it: the rows' scaling or context method (one run each), the table's name
CURVES = {"yarn_ft": ("yarn (fine-tuned)", "YaRN fine-tune"), "pi_ft": ("linear (fine-tuned)", "PI fine-tune"),
          "control": ("none (fine-tuned)", "control fine-tune"), "none": ("none", "no scaling"), "pi": ("linear", "PI"),
          "ntk": ("ntk", "NTK"), "dynamic": ("dynamic", "dynamic NTK"), "yarn": ("yarn", "YaRN"),
          "self_extend": ("self-extend", "Self-Extend"), "dca": ("dca", "DCA"), "rerope": ("rerope", "ReRoPE"),
          "leaky": ("leaky-rerope", "Leaky ReRoPE"), "sinks": ("sinks", "attention sinks"), "logn": ("logn", "log-n")}
STATIC = ("pi", "ntk", "yarn")  # at s = length / L = 1 plain RoPE: the none cell
MODELS = {"none": ("none", "SmolLM2, no scaling"), "yarn": ("yarn", "SmolLM2, training-free YaRN"),
          "yarn (fine-tuned)": ("yarn_ft", "YaRN fine-tune"),
          "none (fine-tuned)": ("control", "control fine-tune")}  # the passkey's: scaling: (value name, table name)
DEPTHS = {0.0: "first", 0.5: "middle", 1.0: "last"}
SLACK = 1_024  # more than a passkey prompt's tokens other than its filler (test_claims checks it with the tokenizer)


def ppl_rows(name: str = "results.json") -> list[dict]:
    return previous_rows(study.folder / name, "eval.extrapolation", "ppl")


def key_rows() -> list[dict]:
    return previous_rows(study.folder / "passkey.json", "eval.passkey", "depth")


def curves(rows: list[dict]) -> dict[str, dict[int, float]]:
    """{curve: {length: perplexity}} of the curves the rows hold."""
    out = {k: {r["length"]: r["ppl"] for r in rows if r["scaling"] == scaling} for k, (scaling, _) in CURVES.items()}
    for k in STATIC:
        out[k].setdefault(min(out["none"]), out["none"][min(out["none"])])
    return {k: v for k, v in out.items() if v}


def rise(curve: dict[int, float], n: int) -> float:  # against its own perplexity at the shortest length
    return curve[n] / curve[min(curve)] - 1


def cells(rows: list[dict]) -> dict[tuple[str, int, float], dict]:  # {(model, length, depth): its passkey row}
    return {(MODELS[r["scaling"]][0], r["length"], r["depth"]): r for r in rows}


def interval(r: dict, field: str = "hits") -> tuple[float, float]:
    return wilson(r[field], r["trials"])


def ci(r: dict) -> str:
    return "{:.0f}-{:.0f}%".format(*(100 * x for x in interval(r)))


def key_cell(r: dict | None) -> str:
    if r is None or r.get("same_as"):
        return "-" if r is None else "= no scaling"
    held = f"; {r['held']} held" if r.get("held") not in (None, r["hits"]) else ""
    return f"{r['hits']}/{r['trials']} ({ci(r)}{held})"


@study.table
def same_tokens() -> str:
    c, lengths = curves(ppl_rows()), sorted(curves(ppl_rows())["none"])
    head = [f"{n:,}" for n in lengths] + [f"{n:,} against {lengths[0]:,}" for n in lengths[1:]]
    return grid(["model or method", *head], [[CURVES[k][1], *[f"{v[n]:.2f}" for n in lengths],
                                              *[f"{100 * rise(v, n):+.1f}%" for n in lengths[1:]]] for k, v in c.items()])


@study.table
def passkey() -> str:
    c = cells(key_rows())
    lengths = sorted({n for _, n, _ in c})
    return grid(["model", "key", *[f"{n:,}" for n in lengths]],
                [[name, where, *[key_cell(c.get((who, n, depth))) for n in lengths]]
                 for (who, name), (depth, where) in [(m, d) for m in MODELS.values() for d in DEPTHS.items()]], left=2)


def cu_rows() -> list[dict]:
    return context_use_rows(study.folder / "context-use")


CU_SHORT = 7936  # c + the 256 targets = 8,192 tokens read: L
BASE = "SmolLM2-135M-Instruct-Q4_1"
# the context-use table's lines: (its name, the run, eval.context_use's label of the variant in its rows)
CU_LINES = {"none": ("no scaling", BASE, "none"), "sinks": ("attention sinks", BASE, "sinks"),
            "pi": ("PI", BASE, "linear (s = 2)"), "ntk": ("NTK", BASE, "ntk (s = 2)"),
            "yarn": ("YaRN", BASE, "yarn (s = 2)"), "dynamic": ("dynamic NTK", BASE, "dynamic (s = T/L, cached)"),
            "dynamic_yarn": ("dynamic YaRN", BASE, "dynamic-yarn (s = T/L, cached)"),
            "yarn_ft": ("YaRN fine-tune", "smollm2-yarn", CURVES["yarn_ft"][0]),
            "pi_ft": ("PI fine-tune", "smollm2-pi", CURVES["pi_ft"][0]),
            "control": ("control fine-tune", "smollm2-continued", CURVES["control"][0])}


def cu_contexts() -> list[int]:
    return sorted({r["context_tokens"] for r in cu_rows()})


def cu_of(line: str) -> tuple[list[dict], str]:
    """The rows of one line of CU_LINES (its run's) and its label in them."""
    _, run, label = CU_LINES[line]
    return [r for r in cu_rows() if r["run"] == run], label


def cu_gain(short: int, long: int, line: str = "none", measured: list[dict] | None = None):
    """The mean over books of the loss with `short` tokens of context minus the loss with `long`, its 95% interval."""
    rows, label = cu_of(line)
    return mean_interval(gains(measured or rows, label, short, long))


def cu_floor(line: str = "none") -> tuple[list[dict], str, int]:
    """A line reading its context of L and nothing before it: the base model's (the floor), or the control fine-tune's
    (the fine-tunes' own floor: the same training, unscaled)."""
    return (*cu_of(line), CU_SHORT)


def cu_over_floor(line: str, measured: list[dict] | None = None, c: int | None = None,
                  floor: str = "none") -> tuple[float, float, float]:
    """The mean over books of the floor's loss minus the line's at c (default the longest), its 95% interval."""
    rows, label = cu_of(line)
    return mean_interval(below_floor(measured or rows, label, c or cu_contexts()[-1], cu_floor(floor)))


def cu_values() -> dict[str, str]:
    """Per line measured: its books, its gain from L to the longest c and its gain there over the floor."""
    out = {}
    for line in CU_LINES:
        rows, label = cu_of(line)
        if books := losses_by_book(rows, label):
            out |= {f"cu_books_{line}": str(len(books)), f"cu_floor_{line}": nats(cu_over_floor(line)),
                    f"cu_past_{line}": nats(cu_gain(CU_SHORT, cu_contexts()[-1], line)),
                    f"cu_rise_{line}": nats(cu_gain(CU_SHORT, cu_contexts()[-1], line), rise=True),
                    f"cu_floor_at_L_{line}": nats(cu_over_floor(line, c=CU_SHORT))}
    if losses_by_book(*cu_of("control")):
        for line in [ft for ft in ("yarn_ft", "pi_ft") if losses_by_book(*cu_of(ft))]:  # held against the control
            out |= {f"cu_over_control_{line}": nats(cu_over_floor(line, floor="control")),
                    f"cu_at_L_over_control_{line}": nats(cu_over_floor(line, c=CU_SHORT, floor="control"))}
    factor = next(r["factor"] for r in cu_rows() if r["factor"])
    return out | {"cu_margin": f"{cu_rows()[0]['margin']:g}", "cu_factor": f"{factor:g}",
                  "gemma_past_8k": nats(gemma3.gain(gemma3.SHORT, cu_contexts()[-1])),
                  "gemma_books": str(len(losses_by_book(gemma3.rows(), gemma3.NATIVE)))}


@study.table
def context_use() -> str:
    c = cu_contexts()
    floor = cu_floor()
    shown = [(name, *cu_of(line), floor) for line, (name, _, _) in CU_LINES.items()]
    shown.append(("Gemma 3 270M, trained at 32k", gemma3.rows(), gemma3.NATIVE, None))  # the positive control
    return context_use_table(shown, c, [(c[0], CU_SHORT), (CU_SHORT, c[-1])])


def ruler_rows() -> list[dict]:
    return previous_rows(study.folder / "ruler" / "results.json", "eval.ruler", "expected")


# RULER's lines: the context-use table's, each by the scaling label of eval.ruler's rows
RULER_LINES = [(name, run, label.split(" (s = ")[0]) for name, run, label in CU_LINES.values()]


@study.table
def ruler_by_length() -> str:
    return ruler_table(ruler_rows(), RULER_LINES)


@study.named
def ruler_values() -> dict[str, str]:
    """The tasks and prompts of RULER's rows, and the unscaled model's mean by length and effective lengths."""
    by_task, means = ruler_means(ruler_rows(), BASE, "none")
    absolute, relative = ruler.effective_lengths(means)
    return {"ruler_tasks": str(len(by_task)), "ruler_trials": str(ruler_rows()[0]["trials"]),
            "ruler_absolute_none": ruler.named(absolute), "ruler_relative_none": ruler.named(relative),
            **{f"ruler_mean_none_{n}": f"{m:.1f}" for n, m in means.items()}}


def extend(run: str) -> tuple[dict, list[dict]]:  # a fine-tune's config and training log
    config = yaml.safe_load((study.folder / "extend" / f"{run}.yaml").read_text())
    return config, [json.loads(line) for line in (study.folder / "extend" / f"{run}.jsonl").read_text().splitlines()]


@study.named
def named() -> dict[str, str]:
    """Every named value on the page, from the rows."""
    same, keys = curves(ppl_rows()), cells(key_rows())
    L, config = min(same["none"]), extend("smollm2-yarn")[0]
    t, sinks = config["train"], next(r["context"] for r in ppl_rows() if r["scaling"] == "sinks")
    again = next(r["ppl"] for r in ppl_rows("passkey-fine-tune/results.json") if r["length"] == L)  # trained again
    out = {"L": f"{L:,}", "two_L": f"{2 * L:,}", "four_L": f"{4 * L:,}", "steps": f"{t['max_steps']:,}",
           "ft_tokens": f"{trained_tokens(t):,}",
           "ft_window": f"{t['seq_len']:,}", "ft_factor": f"{config['model']['position']['scaling']['factor']:g}",
           "sinks": str(sinks["sinks"]), "sinks_window": f"{sinks['window']:,}",
           "distance": f"{2 * L - SLACK:,}", "again_ppl": f"{again:.4f}", "tuned_ppl": f"{same['yarn_ft'][L]:.4f}",
           "again_gap": f"{abs(again / same['yarn_ft'][L] - 1):.0e}"}
    for k, v in same.items():
        out |= {f"ppl_{k}_{n}": f"{v[n]:.2f}" for n in v} | {f"rise_{k}_{n}": f"{100 * rise(v, n):+.1f}%" for n in v}
    for (who, n, depth), r in keys.items():
        out |= {f"{x}_{who}_{n}_{DEPTHS[depth]}": y for x, y in (
            ("keys", f"{r['hits']}/{r['trials']}"), ("ci", ci(r)), ("held", str(r.get("held"))))}
    c = cu_contexts()
    out |= {"cu_targets": str(cu_rows()[0]["targets"]), "cu_books": str(len(losses_by_book(*cu_of("none")))),
            "cu_short": f"{CU_SHORT:,}", "cu_long": f"{c[-1]:,}", "cu_shortest": f"{c[0]:,}",
            "cu_loss_past_L": nats(cu_gain(CU_SHORT, c[-1]), rise=True), "cu_gain_to_L": nats(cu_gain(c[0], CU_SHORT))}
    out |= cu_values()
    for k, run in (("yarn_ft", "smollm2-yarn"), ("pi_ft", "smollm2-pi"), ("control", "smollm2-continued")):
        out[f"val_{k}"] = f"{[r['val_loss'] for r in extend(run)[1] if r.get('val_loss') is not None][-1]:.3f}"
    for k, run in (("control", "smollm2-continued"), ("pi_ft", "smollm2-pi")):  # the logs of those trained again here
        again = (study.folder / "context-use" / f"{run}.jsonl").read_text().splitlines()
        out[f"val_{k}_again"] = f"{[r['val_loss'] for r in map(json.loads, again) if 'val_loss' in r][-1]:.3f}"
    return out
