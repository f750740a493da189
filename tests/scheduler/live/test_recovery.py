"""Recovery of the system itself, without a worker: claims and leases, heartbeats,
exits, fencing of stale attempts, the sweep of lost runs, the periodic tick and the
policy signal."""

import datetime as dt
import uuid
from unittest import mock

import pytest

from core.signals import policy_changed
from fleet.models import Job, JobEvent, JobQueue
from scheduler import tasks
from scheduler.services.passes import scheduling_pass
from scheduler.services.runners import runner_register
from scheduler.services.runs import (
    job_claim_run,
    job_heartbeat,
    job_process_exited,
    job_run_failed,
    job_run_released,
    job_run_stopped,
    jobs_requeue_lost,
    jobs_stop_overdue,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def process_queue(queue):
    queue.executor = "process"
    queue.save()
    return queue


@pytest.fixture
def running(process_queue, submit, clock):
    job = submit(
        "qs2", "trainer", command="python3 -m scheduler.examples.train", checkpoint_interval=10
    )
    scheduling_pass(queue_id=process_queue.pk, now=clock(0))
    job.refresh_from_db()
    assert job.state == Job.State.RUNNING and job.attempt == 1
    return job


def claim(job, clock, at=1, worker="w1"):
    return job_claim_run(
        job_id=job.pk, attempt=job.attempt, worker=worker, lease_seconds=30, now=clock(at)
    )


def beat(job, token, clock, at, progress=0, checkpointed=0, attempt=None):
    return job_heartbeat(
        job_id=job.pk,
        attempt=attempt or job.attempt,
        lease_token=token,
        progress=progress,
        checkpointed=checkpointed,
        lease_seconds=30,
        now=clock(at),
    )


def test_a_run_is_claimed_once_with_a_lease(running, clock):
    token = claim(running, clock, at=1)
    assert token and claim(running, clock, at=1, worker="w2") is None
    running.refresh_from_db()
    assert (running.worker, running.lease_token) == ("w1", token)
    assert running.lease_expires_at == clock(31)


def test_heartbeats_renew_the_lease_and_record_progress_until_the_run_is_over(running, clock):
    token = claim(running, clock)
    assert beat(running, token, clock, at=2, progress=25, checkpointed=20)
    running.refresh_from_db()
    assert (running.progress, running.checkpointed) == (25, 20)
    assert running.lease_expires_at == clock(32)

    from scheduler.services.jobs import job_terminate

    # A terminate gives the process its definition's grace (10 s): the run is still
    # its runner's, which learns at its next heartbeat how much grace is left.
    job_terminate(job_id=running.pk, now=clock(3))
    assert beat(running, token, clock, at=4, progress=26, checkpointed=20).notice_left == 9
    assert job_run_stopped(
        job_id=running.pk, attempt=1, lease_token=token, exit_code=-15, now=clock(5)
    )
    assert not beat(running, token, clock, at=6, progress=26, checkpointed=20)
    running.refresh_from_db()
    assert (running.state, running.reason, running.finished_at) == (
        "FAILED",
        "terminated",
        clock(5),
    )


def test_a_heartbeat_without_the_lease_token_is_refused(running, clock):
    token = claim(running, clock)
    assert not beat(running, "", clock, at=2)
    assert not beat(running, "not-" + token, clock, at=2)
    assert not beat(running, token, clock, at=2, attempt=2)
    assert beat(running, token, clock, at=2)


def test_a_preempted_process_job_resumes_from_its_reported_checkpoint(process_queue, submit, clock):
    borrower = submit("qs1", "borrower", command="python3 -m x", priority=1)
    submit("qs1", "own", command="python3 -m x", priority=5)
    scheduling_pass(queue_id=process_queue.pk, now=clock(0))
    borrower.refresh_from_db()
    token = claim(borrower, clock, at=0)
    beat(borrower, token, clock, at=17, progress=17, checkpointed=10)
    submit("qs2", "owner", command="python3 -m x", at=20)
    scheduling_pass(queue_id=process_queue.pk, now=clock(20))

    # A process victim gets notice (its definition's grace, 10 s) and keeps its slot
    # until its runner reports the exit; the owner waits for it.
    borrower.refresh_from_db()
    assert (borrower.state, borrower.grace_until) == (Job.State.STOPPING, clock(30))
    assert beat(borrower, token, clock, at=21, progress=18, checkpointed=10).notice_left == 9
    scheduling_pass(queue_id=process_queue.pk, now=clock(22))
    assert Job.objects.get(name="owner").state == Job.State.RUNNABLE

    assert job_run_stopped(
        job_id=borrower.pk, attempt=1, lease_token=token, exit_code=143, now=clock(23)
    )
    borrower.refresh_from_db()
    assert borrower.state == Job.State.RUNNABLE
    assert (borrower.progress, borrower.checkpointed, borrower.lost_work) == (10, 10, 8)
    assert not beat(borrower, token, clock, at=24, progress=18, checkpointed=10)
    stopped = JobEvent.objects.get(job=borrower, type="STOPPED")
    assert (stopped.cause, stopped.by.name, stopped.at) == ("reclaim", "owner", clock(23))
    assert stopped.detail == {
        "lost_work": 8,
        "saved_on_notice": False,
        "resumes_from": 10,
        "exit_code": 143,
    }
    scheduling_pass(queue_id=process_queue.pk, now=clock(23))
    assert Job.objects.get(name="owner").state == Job.State.RUNNING


def test_a_process_victim_whose_runner_is_gone_stops_at_the_grace_plus_the_margin(
    process_queue, submit, clock, settings
):
    settings.JOB_KILL_MARGIN_SECONDS = 3
    borrower = submit("qs1", "borrower", command="python3 -m x", priority=1)
    submit("qs1", "own", command="python3 -m x", priority=5)
    scheduling_pass(queue_id=process_queue.pk, now=clock(0))
    claim(Job.objects.get(name="borrower"), clock, at=0)
    submit("qs2", "owner", command="python3 -m x", at=20)
    scheduling_pass(queue_id=process_queue.pk, now=clock(20))
    borrower.refresh_from_db()
    assert borrower.stop_at == clock(33)  # grace 10 s, then the kill margin

    assert jobs_stop_overdue(now=clock(32)) == []
    assert jobs_stop_overdue(now=clock(33)) == [borrower.pk]
    borrower.refresh_from_db()
    assert borrower.state == Job.State.RUNNABLE
    scheduling_pass(queue_id=process_queue.pk, now=clock(33))
    assert Job.objects.get(name="owner").state == Job.State.RUNNING


def test_an_exit_of_a_stale_run_is_ignored(running, process_queue, clock):
    from scheduler.services.jobs import job_terminate

    token = claim(running, clock)
    job_terminate(job_id=running.pk, now=clock(5))
    # Terminated during its grace: it ends FAILED terminated at its exit, whatever code.
    assert job_process_exited(
        job_id=running.pk, attempt=1, lease_token=token, exit_code=0, now=clock(6)
    )
    running.refresh_from_db()
    assert (running.state, running.reason) == ("FAILED", "terminated")
    assert not job_process_exited(
        job_id=running.pk, attempt=1, lease_token=token, exit_code=0, now=clock(7)
    )


def test_exit_zero_succeeds_and_other_codes_fail(running, process_queue, submit, clock):
    token = claim(running, clock)
    assert job_process_exited(
        job_id=running.pk,
        attempt=1,
        lease_token=token,
        exit_code=0,
        progress=60,
        checkpointed=60,
        now=clock(60),
    )
    running.refresh_from_db()
    assert (running.state, running.exit_code, running.finished_at) == ("SUCCEEDED", 0, clock(60))

    other = submit("qs2", "crasher", command="python3 -m x", at=60)
    scheduling_pass(queue_id=process_queue.pk, now=clock(60))
    other.refresh_from_db()
    other_token = claim(other, clock, at=60)
    job_process_exited(
        job_id=other.pk, attempt=1, lease_token=other_token, exit_code=-9, now=clock(70)
    )
    other.refresh_from_db()
    assert (other.state, other.reason, other.exit_code) == ("FAILED", "exit_code", -9)
    event = JobEvent.objects.get(job=other, type="FAILED")
    assert event.detail == {"exit_code": -9, "signal": "SIGKILL"}


def test_the_sweep_requeues_runs_only_once_their_lease_expired(running, clock):
    token = claim(running, clock, at=1)
    beat(running, token, clock, at=2, progress=25, checkpointed=20)  # lease until 32

    assert jobs_requeue_lost(claim_timeout=30, now=clock(31)) == []
    assert jobs_requeue_lost(claim_timeout=30, now=clock(33)) == [running.pk]
    assert jobs_requeue_lost(claim_timeout=30, now=clock(33)) == []  # idempotent

    running.refresh_from_db()
    assert (running.state, running.requeues, running.preemptions) == ("RUNNABLE", 1, 0)
    assert (running.progress, running.lost_work) == (20, 5)
    assert (running.lease_token, running.lease_expires_at) == ("", None)
    event = JobEvent.objects.get(job=running, type="REQUEUED")
    assert event.cause == "worker_lost" and event.detail == {"lost_work": 5, "resumes_from": 20}


def test_a_late_heartbeat_or_exit_of_a_requeued_run_is_refused(running, process_queue, clock):
    token = claim(running, clock, at=1)
    jobs_requeue_lost(claim_timeout=30, now=clock(40))
    scheduling_pass(queue_id=process_queue.pk, now=clock(41))
    running.refresh_from_db()
    assert (running.state, running.attempt) == ("RUNNING", 2)
    new_token = claim(running, clock, at=42, worker="w2")

    assert not beat(running, token, clock, at=43, attempt=1)
    assert not beat(running, token, clock, at=43, attempt=2)
    assert not job_process_exited(
        job_id=running.pk, attempt=1, lease_token=token, exit_code=0, now=clock(44)
    )
    assert beat(running, new_token, clock, at=45)
    running.refresh_from_db()
    assert (running.state, running.attempt, running.worker) == ("RUNNING", 2, "w2")


def test_a_run_no_runner_claimed_is_requeued_while_a_runner_serves_its_type(running, clock):
    assert jobs_requeue_lost(claim_timeout=30, now=clock(31)) == []  # no runner: it waits

    runner_register(
        name="runner@a", hostname="a", pid=1, instance_types=["ml.g5.xlarge"], now=clock(30)
    )
    assert jobs_requeue_lost(claim_timeout=30, now=clock(31)) == [running.pk]
    assert JobEvent.objects.get(job=running, type="REQUEUED").cause == "not_claimed"


def test_a_released_run_is_requeued_at_once(running, clock):
    token = claim(running, clock)
    assert job_run_released(
        job_id=running.pk,
        attempt=1,
        lease_token=token,
        cause="runner_stopped",
        progress=14,
        checkpointed=10,
        now=clock(15),
    )
    running.refresh_from_db()
    assert (running.state, running.requeues, running.checkpointed, running.lost_work) == (
        "RUNNABLE",
        1,
        10,
        4,
    )
    assert JobEvent.objects.get(job=running, type="REQUEUED").cause == "runner_stopped"
    assert not job_run_released(
        job_id=running.pk, attempt=1, lease_token=token, cause="runner_stopped", now=clock(16)
    )


def test_a_run_the_runner_ends_fails_with_its_cause(running, clock):
    token = claim(running, clock)
    assert job_run_failed(
        job_id=running.pk,
        attempt=1,
        lease_token=token,
        cause="wall_clock_limit",
        detail={"wall_clock_limit": 60},
        exit_code=-15,
        now=clock(61),
    )
    running.refresh_from_db()
    assert (running.state, running.reason, running.exit_code) == (
        "FAILED",
        "wall_clock_limit",
        -15,
    )
    event = JobEvent.objects.get(job=running, type="FAILED")
    assert (event.cause, event.detail) == ("wall_clock_limit", {"wall_clock_limit": 60})


def test_simulated_queues_are_never_swept(queue, submit, clock):
    submit("qs2", "simulated")
    scheduling_pass(queue_id=queue.pk, now=clock(0))
    assert jobs_requeue_lost(claim_timeout=1, now=clock(3600 * 24)) == []


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
        mock.patch.object(tasks.run_pass, "apply_async") as send,
        django_capture_on_commit_callbacks(execute=True),
    ):
        submit("qs1", "a")
    send.assert_called_once()
    assert send.call_args.args == ((queue.pk,),)


