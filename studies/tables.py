"""Tables the study pages share: perplexity by length from eval.extrapolation's rows, each cell the mean over seeds with
its 95% t interval over seeds (runs differ more than windows do here), rows named as the page names them."""
from __future__ import annotations

from pathlib import Path

from eval.results import ruler
from eval.results.rows import curve_label, curves, previous_rows
from studies.stats import mean_interval


def grid(head: list[str], lines: list[list[str]], left: int = 1) -> str:
    """A markdown table, its first `left` columns aligned left and the others right."""
    return "\n".join(["| " + " | ".join(head) + " |", "|" + "---|" * left + "---:|" * (len(head) - left)]
                     + ["| " + " | ".join(line) + " |" for line in lines])


def trained_tokens(train: dict) -> int:
    """The tokens a fine-tune's train section sees: steps x window x batch x accumulation."""
    return train["max_steps"] * train["seq_len"] * train["batch_size"] * train["grad_accum"]


def ppl_rows(folder: Path) -> list[dict]:
    return previous_rows(folder / "results.json", "eval.extrapolation", "ppl")


def curve(rows: list[dict], run: str, label: str) -> dict[int, list[dict]]:
    """{length: [row per seed]} of one run under one scaling label (eval.results.rows.curve_label)."""
    (found,) = [c for (r, _, lab, _), c in curves(rows).items() if (r, lab) == (run, label)]
    return found


def cell(values: list[float], digits: int, lowest: float | None = None) -> str:
    """The mean and its 95% t interval over the units of `values`, the interval cut at `lowest` (a share's 0)."""
    mean, low, high = mean_interval(values)
    low = low if lowest is None else max(low, lowest)
    if len(values) < 2:
        return f"{mean:.{digits}f}"
    between = " to " if low < 0 else "-"  # "-41.1-1840.6" would read as a range from a negative to a negative
    return f"{mean:.{digits}f} ({low:.{digits}f}{between}{high:.{digits}f})"


def ppl_table(folder: Path, shown: list[tuple[str, str, str, str]], digits: int = 1) -> str:
    """One line per (run, scaling label, run as the page names it, scaling as the page names it): the mean
    perplexity over seeds at each multiple of L and its 95% interval over seeds."""
    rows = ppl_rows(folder)
    L = min(r["train_length"] for r in rows)
    lengths = sorted({r["length"] for r in rows})
    lines = []
    for run, label, name, scaling in shown:
        by_length = curve(rows, run, label)
        values = [[r["ppl"] for r in by_length.get(n, [])] for n in lengths]
        lines.append([name, scaling] + ["n/a" if not v or None in v else cell(v, digits) for v in values])
    return grid(["run", "scaling", *[f"{n // L}x" for n in lengths]], lines, left=2)


def context_use_rows(folder: Path) -> list[dict]:
    """eval.context_use's rows of every split measured under `folder` (folder/SPLIT/results.json)."""
    return [r for path in sorted(folder.glob("*/results.json"))
            for r in previous_rows(path, "eval.context_use", "context_tokens")]


def losses_by_book(rows: list[dict], label: str) -> dict[str, dict[int, float]]:
    """{book: {c: the loss of its targets with c tokens of context}} of one variant (eval.results.rows.curve_label);
    a book's spans are averaged first (a book is the unit)."""
    spans: dict[str, dict[int, list[float]]] = {}
    for r in rows:
        if curve_label(r) == label and r["loss"] is not None:
            spans.setdefault(f"{r['split']}/{r['document']}", {}).setdefault(r["context_tokens"], []).append(r["loss"])
    return {book: {c: sum(v) / len(v) for c, v in by_c.items()} for book, by_c in spans.items()}


def gains(rows: list[dict], label: str, short: int, long: int) -> list[float]:
    """Per book, the loss with `short` tokens of context minus the loss with `long` (> 0: the context between helps),
    over the books measured at both."""
    return [b[short] - b[long] for b in losses_by_book(rows, label).values() if short in b and long in b]


