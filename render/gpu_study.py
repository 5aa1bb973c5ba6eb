"""The measured prose of the GPU study (reports/extrapolation-gpu/README.md), rendered by `make reports` from the
committed rows: each paragraph between <!-- rendered: NAME --> and <!-- /rendered --> lines of its page, each
comparative sentence written only while its predicate over the rows holds (render.prose). The rows: results.json and
probes.json (every seed), the budget runs' and the seeds' training tables (budget/training.md, seedN/training.md),
configs/study-gpu.yaml and extend-4x-gpu.yaml, and the CPU study's results.json for the two comparisons with it. A
range "a-b" is the smallest and largest of the seeds' values; a claim "in every seed" is checked in each. Not in any
committed file, so written here: the corpus's token count, the parameter count, the probes' span length, the device
commands' seconds and the papers' numbers."""
from __future__ import annotations

import re
import statistics
from pathlib import Path
from typing import Callable

from config import Config, load_config
from render.prose import bullet, claim, listed, number, paragraph, seeds_named, span
from render.rows import previous_rows
from render.summary import budget_step

CORPUS_TOKENS = 6_612_709  # the Gutenberg corpus's training tokens with this vocabulary (data.prepare)
PARAMS = 26  # millions, the model of configs/study-gpu.yaml (model/ is not imported here)
SCRATCH = ("learned", "sinusoidal", "rope", "alibi", "nope")  # the runs trained from scratch
PER_LENGTH, FIXED, DYNAMIC = "length/L", "fixed", "T/L"
PI = ("rope-pi", "linear (fine-tuned)", "fine-tuned")
YARN = ("rope-yarn", "yarn (fine-tuned)", "fine-tuned")
CONTROL = ("rope-continued", "none (fine-tuned)", None)
WORDS = {2: "two", 3: "three", 4: "four", 5: "five", 6: "six"}


def step_table(path: Path) -> dict[int, dict[str, float]]:
    """{step: {run: validation loss}} from the by-step table of a training.md."""
    text = path.read_text().split("## Validation loss by step")[1].split("##")[0]
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in text.splitlines() if line.startswith("|")]
    steps = [int(c.split()[1]) for c in rows[0][1:]]
    return {step: {row[0]: float(row[i + 1].split()[0]) for row in rows[2:]} for i, step in enumerate(steps)}


def throughput(path: Path) -> dict[str, int]:
    """{run: train tokens/s} from the first table of a training.md."""
    return {m[0]: int(m[1].replace(",", "")) for m in re.findall(r"^\| (\S+) \| \d+ \|.*\| ([\d,]+) \|$",
                                                                  path.read_text(), re.M)}


