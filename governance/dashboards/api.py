"""GET /api/v1/signals/?month=YYYY-MM&scope=...: every signal of one month and scope,
in base units (hours, seconds, counts, fractions) with its n.

Thin: the figures are the stored rollups (governance.dashboards), recomputed first when
the month has none yet or an older version computed them. Readable by leadership and
admins (the rules table's `dashboard.view`). The month rule and every definition are
governance.dashboards.formulas'; the fields below quote them.
"""

from __future__ import annotations

import datetime as dt
import re

from django.conf import settings
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.authentication import TokenAuthentication
from rest_framework.response import Response
from rest_framework.views import APIView

from core.api.permissions import TableAccess
from core.api.serializers import ErrorSerializer
from engine.strategies import spoken_list, strategies_that
from fleet.models import JobQueue, QuotaShare, Team
from fleet.selectors import queue_filter_conflicts
from governance.dashboards import formulas as f
from governance.dashboards.cost import cost_figures
from governance.dashboards.rollups import rollups_refresh
from governance.dashboards.selectors.calendar import month_start
from governance.dashboards.selectors.reads import (
    empty_signals,
    instance_type_prices,
    rollup_current,
    rollup_scope,
    team_fairness_rollups,
)
from governance.dashboards.selectors.scopes import scope_key

FIRST_MONTH = dt.date(2000, 1, 1)
SCOPE_HELP = "`all`, `queue:<queue name>`, `share:<queue name>/<share name>` or `team:<team name>`."
D = f.DEFINITIONS


class SignalsAccess(TableAccess):
    rule_actions = {"read": "dashboard.view", "write": "dashboard.view"}


# -- input --------------------------------------------------------------------------------


class SignalsQuery(serializers.Serializer):
    month = serializers.CharField(
        max_length=7, help_text="The month, YYYY-MM (UTC), from 2000-01 to the current month."
    )
    scope = serializers.CharField(max_length=250, default="all", help_text=SCOPE_HELP)

    def validate_month(self, value: str) -> dt.date:
        if not re.fullmatch(r"\d{4}-\d{2}", value):
            raise serializers.ValidationError("expected a month as YYYY-MM, such as 2025-03")
        try:
            month = dt.date(int(value[:4]), int(value[5:]), 1)
        except ValueError:
            raise serializers.ValidationError("no such month; expected YYYY-MM") from None
        today = dt.datetime.now(dt.UTC).date()
        if not FIRST_MONTH <= month <= month_start(today):
            raise serializers.ValidationError(
                f"must be from {FIRST_MONTH:%Y-%m} to the current month ({today:%Y-%m})"
            )
        return month

    def validate_scope(self, value: str) -> dict:
        kind, _, name = value.partition(":")
        if value == "all":
            return {"key": scope_key(), "kind": "all"}
        if kind == "queue" and name:
            queue = JobQueue.objects.filter(name=name).first()
            if queue is None:
                raise serializers.ValidationError(f"unknown queue '{name}'")
            return {"key": scope_key(queue_id=queue.pk), "kind": "queue"}
        if kind == "team" and name:
            team = Team.objects.filter(name=name).first()
            if team is None:
                raise serializers.ValidationError(f"unknown team '{name}'")
            return {"key": scope_key(team_id=team.pk), "kind": "team", "team_id": team.pk}
        if kind == "share" and "/" in name:
            queue_name, _, share_name = name.partition("/")
            share = QuotaShare.objects.filter(queue__name=queue_name, name=share_name).first()
            if share is None:
                raise serializers.ValidationError(_share_refusal(queue_name, share_name))
            return {
                "key": scope_key(queue_id=share.queue_id, share_id=share.pk),
                "kind": "share",
                "parent": scope_key(queue_id=share.queue_id),
                "queue_id": share.queue_id,
                "team_id": share.team_id,
            }
        raise serializers.ValidationError(f"expected {SCOPE_HELP}")


def _share_refusal(queue_name: str, share_name: str) -> str:
    """Why `share:<queue>/<share>` names no share: the jobs page's and API's rule
    (fleet.selectors.queue_filter_conflicts) when the queue is known and the share is
    another queue's, else the unknown name."""
    queue = JobQueue.objects.filter(name=queue_name).first()
    elsewhere = QuotaShare.objects.filter(name=share_name).exclude(queue__name=queue_name).first()
    if queue is not None and elsewhere is not None:
        return queue_filter_conflicts(queue_id=queue.pk, share_id=elsewhere.pk)["share"]
    return f"unknown share '{share_name}' of queue '{queue_name}'"


