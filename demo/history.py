"""Months of real workload for the dashboard: replay the Philly trace through the engine
and write what happened as the live scheduler writes it.

`result_load` turns a `simulate` result into Job and JobEvent rows (bulk insert): the
same event rows the live scheduler appends (scheduler.services.passes / jobs): type,
cause, `by`, `borrowed`, the attempt number, the lost work of each preemption in
`detail`, a PRIORITY_CHANGED note for each `set_priority` action; and the same counters
on Job. Scenario second `t` is the instant `origin + t`, one compute second per second
(the speed of a real queue), so work figures and durations agree.

`seed_history` replays the last `months` full months before `end` on the demo's
`philly` queue, with a plausible record of policy edits, a capacity maintenance
window, and exception requests (filed, approved, denied, revoked) that really act on
the replay: their policy changes are actions of the scenario. Idempotent: a queue that
already has replayed jobs is left alone.
"""

from __future__ import annotations

import datetime as dt
import itertools
import random
import time
from collections.abc import Iterable
from dataclasses import dataclass, field

from django.db import connection, models, transaction
from django.db.models import Max
from django.utils import timezone

from engine import SimulationResult, load_scenario, simulate
from engine.trace import TraceOptions, build_scenario, read_trace, read_vc_sizes
from engine.types import Scenario, SetCapacity, SetPriority, UpdateShare
from engine.work import checkpointed, run_progress
from fleet.locks import lock_queues_named
from fleet.models import (
    CapacityLimit,
    InstanceType,
    Job,
    JobEvent,
    JobQueue,
    QueueCapacity,
    QuotaShare,
    Team,
    UrgencyDefinition,
    WorkloadClass,
)
from governance.models import ExceptionEvent, ExceptionRequest, PolicyChange

HISTORY_PREFIX = "philly-"
HISTORY_REASON = "Recorded history (demo replay of the Philly trace)"
# The busiest stretch of the trace: its first day is mapped to the first replayed month.
TRACE_START = dt.datetime(2017, 10, 2)
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


