"""Estimated start ranges, corrected by history, and the accuracy benchmark of `bench_eta`.

A declared duration is what a submitter said; history says how far off such
declarations run. `Correction` holds the ratio actual / declared at the median and at
the 90th percentile for a group of finished jobs (a job definition, a share, or the
whole queue: the narrowest with enough samples); `estimate_range` runs the forward
simulation of `explain.forecast` twice, with every job's declared duration times the
p50 and then the p90 ratio of its group, and reports each waiting job's start in both
(earlier first). With no history (ratio 1) both are the exact forecast.

`replay_accuracy` is the benchmark: it replays a scenario whose jobs carry declared
durations besides their true ones, and at each submission estimates the submitted
jobs' starts from only what was known at that instant (the snapshot, the declared
durations, the jobs finished so far), beside a naive baseline (declared work ahead in
the share divided by the share's recent throughput), and scores both against the
start the replay then gives.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from .explain import Forecast, Work, capture, forecast
from .stats import quantile
from .types import PendingJob, Scenario, Snapshot

MIN_SAMPLES = 5
# At most this many recent finished jobs of a group count (history drifts).
HISTORY_WINDOW = 200


@dataclass(frozen=True)
class Correction:
    p50: float = 1.0
    p90: float = 1.0
    samples: int = 0
    basis: str = "declared"  # "definition", "share", "queue" or "declared" (no history)


NO_HISTORY = Correction()


def correction_of(ratios: Sequence[float], basis: str) -> Correction | None:
    """The correction a group's ratios give, or None with too few samples."""
    if len(ratios) < MIN_SAMPLES:
        return None
    values = sorted(ratios[-HISTORY_WINDOW:])
    return Correction(quantile(values, 0.5), quantile(values, 0.9), len(values), basis)


def pick_correction(*candidates: Correction | None) -> Correction:
    """The first group with enough history (narrowest first), else the declared durations."""
    for candidate in candidates:
        if candidate is not None:
            return candidate
    return NO_HISTORY


def _scaled(work: Work, ratio: float) -> Work:
    if ratio == 1.0:
        return work
    return Work(
        max(1, round(work.duration * ratio)),
        work.saved,
        work.overhead,
        work.checkpoint_interval,
        work.restart_overhead,
        work.restarted,
    )


@dataclass(frozen=True)
class Range:
    """A start range in the snapshot's clock: p50 and p90 (None: never starts)."""

    p50: int | None
    p90: int | None
    borrowed: bool | None  # whether it would start borrowing (p50 run)


def estimate_range(
    snapshot: Snapshot,
    now: int,
    work: Mapping[str, Work],
    corrections: Mapping[str, Correction],
    *,
    extra: Sequence[tuple[PendingJob, Work]] = (),
    until: Sequence[str] | None = None,
    record: bool = False,
) -> tuple[dict[str, Range], Forecast, Forecast]:
    """Start ranges of the pending (and extra) jobs, and the p50 and p90 forecasts.

    `corrections[job_id]` scales that job's declared duration (absent: NO_HISTORY);
    `record` keeps each run's usage timeline (`explain.extra_start`)."""
    runs = []
    for pick in ("p50", "p90"):
        scaled = {
            job_id: _scaled(w, getattr(corrections.get(job_id, NO_HISTORY), pick))
            for job_id, w in work.items()
        }
        scaled_extra = [
            (job, _scaled(w, getattr(corrections.get(job.id, NO_HISTORY), pick)))
            for job, w in extra
        ]
        runs.append(forecast(snapshot, now, scaled, extra=scaled_extra, until=until, record=record))
    low, high = runs
    ids = [job.id for job in snapshot.pending] + [job.id for job, _ in extra]
    if until is not None:
        ids = list(until)
    ranges = {}
    for job_id in ids:
        a, b = low.starts.get(job_id), high.starts.get(job_id)
        if a is None or b is None:
            first = a if b is None else b
            ranges[job_id] = Range(first, None, low.borrowed.get(job_id))
        else:
            ranges[job_id] = Range(min(a, b), max(a, b), low.borrowed.get(job_id))
    return ranges, low, high


# -- the benchmark --------------------------------------------------------------------


@dataclass
class Sample:
    job: str
    actual_wait: int
    estimate_wait: float | None
    estimate_p90_wait: float | None
    baseline_wait: float | None
    queue_baseline_wait: float | None  # the baseline without the running jobs' remainder
    pending: int
    seconds: float  # time to estimate (both runs)


@dataclass
class Accuracy:
    samples: list[Sample]
    submissions: int
    estimated: int

    def scored(self, min_wait: int) -> list[Sample]:
        return [s for s in self.samples if s.actual_wait >= min_wait]


