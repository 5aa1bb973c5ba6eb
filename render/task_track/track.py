"""The task track's rows as the page's sections read them (Track: reports/tasks' results and validation curves; Search:
the recipe search's table and logs), and the number formats every section shares."""
from __future__ import annotations

import functools
import json
import math
from pathlib import Path

from config import Config, load_config
from render.prose import listed
from render.rows import curve_label, previous_rows
from render.tasks import interval, learned, pooled


TASKS = ("copy", "recall", "passkey", "recall1", "passkey1")
INDUCTION = ("copy", "recall", "passkey")
SINGLE_HOP = ("recall1", "passkey1")
ENCODINGS = ("rope", "alibi", "nope", "t5")
FINE_TUNED = {"rope-pi": "linear (fine-tuned)", "rope-yarn": "yarn (fine-tuned)", "rope-continued": "none (fine-tuned)"}
SCALED = {m: f"{m} (s = length/L)" for m in ("linear", "ntk", "yarn")} | {"dynamic": "dynamic (s = T/L, cached)"}
WORDS = {2: "two", 3: "three", 4: "four", 5: "five", 6: "six", 7: "seven", 8: "eight"}


def pct(x: float) -> str:
    return f"{100 * x:.0f}"


def per_seed(values) -> str:
    """'15% and 7%', '15%, 7% and 9%': a value per seed, in seed order."""
    return listed([f"{pct(v)}%" for v in values])


def pct_span(values) -> str:
    """'4-18%': the least and the most of some accuracies, in whole percent."""
    ints = sorted(int(pct(v)) for v in values)
    return f"{ints[0]}-{ints[-1]}%"


def points(drop: float) -> int:
    """A drop in accuracy in whole points, rounded up ("within 11 points")."""
    return math.ceil(round(100 * drop, 6))


def ranges(numbers) -> str:
    """'13, 16, 17, 61-69': numbers, each run of three or more consecutive ones as a range."""
    numbers, out = sorted(numbers), []
    for n in numbers:
        if out and out[-1][-1] == n - 1:
            out[-1].append(n)
        else:
            out.append([n])
    return ", ".join(f"{r[0]}-{r[-1]}" if len(r) > 2 else ", ".join(map(str, r))
                     for r in out)


def rate(x: float) -> str:
    """A learning rate as the page writes it: 3e-3."""
    return f"{x:.0e}".replace("e-0", "e-")


@functools.cache
def validation_sequences(root: Path) -> int:
    """The sequences a task gets in one validation reading of the track's recipe: train.eval_tokens over the tasks'
    sequences of L tokens (configs/tasks.yaml)."""
    cfg = load_config(Config, root / "configs" / "tasks.yaml")
    return cfg.train.eval_tokens // (cfg.model.max_seq_len * len(TASKS))


def readings_apart(a: float, b: float, sequences: int) -> bool:
    """Two validation readings whose 95% intervals over the sequences of a reading do not overlap."""
    (lo_a, hi_a), (lo_b, hi_b) = interval(a, sequences), interval(b, sequences)
    return hi_a < lo_b or hi_b < lo_a


def learned_step(curve: dict[int, float]) -> int | None:
    """The first step from which an accuracy curve stays at 90% or more to its end (None: never)."""
    steps = sorted(curve.items())
    return next((step for i, (step, _) in enumerate(steps) if all(a >= 0.9 for _, a in steps[i:])), None)


