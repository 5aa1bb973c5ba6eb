"""The measured prose of reports/smollm2/README.md, rendered by `make reports` from the rows beside it: results.json
(eval.extrapolation on the same tokens at every length, the training-free rows and the fine-tunes) and extend/ (each
fine-tune's config and training log). A comparative sentence is written only while its predicate holds (render.prose)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

import yaml

from config import TrainPositions
from data.train_positions import sample_positions
from render.model_report import logged_minutes
from render.prose import bullet, claim, listed, number, paragraph, percent
from render.rows import previous_rows
from render.tasks import interval

BASE = "SmolLM2-135M-Instruct-Q4_1"
AGAIN = "passkey-fine-tune"  # the YaRN fine-tune as trained again for its passkey cells: config, log, perplexity at L
FINE_TUNES = {"yarn": ("smollm2-yarn", "yarn (fine-tuned)"), "pi": ("smollm2-pi", "linear (fine-tuned)"),
              "control": ("smollm2-continued", "none (fine-tuned)")}
SCALINGS = ["none", "linear", "ntk", "dynamic", "yarn"]  # the training-free rows `make smollm2-report` measures
NAMES = {  # the context methods it measures (SMOLLM2_CONTEXT), as the prose names them
    "self-extend": "Self-Extend", "dca": "DCA", "rerope": "ReRoPE", "leaky-rerope": "Leaky ReRoPE",
    "sinks": "attention sinks", "logn": "log-n"}


def ppl(x: float) -> str:
    return f"{x:.2f}"


class Rows:
    """results.json as {(run, scaling or context method, length): perplexity}; the fine-tunes' configs and logs."""

    def __init__(self, folder: Path):
        rows = previous_rows(folder / "results.json", "eval.extrapolation", "ppl")
        self.L = rows[0]["train_length"]
        self.lengths = sorted({r["length"] for r in rows})
        # a context method's row is named by its method, with any setting off its defaults: "self-extend (group_size=8)"
        self.ppl = {(r["run"], r["context"]["type"] if r["scaling"] == "none" and r.get("context") else r["scaling"],
                     r["length"]): r["ppl"] for r in rows}
        # each context method's settings as its rows record them, under the row's name
        self.settings = {r["scaling"]: {k: v for k, v in r["context"].items() if k != "type"}
                         for r in rows if r.get("context")}
        self.seconds = {(r["run"], r["scaling"], r["length"]): r["tokens"] / r["tokens_per_s"]
                        for r in rows if not r.get("context") and r.get("tokens_per_s")}
        self.tokens = {r["tokens"] for r in rows}
        self.folder = folder

    def base(self, name: str) -> dict[int, float]:
        """The pretrained model's perplexity by length under a training-free scaling or context method; a static
        scaling at L is plain RoPE (measured once, as none)."""
        out = {n: self.ppl.get((BASE, name, n)) for n in self.lengths}
        if name in ("linear", "ntk", "yarn", "dynamic") and out[self.L] is None:
            out[self.L] = self.ppl.get((BASE, "none", self.L))
        return out if None not in out.values() else {}

    def tuned(self, which: str) -> dict[int, float]:
        run, scaling = FINE_TUNES[which]
        out = {n: self.ppl.get((run, scaling, n)) for n in self.lengths}
        return out if None not in out.values() else {}

    def log(self, which: str) -> tuple[dict, list[dict]]:
        name = FINE_TUNES[which][0]
        config = yaml.safe_load((self.folder / "extend" / f"{name}.yaml").read_text())
        rows = [json.loads(line) for line in (self.folder / "extend" / f"{name}.jsonl").read_text().splitlines()]
        return config, rows


