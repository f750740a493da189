"""The signals (design.md, "The signals"): computed here and nowhere else.

`month_signals` reads the raw record of one month (jobs, job events, policy changes,
exception requests) and returns the figures of every scope: the organisation (`all`),
each queue (`q<id>`), each share (`q<id>/s<id>`), each team across queues (`t<id>`)
and each team within a queue (`q<id>/t<id>`). Rollups (governance.dashboards.rollups)
store them; the dashboard, the signals API and the monthly pack read only the rollups.

The formulas and their definitions live in governance.dashboards.formulas; the month
rule is `formulas.MONTH_RULE` (a figure counts in the month it was settled). The job
record is replayed in time order by governance.dashboards.timeline; this module
gathers its rows and counts the policy record (edits, exceptions, reviews).

Weeks start on Monday (UTC); the month's first week starts on its first day.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict

from django.db.models import Min, Q
from django.utils import timezone

from engine.stats import nearest_rank
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
from fleet.selectors import queue_document, share_document
from governance.dashboards import formulas as f
from governance.dashboards.timeline import LOOKBACK, Event, MonthSweep, SharePolicy
from governance.dashboards.timeline import Job as SweepJob
from governance.models import (
    ExceptionEvent,
    ExceptionRequest,
    MonthlyRollup,
    PolicyChange,
    WhatIfReview,
)
from scheduler.executors import executor_named, simulated_speed

# Stored rollups carry the version that computed them (MonthlyRollup.version); older
# ones are recomputed when read. Raise it whenever a figure is added, removed or redefined.
SIGNALS_VERSION = 2
ALL = "all"
HOUR = 3600.0
TREND_MONTHS = 12
WAITING_LISTED = 10
# Policy edits people make (imports load a policy; exception changes count as exceptions).
EDIT_CAUSES = (PolicyChange.Cause.EDIT, PolicyChange.Cause.REVERT)
EXCEPTION_COUNTS = ("filed", "approved", "denied", "expired", "revoked")
EXCEPTION_EVENT_COUNT = {
    ExceptionEvent.Type.FILED: "filed",
    ExceptionEvent.Type.APPROVED: "approved",
    ExceptionEvent.Type.DENIED: "denied",
    ExceptionEvent.Type.EXPIRED: "expired",
    ExceptionEvent.Type.REVOKED: "revoked",
}
# What-if reviews (policy changes that needed another admin's approval), by action.
REVIEW_ACTIONS = {
    WhatIfReview.Action.PROPOSED: "proposed",
    WhatIfReview.Action.APPROVED: "approved",
    WhatIfReview.Action.REJECTED: "sent_back",
    WhatIfReview.Action.APPLIED: "applied",
}


# -- months and weeks -------------------------------------------------------------------


def month_start(day: dt.date) -> dt.date:
    return day.replace(day=1)


def next_month(month: dt.date) -> dt.date:
    return (month.replace(day=28) + dt.timedelta(days=4)).replace(day=1)


def previous_month(month: dt.date) -> dt.date:
    return (month.replace(day=1) - dt.timedelta(days=1)).replace(day=1)


def months_back(month: dt.date, count: int) -> list[dt.date]:
    """`count` months ending with `month`, oldest first."""
    months = [month_start(month)]
    while len(months) < count:
        months.insert(0, previous_month(months[0]))
    return months


def month_bounds(month: dt.date) -> tuple[dt.datetime, dt.datetime]:
    start = dt.datetime.combine(month_start(month), dt.time(), tzinfo=dt.UTC)
    return start, dt.datetime.combine(next_month(month), dt.time(), tzinfo=dt.UTC)


def last_full_month(now: dt.datetime) -> dt.date:
    return previous_month(now.astimezone(dt.UTC).date())


def month_weeks(month: dt.date) -> list[dt.date]:
    """The starts of the month's weeks: its first day, then every Monday in it."""
    end = next_month(month)
    weeks = [month]
    day = month + dt.timedelta(days=(7 - month.weekday()) % 7 or 7)
    while day < end:
        weeks.append(day)
        day += dt.timedelta(days=7)
    return weeks


def week_index(weeks: list[dt.date], at: dt.datetime) -> int:
    day = at.astimezone(dt.UTC).date()
    index = 0
    for position, start in enumerate(weeks):
        if start <= day:
            index = position
    return index


