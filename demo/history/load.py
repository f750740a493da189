"""Write a simulation's result as the live scheduler writes it: Job and JobEvent rows.

`result_load` turns a `simulate` result into Job and JobEvent rows (bulk insert): the
same event rows the live scheduler appends (scheduler.services.passes / jobs): type,
cause, `by`, `borrowed`, the attempt number, the lost work of each preemption in
`detail`, a PRIORITY_CHANGED note for each `set_priority` action; and the same counters
on Job. Scenario second `t` is the instant `origin + t`, one compute second per second
(the speed of a real queue), so work figures and durations agree.
"""

from __future__ import annotations

import datetime as dt
import itertools
import time
from collections.abc import Iterable
from dataclasses import dataclass

from django.db import connection, models, transaction
from django.db.models import Max

from engine import SimulationResult
from engine.types import JobSpec, Scenario, SetPriority, ShareSpec
from engine.work import checkpointed, run_progress
from fleet.models import (
    CapacityLimit,
    InstanceType,
    Job,
    JobEvent,
    JobQueue,
    QueueCapacity,
    QuotaShare,
    Team,
)

_BATCH = 5000


@dataclass
class LoadSummary:
    jobs: int = 0
    events: int = 0
    dropped: int = 0
    seconds: float = 0.0


@dataclass
class _Track:
    """A job's work model while its events are replayed (rule 8, as the live scheduler)."""

    attempt: int = 0
    started_at: int = 0
    overhead: int = 0
    saved: int = 0
    runnable_since: int = 0
    first_started_at: int | None = None
    last_started_at: int | None = None
    start_seq: int = 0
    borrowed: bool = False
    running: bool = False
    # A notice under way (spec v2): whether the job saves its progress on it.
    saves: bool = False
    # Progress when the job ended FAILED: a job terminated mid-run keeps the work of
    # its last run (as scheduler.services.jobs.job_terminate writes it), not only its
    # last checkpoint.
    failed_progress: int | None = None


def _instant(origin: dt.datetime, seconds: int) -> dt.datetime:
    return origin + dt.timedelta(seconds=seconds)


def result_load(
    *,
    scenario: Scenario,
    result: SimulationResult,
    queue: JobQueue,
    shares: dict[str, QuotaShare],
    instance_types: dict[str, InstanceType],
    origin: dt.datetime,
    name_prefix: str = "",
    until: dt.datetime | None = None,
    workload_classes: dict[str, str] | None = None,
) -> LoadSummary:
    """Write the jobs and events of `result` (a run of `scenario`) on `queue`.

    `shares` and `instance_types` map the scenario's names to rows. With `until`, only
    jobs that ended before it are written (with all their events), so no replayed job
    is left live for the real scheduler; without it every job is written, a job that
    never finished staying RUNNABLE with its reason. `workload_classes` names the
    workload class of each share's jobs (by scenario share name), copied onto them as
    a submission does.

    A v2 result (interruption contracts) is written to the contract the live scheduler
    writes: a PREEMPTED with notice carries `grace_until` and `saves`, its STOPPED the
    same cause and `by` with `lost_work` and `saved_on_notice`; a STARTED that ended a
    reclaim episode (spec V12) carries its length as `reclaim_wait`.
    """
    workload_classes = workload_classes or {}
    started = time.perf_counter()
    outcomes = {job.id: job for job in result.jobs}
    limit = None if until is None else (until - origin).total_seconds()
    kept = {
        job_id
        for job_id, outcome in outcomes.items()
        if limit is None or (outcome.finished_at is not None and outcome.finished_at < limit)
    }
    summary = LoadSummary(dropped=len(outcomes) - len(kept))
    events = _EventRows(scenario=scenario, result=result, kept=kept, origin=origin)
    events.replay(result.events)
    order = sorted(kept, key=lambda job_id: (outcomes[job_id].submitted_at, job_id))
    jobs = [
        Job(
            queue=queue,
            share=shares[events.specs[job_id].share],
            name=f"{name_prefix}{job_id}",
            priority=events.priority[job_id],
            instance_type=instance_types[events.specs[job_id].instance_type],
            workload_class=workload_classes.get(events.specs[job_id].share, ""),
            **_job_record(
                scenario, events.specs[job_id], outcomes[job_id], events.tracks[job_id], origin
            ),
        )
        for job_id in order
    ]
    _write(queue, shares, origin, name_prefix, jobs, events.rows)
    summary.jobs = len(jobs)
    summary.events = len(events.rows)
    summary.seconds = time.perf_counter() - started
    return summary