# The pages' filter parameters: here one `scope` says which figures (a team's within one
# queue are the dashboard page's alone). Ignored, they would answer for the organisation.
PAGE_PARAMETERS = ("queue", "share", "team")


def page_parameters_refused(params) -> dict[str, str]:
    return {
        name: f"not a parameter of this API (the pages'); use scope: {SCOPE_HELP}"
        for name in PAGE_PARAMETERS
        if name in params
    }


# -- output -------------------------------------------------------------------------------


def _hours(help_text: str):
    return serializers.FloatField(help_text=help_text)


class CapacityHours(serializers.Serializer):
    within_limit = _hours("Used by the share's own jobs within its limit.")
    borrowed = _hours("Run beyond the running share's limit, on capacity lent by others.")
    idle_lendable = _hours(
        f"Limit left unused by a lending share ({spoken_list(strategies_that(lends=True))})."
    )
    idle_reserved = _hours(
        f"Limit left unused and held by a {spoken_list(strategies_that(holds_idle=True))} share."
    )


class LostHours(serializers.Serializer):
    reclaim = _hours("Work redone after reclaims (cross-share preemption).")
    priority = _hours("Work redone after in-share priority preemptions.")
    capacity_change = _hours("Work redone after preemptions by a capacity change.")
    terminated = _hours("Progress of jobs terminated in the month.")
    failed = _hours("Progress of jobs that failed for another reason (retries exhausted, …).")
    requeued = _hours("Work redone after a run was lost with its runner.")


class Preemptions(serializers.Serializer):
    reclaim = serializers.IntegerField(help_text="Reclaims: lending working as agreed.")
    priority = serializers.IntegerField(help_text="In-share preemptions by priority.")
    capacity_change = serializers.IntegerField(help_text="Preemptions by a capacity change.")


class Percentiles(serializers.Serializer):
    p50 = serializers.IntegerField(allow_null=True, help_text="Seconds; null when n is 0.")
    p90 = serializers.IntegerField(allow_null=True, help_text="Seconds; null when n is 0.")
    n = serializers.IntegerField(help_text="Observations.")


class ReclaimTime(Percentiles):
    max = serializers.IntegerField(allow_null=True, help_text="Seconds; null when n is 0.")


class StopCounts(serializers.Serializer):
    immediate = serializers.IntegerField(help_text="Stopped at the preemption (no notice).")
    stopped_without_checkpoint = serializers.IntegerField(
        help_text="Had notice, did not save: rolled back to the last periodic checkpoint."
    )
    checkpointed_on_notice = serializers.IntegerField(help_text="Saved within its notice.")


class StopHours(serializers.Serializer):
    immediate = serializers.FloatField(help_text="GPU-hours lost by immediate stops.")
    stopped_without_checkpoint = serializers.FloatField(
        help_text="GPU-hours lost by stops at the end of a notice without a save."
    )
    checkpointed_on_notice = serializers.FloatField(
        help_text="GPU-hours lost by stops that saved on notice (0 unless a run ended early)."
    )


class StopsByCause(serializers.Serializer):
    cause = serializers.ChoiceField(choices=f.PREEMPTION_CAUSES)
    stops = StopCounts()
    lost_gpu_hours = StopHours()


class Avoided(serializers.Serializer):
    avoided = serializers.IntegerField(help_text="Victim choices a protection changed.")
    jobs = serializers.IntegerField(help_text="n: jobs spared at least once.")


class ClassEvidence(serializers.Serializer):
    workload_class = serializers.CharField(help_text='The class copied onto jobs; "" for none.')
    reclaim_time_s = ReclaimTime(help_text=D["reclaim_time"])
    stops = StopCounts(help_text=D["stops"])
    lost_gpu_hours_by_stop = StopHours(help_text=D["stops"])
    preemptions_avoided = Avoided(help_text=D["preemptions_avoided"])


class Fraction(serializers.Serializer):
    fraction = serializers.FloatField(allow_null=True, help_text="0 to 1; null when n is 0.")
    n = serializers.IntegerField(help_text="Observations.")


class Waiting(serializers.Serializer):
    n = serializers.IntegerField(help_text="Jobs runnable and not started at the month's end.")
    age_p50_s = serializers.IntegerField(allow_null=True, help_text="Median age, seconds.")
    age_p90_s = serializers.IntegerField(allow_null=True, help_text="p90 age, seconds.")
    oldest_s = serializers.IntegerField(allow_null=True, help_text="Oldest age, seconds.")


