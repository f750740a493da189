"""Background work measured, for `/metrics`: every Celery task's runs and duration, and
every scheduling pass's duration, starts and preemptions, with one log line per pass.

Tasks run in workers and passes in workers (or in the web process, eagerly) while the
web serves `/metrics`, so the figures are kept where every process sees them: a hash in
the liveness cache's Redis (REDIS_URL), one HINCRBY / HINCRBYFLOAT per figure, sent in
one pipelined round trip per task or pass. Without Redis (the embedded default) each
process counts in its own memory: `/metrics` then shows the web process's own work
only, and says so (`quota_background_metrics_shared` 0).

The labels are bounded: `task` is the name of a task registered in the Celery app (no
other name reaches a worker's signals), `outcome` one of success, failure, retry (a
coalesced periodic message, ignored or rejected, did no work and is not counted); the
passes are kept by queue id and exported by queue name (the fleet's figures name queues
so too, and a rename carries the history over), only for queues that exist. Durations
are histograms with fixed buckets.

A figure that cannot be written (Redis is down) is lost, with a warning: measuring
never fails the task or the pass it measures.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import nullcontext

from celery.signals import task_postrun, task_prerun
from django.core.cache.backends.redis import RedisCache
from django.db import connection
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from redis.exceptions import RedisError

from fleet.models import JobQueue
from scheduler.liveness import tick_cache

logger = logging.getLogger(__name__)
pass_logger = logging.getLogger("scheduler.pass")

# Celery's final states of a run -> the outcome label; the others (IGNORED, REJECTED)
# are not counted.
TASK_OUTCOMES = {"SUCCESS": "success", "FAILURE": "failure", "RETRY": "retry"}
# Upper bounds in seconds (then +Inf): a sweep takes milliseconds, a run of the process
# executor as long as its job.
TASK_BUCKETS = (0.01, 0.05, 0.25, 1.0, 5.0, 30.0, 300.0)
# A pass over a few jobs takes milliseconds; one over 20,000 waiting jobs about a second.
PASS_BUCKETS = (0.005, 0.025, 0.1, 0.25, 1.0, 2.5, 10.0)

_SEP = "|"  # between a field's parts: no task name or bucket bound contains it


def _field(*parts) -> str:
    return _SEP.join(str(part) for part in parts)


def _bucket(seconds: float, bounds: tuple[float, ...]) -> str:
    """The smallest bound the duration is within, as exported ("+Inf" beyond the last)."""
    return next((repr(bound) for bound in bounds if seconds <= bound), "+Inf")


class RedisCounters:
    """The figures as one hash in the cache's Redis, shared by every process."""

    shared = True

    def __init__(self, cache: RedisCache):
        # One hash per database: installations sharing a Redis (and test databases) keep
        # their figures apart.
        self.key = cache.make_and_validate_key(
            f"background-metrics:{connection.settings_dict['NAME']}"
        )
        self.client = cache._cache.get_client(self.key, write=True)
        breaker = getattr(cache, "breaker", None)  # core.cache's, when it is that cache
        self.guard = breaker.guard if breaker is not None else nullcontext

    def add(self, increments: dict[str, float]) -> None:
        with self.guard(), self.client.pipeline(transaction=False) as pipe:
            for name, amount in increments.items():
                if isinstance(amount, int):
                    pipe.hincrby(self.key, name, amount)
                else:
                    pipe.hincrbyfloat(self.key, name, amount)
            pipe.execute()

    def read(self) -> dict[str, float]:
        with self.guard():
            raw = self.client.hgetall(self.key)
        return {name.decode(): float(value) for name, value in raw.items()}

    def clear(self) -> None:
        with self.guard():
            self.client.delete(self.key)


class ProcessCounters:
    """The figures in this process's memory (no Redis): another process's work is not
    seen."""

    shared = False

    def __init__(self):
        self._values: dict[str, float] = defaultdict(float)
        self._lock = threading.Lock()

    def add(self, increments: dict[str, float]) -> None:
        with self._lock:
            for name, amount in increments.items():
                self._values[name] += amount

    def read(self) -> dict[str, float]:
        with self._lock:
            return dict(self._values)

    def clear(self) -> None:
        with self._lock:
            self._values.clear()


_PROCESS_COUNTERS = ProcessCounters()


def counters() -> RedisCounters | ProcessCounters:
    cache = tick_cache()
    return RedisCounters(cache) if isinstance(cache, RedisCache) else _PROCESS_COUNTERS


def _add(increments: dict[str, float]) -> None:
    try:
        counters().add(increments)
    except RedisError as error:
        logger.warning("background metrics not recorded (%s)", error)


# Tasks: Celery's signals, in the process that runs the task (a worker, or an eager run).

_task_began: dict[str, float] = {}  # task id -> monotonic start; threads run apart ids


def _task_prerun(sender=None, task_id=None, **kwargs) -> None:
    _task_began[task_id] = time.monotonic()


def _task_postrun(sender=None, task_id=None, state=None, **kwargs) -> None:
    began = _task_began.pop(task_id, None)
    outcome = TASK_OUTCOMES.get(state)
    if began is None or outcome is None or sender.name not in sender.app.tasks:
        return
    seconds = time.monotonic() - began
    _add(
        {
            _field("task", sender.name, outcome): 1,
            _field("task_seconds", sender.name): seconds,
            _field("task_le", sender.name, _bucket(seconds, TASK_BUCKETS)): 1,
        }
    )