class _EventRows:
    """The JobEvent rows of a result's kept jobs, in the order they happened, with each
    job's work model (its track) and priority as its events and the scenario's
    `set_priority` actions leave them."""

    def __init__(self, *, scenario: Scenario, result: SimulationResult, kept: set[str], origin):
        self.specs = {job.id: job for job in scenario.jobs}
        self.kept, self.origin = kept, origin
        self.tracks = {job_id: _Track() for job_id in kept}
        # Each start that ended a reclaim episode (spec V12), with the episode's length.
        self.reclaim_waits = {
            (job_id, start): start - begin for job_id, begin, start in result.reclaim_episodes
        }
        # (t, job id, type, cause, by, borrowed, attempt, detail), in the order they happened.
        self.rows: list[tuple] = []
        self.priority = {job_id: self.specs[job_id].priority for job_id in kept}
        priority_actions = sorted(
            (
                (action.at, index, action)
                for index, action in enumerate(scenario.actions)
                if isinstance(action, SetPriority) and action.job in kept
            ),
            key=lambda item: (item[0], item[1]),
        )
        self.pending = list(reversed(priority_actions))
        self.start_seq = 0
        self.live: set[str] = set()

    def replay(self, events: Iterable) -> None:
        for event in events:
            # Spec rule 9: at one instant, finishes come before actions, actions before the rest.
            self._flush_actions(event.t, inclusive=event.type != "SUCCEEDED")
            if event.job in self.kept:
                self._event(event)
        self._flush_actions(10**18, inclusive=True)

    def _flush_actions(self, before_t: int, inclusive: bool) -> None:
        pending, priority = self.pending, self.priority
        while pending and (pending[-1][0] < before_t or (inclusive and pending[-1][0] == before_t)):
            at, _, action = pending.pop()
            if action.job not in self.live:
                priority[action.job] = action.priority
                continue
            self.rows.append(
                (
                    at,
                    action.job,
                    JobEvent.Type.PRIORITY_CHANGED,
                    "",
                    None,
                    False,
                    self.tracks[action.job].attempt,
                    {"from": priority[action.job], "to": action.priority},
                )
            )
            priority[action.job] = action.priority

    def _event(self, event) -> None:
        track = self.tracks[event.job]
        spec = self.specs[event.job]
        detail: dict = {}
        if event.type == "SUBMITTED":
            track.runnable_since = event.t
            self.live.add(event.job)
            # The dashboard reads these jobs' work figures at one compute second per
            # second, whatever the queue's executor does with live jobs.
            detail = {"replayed": True}
        elif event.type in ("SUCCEEDED", "FAILED"):
            self.live.discard(event.job)
            _ended(event, track, spec)
        elif event.type == "STARTED":
            detail = self._started(event, track, spec)
        elif event.type == "PREEMPTED" and event.grace_until is not None:
            # Notice (spec V6): the job runs on, holding its capacity, until STOPPED.
            track.saves = (
                spec.checkpoint_on_notice is not None and spec.checkpoint_on_notice <= spec.grace
            )
            detail = {
                "grace_until": _instant(self.origin, event.grace_until).isoformat(),
                "saves": track.saves,
            }
        elif event.type in ("STOPPED", "PREEMPTED"):
            detail = _interrupted(event, track, spec)
        by = event.by if event.type in ("PREEMPTED", "STOPPED") and event.by in self.kept else None
        self.rows.append(
            (
                event.t,
                event.job,
                event.type,
                event.cause or "",
                by,
                bool(event.borrowed) if event.type == "STARTED" else False,
                track.attempt,
                detail,
            )
        )

    def _started(self, event, track: _Track, spec: JobSpec) -> dict:
        track.attempt += 1
        if track.first_started_at is None:
            track.first_started_at = event.t
            track.overhead = 0
        else:
            track.overhead = spec.restart_overhead
        track.started_at = event.t
        track.last_started_at = event.t
        track.start_seq = self.start_seq
        track.borrowed = bool(event.borrowed)
        track.running = True
        self.start_seq += 1
        wait = self.reclaim_waits.get((event.job, event.t))
        return {} if wait is None else {"reclaim_wait": wait}