class Goodput(serializers.Serializer):
    fraction = serializers.FloatField(allow_null=True, help_text=D["goodput"])
    delivered_gpu_hours = serializers.FloatField(help_text="The denominator.")
    n = serializers.IntegerField(help_text="Runs (start to stop on capacity) in the month.")


class QueueFairness(serializers.Serializer):
    queue_id = serializers.IntegerField()
    queue_name = serializers.CharField()
    delivered_gpu_hours = serializers.FloatField(help_text="The scope's, in this queue.")
    entitled_gpu_hours = serializers.FloatField(help_text="The scope's, in this queue.")
    fair_gpu_hours = serializers.FloatField(
        help_text="Its part of the queue's entitlement times what the queue delivered."
    )
    ratio = serializers.FloatField(
        allow_null=True, help_text="delivered / fair; null where nothing ran in the queue."
    )


class Fairness(serializers.Serializer):
    delivered_gpu_hours = serializers.FloatField()
    entitled_gpu_hours = serializers.FloatField()
    fair_gpu_hours = serializers.FloatField(
        help_text="Sum over the queues where anything ran of the scope's fair part there."
    )
    delivered_fraction = serializers.FloatField(
        allow_null=True,
        help_text="Part of its queue's delivered GPU-hours; null when the ratio combines "
        "several queues.",
    )
    entitled_fraction = serializers.FloatField(
        allow_null=True,
        help_text="Part of its queue's entitlement; null when the ratio combines several queues.",
    )
    ratio = serializers.FloatField(
        allow_null=True, help_text="delivered_gpu_hours / fair_gpu_hours."
    )
    queues = serializers.IntegerField(help_text="Queues compared (those where anything ran).")
    by_queue = QueueFairness(many=True, help_text="Each queue where the scope has a share.")


class UseHours(serializers.Serializer):
    within_limit = _hours("Used by the scope's own jobs within their shares' limits.")
    borrowed = _hours("Run beyond the running share's limit, on capacity lent by others.")
    lent = _hours(D["lent_out"])


class UseCost(serializers.Serializer):
    within_limit = serializers.FloatField(help_text="Cost of the use within limit.")
    borrowed = serializers.FloatField(help_text="Cost of the borrowed use.")
    lent = serializers.FloatField(help_text="Cost of the capacity lent to others.")


class Cost(serializers.Serializer):
    currency = serializers.CharField(help_text="settings.COST_CURRENCY (ISO 4217).")
    gpu_hours = UseHours()
    instance_hours = UseHours()
    cost = UseCost(
        allow_null=True,
        help_text="Null when none of the scope's instance types has a price (never 0 for "
        "a missing price).",
    )
    priced_types = serializers.ListField(
        child=serializers.CharField(), help_text="Instance types the cost covers."
    )
    unpriced_types = serializers.ListField(
        child=serializers.CharField(),
        help_text="Instance types the scope used that have no price (not in the cost).",
    )


class Exceptions(serializers.Serializer):
    filed = serializers.IntegerField()
    approved = serializers.IntegerField()
    denied = serializers.IntegerField()
    expired = serializers.IntegerField()
    revoked = serializers.IntegerField()
    active = serializers.IntegerField(help_text="Active at any time in the month.")


class Window(serializers.Serializer):
    start = serializers.DateTimeField()
    end = serializers.DateTimeField(help_text="The month's end, or the time of computing.")


class Coverage(serializers.Serializer):
    start = serializers.DateTimeField(
        help_text="The first instant measured: the month's start, or the scope's first "
        "share's creation when later."
    )
    end = serializers.DateTimeField(help_text="The month's end, or the time of computing.")
    days = serializers.FloatField(help_text="Days measured (end - start).")
    partial = serializers.BooleanField(
        help_text="Whether the figures measure less than the whole month (a first month "
        "started mid-month, or the month under way): not comparable with a whole month."
    )