def same_tokens(folder: Path) -> str:
    """The section "Extended by a fine-tune, on the same tokens"."""
    r = Rows(folder)
    L, (x1, x2, x4) = r.L, r.lengths
    (tokens,) = r.tokens
    base = {name: r.base(name) for name in SCALINGS}
    yarn, pi, control = r.tuned("yarn"), r.tuned("pi"), r.tuned("control")
    config, log = r.log("yarn")
    t, s = config["train"], config["model"]["position"]["scaling"]
    per_step = t["seq_len"] * t["batch_size"] * t["grad_accum"]
    steps = max(row["step"] for row in log)
    lr, decay = f"{t['lr']:.0e}".replace("e-0", "e-"), "no" if not t["weight_decay"] else f"{t['weight_decay']:g}"
    minutes = {which: logged_minutes(r.log(which)[1], per_step) for which in FINE_TUNES}
    # each context method measured at L and 2L, with 4L where it is measured
    measured = {m: {n: r.ppl[(BASE, m, n)] for n in (x1, x2, x4) if (BASE, m, n) in r.ppl} for m in NAMES
                if all((BASE, m, n) in r.ppl for n in (x1, x2))}

    def not_yet(name: str, called: str) -> str | None:
        """`called`, with the lengths it lacks where it has some; None where every length is measured (a static
        scaling at L is plain RoPE, measured once)."""
        lengths = [n for n in (x1, x2, x4) if not (n == x1 and name in SCALINGS)]
        lacks = [n for n in lengths if (BASE, name, n) not in r.ppl]
        if not lacks or lacks == lengths:
            return called if lacks else None
        return f"{called} (at {listed([number(n) for n in lacks])})"
    missing = [m for m in [not_yet(name, f"{name} NTK" if name == "dynamic" else name) for name in SCALINGS]
               + [not_yet(m, NAMES[m]) for m in NAMES] if m]
    none = base["none"]
    keys = previous_rows(folder / "passkey.json", "eval.passkey", "depth")
    tuned_keys = [row for row in keys if row["run"] == FINE_TUNES["yarn"][0]]
    cells = {(row["run"], row["scaling"], row["length"], row["depth"]) for row in keys}
    base_done, map_done = (all((run, scaling, x4, row["depth"]) in cells for row in keys for run, scaling in models)
                           for models in ([(BASE, "yarn")], [(BASE, "yarn"), FINE_TUNES["yarn"]]))
    out = [paragraph(
        "`make smollm2-extend` continues SmolLM2 with this repo's training loop (`configs/smollm2-extend.yaml`, from "
        f"`train.init_from: hf:PATH`): to {number(t['positions']['max_position'])} tokens (s = {s['factor']:g}) on the "
        f"Gutenberg training books, PoSE windows of {number(t['seq_len'])} tokens whose {t['positions']['chunks']} chunks "
        f"carry positions below {number(t['positions']['max_position'])} (PoSE, arXiv 2309.10400, section 3.2), batch "
        f"{t['batch_size'] * t['grad_accum']}, {steps} steps ({number(steps * per_step)} tokens), AdamW at the YaRN "
        f"paper's learning rate {lr} with {decay} weight decay (section 4). The window and the step count were chosen "
        "from a pilot of the step time here,",
        claim(max(minutes["yarn"], minutes["pi"]) < 60,
              f"so that one variant trains in under an hour on 2 cores: YaRN's took {minutes['yarn']:.0f} minutes and "
              f"PI's {minutes['pi']:.0f}, the control's {minutes['control']:.0f}, beside other jobs on the same cores;"),
        "[report.md](report.md) renders each fine-tune's steps, tokens, minutes and validation loss from its log in "
        f"[extend/](extend/). Every cell scores the same {number(tokens)} tokens: the first {number(tokens)} of the "
        "first test book.",
        f"Not yet measured on them: {listed(missing)} ({'its' if len(missing) == 1 else 'their'} by-length "
        f"{'row is' if len(missing) == 1 else 'rows are'} below)." if missing else "",
        f"Not yet measured{' in full' if tuned_keys else ''}: "
        + ("the YaRN fine-tune's passkey map to " if base_done else "the passkey map to ") + f"{number(x4)} tokens ("
        + ("training-free YaRN's is in [report.md](report.md); " if base_done else "")
        + f"a {number(x4)}-token window took {r.seconds[(BASE, 'none', x4)] / 60:.0f} minutes here, and a length is 60 "
        "trials): `make gpu-smollm2-eval` "
        "measures it on a GPU, for the YaRN fine-tunes there (the PoSE recipe of this page and full windows) against "
        "training-free YaRN (reports/bench/README.md, \"On a GPU: the pieces\"); `make smollm2-passkey-long` on the "
        "CPU, for this page's YaRN fine-tune, in as many sittings as it takes (it resumes trial by trial from "
        "`passkey-trials.jsonl`, committed beside the rows while one is unfinished)."
        if not map_done else "")]

    if yarn:
        out.append(paragraph(
            claim(ppl(yarn[x1]) == ppl(yarn[x2]) and 1 < yarn[x4] / yarn[x1] < 1.05,
                  f"**The YaRN fine-tune reads {number(x2)} tokens as well as {number(x1)}, and {number(x4)} a little "
                  "worse.**"),
            f"Its perplexity is {ppl(yarn[x1])} at {number(x1)} and at {number(x2)} tokens and {ppl(yarn[x4])} at "
            f"{number(x4)}; training-free YaRN on the same tokens gives {ppl(base['yarn'][x2])} at {number(x2)} and "
            f"{ppl(base['yarn'][x4])} at {number(x4)}, unscaled RoPE {ppl(none[x1])} at {number(x1)}, "
            f"{ppl(none[x2])} at {number(x2)} and {ppl(none[x4])} at {number(x4)}.",
            claim(control[x1] < yarn[x1] < none[x1],
                  f"The fine-tune is also {percent(yarn[x1], none[x1])} below the base at {number(x1)} tokens, where no "
                  "scaling acts on the base: that is the corpus, not YaRN: the unscaled control, trained alike, is "
                  "lower still (below)."),
            "The YaRN paper's fine-tuned Llama 2 models keep lowering perplexity as the window grows to their extended "
            "context (its Figure 1: sliding-window perplexity of ten Proof-pile documents, to 128k);",
            claim(min(yarn[x2], yarn[x4]) >= yarn[x1] - 0.005,
                  f"here more context than {number(x1)} tokens lowers nothing, after {steps * per_step / 1e6:.1f}M "
                  "tokens of fine-tuning on one 135M model, measured on one book: the paper's pattern does not hold "
                  "at this size and budget."),
            "Exported (`python -m export runs/smollm2-extend/smollm2-yarn exports/smollm2-yarn`), the fine-tune loads "
            f"in transformers as a `LlamaForCausalLM` with `rope_parameters` {{type yarn, factor {s['factor']:g}, "
            f"original {number(s['original_max_position_embeddings'])}}} and no custom code "
            "(`AutoModelForCausalLM.from_pretrained(\"exports/smollm2-yarn\")`, its tokenizer SmolLM2's own); "
            "tests/test_convert.py checks that such an export gives our logits to 1e-4."))

    if pi and yarn:
        final = {which: [row for row in r.log(which)[1] if row.get("val_loss") is not None][-1]["val_loss"]
                 for which in ("pi", "yarn")}
        out.append(paragraph(
            claim(all(pi[n] > 1.5 * yarn[n] and pi[n] > none[x1] for n in pi),
                  "**The PI fine-tune, trained alike, lands far above the base and the YaRN fine-tune at every "
                  "length**:"),
            f"{ppl(pi[x1])} at {number(x1)}, {ppl(pi[x2])} at {number(x2)} and {ppl(pi[x4])} at {number(x4)} on the "
            f"same tokens, against YaRN fine-tuned {ppl(yarn[x1])}, {ppl(yarn[x2])} and {ppl(yarn[x4])}; its "
            f"validation loss ended at {final['pi']:.3f} against YaRN's {final['yarn']:.3f}.",
            claim(max(pi.values()) / min(pi.values()) < 1.03,
                  "It is flat across the lengths, as PI's interpolated positions are meant to make it,"),
            f"but {steps} steps did not teach the model positions packed {s['factor']:g} times closer: the PI paper "
            "fine-tunes for 1,000 steps (section 3.1), and the YaRN paper credits YaRN with reaching its context in 10 "
            "times fewer tokens and 2.5 times fewer steps than the earlier methods (its abstract). At this budget on "
            "this model that ordering holds."))

    if control and yarn:
        out.append(paragraph(
            claim(all(yarn[n] * 1.5 < control[n] < none[n] for n in (x2, x4)) and control[x1] < yarn[x1] < none[x1],
                  "**The unscaled control, trained alike (PoSE positions to "
                  f"{number(t['positions']['max_position'])}, no scaling), learns the books but not the lengths**:"),
            f"{ppl(control[x1])} at {number(x1)}, {ppl(control[x2])} at {number(x2)} and {ppl(control[x4])} at "
            f"{number(x4)} on the same tokens. At {number(x1)}, where no scaling acts, it is "
            f"{percent(control[x1], none[x1])} below the base ({ppl(none[x1])}) and {percent(yarn[x1], control[x1])} "
            f"below the YaRN fine-tune ({ppl(yarn[x1])}): the fine-tunes' gain at the original length is the corpus. "
            f"Past it the control stays far above the YaRN fine-tune ({ppl(yarn[x2])} and {ppl(yarn[x4])}), though "
            f"below the unscaled base ({ppl(none[x2])} and {ppl(none[x4])}): PoSE's positions without a scaling, in "
            f"{steps} steps, did not teach the model RoPE's rotations past {number(x1)}."))

    linear, ntk, free_yarn = base["linear"], base["ntk"], base["yarn"]
    if tuned_keys:
        out += [part for part in [
            paragraph(f"**The passkey to {number(x4)}, training-free YaRN against the YaRN fine-tune** (`make "
                      "smollm2-passkey-long`; the keys found of those tried"
                      + (", - where not yet measured):" if not map_done else "):")),
            passkey_map(keys, {FINE_TUNES["yarn"][0]: "the YaRN fine-tune"}, [x1, x2, x4], "passkey.png"),
            first_key(keys, config, [x1, x2, x4]),
            against_pose_paper(keys, config, x4),
            paragraph(trained_again(folder, tuned_keys, yarn, x1))] if part]
    if linear:
        out.append(paragraph(
            claim(linear[x2] > none[x2] and linear[x4] > 5 * free_yarn[x4],
                  f"**PI without fine-tuning, on the same tokens**, is worse than no scaling at {number(x2)} "
                  f"({ppl(linear[x2])} against {ppl(none[x2])}) and far from YaRN at {number(x4)} "
                  f"({ppl(linear[x4])} against {ppl(free_yarn[x4])}), as by length below.")))
    if ntk:
        gaps = [ntk[n] / free_yarn[n] - 1 for n in (x2, x4)]
        out.append(paragraph(
            claim(max(map(abs, gaps)) < 0.015 and gaps[0] > 0 > gaps[1],
                  f"**NTK without fine-tuning is level with YaRN**: {ppl(ntk[x2])} at {number(x2)} and "
                  f"{ppl(ntk[x4])} at {number(x4)} against {ppl(free_yarn[x2])} and {ppl(free_yarn[x4])}, gaps of "
                  "about 1% either way on one book's tokens, which this measurement does not tell apart;"),
            claim(all(v[n] < 1.17 * none[x1] for v in (ntk, free_yarn) for n in (x2, x4)),
                  f"both stay within 17% of the base at {number(x1)} where unscaled RoPE is "
                  f"{none[x2] / none[x1]:.1f} and {none[x4] / none[x1]:.1f} times it.")))
    dynamic = base["dynamic"]
    if dynamic and ntk:
        side = lambda a, b: f"{percent(a, b)} {'above' if a > b else 'below'}"  # noqa: E731
        earlier = Rows(folder / "by-length")  # through transformers; at 4L one book, the first 4L tokens: these
        by_length = earlier.base("dynamic")[x4]
        out.append(paragraph(
            "**Dynamic NTK with keys cached before rotation**, as the YaRN paper asks (section 3.3: every key takes "
            "the frequencies of the current length), decoded through this repo's cache as generate.py decodes: "
            f"{ppl(dynamic[x2])} at {number(x2)} and {ppl(dynamic[x4])} at {number(x4)} on the same tokens, "
            f"{side(dynamic[x2], ntk[x2])} and {side(dynamic[x4], ntk[x4])} static NTK ({ppl(ntk[x2])}, "
            f"{ppl(ntk[x4])}).",
            claim(abs(earlier.base("none")[x4] / none[x4] - 1) < 1e-4,
                  f"At {number(x4)}, where the rows by length read these same tokens,"),
            "transformers' dynamic NTK, whose cache "
            f"keeps each key at the frequencies of the length it was computed at, gives {ppl(by_length)}: keys "
            f"cached before rotation are {side(dynamic[x4], by_length)} it."))
    if measured:
        at = {m: v[x4] for m, v in measured.items() if x4 in v}
        better = [m for m in at if at[m] < free_yarn[x4]]
        lower = [m for m, v in measured.items() if v[x2] < v[x1]]
        out.append(paragraph(
            f"**The training-free context methods on the same tokens** (no scaling, each at its defaults for L = "
            f"{number(L)}; model/context.py) at {number(x1)}, {number(x2)} and {number(x4)}: "
            + "; ".join(f"{NAMES[m]} " + listed([ppl(v[n]) for n in v]) + ("" if x4 in v else " (not yet at "
                        f"{number(x4)})") for m, v in measured.items())
            + f" (training-free YaRN {ppl(free_yarn[x2])} and {ppl(free_yarn[x4])} at {number(x2)} and {number(x4)}, "
            f"unscaled {ppl(none[x1])}, {ppl(none[x2])} and {ppl(none[x4])}).",
            (f"At {number(x4)}, {listed([NAMES[m] for m in better])} {'is' if len(better) == 1 else 'are'} below "
             "training-free YaRN on these tokens" + (f", {listed([NAMES[m] for m in at if m not in better])} above it."
                                                     if len(better) < len(at) else ".") if better else
             f"At {number(x4)}, {listed([NAMES[m] for m in at])} {'is' if len(at) == 1 else 'are all'} above "
             "training-free YaRN on these tokens.") if at else "",
            f"{listed([NAMES[m] for m in lower])} read{'s' if len(lower) == 1 else ''} the {number(x2)}-token "
            f"windows with a lower perplexity than the {number(x1)}-token ones: the same tokens, half of which have "
            "more context before them." if lower else ""))
    return "\n\n".join(out)