class Study:
    """The GPU study's rows, read from the reports folder."""

    def __init__(self, reports: Path):
        folder = self.folder = reports / "extrapolation-gpu"
        self.rows = previous_rows(folder / "results.json", "eval.extrapolation", "ppl")
        self.probes = previous_rows(folder / "probes.json", "eval.probe", "probe")
        self.cpu = previous_rows(reports / "extrapolation" / "results.json", "eval.extrapolation", "ppl")
        self.seeds = sorted({r["seed"] for r in self.rows})
        self.lengths = sorted({r["length"] for r in self.rows})
        self.L = min(r["train_length"] for r in self.rows)
        self.budget = step_table(folder / "budget" / "training.md")
        self.configs = reports.parent / "configs"
        cfg = self.config = load_config(Config, self.configs / "study-gpu.yaml")
        self.steps = cfg.train.max_steps
        self.tokens = cfg.train.max_steps * cfg.train.batch_size * cfg.model.max_seq_len  # a run's training tokens

    def ppl(self, run: str, length: int, seed: int, scaling: str = "none", rule: str | None = None) -> float | None:
        (row,) = [r for r in self.rows if (r["run"], r["scaling"], r["factor_rule"], r["length"], r["seed"])
                  == (run, scaling, rule, length, seed)]
        return row["ppl"]

    def curve(self, run: str, seed: int, scaling: str = "none", rule: str | None = None) -> list:
        """Perplexity at 1x, 2x, 4x, 8x, 16x L."""
        return [self.ppl(run, n, seed, scaling, rule) for n in self.lengths]

    def mean(self, run: str, scaling: str = "none", rule: str | None = None) -> list:
        return [statistics.fmean(self.ppl(run, n, s, scaling, rule) for s in self.seeds) for n in self.lengths]

    def ratio(self, run: str, seed: int, i: int = -1) -> float:
        """Perplexity at the i-th length over that at L."""
        c = self.curve(run, seed)
        return c[i] / c[0]

    def above_rope_at_L(self, run: str, seed: int) -> float:
        return 100 * (self.ppl(run, self.L, seed) / self.ppl("rope", self.L, seed) - 1)

    def cpu_ratio(self, run: str) -> list[float]:
        """The CPU study's perplexity at 16x over that at L, per seed."""
        L = min(r["train_length"] for r in self.cpu)
        at = {(r["seed"], r["length"]): r["ppl"] for r in self.cpu if r["run"] == run and r["scaling"] == "none"}
        return [at[(s, 16 * L)] / at[(s, L)] for s in sorted({s for s, _ in at})]

    def training(self, seed: int) -> Path:
        return self.folder / (f"seed{seed}" if seed else "budget") / "training.md"

    # the claims made "in every seed", each for one seed
    def alibi_falls(self, seed: int) -> bool:
        c = self.curve("alibi", seed)
        return all(a > b for a, b in zip(c, c[1:]))

    def rope_best_at_L(self, seed: int) -> bool:
        return min(SCRATCH, key=lambda run: self.ppl(run, self.L, seed)) == "rope"

    def nope_worst(self, seed: int) -> bool:
        return max(("nope", "sinusoidal", "rope", "alibi"), key=lambda run: self.ratio(run, seed)) == "nope"

    def scaled_at_16x(self, seed: int) -> dict[tuple, float]:
        """{(scaling, factor rule): RoPE's perplexity at 16x} for every training-free scaling."""
        return {(r["scaling"], r["factor_rule"]): r["ppl"] for r in self.rows if r["run"] == "rope"
                and r["length"] == self.lengths[-1] and r["seed"] == seed and r["scaling"] != "none"}

    def dynamic_yarn_best(self, seed: int) -> bool:
        scaled = self.scaled_at_16x(seed)
        return min(scaled, key=scaled.get) == ("dynamic-yarn", DYNAMIC)

    def alibi_below_rope(self, seed: int) -> bool:
        x16 = self.lengths[-1]
        return self.ppl("alibi", x16, seed) < min(r["ppl"] for r in self.rows if r["run"].startswith("rope")
                                                   and r["length"] == x16 and r["seed"] == seed)

    def fine_tunes(self, seed: int) -> tuple[list, list, list]:
        return tuple(self.curve(run[0], seed, *run[1:]) for run in (PI, YARN, CONTROL))

    def fine_tunes_close(self, seed: int) -> bool:
        at_4x = [c[2] for c in self.fine_tunes(seed)]
        return max(at_4x) / min(at_4x) - 1 < 0.004

    def control_ahead(self, seed: int) -> bool:
        pi, yarn, control = self.fine_tunes(seed)
        return all(yarn[i] < pi[i] and control[i] < yarn[i] for i in (3, 4))

    def copy_gains(self, seed: int | None = None) -> list[dict]:
        return [r for r in self.probes if r["probe"] == "copy" and r.get("gain") is not None
                and seed in (None, r["seed"])]


