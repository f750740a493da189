"""A job copies its interruption contract at submission: its definition revision's
workload class, else its share's default class, else none. A later change of the class
does not change a submitted job. The job page shows the contract, and while the job
runs, until when its current run is protected."""

from __future__ import annotations

import datetime as dt

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from fleet.models import Job, JobDefinition, QuotaShare, WorkloadClass
from governance.policy.workload_classes import workload_class_save
from scheduler.selectors import job_contract
from scheduler.services.jobs import JobData, job_submit, jobs_submit
from tests.factories import job_definition as registered

pytestmark = pytest.mark.django_db


@pytest.fixture
def classes(db):
    return {
        "batch": WorkloadClass.objects.create(
            name="batch",
            min_runtime_reclaim=1800,
            min_runtime_preempt=600,
            grace=120,
            checkpoint_on_notice=30,
        ),
        "serving": WorkloadClass.objects.create(name="serving", min_runtime_reclaim=60),
    }


def job_definition(queue, *, name, **fields):
    return registered(
        queue, name=name, instance_type=queue.capacities.get().instance_type, **fields
    )


def _submit(share, revision, name="job"):
    return job_submit(data=JobData(share=share, name=name, revision=revision))


def _contract(job: Job) -> tuple:
    job.refresh_from_db()
    return (
        job.workload_class,
        job.min_runtime_reclaim,
        job.min_runtime_preempt,
        job.grace,
        job.checkpoint_on_notice,
    )


def test_the_definition_class_wins_over_the_share_default(aws_queue, classes):
    qs1 = aws_queue.shares.get(name="qs1")
    QuotaShare.objects.filter(pk=qs1.pk).update(default_workload_class=classes["serving"])
    qs1.refresh_from_db()
    revision = job_definition(aws_queue, name="train", workload_class=classes["batch"])

    job = _submit(qs1, revision)

    assert _contract(job) == ("batch", 1800, 600, 120, 30)


def test_without_a_definition_class_the_share_default_applies(aws_queue, classes):
    qs1 = aws_queue.shares.get(name="qs1")
    QuotaShare.objects.filter(pk=qs1.pk).update(default_workload_class=classes["serving"])
    qs1.refresh_from_db()

    job = _submit(qs1, job_definition(aws_queue, name="plain"))

    assert _contract(job) == ("serving", 60, 0, 0, None)


def test_without_any_class_the_job_has_no_contract(aws_queue, classes):
    job = _submit(aws_queue.shares.get(name="qs2"), job_definition(aws_queue, name="plain"))

    assert _contract(job) == ("", 0, 0, 0, None)


def test_a_bulk_submission_copies_each_job_its_own_contract(aws_queue, classes):
    qs1 = aws_queue.shares.get(name="qs1")
    QuotaShare.objects.filter(pk=qs1.pk).update(default_workload_class=classes["serving"])
    qs1.refresh_from_db()
    batch = job_definition(aws_queue, name="train", workload_class=classes["batch"])
    plain = job_definition(aws_queue, name="plain")

    jobs = jobs_submit(
        items=[
            JobData(share=qs1, name=f"job-{n}", revision=batch if n % 2 else plain)
            for n in range(10)
        ]
    )

    assert [job.workload_class for job in jobs] == ["serving", "batch"] * 5


def test_a_later_change_of_the_class_does_not_change_submitted_jobs(admin, aws_queue, classes):
    revision = job_definition(aws_queue, name="train", workload_class=classes["batch"])
    job = _submit(aws_queue.shares.get(name="qs1"), revision)

    batch = classes["batch"]
    workload_class_save(
        actor=admin,
        data={
            "name": "batch",
            "min_runtime_reclaim": 60,
            "min_runtime_preempt": 0,
            "grace": 0,
            "checkpoint_on_notice": None,
        },
        reason="shorter protection",
        workload_class=batch,
        expected_version=batch.version,
    )

    assert _contract(job) == ("batch", 1800, 600, 120, 30)
    later = _submit(aws_queue.shares.get(name="qs1"), revision, name="later")
    assert _contract(later) == ("batch", 60, 0, 0, None)


def test_a_running_job_is_protected_until_its_run_start_plus_its_minimum(aws_queue, classes):
    revision = job_definition(aws_queue, name="train", workload_class=classes["batch"])
    job = _submit(aws_queue.shares.get(name="qs1"), revision)
    started = timezone.now().replace(microsecond=0) - dt.timedelta(seconds=600)
    Job.objects.filter(pk=job.pk).update(state=Job.State.RUNNING, started_at=started)
    job.refresh_from_db()

    contract = job_contract(job, now=started + dt.timedelta(seconds=600))
    assert contract.protected_from_reclaim_until == started + dt.timedelta(seconds=1800)
    assert contract.protected_from_preemption_until is None  # 600 s have passed: it ended
    assert (
        job_contract(job, now=started + dt.timedelta(seconds=1800)).protected_from_reclaim_until
        is None
    )

    job.state = Job.State.RUNNABLE
    assert job_contract(job, now=started).protected_from_reclaim_until is None


def test_the_job_page_shows_the_contract_and_until_when_it_is_protected(
    client, admin, aws_queue, classes
):
    revision = job_definition(aws_queue, name="train", workload_class=classes["batch"])
    job = _submit(aws_queue.shares.get(name="qs1"), revision)
    client.force_login(admin)

    html = client.get(reverse("job-detail", args=[job.pk])).content.decode()
    assert "workload class batch" in html
    assert "protected from reclaim for 30 min after each start" in html
    assert "120 s notice, checkpoints in 30 s" in html
    assert "protected from reclaim until" not in html  # not running

    started = timezone.now().replace(microsecond=0)
    Job.objects.filter(pk=job.pk).update(state=Job.State.RUNNING, started_at=started)
    html = client.get(reverse("job-detail", args=[job.pk])).content.decode()
    until = timezone.localtime(started + dt.timedelta(seconds=1800))
    assert f"protected from reclaim until {until:%H:%M:%S}" in html


def test_the_definition_form_sets_the_class_and_its_page_shows_it(
    client, admin, aws_queue, classes
):
    client.force_login(admin)
    form = {
        "name": "train",
        "queues": [aws_queue.pk],
        "instances": 1,
        "restart_overhead": 0,
        "stop_grace_seconds": 10,
        "workload_class": classes["batch"].pk,
        "reason": "long runs",
        "parameters-TOTAL_FORMS": 0,
        "parameters-INITIAL_FORMS": 0,
    }

    page = client.get(reverse("definition-create")).content.decode()
    assert "the share&#x27;s default class" in page and ">batch<" in page
    response = client.post(reverse("definition-create"), form)

    assert response.status_code == 302, response.content.decode()[:2000]
    definition = JobDefinition.objects.get(name="train")
    assert definition.revisions.get().workload_class == classes["batch"]
    detail = client.get(reverse("definition-detail", args=[definition.pk])).content.decode()
    assert "Workload class" in detail and "batch" in detail


def _definition_list_queries(client) -> int:
    with CaptureQueriesContext(connection) as queries:
        response = client.get("/api/v1/job-definitions/")
    assert response.status_code == 200
    return len(queries)


def test_the_definition_list_reads_the_classes_in_constant_queries(
    client, admin, aws_queue, classes
):
    client.force_login(admin)
    job_definition(aws_queue, name="def-0", workload_class=classes["batch"])
    one = _definition_list_queries(client)
    for n in range(1, 5):
        job_definition(aws_queue, name=f"def-{n}", workload_class=classes["serving"])

    assert _definition_list_queries(client) == one