# -- scopes ------------------------------------------------------------------------------


def scopes_of(queue_id: int | None, share_id: int | None, team_id: int | None) -> list[str]:
    scopes = [ALL]
    if queue_id is not None:
        scopes.append(f"q{queue_id}")
        if share_id is not None:
            scopes.append(f"q{queue_id}/s{share_id}")
    if team_id is not None:
        scopes.append(f"t{team_id}")
        if queue_id is not None:
            scopes.append(f"q{queue_id}/t{team_id}")
    return scopes


def scope_meta(key: str, names: dict) -> dict:
    """The ids and names a rollup row of scope `key` carries (no join to show it)."""
    meta: dict = {}
    for part in key.split("/"):
        if part == ALL:
            continue
        kind = {"q": "queue", "s": "share", "t": "team"}[part[0]]
        meta[f"{kind}_id"] = int(part[1:])
        meta[f"{kind}_name"] = names.get(kind, {}).get(int(part[1:]), "")
    if "share_id" in meta:
        team_id = names.get("share_team", {}).get(meta["share_id"])
        meta["team_id"] = team_id
        meta["team_name"] = names.get("team", {}).get(team_id, "")
    return meta


class _Scope:
    """Sums the figures of the shares in a scope, and counts its policy record."""

    def __init__(self, weeks: int) -> None:
        self.instance_seconds = [0.0] * 4
        self.gpu_seconds = [0.0] * 4
        self.runs = 0
        self.lost_instance_seconds = dict.fromkeys(f.LOST_CAUSES, 0.0)
        self.lost_gpu_seconds = dict.fromkeys(f.LOST_CAUSES, 0.0)
        self.overhead_instance_seconds = 0.0
        self.overhead_gpu_seconds = 0.0
        self.preemptions = dict.fromkeys(f.PREEMPTION_CAUSES, 0)
        self.jobs_preempted = 0
        self.turnaround = {"all": [], "within": [], "borrowed": []}
        self.wait: list[int] = []
        self.wait_after_interruption: list[int] = []
        self.entitled = 0
        self.honoured = 0
        self.reclaim_waits: list[int] = []
        self.waiting_at_end: list[tuple[int, str]] = []
        self.counts: dict[str, int] = defaultdict(int)
        self.yielders: list[dict] = []
        self.policy_by_cause: dict[str, int] = defaultdict(int)
        self.exceptions = dict.fromkeys((*EXCEPTION_COUNTS, "active"), 0)
        self.exceptions_by_urgency: dict[str, int] = defaultdict(int)
        self.reviews = dict.fromkeys(REVIEW_ACTIONS.values(), 0)
        self.weekly = [
            {
                "preemptions": dict.fromkeys(f.PREEMPTION_CAUSES, 0),
                "lost_gpu_seconds": dict.fromkeys(f.LOST_CAUSES, 0.0),
                "policy_edits": 0,
                "exception_changes": 0,
                "exceptions_filed": defaultdict(int),
            }
            for _ in range(weeks)
        ]

    def add(self, share, labels: dict, with_yielders: bool) -> None:
        """Add one share's figures (timeline.ShareFigures)."""
        for index in range(4):
            self.instance_seconds[index] += share.instance_seconds[index]
            self.gpu_seconds[index] += share.gpu_seconds[index]
        self.runs += share.runs
        for cause in f.LOST_CAUSES:
            self.lost_instance_seconds[cause] += share.lost_instance_seconds[cause]
            self.lost_gpu_seconds[cause] += share.lost_gpu_seconds[cause]
        self.overhead_instance_seconds += share.overhead_instance_seconds
        self.overhead_gpu_seconds += share.overhead_gpu_seconds
        for cause in f.PREEMPTION_CAUSES:
            self.preemptions[cause] += share.preemptions[cause]
        self.jobs_preempted += len(share.jobs_preempted)
        for key, values in share.turnaround.items():
            self.turnaround[key].extend(values)
        self.wait.extend(share.wait)
        self.wait_after_interruption.extend(share.wait_after_interruption)
        self.entitled += share.entitled
        self.honoured += share.honoured
        self.reclaim_waits.extend(share.reclaim_waits)
        self.waiting_at_end.extend(share.waiting_at_end)
        for name in (
            "jobs_started",
            "jobs_succeeded",
            "jobs_failed",
            "preempted_ended",
            "preempted_resumed",
            "preempted_succeeded",
            "preempted_failed",
            "retries_exhausted",
            "priority_changes",
        ):
            self.counts[name] += getattr(share, name)
        self.counts["repeated_yielders"] += len(share.yielders)
        if with_yielders:
            self.yielders.extend({**y, **labels} for y in share.yielders)
        for week, causes in share.weekly_preemptions.items():
            for cause, count in causes.items():
                self.weekly[week]["preemptions"][cause] += count
        for week, causes in share.weekly_lost.items():
            for cause, seconds in causes.items():
                self.weekly[week]["lost_gpu_seconds"][cause] += seconds

    def finish(self, weeks: list[dt.date], window: tuple[dt.datetime, dt.datetime]) -> dict:
        instance_hours = dict(
            zip(f.CAPACITY_CATEGORIES, (s / HOUR for s in self.instance_seconds), strict=True)
        )
        gpu_hours = dict(
            zip(f.CAPACITY_CATEGORIES, (s / HOUR for s in self.gpu_seconds), strict=True)
        )
        delivered = gpu_hours["within_limit"] + gpu_hours["borrowed"]
        lost_gpu_hours = {c: s / HOUR for c, s in self.lost_gpu_seconds.items()}
        lost_total = sum(lost_gpu_hours.values())
        overhead_gpu_hours = self.overhead_gpu_seconds / HOUR
        preemptions_total = sum(self.preemptions.values())
        counts = self.counts
        ages = sorted(age for age, _ in self.waiting_at_end)
        oldest = sorted(self.waiting_at_end, key=lambda item: (-item[0], item[1]))
        return {
            "window": {"start": window[0].isoformat(), "end": window[1].isoformat()},
            "instance_hours": instance_hours,
            "gpu_hours": gpu_hours,
            "delivered_gpu_hours": delivered,
            "delivered_instance_hours": instance_hours["within_limit"] + instance_hours["borrowed"],
            "entitled_gpu_hours": gpu_hours["within_limit"]
            + gpu_hours["idle_lendable"]
            + gpu_hours["idle_reserved"],
            "entitlement_use": f.entitlement_use(
                within_limit=gpu_hours["within_limit"],
                idle_lendable=gpu_hours["idle_lendable"],
                idle_reserved=gpu_hours["idle_reserved"],
            ),
            "borrowed_fraction": f.ratio(gpu_hours["borrowed"], delivered),
            "runs": self.runs,
            "lost_instance_hours": {c: s / HOUR for c, s in self.lost_instance_seconds.items()},
            "lost_gpu_hours": lost_gpu_hours,
            "lost_gpu_hours_total": lost_total,
            "restart_overhead_instance_hours": self.overhead_instance_seconds / HOUR,
            "restart_overhead_gpu_hours": overhead_gpu_hours,
            "goodput": f.goodput(delivered=delivered, lost=lost_total, overhead=overhead_gpu_hours),
            "lost_gpu_hours_per_1000": f.per_thousand_gpu_hours(
                value=lost_total, delivered_gpu_hours=delivered
            ),
            "preemptions": dict(self.preemptions),
            "preemptions_total": preemptions_total,
            "preemptions_per_1000": f.per_thousand_gpu_hours(
                value=preemptions_total, delivered_gpu_hours=delivered
            ),
            "jobs_preempted": self.jobs_preempted,
            "jobs_started": counts["jobs_started"],
            "jobs_finished": counts["jobs_succeeded"],
            "jobs_failed": counts["jobs_failed"],
            "jobs_ended": counts["jobs_succeeded"] + counts["jobs_failed"],
            "jobs_waiting_at_end": {
                "n": len(ages),
                "age_p50_s": nearest_rank(ages, 50),
                "age_p90_s": nearest_rank(ages, 90),
                "oldest_s": ages[-1] if ages else None,
            },
            "oldest_waiting": [
                {"name": name, "age_s": age} for age, name in oldest[:WAITING_LISTED]
            ],
            "turnaround_s": f.duration_stats(self.turnaround["all"]),
            "turnaround_by_borrowing_s": {
                key: f.duration_stats(self.turnaround[key]) for key in ("within", "borrowed")
            },
            "wait_s": f.duration_stats(self.wait),
            "wait_after_interruption_s": f.duration_stats(self.wait_after_interruption),
            "entitlement_honoured": {
                "fraction": f.entitlement_honoured(honoured=self.honoured, entitled=self.entitled),
                "n": self.entitled,
                "honoured": self.honoured,
            },
            "time_to_reclaim_s": f.duration_stats(self.reclaim_waits),
            "preempted_ended": counts["preempted_ended"],
            "preempted_resumed": counts["preempted_resumed"],
            "preempted_succeeded": counts["preempted_succeeded"],
            "preempted_failed": counts["preempted_failed"],
            "completion_rate_preempted": f.ratio(
                counts["preempted_succeeded"], counts["preempted_ended"]
            ),
            "retries_exhausted": counts["retries_exhausted"],
            "repeated_yielders_count": counts["repeated_yielders"],
            "yielders": sorted(
                self.yielders, key=lambda y: (-y["preemptions"], y["finished_at"], y["name"])
            ),
            "priority_changes": counts["priority_changes"],
            "policy_edits": sum(self.policy_by_cause.get(c, 0) for c in EDIT_CAUSES),
            "policy_changes_by_cause": dict(sorted(self.policy_by_cause.items())),
            "capacity_change_preemptions": self.preemptions["capacity_change"],
            "exceptions": dict(self.exceptions),
            "exceptions_filed_by_urgency": dict(sorted(self.exceptions_by_urgency.items())),
            "policy_reviews": dict(self.reviews),
            "weeks": [
                {
                    "week": weeks[index].isoformat(),
                    "preemptions": week["preemptions"],
                    "lost_gpu_hours": {c: s / HOUR for c, s in week["lost_gpu_seconds"].items()},
                    "policy_edits": week["policy_edits"],
                    "exception_changes": week["exception_changes"],
                    "exceptions_filed": dict(sorted(week["exceptions_filed"].items())),
                }
                for index, week in enumerate(self.weekly)
            ],
        }


