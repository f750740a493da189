"""Taking effect and ending: through the policy services, exactly once, delta only."""

import datetime as dt
from datetime import timedelta

import pytest
from django.utils import timezone

from core.signals import policy_changed
from fleet.models import Job, JobEvent, QuotaShare
from fleet.selectors import share_document
from governance.dashboards.rollups import rollups_refresh
from governance.dashboards.selectors.calendar import month_start
from governance.dashboards.selectors.reads import dashboard_rollups
from governance.exceptions import services, tasks
from governance.models import ExceptionRequest, PolicyChange
from governance.policy.services import share_data_from_document, share_update
from scheduler.selectors import job_timeline
from scheduler.services.jobs import job_set_priority

State = ExceptionRequest.State
pytestmark = pytest.mark.django_db


def limit(share) -> int:
    return share.limits.get().max_instances


def approved_capacity(scene, *, starts_in=timedelta(hours=1), hours=4, extra=1):
    request = scene.file(
        scene.capacity(
            window_start=scene.now + starts_in,
            window_end=scene.now + starts_in + timedelta(hours=hours),
            extra_instances=extra,
        )
    )
    services.exception_request_approve(actor=scene.owner, request=request, now=scene.now)
    request.refresh_from_db()
    return request


def test_activation_goes_through_share_update_and_links_the_change(scene):
    request = approved_capacity(scene)
    assert request.state == State.APPROVED and limit(scene.qs1) == 1

    start = request.window_start
    assert services.exception_request_activate(request_id=request.pk, now=start) is True
    request.refresh_from_db()
    assert request.state == State.ACTIVE
    assert limit(scene.qs1) == 2
    change = PolicyChange.objects.get(exception_request=request)
    assert change.cause == PolicyChange.Cause.EXCEPTION
    assert change.share == scene.qs1
    assert change.before["capacity_limits"] == {"ml.g5.xlarge": 1}
    assert change.after["capacity_limits"] == {"ml.g5.xlarge": 2}
    assert request.applied == {
        "instance_type": "ml.g5.xlarge",
        "delta": 1,
        "limit_before": 1,
        "limit_after": 2,
    }


def test_activation_and_expiry_run_exactly_once_when_the_task_runs_twice(scene, monkeypatch):
    request = approved_capacity(scene, starts_in=timedelta(hours=-1), hours=2)
    # Approval inside the window activated it; the task finds nothing more to do.
    assert tasks.activate_exception(request.pk) is False
    assert tasks.activate_exception(request.pk) is False
    assert PolicyChange.objects.filter(exception_request=request).count() == 1

    after_end = request.window_end + timedelta(seconds=1)
    monkeypatch.setattr(timezone, "now", lambda: after_end)
    assert tasks.expire_exception(request.pk) is True
    assert tasks.expire_exception(request.pk) is False
    request.refresh_from_db()
    assert request.state == State.EXPIRED
    assert limit(scene.qs1) == 1
    assert PolicyChange.objects.filter(exception_request=request).count() == 2
    assert request.events.filter(type="EXPIRED").count() == 1


@pytest.fixture
def eager(monkeypatch):
    """Enqueued tasks run at once, in this process (no broker, no global Celery config)."""
    for task in (tasks.activate_exception, tasks.expire_exception):
        monkeypatch.setattr(task, "delay", task)


def test_the_sweep_activates_then_expires_and_a_second_sweep_does_nothing(
    scene, monkeypatch, django_capture_on_commit_callbacks, eager
):
    request = approved_capacity(scene)
    monkeypatch.setattr(timezone, "now", lambda: request.window_start + timedelta(seconds=5))
    with django_capture_on_commit_callbacks(execute=True):
        assert tasks.sweep_exceptions() == {"expire": 0, "activate": 1}
    with django_capture_on_commit_callbacks(execute=True):
        assert tasks.sweep_exceptions() == {"expire": 0, "activate": 0}
    assert limit(scene.qs1) == 2

    monkeypatch.setattr(timezone, "now", lambda: request.window_end + timedelta(minutes=3))
    with django_capture_on_commit_callbacks(execute=True):
        assert tasks.sweep_exceptions() == {"expire": 1, "activate": 0}
    with django_capture_on_commit_callbacks(execute=True):
        assert tasks.sweep_exceptions() == {"expire": 0, "activate": 0}
    request.refresh_from_db()
    assert request.state == State.EXPIRED and limit(scene.qs1) == 1
    assert PolicyChange.objects.filter(exception_request=request).count() == 2


def test_a_late_activation_after_the_window_expires_without_taking_effect(scene):
    request = approved_capacity(scene, hours=2)
    late = request.window_end + timedelta(hours=3)  # workers were down all window
    assert services.exception_request_activate(request_id=request.pk, now=late) is True
    assert services.exception_request_activate(request_id=request.pk, now=late) is False
    request.refresh_from_db()
    assert request.state == State.EXPIRED
    assert limit(scene.qs1) == 1
    assert not PolicyChange.objects.filter(exception_request=request).exists()
    assert "before the exception could take effect" in request.events.last().note


