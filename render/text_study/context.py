"""The page's section on the training-free context methods (make study-context's rows in context/METHOD/)."""
from __future__ import annotations

from pathlib import Path

from render.prose import bullet, claim, paragraph
from render.rows import previous_rows
from render.text_study.study import DYNAMIC_YARN, ROPE, Study, bound, ratio, x_span


METHODS = ("self-extend", "rerope", "leaky-rerope", "dca", "sinks", "logn")
NAMES = {"self-extend": "Self-Extend", "rerope": "ReRoPE", "leaky-rerope": "Leaky ReRoPE", "dca": "DCA",
         "sinks": "the attention sinks", "logn": "log-n"}


class Context:
    """make study-context's rows (context/METHOD/results.json): {(method, run, seed, length): perplexity}, with `none`
    the same checkpoints without a method; and each method's settings."""

    def __init__(self, folder: Path):
        self.cells, self.settings = {}, {}
        for method in ("none", *METHODS):
            for r in previous_rows(folder / "context" / method / "results.json", "eval.extrapolation", "ppl"):
                self.cells[(method, r["run"], r["seed"], r["length"])] = r["ppl"]
                self.settings[method] = r.get("context")
        self.seeds = sorted({k[2] for k in self.cells})
        self.lengths = sorted({k[3] for k in self.cells})

    def to_none(self, method: str, run: str, n: int) -> list[float]:
        """Each seed's perplexity under the method over its perplexity without one, same checkpoint."""
        return [self.cells[(method, run, s, n)] / self.cells[("none", run, s, n)] for s in self.seeds]

    def over_L(self, method: str, run: str, n: int) -> list[float]:
        """Each seed's perplexity under the method at length n over its own at the shortest length (L)."""
        return [self.cells[(method, run, s, n)] / self.cells[(method, run, s, self.lengths[0])] for s in self.seeds]


def context_settings(folder: Path) -> str:
    """Training-free context methods: which methods, at which settings (their rows' own)."""
    c = Context(folder)
    L, X16 = c.lengths[0], c.lengths[-1]
    rows = [r for method in ("none", *METHODS)
            for r in previous_rows(folder / "context" / method / "results.json", "eval.extrapolation", "ppl")]
    (tokens,) = {r["tokens"] for r in rows}
    runs = {r["run"] for r in rows}
    se, rerope, leaky = c.settings["self-extend"], c.settings["rerope"], c.settings["leaky-rerope"]
    dca, sinks = c.settings["dca"], c.settings["sinks"]
    return paragraph(
        claim(runs == {"rope", "alibi", "t5"} and {r["scaling"] for r in rows} == {"none", *METHODS},
              "RoPE, ALiBi and T5 of each seed (trained first where missing), evaluated without a scaling at "
              f"1x-{X16 // L}x L"),
        f"with each method of `model/context.py` at its defaults from L = {L}, the settings the task track used: "
        f"Self-Extend (Jin et al., arXiv 2401.01325) with a neighbour window of {se['window']} and groups of "
        f"{se['group_size']}, ReRoPE with every distance past {rerope['window']} shown at {rerope['window']}, Leaky "
        f"ReRoPE growing at 1/{leaky['k']:g} past {leaky['window']} (Su, 2023), DCA (An et al., arXiv 2402.17463) with "
        f"chunks of {dca['chunk_size']} and a local window of {dca['local_window']}, attention sinks (Xiao et al., "
        f"arXiv 2309.17453) with the first {sinks['sinks']} tokens and the last {sinks['window']}, and log-n scaling "
        "of the queries past L (arXiv 2501.19399). The papers apply them to RoPE models; on ALiBi and T5 (the bias "
        "taken at the distance a method shows) they are this repo's extension, and ReRoPE leaves out the log-n query "
        "scaling of Su's patch (`logn` is that scaling alone). `none` is the same checkpoints without a method. Each "
        f"method's rows are in `context/METHOD/results.md` ({tokens:,} scored tokens a cell, as above).")


def context_checkpoints(folder: Path) -> str:
    """Training-free context methods: how their checkpoints compare with results.json's."""
    s, c = Study(folder), Context(folder)
    L, X16 = s.L, c.lengths[-1]
    gap = {run: {(seed, n): abs(c.cells[("none", run, seed, n)] / s.ppl[(run, seed, "none", None, n)] - 1)
                 for seed in c.seeds for n in c.lengths} for run in ("rope", "alibi", "t5")}
    worst = max(gap["rope"], key=gap["rope"].get)
    at_L = max(gap["rope"][(seed, L)] for seed in c.seeds)
    return paragraph(
        "These runs were trained again with this commit's code, so they are not quite the checkpoints of the tables "
        f"above: their plain rows agree with results.json within {bound(100 * max(gap['t5'].values()), 2)}% for T5, "
        f"{bound(100 * max(gap['alibi'].values()), 1)}% for ALiBi, {bound(100 * at_L, 1)}% for RoPE at L and",
        claim(worst[1] == X16, f"{gap['rope'][worst]:.1%} for RoPE at {X16 // L}x (seed {worst[0]})."),
        "Every comparison below is against `none` on the same checkpoints.")


