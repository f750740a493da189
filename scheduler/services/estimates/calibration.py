"""Start ranges calibrated by the queue's own record of past estimates (issue 26).

A forecast (`engine.eta.estimate_range`) runs the queue forward as it stands: it cannot
see the jobs submitted later that overtake a waiting job by priority or entitlement, so
its starts come early far more often than late. The record says by how much: for each
past estimate, the ratio of the actual wait to the forecast's (p50-run) wait, both
offset by `OFFSET` seconds so that a forecast of "at once" still has a scale,
`(actual + OFFSET) / (forecast + OFFSET)`. A new estimate's p10, p50 and p90 are the
forecast's wait times percentiles of those ratios (split conformal prediction on a log
scale; `LEVELS`: the 5th for the p10, tuned, see there, the 50th and the 90th): if the
next job is like the recent ones, its start falls before the p10 one time in ten,
after the p90 one time in ten.

Which record: the queue's when it has `MIN_RECORDS` outcomes, else the `DEFAULT`
ratios (measured on Philly replay windows that `bench_eta` does not evaluate on); with
`BY_SHARE` a share with that many outcomes of its own would use them (on the tuning
windows that covered worse: a share's few outcomes drift more than the queue's many).
Only the last `WINDOW` outcomes count (the load drifts). An
estimate whose job still waits is an outcome too, censored: its ratio is at least what
its wait so far gives, and leaving it out would bias the record towards short waits
(the long waits are the ones still open); it counts with that lower bound once it has
waited longer than its forecast's p90.

Pure Python on plain figures, so the live queue (records in `EstimateRecord`) and the
benchmark (records of a replay) use the same code.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from engine.stats import quantile

QUANTILES = (0.1, 0.5, 0.9)  # the range's low end, the point estimate, the high end
# The record's quantiles that give them: on the tuning windows the record's own p10
# put 18.5 % of starts before the range (its early starts come in bursts that the
# record learns of late), its p5 15.9 %, with 80.8 % and 84 % inside on the calmer one.
LEVELS = (0.05, 0.5, 0.9)
OFFSET = 60  # seconds (in the queue's clock)
MIN_RECORDS = 30
WINDOW = 1000
RECORD_ROWS = 20 * WINDOW  # the latest estimates read of a queue's record at most
BY_SHARE = False  # True: a share with enough outcomes is calibrated by its own

# Ratios at p10 / p50 / p90 when a queue has no record yet: measured on the Philly
# windows bench_eta tunes on (TUNE_WINDOWS), none of those it evaluates on.
DEFAULT = (0.23, 0.97, 2.13)


def label(q: float) -> str:
    return f"p{round(q * 100)}"


RANGE_LABEL = f"{label(QUANTILES[0])}–{label(QUANTILES[2])}"


@dataclass(frozen=True)
class Outcome:
    """One past estimate: its group (share), the forecast's wait (p50 run; None: it
    would never start) and the actual wait, or, while the job waits, how long it has
    waited so far (`open`)."""

    group: str
    forecast: int | None
    waited: int
    open: bool = False
    forecast_high: int | None = None  # the forecast's p90 run


def ratio(forecast: int, actual: float) -> float:
    return (max(0.0, actual) + OFFSET) / (max(0, forecast) + OFFSET)


@dataclass(frozen=True)
class Calibration:
    """The ratios at QUANTILES, and where they come from ("share", "queue", "default")
    with how many outcomes."""

    factors: tuple[float, float, float] = DEFAULT
    basis: str = "default"
    samples: int = 0

    def waits(self, forecast: int | None) -> tuple[int | None, int | None, int | None]:
        """The calibrated p10, p50, p90 waits of a forecast's wait (None: never)."""
        if forecast is None:
            return None, None, None
        scale = max(0, forecast) + OFFSET
        low, mid, high = (max(0, round(scale * factor - OFFSET)) for factor in self.factors)
        return low, max(low, mid), max(low, mid, high)


