"""The statistics every report uses, in one place: the engine's summary, the what-if
figures, the dashboards and the benchmarks.

Percentiles are nearest-rank: the smallest value with at least `percent` % of the
values at or below it, so every percentile is a value that was observed (a duration a
job really had), p0 is the minimum and p100 the maximum. `quantile` interpolates
linearly instead, for ratios (the estimated-start corrections), where a value between
two observations is meaningful.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence


def nearest_rank(sorted_values: Sequence, percent: float):
    """The `percent` percentile (0..100) of values sorted ascending, by nearest rank;
    None when there are none."""
    if not sorted_values:
        return None
    if not 0 <= percent <= 100:
        raise ValueError(f"percent must be between 0 and 100, not {percent!r}")
    rank = max(1, -(-percent * len(sorted_values) // 100))
    return sorted_values[int(rank) - 1]


def percentile(values: Iterable, percent: float):
    """`nearest_rank` of values in any order."""
    return nearest_rank(sorted(values), percent)


def quantile(sorted_values: Sequence[float], q: float) -> float | None:
    """The q-quantile (0..1) of values sorted ascending, by linear interpolation between
    the two nearest observations; None when there are none."""
    if not sorted_values:
        return None
    if not 0 <= q <= 1:
        raise ValueError(f"q must be between 0 and 1, not {q!r}")
    position = (len(sorted_values) - 1) * q
    low = int(position)
    high = min(low + 1, len(sorted_values) - 1)
    return sorted_values[low] + (sorted_values[high] - sorted_values[low]) * (position - low)


def quartiles(sorted_values: Sequence) -> dict | None:
    """min, q1, p50, q3, p90 and max (nearest rank) of values sorted ascending; None when
    there are none."""
    if not sorted_values:
        return None
    return {
        "min": sorted_values[0],
        "q1": nearest_rank(sorted_values, 25),
        "p50": nearest_rank(sorted_values, 50),
        "q3": nearest_rank(sorted_values, 75),
        "p90": nearest_rank(sorted_values, 90),
        "max": sorted_values[-1],
    }