def protocol(reports: Path) -> str:
    """The opening paragraph: the model, the protocol and the seeds, from the configs and the rows."""
    g = Study(reports)
    m = g.config.model
    extend = load_config(Config, g.configs / "extend-4x-gpu.yaml")
    x = extend.model.max_seq_len
    (tokens,) = {r["tokens"] for r in g.rows if r["ppl"] is not None}
    windows = {r["length"]: r["windows"] for r in g.rows if r["ppl"] is not None}
    lo, hi = g.lengths[0], g.lengths[-1]
    return paragraph(
        "The CPU study's 1.3M-parameter models read only the last few dozen tokens. This study trains "
        f"MiniMind2-Small's shape (`configs/study-gpu.yaml`: {PARAMS}M parameters, {m.n_layers} layers, d = "
        f"{m.d_model}, grouped-query attention with {m.n_kv_heads} key-value heads, vocabulary "
        f"{number(g.config.data.vocab_size)}, L = {g.L}) on the Gutenberg books ({CORPUS_TOKENS / 1e6:.1f}M training "
        "tokens), with the CPU study's protocol: five encodings from scratch (learned, sinusoidal, RoPE, ALiBi, NoPE), "
        "the RoPE run continued at "
        f"{x // g.L}x L ({number(x)} tokens, {extend.train.max_steps} steps of {extend.train.batch_size} x "
        f"{number(x)}, `configs/extend-4x-gpu.yaml`) with PI, with YaRN and without scaling (the control), perplexity "
        f"on the held-out test books at 1x-{hi // g.L}x L ({number(tokens)} scored tokens per cell: {windows[lo]} "
        f"windows at {number(lo)} tokens, {windows[hi]} at {number(hi)}) with every RoPE scaling, and the context-use "
        "probes.",
        claim({r["seed"] for r in g.probes} == set(g.seeds),
              f"**{WORDS[len(g.seeds)].capitalize()} seeds ({', '.join(map(str, g.seeds))})**, each trained and "
              "evaluated in one device command."),
        f"Seed {g.seeds[-1]} was trained after the sentences below had been written from seeds "
        f"{g.seeds[0]}-{g.seeds[-2]}, as a check on a seed never used; [what it changed](#what-seed-4-changed) is "
        "listed at the end.")


def budget(reports: Path) -> str:
    """The section "The token budget": the budget runs' curves and the seeds' runs against them."""
    g = Study(reports)
    b = g.budget
    runs = {run: {step: losses[run] for step, losses in b.items()} for run in ("rope", "sinusoidal")}
    lowest = {run: min(c, key=c.get) for run, c in runs.items()}
    last = max(b)
    within = {run: budget_step({"val_loss_by_step": c}, 0.01) for run, c in runs.items()}
    tokens, steps = g.tokens, g.steps
    finals = [step_table(g.training(s))[steps]["rope"] for s in g.seeds]
    (r, rl), (s, sl) = lowest.items()
    return "\n".join([
        bullet(claim(all(c[last] > min(c.values()) for c in runs.values()), "Both overfit."),
               f"RoPE's validation loss is lowest at step {number(rl)} ({runs[r][rl]:.3f}) and sinusoidal's at step "
               f"{number(sl)} ({runs[s][sl]:.3f}); at step {number(last)} they have risen to {runs[r][last]:.3f} "
               f"and {runs[s][last]:.3f}."),
        bullet(f"RoPE is within 1% of its lowest from step {number(within['rope'])}, sinusoidal from step "
               f"{number(within['sinusoidal'])}.",
               claim(max(within.values()) == steps and f"budget: {steps} steps" in g.training(0).read_text(),
                     f"The budget is the later of the two: **{number(steps)} steps, {tokens / 1e6:.1f}M tokens, "
                     f"about {tokens / CORPUS_TOKENS:.1f} epochs**, now `configs/study-gpu.yaml`'s `max_steps`."),
               claim(max(finals) < runs["rope"][steps],
                     f"The seed's runs train a full cosine schedule to step {number(steps)}, so they end at a lower "
                     f"loss than the budget runs had at step {number(steps)} (RoPE {span(finals, 3)} in the "
                     f"{WORDS[len(g.seeds)]} seeds, against {runs['rope'][steps]:.3f})."))])


