"""The demo's exception requests: an owner for the AWS sample queue, one request waiting
and one denied earlier."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.utils import timezone

from fleet.models import Job, JobQueue, Team, UrgencyDefinition
from governance.exceptions.services import (
    RequestData,
    exception_owner_add,
    exception_request_create,
    exception_request_deny,
)
from governance.models import ExceptionRequest

Kind = ExceptionRequest.Kind


def seed_exceptions(*, admin, lead, owner, queue: JobQueue, now: datetime | None = None) -> None:
    """Demo: `owner` decides for `queue`; `lead` has one request waiting (temporary
    capacity) and one denied earlier. Idempotent: does nothing if the queue has requests."""
    now = now or timezone.now()
    exception_owner_add(actor=admin, user=owner, queue=queue)
    if queue.exception_requests.exists():
        return
    team = Team.objects.filter(leads=lead, shares__queue=queue).distinct().first()
    urgencies = {u.name: u for u in UrgencyDefinition.objects.all()}
    share = queue.shares.filter(team=team).first() if team else None
    capacity = queue.capacities.select_related("instance_type").first()
    capacity_urgency = next(
        (u for u in urgencies.values() if Kind.TEMPORARY_CAPACITY in u.allowed_kinds), None
    )
    if share is None or capacity is None or capacity_urgency is None:
        return
    exception_request_create(
        actor=lead,
        data=RequestData(
            kind=Kind.TEMPORARY_CAPACITY,
            team=team,
            urgency=capacity_urgency,
            justification="The launch model's final fine-tune needs a second instance for a "
            "day; the other shares are idle this week.",
            window_start=now + timedelta(hours=1),
            window_end=now + timedelta(hours=min(capacity_urgency.max_window_hours, 24)),
            share=share,
            instance_type=capacity.instance_type,
            extra_instances=1,
        ),
        submit=True,
        now=now,
    )
    jobs = list(Job.objects.filter(share=share, state=Job.State.RUNNING).order_by("id")[:1])
    protection = next(
        (u for u in urgencies.values() if Kind.PREEMPTION_PROTECTION in u.allowed_kinds), None
    )
    if jobs and protection is not None:
        denied = exception_request_create(
            actor=lead,
            data=RequestData(
                kind=Kind.PREEMPTION_PROTECTION,
                team=team,
                urgency=protection,
                justification="Protect the pre-training run while it checkpoints rarely.",
                window_start=now,
                window_end=now + timedelta(hours=min(protection.max_window_hours, 12)),
                jobs=jobs,
            ),
            submit=True,
            now=now,
        )
        exception_request_deny(
            actor=owner,
            request=denied,
            note="The run checkpoints every 10 minutes; reclaim costs little. Lower the "
            "checkpoint interval risk instead.",
            now=now,
        )
