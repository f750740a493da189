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


def test_a_protected_borrower_counts_one_block_per_run_however_many_passes(queue, submit, clock):
    """V4 live: qs1's two jobs, protected from reclaim for 300 s, keep qs2's owner
    waiting through passes at 100, 101, 102 (a tick each second): one preemption
    avoided, not three. At 300 the protection ends and the reclaim happens."""
    jobs = [submit("qs1", "own", priority=5), submit("qs1", "borrower", priority=1)]
    Job.objects.filter(pk__in=[job.pk for job in jobs]).update(min_runtime_reclaim=300)
    scheduling_pass(queue_id=queue.pk, now=clock(0))
    owner = submit("qs2", "owner", at=100)
    for second in (100, 101, 102):
        scheduling_pass(queue_id=queue.pk, now=clock(second))
    assert fresh(owner).state == "RUNNABLE"
    assert [fresh(job).protected_blocks for job in jobs] == [0, 1]
    scheduling_pass(queue_id=queue.pk, now=clock(300))
    assert (fresh(owner).state, fresh(jobs[1]).state) == ("RUNNING", "RUNNABLE")
    assert [fresh(job).protected_blocks for job in jobs] == [0, 1]


def test_a_terminate_during_notice_names_who_terminated_at_the_stop(
    queue, submit, clock, admin, settings
):
    """A process queue's victim is STOPPING until its exit: the FAILED event that ends
    it names the person who terminated it, as a terminate of a running job does."""
    from scheduler.services.passes import stop_job

    borrower = submit("qs1", "borrower", priority=1)
    scheduling_pass(queue_id=queue.pk, now=clock(0))
    job = fresh(borrower)
    job.state, job.notice_at, job.stop_at = "STOPPING", clock(10), clock(20)
    job.terminate_at_stop, job.stop_actor = True, admin
    job.save()
    events, _ = stop_job(fresh(job), at=clock(15), speed=1, progress=15, saved=0)
    (failed,) = events
    assert (failed.type, failed.cause, failed.actor_id) == ("FAILED", "terminated", admin.pk)


def test_a_reclaimed_job_rejoins_its_queue_by_submission_not_by_start(queue, submit, clock):
    """The pass's running jobs carry their submission time: qs1's borrower (submitted at
    0, started at 0) is reclaimed at 100 and waits ahead of qs1's `later` (submitted at
    50, same priority), so it is the one that starts when capacity frees."""
    from fleet.bridge import engine_id, queue_state

    submit("qs1", "own", priority=1)
    borrower = submit("qs1", "borrower", priority=1)
    submit("qs3", "third", priority=1)
    scheduling_pass(queue_id=queue.pk, now=clock(0))
    later = submit("qs1", "later", priority=1, at=50)
    state = queue_state(queue, now=clock(60))
    (running,) = [job for job in state.snapshot.running if job.id == engine_id(borrower.pk)]
    assert running.submitted_at == int(clock(0).timestamp())
    assert fresh(later).state == "RUNNABLE"