def _progress(event, track: _Track, spec: JobSpec) -> int:
    """The job's progress at `event`, from its last start."""
    return run_progress(
        saved=track.saved,
        elapsed=event.t - track.started_at,
        overhead=track.overhead,
        duration=spec.duration,
    )


def _ended(event, track: _Track, spec: JobSpec) -> None:
    if event.type == "FAILED":
        track.failed_progress = _progress(event, track, spec) if track.running else track.saved
    track.running = False


def _interrupted(event, track: _Track, spec: JobSpec) -> dict:
    """A run's end by preemption at once (PREEMPTED) or at the end of its notice (STOPPED):
    the work it keeps, and what it lost."""
    progress = _progress(event, track, spec)
    if event.type == "PREEMPTED":
        saved = checkpointed(progress, spec.checkpoint_interval)
        detail = {"lost_work": progress - saved, "resumes_from": saved}
    else:
        # A capacity cut during notice stops the job before its save (V10.1).
        saved_on_notice = track.saves and event.cause != "capacity_change"
        saved = progress if saved_on_notice else checkpointed(progress, spec.checkpoint_interval)
        detail = {
            "lost_work": progress - saved,
            "saved_on_notice": saved_on_notice,
            "resumes_from": saved,
        }
        track.saves = False
    track.saved = saved
    track.running = False
    track.runnable_since = event.t
    return detail


def _job_record(scenario: Scenario, spec: JobSpec, outcome, track: _Track, origin) -> dict:
    """A replayed job's state, times, work and counters, as Job fields."""
    retries = spec.preemption_retries
    if retries is None:
        retries = scenario.queue.default_preemption_retries
    state = outcome.state
    if state == "SUCCEEDED":
        progress = spec.duration
    elif track.failed_progress is not None:
        progress = track.failed_progress
    else:
        progress = track.saved
    return {
        "instances": spec.instances,
        "expected_duration": spec.duration,
        "checkpoint_interval": spec.checkpoint_interval,
        "restart_overhead": spec.restart_overhead,
        "preemption_retries": retries,
        "state": state,
        "reason": outcome.reason or "",
        "submitted_at": _instant(origin, outcome.submitted_at),
        "runnable_since": (_instant(origin, track.runnable_since) if state == "RUNNABLE" else None),
        "first_started_at": (
            None if outcome.first_started_at is None else _instant(origin, outcome.first_started_at)
        ),
        "started_at": (
            None if track.last_started_at is None else _instant(origin, track.last_started_at)
        ),
        "start_seq": track.start_seq,
        "finished_at": (
            None if outcome.finished_at is None else _instant(origin, outcome.finished_at)
        ),
        "attempt": track.attempt,
        "progress": progress,
        "checkpointed": track.saved if state != "SUCCEEDED" else spec.duration,
        "preemptions": outcome.preemptions,
        "lost_work": outcome.lost_work,
        "restart_overhead_spent": outcome.restart_overhead,
        "waiting_time": outcome.waiting_time,
        "ran_borrowed": outcome.ran_borrowed,
        "min_runtime_reclaim": spec.min_runtime_reclaim,
        "min_runtime_preempt": spec.min_runtime_preempt,
        "grace": spec.grace,
        "checkpoint_on_notice": spec.checkpoint_on_notice,
        "notice_time": outcome.notice_time,
        "protected_blocks": outcome.protected_blocks,
    }


def _write(queue, shares, origin, name_prefix: str, jobs: list[Job], rows: list[tuple]) -> None:
    """The jobs and their event rows, inserted in bulk; the shares dated from `origin`."""
    with transaction.atomic():
        # The history says these shares existed from its first instant.
        QuotaShare.objects.filter(
            pk__in=[share.pk for share in shares.values()], created_at__gt=origin
        ).update(created_at=origin)
        # Under the queue's lock (taken by the callers): the queue's jobs above `before`
        # are the ones written here.
        before = Job.objects.filter(queue=queue).aggregate(last=Max("pk"))["last"] or 0
        fields = [field for field in Job._meta.concrete_fields if not field.primary_key]
        _insert(
            Job,
            [field.name for field in fields],
            (tuple(getattr(job, field.attname) for field in fields) for job in jobs),
        )
        named = Job.objects.filter(queue=queue, pk__gt=before).values_list("name", "pk")
        pks = {name[len(name_prefix) :]: pk for name, pk in named}
        _insert(
            JobEvent,
            ["job", "at", "type", "cause", "by", "borrowed", "attempt", "detail"],
            (
                (
                    pks[job_id],
                    _instant(origin, t),
                    kind,
                    cause,
                    pks[by] if by is not None else None,
                    borrowed,
                    attempt,
                    detail,
                )
                for t, job_id, kind, cause, by, borrowed, attempt, detail in rows
            ),
        )