GPU_RUNS = {"yarn": "smollm2-yarn", "pi": "smollm2-pi", "control": "smollm2-continued", "yarn-pose": "smollm2-yarn-pose"}


def full_windows(folder: Path) -> str:
    """The section "Full windows on a GPU, beside PoSE" (issue 61): `make gpu-smollm2-eval`'s rows in folder/gpu,
    the fine-tunes at full 32,768-token windows and YaRN with this page's PoSE recipe, on the same tokens as the CPU
    rows; the passkey map to 32,768 tokens."""
    gpu = folder / "gpu"
    if not (gpu / "results.json").exists():
        return paragraph(
            "Not measured yet. On a machine with a GPU: `make gpu-smollm2-parts` here (the model, the gguf package and "
            "the books, in parts a device command carries), then there `make gpu-smollm2-extend` (the three fine-tunes "
            "at full 32,768-token windows, and YaRN with this page's PoSE recipe) and `make gpu-smollm2-eval` (each on "
            "the same tokens as above, and the passkey map to 32,768 tokens for the YaRN fine-tunes and training-free "
            "YaRN), into reports/smollm2/gpu; reports/bench/README.md, \"On a GPU: the pieces\", says how.")
    cpu, r = Rows(folder), Rows(gpu)
    lengths = r.lengths
    labels = {"yarn": "yarn (fine-tuned)", "pi": "linear (fine-tuned)", "control": "none (fine-tuned)",
              "yarn-pose": "yarn (fine-tuned)"}
    full = {v: {n: r.ppl.get((run, labels[v], n)) for n in lengths} for v, run in GPU_RUNS.items()}
    pose = cpu.tuned("yarn")
    config = yaml.safe_load((gpu / "extend" / "smollm2-yarn.yaml").read_text())
    t = config["train"]
    per_step = t["seq_len"] * t["batch_size"] * t["grad_accum"]
    log = [json.loads(line) for line in (gpu / "extend" / "smollm2-yarn.jsonl").read_text().splitlines()]
    steps = max(row["step"] for row in log)
    lines = ["| fine-tune | " + " | ".join(number(n) for n in lengths) + " |", "|---|" + "---:|" * len(lengths),
             "| YaRN, PoSE windows of 2,048 (the CPU's, above) | " + " | ".join(ppl(pose[n]) for n in lengths) + " |"]
    names = {"yarn": "YaRN, full windows", "yarn-pose": "YaRN, PoSE windows of 2,048, on the GPU",
             "pi": "PI, full windows", "control": "no scaling, full windows (the control)"}
    for v in ("yarn", "yarn-pose", "pi", "control"):
        if None not in full[v].values():
            lines.append(f"| {names[v]} | " + " | ".join(ppl(full[v][n]) for n in lengths) + " |")
    x4 = lengths[-1]
    gap = pose[x4] / full["yarn"][x4] - 1
    out = [paragraph(
        f"On {(gpu / 'report.json').exists() and json.loads((gpu / 'report.json').read_text()).get('hardware') or 'a GPU'}: "
        f"the same config with `train.seq_len={t['seq_len']}` and contiguous positions, {steps} steps of "
        f"{number(per_step)} tokens ({number(steps * per_step)}), "
        f"{logged_minutes(log, per_step):.0f} minutes for YaRN's; rows in [gpu/](gpu/), scored on the same tokens as "
        "above."), "\n".join(lines),
        paragraph(
            "PoSE's claim, that short windows whose positions span the target length fine-tune as well as full ones "
            "(arXiv 2309.10400, abstract),",
            f"{'holds' if abs(gap) < 0.05 else 'does not hold'} here at {number(x4)} tokens: the PoSE fine-tune is "
            f"{percent(pose[x4], full['yarn'][x4])} {'above' if gap > 0 else 'below'} the full-window one "
            f"({ppl(pose[x4])} against {ppl(full['yarn'][x4])}; within 5% would count as matching; one book's "
            "tokens, one seed).")]
    keys = previous_rows(gpu / "passkey.json", "eval.passkey", "depth") if (gpu / "passkey.json").exists() else []
    if keys:
        out += [paragraph("The passkey map, the keys found of those tried:"),
                passkey_map(keys, {"smollm2-yarn": "YaRN, full windows", "smollm2-yarn-pose": "YaRN, PoSE windows"},
                            lengths, "gpu/passkey.png")]
    return "\n\n".join(out)


