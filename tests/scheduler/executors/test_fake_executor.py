"""A new executor is its package and one registration: nothing else of the product
changes. The fake one here runs its "cluster" in memory: a start is taken by the generic
start task, the program ends when the test says so, and the generic reconcile task
brings the end into the database. submit -> pass -> start -> reconcile -> SUCCEEDED,
through the same services and tasks as every executor."""

from __future__ import annotations

import datetime as dt
import secrets

import pytest
from django.utils import timezone

from core.celery import app
from fleet.executors import executor_choices
from fleet.models import InstanceType, Job, JobEvent
from scheduler import executors
from scheduler.executors.base import BaseExecutor, Capabilities, Cause
from scheduler.services import runs
from scheduler.services.jobs import JobData, job_submit
from scheduler.services.passes import scheduling_pass
from scheduler.tasks import executor_reconcile, executor_reconcile_one
from tests.factories import job_definition

pytestmark = pytest.mark.django_db


class FakeCluster:
    """What the fake executor's cluster runs: job id -> (attempt, token, exit code or None)."""

    def __init__(self):
        self.runs: dict[int, list] = {}

    def finish(self, job_id: int, exit_code: int) -> None:
        self.runs[job_id][2] = exit_code


class FakeExecutor(BaseExecutor):
    """The whole package of a new executor, as small as it gets."""

    name = "fake"
    label = "Fake (a test's cluster)"
    # A program it does not run from a definition; only the end it reports frees capacity.
    capabilities = Capabilities(reports_progress=True, reconciles=True, confirms_stops=True)
    causes = (Cause("fake_refused", "failed: the fake cluster refused it", needs_decision=True),)

    def __init__(self, cluster: FakeCluster):
        self.cluster = cluster

    def started(self, runs_started: list[tuple[int, int, str]]) -> None:
        # As a real one does: a nudge to the generic start task, by name.
        launches = [[job_id, attempt] for job_id, attempt, _type in runs_started]
        app.tasks["scheduler.executor_start"].apply_async((self.name, launches))

    def start(self, runs_started: list[tuple[int, int]]) -> list[str]:
        done = []
        for job_id, attempt in runs_started:
            token = secrets.token_urlsafe(8)
            claimed = Job.objects.filter(pk=job_id, attempt=attempt, worker="").update(
                worker=f"fake:{job_id}", lease_token=token
            )
            if claimed:
                self.cluster.runs[job_id] = [attempt, token, None]
                done.append(f"started {job_id}")
        return done

    def reconcile(self, now: dt.datetime) -> dict:
        ended = []
        for job_id, (attempt, token, exit_code) in list(self.cluster.runs.items()):
            if exit_code is None:
                continue
            runs.job_process_exited(
                job_id=job_id, attempt=attempt, lease_token=token, exit_code=exit_code, now=now
            )
            del self.cluster.runs[job_id]
            ended.append(job_id)
        return {"ended": ended}


@pytest.fixture
def fake(settings):
    settings.CELERY_TASK_ALWAYS_EAGER = True
    cluster = FakeCluster()
    executor = executors.register(FakeExecutor(cluster))  # the one registration
    yield executor
    executors._EXECUTORS.pop(executor.name)
    from fleet import executors as names

    names._LABELS.pop(executor.name)
    names._DECISION_CAUSES.pop(executor.name)


def test_a_fake_executor_runs_a_job_to_success_through_the_generic_tasks(
    fake, aws_queue, django_capture_on_commit_callbacks
):
    assert ("fake", fake.label) in executor_choices()
    assert "fake_refused" in Job.NEEDS_DECISION_CAUSES
    aws_queue.executor = "fake"
    aws_queue.full_clean()
    aws_queue.save()
    share = aws_queue.shares.get(name="qs1")
    data = JobData(
        share=share,
        name="fake-work",
        revision=job_definition(aws_queue),
        instance_type=InstanceType.objects.get(),
        expected_duration=60,
    )
    job = job_submit(data=data, submitted_by=None, now=timezone.now())

    with django_capture_on_commit_callbacks(execute=True):
        outcome = scheduling_pass(queue_id=aws_queue.pk, now=timezone.now())
    assert outcome.started == [job.pk]
    job.refresh_from_db()
    # Started by the generic start task: the fake cluster runs it, the product holds it.
    assert job.state == Job.State.RUNNING and job.worker == f"fake:{job.pk}"
    assert list(fake.cluster.runs) == [job.pk]

    # Nothing ended yet: the reconciliation changes nothing. The periodic task asks each
    # executor a queue uses for its own (run here at once: eager).
    assert executor_reconcile() == ["fake"]
    assert executor_reconcile_one("fake") == {"ended": []}
    job.refresh_from_db()
    assert job.state == Job.State.RUNNING

    fake.cluster.finish(job.pk, exit_code=0)
    assert executor_reconcile() == ["fake"]
    job.refresh_from_db()
    assert job.state == Job.State.SUCCEEDED
    assert list(job.events.values_list("type", flat=True).order_by("at", "pk")) == [
        JobEvent.Type.SUBMITTED,
        JobEvent.Type.STARTED,
        JobEvent.Type.SUCCEEDED,
    ]