def _insert(model, names: list[str], rows: Iterable[tuple]) -> None:
    """Rows of `model` (the values of its fields `names`, in that order) written with the
    driver's executemany instead of bulk_create. A replay writes hundreds of thousands
    of jobs and events, and bulk_create's per-value preparation of model instances was
    most of `make demo`'s start; here only date-times and JSON are prepared, by their
    own fields. Primary keys are not read back."""
    fields = [model._meta.get_field(name) for name in names]
    kinds = (models.DateTimeField, models.DateField, models.JSONField)
    preparers = [
        column.get_db_prep_save if isinstance(column, kinds) else None for column in fields
    ]
    table = connection.ops.quote_name(model._meta.db_table)
    columns = ", ".join(connection.ops.quote_name(column.column) for column in fields)
    sql = f"INSERT INTO {table} ({columns}) VALUES ({', '.join(['%s'] * len(fields))})"
    rows = iter(rows)
    with connection.cursor() as cursor:
        while batch := list(itertools.islice(rows, _BATCH)):
            cursor.executemany(
                sql,
                [
                    tuple(
                        value if prep is None else prep(value, connection)
                        for prep, value in zip(preparers, row, strict=True)
                    )
                    for row in batch
                ],
            )


def queue_for_scenario(
    *, scenario: Scenario, name: str, gpu_count: int = 1
) -> tuple[JobQueue, dict[str, QuotaShare], dict[str, InstanceType]]:
    """A queue, its teams (one per share) and shares built from a scenario's policy.

    Rows only, no PolicyChange: this is a fixture for tests and the benchmark, not a
    governance change (the demo replays onto the queue seed_demo created)."""
    types = {}
    for type_name in scenario.queue.capacity:
        types[type_name], _ = InstanceType.objects.get_or_create(
            name=type_name, defaults={"gpu_count": gpu_count}
        )
    queue = JobQueue.objects.create(
        name=name,
        default_preemption_retries=scenario.queue.default_preemption_retries,
        runnable_time_limit=scenario.queue.runnable_time_limit,
    )
    QueueCapacity.objects.bulk_create(
        QueueCapacity(queue=queue, instance_type=types[type_name], instances=count)
        for type_name, count in scenario.queue.capacity.items()
    )
    shares = {
        spec.name: share_for_scenario(queue=queue, spec=spec, position=position, types=types)
        for position, spec in enumerate(scenario.shares)
    }
    return queue, shares, types


def share_for_scenario(
    *, queue: JobQueue, spec: ShareSpec, position: int, types: dict[str, InstanceType]
) -> QuotaShare:
    """A share of `queue` built from a scenario's share, its team named after both."""
    team, _ = Team.objects.get_or_create(name=f"{queue.name}-{spec.name}")
    strategy = str(getattr(spec.strategy, "value", spec.strategy))
    share = QuotaShare.objects.create(
        queue=queue,
        team=team,
        name=spec.name,
        strategy=strategy,
        borrow_limit=spec.borrow_limit if strategy == "LEND_AND_BORROW" else None,
        in_share_preemption=spec.in_share_preemption,
        state=QuotaShare.State.ENABLED if spec.enabled else QuotaShare.State.DISABLED,
        position=position,
    )
    CapacityLimit.objects.bulk_create(
        CapacityLimit(share=share, instance_type=types[t], max_instances=n)
        for t, n in spec.capacity_limits.items()
    )
    return share


def job_tables_analyze() -> None:
    """Fresh statistics after a bulk load, so the rollup queries get the right plans
    (PostgreSQL would otherwise plan them for the empty tables it last saw)."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE scheduler_job, scheduler_jobevent")
