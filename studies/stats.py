"""95% intervals over independent units, for the tables and values of the study pages.

An accuracy over n sequences: Wilson's score interval (Wilson 1927), which stays inside [0, 1] at 0/n and n/n. A mean
over units (books, seeds, runs): Student's t interval. A difference of two means measured on the same units (two
methods on the same books or seeds): the t interval of the paired differences. Two results differ only where their
intervals are apart (`apart`)."""
from __future__ import annotations

import math
import statistics

Z = 1.959964  # the normal's 97.5% point
T975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262, 10: 2.228,
        11: 2.201, 12: 2.179, 14: 2.145, 15: 2.131, 19: 2.093, 20: 2.086, 24: 2.064, 29: 2.045, 30: 2.042}


def wilson(successes: float, n: int) -> tuple[float, float]:
    """The 95% interval of a proportion successes / n."""
    if n <= 0:
        raise ValueError("an interval needs at least one unit")
    p = successes / n
    centre = (p + Z * Z / (2 * n)) / (1 + Z * Z / n)
    half = Z * math.sqrt(p * (1 - p) / n + Z * Z / (4 * n * n)) / (1 + Z * Z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def t_quantile(df: int) -> float:
    """Student's t 97.5% point for df degrees of freedom (the nearest tabled df below; the normal past 30)."""
    if df > 30:
        return Z + 2.4 / df  # within 0.2% of the exact point for df > 30
    return T975[max(d for d in T975 if d <= df)]


def mean_interval(values: list[float]) -> tuple[float, float, float]:
    """(mean, low, high): the mean of independent units and its 95% t interval (low = high = mean for one unit)."""
    mean = statistics.fmean(values)
    if len(values) < 2:
        return mean, mean, mean
    half = t_quantile(len(values) - 1) * statistics.stdev(values) / math.sqrt(len(values))
    return mean, mean - half, mean + half


def paired_interval(a: list[float], b: list[float]) -> tuple[float, float, float]:
    """The mean of a - b over the same units and its 95% interval."""
    if len(a) != len(b):
        raise ValueError("paired units differ in number")
    return mean_interval([x - y for x, y in zip(a, b)])


def apart(first: tuple[float, float], second: tuple[float, float]) -> bool:
    """Two intervals (low, high) that do not overlap."""
    return first[1] < second[0] or second[1] < first[0]


def above_zero(interval: tuple[float, float, float]) -> bool:
    """A (mean, low, high) interval lying wholly above 0."""
    return interval[1] > 0


def below_zero(interval: tuple[float, float, float]) -> bool:
    return interval[2] < 0