def context_methods(folder: Path) -> str:
    """Training-free context methods: what the rows say, method by method."""
    s, c = Study(folder), Context(folder)
    L, X4, X16 = c.lengths[0], c.lengths[2], c.lengths[-1]
    k, k4 = f"{X16 // L}x", f"{X4 // L}x"
    past_2x = [n for n in c.lengths if n > 2 * L]
    helps = {m: all(r < 1 for n in past_2x for r in c.to_none(m, "rope", n)) for m in METHODS}
    at_16x = [{m: c.cells[(m, "rope", seed, X16)] for m in METHODS if m != "logn"} for seed in c.seeds]
    orders = {tuple(sorted(cells, key=cells.get)) for cells in at_16x}
    (order,) = orders if len(orders) == 1 else (None,)
    sinks, window = c.settings["sinks"]["sinks"], c.settings["sinks"]["window"]
    sinks_16x = max(abs(r - 1) for r in c.over_L("sinks", "rope", X16))
    rise = [r - 1 for r in c.over_L("none", "rope", X16)]
    se = c.settings["self-extend"]
    G, W = se["group_size"], se["window"]
    shown = {n: (n - 1) // G + W - W // G for n in (X4, X16)}  # the first token, seen from the last (model/context.py)
    se_4x = max(abs(r - 1) for r in c.over_L("self-extend", "rope", X4))
    se_rise = [r - 1 for r in c.over_L("self-extend", "rope", X16)]
    se_16x = c.to_none("self-extend", "rope", X16)
    dynamic_yarn = ratio(s.at(DYNAMIC_YARN, X16), s.at(ROPE, X16))
    others = ("rerope", "leaky-rerope", "dca", "sinks")
    alibi = {m: c.to_none(m, "alibi", X16) for m in ("rerope", "dca", "leaky-rerope")}
    exact = max(abs(r - 1) for m in ("self-extend", "sinks") for n in c.lengths for r in c.to_none(m, "alibi", n))
    t5 = max(abs(r - 1) for m in ("self-extend", "rerope", "leaky-rerope", "dca") for n in c.lengths
             for r in c.to_none(m, "t5", n))
    t5_sinks = {(n, i): r for n in c.lengths for i, r in enumerate(c.to_none("sinks", "t5", n))}
    logn = {run: c.to_none("logn", run, X16) for run in ("rope", "alibi", "t5")}
    return "\n".join([
        bullet(claim(all(helps[m] == (m != "logn") for m in METHODS) and order is not None,
                     f"**Every method but log-n lowers RoPE's perplexity past 2x L in every seed**, and at {k} their "
                     "order is the same in every seed: " + ", ".join(NAMES[m] for m in (order or ())) + "."),
               claim(sinks_16x < 0.005 and min(rise) > 0,
                     f"With the sinks RoPE's perplexity at {k} is within {bound(100 * sinks_16x, 1)}% of its own at L "
                     f"in every seed ({min(rise):+.0%} to {max(rise):+.0%} without a method)."),
               claim(sinks + window <= L, "The sinks never show a distance past L, so RoPE never meets an unseen "
                                          "rotation."),
               "StreamingLLM's claim, perplexity that stays flat far past the pretraining window (section 4.1), holds "
               "here; the task track shows what it costs: nothing past the window is read ([attention sinks "
               "there](../tasks/README.md#attention-sinks))."),
        bullet(claim(se_4x < 0.005 and min(se_rise) > 0,
                     f"**Self-Extend keeps RoPE flat to {k4} L, then lets it rise**: within "
                     f"{bound(100 * se_4x, 1)}% of its perplexity at L at {X4} tokens, {min(se_rise):+.0%} to "
                     f"{max(se_rise):+.0%} at {k} in every seed."),
               claim(L <= shown[X4] < 1.5 * L,
                     f"A key d > {W} back is shown at about d/{G} + {W - W // G}: the first token at {shown[X4]} at "
                     f"{X4} tokens (near L), at {shown[X16]} at {X16:,}."),
               claim(min(se_16x) > max(dynamic_yarn)
                     and all(max(c.to_none(m, "rope", X16)) < min(dynamic_yarn) for m in others),
                     f"Relative to no method it does a little less for RoPE at {k} ({x_span(se_16x)}) than dynamic "
                     f"YaRN, the study's best scaling, does relative to no scaling ({x_span(dynamic_yarn)}, on the "
                     "checkpoints of the tables above); the other four methods do more.")),
        bullet(claim(min(r for v in alibi.values() for r in v) > 1,
                     f"**Methods that shorten distances cost ALiBi**: at {k} ReRoPE leaves it at "
                     f"{x_span(alibi['rerope'])}, DCA at {x_span(alibi['dca'])} and Leaky ReRoPE at "
                     f"{x_span(alibi['leaky-rerope'])} its perplexity without a method."),
               "With ALiBi's penalty capped (ReRoPE, DCA) or slowed (Leaky ReRoPE), far tokens weigh nearly as much as "
               "near ones.",
               f"Self-Extend and the sinks, which keep the nearest {W} and {window} tokens exact, leave ALiBi within "
               f"{bound(100 * exact, 0)}% in every seed."),
        bullet(claim(max(t5_sinks.values()) <= 1 and min(t5_sinks, key=t5_sinks.get)[0] == X16,
                     "**T5 barely notices any of them**: Self-Extend, ReRoPE, Leaky ReRoPE and DCA move its "
                     f"perplexity by {bound(100 * t5, 2)}% or less at every length in every seed, and the sinks lower "
                     f"it by at most {1 - min(t5_sinks.values()):.1%} (at {k})."),
               "Its learned biases hardly change past 16 tokens back (the task track read them from its checkpoints), "
               "so moving a far key changes little."),
        bullet(claim(all(r > 1 for v in logn.values() for r in v),
                     f"**Log-n costs perplexity on all three**: at {k} RoPE {x_span(logn['rope'])}, ALiBi "
                     f"{x_span(logn['alibi'])} and T5 {x_span(logn['t5'])} their perplexity without it."),
               "The scaling sharpens attention over keys these models do not use for the next token; on the task track "
               "(RoPE and ALiBi; T5 was not run there) it moved ALiBi's far retrieval both ways, mostly within the "
               "noise of a cell."),
    ])