# -- the computation --------------------------------------------------------------------


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
    scopes: dict[str, _Scope] = {}

    def scope_list(queue_id, share_id, team_id) -> list[_Scope]:
        keys = scopes_of(queue_id, share_id, team_id)
        for key in keys:
            if key not in scopes:
                scopes[key] = _Scope(len(weeks))
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
    return {
        key: {**scope_meta(key, names), **scope.finish(weeks, (start, stop))}
        for key, scope in scopes.items()
    }


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


def _policy_at(records: list[tuple], at: dt.datetime, key: str, current):
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
        first = _policy_at(history, begin, "capacity_limits", current)
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
        first = _policy_at(history, begin, "capacity", {"capacity": current_capacity[queue_id]})
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
        .values_list("id", "at", "job_id", "type", "cause", "detail")
    )
    for pk, at, job_id, kind, cause, detail in rows.iterator(chunk_size=20000):
        if kind == JobEvent.Type.PRIORITY_CHANGED and job_id not in first_priority:
            first_priority[job_id] = (detail or {}).get("from")
        if kind == JobEvent.Type.SUBMITTED and (detail or {}).get("replayed"):
            replayed.add(job_id)
        if at < stop:
            events.append(
                Event(at=at, seq=pk, job_id=job_id, type=kind, cause=cause, detail=detail)
            )
    live_speed = simulated_speed()
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
    ) in job_rows:
        if share_id not in share_rows:
            continue
        modelled = executor_named(executor).capabilities.modelled_clock
        speed = live_speed if modelled and pk not in replayed else 1.0
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


