"""The computation of the signals: `month_signals` reads the raw record of one month (jobs,
job events, policy changes, exception requests) and returns the figures of every scope;
the job record is replayed by governance.dashboards.timeline, the policy record counted
here. A fixed number of queries, whatever the volume.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict

from django.db.models import Min, Q
from django.utils import timezone

from fleet.bridge import engine_borrow_limit
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
from governance.dashboards.selectors.calendar import (
    month_bounds,
    month_start,
    month_weeks,
    week_index,
)
from governance.dashboards.selectors.scopes import (
    EDIT_CAUSES,
    REVIEW_ACTIONS,
    Scope,
    scope_meta,
    scopes_of,
)
from governance.dashboards.timeline import LOOKBACK, Event, MonthSweep, SharePolicy
from governance.dashboards.timeline import Job as SweepJob
from governance.models import ExceptionEvent, ExceptionRequest, PolicyChange, WhatIfReview
from scheduler.selectors import executor_speeds

# Stored rollups carry the version that computed them (MonthlyRollup.version); older
# ones are recomputed when read. Raise it whenever a figure is added, removed or redefined.
# 4: `coverage` (partial months), `jobs_succeeded`; 5: `usage_by_type` and lent hours
# (cost).
SIGNALS_VERSION = 5
EXCEPTION_EVENT_COUNT = {
    ExceptionEvent.Type.FILED: "filed",
    ExceptionEvent.Type.APPROVED: "approved",
    ExceptionEvent.Type.DENIED: "denied",
    ExceptionEvent.Type.EXPIRED: "expired",
    ExceptionEvent.Type.REVOKED: "revoked",
}


def month_signals(*, month: dt.date, now: dt.datetime | None = None) -> dict[str, dict]:
    """Every scope's figures for the month, by scope key.

    The month under way is measured up to `now`. Queries: a fixed number, whatever
    the volume.
    """
    month = month_start(month)
    start, end = month_bounds(month)
    stop = max(start, min(end, now or timezone.now()))
    weeks = month_weeks(month)
    share_rows = _shares(stop)
    names = _names(share_rows)
    scopes: dict[str, Scope] = {}

    def scope_list(queue_id, share_id, team_id) -> list[Scope]:
        keys = scopes_of(queue_id, share_id, team_id)
        for key in keys:
            if key not in scopes:
                scopes[key] = Scope(len(weeks))
        return [scopes[key] for key in keys]

    scope_list(None, None, None)  # the organisation's row exists even in a quiet month
    figures = _sweep(start, stop, weeks, share_rows)
    for share_id, share_figures in figures.items():
        row = share_rows[share_id]
        labels = {
            "queue": names["queue"].get(row["queue_id"], ""),
            "share": row["name"],
            "team": names["team"].get(row["team_id"], ""),
        }
        for key, scope in zip(
            scopes_of(row["queue_id"], share_id, row["team_id"]),
            scope_list(row["queue_id"], share_id, row["team_id"]),
            strict=True,
        ):
            # Listed once, on the share rows; a wider scope counts them.
            scope.add(share_figures, labels, with_yielders="/s" in key)
    _policy_changes(start, stop, weeks, scope_list)
    _exception_figures(start, stop, weeks, scope_list)
    _review_figures(start, stop, scope_list)
    _add_names(names, scopes)
    measured_from = _measured_from(share_rows, start)
    return {
        key: {
            **scope_meta(key, names),
            **scope.finish(weeks, (start, stop), measured_from=measured_from.get(key, start)),
        }
        for key, scope in scopes.items()
    }


def _measured_from(share_rows: dict[int, dict], start: dt.datetime) -> dict[str, dt.datetime]:
    """Each scope's first measured instant of the month: the month's start, or the
    creation of its first share when that came later (a queue's first month started
    mid-month is a partial month, not a quiet one)."""
    first: dict[str, dt.datetime] = {}
    for share_id, row in share_rows.items():
        since = max(start, row["created_at"])
        for key in scopes_of(row["queue_id"], share_id, row["team_id"]):
            if key not in first or since < first[key]:
                first[key] = since
    return first


def _shares(stop: dt.datetime) -> dict[int, dict]:
    """Every share that existed before `stop`, with its current limits.

    A share exists from its creation, or from its first job or policy record when
    those are older (history loaded after the share was created)."""
    shares = {
        row["id"]: {**row, "limits": {}}
        for row in QuotaShare.objects.order_by().values(
            "id", "name", "queue_id", "team_id", "created_at", "strategy", "borrow_limit"
        )
    }
    earliest = [
        Job.objects.order_by().values("share_id").annotate(first=Min("submitted_at")),
        PolicyChange.objects.filter(share__isnull=False)
        .order_by()
        .values("share_id")
        .annotate(first=Min("created_at")),
    ]
    for rows in earliest:
        for row in rows.values_list("share_id", "first"):
            share = shares.get(row[0])
            if share is not None and row[1] < share["created_at"]:
                share["created_at"] = row[1]
    shares = {pk: row for pk, row in shares.items() if row["created_at"] < stop}
    for share_id, type_name, instances in (
        CapacityLimit.objects.filter(share_id__in=shares)
        .order_by()
        .values_list("share_id", "instance_type__name", "max_instances")
    ):
        shares[share_id]["limits"][type_name] = instances
    return shares


def _names(share_rows: dict[int, dict]) -> dict:
    return {
        "queue": dict(JobQueue.objects.order_by().values_list("id", "name")),
        "team": dict(Team.objects.order_by().values_list("id", "name")),
        "share": {pk: row["name"] for pk, row in share_rows.items()},
        "share_team": {pk: row["team_id"] for pk, row in share_rows.items()},
    }


def _add_names(names: dict, scopes: dict) -> None:
    """Names of shares met only in the policy record (created after the month)."""
    missing = {int(key.split("/s")[1]) for key in scopes if "/s" in key} - set(names["share"])
    for pk, name, team_id in QuotaShare.objects.filter(pk__in=missing).values_list(
        "pk", "name", "team_id"
    ):
        names["share"][pk] = name
        names["share_team"][pk] = team_id


def policy_at(records: list[tuple], at: dt.datetime, key: str, current):
    """What a share's (or queue's) `key` document held at `at`: the `after` of the
    latest change at or before it, else the `before` of the earliest change after it,
    else the current value. Creation records (no `before`) and documents without the
    key are passed over, so a history loaded after the share was created still reads
    right."""
    latest = None
    for created_at, before, after in records:
        if created_at <= at:
            if after and key in after:
                latest = after
        elif latest is None and before and key in before:
            return before
    return latest if latest is not None else current


def _share_document(doc: dict, current: dict) -> tuple[dict[str, int], str, int]:
    strategy = doc.get("strategy", current["strategy"])
    borrow = engine_borrow_limit(doc.get("borrow_limit"))
    return dict(doc.get("capacity_limits", {})), strategy, borrow


def _policy_timelines(share_rows: dict, begin: dt.datetime, stop: dt.datetime):
    """Each share's policy and each queue's capacity from `begin` to `stop`."""
    records: dict[tuple[str, int], list[tuple]] = defaultdict(list)
    for target, queue_id, share_id, created_at, before, after in (
        PolicyChange.objects.filter(
            target__in=(PolicyChange.Target.SHARE, PolicyChange.Target.QUEUE)
        )
        .order_by("created_at", "id")
        .values_list("target", "queue_id", "share_id", "created_at", "before", "after")
    ):
        if target == PolicyChange.Target.SHARE and share_id is not None:
            records[("share", share_id)].append((created_at, before, after))
        elif target == PolicyChange.Target.QUEUE and queue_id is not None:
            records[("queue", queue_id)].append((created_at, before, after))
    shares = []
    for pk, row in share_rows.items():
        current = {
            "capacity_limits": row["limits"],
            "strategy": row["strategy"],
            "borrow_limit": engine_borrow_limit(row["borrow_limit"]),
        }
        history = records.get(("share", pk), [])
        first = policy_at(history, begin, "capacity_limits", current)
        policy = [(begin, *_share_document(first, current))]
        for created_at, _before, after in history:
            if begin < created_at < stop and after and "capacity_limits" in after:
                policy.append((created_at, *_share_document(after, current)))
        shares.append(
            SharePolicy(
                pk=pk,
                queue_id=row["queue_id"],
                team_id=row["team_id"],
                created_at=row["created_at"],
                policy=policy,
            )
        )
    current_capacity: dict[int, dict[str, int]] = defaultdict(dict)
    for queue_id, type_name, instances in QueueCapacity.objects.order_by().values_list(
        "queue_id", "instance_type__name", "instances"
    ):
        current_capacity[queue_id][type_name] = instances
    capacity = {}
    for queue_id in {row["queue_id"] for row in share_rows.values()}:
        history = records.get(("queue", queue_id), [])
        first = policy_at(history, begin, "capacity", {"capacity": current_capacity[queue_id]})
        changes = [(begin, dict(first["capacity"]))]
        for created_at, _before, after in history:
            if begin < created_at < stop and after and "capacity" in after:
                changes.append((created_at, dict(after["capacity"])))
        capacity[queue_id] = changes
    return shares, capacity


JOB_FIELDS = (
    "id",
    "name",
    "queue_id",
    "share_id",
    "queue__executor",
    "instance_type__name",
    "instances",
    "submitted_at",
    "priority",
    "restart_overhead",
    "restart_overhead_spent",
    "progress",
    "preemptions",
    "ran_borrowed",
    "state",
    "reason",
    "finished_at",
    "workload_class",
    "protected_blocks",
)


def _sweep(start, stop, weeks, share_rows) -> dict:
    """Replay every job alive from `LOOKBACK` before the month to `stop`
    (governance.dashboards.timeline)."""
    begin = start - LOOKBACK
    alive = Q(submitted_at__lt=stop) & (Q(finished_at__isnull=True) | Q(finished_at__gte=begin))
    job_rows = list(Job.objects.filter(alive).order_by().values_list(*JOB_FIELDS))
    gpus = dict(InstanceType.objects.values_list("name", "gpu_count"))
    events = []
    first_priority: dict[int, int] = {}
    replayed: set[int] = set()
    rows = (
        JobEvent.objects.filter(
            job__submitted_at__lt=stop,
        )
        .filter(Q(job__finished_at__isnull=True) | Q(job__finished_at__gte=begin))
        .order_by("at", "id")
        .values_list("id", "at", "job_id", "type", "cause", "detail", "by_id")
    )
    for pk, at, job_id, kind, cause, detail, by_id in rows.iterator(chunk_size=20000):
        if kind == JobEvent.Type.PRIORITY_CHANGED and job_id not in first_priority:
            first_priority[job_id] = (detail or {}).get("from")
        if kind == JobEvent.Type.SUBMITTED and (detail or {}).get("replayed"):
            replayed.add(job_id)
        if at < stop:
            events.append(
                Event(
                    at=at,
                    seq=pk,
                    job_id=job_id,
                    type=kind,
                    cause=cause,
                    detail=detail,
                    by_id=by_id,
                )
            )
    speeds = executor_speeds()
    jobs = []
    for (
        pk,
        name,
        queue_id,
        share_id,
        executor,
        type_name,
        instances,
        submitted_at,
        priority,
        restart_overhead,
        overhead_spent,
        progress,
        preemptions,
        ran_borrowed,
        state,
        reason,
        finished_at,
        workload_class,
        protected_blocks,
    ) in job_rows:
        if share_id not in share_rows:
            continue
        speed = speeds[executor] if pk not in replayed else 1.0
        initial = first_priority.get(pk)
        jobs.append(
            SweepJob(
                pk=pk,
                name=name,
                share_id=share_id,
                queue_id=queue_id,
                instance_type=type_name,
                instances=instances,
                gpus=gpus.get(type_name, 1),
                submitted_at=submitted_at,
                priority=priority if initial is None else int(initial),
                restart_overhead=restart_overhead,
                overhead_spent=overhead_spent,
                progress=progress,
                preemptions=preemptions,
                ran_borrowed=ran_borrowed,
                state=state,
                reason=reason,
                finished_at=finished_at,
                speed=speed,
                workload_class=workload_class,
                protected_blocks=protected_blocks,
            )
        )
    shares, capacity = _policy_timelines(share_rows, begin, stop)
    sweep = MonthSweep(
        start=start,
        stop=stop,
        jobs=jobs,
        events=events,
        shares=shares,
        capacity=capacity,
        gpus=gpus,
        week_of=lambda at: week_index(weeks, at),
    )
    return sweep.run()


def _policy_changes(start, end, weeks, scope_list) -> None:
    rows = (
        PolicyChange.objects.filter(created_at__gte=start, created_at__lt=end)
        .order_by()
        .values_list("created_at", "cause", "queue_id", "share_id", "share__team_id")
    )
    for at, cause, queue_id, share_id, team_id in rows:
        week = week_index(weeks, at)
        for scope in scope_list(queue_id, share_id, team_id):
            scope.policy_by_cause[cause] += 1
            if cause in EDIT_CAUSES:
                scope.weekly[week]["policy_edits"] += 1
            elif cause == PolicyChange.Cause.EXCEPTION:
                scope.weekly[week]["exception_changes"] += 1


def _review_figures(start, end, scope_list) -> None:
    """What-if drafts proposed for review, approved, sent back and applied."""
    rows = (
        WhatIfReview.objects.filter(created_at__gte=start, created_at__lt=end)
        .order_by()
        .values_list("action", "comparison__queue_id")
    )
    for action, queue_id in rows:
        for scope in scope_list(queue_id, None, None):
            scope.reviews[REVIEW_ACTIONS[action]] += 1


def _exception_figures(start, end, weeks, scope_list) -> None:
    events = (
        ExceptionEvent.objects.filter(at__gte=start, at__lt=end, type__in=EXCEPTION_EVENT_COUNT)
        .order_by()
        .values_list(
            "at",
            "type",
            "request__queue_id",
            "request__share_id",
            "request__team_id",
            "request__urgency__name",
        )
    )
    for at, kind, queue_id, share_id, team_id, urgency in events:
        name = EXCEPTION_EVENT_COUNT[kind]
        week = week_index(weeks, at)
        for scope in scope_list(queue_id, share_id, team_id):
            scope.exceptions[name] += 1
            if name == "filed":
                scope.exceptions_by_urgency[urgency] += 1
                scope.weekly[week]["exceptions_filed"][urgency] += 1
    active = (
        ExceptionRequest.objects.filter(activated_at__lt=end)
        .filter(Q(ended_at__isnull=True) | Q(ended_at__gte=start))
        .order_by()
        .values_list("queue_id", "share_id", "team_id")
    )
    for queue_id, share_id, team_id in active:
        for scope in scope_list(queue_id, share_id, team_id):
            scope.exceptions["active"] += 1