def alibi_paper(reports: Path) -> str:
    """"Against the ALiBi paper": how each encoding degrades past L, and where they stand at L."""
    g = Study(reports)
    every = g.seeds
    alibi = g.mean("alibi")
    sin = {s: g.ratio("sinusoidal", s) for s in every}
    sin_2x = [g.ratio("sinusoidal", s, 1) for s in every]
    rope = {s: g.ratio("rope", s) for s in every}
    rope_2x = [g.ratio("rope", s, 1) for s in every]
    cpu_sin, cpu_nope = g.cpu_ratio("sinusoidal"), g.cpu_ratio("nope")
    passes = [s for s in every if rope[s] > sin[s]]
    x16 = g.lengths[-1]
    level = {s: (g.ppl("rope", x16, s), g.ppl("sinusoidal", x16, s)) for s in passes}
    gap = [g.above_rope_at_L("alibi", s) for s in every]
    above = {run: [g.above_rope_at_L(run, s) for s in every] for run in ("sinusoidal", "learned", "nope")}
    paper = {"sinusoidal": 20.05, "rotary": 20.07, "ALiBi": 19.73}  # the ALiBi paper's Table 2 at L = 512
    overfit = sorted(min(c, key=c.get) for c in ({k: v[run] for k, v in g.budget.items()} for run in
                                                 ("rope", "sinusoidal")))
    nope = {s: g.ratio("nope", s) for s in every}
    closest = min(every, key=lambda s: nope[s] / sin[s])
    return "\n".join([
        paragraph("**Against the ALiBi paper** (Press et al., arXiv 2108.12409, Figure 1 and appendix Table 2: trained "
                  "at L = 512 on WikiText-103, sinusoidal, rotary and T5 degrade past L while ALiBi does not):"),
        bullet(claim(all(map(g.alibi_falls, every)),
                     "ALiBi does not degrade: its perplexity falls at every longer length in every seed,"),
               f"from {alibi[0]:.2f} at 1x to {alibi[-1]:.2f} at 16x (means), as in the paper's table, where ALiBi "
               "keeps improving a little past L."),
        bullet(claim(min(sin_2x) > 1.5 and min(sin.values()) > 3,
                     f"Sinusoidal blows up: {span(sin_2x, 2)}x its 1x perplexity at 2x L and {span(sin.values(), 2)}x at "
                     "16x."),
               claim(max(cpu_sin) < 1.5, "This is the paper's pattern, which the CPU study did not show "
                                         f"({span(cpu_sin, 2)}x at 16x).")),
        bullet(claim(all(r < s for r, s in zip(rope_2x, sin_2x)),
                     "RoPE degrades more slowly than sinusoidal at first "
                     f"(+{span([100 * (r - 1) for r in rope_2x])}% at 2x against "
                     f"+{span([100 * (s - 1) for s in sin_2x])}%)"),
               f"and ends at {span(rope.values(), 2)}x at 16x.",
               claim(len(passes) == 1 and all(abs(r / s - 1) < 0.02 for r, s in level.values()),
                     f"It does not stay behind: in {seeds_named(passes)} its 16x ratio passes sinusoidal's "
                     + "".join(f"({rope[s]:.2f}x against {sin[s]:.2f}x), and its perplexity there is level with it "
                               f"({level[s][0]:.2f} against {level[s][1]:.2f})." for s in passes))),
        bullet(claim(all(map(g.rope_best_at_L, every)) and min(gap) > 0,
                     f"At L, RoPE is best in every seed and ALiBi {span(gap, 1)}% behind;"),
               "the paper has ALiBi ahead at L = 512 on far larger models."),
        bullet(claim(min(min(v) for v in above.values()) > 15
                     and max(paper.values()) / min(paper.values()) - 1 < 0.02,
                     "At L the encodings without a relative distance trail far more than in the paper: "
                     f"sinusoidal {span(above['sinusoidal'])}%, learned {span(above['learned'])}% "
                     f"and NoPE {span(above['nope'])}% above RoPE in every seed, where the paper's appendix "
                     "Table 2 has sinusoidal, rotary and ALiBi within 2% of each other at L = 512 "
                     f"({', '.join(f'{v:.2f}' for v in paper.values())})."),
               claim(g.steps < overfit[0],
                     f"A likely cause, not measured here: these runs stop at {number(g.steps)} steps, "
                     f"{g.tokens / CORPUS_TOKENS:.1f} epochs of a {CORPUS_TOKENS / 1e6:.1f}M-token corpus, where "
                     f"validation loss turns up soon after (step {span(overfit)}, above),"),
               "so an encoding that must learn position from the data gets little of it, while the paper's models "
               "train on WikiText-103's 103M tokens."),
        bullet(claim(len({f"{r - 1:.0%}" for r in cpu_nope}) == 1 and all(map(g.nope_worst, every))
                     and round(max(nope.values()) / min(nope.values())) == 5,
                     f"NoPE, nearly flat in the CPU study (+{cpu_nope[0] - 1:.0%} at 16x), fails worst past L, but by "
                     "a margin that varies five-fold across seeds: "
                     f"{span(nope.values(), 2)}x its 1x perplexity at 16x."),
               claim(1 < nope[closest] / sin[closest] < 1.02,
                     f"In seed {closest} it is barely worse than sinusoidal ({nope[closest]:.2f}x against "
                     f"{sin[closest]:.2f}x)."))])


