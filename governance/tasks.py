"""Celery tasks of the governance app: exceptions take effect and end on time.

Beat runs `governance.exceptions.sweep` every minute (declared below, the one place
these periodic tasks are declared). The sweep only finds due request ids and
enqueues one thin task per request; each task claims its transition with a
conditional UPDATE (governance.services.exceptions), so a task delivered twice, two
sweeps overlapping, or a sweep that runs late (after a worker outage) never applies
or takes back an exception twice. A late activation whose window already passed
expires without taking effect.
"""

from __future__ import annotations

from celery import shared_task
from django.db import OperationalError, transaction
from django.utils import timezone

from governance.celery import app
from governance.selectors.exceptions import exceptions_to_activate, exceptions_to_expire
from governance.services.exceptions import exception_request_activate, exception_request_expire
from governance.services.policy import VersionConflict

# Transient: the database was busy, or an admin saved the share between our read and
# write. Anything else is a bug or a rule, and retrying would not help.
TRANSIENT = (OperationalError, VersionConflict)
RETRY = {"autoretry_for": TRANSIENT, "retry_backoff": 5, "retry_backoff_max": 120, "max_retries": 5}


@shared_task(name="governance.exceptions.activate", acks_late=True, **RETRY)
def activate_exception(request_id: int) -> bool:
    return exception_request_activate(request_id=request_id)


@shared_task(name="governance.exceptions.expire", acks_late=True, **RETRY)
def expire_exception(request_id: int) -> bool:
    return exception_request_expire(request_id=request_id)


@shared_task(name="governance.exceptions.sweep", acks_late=True, **RETRY)
def sweep_exceptions() -> dict[str, int]:
    """Enqueue the due activations and expiries (expiries first: a share's limit goes
    back before a new exception on it adds to it)."""
    now = timezone.now()
    expire_ids = exceptions_to_expire(now=now)
    activate_ids = exceptions_to_activate(now=now)
    for request_id in expire_ids:
        transaction.on_commit(lambda pk=request_id: expire_exception.delay(pk))
    for request_id in activate_ids:
        transaction.on_commit(lambda pk=request_id: activate_exception.delay(pk))
    return {"expire": len(expire_ids), "activate": len(activate_ids)}


# Every minute: a window starts or ends at most a minute late.
app.conf.beat_schedule.update(
    {
        "exceptions-sweep": {
            "task": "governance.exceptions.sweep",
            "schedule": 60.0,
            "options": {"expires": 55},
        }
    }
)


# Celery autodiscovers only `<app>.tasks`: the other task modules of this app load here.
from governance import dashboard_tasks  # noqa: E402, F401
from governance.whatif import tasks as whatif_tasks  # noqa: E402, F401
