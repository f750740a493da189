"""The signals (design.md, "The signals"): computed here and nowhere else.

`month_signals` reads the raw record of one month (jobs, job events, policy changes,
exception requests) and returns the figures of every scope: the organisation (`all`),
each queue (`q<id>`), each share (`q<id>/s<id>`) and each team (`t<id>`). Rollups
(governance.dashboards.rollups) store them; the dashboard reads only the rollups
(`dashboard_rollups`).

Which month a figure belongs to:
- *job outcomes* (turnaround, wait, run time, wait after interruption, restart
  overhead, completion of preempted jobs, retries exhausted, repeated yielders,
  goodput) count the jobs that **ended** in the month (SUCCEEDED or FAILED);
- *events* (preemptions by cause, jobs preempted, lost work, lender wait, priority
  changes, policy edits, exception decisions) count what **happened** in the month.

Definitions:
- turnaround = finished − submitted; run = time holding capacity (each STARTED to the
  next PREEMPTED / SUCCEEDED / FAILED); wait = turnaround − run. Over SUCCEEDED jobs,
  split by `ran_borrowed` (any start on borrowed capacity) vs only within the limit.
- lender wait: for each start that reclaimed capacity (a `reclaim` preemption names it
  as `by`), how long that job had been RUNNABLE (since its submission or its last
  preemption); attributed to the reclaiming (lending) job's share.
- lost work = compute seconds redone (the `lost_work` of each preemption) × instances ×
  GPUs per instance; restart overhead likewise from the job's counter.
- wait after interruption: each preemption a job recovered from → its next start.
- completion rate of preempted jobs = SUCCEEDED / ended, among ended jobs preempted at
  least once; `resumed` = those that started again after a preemption.
- goodput = useful GPU-seconds (the work of SUCCEEDED jobs) / consumed GPU-seconds
  (useful progress + lost work + restart overhead of every ended job).
- statistics: nearest-rank percentiles (as the engine's summary), in seconds.
- weeks start on Monday (UTC); the month's first week starts on its first day.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from collections.abc import Iterable

from django.db.models import Q

from governance.models import (
    ExceptionEvent,
    ExceptionRequest,
    JobQueue,
    MonthlyRollup,
    PolicyChange,
    QuotaShare,
    Team,
    WhatIfReview,
)
from scheduler.models import Job, JobEvent

ALL = "all"
PREEMPTION_CAUSES = ("reclaim", "priority", "capacity_change")
REPEATED_YIELDER_PREEMPTIONS = 3
# Policy edits people make (imports load a policy; exception changes count as exceptions).
EDIT_CAUSES = (PolicyChange.Cause.EDIT, PolicyChange.Cause.REVERT)
EXCEPTION_COUNTS = ("filed", "approved", "denied", "revoked")
EXCEPTION_EVENT_COUNT = {
    ExceptionEvent.Type.FILED: "filed",
    ExceptionEvent.Type.APPROVED: "approved",
    ExceptionEvent.Type.DENIED: "denied",
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


# -- statistics --------------------------------------------------------------------------


def nearest_rank(sorted_values: list[int], percent: float) -> int | None:
    if not sorted_values:
        return None
    rank = max(1, -(-percent * len(sorted_values) // 100))
    return sorted_values[int(rank) - 1]


def duration_stats(values: Iterable[int]) -> dict:
    """n, mean, min, q1, median, q3, p90, max of durations in seconds (None when empty)."""
    ordered = sorted(values)
    if not ordered:
        return {"n": 0}
    return {
        "n": len(ordered),
        "mean": round(sum(ordered) / len(ordered)),
        "min": ordered[0],
        "q1": nearest_rank(ordered, 25),
        "median": nearest_rank(ordered, 50),
        "q3": nearest_rank(ordered, 75),
        "p90": nearest_rank(ordered, 90),
        "max": ordered[-1],
    }


def ratio(numerator: float, denominator: float) -> float | None:
    return numerator / denominator if denominator else None


# -- scopes ------------------------------------------------------------------------------


def scopes_of(queue_id: int | None, share_id: int | None, team_id: int | None) -> list[str]:
    scopes = [ALL]
    if queue_id is not None:
        scopes.append(f"q{queue_id}")
        if share_id is not None:
            scopes.append(f"q{queue_id}/s{share_id}")
    if team_id is not None:
        scopes.append(f"t{team_id}")
    return scopes


class _Scope:
    """Accumulates the raw figures of one scope; `finish` turns them into JSON."""

    def __init__(self, weeks: int) -> None:
        self.turnaround = {"all": [], "within": [], "borrowed": []}
        self.wait = {"all": [], "within": [], "borrowed": []}
        self.run = {"all": [], "within": [], "borrowed": []}
        self.lender_wait: list[int] = []
        self.wait_after_interruption: list[int] = []
        self.counts: dict[str, float] = defaultdict(float)
        self.preemptions = dict.fromkeys(PREEMPTION_CAUSES, 0)
        self.preempted_jobs: set[int] = set()
        self.policy_by_cause: dict[str, int] = defaultdict(int)
        self.exceptions = dict.fromkeys((*EXCEPTION_COUNTS, "active"), 0)
        self.exceptions_by_urgency: dict[str, int] = defaultdict(int)
        self.yielders: list[dict] = []
        self.reviews = dict.fromkeys(REVIEW_ACTIONS.values(), 0)
        self.weekly = [
            {
                "preemptions": dict.fromkeys(PREEMPTION_CAUSES, 0),
                "lost_gpu_seconds": 0,
                "policy_edits": 0,
                "exception_changes": 0,
                "exceptions_filed": defaultdict(int),
            }
            for _ in range(weeks)
        ]

    def finish(self, weeks: list[dt.date]) -> dict:
        counts = self.counts
        return {
            "jobs_ended": int(counts["ended"]),
            "jobs_succeeded": int(counts["succeeded"]),
            "jobs_failed": int(counts["failed"]),
            "turnaround": {k: duration_stats(v) for k, v in self.turnaround.items()},
            "wait": {k: duration_stats(v) for k, v in self.wait.items()},
            "run": {k: duration_stats(v) for k, v in self.run.items()},
            "lender_wait": duration_stats(self.lender_wait),
            "reclaim_starts": len(self.lender_wait),
            "preemptions": dict(self.preemptions),
            "preemptions_total": sum(self.preemptions.values()),
            "jobs_preempted": len(self.preempted_jobs),
            "lost_gpu_seconds": int(counts["lost_gpu_seconds"]),
            "restart_overhead_gpu_seconds": int(counts["restart_overhead_gpu_seconds"]),
            "wait_after_interruption": duration_stats(self.wait_after_interruption),
            "preempted_ended": int(counts["preempted_ended"]),
            "preempted_resumed": int(counts["preempted_resumed"]),
            "preempted_succeeded": int(counts["preempted_succeeded"]),
            "preempted_failed": int(counts["preempted_failed"]),
            "completion_rate_preempted": ratio(
                counts["preempted_succeeded"], counts["preempted_ended"]
            ),
            "retries_exhausted": int(counts["retries_exhausted"]),
            "repeated_yielders_count": len(self.yielders),
            "yielders": sorted(
                self.yielders,
                key=lambda y: (-y["preemptions"], -y["lost_gpu_seconds"], y["name"]),
            ),
            "useful_gpu_seconds": int(counts["useful_gpu_seconds"]),
            "consumed_gpu_seconds": int(counts["consumed_gpu_seconds"]),
            "goodput": ratio(counts["useful_gpu_seconds"], counts["consumed_gpu_seconds"]),
            "policy_edits": sum(self.policy_by_cause.get(c, 0) for c in EDIT_CAUSES),
            "policy_changes_by_cause": dict(sorted(self.policy_by_cause.items())),
            "priority_changes": int(counts["priority_changes"]),
            "capacity_change_preemptions": self.preemptions["capacity_change"],
            "exceptions": dict(self.exceptions),
            "exceptions_filed_by_urgency": dict(sorted(self.exceptions_by_urgency.items())),
            "policy_reviews": dict(self.reviews),
            "weeks": [
                {
                    "week": weeks[index].isoformat(),
                    "preemptions": week["preemptions"],
                    "lost_gpu_seconds": int(week["lost_gpu_seconds"]),
                    "policy_edits": week["policy_edits"],
                    "exception_changes": week["exception_changes"],
                    "exceptions_filed": dict(sorted(week["exceptions_filed"].items())),
                }
                for index, week in enumerate(self.weekly)
            ],
        }


# -- the computation --------------------------------------------------------------------


def _ended_jobs(start, end):
    return Job.objects.filter(
        finished_at__gte=start,
        finished_at__lt=end,
        state__in=(Job.State.SUCCEEDED, Job.State.FAILED),
    )


def month_signals(*, month: dt.date) -> dict[str, dict]:
    """Every scope's figures for the month, by scope key.

    Scope meta (`queue_id`, `share_id`, `team_id`, names) is included so a rollup row
    needs no join to be shown. Queries: a fixed number, whatever the volume.
    """
    month = month_start(month)
    start, end = month_bounds(month)
    weeks = month_weeks(month)
    scopes: dict[str, _Scope] = {}
    meta: dict[str, dict] = {ALL: {}}

    def scope_list(queue_id, share_id, team_id, labels=None) -> list[_Scope]:
        keys = scopes_of(queue_id, share_id, team_id)
        result = []
        for key in keys:
            if key not in scopes:
                scopes[key] = _Scope(len(weeks))
                meta[key] = _meta_for(key, queue_id, share_id, team_id, labels or {})
            result.append(scopes[key])
        return result

    _ended_job_figures(start, end, scope_list)
    _preemption_figures(start, end, weeks, scope_list)
    _lender_wait(start, end, scope_list)
    _priority_changes(start, end, scope_list)
    _policy_changes(start, end, weeks, scope_list)
    _exception_figures(start, end, weeks, scope_list)
    _review_figures(start, end, scope_list)
    scope_list(None, None, None)  # the organisation's row exists even in a quiet month

    _fill_names(meta)
    signals = {key: {**meta[key], **scope.finish(weeks)} for key, scope in scopes.items()}
    for key, data in signals.items():
        if "/s" not in key:
            # Listed once, on the share rows; a wider scope counts them.
            data["yielders"] = []
    return signals


def _fill_names(meta: dict[str, dict]) -> None:
    """Names of scopes met only in the policy record (no job of theirs in the month)."""
    missing = defaultdict(set)
    for entry in meta.values():
        for kind in ("queue", "share", "team"):
            if f"{kind}_id" in entry and not entry.get(f"{kind}_name"):
                missing[kind].add(entry[f"{kind}_id"])
    names = {
        kind: dict(model.objects.filter(pk__in=missing[kind]).values_list("pk", "name"))
        for kind, model in (("queue", JobQueue), ("share", QuotaShare), ("team", Team))
        if missing[kind]
    }
    for entry in meta.values():
        for kind in ("queue", "share", "team"):
            if f"{kind}_id" in entry and not entry.get(f"{kind}_name"):
                entry[f"{kind}_name"] = names.get(kind, {}).get(entry[f"{kind}_id"], "")


def _meta_for(key, queue_id, share_id, team_id, labels) -> dict:
    if key == ALL:
        return {}
    if key.startswith("t"):
        return {"team_id": team_id, "team_name": labels.get("team_name", "")}
    if "/s" in key:
        return {
            "queue_id": queue_id,
            "share_id": share_id,
            "team_id": team_id,
            "queue_name": labels.get("queue_name", ""),
            "share_name": labels.get("share_name", ""),
            "team_name": labels.get("team_name", ""),
        }
    return {"queue_id": queue_id, "queue_name": labels.get("queue_name", "")}


def _labels(row: dict) -> dict:
    return {
        "queue_name": row["queue__name"],
        "share_name": row["share__name"],
        "team_name": row["share__team__name"],
    }


JOB_FIELDS = (
    "id",
    "name",
    "queue_id",
    "share_id",
    "share__team_id",
    "queue__name",
    "share__name",
    "share__team__name",
    "instances",
    "instance_type__gpu_count",
    "expected_duration",
    "state",
    "reason",
    "submitted_at",
    "finished_at",
    "preemptions",
    "lost_work",
    "restart_overhead_spent",
    "progress",
    "ran_borrowed",
)


def _ended_job_figures(start, end, scope_list) -> None:
    jobs = {row["id"]: row for row in _ended_jobs(start, end).values(*JOB_FIELDS)}
    if not jobs:
        return
    lifecycle = (
        JobEvent.objects.filter(
            job__finished_at__gte=start,
            job__finished_at__lt=end,
            type__in=(
                JobEvent.Type.STARTED,
                JobEvent.Type.PREEMPTED,
                JobEvent.Type.SUCCEEDED,
                JobEvent.Type.FAILED,
            ),
        )
        .order_by("job_id", "at", "id")
        .values_list("job_id", "at", "type")
    )
    runs: dict[int, int] = defaultdict(int)
    resumed: set[int] = set()
    gaps: dict[int, list[int]] = defaultdict(list)
    current_job = None
    run_start = None
    preempted_at = None
    for job_id, at, kind in lifecycle.iterator(chunk_size=10000):
        if job_id != current_job:
            current_job, run_start, preempted_at = job_id, None, None
        if kind == JobEvent.Type.STARTED:
            if preempted_at is not None:
                gaps[job_id].append(int((at - preempted_at).total_seconds()))
                resumed.add(job_id)
                preempted_at = None
            run_start = at
        else:
            if run_start is not None:
                runs[job_id] += int((at - run_start).total_seconds())
                run_start = None
            preempted_at = at if kind == JobEvent.Type.PREEMPTED else None

    for job_id, job in jobs.items():
        gpus = job["instances"] * job["instance_type__gpu_count"]
        succeeded = job["state"] == Job.State.SUCCEEDED
        turnaround = int((job["finished_at"] - job["submitted_at"]).total_seconds())
        run = runs.get(job_id, 0)
        group = "borrowed" if job["ran_borrowed"] else "within"
        useful = job["expected_duration"] * gpus if succeeded else 0
        consumed = (job["progress"] + job["lost_work"] + job["restart_overhead_spent"]) * gpus
        yielder = None
        if job["preemptions"] >= REPEATED_YIELDER_PREEMPTIONS:
            yielder = {
                "job_id": job_id,
                "name": job["name"],
                "queue": job["queue__name"],
                "share": job["share__name"],
                "team": job["share__team__name"],
                "preemptions": job["preemptions"],
                "lost_gpu_seconds": job["lost_work"] * gpus,
                "state": job["state"],
                "reason": job["reason"],
                "finished_at": job["finished_at"].isoformat(),
            }
        for scope in scope_list(
            job["queue_id"], job["share_id"], job["share__team_id"], _labels(job)
        ):
            counts = scope.counts
            counts["ended"] += 1
            counts["succeeded" if succeeded else "failed"] += 1
            if succeeded:
                for key in ("all", group):
                    scope.turnaround[key].append(turnaround)
                    scope.run[key].append(run)
                    scope.wait[key].append(turnaround - run)
            counts["useful_gpu_seconds"] += useful
            counts["consumed_gpu_seconds"] += consumed
            counts["restart_overhead_gpu_seconds"] += job["restart_overhead_spent"] * gpus
            if job["state"] == Job.State.FAILED and job["reason"] == "retries_exhausted":
                counts["retries_exhausted"] += 1
            if job["preemptions"]:
                counts["preempted_ended"] += 1
                counts["preempted_succeeded" if succeeded else "preempted_failed"] += 1
                if job_id in resumed:
                    counts["preempted_resumed"] += 1
                scope.wait_after_interruption.extend(gaps.get(job_id, ()))
            if yielder is not None:
                scope.yielders.append(yielder)


def _preemption_figures(start, end, weeks, scope_list) -> None:
    rows = (
        JobEvent.objects.filter(at__gte=start, at__lt=end, type=JobEvent.Type.PREEMPTED)
        .order_by("at", "id")
        .values_list(
            "job_id",
            "at",
            "cause",
            "detail",
            "job__instances",
            "job__instance_type__gpu_count",
            "job__queue_id",
            "job__share_id",
            "job__share__team_id",
            "job__queue__name",
            "job__share__name",
            "job__share__team__name",
        )
    )
    for (
        job_id,
        at,
        cause,
        detail,
        instances,
        gpu_count,
        queue_id,
        share_id,
        team_id,
        queue_name,
        share_name,
        team_name,
    ) in rows.iterator(chunk_size=10000):
        lost = (detail or {}).get("lost_work", 0) * instances * gpu_count
        week = week_index(weeks, at)
        labels = {"queue_name": queue_name, "share_name": share_name, "team_name": team_name}
        for scope in scope_list(queue_id, share_id, team_id, labels):
            if cause in scope.preemptions:
                scope.preemptions[cause] += 1
                scope.weekly[week]["preemptions"][cause] += 1
            scope.preempted_jobs.add(job_id)
            scope.counts["lost_gpu_seconds"] += lost
            scope.weekly[week]["lost_gpu_seconds"] += lost


def _lender_wait(start, end, scope_list) -> None:
    """How long each job whose start reclaimed capacity had been waiting."""
    reclaims = set(
        JobEvent.objects.filter(
            at__gte=start, at__lt=end, type=JobEvent.Type.PREEMPTED, cause="reclaim"
        )
        .exclude(by=None)
        .values_list("by_id", "at")
    )
    if not reclaims:
        return
    reclaimers = {job_id for job_id, _ in reclaims}
    jobs = {
        row["id"]: row
        for row in Job.objects.filter(pk__in=reclaimers).values(
            "id",
            "queue_id",
            "share_id",
            "share__team_id",
            "queue__name",
            "share__name",
            "share__team__name",
        )
    }
    history = (
        JobEvent.objects.filter(
            job_id__in=reclaimers,
            at__lt=end,
            type__in=(JobEvent.Type.SUBMITTED, JobEvent.Type.PREEMPTED, JobEvent.Type.STARTED),
        )
        .order_by("job_id", "at", "id")
        .values_list("job_id", "at", "type")
    )
    runnable_since: dict[int, dt.datetime] = {}
    for job_id, at, kind in history.iterator(chunk_size=10000):
        if kind == JobEvent.Type.STARTED:
            since = runnable_since.pop(job_id, None)
            if since is not None and (job_id, at) in reclaims:
                reclaims.discard((job_id, at))
                job = jobs[job_id]
                for scope in scope_list(
                    job["queue_id"], job["share_id"], job["share__team_id"], _labels(job)
                ):
                    scope.lender_wait.append(int((at - since).total_seconds()))
        else:
            runnable_since[job_id] = at


def _priority_changes(start, end, scope_list) -> None:
    rows = (
        JobEvent.objects.filter(at__gte=start, at__lt=end, type=JobEvent.Type.PRIORITY_CHANGED)
        .values_list("job__queue_id", "job__share_id", "job__share__team_id")
        .order_by()
    )
    for queue_id, share_id, team_id in rows:
        for scope in scope_list(queue_id, share_id, team_id):
            scope.counts["priority_changes"] += 1


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


# -- what the dashboard reads ------------------------------------------------------------


def dashboard_rollups(*, month: dt.date, queue_id: int | None = None) -> dict:
    """The stored figures the dashboard shows: one query.

    Returns {"current": data or None, "previous": data or None, "shares": [data of each
    share in scope, by queue then share name], "computed_at": datetime or None}.
    """
    month = month_start(month)
    previous = previous_month(month)
    scope = ALL if queue_id is None else f"q{queue_id}"
    share_filter = (
        Q(scope__contains="/s") if queue_id is None else Q(scope__startswith=f"{scope}/s")
    )
    rows = list(
        MonthlyRollup.objects.filter(
            Q(month__in=(month, previous), scope=scope) | (Q(month=month) & share_filter)
        ).values_list("month", "scope", "data", "computed_at")
    )
    result = {"current": None, "previous": None, "shares": [], "computed_at": None}
    for row_month, row_scope, data, computed_at in rows:
        if row_scope == scope:
            if row_month == month:
                result["current"] = data
                result["computed_at"] = computed_at
            else:
                result["previous"] = data
        else:
            result["shares"].append(data)
    result["shares"].sort(key=lambda d: (d.get("queue_name", ""), d.get("share_name", "")))
    return result


def rollup_months() -> list[dt.date]:
    """Months that have rollups, newest first (the month picker)."""
    return list(
        MonthlyRollup.objects.filter(scope=ALL).order_by("-month").values_list("month", flat=True)
    )