def scalings(reports: Path) -> str:
    """"Training-free RoPE scalings": each at 16x against unscaled RoPE, seed by seed."""
    g = Study(reports)
    every = g.seeds
    scaled, unscaled = {s: g.scaled_at_16x(s) for s in every}, {s: g.ppl("rope", g.lengths[-1], s) for s in every}
    fixed_pi = {s: scaled[s][("linear", FIXED)] / unscaled[s] for s in every}
    others = {s: {k: v for k, v in scaled[s].items() if k not in (("linear", FIXED), ("linear", PER_LENGTH))}
              for s in every}
    pi, rope = g.mean("rope", "linear", PER_LENGTH), g.mean("rope")
    dyn = [scaled[s][("dynamic-yarn", DYNAMIC)] for s in every]
    static = [scaled[s][("yarn", PER_LENGTH)] for s in every]
    return paragraph(
        claim(all(g.ppl("rope", n, s, "linear", PER_LENGTH) > g.ppl("rope", n, s)
                  for n in g.lengths[1:] for s in every),
              "**Training-free RoPE scalings.** At 16x, PI with s = length/L is worse than no scaling at every length "
              f"past L in every seed ({pi[-1]:.2f} against {rope[-1]:.2f} at 16x, means)."),
        claim(max(abs(v - 1) for v in fixed_pi.values()) < 0.09 and 1 not in fixed_pi.values(),
              "PI at a fixed s = 4 is within 9% of unscaled RoPE at 16x, below it in "
              f"{seeds_named([s for s in every if fixed_pi[s] < 1])} and above it in "
              f"{seeds_named([s for s in every if fixed_pi[s] > 1])} ({span(fixed_pi.values(), 2)}x)."),
        claim(all(v < unscaled[s] for s in every for v in others[s].values()),
              "Every other scaling is below unscaled RoPE at 16x in every seed."),
        claim(all(map(g.dynamic_yarn_best, every)),
              f"Dynamic YaRN, run as in generation, is the best in every seed ({span(dyn, 2)}, against {span(static, 2)} "
              "for static YaRN at the matched factor)."),
        claim(all(map(g.alibi_below_rope, every)), "ALiBi at 16x is below every RoPE row in every seed."))