def test_a_broker_outage_does_not_fail_a_submission(
    queue, submit, django_capture_on_commit_callbacks
):
    with (
        mock.patch.object(
            tasks.run_pass, "apply_async", side_effect=ConnectionError("broker down")
        ),
        django_capture_on_commit_callbacks(execute=True),
    ):
        job = submit("qs1", "a")
    assert Job.objects.filter(pk=job.pk).exists()


def test_a_policy_change_asks_for_a_pass(queue, django_capture_on_commit_callbacks):
    with (
        mock.patch.object(tasks.run_pass, "apply_async") as send,
        django_capture_on_commit_callbacks(execute=True),
    ):
        policy_changed.send(sender=JobQueue, queue_id=queue.pk)
    send.assert_called_once()
    assert send.call_args.args == ((queue.pk,),)


def test_the_tick_asks_for_a_pass_of_every_queue_with_live_jobs(queue, submit, settings):
    settings.CACHES = {  # its liveness mark stays in this process
        **settings.CACHES,
        "liveness": {
            "BACKEND": "django.core.cache.backends.locmem.LocMemCache",
            "LOCATION": f"liveness-{uuid.uuid4()}",
        },
    }
    submit("qs1", "a")
    submit("qs1", "b")
    with mock.patch.object(tasks.run_pass, "apply_async") as send:
        tasks.tick()
    send.assert_called_once()
    assert send.call_args.args == ((queue.pk,),)


def test_the_pass_task_of_a_deleted_queue_does_nothing():
    assert tasks.run_pass(424242) == {"queue": 424242, "skipped": "no such queue"}


def test_the_pass_task_runs_a_pass(queue, submit):
    submit("qs1", "a", at=None)
    assert tasks.run_pass(queue.pk)["started"] == 1


def test_work_figures_use_the_real_clock_when_none_is_given(queue, submit):
    job = submit("qs1", "now", at=None)
    assert abs(job.submitted_at - dt.datetime.now(dt.UTC)) < dt.timedelta(seconds=5)


def test_the_process_demo_queue_is_seeded_once(admin, team_lead):
    from demo.jobs import seed_process_demo

    queue = seed_process_demo(actor=admin, lead=team_lead)
    assert seed_process_demo(actor=admin, lead=team_lead) == queue
    assert queue.executor == "process"
    runs = Job.objects.filter(queue=queue, definition_revision__definition__name="train-example")
    assert [job.argv[:3] for job in runs] == [["python", "-m", "scheduler.examples.train"]] * 2
    assert queue.changes.count() >= 3  # the queue and its two shares, in the history
