"""Reads of exception requests: lists by who may see them, the decision queue, counts."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.contrib.auth import get_user_model
from django.db.models import Count, Exists, OuterRef, Prefetch, Q, QuerySet
from django.utils import timezone

from core import rules
from core.permissions import EXCEPTION_OWNERS
from fleet.models import Job
from governance.models import ExceptionEvent, ExceptionOwner, ExceptionRequest, PolicyChange

State = ExceptionRequest.State


def _base() -> QuerySet[ExceptionRequest]:
    return ExceptionRequest.objects.select_related(
        "team", "queue", "share", "instance_type", "urgency", "requested_by", "decided_by"
    ).prefetch_related(Prefetch("jobs", queryset=Job.objects.only("id", "name", "share_id")))


def _in_scope(user) -> Exists:
    """The request's queue or share has `user` among its exception owners."""
    return Exists(
        ExceptionOwner.objects.filter(user=user).filter(
            Q(queue=OuterRef("queue")) | Q(share=OuterRef("share"))
        )
    )


def exception_request_list(
    *,
    user,
    state: str | None = None,
    kind: str | None = None,
    team_id: int | None = None,
    urgency_id: int | None = None,
    queue_id: int | None = None,
) -> QuerySet[ExceptionRequest]:
    """The requests `user` may see, newest first, with the filters applied."""
    requests = rules.visible(user, "exception.view", _base())
    if state:
        requests = requests.filter(state=state)
    if kind:
        requests = requests.filter(kind=kind)
    if team_id:
        requests = requests.filter(team_id=team_id)
    if urgency_id:
        requests = requests.filter(urgency_id=urgency_id)
    if queue_id:
        requests = requests.filter(queue_id=queue_id)
    return requests.order_by("-created_at", "-id")


def exception_request_get(*, pk: int) -> ExceptionRequest:
    return _base().get(pk=pk)


def _waiting_for(user, requests: QuerySet[ExceptionRequest]) -> QuerySet[ExceptionRequest]:
    """Submitted requests in `user`'s scope as an exception owner that the rules let them
    decide (not their own, not of a team they lead or belong to)."""
    if not rules.allowed(user, "exception.decision_queue"):
        return requests.none()
    requests = requests.filter(_in_scope(user), state=State.SUBMITTED)
    return rules.visible(user, "exception.decide", requests)


def decision_queue(*, user) -> QuerySet[ExceptionRequest]:
    """The requests waiting for `user`'s decision, oldest first."""
    return _waiting_for(user, _base()).order_by("submitted_at", "id")


def decision_queue_count(*, user) -> int:
    """The top bar's badge: how many requests wait for `user`'s decision."""
    return _waiting_for(user, ExceptionRequest.objects.all()).count()


def waiting_seconds(request: ExceptionRequest, *, now: datetime | None = None) -> int:
    now = now or timezone.now()
    since = request.submitted_at or request.created_at
    return max(int((now - since).total_seconds()), 0)


def request_owners(*, request: ExceptionRequest) -> list:
    """The exception owners whose scope covers `request` and who may decide it (they are
    told of it): not the requester, nobody who leads or belongs to its team."""
    User = get_user_model()
    scope = Q(exception_scopes__queue_id=request.queue_id)
    if request.share_id:
        scope |= Q(exception_scopes__share_id=request.share_id)
    owners = User.objects.filter(scope, groups__name=EXCEPTION_OWNERS, is_active=True).distinct()
    return [
        owner
        for owner in owners.order_by("username")
        if rules.allowed(owner, "exception.decide", request)
    ]


def requester_history(*, request: ExceptionRequest, limit: int = 5) -> list[ExceptionRequest]:
    """The requester's other recent requests, for the decider."""
    return list(
        ExceptionRequest.objects.select_related("urgency", "team")
        .filter(requested_by_id=request.requested_by_id)
        .exclude(pk=request.pk)
        .order_by("-created_at", "-id")[:limit]
    )


def request_timeline(*, request: ExceptionRequest) -> list[ExceptionEvent]:
    return list(request.events.select_related("actor").order_by("at", "id"))


def request_policy_changes(*, request: ExceptionRequest) -> list[PolicyChange]:
    return list(
        PolicyChange.objects.select_related("actor")
        .filter(exception_request=request)
        .order_by("created_at", "id")
    )


def active_exceptions(*, queue=None, share=None) -> QuerySet[ExceptionRequest]:
    """Requests in effect now (for the purple outline on queue and share pages)."""
    requests = _base().filter(state=State.ACTIVE)
    if queue is not None:
        requests = requests.filter(queue=queue)
    if share is not None:
        requests = requests.filter(share=share)
    return requests.order_by("window_end", "id")


def exceptions_to_activate(*, now: datetime) -> list[int]:
    """Approved requests whose window has begun (including ones whose window passed)."""
    return list(
        ExceptionRequest.objects.filter(state=State.APPROVED, window_start__lte=now)
        .order_by("window_start", "id")
        .values_list("id", flat=True)
    )


def exceptions_to_expire(*, now: datetime) -> list[int]:
    return list(
        ExceptionRequest.objects.filter(state=State.ACTIVE, window_end__lte=now)
        .order_by("window_end", "id")
        .values_list("id", flat=True)
    )


@dataclass(frozen=True)
class CountRow:
    label: str
    counts: dict[str, int]  # state -> count
    total: int


@dataclass(frozen=True)
class ExceptionCounts:
    states: list[tuple[str, str]]  # (value, label) in lifecycle order
    by_state: dict[str, int]
    by_urgency: list[CountRow]
    by_team: list[CountRow]
    total: int


def exception_counts(
    *, since: datetime | None = None, until: datetime | None = None, queue_id: int | None = None
) -> ExceptionCounts:
    """Requests filed in [since, until) counted by state, by urgency and state, and by team
    and state (drafts are not counted: nobody has asked yet). Three queries."""
    requests = ExceptionRequest.objects.exclude(state=State.DRAFT)
    if since is not None:
        requests = requests.filter(created_at__gte=since)
    if until is not None:
        requests = requests.filter(created_at__lt=until)
    if queue_id is not None:
        requests = requests.filter(queue_id=queue_id)
    by_state = dict(requests.values("state").annotate(n=Count("id")).values_list("state", "n"))
    states = [(value, label) for value, label in State.choices if value != State.DRAFT]

    def rows(field: str) -> list[CountRow]:
        grouped: dict[str, dict[str, int]] = {}
        for label, state, n in (
            requests.values(field, "state").annotate(n=Count("id")).values_list(field, "state", "n")
        ):
            grouped.setdefault(label, {})[state] = n
        return [
            CountRow(label=label, counts=counts, total=sum(counts.values()))
            for label, counts in sorted(
                grouped.items(), key=lambda item: (-sum(item[1].values()), item[0])
            )
        ]

    return ExceptionCounts(
        states=states,
        by_state={value: by_state.get(value, 0) for value, _ in states},
        by_urgency=rows("urgency__name"),
        by_team=rows("team__name"),
        total=sum(by_state.values()),
    )
