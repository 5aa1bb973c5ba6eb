"""studies/gpu/README.md's claims (and the front page's), proved from the rows with 95% intervals over seeds."""
from studies.gpu.values import (CANDIDATES, DYN, L, MULTIPLES, NONE, PI, PROBES, ROWS, SCALINGS, SEEDS, TUNED, X,
                                copies, copy_above, cells, firsts, gap, passkey_above, ppl, ratio)
from studies.stats import above_zero, below_zero, mean_interval, paired_interval

BLOWS_UP = 2  # "blows up": the interval of its perplexity at 16x over that at 1x lies above 2
COPIES = 0.05  # a model that copies gains more than 5% of the loss from the first copy
SIN, ALIBI, NOPE = ("sinusoidal", "none"), ("alibi", "none"), ("nope", "none")
level = lambda t: t[1] <= 0 <= t[2]  # noqa: E731  (an interval that holds 0)
below = lambda a, b, x: below_zero(gap(a, b, x))  # noqa: E731
def falls(c):  # lower at each longer length in every seed, and each step's paired interval over seeds below 0
    return all(below_zero(paired_interval(b, a)) and all(q < p for p, q in zip(a, b)) for a, b in zip(c, c[1:]))
alibi_falls = lambda rows=ROWS: falls([ppl(*ALIBI, x, rows) for x in MULTIPLES])  # noqa: E731
no_copies = lambda probes=PROBES: all(r["gain"] < COPIES * r["baseline"] for r in copies(probes))  # noqa: E731

def test_claim_alibi_falls():
    assert alibi_falls()

def test_claim_rope_sinusoidal_level_16x():
    assert all(mean_interval(ratio(r, X))[1] > BLOWS_UP for r in ("sinusoidal", "rope")) and level(gap(NONE, SIN, X))

def test_claim_rope_alibi_level_at_L():
    assert level(gap(ALIBI, NONE, 1, percent=True))
    assert all(above_zero(gap(run, NONE, 1, percent=True)) for run in (SIN, NOPE, ("learned", "none")))

def test_claim_dynamic_yarn_best_alibi_lower():  # ALiBi below every RoPE row, the fine-tunes' included
    assert all(below(DYN, s, X) for s in SCALINGS if s != DYN) and below(DYN, NONE, X)
    assert all(below(ALIBI, c, X) for c in [NONE, *SCALINGS, *TUNED.values()])

def test_claim_pi_no_better():  # every other scaling below; PI per length above at 2x-8x, level at 16x, as at s = 4
    assert all(level(gap(s, NONE, X)) if s[1].startswith("linear") else below(s, NONE, X) for s in SCALINGS)
    assert all(above_zero(gap(PI, NONE, x)) for x in MULTIPLES[1:-1])

def test_claim_pi_falls_to_its_window():  # and rises at each longer length past it
    c = [ppl(*TUNED["PI"], x) for x in MULTIPLES]
    assert falls(c[:3]) and falls([[-v for v in a] for a in c[2:]])

def test_claim_level_at_4x_control_ahead_past():
    assert all(level(gap(TUNED[a], TUNED[b], 4)) for a, b in (("YaRN", "PI"), ("control", "PI"), ("control", "YaRN")))
    assert all(below(TUNED[a], TUNED[b], x) for a, b in (("YaRN", "PI"), ("control", "YaRN"), ("control", "PI"))
               for x in (8, X))

def test_claim_no_copies():
    assert no_copies()

def test_claim_copy_gains_real():  # above 0 in most cells, in every cell at the shortest distance, and RoPE's at 4x L
    above, shortest = copy_above(), min(d for *_, d in copy_above())
    assert sum(above.values()) > len(above) / 2 and above[(*NONE, 4 * L)]
    assert all(above[k] for k in above if k[2] == shortest)

def test_claim_passkey_at_chance():  # pooled, the interval holds chance; the cells above it share one length
    share = firsts(sum(cells("passkey", "length").values(), []))
    assert share[1] <= 1 / CANDIDATES <= share[2] and len({k[2] for k in passkey_above()}) == 1

def test_a_changed_row_breaks_a_claim():  # ALiBi's perplexity at 16x in the first seed, 5% higher
    rows = [dict(r, ppl=r["ppl"] * 1.05) if (r["run"], r["seed"], r["length"]) == ("alibi", SEEDS[0], X * L) else r
            for r in ROWS]
    assert alibi_falls(ROWS) and not alibi_falls(rows)

def test_a_copying_model_breaks_no_copies():  # the row of the largest gain gains half its loss from the first copy
    top = max(copies(), key=lambda r: r["gain"])
    probes = [dict(r, gain=r["baseline"] / 2) if r is top else r for r in PROBES]
    assert no_copies(PROBES) and not no_copies(probes)