def fine_tunes(reports: Path) -> str:
    """"Against the PI paper" and "Against the YaRN paper": the fine-tunes to 4x L and their control."""
    g = Study(reports)
    every = g.seeds
    pi, yarn, control = (g.mean(*run) for run in (PI, YARN, CONTROL))
    per_seed = {s: g.fine_tunes(s) for s in every}
    names = {0: "PI", 1: "YaRN", 2: "the control"}
    lowest = {s: min(range(3), key=lambda i: per_seed[s][i][2]) for s in every}
    order = sorted(set(lowest.values()), key=list(lowest.values()).index)
    extend = load_config(Config, g.configs / "extend-4x-gpu.yaml")
    window = extend.model.max_seq_len // g.L
    w = g.lengths.index(extend.model.max_seq_len)
    rope = g.mean("rope")
    return "\n\n".join([
        "\n".join([
            paragraph("**Against the PI paper** (Chen et al., arXiv 2306.15595, Table 1: a model fine-tuned with PI "
                      "to a longer window has lower perplexity the longer the evaluated window, up to that window):"),
            bullet(claim(all(all(a > b for a, b in zip(c[0][:w + 1], c[0][1:w + 1])) for c in per_seed.values()),
                         f"The PI fine-tune's perplexity falls from {pi[0]:.2f} at 1x to {pi[1]:.2f} at 2x and "
                         f"{pi[2]:.2f} at {window}x, its window (means; it falls in every seed).")),
            bullet(claim(all(all(a < b for a, b in zip(c[0][w:], c[0][w + 1:])) for c in per_seed.values()),
                         f"Past its window it fails: {pi[3]:.2f} at 8x and {pi[4]:.2f} at 16x."))]),
        "\n".join([
            paragraph("**Against the YaRN paper** (Peng et al., arXiv 2309.00071, Table 1: Llama 2 extended with PI, "
                      "NTK and YaRN under one fine-tuning budget, YaRN lowest):"),
            bullet(claim(all(map(g.fine_tunes_close, every)),
                         f"At {window}x the three fine-tunes are within 0.4% of each other in every seed (means: PI "
                         f"{pi[w]:.2f}, YaRN {yarn[w]:.2f}, control {control[w]:.2f}), and the lowest is "
                         + " and ".join(f"{names[i]} in {seeds_named([s for s in every if lowest[s] == i])}" for i in order)
                         + "."),
                   claim(not all(c[1][w] < c[0][w] for c in per_seed.values()),
                         "YaRN's advantage over PI at the fine-tuned window is not reproduced here.")),
            bullet(claim(all(map(g.control_ahead, every)),
                         f"Past {window}x YaRN is ahead of PI in every seed ({yarn[3]:.2f} against {pi[3]:.2f} at "
                         f"8x), but the control, trained at {number(extend.model.max_seq_len)} tokens without scaling, "
                         f"is far ahead of both ({control[3]:.2f} at 8x, {control[4]:.2f} at 16x).")),
            bullet(claim(all(max(c[i][0] for i in range(3)) < g.ppl("rope", g.L, s) for s, c in per_seed.items()),
                         "The fine-tunes also lower the loss at 1x in every seed "
                         f"({span([pi[0], yarn[0], control[0]], 2)} against {rope[0]:.2f}, means): "
                         f"{number(extend.train.max_steps)} more steps of training."))])])


def passkey_cells(g: Study) -> list[dict]:
    """Per (run, scaling, length, seed): the key's mean rank over depths, the trials and how many ranked it first."""
    cells: dict[tuple, dict] = {}
    for r in (r for r in g.probes if r["probe"] == "passkey" and r.get("rank") is not None):
        cell = cells.setdefault((r["run"], r["scaling"], r["length"], r["seed"]),
                                {"ranks": [], "firsts": 0, "trials": 0, "candidates": r["candidates"]})
        cell["ranks"].append(r["rank"])
        cell["firsts"] += round(r["value"] * r["samples"])
        cell["trials"] += r["samples"]
    return [{**c, "rank": statistics.fmean(c["ranks"])} for c in cells.values()]


def probes(reports: Path) -> str:
    """"What the models use": the copy and passkey probes in every seed."""
    g = Study(reports)
    copies, cells = g.copy_gains(), passkey_cells(g)
    gain, baseline = max(r["gain"] for r in copies), min(r["baseline"] for r in copies)
    ranks = [c["rank"] for c in cells]
    (trials,), (candidates,) = {c["trials"] for c in cells}, {c["candidates"] for c in cells}
    chance = (candidates + 1) / 2
    firsts = max(c["firsts"] for c in cells)
    none_uses = ({r["seed"] for r in copies} == set(g.seeds) and gain < 0.05 * baseline
                 and min(ranks) > chance / 2 and firsts < trials / 4)
    return "\n".join([
        paragraph(claim(none_uses, "The probes find no model that uses distant context in any seed,"),
                  "so the pattern above measures how unseen positions disturb local prediction, not whether context "
                  "past L is used:"),
        bullet(f"Copy: a first copy of a 32-token span lowers the loss on the second by at most {gain:.3f} nats at "
               f"any distance (`probes.md`), against a loss of {baseline:.1f} nats or more on those tokens. A model "
               "that copied would gain nats."),
        bullet(f"Passkey: the true key's mean rank among {candidates} candidates is {min(ranks):.1f} to "
               f"{max(ranks):.1f} at every length (chance {chance:.1f}); ranked first in at most {firsts} of a seed's "
               f"{trials} trials of any cell."),
        bullet(f"{g.tokens / 1e6:.1f}M tokens is what this corpus affords before the models overfit (the budget "
               f"curve), and it is not enough for a {PARAMS}M-parameter model to learn to copy. A smaller model would "
               "overfit later but would not learn retrieval from fewer tokens; the study needs a larger corpus (for "
               "example "
               "`data.source=hf:emozilla/pg19` on a machine with network) before it can ask whether an encoding "
               "extrapolates its use of context. The task track (`reports/tasks`) is where that question is answered "
               "today.")])