# -- what the dashboard, the API and the pack read ------------------------------------


def scope_key(*, queue_id: int | None = None, team_id: int | None = None, share_id=None) -> str:
    if share_id is not None:
        return f"q{queue_id}/s{share_id}"
    if queue_id is not None and team_id is not None:
        return f"q{queue_id}/t{team_id}"
    if queue_id is not None:
        return f"q{queue_id}"
    if team_id is not None:
        return f"t{team_id}"
    return ALL


def dashboard_rollups(
    *, month: dt.date, queue_id: int | None = None, team_id: int | None = None
) -> dict:
    """The stored figures of one scope: one query.

    Returns {"current", "previous": data or None, "trend": [(month, data or None)] over
    the `TREND_MONTHS` months ending with `month`, "shares": [data of each share in
    scope, by queue then share name], "teams": [data of each team in scope, by name],
    "computed_at", "stale": [months whose rows an older version computed]}.
    """
    month = month_start(month)
    trend_months = months_back(month, TREND_MONTHS)
    scope = scope_key(queue_id=queue_id, team_id=team_id)
    if queue_id is not None:
        shares = Q(scope__startswith=f"q{queue_id}/s")
        teams = Q(scope__startswith=f"q{queue_id}/t")
    else:
        shares = Q(scope__contains="/s")
        teams = Q(scope__startswith="t")
    if team_id is not None:
        shares &= Q(team_id=team_id)
        teams &= Q(team_id=team_id)
    rows = list(
        MonthlyRollup.objects.filter(
            Q(month__in=trend_months, scope=scope) | (Q(month=month) & (shares | teams))
        ).values_list("month", "scope", "data", "computed_at", "version")
    )
    by_month = {}
    result = {
        "current": None,
        "previous": None,
        "shares": [],
        "teams": [],
        "computed_at": None,
        "stale": set(),
    }
    for row_month, row_scope, data, computed_at, version in rows:
        if version < SIGNALS_VERSION:
            result["stale"].add(row_month)
        if row_scope == scope:
            by_month[row_month] = data
            if row_month == month:
                result["computed_at"] = computed_at
                if team_id is not None:
                    result["teams"].append(data)  # the one team of the table
        elif "/s" in row_scope:
            result["shares"].append(data)
        else:
            result["teams"].append(data)
    result["current"] = by_month.get(month)
    result["previous"] = by_month.get(previous_month(month))
    result["trend"] = [(m, by_month.get(m)) for m in trend_months]
    result["shares"].sort(key=lambda d: (d.get("queue_name", ""), d.get("share_name", "")))
    result["teams"].sort(key=lambda d: d.get("team_name", ""))
    result["stale"] = sorted(result["stale"])
    return result


