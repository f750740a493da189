"""Start estimates are made in the background and stored (scheduler.services.estimates):
a read serves the stored forecast, and says "as of" when the queue changed since; the
first forecast is computed by the read, later ones by `scheduler.estimate_queue`, asked
after a pass or by a read of a forecast that is no longer current.

The AWS sample queue: three ml.g5.xlarge; qs1 LEND_AND_BORROW, qs2 LEND, qs3 RESERVE.
Reads compute nothing here but the first forecast (`ESTIMATE_SYNC_MAX_LIVE` = 0)."""

from __future__ import annotations

import pytest
from django.core.cache import cache
from django.urls import reverse
from rest_framework.test import APIClient

from core.celery import app
from fleet.models import InstanceType, Job
from scheduler.services.estimates import store
from scheduler.services.estimates.reads import queue_estimates, submission_estimate
from scheduler.services.jobs import JobData
from scheduler.services.passes import scheduling_pass
from tests.scheduler.live.conftest import wait_for

LONG = 36_000


@pytest.fixture
def stored_only(settings, queue):
    """Reads never compute a forecast once one is stored; nothing is stored yet."""
    settings.ESTIMATE_SYNC_MAX_LIVE = 0
    key = store.cache_key(queue.pk)
    cache.delete_many([key, key + ":v", key + ":asked", key + ":computing"])
    store.forget_local()
    yield
    cache.delete_many([key, key + ":v", key + ":asked", key + ":computing"])
    store.forget_local()


def test_the_forecast_task_is_background_work_and_never_holds_up_a_pass():
    route = app.amqp.router.route
    assert route({}, "scheduler.estimate_queue")["queue"].name == "celery"
    assert route({}, "scheduler.run_pass")["queue"].name == "interactive"


@pytest.mark.django_db
def test_a_changed_queue_is_served_as_of_its_last_forecast_until_a_new_one_is_stored(
    queue, submit, lead, shares, stored_only, client, django_capture_on_commit_callbacks
):
    submit("qs1", "first", at=None, expected_duration=LONG)
    submit("qs1", "borrower", at=None, expected_duration=LONG)
    scheduling_pass(queue_id=queue.pk)
    head = submit("qs1", "head", at=None, expected_duration=100)
    first = queue_estimates(queue)  # nothing stored: computed by this read
    assert first.current and [entry.job_id for entry in first.entries] == [head.pk]

    late = submit("qs1", "late", at=None, expected_duration=100)
    with django_capture_on_commit_callbacks(execute=True):
        stale = queue_estimates(queue)
    # The last forecast, said to be so; the late job is not in it yet, and a new one
    # was asked for (one request, however many reads).
    assert not stale.current and stale.estimated_at == first.estimated_at
    assert stale.of_job(late.pk) is None and stale.of_job(head.pk).current is False
    assert cache.get(store.cache_key(queue.pk) + ":asked") == "read"

    client.force_login(lead)
    page = client.get(reverse("job-detail", args=[head.pk])).content.decode()
    assert "data-estimated-at>As of " in page
    page = client.get(reverse("job-detail", args=[late.pk])).content.decode()
    assert "being worked out" in page  # not in the last forecast yet
    api = APIClient()
    api.force_login(lead)
    body = api.get(reverse("api-queue-pending", args=[queue.pk])).json()
    assert body["current"] is False and [row["job"] for row in body["results"]] == [head.pk]
    what_if = submission_estimate(
        data=JobData(
            share=shares["qs1"],
            name="what-if",
            revision=Job.objects.get(pk=head.pk).definition_revision,
            instance_type=InstanceType.objects.get(name="ml.g5.xlarge"),
            expected_duration=100,
        )
    )
    assert what_if.current is False and what_if.position == 2  # behind the head only

    # The background task's work (run here, as the worker runs it).
    assert store.refresh_estimates(queue.pk) == "computed"
    fresh = queue_estimates(queue)
    assert fresh.current and [entry.job_id for entry in fresh.entries] == [head.pk, late.pk]
    assert fresh.estimated_at > first.estimated_at
    page = client.get(reverse("job-detail", args=[late.pk])).content.decode()
    assert "Where it stands" in page and "data-estimated-at" not in page
    assert store.refresh_estimates(queue.pk) == "unchanged"


@pytest.mark.redis
@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_worker_stores_a_fresh_forecast_after_a_change_without_any_read(
    start_worker, queue, submit, stored_only
):
    def current():
        stored, fresh = store.peek(queue)
        return stored if fresh else None

    start_worker(queues="interactive,celery")
    jobs = [submit("qs1", f"j{n}", at=None, expected_duration=LONG) for n in range(4)]
    # The submissions ask for a pass; the pass for a forecast; nothing here reads one.
    wait_for(
        lambda: Job.objects.filter(queue=queue, state=Job.State.RUNNING).count() == 2,
        what="the pass to start the jobs that fit",
    )
    stored = wait_for(current, what="the worker to store a current forecast")
    waiting = Job.objects.filter(queue=queue, state=Job.State.RUNNABLE).values_list("pk", flat=True)
    assert set(stored.index) == set(waiting) and len(stored.index) == 2

    late = submit("qs2", "late", at=None, expected_duration=LONG)
    later = submit("qs1", "later", at=None, expected_duration=LONG)
    wait_for(lambda: Job.objects.get(pk=late.pk).state == Job.State.RUNNING, what="late")
    newer = wait_for(
        lambda: (found := current()) is not None and later.pk in found.index and found,
        what="a current forecast with the new jobs",
    )
    assert newer.version != stored.version and newer.now > stored.now
    # A read now serves that very forecast: it computes nothing.
    listed = queue_estimates(queue)
    assert listed.current and listed.entries.stored.version == newer.version
    assert [entry.job_id for entry in listed.entries][-1] == later.pk
    assert jobs
