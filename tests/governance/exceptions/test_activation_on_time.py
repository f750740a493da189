"""An approved exception takes effect within seconds of its window's start, with a real
Celery worker on Redis and PostgreSQL: the approval sends the activation with an ETA
of the start; the minute sweep sends it again for windows starting before its next
run, should that message be lost."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from django.utils import timezone

from core.celery import app
from governance.exceptions import services, tasks
from governance.models import ExceptionRequest
from tests.scheduler.live.conftest import start_worker, wait_for, worker_env  # noqa: F401

State = ExceptionRequest.State
pytestmark = [
    pytest.mark.redis,
    pytest.mark.postgres,
    pytest.mark.django_db(transaction=True),
]

LEAD = 4  # seconds from approval to the window's start


def request_starting_soon(scene, lead: float = LEAD) -> ExceptionRequest:
    now = timezone.now()
    return scene.file(
        scene.capacity(
            window_start=now + timedelta(seconds=lead), window_end=now + timedelta(hours=2)
        )
    )


def wait_active(request: ExceptionRequest, lead: float = LEAD) -> ExceptionRequest:
    def active():
        request.refresh_from_db()
        return request.state == State.ACTIVE

    wait_for(active, timeout=lead + 15, interval=0.1, what="the exception to take effect")
    return request


def test_an_approved_exception_takes_effect_within_seconds_of_its_start(scene, start_worker):  # noqa: F811
    start_worker(queues="interactive", name="interactive")
    request = request_starting_soon(scene)
    services.exception_request_approve(actor=scene.owner, request=request)
    request.refresh_from_db()
    assert request.state == State.APPROVED

    wait_active(request)
    seen = timezone.now()
    assert request.activated_at >= request.window_start
    assert (request.activated_at - request.window_start).total_seconds() < 5
    assert (seen - request.window_start).total_seconds() < 5
    assert scene.qs1.limits.get().max_instances == 2


def test_the_sweep_sends_the_activations_due_before_its_next_run(scene, start_worker):  # noqa: F811
    # Longer ahead than a worker takes to start on a loaded machine: the sweep must find
    # the window not begun yet, and send its activation with an ETA.
    lead = 15
    request = request_starting_soon(scene, lead)
    services.exception_request_approve(actor=scene.owner, request=request)
    app.control.purge()  # the approval's message is lost
    start_worker(queues="interactive", name="interactive")

    assert timezone.now() < request.window_start  # else the test says nothing
    result = tasks.sweep_exceptions()
    assert result == {"expire": 0, "activate": 0}  # nothing due yet: sent with its ETA
    began = time.monotonic()
    wait_active(request, lead)
    assert (request.activated_at - request.window_start).total_seconds() < 5
    assert time.monotonic() - began < lead + 5