class Track:
    """The track's rows: accuracy by (run, seed, task, label, length), by band, learned at L, validation curves."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.rows = previous_rows(folder / "results.json.gz", "eval.tasks", "accuracy")
        self.pooled = pooled(self.rows)
        self.learned = learned(self.rows)
        self.training = json.loads((folder / "training.json").read_text())
        self.seeds = tuple(sorted({r["seed"] for r in self.rows}))
        self.L = min(r["train_length"] for r in self.rows)
        self.lengths = sorted({r["length"] for r in self.rows})
        self.ran: dict[str, list[int]] = {}  # run -> the seeds it has rows for (the added methods' arrive a few at a time)
        self.sequences: dict[tuple, int] = {}  # (run, seed, task, length) -> sequences a cell pools: its bands' samples
        for r in self.rows:
            self.ran.setdefault(r["run"], set()).add(r["seed"])
            key = (r["run"], r["seed"], r["task"], r["length"])
            self.sequences[key] = self.sequences.get(key, 0) + r["samples"]
        self.ran = {run: sorted(seeds) for run, seeds in self.ran.items()}
        self.bands_of = {}
        for r in sorted(self.rows, key=lambda r: r["distance_lo"]):
            key = (r["run"], r["seed"], r["task"], curve_label(r), r["length"])
            self.bands_of.setdefault(key, []).append(r["accuracy"])

    def acc(self, run: str, task: str, length: int, seed: int, label: str | None = None) -> float:
        """Accuracy pooled over the distance bands (a fine-tune under its own scaling unless named)."""
        return self.pooled[(run, seed, task, label or FINE_TUNED.get(run, "none"), length)]

    def bands(self, run: str, task: str, length: int, seed: int, label: str | None = None) -> list[float]:
        """Accuracy in each distance band, nearest the question first."""
        return self.bands_of[(run, seed, task, label or FINE_TUNED.get(run, "none"), length)]

    def learned_at_L(self, run: str, seed: int) -> set[str]:
        return {t for (r, s, t), ok in self.learned.items() if (r, s) == (run, seed) and ok}

    def curve(self, run: str, seed: int, task: str) -> dict[int, float]:
        """Validation accuracy by step (training.json)."""
        return {r["step"]: r["accuracy"] for r in self.training if (r["run"], r["seed"], r["task"]) == (run, seed, task)}


class Search:
    """The recipe search: its table's rows (rows.json) and each run's validation log."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.table = {r["row"]: r for r in json.loads((folder / "rows.json").read_text())}
        self.sequences = validation_sequences(folder.parents[2])  # a validation reading's, per task

    def apart(self, a: float, b: float) -> bool:
        return readings_apart(a, b, self.sequences)

    @functools.cache
    def log(self, name: str) -> dict[int, dict[str, float]]:
        rows = [json.loads(line) for line in (self.folder / f"{name}.jsonl").read_text().splitlines()]
        return {r["step"]: {k.removeprefix("val_acc_"): v for k, v in r.items() if k.startswith("val_acc_")}
                for r in rows}

    def clock(self, row: int) -> tuple[float, int] | None:
        """The row's training minutes and threads by its log's last wall clock (train.py's wall_s); None for the logs
        kept from before train.py recorded it."""
        rows = [json.loads(line) for line in (self.folder / f"{self.table[row]['log']}.jsonl").read_text().splitlines()]
        return (rows[-1]["wall_s"] / 60, rows[-1]["threads"]) if "wall_s" in rows[-1] else None

    def minutes(self, rows) -> str | None:
        """'37 and 38 minutes on one thread' for rows whose logs hold their clock, all on as many threads."""
        clocks = [self.clock(r) for r in rows]
        if None in clocks or len({t for _, t in clocks}) != 1:
            return None
        threads = clocks[0][1]
        return (f"{listed([f'{m:.0f}' for m, _ in clocks])} minutes on "
                f"{'one thread' if threads == 1 else f'{threads} threads'}")

    def final(self, row: int) -> dict[str, float]:
        return self.log(self.table[row]["log"])[self.table[row]["step"]]

    def last_step(self, row: int) -> int:
        return max(self.log(self.table[row]["log"]))

    def never_learned(self, rows, tasks) -> bool:
        return all(a.get(t, 0) < 0.9 for r in rows for a in self.log(self.table[r]["log"]).values() for t in tasks)


@functools.cache
def track(folder: Path) -> Track:
    return Track(folder)


def alibi_slope(head: int, n_heads: int) -> str:
    """ALiBi's slope of a head as a fraction, 2^(-8 (h + 1) / n) (Press et al., section 3; model.positions)."""
    return f"1/{2 ** (8 * (head + 1) // n_heads)}"