class SignalsSerializer(serializers.Serializer):
    month = serializers.CharField(help_text="YYYY-MM.")
    scope = serializers.CharField(help_text=SCOPE_HELP)
    month_rule = serializers.CharField(help_text="Which month each figure belongs to.")
    window = Window()
    coverage = Coverage(help_text="What part of the month the figures measure.")
    computed_at = serializers.DateTimeField(allow_null=True)
    instance_hours = CapacityHours(help_text=D["capacity"])
    gpu_hours = CapacityHours(help_text="As instance_hours, times the GPUs per instance.")
    entitlement_use = serializers.FloatField(allow_null=True, help_text=D["entitlement_use"])
    runs = serializers.IntegerField(help_text="Runs (start to stop on capacity) in the month.")
    lost_instance_hours = LostHours(help_text=D["lost"])
    lost_gpu_hours = LostHours(help_text=D["lost"])
    restart_overhead_instance_hours = serializers.FloatField()
    restart_overhead_gpu_hours = serializers.FloatField()
    preemptions = Preemptions()
    jobs_started = serializers.IntegerField(help_text="Jobs that first started in the month.")
    jobs_succeeded = serializers.IntegerField(help_text="Jobs that ended SUCCEEDED in the month.")
    jobs_failed = serializers.IntegerField(help_text="Jobs that ended FAILED in the month.")
    jobs_ended = serializers.IntegerField(
        help_text="Jobs that finished in the month: jobs_succeeded + jobs_failed."
    )
    jobs_finished = serializers.IntegerField(
        help_text="Deprecated, kept for older clients: the same as jobs_succeeded (it never "
        "counted failed jobs; jobs_ended counts both)."
    )
    jobs_waiting_at_end = Waiting()
    turnaround_s = Percentiles(help_text=D["turnaround"])
    wait_s = Percentiles(help_text=D["wait"])
    entitlement_honoured = Fraction(help_text=D["entitlement_honoured"])
    time_to_reclaim_s = Percentiles(help_text=D["time_to_reclaim"])
    reclaim_time_s = ReclaimTime(help_text=D["reclaim_time"])
    stops = StopCounts(help_text=D["stops"])
    lost_gpu_hours_by_stop = StopHours(help_text=D["stops"])
    stops_by_cause = StopsByCause(many=True, help_text=D["stops"])
    preemptions_avoided = Avoided(help_text=D["preemptions_avoided"])
    by_class = ClassEvidence(
        many=True, help_text="The interruption figures by workload class, ordered by name."
    )
    goodput = Goodput()
    completion_rate_preempted = Fraction(help_text=D["recovery"])
    fairness = Fairness(
        allow_null=True,
        help_text=D["fairness"]
        + " "
        + D["fairness_across_queues"]
        + " A share is compared within its queue, a team in each queue where it has a "
        "share. Null for `all` and `queue:` (fairness compares teams within a queue).",
    )
    policy_edits = serializers.IntegerField(help_text=D["policy"])
    exceptions = Exceptions()
    cost = Cost(help_text=D["cost"])


def _percentiles(stats: dict) -> dict:
    return {"p50": stats.get("p50"), "p90": stats.get("p90"), "n": stats["n"]}


def _reclaim_time(stats: dict) -> dict:
    return {**_percentiles(stats), "max": stats.get("max")}


def _interruptions(data: dict) -> dict:
    """The spec v2 evidence of a rollup (formulas.reclaim_time, stop_kind,
    preemptions_avoided) in the API's shape."""
    return {
        "reclaim_time_s": _reclaim_time(data["reclaim_time_s"]),
        "stops": data["stops"]["total"],
        "lost_gpu_hours_by_stop": data["lost_gpu_hours_by_stop"]["total"],
        "stops_by_cause": [
            {
                "cause": cause,
                "stops": data["stops"]["by_cause"][cause],
                "lost_gpu_hours": data["lost_gpu_hours_by_stop"]["by_cause"][cause],
            }
            for cause in f.PREEMPTION_CAUSES
        ],
        "preemptions_avoided": data["preemptions_avoided"],
        "by_class": [
            {
                "workload_class": name,
                "reclaim_time_s": _reclaim_time(figures["reclaim_time_s"]),
                "stops": figures["stops"],
                "lost_gpu_hours_by_stop": figures["lost_gpu_hours_by_stop"],
                "preemptions_avoided": figures["preemptions_avoided"],
            }
            for name, figures in data["by_class"].items()
        ],
    }


def _coverage(data: dict) -> dict:
    coverage = data["coverage"]
    return {
        "start": coverage["start"],
        "end": coverage["end"],
        "days": coverage["seconds"] / 86400,
        "partial": coverage["partial"],
    }