def test_a_late_expiry_still_takes_back_once(scene):
    request = approved_capacity(scene, starts_in=timedelta(hours=-1), hours=2)
    late = request.window_end + timedelta(days=2)
    assert services.exception_request_expire(request_id=request.pk, now=late) is True
    assert services.exception_request_expire(request_id=request.pk, now=late) is False
    assert limit(scene.qs1) == 1
    request.refresh_from_db()
    assert request.ended_at == late


def test_expiry_before_the_end_does_nothing(scene):
    request = approved_capacity(scene, starts_in=timedelta(hours=-1), hours=2)
    assert services.exception_request_expire(request_id=request.pk, now=scene.now) is False
    assert limit(scene.qs1) == 2


def test_expiry_takes_back_only_the_exceptions_delta(scene, admin):
    request = approved_capacity(scene, starts_in=timedelta(hours=-1), hours=2, extra=1)
    assert limit(scene.qs1) == 2
    # Meanwhile an admin raises the limit by one and turns off in-share preemption.
    share = scene.qs1
    share.refresh_from_db()
    doc = share_document(share)
    doc["capacity_limits"] = {"ml.g5.xlarge": 3}
    doc["in_share_preemption"] = False
    share_update(
        actor=admin,
        share=share,
        data=share_data_from_document(doc),
        reason="more for vision",
        expected_version=share.version,
    )
    services.exception_request_expire(request_id=request.pk, now=request.window_end)
    share.refresh_from_db()
    assert limit(share) == 2  # 3 minus the exception's 1: the admin's +1 stays
    assert share.in_share_preemption is False
    expiry = PolicyChange.objects.filter(exception_request=request).order_by("id").last()
    assert expiry.actor is None and expiry.cause == PolicyChange.Cause.EXCEPTION
    assert expiry.before["capacity_limits"] == {"ml.g5.xlarge": 3}
    assert expiry.after["capacity_limits"] == {"ml.g5.xlarge": 2}


def test_an_exception_beyond_the_queue_capacity_cannot_take_effect(scene, admin):
    request = approved_capacity(scene, extra=2)  # 1 + 2 = 3: fits the queue's 3
    # The queue shrinks before the window starts.
    from governance.policy.services import queue_set_capacity

    scene.queue.refresh_from_db()
    # Other shares keep their limit of 1 each, so the queue can go down to 2.
    queue_set_capacity(
        actor=admin,
        queue=scene.queue,
        capacity={"ml.g5.xlarge": 2},
        reason="hardware returned",
        expected_version=scene.queue.version,
    )
    assert (
        services.exception_request_activate(request_id=request.pk, now=request.window_start)
        is False
    )
    request.refresh_from_db()
    assert request.state == State.APPROVED
    failure = request.events.get(type="APPLY_FAILED")
    assert "more than the queue's capacity of 2" in failure.note
    # Trying again says it once, not once per sweep.
    services.exception_request_activate(request_id=request.pk, now=request.window_start)
    assert request.events.filter(type="APPLY_FAILED").count() == 1


@pytest.fixture
def still_running(scene):
    """The scene's running job with work left for days: on its simulated queue, the job
    services end a job whose work is done (30 minutes at 60x finishes an hour's)."""
    Job.objects.filter(pk=scene.running.pk).update(expected_duration=10**8)
    scene.running.refresh_from_db()


def test_priority_raise_sets_the_urgency_priority_and_expiry_restores_it(
    scene, django_capture_on_commit_callbacks, still_running
):
    passes = []
    receiver = lambda sender, queue_id, **kw: passes.append(queue_id)  # noqa: E731
    policy_changed.connect(receiver)
    try:
        request = scene.file(scene.jobs(jobs=[scene.running, scene.waiting]))
        with django_capture_on_commit_callbacks(execute=True):
            services.exception_request_approve(actor=scene.owner, request=request, now=scene.now)
        assert set(Job.objects.values_list("priority", flat=True)) == {900}
        assert passes == [scene.queue.pk]
        # Someone sets the waiting job's priority by hand meanwhile: that stays.
        Job.objects.filter(pk=scene.waiting.pk).update(priority=5)
        request.refresh_from_db()
        with django_capture_on_commit_callbacks(execute=True):
            services.exception_request_expire(request_id=request.pk, now=request.window_end)
        assert passes == [scene.queue.pk, scene.queue.pk]
    finally:
        policy_changed.disconnect(receiver)
    scene.running.refresh_from_db()
    scene.waiting.refresh_from_db()
    assert (scene.running.priority, scene.waiting.priority) == (1, 5)


def priority_events(job):
    return [
        (event.cause, event.detail, event.actor)
        for event in job.events.filter(type=JobEvent.Type.PRIORITY_CHANGED).order_by("at", "id")
    ]


def priority_changes_counted(queue, *moments) -> int:
    """The dashboard's "priority changes" of `queue`, over the months of `moments`."""
    total = 0
    for month in sorted({month_start(moment.astimezone(dt.UTC).date()) for moment in moments}):
        rollups_refresh(month=month, now=max(moments) + timedelta(minutes=1))
        total += dashboard_rollups(month=month, queue_id=queue.pk)["current"]["priority_changes"]
    return total


