"""STOPPING in the live scheduler (spec v2, issue 24 point 3): a victim with grace keeps
its capacity until it stops, its starter waits, the stop frees the capacity; usage,
the job's page and the API show it. The simulated executor, `now` driven by the test
(one compute second per second)."""

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from fleet.models import Job, JobEvent
from fleet.selectors import queue_usage
from scheduler.services.jobs import job_terminate
from scheduler.services.passes import scheduling_pass

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def real_time_speed(settings):
    settings.SIMULATED_SECONDS_PER_SECOND = 1


def fresh(job: Job) -> Job:
    return Job.objects.get(pk=job.pk)


@pytest.fixture
def noticed(queue, submit, clock):
    """qs1 runs `own` and the borrower (grace 120 s, checkpoint every 50 s); at 100 qs2's
    owner reclaims: the borrower gets notice until 220."""
    submit("qs1", "own", priority=5)
    borrower = submit("qs1", "borrower", priority=1, checkpoint_interval=50)
    Job.objects.filter(pk=borrower.pk).update(grace=120)
    scheduling_pass(queue_id=queue.pk, now=clock(0))
    owner = submit("qs2", "owner", at=100)
    scheduling_pass(queue_id=queue.pk, now=clock(100))
    return fresh(borrower), fresh(owner)


def test_a_victim_with_grace_keeps_its_capacity_until_its_stop(queue, noticed, clock):
    borrower, owner = noticed
    assert (borrower.state, borrower.grace_until, borrower.stop_at) == (
        "STOPPING",
        clock(220),
        clock(220),
    )
    assert (borrower.notice_for_id, borrower.preemptions) == (owner.pk, 1)
    assert owner.state == "RUNNABLE"
    notice = JobEvent.objects.get(job=borrower, type="PREEMPTED")
    assert (notice.cause, notice.by_id) == ("reclaim", owner.pk)
    assert notice.detail == {
        "grace_until": clock(220).isoformat(),
        "stop_at": clock(220).isoformat(),
        "saves": False,
    }
    # The STOPPING borrower still holds its instance: 1 of the queue's 3 is free.
    assert queue_usage(queue).free == {"ml.g5.xlarge": 1}

    scheduling_pass(queue_id=queue.pk, now=clock(219))
    assert (fresh(borrower).state, fresh(owner).state) == ("STOPPING", "RUNNABLE")

    scheduling_pass(queue_id=queue.pk, now=clock(220))
    borrower, owner = fresh(borrower), fresh(owner)
    assert (borrower.state, owner.state) == ("RUNNABLE", "RUNNING")
    assert (borrower.lost_work, borrower.checkpointed, borrower.notice_time) == (20, 200, 120)
    stopped = JobEvent.objects.get(job=borrower, type="STOPPED")
    assert (stopped.at, stopped.cause, stopped.by_id) == (clock(220), "reclaim", owner.pk)
    assert stopped.detail == {"lost_work": 20, "saved_on_notice": False, "resumes_from": 200}


def test_the_page_and_the_api_show_a_stopping_job_with_its_grace(noticed, client, admin, clock):
    borrower, _ = noticed
    client.force_login(admin)
    page = client.get(reverse("job-detail", args=[borrower.pk])).content.decode()
    assert f"Stopping (notice until {clock(220):%Y-%m-%d %H:%M:%S} UTC)" in page
    api = APIClient()
    api.force_login(admin)
    body = api.get(f"/api/v1/jobs/{borrower.pk}/").json()
    assert body["state"] == "STOPPING"
    assert body["grace_until"].replace("Z", "+00:00") == clock(220).isoformat()
    assert body["reason"] == ""


def test_terminating_a_stopping_simulated_job_ends_it_at_once(queue, noticed, clock):
    borrower, owner = noticed
    job_terminate(job_id=borrower.pk, now=clock(150))
    borrower = fresh(borrower)
    assert (borrower.state, borrower.reason, borrower.notice_time) == (
        "FAILED",
        "terminated",
        50,
    )
    assert not JobEvent.objects.filter(job=borrower, type="STOPPED").exists()
    scheduling_pass(queue_id=queue.pk, now=clock(150))
    assert fresh(owner).state == "RUNNING"
