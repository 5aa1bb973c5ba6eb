"""Sentences of a report rendered from its rows: numbers formatted alike everywhere, paragraphs wrapped alike, and each
comparative sentence written only while the rows make it true (`claim`), so that `make reports` stops at a sentence its
data no longer supports instead of printing it."""
from __future__ import annotations

import textwrap

WIDTH = 120  # the reports' line length


class FalseClaim(Exception):
    """A comparative sentence whose predicate the rows no longer satisfy."""


def claim(holds: bool, sentence: str) -> str:
    """`sentence` while `holds` (its predicate over the rows); else FalseClaim naming the sentence."""
    if not holds:
        raise FalseClaim(f"the rows no longer support: {sentence!r}: reword it (render/) or find out what changed")
    return sentence


def paragraph(*sentences: str) -> str:
    """Sentences joined and wrapped at the reports' width, links and code never broken."""
    return textwrap.fill(" ".join(s for s in sentences if s), WIDTH, break_long_words=False, break_on_hyphens=False)


def bullet(*sentences: str) -> str:
    """A list item: sentences joined and wrapped like a paragraph, its lines after the first indented by two."""
    return textwrap.fill(" ".join(s for s in sentences if s), WIDTH, initial_indent="- ", subsequent_indent="  ",
                         break_long_words=False, break_on_hyphens=False)


def percent(a: float, b: float) -> str:
    """How far a lies from b, in whole percent of b, without a sign ("8%")."""
    return f"{abs(100 * (a / b - 1)):.0f}%"


def number(n: float) -> str:
    """A count with thousands separators (8,192)."""
    return f"{n:,.0f}"


def span(values, digits: int = 0, sep: str = "-") -> str:
    """A range of values as the pages write it: the smallest and the largest, rounded ("30-43", "1.85 to 1.90")."""
    return f"{min(values):.{digits}f}{sep}{max(values):.{digits}f}"


def seeds_named(which: list[int]) -> str:
    """seed 3, seeds 1, 2 and 4."""
    return f"seed{'s' if len(which) > 1 else ''} {listed([str(s) for s in which])}" if which else "no seed"


def named(items: list[str]) -> str:
    """a, b and c; or "none of them"."""
    return listed(items) if items else "none of them"


def listed(items: list[str]) -> str:
    """a, b and c."""
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]
