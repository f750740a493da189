"""The scopes of the signals: their keys (the organisation `all`, a queue `q<id>`, a share
`q<id>/s<id>`, a team `t<id>`, a team within a queue `q<id>/t<id>`), what a rollup row
of one carries, and `Scope`, which sums the figures of the shares in a scope and counts
its policy record.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict

from engine.stats import nearest_rank
from governance.dashboards import formulas as f
from governance.dashboards.selectors.calendar import next_month
from governance.models import PolicyChange, WhatIfReview

ALL = "all"
# What a share's use of a type is charged as (formulas.cost): its own use within its
# limit, what it borrowed, and what it lent to others (formulas.lent_out).
USE_CATEGORIES = ("within_limit", "borrowed", "lent")
HOUR = 3600.0
WAITING_LISTED = 10
# Policy edits people make (imports load a policy; exception changes count as exceptions).
EDIT_CAUSES = (PolicyChange.Cause.EDIT, PolicyChange.Cause.REVERT)
EXCEPTION_COUNTS = ("filed", "approved", "denied", "expired", "revoked")
# What-if reviews (policy changes that needed another admin's approval), by action.
REVIEW_ACTIONS = {
    WhatIfReview.Action.PROPOSED: "proposed",
    WhatIfReview.Action.APPROVED: "approved",
    WhatIfReview.Action.REJECTED: "sent_back",
    WhatIfReview.Action.APPLIED: "applied",
}


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


def coverage(window: tuple[dt.datetime, dt.datetime], measured_from: dt.datetime) -> dict:
    """What part of its month a scope's figures measure: from `measured_from` (the
    month's start, or its first share's creation) to the window's end (the month's end,
    or the moment of computing the month under way). `partial` when that is less than
    the whole month: such a month is labelled and never compared as a whole one."""
    start, stop = window
    month_end = next_month(start.date())
    whole = (dt.datetime.combine(month_end, dt.time(), tzinfo=dt.UTC) - start).total_seconds()
    begin = min(max(measured_from, start), stop)
    seconds = (stop - begin).total_seconds()
    return {
        "start": begin.isoformat(),
        "end": stop.isoformat(),
        "seconds": seconds,
        "month_seconds": whole,
        "partial": seconds < whole,
    }


class Scope:
    """Sums the figures of the shares in a scope, and counts its policy record."""

    def __init__(self, weeks: int) -> None:
        self.instance_seconds = [0.0] * 4
        self.gpu_seconds = [0.0] * 4
        self.by_type: dict[str, dict[str, list[float]]] = defaultdict(
            lambda: {"instance_seconds": [0.0] * 3, "gpu_seconds": [0.0] * 3}
        )
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
        self.reclaim_time: list[int] = []
        self.stops = {cause: dict.fromkeys(f.STOP_KINDS, 0) for cause in f.PREEMPTION_CAUSES}
        self.lost_gpu_seconds_by_stop = {
            cause: dict.fromkeys(f.STOP_KINDS, 0.0) for cause in f.PREEMPTION_CAUSES
        }
        self.protected_blocks: list[int] = []
        self.classes: dict[str, dict] = defaultdict(
            lambda: {
                "reclaim_waits": [],
                "stops": dict.fromkeys(f.STOP_KINDS, 0),
                "lost_gpu_seconds": dict.fromkeys(f.STOP_KINDS, 0.0),
                "protected_blocks": [],
            }
        )
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
        self._add_by_type(share.by_type)
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
        self.reclaim_time.extend(share.reclaim_time)
        for cause in f.PREEMPTION_CAUSES:
            for kind in f.STOP_KINDS:
                self.stops[cause][kind] += share.stops[cause][kind]
                self.lost_gpu_seconds_by_stop[cause][kind] += share.lost_gpu_seconds_by_stop[cause][
                    kind
                ]
        self.protected_blocks.extend(share.protected_blocks)
        for name, figures in share.classes.items():
            mine = self.classes[name]
            mine["reclaim_waits"].extend(figures.reclaim_waits)
            mine["protected_blocks"].extend(figures.protected_blocks)
            for kind in f.STOP_KINDS:
                mine["stops"][kind] += figures.stops[kind]
                mine["lost_gpu_seconds"][kind] += figures.lost_gpu_seconds[kind]
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

    def _add_by_type(self, by_type: dict) -> None:
        for type_name, figures in by_type.items():
            mine = self.by_type[type_name]
            for unit in ("instance_seconds", "gpu_seconds"):
                for index in range(3):
                    mine[unit][index] += figures[unit][index]

    def finish(
        self,
        weeks: list[dt.date],
        window: tuple[dt.datetime, dt.datetime],
        *,
        measured_from: dt.datetime | None = None,
    ) -> dict:
        """The stored figures. `window` is the month up to the moment of computing;
        `measured_from` the scope's first instant in it (its first share's creation when
        later than the month's start)."""
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
        usage_by_type = {
            type_name: {
                unit: dict(zip(USE_CATEGORIES, (x / HOUR for x in figures[seconds]), strict=True))
                for unit, seconds in (
                    ("instance_hours", "instance_seconds"),
                    ("gpu_hours", "gpu_seconds"),
                )
            }
            for type_name, figures in sorted(self.by_type.items())
        }
        return {
            "window": {"start": window[0].isoformat(), "end": window[1].isoformat()},
            "usage_by_type": usage_by_type,
            "lent_gpu_hours": sum(t["gpu_hours"]["lent"] for t in usage_by_type.values()),
            "lent_instance_hours": sum(t["instance_hours"]["lent"] for t in usage_by_type.values()),
            "coverage": coverage(window, measured_from or window[0]),
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
            "jobs_succeeded": counts["jobs_succeeded"],
            # Kept for readers of version 3 (the signals API's `jobs_finished`): the jobs
            # that succeeded, not every job that finished (that is `jobs_ended`).
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
            "reclaim_time_s": f.reclaim_time(reclaim_waits=self.reclaim_time),
            "stops": {
                "by_cause": {cause: dict(kinds) for cause, kinds in self.stops.items()},
                "total": {
                    kind: sum(kinds[kind] for kinds in self.stops.values()) for kind in f.STOP_KINDS
                },
            },
            "lost_gpu_hours_by_stop": {
                "by_cause": {
                    cause: {kind: s / HOUR for kind, s in kinds.items()}
                    for cause, kinds in self.lost_gpu_seconds_by_stop.items()
                },
                "total": {
                    kind: sum(kinds[kind] for kinds in self.lost_gpu_seconds_by_stop.values())
                    / HOUR
                    for kind in f.STOP_KINDS
                },
            },
            "preemptions_avoided": f.preemptions_avoided(protected_blocks=self.protected_blocks),
            "by_class": {
                name: {
                    "reclaim_time_s": f.reclaim_time(reclaim_waits=figures["reclaim_waits"]),
                    "stops": dict(figures["stops"]),
                    "lost_gpu_hours_by_stop": {
                        kind: s / HOUR for kind, s in figures["lost_gpu_seconds"].items()
                    },
                    "preemptions_avoided": f.preemptions_avoided(
                        protected_blocks=figures["protected_blocks"]
                    ),
                }
                for name, figures in sorted(self.classes.items())
            },
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