FIRST_KEY_SLACK = 1_024  # more than a passkey prompt's tokens other than its filler (tests/test_smollm2_report.py)


def first_key(keys: list[dict], config: dict, lengths: list[int]) -> str:
    """The key placed first, training-free YaRN against the YaRN fine-tune, once every length is measured there; and how
    often the fine-tune's PoSE windows (its config's train.positions, drawn for its seed as training drew them) held two
    positions as far apart as such a key lies from the question."""
    depth = min(r["depth"] for r in keys)
    models = {(BASE, "yarn"): "training-free YaRN", FINE_TUNES["yarn"]: "the YaRN fine-tune"}
    rows = {(r["run"], r["scaling"], r["length"]): r for r in keys if r["depth"] == depth and r.get("hits") is not None}
    if not all((*m, n) in rows for m in models for n in lengths):
        return ""
    found = {m: [rows[(*m, n)]["hits"] for n in lengths] for m in models}
    trials = rows[(BASE, "yarn", lengths[0])]["trials"]
    tuned = FINE_TUNES["yarn"]
    last = rows[(*tuned, lengths[-1])]
    t = config["train"]
    spans = [int(w.max() - w.min()) for step in range(1, t["max_steps"] + 1) for micro in range(t["grad_accum"])
             for w in sample_positions(TrainPositions(**t["positions"]), t["batch_size"], t["seq_len"],
                                       config["run"]["seed"], step, micro, t["grad_accum"])]
    far = {n: sum(span >= n - FIRST_KEY_SLACK for span in spans) for n in lengths[1:]}
    said = (f"**The key placed first** (depth {depth:g}), nearly the whole prompt before the question: training-free "
            f"YaRN finds {listed([str(h) for h in found[(BASE, 'yarn')]])} of {trials} at "
            f"{listed([number(n) for n in lengths])} tokens, the YaRN fine-tune {listed([str(h) for h in found[tuned]])}.")
    if found[tuned][:-1] != [trials] * (len(lengths) - 1) or found[tuned][-1] or any(found[(BASE, "yarn")]):
        return paragraph(said)  # not the pattern the window counts below explain
    return paragraph(
        said,
        f"The fine-tune learned to read it back to {number(lengths[-2])} tokens, which the base does not even at "
        f"{number(lengths[0])}, and not to {number(lengths[-1])}: there it holds {last.get('held', 0)} of the keys "
        f"({100 * last['key_tokens']:.1f}% of the key's tokens predicted right).",
        f"In the {len(spans)} PoSE windows it was trained on ({number(t['seq_len'])} tokens each, positions drawn below "
        f"{number(t['positions']['max_position'])} for its seed as training drew them), the first and last positions "
        "lie at least " + listed([f"{number(n - FIRST_KEY_SLACK)} apart in {far[n]}" for n in lengths[1:]])
        + f", and a first key lies farther than that from the question at {listed([number(n) for n in lengths[1:]])} "
        f"tokens (the prompt's other parts take fewer than {number(FIRST_KEY_SLACK)} tokens).",
        claim(far[lengths[-1]] * 10 < far[lengths[-2]],
              f"Distances that long were rare in its training, a likely reason, not a measured one, for losing the "
              f"first key at {number(lengths[-1])}."))