def cost(reports: Path) -> str:
    """"Cost": each device command's throughputs, from the training tables (the seconds are the commands' logs')."""
    g = Study(reports)
    budget_runs = throughput(g.training(0))
    speed = {s: throughput(g.training(s)) for s in g.seeds}
    first, later, last = g.seeds[0], g.seeds[1:-1], g.seeds[-1]

    def scratch(which):
        values = [speed[s][run] for s in which for run in SCRATCH]
        return f"{number(min(values))} to {number(max(values))}"

    def slower(which):
        values = [100 * (1 - speed[s][run] / speed[first][run]) for s in which for run in SCRATCH]
        return min(values) > 0, span(values)

    (later_slower, later_range), (last_slower, last_range) = slower(later), slower((last,))
    return "\n".join([
        "On one H100 80GB HBM3 (torch 2.11.0+cu130, bf16 autocast, compiled):",
        bullet("`make gpu-study-budget`: 239 s, data preparation included; the two runs side by side at "
               f"{number(budget_runs['rope'])} and {number(budget_runs['sinusoidal'])} tokens/s each (median over "
               "logging intervals)."),
        bullet(f"`make -k -j8 gpu-study SEED={first}`: 282 s for the five runs from scratch side by side "
               f"({scratch((first,))} tokens/s each), the three fine-tunes, and the evaluation and probes of each run "
               f"as it finished; seed {first} shared one device command of 522 s with the budget piece."),
        bullet(f"Seeds {listed([str(s) for s in later])}, one device command each, back to back on one machine of a "
               f"later lease: 358 s and 334 s, the five runs from scratch at {scratch(later)} tokens/s each. The "
               f"training code was seed {first}'s (the only change to `model/` in between is in the context methods' "
               "attention);",
               claim(later_slower, f"why each encoding trained {later_range}% slower than in seed {first} was not "
                                   "investigated.")),
        bullet(f"Seed {last}, one device command on a fresh machine of a later lease: 369 s, the shards built first "
               "(`gpu-study-data`: a fresh machine has none, and five runs building them side by side would race), "
               f"the five runs from scratch at {scratch((last,))} tokens/s each,",
               claim(last_slower, f"{last_range}% below seed {first}'s as {seeds_named(later)} were ({later_range}%)."))])