def measure_tasks() -> None:
    """Count every task this process runs (the scheduler app's `ready()`: every process)."""
    task_prerun.connect(_task_prerun, weak=False, dispatch_uid="metrics-task-prerun")
    task_postrun.connect(_task_postrun, weak=False, dispatch_uid="metrics-task-postrun")


# Passes: one call at the end of each (scheduler.services.passes).


def pass_measured(
    *,
    queue: JobQueue,
    seconds: float,
    read: str,
    waiting: int,
    started: int,
    preempted: int,
    finished: int,
    failed: int,
) -> None:
    """Log the pass's one line (logger `scheduler.pass`, JSON) and count it.

    `read` is what the pass read: "full" (every waiting job: the policy changed, or a
    full pass was asked for) or "heads" (the shares' heads and the new jobs). `waiting`
    is the jobs it read that still wait (all of them on a full read); `preempted` its
    preemption decisions: victims given notice or stopped at once (a capacity cut of a
    job in its notice included)."""
    line = {
        "queue": queue.name,
        "queue_id": queue.pk,
        "duration_ms": round(seconds * 1000, 1),
        "read": read,
        "waiting": waiting,
        "started": started,
        "preempted": preempted,
        "finished": finished,
        "failed": failed,
    }
    pass_logger.info(json.dumps(line, separators=(",", ":")), extra={"scheduling_pass": line})
    _add(
        {
            _field("pass", queue.pk): 1,
            _field("pass_seconds", queue.pk): seconds,
            _field("pass_le", queue.pk, _bucket(seconds, PASS_BUCKETS)): 1,
            _field("pass_started", queue.pk): started,
            _field("pass_preempted", queue.pk): preempted,
        }
    )


# /metrics


def _per_subject(bucket_counts: dict[tuple, float]) -> dict[str, dict[str, float]]:
    """{(task or queue id, bound): count} -> {task or queue id: {bound: count}}."""
    out: dict[str, dict[str, float]] = defaultdict(dict)
    for (subject, bound), count in bucket_counts.items():
        out[subject][bound] = count
    return out


def _histogram(
    family: HistogramMetricFamily,
    labels: list[str],
    bounds: tuple[float, ...],
    per_bucket: dict[str, float],
    total_seconds: float,
) -> None:
    cumulative, buckets = 0.0, []
    for bound in (*map(repr, bounds), "+Inf"):
        cumulative += per_bucket.get(bound, 0.0)
        buckets.append((bound, cumulative))
    family.add_metric(labels, buckets, total_seconds)


class BackgroundCollector:
    """The tasks' and passes' figures, read from where they are kept on each collect
    (one Redis read and one query for the queues' names)."""

    def collect(self) -> Iterator[Metric]:
        store = counters()
        try:
            values = store.read()
        except RedisError as error:
            logger.warning("background metrics not readable (%s)", error)
            return
        parts: dict[str, dict[tuple, float]] = defaultdict(dict)
        for name, value in values.items():
            kind, *rest = name.split(_SEP)
            parts[kind][tuple(rest)] = value
        shared = GaugeMetricFamily(
            "quota_background_metrics_shared",
            "1: the task and pass figures are every process's (Redis); 0: only those of "
            "the process that answered this scrape (no REDIS_URL).",
        )
        shared.add_metric([], int(store.shared))
        yield shared
        yield from self._tasks(parts)
        yield from self._passes(parts)

    def _tasks(self, parts: dict[str, dict[tuple, float]]) -> Iterator[Metric]:
        runs = CounterMetricFamily(
            "quota_task_runs",
            "Runs of the Celery task that ended, by outcome (success, failure, retry).",
            labels=["task", "outcome"],
        )
        for (name, outcome), value in sorted(parts["task"].items()):
            runs.add_metric([name, outcome], value)
        duration = HistogramMetricFamily(
            "quota_task_duration_seconds",
            "How long the task's runs took, whatever their outcome.",
            labels=["task"],
        )
        buckets = _per_subject(parts["task_le"])
        for (name,), seconds in sorted(parts["task_seconds"].items()):
            _histogram(duration, [name], TASK_BUCKETS, buckets[name], seconds)
        yield runs
        yield duration

    def _passes(self, parts: dict[str, dict[tuple, float]]) -> Iterator[Metric]:
        names = dict(JobQueue.objects.values_list("pk", "name"))
        runs = CounterMetricFamily(
            "quota_pass_runs", "Scheduling passes of the queue.", labels=["queue"]
        )
        started = CounterMetricFamily(
            "quota_pass_jobs_started", "Jobs the queue's passes started.", labels=["queue"]
        )
        preempted = CounterMetricFamily(
            "quota_pass_preemptions",
            "Preemptions the queue's passes decided (victims given notice or stopped).",
            labels=["queue"],
        )
        duration = HistogramMetricFamily(
            "quota_pass_duration_seconds",
            "How long the queue's passes took, from taking its lock to the commit.",
            labels=["queue"],
        )
        buckets = _per_subject(parts["pass_le"])
        # Passes of a queue deleted since are not reported.
        queues = sorted(
            (names[int(queue_id)], queue_id)
            for (queue_id,) in parts["pass"]
            if int(queue_id) in names
        )
        for name, queue_id in queues:
            runs.add_metric([name], parts["pass"][(queue_id,)])
            started.add_metric([name], parts["pass_started"].get((queue_id,), 0))
            preempted.add_metric([name], parts["pass_preempted"].get((queue_id,), 0))
            seconds = parts["pass_seconds"].get((queue_id,), 0)
            _histogram(duration, [name], PASS_BUCKETS, buckets[queue_id], seconds)
        yield from (runs, started, preempted, duration)