def against_pose_paper(keys: list[dict], config: dict, x4: int) -> str:
    """The YaRN fine-tune's keys found at 4L over every depth, beside what the PoSE paper reports of its extended
    models; '' until every depth is measured there."""
    run, scaling = FINE_TUNES["yarn"]
    cells = {r["depth"]: r for r in keys if (r["run"], r["scaling"], r["length"]) == (run, scaling, x4)
             and r.get("hits") is not None}
    depths = {r["depth"] for r in keys}
    if not cells or set(cells) != depths:
        return ""
    hits, trials = sum(r["hits"] for r in cells.values()), sum(r["trials"] for r in cells.values())
    lo, hi = interval(hits / trials, trials)
    return paragraph(
        "The PoSE paper's LLaMA-7B models, extended to 16k and to 32k tokens with 2k-token windows, keep passkey "
        "retrieval at 90% or more within their extended windows (its Figure 2b); here the fine-tune finds "
        f"{hits} of {trials} keys at {number(x4)} tokens over the depths (95% interval {100 * lo:.0f}-{100 * hi:.0f}%):",
        claim(hi < 0.9, f"below that, on a 135M model after {config['train']['max_steps']} steps of "
                        f"{number(config['train']['seq_len'])}-token windows."))


def trained_again(folder: Path, tuned_keys: list[dict], yarn: dict[int, float], x1: int) -> str:
    """Which weights the YaRN fine-tune's passkey cells are of: the recipe trained again for them (run folders are not
    kept between machines), its log and its perplexity at L on the same tokens in AGAIN, against the fine-tune whose
    perplexity rows the page shows; '' where AGAIN is not committed."""
    again = folder / AGAIN
    if not (again / "results.json").exists():
        return ""
    (row,) = [r for r in json.loads((again / "results.json").read_text()) if r["length"] == x1]
    log = [json.loads(line) for line in (again / "metrics.jsonl").read_text().splitlines()]
    (threads,) = {r["threads"] for r in log if "threads" in r}
    digests = sorted({r["model"].split()[0] for r in tuned_keys if "model" in r})
    gap = abs(row["ppl"] / yarn[x1] - 1)
    weights = f"weights {listed([f'`{d}`' for d in digests])}, passkey.json's `model`; " if digests else ""
    on = "one thread" if threads == 1 else f"{threads} threads"
    return claim(gap < 1e-4,
                 f"The fine-tune's cells are of the same recipe trained again here on {on} ({weights}its training log "
                 f"and perplexity in [{AGAIN}/]({AGAIN}/)): on the same tokens at {number(x1)} it scores "
                 f"{row['ppl']:.4f}, the fine-tune of the perplexity rows above {yarn[x1]:.4f}, a relative difference of {gap:.0e}.")