def test_a_raise_and_its_take_back_are_priority_events_on_the_timeline_and_the_dashboard(
    scene, still_running
):
    request = scene.file(scene.jobs(jobs=[scene.running, scene.waiting]))
    services.exception_request_approve(actor=scene.owner, request=request, now=scene.now)
    ended = request.window_end
    assert services.exception_request_expire(request_id=request.pk, now=ended) is True

    raised = {"from": 1, "to": 900, "exception": request.pk, "step": "raised"}
    back = {"from": 900, "to": 1, "exception": request.pk, "step": "expired"}
    for job in (scene.running, scene.waiting):
        job.refresh_from_db()
        assert job.priority == 1
        assert priority_events(job) == [
            ("exception", raised, scene.owner),
            ("exception", back, None),
        ]
        texts = [entry.text for entry in job_timeline(job)]
        assert f"priority changed from 1 to 900: exception #{request.pk} raised it" in texts
        assert (
            f"priority changed from 900 to 1: exception #{request.pk} expired, its raise taken back"
            in texts
        )
    # Two jobs, each raised and taken back.
    assert priority_changes_counted(scene.queue, scene.now, ended) == 4


def test_a_priority_the_lead_set_in_the_window_does_not_outlive_the_exception(scene, still_running):
    QuotaShare.objects.filter(pk=scene.qs1.pk).update(priority_ceiling=100)
    Job.objects.filter(pk=scene.running.pk).update(priority=50)
    scene.urgency.priority = 700
    scene.urgency.save()
    request = scene.file(scene.jobs())
    services.exception_request_approve(actor=scene.owner, request=request, now=scene.now)
    # The lead lowers it during the window, still above the share's ceiling of 100:
    # only the exception allows 650.
    later = scene.now + timedelta(minutes=10)
    job_set_priority(job_id=scene.running.pk, priority=650, actor=scene.lead, now=later)

    revoked_at = later + timedelta(minutes=10)
    services.exception_request_revoke(
        actor=scene.owner, request=request, reason="deadline moved", now=revoked_at
    )
    scene.running.refresh_from_db()
    assert scene.running.priority == 50  # what it had before the raise
    assert priority_events(scene.running) == [
        (
            "exception",
            {"from": 50, "to": 700, "exception": request.pk, "step": "raised"},
            scene.owner,
        ),
        ("", {"from": 700, "to": 650}, scene.lead),
        (
            "exception",
            {"from": 650, "to": 50, "exception": request.pk, "step": "revoked"},
            scene.owner,
        ),
    ]
    texts = [entry.text for entry in job_timeline(scene.running)]
    assert (
        f"priority changed from 650 to 50: exception #{request.pk} revoked by "
        f"{scene.owner.get_username()}, its raise taken back"
    ) in texts
    assert priority_changes_counted(scene.queue, scene.now, revoked_at) == 3


def test_a_priority_the_share_allows_on_its_own_set_in_the_window_stays(scene, still_running):
    QuotaShare.objects.filter(pk=scene.qs1.pk).update(priority_ceiling=100)
    request = scene.file(scene.jobs())
    services.exception_request_approve(actor=scene.owner, request=request, now=scene.now)
    job_set_priority(job_id=scene.running.pk, priority=80, actor=scene.lead, now=scene.now)
    services.exception_request_revoke(actor=scene.owner, request=request, reason="done")
    scene.running.refresh_from_db()
    assert scene.running.priority == 80
    assert [cause for cause, _, _ in priority_events(scene.running)] == ["exception", ""]


def test_the_take_back_stops_at_the_ceiling_when_the_old_priority_is_above_it_now(
    scene, still_running
):
    Job.objects.filter(pk=scene.running.pk).update(priority=50)
    request = scene.file(scene.jobs())
    services.exception_request_approve(actor=scene.owner, request=request, now=scene.now)
    # Meanwhile an admin lowers the share's ceiling below the job's old priority.
    QuotaShare.objects.filter(pk=scene.qs1.pk).update(priority_ceiling=20)
    services.exception_request_expire(request_id=request.pk, now=request.window_end)
    scene.running.refresh_from_db()
    assert scene.running.priority == 20


def test_protection_sets_protected_until_and_expiry_clears_it(scene):
    request = scene.file(scene.jobs(kind=ExceptionRequest.Kind.PREEMPTION_PROTECTION))
    services.exception_request_approve(actor=scene.owner, request=request, now=scene.now)
    scene.running.refresh_from_db()
    assert scene.running.protected_until == request.window_end
    services.exception_request_revoke(actor=scene.owner, request=request, reason="done")
    scene.running.refresh_from_db()
    assert scene.running.protected_until is None


def test_the_beat_schedule_declares_the_sweep():
    from core.celery import app

    entry = app.conf.beat_schedule["exceptions-sweep"]
    assert entry["task"] == "governance.exceptions.sweep"
    assert entry["schedule"] == 60.0
