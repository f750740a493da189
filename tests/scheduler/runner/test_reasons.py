"""What a job's page says about runners: a job of a process queue whose instance type
no live runner serves says so first, and the runner's endings read plainly."""

from __future__ import annotations

import pytest
from django.utils import timezone

from fleet.models import Job
from scheduler.selectors import current_reason, job_timeline
from scheduler.services.passes import scheduling_pass
from scheduler.services.runners import runner_register
from scheduler.services.runs import job_claim_run, job_run_failed, job_run_released

pytestmark = pytest.mark.django_db

NO_RUNNER = "no runner is serving ml.g5.xlarge"


def fresh(job) -> Job:
    return Job.objects.select_related("queue", "instance_type", "share").get(pk=job.pk)


def serve():
    runner_register(name="runner@gpu-1", hostname="gpu-1", pid=1, instance_types=["ml.g5.xlarge"])


def test_a_started_run_no_runner_serves_says_so(started):
    job = fresh(started("unserved", ["true"]))

    assert current_reason(job) == f"{NO_RUNNER}; started, waiting for a runner to take it"
    serve()
    assert current_reason(job) == "started, waiting for a runner to take it"


def test_a_waiting_job_no_runner_serves_says_so_before_why_it_waits(
    process_queue, submit, definition
):
    revision = definition("waiter", ["true"])
    for n in range(2):  # the share's limit is one instance and it may not borrow
        submit("qs2", f"job-{n}", revision=revision, at=None)
    scheduling_pass(queue_id=process_queue.pk, now=timezone.now())
    waiting = fresh(Job.objects.get(name="job-1"))

    reason = current_reason(waiting)
    assert reason.startswith(f"{NO_RUNNER}; waiting")
    serve()
    assert current_reason(waiting) == reason.removeprefix(f"{NO_RUNNER}; ")


def test_a_job_of_a_simulated_queue_never_waits_for_a_runner(queue, submit):
    job = submit("qs1", "modelled", at=None)
    assert NO_RUNNER not in current_reason(fresh(job))


def test_the_runners_endings_read_plainly(started):
    serve()
    stopped = started("stopped", ["true"])
    token = job_claim_run(job_id=stopped.pk, attempt=1, worker="w", lease_seconds=30)
    job_run_released(job_id=stopped.pk, attempt=1, lease_token=token, cause="runner_stopped")
    limited = started("limited", ["true"], wall_clock_limit=60, share="qs1")
    token = job_claim_run(job_id=limited.pk, attempt=1, worker="w", lease_seconds=30)
    job_run_failed(
        job_id=limited.pk, attempt=1, lease_token=token, cause="wall_clock_limit", detail={}
    )

    requeued = [entry.text for entry in job_timeline(stopped) if entry.event.type == "REQUEUED"]
    assert requeued == [
        "requeued: its runner shut down and stopped it; it resumes from its last checkpoint"
    ]
    assert current_reason(fresh(limited)) == (
        "failed: it ran past its definition's wall-clock limit (60 s) and was stopped"
    )