def seed_4(reports: Path) -> str:
    """"What seed 4 changed": the last seed, run after the page quoted the others."""
    g = Study(reports)
    s, first = g.seeds[-1], g.seeds[:-1]
    held = (g.alibi_falls(s) and g.rope_best_at_L(s) and g.nope_worst(s) and g.dynamic_yarn_best(s)
            and g.alibi_below_rope(s) and g.fine_tunes_close(s) and g.control_ahead(s)
            and max(r["gain"] for r in g.copy_gains(s)) < 0.05 * min(r["baseline"] for r in g.copy_gains(s)))
    rope = {k: g.curve("rope", k) for k in g.seeds}
    at_L, up_2x = {k: c[0] for k, c in rope.items()}, {k: 100 * (c[1] / c[0] - 1) for k, c in rope.items()}
    rope_16x, sin_16x = {k: g.ratio("rope", k) for k in g.seeds}, {k: g.ratio("sinusoidal", k) for k in g.seeds}
    gap = {k: g.above_rope_at_L("alibi", k) for k in g.seeds}
    dyn = g.ppl("rope", g.lengths[-1], s, "dynamic-yarn", DYNAMIC)
    dyn_first = [g.ppl("rope", g.lengths[-1], k, "dynamic-yarn", DYNAMIC) for k in first]
    fastest = max(up_2x.values()) == up_2x[s] and max(rope_16x.values()) == rope_16x[s]
    return paragraph(
        f"Seed {s} ran after the page quoted seeds {first[0]}-{first[-1]}.",
        claim(held and min(dyn_first) < dyn < max(dyn_first),
              "Every \"in every seed\" above held in it: ALiBi falls at every longer length, RoPE is best at L, NoPE "
              f"fails worst at 16x, dynamic YaRN is the best scaling ({dyn:.2f} at 16x, inside seeds "
              f"{first[0]}-{first[-1]}'s range), ALiBi at 16x is below every RoPE row, the fine-tunes are within 0.4% "
              "at 4x and the control is far ahead past it, and no model copies."),
        claim(max(at_L, key=at_L.get) == s and fastest and min(sin_16x, key=sin_16x.get) == s,
              f"What moved were the ranges, through two of its runs: seed {s}'s RoPE is the weakest of the "
              f"{WORDS[len(g.seeds)]} at L ({at_L[s]:.2f} against {span([at_L[k] for k in first], 2)}) and degrades "
              f"fastest (+{up_2x[s]:.0f}% at 2x, {rope_16x[s]:.2f}x at 16x, against seeds {first[0]}-{first[-1]}'s "
              f"+{span([up_2x[k] for k in first])}% and {span([rope_16x[k] for k in first], 2)}x), while its "
              f"sinusoidal degrades least ({sin_16x[s]:.2f}x at 16x, against {span([sin_16x[k] for k in first], 2)}x)."),
        claim([k for k in g.seeds if rope_16x[k] > sin_16x[k]] == [s] and gap[s] < min(gap[k] for k in first),
              f"So RoPE's 16x ratio passes sinusoidal's in seed {s} only, and ALiBi is {gap[s]:.1f}% behind RoPE at "
              f"L there ({span([gap[k] for k in first], 1)}% in seeds {first[0]}-{first[-1]})."),
        f"{WORDS[len(g.seeds)].capitalize()} seeds do not settle how RoPE and sinusoidal rank at 16x on this corpus;",
        claim(all(map(g.alibi_falls, g.seeds)), f"ALiBi's falling line held in all {WORDS[len(g.seeds)]}."))


def readme_summary(reports: Path) -> str:
    """README.md's paragraph on the GPU study: what the page shows, in a few numbers."""
    g = Study(reports)
    sin = [g.ratio("sinusoidal", s) for s in g.seeds]
    rope = [g.ratio("rope", s) for s in g.seeds]
    passes = [s for s, r, x in zip(g.seeds, rope, sin) if r > x]
    copies = g.copy_gains()
    gain = max(r["gain"] for r in copies)
    within = budget_step({"val_loss_by_step": {step: losses["rope"] for step, losses in g.budget.items()}}, 0.01)
    lowest = min(g.budget, key=lambda step: g.budget[step]["rope"])
    return paragraph(
        f"**On a GPU** ([report](reports/extrapolation-gpu/README.md), seeds {g.seeds[0]}-{g.seeds[-1]}): {PARAMS}M "
        f"parameters, L = {g.L}, {g.tokens / 1e6:.1f}M tokens a run",
        claim(within <= g.steps < lowest,
              "(where validation loss came within 1% of its lowest; the lowest came later)."),
        claim(all(map(g.alibi_falls, g.seeds)) and min(sin + rope) > 3,
              f"The ALiBi paper's pattern, in every seed: ALiBi falls at every longer length, while at {g.lengths[-1] // g.L}x "
              f"sinusoidal reaches {span(sin, 2)}x its 1x perplexity and unscaled RoPE {span(rope, 2)}x"),
        claim(len(passes) == 1, f"(the two swap places in seed {passes[0]})."),
        claim(gain < 0.05 * min(r["baseline"] for r in copies),
              f"No model copies (a first copy lowers the loss by at most {gain:.3f} nats)."))


# {page: {block name: its rendering from the reports folder}} (render.reports merges these)
BLOCKS: dict[str, dict[str, Callable[[Path], str]]] = {"README.md": {"gpu-summary": readme_summary},
                                                       "reports/extrapolation-gpu/README.md": {
    "gpu-protocol": protocol, "gpu-budget": budget, "gpu-alibi-paper": alibi_paper, "gpu-scalings": scalings,
    "gpu-fine-tunes": fine_tunes, "gpu-probes": probes, "gpu-cost": cost, "gpu-seed-4": seed_4}}