def result_load(  # noqa: C901
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
    specs = {job.id: job for job in scenario.jobs}
    outcomes = {job.id: job for job in result.jobs}
    limit = None if until is None else (until - origin).total_seconds()
    kept = {
        job_id
        for job_id, outcome in outcomes.items()
        if limit is None or (outcome.finished_at is not None and outcome.finished_at < limit)
    }
    summary = LoadSummary(dropped=len(outcomes) - len(kept))
    priority_actions = sorted(
        (
            (action.at, index, action)
            for index, action in enumerate(scenario.actions)
            if isinstance(action, SetPriority) and action.job in kept
        ),
        key=lambda item: (item[0], item[1]),
    )

    tracks = {job_id: _Track() for job_id in kept}
    # Each start that ended a reclaim episode (spec V12), with the episode's length.
    reclaim_waits = {
        (job_id, start): start - begin for job_id, begin, start in result.reclaim_episodes
    }
    # (t, job id, type, cause, by, borrowed, attempt, detail), in the order they happened.
    rows: list[tuple] = []
    priority = {job_id: specs[job_id].priority for job_id in kept}
    pending = list(reversed(priority_actions))
    start_seq = 0

    live: set[str] = set()

    def flush_actions(before_t: int, inclusive: bool) -> None:
        while pending and (pending[-1][0] < before_t or (inclusive and pending[-1][0] == before_t)):
            at, _, action = pending.pop()
            if action.job not in live:
                priority[action.job] = action.priority
                continue
            rows.append(
                (
                    at,
                    action.job,
                    JobEvent.Type.PRIORITY_CHANGED,
                    "",
                    None,
                    False,
                    tracks[action.job].attempt,
                    {"from": priority[action.job], "to": action.priority},
                )
            )
            priority[action.job] = action.priority

    for event in result.events:
        # Spec rule 9: at one instant, finishes come before actions, actions before the rest.
        flush_actions(event.t, inclusive=event.type != "SUCCEEDED")
        if event.job not in kept:
            continue
        track = tracks[event.job]
        spec = specs[event.job]
        detail: dict = {}
        if event.type == "SUBMITTED":
            track.runnable_since = event.t
            live.add(event.job)
            # The dashboard reads these jobs' work figures at one compute second per
            # second, whatever the queue's executor does with live jobs.
            detail = {"replayed": True}
        elif event.type in ("SUCCEEDED", "FAILED"):
            live.discard(event.job)
            if event.type == "FAILED":
                track.failed_progress = (
                    run_progress(
                        saved=track.saved,
                        elapsed=event.t - track.started_at,
                        overhead=track.overhead,
                        duration=spec.duration,
                    )
                    if track.running
                    else track.saved
                )
            track.running = False
        elif event.type == "STARTED":
            track.attempt += 1
            if track.first_started_at is None:
                track.first_started_at = event.t
                track.overhead = 0
            else:
                track.overhead = spec.restart_overhead
            track.started_at = event.t
            track.last_started_at = event.t
            track.start_seq = start_seq
            track.borrowed = bool(event.borrowed)
            track.running = True
            start_seq += 1
            wait = reclaim_waits.get((event.job, event.t))
            if wait is not None:
                detail = {"reclaim_wait": wait}
        elif event.type == "PREEMPTED" and event.grace_until is not None:
            # Notice (spec V6): the job runs on, holding its capacity, until STOPPED.
            track.saves = (
                spec.checkpoint_on_notice is not None and spec.checkpoint_on_notice <= spec.grace
            )
            detail = {
                "grace_until": _instant(origin, event.grace_until).isoformat(),
                "saves": track.saves,
            }
        elif event.type == "STOPPED":
            progress = run_progress(
                saved=track.saved,
                elapsed=event.t - track.started_at,
                overhead=track.overhead,
                duration=spec.duration,
            )
            # A capacity cut during notice stops the job before its save (V10.1).
            saved_on_notice = track.saves and event.cause != "capacity_change"
            saved = (
                progress if saved_on_notice else checkpointed(progress, spec.checkpoint_interval)
            )
            detail = {
                "lost_work": progress - saved,
                "saved_on_notice": saved_on_notice,
                "resumes_from": saved,
            }
            track.saved = saved
            track.saves = False
            track.running = False
            track.runnable_since = event.t
        elif event.type == "PREEMPTED":
            progress = run_progress(
                saved=track.saved,
                elapsed=event.t - track.started_at,
                overhead=track.overhead,
                duration=spec.duration,
            )
            saved = checkpointed(progress, spec.checkpoint_interval)
            detail = {"lost_work": progress - saved, "resumes_from": saved}
            track.saved = saved
            track.running = False
            track.runnable_since = event.t
        by = event.by if event.type in ("PREEMPTED", "STOPPED") and event.by in kept else None
        rows.append(
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
    flush_actions(10**18, inclusive=True)

    jobs = []
    order = sorted(kept, key=lambda job_id: (outcomes[job_id].submitted_at, job_id))
    for job_id in order:
        spec, outcome, track = specs[job_id], outcomes[job_id], tracks[job_id]
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
        jobs.append(
            Job(
                queue=queue,
                share=shares[spec.share],
                name=f"{name_prefix}{job_id}",
                priority=priority[job_id],
                instance_type=instance_types[spec.instance_type],
                instances=spec.instances,
                expected_duration=spec.duration,
                checkpoint_interval=spec.checkpoint_interval,
                restart_overhead=spec.restart_overhead,
                preemption_retries=retries,
                state=state,
                reason=outcome.reason or "",
                submitted_at=_instant(origin, outcome.submitted_at),
                runnable_since=(
                    _instant(origin, track.runnable_since) if state == "RUNNABLE" else None
                ),
                first_started_at=(
                    None
                    if outcome.first_started_at is None
                    else _instant(origin, outcome.first_started_at)
                ),
                started_at=(
                    None
                    if track.last_started_at is None
                    else _instant(origin, track.last_started_at)
                ),
                start_seq=track.start_seq,
                finished_at=(
                    None if outcome.finished_at is None else _instant(origin, outcome.finished_at)
                ),
                attempt=track.attempt,
                progress=progress,
                checkpointed=track.saved if state != "SUCCEEDED" else spec.duration,
                preemptions=outcome.preemptions,
                lost_work=outcome.lost_work,
                restart_overhead_spent=outcome.restart_overhead,
                waiting_time=outcome.waiting_time,
                ran_borrowed=outcome.ran_borrowed,
                min_runtime_reclaim=spec.min_runtime_reclaim,
                min_runtime_preempt=spec.min_runtime_preempt,
                grace=spec.grace,
                checkpoint_on_notice=spec.checkpoint_on_notice,
                workload_class=workload_classes.get(spec.share, ""),
                notice_time=outcome.notice_time,
                protected_blocks=outcome.protected_blocks,
            )
        )
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
    summary.jobs = len(jobs)
    summary.events = len(rows)
    summary.seconds = time.perf_counter() - started
    return summary


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
    shares = {}
    for position, spec in enumerate(scenario.shares):
        team, _ = Team.objects.get_or_create(name=f"{name}-{spec.name}")
        strategy = str(getattr(spec.strategy, "value", spec.strategy))
        shares[spec.name] = QuotaShare.objects.create(
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
            CapacityLimit(share=shares[spec.name], instance_type=types[t], max_instances=n)
            for t, n in spec.capacity_limits.items()
        )
    return queue, shares, types


# -- any scenario's history (manage.py load_history) ---------------------------------

LOAD_REASON = "Recorded history loaded from scenario {name!r} (load_history)"


class HistoryLoadError(ValueError):
    """A history that cannot be loaded; `field` names what to change."""

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        super().__init__(f"{field}: {message}")


@dataclass
class HistoryLoadSummary:
    queue: str = ""
    created_queue: bool = False
    created_shares: list[str] = field(default_factory=list)
    origin: dt.datetime | None = None
    end: dt.datetime | None = None
    jobs: int = 0
    events: int = 0
    never_finished: int = 0
    policy_changes: int = 0
    months: list[dt.date] = field(default_factory=list)


def _share_spec_document(spec, team_name: str) -> dict:
    strategy = str(getattr(spec.strategy, "value", spec.strategy))
    doc = {
        "name": spec.name,
        "team": team_name,
        "strategy": strategy,
        "in_share_preemption": spec.in_share_preemption,
        "state": QuotaShare.State.ENABLED if spec.enabled else QuotaShare.State.DISABLED,
        "capacity_limits": dict(sorted(spec.capacity_limits.items())),
    }
    if strategy == QuotaShare.Strategy.LEND_AND_BORROW:
        doc["borrow_limit"] = spec.borrow_limit
    return doc


def _same_policy(a: dict, b: dict, keys: tuple[str, ...]) -> bool:
    return all(a.get(key) == b.get(key) for key in keys)


SHARE_KEYS = ("strategy", "capacity_limits", "borrow_limit", "state", "in_share_preemption")


def history_load(
    *,
    scenario: Scenario,
    queue_name: str,
    start: dt.datetime,
    name_prefix: str,
    gpus_per_instance: int = 1,
    now: dt.datetime | None = None,
) -> HistoryLoadSummary:
    """Simulate `scenario` and write its result as the history of queue `queue_name`
    from `start`, with the loader the demo uses (`result_load`); then refresh the
    rollups of every month from `start`'s to `now`'s.

    The queue, its shares and their teams are created when missing (as
    `queue_for_scenario`, with the scenario's first policy). The policy record follows
    the history: where the policy in force at `start` differs from the scenario's, an
    import change at `start` sets the scenario's; each `update_share` and
    `set_capacity` action is an import change at its instant (replayed, not an admin's
    edit: the dashboard's policy edits leave it out); where the scenario's last policy
    differs from the current one, an import change at the history's end brings it back.
    Jobs the scenario never finishes stay RUNNABLE with their reason.
    """
    from governance.dashboards.rollups import rollups_refresh
    from governance.dashboards.selectors.calendar import month_start, next_month
    from governance.dashboards.selectors.reads import policy_in_force

    now = now or timezone.now()
    if start.tzinfo is None:
        raise HistoryLoadError("--start", "give a time zone, such as 2025-03-01T00:00:00Z")
    result = simulate(scenario)
    end = start + dt.timedelta(seconds=result.makespan)
    if end > now:
        raise HistoryLoadError(
            "--start",
            f"the history would end at {end:%Y-%m-%d %H:%M:%S} UTC, after now; start it earlier",
        )
    summary = HistoryLoadSummary(queue=queue_name, origin=start, end=end)
    with transaction.atomic():
        queue = lock_queues_named([queue_name]).get(queue_name)
        if queue is None:
            queue, shares, types = queue_for_scenario(
                scenario=scenario, name=queue_name, gpu_count=gpus_per_instance
            )
            summary.created_queue = True
        else:
            shares, types = _existing_queue(scenario, queue, summary)
        if Job.objects.filter(queue=queue, name__startswith=name_prefix).exists():
            raise HistoryLoadError(
                "--prefix",
                f"queue {queue_name!r} already holds jobs named {name_prefix!r}…; "
                "choose another prefix",
            )
        changes = _history_policy(scenario, queue, shares, start, end, policy_in_force)
        loaded = result_load(
            scenario=scenario,
            result=result,
            queue=queue,
            shares=shares,
            instance_types=types,
            origin=start,
            name_prefix=name_prefix,
        )
        for change_at, change in changes:
            change.save()
            PolicyChange.objects.filter(pk=change.pk).update(created_at=change_at)
        _analyze()
    summary.jobs, summary.events = loaded.jobs, loaded.events
    summary.never_finished = sum(job.finished_at is None for job in result.jobs)
    summary.policy_changes = len(changes)
    # Every month of the span, from the history's start to now: the months after its
    # last event change too (its shares exist from `start`, so their idle capacity counts,
    # and jobs it never finishes still wait), and a month left without figures would be
    # a hole in every trend.
    month = month_start(start.astimezone(dt.UTC).date())
    while month <= now.astimezone(dt.UTC).date():
        rollups_refresh(month=month, now=now)
        summary.months.append(month)
        month = next_month(month)
    return summary


def _existing_queue(scenario: Scenario, queue: JobQueue, summary: HistoryLoadSummary):
    """The queue's shares and types by the scenario's names; missing shares are made."""
    capacity = {cap.instance_type.name: cap.instance_type for cap in queue.capacities.all()}
    for type_name in scenario.queue.capacity:
        if type_name not in capacity:
            raise HistoryLoadError(
                "queue.capacity",
                f"{type_name!r} is not an instance type of queue {queue.name!r} "
                f"(it has {', '.join(sorted(capacity)) or 'none'})",
            )
    shares = {share.name: share for share in queue.shares.select_related("team")}
    position = len(shares)
    for spec in scenario.shares:
        if spec.name in shares:
            continue
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
        position += 1
        CapacityLimit.objects.bulk_create(
            CapacityLimit(share=share, instance_type=capacity[t], max_instances=n)
            for t, n in spec.capacity_limits.items()
        )
        shares[spec.name] = share
        summary.created_shares.append(spec.name)
    return {spec.name: shares[spec.name] for spec in scenario.shares}, capacity


def _history_policy(scenario, queue, shares, start, end, policy_in_force):
    """The PolicyChange rows (unsaved, with their instants) that make the policy record
    say what the scenario's policy was during its history."""
    from fleet.selectors import queue_document, share_document

    reason = LOAD_REASON.format(name=scenario.name)

    def change(at, cause, target, share, before, after):
        return (
            at,
            PolicyChange(
                cause=cause,
                target=target,
                queue=queue,
                share=share,
                object_repr=str(share or queue)[:200],
                before=before,
                after=after,
                reason=reason,
            ),
        )

    changes = []
    docs = {
        spec.name: _share_spec_document(spec, shares[spec.name].team.name)
        for spec in scenario.shares
    }
    for name, doc in docs.items():
        in_force = policy_in_force(share_id=shares[name].pk, at=start)
        if not _same_policy(in_force, doc, SHARE_KEYS):
            changes.append(
                change(
                    start,
                    PolicyChange.Cause.IMPORT,
                    PolicyChange.Target.SHARE,
                    shares[name],
                    in_force,
                    doc,
                )
            )
    capacity = {"capacity": dict(scenario.queue.capacity)}
    in_force = policy_in_force(queue_id=queue.pk, at=start)
    if in_force.get("capacity") != capacity["capacity"]:
        changes.append(
            change(
                start,
                PolicyChange.Cause.IMPORT,
                PolicyChange.Target.QUEUE,
                None,
                in_force,
                capacity,
            )
        )
    for action in scenario.actions:
        at = start + dt.timedelta(seconds=action.at)
        if isinstance(action, UpdateShare):
            name = action.share.name
            after = _share_spec_document(action.share, shares[name].team.name)
            changes.append(
                change(
                    at,
                    PolicyChange.Cause.IMPORT,
                    PolicyChange.Target.SHARE,
                    shares[name],
                    docs[name],
                    after,
                )
            )
            docs[name] = after
        elif isinstance(action, SetCapacity):
            after = {"capacity": dict(action.capacity)}
            changes.append(
                change(
                    at, PolicyChange.Cause.IMPORT, PolicyChange.Target.QUEUE, None, capacity, after
                )
            )
            capacity = after
    for name, doc in docs.items():
        current = share_document(shares[name])
        if not _same_policy(current, doc, SHARE_KEYS):
            changes.append(
                change(
                    end,
                    PolicyChange.Cause.IMPORT,
                    PolicyChange.Target.SHARE,
                    shares[name],
                    doc,
                    current,
                )
            )
    current_capacity = {"capacity": queue_document(queue)["capacity"]}
    if current_capacity["capacity"] != capacity["capacity"]:
        changes.append(
            change(
                end,
                PolicyChange.Cause.IMPORT,
                PolicyChange.Target.QUEUE,
                None,
                capacity,
                current_capacity,
            )
        )
    return changes


# -- the demo's history --------------------------------------------------------------

HISTORY_QUEUE = "philly"
HISTORY_TYPE = "philly.gpu"
# The replayed months ran on today's fleet (demo.organisation sizes it to the trace's
# demand): the jobs a what-if replays ran on the policy it clones, give or take the
# story's edits, maintenance windows and exceptions.
HISTORY_SEED = 2017
CHECKPOINT_INTERVAL = 1800
RESTART_OVERHEAD = 120
# Interruption contracts (spec v2) of some teams' training, as their workload classes
# would give them: the class name copied onto each job, and its contract. The others
# have the standard one (`HISTORY_DEFAULT_CONTRACT`). Borrowers with a contract make a
# lender wait for its capacity: the dashboard's time to reclaim is not 0 s.
HISTORY_DEFAULT_CONTRACT = ("standard-training", {"grace": 60, "checkpoint_on_notice": 30})
HISTORY_CONTRACTS = {
    "vc-6214e9": (
        "checkpointing-training",
        {"min_runtime_reclaim": 600, "grace": 120, "checkpoint_on_notice": 60},
    ),
    "vc-b436b2": ("long-training", {"min_runtime_reclaim": 1800, "grace": 300}),
    "vc-ee9e8c": ("graceful-batch", {"grace": 120, "checkpoint_on_notice": 90}),
    "vc-7f04ca": ("protected-finetune", {"min_runtime_preempt": 900}),
}
HISTORY_CLASS_DESCRIPTIONS = {
    "standard-training": "Training that saves a checkpoint within 30 s of notice.",
    "checkpointing-training": "Protected for 10 minutes after each start; checkpoints "
    "within a minute of notice.",
    "long-training": "Long runs: protected from reclaim for 30 minutes, 5 minutes of notice, "
    "no checkpoint on notice.",
    "graceful-batch": "Batch work given 2 minutes of notice to save and exit.",
    "protected-finetune": "Fine-tuning protected for 15 minutes from in-share preemption.",
}


def history_class(share: str) -> str:
    """The workload class of a replayed share's jobs (its default class on the queue)."""
    return _history_contract(share)[0]


def seed_workload_classes(actor) -> None:
    """The classes whose contracts the replayed history's jobs carry, as an import (it
    applies at once and is recorded, also when policy changes need review)."""
    from governance.policy.workload_classes import workload_class_save

    classes = [HISTORY_DEFAULT_CONTRACT, *HISTORY_CONTRACTS.values()]
    existing = set(WorkloadClass.objects.values_list("name", flat=True))
    for name, contract in classes:
        if name in existing:
            continue
        data = {
            "name": name,
            "description": HISTORY_CLASS_DESCRIPTIONS.get(name, ""),
            "min_runtime_reclaim": 0,
            "min_runtime_preempt": 0,
            "grace": 0,
            "checkpoint_on_notice": None,
            **contract,
        }
        workload_class_save(
            actor=actor,
            data=data,
            reason="Demo: the workload classes of the Philly teams' training.",
            cause=PolicyChange.Cause.IMPORT,
        )


@dataclass
class HistorySummary:
    months: list[dt.date] = field(default_factory=list)
    jobs: int = 0
    events: int = 0
    policy_changes: int = 0
    exceptions: int = 0
    seconds: float = 0.0
    skipped: str = ""


def _month_floor(at: dt.datetime) -> dt.datetime:
    return at.astimezone(dt.UTC).replace(day=1, hour=0, minute=0, second=0, microsecond=0)


def _months_back(month: dt.datetime, count: int) -> dt.datetime:
    for _ in range(count):
        month = (month - dt.timedelta(days=1)).replace(day=1)
    return month


class _History:
    """Builds the timed policy story (scenario actions + the records they leave)."""

    def __init__(self, *, queue, shares, origin, end, rng, admin, lead, owner, urgencies):
        self.queue, self.shares, self.origin, self.end = queue, shares, origin, end
        self.rng, self.admin, self.lead, self.owner = rng, admin, lead, owner
        self.urgencies = urgencies
        self.actions: list[dict] = []
        self.changes: list[tuple[dt.datetime, dict]] = []
        self.requests: list[tuple[dict, list[tuple[dt.datetime, str, str]]]] = []
        self.limits = {
            name: {HISTORY_TYPE: limit} for name, limit in self._current_limits().items()
        }
        self.borrow = {name: share.borrow_limit for name, share in shares.items()}
        self.capacity = sum(limits[HISTORY_TYPE] for limits in self.limits.values())
        self.busy: dict[str, dt.datetime] = {}

    def _current_limits(self) -> dict[str, int]:
        limits = {}
        for name, share in self.shares.items():
            limit = share.limits.filter(instance_type__name=HISTORY_TYPE).first()
            limits[name] = limit.max_instances if limit else 1
        return limits

    def seconds(self, at: dt.datetime) -> int:
        return int((at - self.origin).total_seconds())

    def _share_doc(self, name: str) -> dict:
        share = self.shares[name]
        doc = {
            "name": name,
            "team": share.team.name,
            "strategy": share.strategy,
            "in_share_preemption": share.in_share_preemption,
            "state": share.state,
            "capacity_limits": dict(self.limits[name]),
        }
        if share.strategy == QuotaShare.Strategy.LEND_AND_BORROW:
            doc["borrow_limit"] = self.borrow[name]
        return doc

    def edit_share(self, at, name, *, cause, reason, actor, request=None, reverts=None, **change):
        before = self._share_doc(name)
        if "capacity_limits" in change:
            self.limits[name] = dict(change["capacity_limits"])
        if "borrow_limit" in change:
            self.borrow[name] = change["borrow_limit"]
        self.actions.append(
            {"at": self.seconds(at), "type": "update_share", "share": name, **change}
        )
        record = {
            "cause": cause,
            "reason": reason,
            "actor": actor,
            "target": PolicyChange.Target.SHARE,
            "share": self.shares[name],
            "object_repr": str(self.shares[name]),
            "before": before,
            "after": self._share_doc(name),
            "request": request,
            "reverts": reverts,
        }
        self.changes.append((at, record))
        return record

    def set_capacity(self, at, capacity, *, cause, reason, reverts=None):
        before = {"capacity": {HISTORY_TYPE: self.capacity}}
        self.capacity = capacity
        self.actions.append(
            {"at": self.seconds(at), "type": "set_capacity", "capacity": {HISTORY_TYPE: capacity}}
        )
        record = {
            "cause": cause,
            "reason": reason,
            "actor": self.admin,
            "target": PolicyChange.Target.QUEUE,
            "share": None,
            "object_repr": str(self.queue),
            "before": before,
            "after": {"capacity": {HISTORY_TYPE: capacity}},
            "request": None,
            "reverts": reverts,
        }
        self.changes.append((at, record))
        return record

    def month(self, start: dt.datetime, stop: dt.datetime) -> None:
        rng = self.rng
        span = (stop - start).total_seconds()

        def moment(lo: float, hi: float) -> dt.datetime:
            at = start + dt.timedelta(seconds=int(span * rng.uniform(lo, hi)))
            return at.replace(minute=rng.choice((0, 15, 30, 45)), second=0)

        borrowers = [n for n, s in self.shares.items() if s.strategy == "LEND_AND_BORROW"]
        # Borrow-limit tightening, reverted a week or two later.
        for _ in range(rng.randint(1, 3)):
            name = rng.choice(borrowers)
            if self.borrow[name] != 100:
                continue
            at = moment(0.0, 0.6)
            back = at + dt.timedelta(days=rng.randint(7, 12))
            if back >= self.end:
                # Today's policy is the seed's: no tightening is left in force.
                continue
            edit = self.edit_share(
                at,
                name,
                cause=PolicyChange.Cause.EDIT,
                reason=f"{name} borrowed most of the idle pool; cap borrowing at half its limit.",
                actor=self.admin,
                borrow_limit=50,
            )
            self.edit_share(
                back,
                name,
                cause=PolicyChange.Cause.REVERT,
                reason="Lenders' wait is back to normal; restore the borrow limit.",
                actor=self.admin,
                reverts=edit,
                borrow_limit=100,
            )
        # A maintenance window: a fifth of the fleet out for six hours.
        at = moment(0.2, 0.8)
        full = self.capacity
        down = self.set_capacity(
            at,
            full * 4 // 5,
            cause=PolicyChange.Cause.EDIT,
            reason="Planned maintenance: a fifth of the nodes drained for a driver upgrade.",
        )
        self.set_capacity(
            at + dt.timedelta(hours=6),
            full,
            cause=PolicyChange.Cause.REVERT,
            reason="Maintenance over; nodes back in service.",
            reverts=down,
        )
        # Exception requests: extra capacity for a deadline, some denied, one revoked.
        if not (self.urgencies and self.lead and self.owner):
            return
        for _ in range(rng.randint(4, 7)):
            urgency = rng.choice(self.urgencies)
            name = rng.choice(borrowers)
            filed = moment(0.0, 0.85)
            window_start = filed + dt.timedelta(hours=rng.randint(2, 20))
            hours = rng.randint(6, max(6, min(urgency.max_window_hours, 72)))
            window_end = window_start + dt.timedelta(hours=hours)
            decided = filed + dt.timedelta(minutes=rng.randint(20, 240))
            extra = rng.randint(4, 16)
            outcome = rng.choices(("approved", "denied", "revoked"), weights=(6, 3, 1))[0]
            if window_end >= self.end or self.busy.get(name, filed) > filed:
                outcome = "denied"
            request = {
                "kind": UrgencyDefinition.Kind.TEMPORARY_CAPACITY,
                "share": self.shares[name],
                "urgency": urgency,
                "justification": f"{urgency.name}: {extra} more GPUs for {name} "
                f"({self.shares[name].team.name}) during the window.",
                "window_start": window_start,
                "window_end": window_end,
                "extra": extra,
                "created_at": filed,
            }
            timeline = [(filed, "FILED", ""), (filed, "SUBMITTED", "")]
            if outcome == "denied":
                timeline.append((decided, "DENIED", "Existing capacity covers it; lend first."))
                request["state"] = ExceptionRequest.State.DENIED
            else:
                timeline.append((decided, "APPROVED", "Deadline confirmed."))
                ends = window_end
                if outcome == "revoked":
                    ends = window_start + dt.timedelta(hours=max(1, hours // 3))
                self.busy[name] = ends
                limit = self.limits[name][HISTORY_TYPE]
                self.edit_share(
                    window_start,
                    name,
                    cause=PolicyChange.Cause.EXCEPTION,
                    reason=f"Exception: {extra} extra instances ({urgency.name}).",
                    actor=None,
                    request=request,
                    capacity_limits={HISTORY_TYPE: limit + extra},
                )
                self.edit_share(
                    ends,
                    name,
                    cause=PolicyChange.Cause.EXCEPTION,
                    reason="Exception ended: extra instances taken back.",
                    actor=None,
                    request=request,
                    capacity_limits={HISTORY_TYPE: limit},
                )
                timeline.append((window_start, "ACTIVATED", ""))
                if outcome == "revoked":
                    timeline.append((ends, "REVOKED", "Deadline moved; capacity no longer needed."))
                    request["state"] = ExceptionRequest.State.REVOKED
                else:
                    timeline.append((ends, "EXPIRED", ""))
                    request["state"] = ExceptionRequest.State.EXPIRED
                request["activated_at"] = window_start
                request["ended_at"] = ends
            request["decided_at"] = decided
            self.requests.append((request, timeline))


def _history_contract(share: str) -> tuple[str, dict]:
    """(workload class, contract) of a replayed share's jobs."""
    return HISTORY_CONTRACTS.get(share, HISTORY_DEFAULT_CONTRACT)


def _trace_jobs(days: float) -> list[dict]:
    """The trace's jobs of the window, on the demo queue's share and type names."""
    options = TraceOptions(
        seed=HISTORY_SEED,
        checkpoint_interval=CHECKPOINT_INTERVAL,
        restart_overhead=RESTART_OVERHEAD,
        start=TRACE_START,
        days=days,
    )
    document = build_scenario(read_trace(), read_vc_sizes(), options)
    for job in document["jobs"]:
        job["share"] = f"vc-{job['share']}"
        job["instance_type"] = HISTORY_TYPE
        job.update(_history_contract(job["share"])[1])
    return document["jobs"]


def _write_records(story: _History, queue: JobQueue) -> tuple[int, int]:
    """The policy changes and exception requests of the story, with their own times."""
    requests = []
    for data, _timeline in story.requests:
        requests.append(
            ExceptionRequest(
                kind=data["kind"],
                team=data["share"].team,
                queue=queue,
                share=data["share"],
                instance_type=InstanceType.objects.get(name=HISTORY_TYPE),
                extra_instances=data["extra"],
                urgency=data["urgency"],
                justification=data["justification"],
                window_start=data["window_start"],
                window_end=data["window_end"],
                state=data["state"],
                requested_by=story.lead,
                submitted_at=data["created_at"],
                decided_by=story.owner,
                decided_at=data["decided_at"],
                activated_at=data.get("activated_at"),
                ended_at=data.get("ended_at"),
            )
        )
    ExceptionRequest.objects.bulk_create(requests)
    events = []
    for request, (data, timeline) in zip(requests, story.requests, strict=True):
        data["row"] = request
        for at, kind, note in timeline:
            actor = {"FILED": story.lead, "SUBMITTED": story.lead}.get(
                kind, story.owner if kind in ("APPROVED", "DENIED", "REVOKED") else None
            )
            events.append(ExceptionEvent(request=request, at=at, type=kind, actor=actor, note=note))
    ExceptionEvent.objects.bulk_create(events)
    # created_at is auto_now_add: set the real instants after the insert.
    for request, (data, _) in zip(requests, story.requests, strict=True):
        request.created_at = data["created_at"]
    ExceptionRequest.objects.bulk_update(requests, ["created_at"])

    ordered = sorted(story.changes, key=lambda item: item[0])
    changes = []
    for _at, record in ordered:
        change = PolicyChange(
            actor=record["actor"],
            reason=record["reason"],
            cause=record["cause"],
            target=record["target"],
            queue=queue,
            share=record["share"],
            object_repr=record["object_repr"][:200],
            before=record["before"],
            after=record["after"],
            exception_request=record["request"]["row"] if record["request"] else None,
        )
        record["row"] = change
        changes.append(change)
    PolicyChange.objects.bulk_create(changes)
    for (at, record), change in zip(ordered, changes, strict=True):
        change.created_at = at
        if record["reverts"] is not None:
            change.reverts = record["reverts"]["row"]
    PolicyChange.objects.bulk_update(changes, ["created_at", "reverts"])
    return len(changes), len(requests)


def _analyze() -> None:
    """Fresh statistics after a bulk load, so the rollup queries get the right plans
    (PostgreSQL would otherwise plan them for the empty tables it last saw)."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE scheduler_job, scheduler_jobevent")


def seed_history(*, months: int = 3, end: dt.datetime | None = None) -> HistorySummary:
    """Replay `months` full months of the Philly trace, ending at the start of `end`'s
    month (default: now), onto the demo's `philly` queue; then refresh their rollups.

    Needs seed_demo's queue, users and urgency definitions. Idempotent: a queue that
    already holds replayed jobs is left as it is.
    """
    from django.contrib.auth import get_user_model

    from governance.dashboards.rollups import rollups_refresh

    started = time.perf_counter()
    summary = HistorySummary()
    queue = JobQueue.objects.filter(name=HISTORY_QUEUE).first()
    if queue is None:
        summary.skipped = f"no queue named {HISTORY_QUEUE!r}: run seed_demo first"
        return summary
    if Job.objects.filter(queue=queue, name__startswith=HISTORY_PREFIX).exists():
        summary.skipped = "the history is already there"
        return summary
    users = {
        u.username: u
        for u in get_user_model().objects.filter(username__in=("admin", "lead", "owner"))
    }
    urgencies = list(UrgencyDefinition.objects.order_by("name"))
    end_month = _month_floor(end or timezone.now())
    origin = _months_back(end_month, months)
    shares = {share.name: share for share in queue.shares.select_related("team")}

    story = _History(
        queue=queue,
        shares=shares,
        origin=origin,
        end=end_month,
        rng=random.Random(HISTORY_SEED),
        admin=users.get("admin"),
        lead=users.get("lead"),
        owner=users.get("owner"),
        urgencies=urgencies,
    )
    document = {
        "name": "philly-history",
        "queue": {"capacity": {HISTORY_TYPE: story.capacity}},
        "shares": [story._share_doc(name) for name in shares],
    }
    for doc in document["shares"]:
        doc.pop("team")
    month = origin
    while month < end_month:
        summary.months.append(month.date())
        following = _months_back(month + dt.timedelta(days=40), 0).replace(day=1)
        story.month(month, following)
        month = following
    days = (end_month - origin).total_seconds() / 86400
    document["jobs"] = [job for job in _trace_jobs(days) if job["share"] in shares]
    document["actions"] = sorted(story.actions, key=lambda action: action["at"])
    scenario = load_scenario(document)
    result = simulate(scenario)
    with transaction.atomic():
        loaded = result_load(
            scenario=scenario,
            result=result,
            queue=queue,
            shares=shares,
            instance_types={HISTORY_TYPE: InstanceType.objects.get(name=HISTORY_TYPE)},
            origin=origin,
            name_prefix=HISTORY_PREFIX,
            until=end_month,
            workload_classes={share: _history_contract(share)[0] for share in shares},
        )
        summary.policy_changes, summary.exceptions = _write_records(story, queue)
        _analyze()
    for month in summary.months:
        rollups_refresh(month=month)
    summary.jobs, summary.events = loaded.jobs, loaded.events
    summary.seconds = time.perf_counter() - started
    return summary