def rollup_months() -> list[dt.date]:
    """Months that have rollups, newest first (the month picker)."""
    return list(
        MonthlyRollup.objects.filter(scope=ALL).order_by("-month").values_list("month", flat=True)
    )


def rollup_scope(*, month: dt.date, scope: str) -> tuple[dict, dt.datetime] | None:
    """The stored figures of one scope and month with when they were computed, or None."""
    return (
        MonthlyRollup.objects.filter(month=month_start(month), scope=scope)
        .values_list("data", "computed_at")
        .first()
    )


def rollup_current(*, month: dt.date) -> bool:
    """Whether the month has rollups computed by this version of the signals (or a newer
    one, during a rolling deploy: they hold every figure this version reads)."""
    return MonthlyRollup.objects.filter(
        month=month_start(month), scope=ALL, version__gte=SIGNALS_VERSION
    ).exists()


def empty_signals(*, month: dt.date) -> dict:
    """The figures of a scope with nothing in the month (a share created later)."""
    start, end = month_bounds(month)
    return _Scope(len(month_weeks(month))).finish(month_weeks(month), (start, end))


def policy_in_force(*, at: dt.datetime, share_id: int | None = None, queue_id=None) -> dict:
    """What the policy record says a share's policy (`share_document`'s shape), or a
    queue's capacity ({"capacity": {type: instances}}), was at `at` (`_policy_at`)."""
    if share_id is not None:
        share = QuotaShare.objects.select_related("team").get(pk=share_id)
        current, key = share_document(share), "capacity_limits"
        records = PolicyChange.objects.filter(target=PolicyChange.Target.SHARE, share_id=share_id)
    else:
        queue = JobQueue.objects.get(pk=queue_id)
        current, key = {"capacity": queue_document(queue)["capacity"]}, "capacity"
        records = PolicyChange.objects.filter(target=PolicyChange.Target.QUEUE, queue_id=queue_id)
    rows = list(records.order_by("created_at", "id").values_list("created_at", "before", "after"))
    return _policy_at(rows, at, key, current)
