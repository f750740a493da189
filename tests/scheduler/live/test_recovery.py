"""Recovery of the system itself, without a worker: claims, heartbeats, exits, the
sweep of lost workers, the periodic tick and the policy signal."""

import datetime as dt
from unittest import mock

import pytest

from governance.models import JobQueue
from governance.signals import policy_changed
from scheduler import tasks
from scheduler.models import Job, JobEvent
from scheduler.services.passes import scheduling_pass
from scheduler.services.runs import (
    job_claim_run,
    job_heartbeat,
    job_process_exited,
    jobs_requeue_lost,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def process_queue(queue):
    queue.executor = JobQueue.Executor.PROCESS
    queue.save()
    return queue


@pytest.fixture
def running(process_queue, submit, clock):
    job = submit(
        "qs2", "trainer", command="python -m scheduler.examples.train", checkpoint_interval=10
    )
    scheduling_pass(queue_id=process_queue.pk, now=clock(0))
    job.refresh_from_db()
    assert job.state == Job.State.RUNNING and job.attempt == 1
    return job


def test_a_run_is_claimed_once(running, clock):
    assert job_claim_run(job_id=running.pk, attempt=1, worker="w1", now=clock(1))
    assert not job_claim_run(job_id=running.pk, attempt=1, worker="w2", now=clock(1))


def test_heartbeats_record_progress_until_the_run_is_over(running, process_queue, submit, clock):
    job_claim_run(job_id=running.pk, attempt=1, worker="w1", now=clock(1))
    assert job_heartbeat(
        job_id=running.pk, attempt=1, progress=25, checkpointed=20, worker="w1", now=clock(2)
    )
    running.refresh_from_db()
    assert (running.progress, running.checkpointed) == (25, 20)

    from scheduler.services.jobs import job_terminate

    job_terminate(job_id=running.pk, now=clock(3))
    assert not job_heartbeat(
        job_id=running.pk, attempt=1, progress=26, checkpointed=20, worker="w1", now=clock(4)
    )


def test_a_preempted_process_job_resumes_from_its_reported_checkpoint(process_queue, submit, clock):
    borrower = submit("qs1", "borrower", command="python -m x", priority=1)
    submit("qs1", "own", command="python -m x", priority=5)
    scheduling_pass(queue_id=process_queue.pk, now=clock(0))
    job_heartbeat(
        job_id=borrower.pk, attempt=1, progress=17, checkpointed=10, worker="w", now=clock(17)
    )
    submit("qs2", "owner", command="python -m x", at=20)
    scheduling_pass(queue_id=process_queue.pk, now=clock(20))

    borrower.refresh_from_db()
    assert borrower.state == Job.State.RUNNABLE
    assert (borrower.progress, borrower.checkpointed, borrower.lost_work) == (10, 10, 7)


def test_an_exit_of_a_stale_run_is_ignored(running, process_queue, clock):
    from scheduler.services.jobs import job_terminate

    job_terminate(job_id=running.pk, now=clock(5))

    assert not job_process_exited(job_id=running.pk, attempt=1, exit_code=0, now=clock(6))
    running.refresh_from_db()
    assert (running.state, running.reason) == ("FAILED", "terminated")


def test_exit_zero_succeeds_and_other_codes_fail(running, process_queue, submit, clock):
    assert job_process_exited(
        job_id=running.pk, attempt=1, exit_code=0, progress=60, checkpointed=60, now=clock(60)
    )
    running.refresh_from_db()
    assert (running.state, running.exit_code, running.finished_at) == ("SUCCEEDED", 0, clock(60))

    other = submit("qs2", "crasher", command="python -m x", at=60)
    scheduling_pass(queue_id=process_queue.pk, now=clock(60))
    job_process_exited(job_id=other.pk, attempt=1, exit_code=3, now=clock(70))
    other.refresh_from_db()
    assert (other.state, other.reason, other.exit_code) == ("FAILED", "exit_code", 3)


def test_the_sweep_requeues_runs_without_heartbeats(running, clock):
    job_claim_run(job_id=running.pk, attempt=1, worker="w1", now=clock(1))
    job_heartbeat(
        job_id=running.pk, attempt=1, progress=25, checkpointed=20, worker="w1", now=clock(2)
    )

    assert jobs_requeue_lost(timeout=30, now=clock(31)) == []
    assert jobs_requeue_lost(timeout=30, now=clock(33)) == [running.pk]
    assert jobs_requeue_lost(timeout=30, now=clock(33)) == []  # idempotent

    running.refresh_from_db()
    assert (running.state, running.requeues, running.preemptions) == ("RUNNABLE", 1, 0)
    assert (running.progress, running.lost_work) == (20, 5)
    event = JobEvent.objects.get(job=running, type="REQUEUED")
    assert event.cause == "worker_lost" and event.detail == {"lost_work": 5, "resumes_from": 20}


def test_a_run_no_worker_ever_claimed_is_requeued_too(running, clock):
    assert jobs_requeue_lost(timeout=30, now=clock(31)) == [running.pk]


def test_simulated_queues_are_never_swept(queue, submit, clock):
    submit("qs2", "simulated")
    scheduling_pass(queue_id=queue.pk, now=clock(0))
    assert jobs_requeue_lost(timeout=1, now=clock(3600 * 24)) == []


def test_a_started_process_job_is_sent_to_its_instance_types_queue(
    process_queue, submit, clock, django_capture_on_commit_callbacks
):
    job = submit("qs2", "to-run", command="python -m x")
    with (
        mock.patch.object(tasks.run_job, "apply_async") as send,
        django_capture_on_commit_callbacks(execute=True),
    ):
        scheduling_pass(queue_id=process_queue.pk, now=clock(0))
    send.assert_called_once_with(args=(job.pk, 1), queue="instances.ml.g5.xlarge")


def test_a_submission_asks_for_a_pass_after_commit(
    queue, submit, django_capture_on_commit_callbacks
):
    with (
        mock.patch.object(tasks.run_pass, "delay") as delay,
        django_capture_on_commit_callbacks(execute=True),
    ):
        submit("qs1", "a")
    delay.assert_called_once_with(queue.pk)


def test_a_broker_outage_does_not_fail_a_submission(
    queue, submit, django_capture_on_commit_callbacks
):
    with (
        mock.patch.object(tasks.run_pass, "delay", side_effect=ConnectionError("broker down")),
        django_capture_on_commit_callbacks(execute=True),
    ):
        job = submit("qs1", "a")
    assert Job.objects.filter(pk=job.pk).exists()


def test_a_policy_change_asks_for_a_pass(queue, django_capture_on_commit_callbacks):
    with (
        mock.patch.object(tasks.run_pass, "delay") as delay,
        django_capture_on_commit_callbacks(execute=True),
    ):
        policy_changed.send(sender=JobQueue, queue_id=queue.pk)
    delay.assert_called_once_with(queue.pk)


def test_the_tick_asks_for_a_pass_of_every_queue_with_live_jobs(queue, submit):
    submit("qs1", "a")
    submit("qs1", "b")
    with mock.patch.object(tasks.run_pass, "delay") as delay:
        tasks.tick()
    delay.assert_called_once_with(queue.pk)


def test_the_pass_task_of_a_deleted_queue_does_nothing():
    assert tasks.run_pass(424242) == {"queue": 424242, "skipped": "no such queue"}


def test_the_pass_task_runs_a_pass(queue, submit):
    submit("qs1", "a", at=None)
    assert tasks.run_pass(queue.pk)["started"] == 1


def test_work_figures_use_the_real_clock_when_none_is_given(queue, submit):
    job = submit("qs1", "now", at=None)
    assert abs(job.submitted_at - dt.datetime.now(dt.UTC)) < dt.timedelta(seconds=5)


def test_the_process_demo_queue_is_seeded_once(admin, team_lead):
    from scheduler.services.demo import seed_process_demo

    queue = seed_process_demo(actor=admin, lead=team_lead)
    assert seed_process_demo(actor=admin, lead=team_lead) == queue
    assert queue.executor == "process"
    assert (
        Job.objects.filter(queue=queue, command__contains="scheduler.examples.train").count() == 2
    )
    assert queue.changes.count() >= 3  # the queue and its two shares, in the history
