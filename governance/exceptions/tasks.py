"""Celery tasks of the governance app: exceptions take effect and end on time.

An approved request's activation is sent at approval with an ETA of its window's start
(governance.exceptions.services.schedule_activation), on the `interactive` queue, so it
takes effect within seconds of the start. Beat runs `governance.exceptions.sweep` every
minute (declared with every periodic task in config/celery.py) as the fallback: it
enqueues what is due, and sends with their ETA the activations and expiries due before
the next sweep (a lost ETA message, a worker restart). The sweep only finds request ids
and enqueues one thin task per request; each task claims its transition with a
conditional UPDATE (governance.exceptions.services), so a task delivered twice, two
sweeps overlapping, or a sweep that runs late (after a worker outage) never applies or
takes back an exception twice. A late activation whose window already passed expires
without taking effect.
"""

from __future__ import annotations

from datetime import timedelta

from celery import shared_task
from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from core.celery import retry_policy
from governance.exceptions.selectors import exceptions_to_activate, exceptions_to_expire
from governance.exceptions.services import exception_request_activate, exception_request_expire
from governance.models import ExceptionRequest
from governance.policy.services import VersionConflict

State = ExceptionRequest.State

# Transient besides the database: an admin saved the share between our read and write.
RETRY = retry_policy(VersionConflict)


@shared_task(name="governance.exceptions.activate", acks_late=True, **RETRY)
def activate_exception(request_id: int) -> bool:
    return exception_request_activate(request_id=request_id)


@shared_task(name="governance.exceptions.expire", acks_late=True, **RETRY)
def expire_exception(request_id: int) -> bool:
    return exception_request_expire(request_id=request_id)


@shared_task(name="governance.exceptions.sweep", acks_late=True, **RETRY)
def sweep_exceptions() -> dict[str, int]:
    """Enqueue the due activations and expiries (expiries first: a share's limit goes
    back before a new exception on it adds to it), and those due before the next sweep
    with their ETA."""
    now = timezone.now()
    soon = now + timedelta(seconds=settings.EXCEPTIONS_SWEEP_SECONDS + 10)
    expire_ids = exceptions_to_expire(now=now)
    activate_ids = exceptions_to_activate(now=now)
    for request_id in expire_ids:
        transaction.on_commit(lambda pk=request_id: expire_exception.delay(pk))
    for request_id in activate_ids:
        transaction.on_commit(lambda pk=request_id: activate_exception.delay(pk))
    upcoming = ExceptionRequest.objects.filter(
        Q(state=State.APPROVED, window_start__gt=now, window_start__lte=soon)
        | Q(state=State.ACTIVE, window_end__gt=now, window_end__lte=soon)
    ).values_list("pk", "state", "window_start", "window_end")
    for request_id, state, start, end in upcoming:
        task = activate_exception if state == State.APPROVED else expire_exception
        at = start if state == State.APPROVED else end
        transaction.on_commit(lambda t=task, pk=request_id, at=at: t.apply_async((pk,), eta=at))
    return {"expire": len(expire_ids), "activate": len(activate_ids)}
