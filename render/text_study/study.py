"""The text study's rows, read once: the curves as results.json names them, the numbers as the page writes them, and
Study (results.json by curve and seed) with the training summaries' readers."""
from __future__ import annotations

import math
import re
import statistics
from pathlib import Path

from render.rows import previous_rows, relative_to_nope

ROOT = Path(__file__).resolve().parents[2]
PAGE = "reports/extrapolation/README.md"

# curves: (run, scaling, factor_rule) as results.json names them
ROPE, ALIBI, NOPE, SINUSOIDAL, LEARNED = ((run, "none", None) for run in ("rope", "alibi", "nope", "sinusoidal",
                                                                          "learned"))
T5, KERPLE, FIRE, HALF = ((run, "none", None) for run in ("t5", "kerple", "fire", "rope-half"))
BASE_1E5, BASE_1E6 = ("rope-base1e5", "none", None), ("rope-base1e6", "none", None)
PI, NTK, YARN = (("rope", m, "length/L") for m in ("linear", "ntk", "yarn"))
DYNAMIC, DYNAMIC_YARN = ("rope", "dynamic", "T/L"), ("rope", "dynamic-yarn", "T/L")
FIXED = {m: ("rope", m, "fixed") for m in ("linear", "ntk", "yarn")}  # s = 4 at every length
TRAINING_FREE = [ROPE, PI, NTK, YARN, DYNAMIC, DYNAMIC_YARN, *FIXED.values()]
PI_TUNED = ("rope-pi", "linear (fine-tuned)", "fine-tuned")
YARN_TUNED = ("rope-yarn", "yarn (fine-tuned)", "fine-tuned")
CONTROL = ("rope-continued", "none (fine-tuned)", None)
POSE, POSE_CONTINUED = ("rope-pose", "none", None), ("rope-pose-continued", "none (fine-tuned)", None)
RANDOM_ROPE, RANDOM_ALIBI = ("rope-randomized", "none", None), ("alibi-randomized", "none", None)


def on(run: str, c: tuple) -> tuple:
    """The curve `c` (a scaling of the base RoPE run) on another run."""
    return (run, *c[1:])


# ----------------------------------------------------------------------------- numbers as the page writes them

def minus(a: list[float], b: list[float]) -> list[float]:
    return [x - y for x, y in zip(a, b)]


def above(a: list[float], b: list[float]) -> list[float]:
    """How much a is above b, in %, pairwise."""
    return [100 * (x / y - 1) for x, y in zip(a, b)]


def ratio(a: list[float], b: list[float]) -> list[float]:
    return [x / y for x, y in zip(a, b)]


def fmt(values: list[float], digits: int = 1, sep: str = " / ", sign: bool = False) -> str:
    """'107.4 / 104.9 / 110.0', or signed with sep ', ': '+4.3, -5.9, +6.1'."""
    spec = f"{'+' if sign else ''}.{digits}f"
    return sep.join(format(v, spec) for v in values)


def level(a: list[float], b: list[float]) -> bool:
    """The difference does not have the same sign in every seed."""
    return len({x > y for x, y in zip(a, b)}) > 1


def below(a: list[float], b: list[float]) -> bool:
    """a is below b in every seed."""
    return all(x < y for x, y in zip(a, b))


def bound(x: float, digits: int) -> str:
    """x rounded up at `digits` decimals: a bound that holds ("within 1.1%" for 1.03%)."""
    return f"{math.ceil(x * 10 ** digits - 1e-9) / 10 ** digits:.{digits}f}"


def x_span(values: list[float]) -> str:
    return f"{min(values):.2f}-{max(values):.2f}x"


# ----------------------------------------------------------------------------- the rows

class Study:
    """results.json as {(run, seed, scaling, factor_rule, length): perplexity}, by curve and seed."""

    def __init__(self, folder: Path):
        self.rows = previous_rows(folder / "results.json", "eval.extrapolation", "ppl")
        self.ppl = {(r["run"], r["seed"], r["scaling"], r["factor_rule"], r["length"]): r["ppl"] for r in self.rows}
        self.seeds = sorted({r["seed"] for r in self.rows})
        self.L = min(r["train_length"] for r in self.rows)
        self.lengths = sorted({r["length"] for r in self.rows})
        self.past_L = [n for n in self.lengths if n > self.L]

    def at(self, c: tuple, n: int) -> list[float]:
        """One curve's perplexity at length n, seed by seed."""
        run, scaling, rule = c
        return [self.ppl[(run, s, scaling, rule, n)] for s in self.seeds]

    def where(self, flags: list[bool]) -> list[int]:
        """The seeds whose flag (one per seed, in order) is set."""
        return [seed for seed, flag in zip(self.seeds, flags) if flag]

    def mean(self, c: tuple, n: int) -> float:
        return statistics.fmean(self.at(c, n))

    def below_at(self, a: tuple, b: tuple, lengths) -> bool:
        """Curve a is below curve b in every seed at each of these lengths."""
        return all(below(self.at(a, n), self.at(b, n)) for n in lengths)

    def best_training_free(self, i: int, n: int) -> tuple:
        """The training-free RoPE curve lowest at length n in the i-th seed."""
        return min(TRAINING_FREE, key=lambda c: self.at(c, n)[i])

    def buckets(self, c: tuple, seed: int | None = None) -> list[float]:
        """The loss by position bucket at the longest length minus NoPE's on the same windows: one seed's, or the
        mean over seeds."""
        run, scaling, _ = c
        deltas = relative_to_nope(self.rows)
        (key,) = [k for k in deltas if k[0] == run and k[2] == scaling and k[3] == self.L]
        per_seed = deltas[key][self.lengths[-1]]
        if seed is not None:
            return per_seed[self.seeds.index(seed)]
        return [statistics.fmean(column) for column in zip(*per_seed)]


def training_table(path: Path, first_column: str = "run") -> list[dict]:
    """The rows of the markdown table in `path` whose first header cell is `first_column` (a training summary)."""
    rows, header = [], None
    for line in path.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")] if line.startswith("|") else None
        if cells is None:
            header = None
        elif header is None:
            header = cells
        elif header[0] == first_column and not set(line) <= set("|-: "):
            rows.append(dict(zip(header, cells)))
    return rows




def val(folder: Path, name: str, column: str) -> dict[tuple, float]:
    """{(run, seed): the column (val loss, val ppl) at the end of training} from a training summary."""
    return {(r["run"], int(r["seed"])): float(r[column]) for r in training_table(folder / name) if "seed" in r}


def gap_to_rope(folder: Path, name: str) -> dict[tuple, tuple[float, float]]:
    """{(run, step): (mean, sd) of the validation-loss gap to RoPE} from a training summary."""
    out = {}
    for r in training_table(folder / name):
        for column, cell in r.items():
            found = re.search(r"\(([+-][\d.]+) ± ([\d.]+)\)", cell)
            if column.startswith("step") and found:
                out[(r["run"], int(column.split()[1]))] = float(found[1]), float(found[2])
    return out


def retrained_lower(folder: Path) -> list[float]:
    """How much lower in perplexity the retrained RoPE runs (training-positions.md) are than the committed ones the
    PI, YaRN and control fine-tunes started from (training.md), in %, seed by seed."""
    committed, retrained = val(folder, "training.md", "val ppl"), val(folder, "training-positions.md", "val ppl")
    return [100 * (1 - retrained[key] / committed[key]) for key in sorted(retrained) if key[0] == "rope"]