NO_RECORD = Calibration()


def counted(outcome: Outcome) -> float | None:
    """The outcome's ratio as the record counts it (None: not yet)."""
    if outcome.forecast is None:
        return None
    if outcome.open:
        high = outcome.forecast if outcome.forecast_high is None else outcome.forecast_high
        if outcome.waited <= max(outcome.forecast, high):
            return None
    return ratio(outcome.forecast, outcome.waited)


def calibration_of(ratios: Sequence[float], basis: str) -> Calibration | None:
    if len(ratios) < MIN_RECORDS:
        return None
    values = sorted(ratios[-WINDOW:])
    factors = tuple(quantile(values, level) for level in LEVELS)
    return Calibration(factors, basis, len(values))  # type: ignore[arg-type]


@dataclass(frozen=True)
class Calibrations:
    by_group: dict[str, Calibration]
    queue: Calibration

    def of(self, group: str) -> Calibration:
        return self.by_group.get(group, self.queue)


def calibrations(outcomes: Iterable[Outcome]) -> Calibrations:
    """The calibration of each group and of the queue from its outcomes, oldest first."""
    by_group: dict[str, list[float]] = {}
    everything: list[float] = []
    for outcome in outcomes:
        value = counted(outcome)
        if value is None:
            continue
        by_group.setdefault(outcome.group, []).append(value)
        everything.append(value)
    queue = calibration_of(everything, "queue") or NO_RECORD
    found = {}
    for group, values in by_group.items() if BY_SHARE else ():
        calibration = calibration_of(values, "share")
        if calibration is not None:
            found[group] = calibration
    return Calibrations(found, queue)


# -- measured coverage ------------------------------------------------------------------------


@dataclass(frozen=True)
class Coverage:
    """Where actual starts fell against their ranges: before, inside, after."""

    before: int = 0
    inside: int = 0
    after: int = 0

    @property
    def n(self) -> int:
        return self.before + self.inside + self.after

    def share(self, part: str) -> float | None:
        return getattr(self, part) / self.n if self.n else None


def where(actual: float, low: float | None, high: float | None) -> str:
    """ "before", "inside" or "after" the range [low, high] (None low: it would never
    start, so any start is before; None high: no end)."""
    if low is None or actual < low:
        return "before"
    if high is not None and actual > high:
        return "after"
    return "inside"


def coverage_of(triples: Iterable[tuple[float, float | None, float | None]]) -> Coverage:
    counts = {"before": 0, "inside": 0, "after": 0}
    for actual, low, high in triples:
        counts[where(actual, low, high)] += 1
    return Coverage(**counts)


# -- the record of a replay (bench_eta) --------------------------------------------------------


@dataclass(frozen=True)
class Made:
    """An estimate made in a replay: when, its group, the forecast's waits (p50 and p90
    runs), and the wait that followed."""

    at: int
    group: str
    forecast: int | None
    forecast_high: int | None
    actual: int


def replayed(estimates: Sequence[Made]) -> list[Calibration]:
    """The calibration each estimate would have had from the record as known when it was
    made (the outcomes of earlier estimates whose jobs had started by then, in the order
    they started, then the still-open ones as waited so far): what the live queue does
    (`record.queue_calibrations`), in a replay."""
    order = sorted(range(len(estimates)), key=lambda i: (estimates[i].at, i))
    found: list[Calibration] = [NO_RECORD] * len(estimates)
    made: list[Made] = []
    for i in order:
        now = estimates[i].at
        known = []
        still = []
        for other in made[-RECORD_ROWS:]:
            end = other.at + other.actual
            if end <= now:
                known.append((end, Outcome(other.group, other.forecast, other.actual)))
            else:
                still.append(
                    Outcome(other.group, other.forecast, now - other.at, True, other.forecast_high)
                )
        known.sort(key=lambda pair: pair[0])
        found[i] = calibrations([outcome for _, outcome in known] + still).of(estimates[i].group)
        made.append(estimates[i])
    return found