def passkey_map(rows: list[dict], names: dict[str, str], lengths: list[int], png: str) -> str:
    """The passkey map past L from eval.passkey's rows: training-free YaRN on the base against YaRN fine-tunes (names:
    {run: what the page calls it}), the keys found of those tried in each cell by length and depth (- where not yet
    measured), and at the longest length over every depth with a 95% interval over keys (each key is an independent
    trial: render.tasks.interval); a gap is said only where the two intervals do not overlap."""
    models = {(BASE, "yarn"): "training-free YaRN"} | {(run, "yarn (fine-tuned)"): name for run, name in names.items()}
    ours = [r for r in rows if (r["run"], r["scaling"]) in models and r.get("hits") is not None]
    cells = {(r["run"], r["scaling"], r["length"], r["depth"]): (r["hits"], r["trials"]) for r in ours}
    held = {(r["run"], r["scaling"], r["length"], r["depth"]): r["held"] for r in ours if "held" in r}
    depths = sorted({d for (*_, d) in cells})

    def cell(key: tuple) -> str:
        if key not in cells:
            return "-"
        return "%d/%d" % cells[key] + (f" ({held[key]} held)" if held.get(key, cells[key][0]) != cells[key][0] else "")
    lines = ["| model | key at depth | " + " | ".join(number(n) for n in lengths) + " |",
             "|---|---:|" + "---:|" * len(lengths)]
    for (run, scaling), name in models.items():
        for d in depths:
            lines.append(f"| {name} | {d:g} | " + " | ".join(cell((run, scaling, n, d)) for n in lengths) + " |")
    def share(count: int, key: tuple) -> tuple[float, float]:  # a 95% interval over the cell's keys
        return interval(count / cells[key][1], cells[key][1])
    order = list(models)
    apart = [(key, cells[key], n) for key, n in sorted(held.items(), key=lambda kv: (order.index(kv[0][:2]), kv[0]))
             if share(n, key)[0] > share(cells[key][0], key)[1]]
    form = ("Where the two counts' 95% intervals are apart, the model misses the answer's form, not the key: "
            + listed([f"{models[key[:2]]} at {number(key[2])} tokens with the key at depth {key[3]:g} ({hits} of "
                      f"{trials} found, {n} held)" for key, (hits, trials), n in apart]) + ".") if apart else ""
    kept = paragraph(
        "A key can be held and not found: held counts the trials whose every digit is the model's top prediction "
        "after the answer's tokens before it (`eval.passkey`'s `held`, shown where it differs from the keys found; "
        "rows measured before it was counted have none), so a key held and not found is one whose greedy answer starts "
        "with another token.", form) if held else ""
    x4 = lengths[-1]
    total = {model: [sum(v) for v in zip(*(cells[(*model, x4, d)] for d in depths))]
             for model in models if all((*model, x4, d) in cells for d in depths)}
    said = ""
    if depths and len(total) == len(models):
        bounds = {model: interval(hits / trials, trials) for model, (hits, trials) in total.items()}
        base = bounds[(BASE, "yarn")]
        said = paragraph(
            f"At {number(x4)} tokens, over the depths: "
            + "; ".join(f"{models[m]} finds {h} of {n} keys (95% interval {100 * bounds[m][0]:.0f}-"
                        f"{100 * bounds[m][1]:.0f}%)" for m, (h, n) in total.items()) + ".",
            *(f"{capital(models[m])} finds {'more' if lo > base[1] else 'fewer'} keys than training-free YaRN "
              "there." if lo > base[1] or hi < base[0] else
              f"{capital(models[m])} and training-free YaRN are not told apart there."
              for m, (lo, hi) in bounds.items() if m != (BASE, "yarn")))
    return "\n\n".join(x for x in ["\n".join(lines), kept, said, f"The heat maps: [{png}]({png})."] if x)


def capital(text: str) -> str:
    return text[:1].upper() + text[1:]


def signed(change: float) -> str:
    """A relative change in percent with its sign, two decimals ("+0.04%"); "0.00%" when it rounds to nothing."""
    text = f"{100 * change:+.2f}%"
    return "0.00%" if text in ("+0.00%", "-0.00%") else text


def keys_found(folder: Path) -> dict[tuple[str, int, float], tuple[int, int, float, int | None]]:
    """passkey.json as {(scaling, length, depth): (hits, trials, share of the key's tokens predicted right, keys held
    (None in rows from before eval.passkey counted them))}; a cell measured twice counts once."""
    rows = previous_rows(folder / "passkey.json", "eval.passkey", "depth")
    return {(r["scaling"], r["length"], r["depth"]): (r["hits"], r["trials"], r["key_tokens"], r.get("held"))
            for r in rows if r["run"] == BASE}