def below_floor(rows: list[dict], label: str, long: int, floor: tuple[list[dict], str, int]) -> list[float]:
    """Per book, the floor's loss (its rows, label and c: a model reading nothing past L) minus the loss with `long`
    tokens of context (> 0: the long context does better than the floor), over the books measured at both."""
    below = losses_by_book(*floor[:2])
    return [below[book][floor[2]] - b[long] for book, b in losses_by_book(rows, label).items()
            if long in b and floor[2] in below.get(book, {})]


def key_shares(rows: list[dict], label: str) -> list[float]:
    """Per book, the share (%) of its target tokens whose log-probability rises by the rows' margin or more from the
    short context to the long (LongPPL's key tokens, Fang et al., arXiv 2410.23771), where the rows have both."""
    spans: dict[str, dict[int, float]] = {}
    for r in rows:
        if curve_label(r) == label and r.get("key_share") is not None:
            spans.setdefault(f"{r['split']}/{r['document']}", {})[r["span"]] = 100 * r["key_share"]
    return [sum(v.values()) / len(v) for v in spans.values()]


def context_use_table(shown: list[tuple], contexts: list[int], spans: list[tuple[int, int]], digits: int = 3) -> str:
    """One line per (its name on the page, rows, the variant's label in them, its floor or None) measured at all: the
    books, the mean loss of the same targets with each c of `contexts`, for each (short, long) of `spans` the gain from
    short to long tokens of context (paired: the same book's targets), and the gain at the longest c over the floor
    (`below_floor`), and the share of key tokens (`key_shares`), each with its 95% t interval over books."""
    floors = any(floor for *_, floor in shown)
    keys = any(key_shares(rows, label) for _, rows, label, _ in shown)
    heads = [f"c = {c:,}" for c in contexts] + [f"gain {a:,} to {b:,}" for a, b in spans]
    heads += [f"gain at {contexts[-1]:,} over the floor"] if floors else []
    heads += ["key tokens, %"] if keys else []
    lines = []
    for name, rows, label, floor in shown:
        books = losses_by_book(rows, label)
        if not books:
            continue
        cells = [cell(v, digits) if (v := [b[c] for b in books.values() if c in b]) else "n/a" for c in contexts]
        cells += [cell(g, digits) if (g := gains(rows, label, a, b)) else "n/a" for a, b in spans]
        if floors:
            over = floor and below_floor(rows, label, contexts[-1], floor)
            cells.append(cell(over, digits) if over else "n/a")
        if keys:
            cells.append(cell(share, 1, lowest=0.0) if (share := key_shares(rows, label)) else "n/a")
        lines.append([name, str(len(books)), *cells])
    return grid(["model or method", "books", *heads], lines)

def nats(interval: tuple[float, float, float], rise: bool = False) -> str:
    """A gain (mean, low, high) in nats with its 95% interval; `rise`: written as the rise of the loss, its negation."""
    mean, low, high = (-interval[0], -interval[2], -interval[1]) if rise else interval
    sign = "" if rise else "+"
    return f"{mean:{sign}.3f} nats (95% interval {low:{sign}.3f} to {high:{sign}.3f})"


def ruler_means(rows: list[dict], run: str, scaling: str) -> tuple[dict, dict[int, float]]:
    """One line of eval.ruler's rows: its cells by task and length, and its mean over tasks by length ({} if none)."""
    by_task = ruler.scores([r for r in rows if "scores" in r]).get((run, scaling), {})
    return by_task, ruler.mean_by_length(by_task) if by_task else {}


def ruler_table(rows: list[dict], shown: list[tuple[str, str, str]]) -> str:
    """One line per (its name on the page, run, scaling label) of eval.ruler's rows: the mean over tasks at each length
    measured (RULER's own summary; each task's cell, with its Wilson interval over trials, is in the rows' results.md)
    and the two effective lengths of eval.results.ruler."""
    lengths = sorted({r["length"] for r in rows})
    lines = []
    for name, run, scaling in shown:
        by_task, means = ruler_means(rows, run, scaling)
        if not by_task:
            continue
        absolute, relative = ruler.effective_lengths(means)
        lines.append([name, str(len(by_task)), *[f"{means[n]:.1f}" if n in means else "-" for n in lengths],
                      ruler.named(absolute), ruler.named(relative)])
    return grid(["model", "tasks", *[f"{n:,}" for n in lengths], "effective length (>= 85.6)",
                 "effective length (>= 85.6% of the shortest)"], lines)