def score(samples: Sequence[Sample], pick: Callable[[Sample], float | None]) -> tuple[float, float]:
    """(median absolute error in seconds, fraction within +/-25 % of the actual wait)."""
    errors = []
    within = 0
    for sample in samples:
        guess = pick(sample)
        if guess is None:
            errors.append(float("inf"))
            continue
        error = abs(guess - sample.actual_wait)
        errors.append(error)
        if error <= 0.25 * sample.actual_wait:
            within += 1
    if not errors:
        return float("nan"), float("nan")
    return statistics.median(errors), within / len(errors)


def replay_accuracy(
    scenario: Scenario,
    declared: Mapping[str, int],
    *,
    throughput_window: int = 24 * 3600,
    every: int = 1,
) -> Accuracy:
    """Replay and estimate each submitted job's start as known at its submission.

    `declared[job]` is the duration its submitter declared (the scenario's own is the
    truth the replay runs). History: the ratios true / declared of the jobs of the
    same share finished so far (then of the queue). `every` estimates only every n-th
    submission instant (the replay itself is whole)."""

    truth = {job.id: job.duration for job in scenario.jobs}
    size = {job.id: job.instances for job in scenario.jobs}
    share_of = {job.id: job.share for job in scenario.jobs}
    estimates: dict[str, tuple] = {}
    history: dict[str, list[float]] = {}
    queue_history: list[float] = []
    # (finish time, share, instance-seconds) of finished jobs: the share's throughput.
    done: dict[str, list[tuple[int, int]]] = {}
    cursor = [0]
    instants = [0]
    submissions = [0]

    def observe(replay, now: int, submitted) -> None:
        events = replay.events
        for event in events[cursor[0] :]:
            if event.type == "SUCCEEDED":
                job = event.job
                ratio = truth[job] / max(1, declared[job])
                history.setdefault(share_of[job], []).append(ratio)
                queue_history.append(ratio)
                done.setdefault(share_of[job], []).append((event.t, truth[job] * size[job]))
        cursor[0] = len(events)
        submissions[0] += len(submitted)
        instants[0] += 1
        if (instants[0] - 1) % every:
            return
        snapshot, work = replay.state(now)
        targets = [job.id for job in submitted if job.reason is None and job.state == "PENDING"]
        if not targets:
            return
        queue_correction = correction_of(queue_history, "queue")
        per_share = {
            name: pick_correction(correction_of(ratios, "share"), queue_correction)
            for name, ratios in history.items()
        }
        fallback = pick_correction(queue_correction)
        corrections = {job_id: per_share.get(share_of[job_id], fallback) for job_id in work}
        started = time.perf_counter()
        ranges, _, _ = estimate_range(snapshot, now, work, corrections, until=targets)
        spent = time.perf_counter() - started
        baseline = _baseline(snapshot, now, work, done, throughput_window, replay, True)
        queued_only = _baseline(snapshot, now, work, done, throughput_window, replay, False)
        for job_id in targets:
            r = ranges[job_id]
            estimates[job_id] = (
                None if r.p50 is None else r.p50 - now,
                None if r.p90 is None else r.p90 - now,
                baseline.get(job_id),
                queued_only.get(job_id),
                len(snapshot.pending),
                spent / len(targets),
                now,
            )

    result = capture(scenario, observe, durations=declared)
    first_start = {job.id: job.first_started_at for job in result.jobs}
    samples = []
    for job_id, (p50, p90, naive, queued, pending, spent, submitted_at) in estimates.items():
        start = first_start.get(job_id)
        if start is None:
            continue
        samples.append(
            Sample(job_id, start - submitted_at, p50, p90, naive, queued, pending, spent)
        )
    return Accuracy(samples, submissions[0], len(estimates))


def _baseline(snapshot, now, work, done, window, replay, running) -> dict[str, float | None]:
    """Declared instance-seconds ahead in the share (the jobs ahead in its queue, and
    with `running` its running jobs' declared remainder) over the share's
    instance-seconds finished per second in the last `window` (its limit when it
    finished nothing yet)."""
    board = replay.board
    result: dict[str, float | None] = {}
    remaining: dict[str, float] = {}
    for job in snapshot.running if running else ():
        w = work[job.id]
        left = max(0, w.duration - w.saved - (now - job.started_at))
        remaining[job.share] = remaining.get(job.share, 0) + left * job.instances
    for rule in board.policy.shares:
        name = rule.name
        finished = [amount for t, amount in done.get(name, []) if t > now - window]
        rate = sum(finished) / window if finished else 0.0
        if rate <= 0:
            rate = float(max(1, sum(rule.limits.values())))
        ahead = remaining.get(name, 0.0)
        for job in board.queued(rule.index):
            result[job.id] = ahead / rate
            w = work[job.id]
            ahead += max(0, w.duration - w.saved) * job.n
    return result