def by_length(folder: Path) -> str:
    """The section "What it shows (by length)": by-length/results.json (through transformers, lengths on different
    books, so every comparison is within a length) and passkey.json."""
    r = Rows(folder / "by-length")
    L, (x1, x2, x4) = r.L, r.lengths
    none, linear, ntk, dynamic, yarn = (r.base(name) for name in SCALINGS)
    methods = {m: r.base(m) for m in NAMES}
    keys = keys_found(folder)
    depths = sorted({d for (_, _, d) in keys})
    first, middle, last = depths[0], depths[len(depths) // 2], depths[-1]
    below = sorted({n for (_, n, _) in keys if n < L})
    where = {first: "first", middle: "in the middle", last: "last, just before the question"}
    digits = lambda scaling, n, d: f"{100 * keys[(scaling, n, d)][2]:.1f}%".replace(".0%", "%")  # noqa: E731
    hits = lambda scaling, n, d: keys[(scaling, n, d)][0]  # noqa: E731
    held = lambda scaling, n, d: keys[(scaling, n, d)][3]  # noqa: E731
    trials = keys[("none", L, middle)][1]
    G, W = r.settings["self-extend"]["group_size"], r.settings["self-extend"]["window"]
    shown = (x4 - 1) // G + W - W // G  # the largest distance Self-Extend shows at x4 (grouped keys, then the window)
    bound = (L - W) * G + W  # the longest input whose grouped distances stay within L (its paper, section 3)
    past = {m: v for m, v in methods.items() if m != "logn" and v}
    at_L = {m: v[x1] / none[x1] - 1 for m, v in past.items()}
    worst = max(v[n] / yarn[n] - 1 for v in past.values() for n in (x2, x4))
    sinks = r.settings["sinks"]
    logn = methods["logn"]
    return "\n\n".join([
        paragraph(claim(all(none[n] > 1.5 * yarn[n] for n in (x2, x4)),
                        "**Without scaling, perplexity past the context is far above YaRN's on the same windows**:"),
                  f"unscaled {ppl(none[x2])} at {number(x2)} and {ppl(none[x4])} at {number(x4)}; YaRN with s = length "
                  f"/ {number(L)}, no fine-tuning, {ppl(yarn[x2])} and {ppl(yarn[x4])}."),
        paragraph(claim(linear[x2] > none[x2],
                        f"**PI without fine-tuning is worse than no scaling at 2x**: {ppl(linear[x2])} at {number(x2)} "
                        f"against {ppl(none[x2])}."),
                  "PI divides every frequency by s, the fast ones too, which the YaRN paper (section 3.1) names as the "
                  "loss of high-frequency information; the PI paper's extended models are fine-tuned after "
                  "interpolating (\"within 1000 steps\", its abstract)."),
        paragraph(claim(all(abs(ntk[n] / yarn[n] - 1) < 0.02 for n in (x2, x4)),
                        "**NTK-aware scaling matched to the length does as well as YaRN;"),
                  claim(all(ntk[n] < dynamic[n] < none[n] for n in (x2, x4)), "dynamic NTK less well.**"),
                  f"Static NTK gives {ppl(ntk[x2])} at {number(x2)} and {ppl(ntk[x4])} at {number(x4)} (YaRN "
                  f"{ppl(yarn[x2])} and {ppl(yarn[x4])}). Dynamic NTK as transformers runs it in generation, each "
                  f"cached key keeping the rotation of the length it was computed at, gives {ppl(dynamic[x2])} and "
                  f"{ppl(dynamic[x4])}: {percent(dynamic[x2], ntk[x2])} and {percent(dynamic[x4], ntk[x4])} above "
                  f"static NTK, and still far below no scaling ({ppl(none[x2])}, {ppl(none[x4])})."),
        paragraph(claim(all(hits("none", n, d) == trials for n in below for d in depths)
                        and hits("none", L, middle) == trials and hits("none", L, first) == hits("none", L, last) == 0,
                        "**At its own context the passkey is found only in the middle.**"),
                  f"SmolLM2 finds every key at {listed([number(n) for n in below])} tokens at every depth. At "
                  f"{number(L)}, its context, it finds all {trials} keys placed {where[middle]}, but none placed "
                  f"{where[first]} and none placed {where[last]}.",
                  claim(held("none", L, last) == trials and held("none", L, first) <= trials // 10,
                        f"The two misses differ. It holds all {trials} of the last keys: after the answer's tokens "
                        "before it, each digit is its top prediction, but its greedy answer starts with another token "
                        "(eval.passkey's `held`). Of the first keys it holds "
                        f"{held('none', L, first)} ({digits('none', L, first)} of the key's tokens predicted right)."),
                  claim(all(hits("none", x2, d) == 0 for d in depths)
                        and hits("yarn", x2, middle) == hits("yarn", x2, last) == trials and hits("yarn", x2, first) == 0,
                        f"At {number(x2)} unscaled it finds none at any depth (the key's tokens right "
                        + listed([digits("none", x2, d) for d in depths]) + f" of the time, first to last); with YaRN "
                        f"(s = {x2 // L}) it finds all {trials} of the middle and of the last keys, and none of the first "
                        f"({digits('yarn', x2, first)} of the key's tokens)."),
                  claim(hits("yarn", x4, middle) == hits("yarn", x4, last) == trials and hits("yarn", x4, first) == 0,
                        f"At {number(x4)} with YaRN (s = {x4 // L}) the same: all of the middle and of the last keys, "
                        f"none of the first ({digits('yarn', x4, first)} of the key's tokens).")
                  if all(("yarn", x4, d) in keys for d in depths) else "",
                  "So without scaling, the key at the start of the prompt is lost between "
                  f"{number(below[-1])} and {number(L)} tokens, while the middle and the end are still read at "
                  f"{number(L)}: not the U shape of Liu et al. 2023 (\"Lost in the Middle\", arXiv 2307.03172, "
                  "figure 1), where the ends are found best."),
        paragraph(claim(worst < 0.01,
                        "**Training-free context methods come within 1% of YaRN's perplexity past L or below it, and so "
                        f"does reading only the last {number(sinks['window'])} tokens.**"),
                  "; a".join(f"t {number(n)}: " + ", ".join(f"{NAMES[m]} {ppl(v[n])}" for m, v in past.items())
                             + f" (YaRN {ppl(yarn[n])}, unscaled {ppl(none[n])})" for n in (x2, x4)).join("A.") ,
                  "At L, where no scaling changes anything, "
                  + ", ".join(f"{NAMES[m]} {ppl(past[m][x1])} ({signed(at_L[m])})" for m in sorted(at_L, key=at_L.get))
                  + f" against {ppl(none[x1])}: the methods that show keys at other distances cost that much there, "
                  f"while the sinks' window of {number(sinks['sinks'] + sinks['window'])} holds the whole input.",
                  claim(shown > L and x4 > bound and methods["self-extend"][x4] < yarn[x4],
                        f"At {number(x4)} Self-Extend's defaults (G = {G}, W = {number(W)}) show distances up to "
                        f"{number(shown)}, past the {number(L)} trained and past its own bound of (L - W) G + W = "
                        f"{number(bound)} tokens, and perplexity holds;"),
                  f"G = 8, inside the bound, gives {ppl(r.ppl[(BASE, 'self-extend (group_size=8)', x4)])}.",
                  "Self-Extend's claim, a longer context with no fine-tuning (Jin et al., arXiv 2401.01325, abstract), "
                  "holds here in perplexity. But sinks, which read no token more than "
                  f"{number(sinks['sinks'] + sinks['window'] - 1)} back (StreamingLLM, Xiao et al., arXiv 2309.17453, "
                  "section 3.2, whose section 4.1 shows such a cache keeping perplexity flat over millions of tokens),",
                  claim(all(methods["sinks"][n] <= 1.01 * min(v[n] for v in past.values()) for n in (x2, x4)),
                        "match the best of them at both lengths:"),
                  "perplexity past L says these methods do not break the model; it cannot say that any of them uses "
                  "the tokens past L. The passkey can (`eval.passkey --context-method`, not measured here for "
                  "SmolLM2)."),
        paragraph(claim(all(abs(logn[n] / none[n] - 1) < 0.03 for n in (x2, x4)),
                        f"**Log-n alone does not help**: {ppl(logn[x2])} at {number(x2)} and {ppl(logn[x4])} at "
                        f"{number(x4)}, within 3% of unscaled RoPE;"),
                  "it sharpens attention past L and shows RoPE no position it was trained on.")])


def context_settings(folder: Path) -> str:
    """The page's list item on the context methods' settings: each at its defaults for L (model/context.py), as the
    rows record them."""
    r = Rows(folder / "by-length")
    L = r.L
    d = r.settings
    leaky = d["leaky-rerope"]
    return bullet(
        "**Context methods** (by length): `--context-method` through transformers' attention, no scaling, each at its "
        f"defaults for L = {number(L)} (Self-Extend W = {number(d['self-extend']['window'])} and G = "
        f"{d['self-extend']['group_size']}; ReRoPE W = {number(d['rerope']['window'])}; Leaky ReRoPE W = "
        f"{number(leaky['window'])} and k = {leaky['k']:g}; DCA chunks of {number(d['dca']['chunk_size'])} with a local "
        f"window of {number(d['dca']['local_window'])}; sinks: {d['sinks']['sinks']} and the last "
        f"{number(d['sinks']['window'])}; log-n base {number(d['logn']['length'])}), at "
        + listed([number(n) for n in r.lengths])
        + " (Self-Extend with G = 8 at " + number(r.lengths[-1]) + " only).")


def cell_times(folder: Path) -> str:
    """The section "Time": each cell's seconds, from the rows' tokens/s and the passkey rows' seconds."""
    rows = previous_rows(folder / "by-length" / "results.json", "eval.extrapolation", "ppl")
    seconds = lambda names: [r["tokens"] / r["tokens_per_s"] for r in rows if r["scaling"] in names]  # noqa: E731
    static, methods = seconds(("none", "linear", "ntk", "yarn")), seconds(NAMES)
    dynamic = max(seconds(("dynamic",)))
    keys = [r["seconds"] for r in previous_rows(folder / "passkey.json", "eval.passkey", "depth") if r.get("seconds")]
    return paragraph(
        f"On this machine a perplexity cell by length took {min(static):,.0f} to {max(static):,.0f} s under a static "
        f"scaling, up to {dynamic:,.0f} s for dynamic NTK (decoding through its cache), {min(methods):,.0f} to "
        f"{max(methods):,.0f} s under a context method, and a passkey cell (20 trials) {min(keys):,.0f} to "
        f"{max(keys):,.0f} s, one or two threads each, often beside another job: each cell's seconds are in "
        "[report.md](report.md) and [by-length/report.md](by-length/report.md). `make smollm2-report RESUME=1` measures "
        "only the cells missing from the rows committed here.")


# {page: {block name: its rendering from the reports folder}} (render.reports merges these)
BLOCKS: dict[str, dict[str, Callable[[Path], str]]] = {
    "reports/smollm2/README.md": {"smollm2-same-tokens": lambda reports: same_tokens(reports / "smollm2"),
                                  "smollm2-full-windows": lambda reports: full_windows(reports / "smollm2"),
                                  "smollm2-by-length": lambda reports: by_length(reports / "smollm2"),
                                  "smollm2-time": lambda reports: cell_times(reports / "smollm2"),
                                  "smollm2-context-settings": lambda reports: context_settings(reports / "smollm2")}}