def signals_document(
    *, month: dt.date, scope: str, data: dict, fairness: dict | None, computed_at, cost: dict
):
    """The API's shape of one rollup (`fairness`: formulas.fairness_across_queues of
    the scope, or None; `cost`: governance.dashboards.cost.cost_figures)."""
    return {
        "month": f"{month:%Y-%m}",
        "scope": scope,
        "month_rule": f.MONTH_RULE,
        "window": data["window"],
        "coverage": _coverage(data),
        "computed_at": computed_at,
        "instance_hours": data["instance_hours"],
        "gpu_hours": data["gpu_hours"],
        "entitlement_use": data["entitlement_use"],
        "runs": data["runs"],
        "lost_instance_hours": data["lost_instance_hours"],
        "lost_gpu_hours": data["lost_gpu_hours"],
        "restart_overhead_instance_hours": data["restart_overhead_instance_hours"],
        "restart_overhead_gpu_hours": data["restart_overhead_gpu_hours"],
        "preemptions": data["preemptions"],
        "jobs_started": data["jobs_started"],
        "jobs_succeeded": data["jobs_succeeded"],
        "jobs_failed": data["jobs_failed"],
        "jobs_ended": data["jobs_ended"],
        "jobs_finished": data["jobs_succeeded"],
        "jobs_waiting_at_end": data["jobs_waiting_at_end"],
        "turnaround_s": _percentiles(data["turnaround_s"]),
        "wait_s": _percentiles(data["wait_s"]),
        "entitlement_honoured": {
            "fraction": data["entitlement_honoured"]["fraction"],
            "n": data["entitlement_honoured"]["n"],
        },
        "time_to_reclaim_s": _percentiles(data["time_to_reclaim_s"]),
        **_interruptions(data),
        "goodput": {
            "fraction": data["goodput"],
            "delivered_gpu_hours": data["delivered_gpu_hours"],
            "n": data["runs"],
        },
        "completion_rate_preempted": {
            "fraction": data["completion_rate_preempted"],
            "n": data["preempted_ended"],
        },
        "fairness": fairness,
        "policy_edits": data["policy_edits"],
        "exceptions": data["exceptions"],
        "cost": cost,
    }


def _stored(month: dt.date, key: str) -> tuple[dict | None, object]:
    """The rollup row of `key`, computing the month first when it has none or an
    older version's."""
    if not rollup_current(month=month):
        rollups_refresh(month=month)
    return rollup_scope(month=month, scope=key) or (None, None)


def _fairness(month: dt.date, scope: dict, data: dict) -> dict | None:
    """A share against its queue; a team in each queue where it has a share, combined
    (formulas.fairness_across_queues); none for the organisation or a queue."""
    if scope["kind"] == "team":
        shares, queues = team_fairness_rollups(month=month, team_id=scope["team_id"])
        found = f.fairness_by_team(shares, queues).get(scope["team_id"])
        return found or f.fairness_across_queues([])
    if scope["kind"] == "share":
        queue = (rollup_scope(month=month, scope=scope["parent"]) or (None,))[0]
        queue = queue or empty_signals(month=month)
        share = {**data, "queue_id": scope["queue_id"], "team_id": scope["team_id"]}
        rows = f.fairness_by_queue([share], {scope["queue_id"]: queue})
        return f.fairness_across_queues(rows)
    return None


class SignalsView(APIView):
    permission_classes = [SignalsAccess]

    def get_authenticate_header(self, request):
        # Anonymous requests get 401 with a challenge clients understand.
        return TokenAuthentication().authenticate_header(request)

    @extend_schema(
        summary="The signals of one month and scope (leadership, admins)",
        description=f.MONTH_RULE
        + " A share of another queue (`share:<queue>/<share>`) is a 400 naming `scope`; "
        "the pages' `queue`, `share` and `team` parameters are a 400 naming each "
        "(`scope` says which figures).",
        parameters=[
            OpenApiParameter(
                "month", OpenApiTypes.STR, required=True, description="YYYY-MM (UTC)."
            ),
            OpenApiParameter("scope", OpenApiTypes.STR, description=SCOPE_HELP),
        ],
        responses={
            200: SignalsSerializer,
            400: ErrorSerializer,
            401: ErrorSerializer,
            403: ErrorSerializer,
        },
    )
    def get(self, request):
        query = SignalsQuery(data=request.query_params)
        valid = query.is_valid()
        refused = page_parameters_refused(request.query_params)
        if refused or not valid:
            raise serializers.ValidationError({**query.errors, **refused})
        month, scope = query.validated_data["month"], query.validated_data["scope"]
        data, computed_at = _stored(month, scope["key"])
        if data is None:
            data = empty_signals(month=month)
        document = signals_document(
            month=month,
            scope=request.query_params.get("scope", "all"),
            data=data,
            fairness=_fairness(month, scope, data),
            computed_at=computed_at,
            cost=cost_figures(data, instance_type_prices(), settings.COST_CURRENCY),
        )
        return Response(SignalsSerializer(document).data)
