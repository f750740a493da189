"""Isolation parity (issue 34, point 6): a definition's `network: false` and
`max_address_space_mb` are promises the Slurm executor cannot keep (its launcher runs
on the cluster's nodes as the job's user; no network namespace or address-space limit
is applied there), so such a definition is refused for a Slurm queue, on the field, by
the page and the API, and a job of such a revision is refused at submission; nothing
is written. The process executor keeps both promises and is unchanged. No command
line registers definitions or submits jobs (manage.py has none), so the page and the
API are the two ways in, both through scheduler.services.job_definitions."""

from __future__ import annotations

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from fleet.models import InstanceType, Job, JobDefinition, JobDefinitionRevision
from scheduler.executors import executor_named
from scheduler.services.jobs import JobData, JobError, job_submit
from tests.factories import aws_sample_queue, job_definition

pytestmark = pytest.mark.django_db
URL = "/api/v1/job-definitions/"


@pytest.fixture
def slurm_queue(db):
    queue = aws_sample_queue("on-slurm")
    queue.executor = "slurm"
    queue.save(update_fields=["executor"])
    return queue


@pytest.fixture
def process_queue(db):
    queue = aws_sample_queue("on-process")
    queue.executor = "process"
    queue.save(update_fields=["executor"])
    return queue


@pytest.fixture
def api(admin):
    client = APIClient()
    client.force_login(admin)
    return client


def body(queue, **fields):
    return {
        "name": "train",
        "queues": [queue.name],
        "command": ["python3", "-m", "train"],
        "instance_type": queue.capacities.get().instance_type.name,
        "expected_duration": 600,
        "reason": "the team's training entry point",
        **fields,
    }


def test_the_capabilities_say_who_enforces_what():
    process, slurm = executor_named("process"), executor_named("slurm")
    assert process.capabilities.isolates_network and process.capabilities.limits_address_space
    assert not slurm.capabilities.isolates_network
    assert not slurm.capabilities.limits_address_space


@pytest.mark.parametrize(
    ("fields", "field", "words"),
    [
        ({"network": False}, "network", "false (no network) cannot be enforced on queue on-slurm"),
        (
            {"network": True, "max_address_space_mb": 256},
            "max_address_space_mb",
            "cannot be enforced on queue on-slurm",
        ),
    ],
)
def test_the_api_refuses_an_isolation_slurm_cannot_enforce_on_its_field(
    api, slurm_queue, fields, field, words
):
    response = api.post(URL, body(slurm_queue, **fields), format="json")

    assert response.status_code == 400, response.json()
    errors = response.json()["errors"]
    assert list(errors) == [field], errors
    assert words in errors[field][0] and "Slurm cluster" in errors[field][0]
    assert not JobDefinition.objects.exists() and not JobDefinitionRevision.objects.exists()


def test_both_promises_are_refused_at_once(api, slurm_queue):
    response = api.post(
        URL, body(slurm_queue, network=False, max_address_space_mb=256), format="json"
    )
    assert response.status_code == 400
    assert set(response.json()["errors"]) == {"network", "max_address_space_mb"}


def test_network_true_without_a_limit_registers_for_a_slurm_queue(api, slurm_queue):
    response = api.post(URL, body(slurm_queue, network=True), format="json")
    assert response.status_code == 201, response.json()
    assert JobDefinition.objects.get().revisions.get().network is True


def test_process_queues_keep_both_promises(api, process_queue):
    response = api.post(
        URL, body(process_queue, network=False, max_address_space_mb=256), format="json"
    )
    assert response.status_code == 201, response.json()
    revision = JobDefinition.objects.get().revisions.get()
    assert (revision.network, revision.max_address_space_mb) == (False, 256)


def test_a_revision_that_adds_a_slurm_queue_is_refused(api, process_queue, slurm_queue):
    created = api.post(URL, body(process_queue), format="json").json()
    revised = api.post(
        f"{URL}{created['id']}/revisions/",
        {
            "queues": [process_queue.name, slurm_queue.name],
            "base_revision": 1,
            "reason": "also on the cluster",
        },
        format="json",
    )
    assert revised.status_code == 400, revised.json()
    assert "cannot be enforced on queue on-slurm" in revised.json()["errors"]["network"][0]
    definition = JobDefinition.objects.get()
    assert definition.revisions.count() == 1
    assert list(definition.queues.values_list("name", flat=True)) == ["on-process"]


def register_form(queue, **fields):
    data = {
        "name": "sweep",
        "queues": [queue.pk],
        "command": "python3\n-m\nsweep",
        "instance_type": queue.capacities.get().instance_type.name,
        "instances": 1,
        "expected_duration": 900,
        "restart_overhead": 0,
        "stop_grace_seconds": 10,
        "reason": "sweeps for the vision team",
        "parameters-TOTAL_FORMS": 0,
        "parameters-INITIAL_FORMS": 0,
    }
    data.update(fields)
    return data


def test_the_page_shows_the_refusal_next_to_each_field(client, admin, slurm_queue):
    client.force_login(admin)
    # An unticked box is absent from the form: network false.
    response = client.post(
        reverse("definition-create"), register_form(slurm_queue, max_address_space_mb=256)
    )

    assert response.status_code == 200
    errors = response.context["form"].errors
    assert "cannot be enforced on queue on-slurm" in errors["network"][0]
    assert "cannot be enforced on queue on-slurm" in errors["max_address_space_mb"][0]
    page = response.content.decode()
    assert "false (no network) cannot be enforced on queue on-slurm" in page
    assert not JobDefinition.objects.exists()

    response = client.post(reverse("definition-create"), register_form(slurm_queue, network="on"))
    assert response.status_code == 302
    assert JobDefinition.objects.get().revisions.get().network is True


def test_a_job_of_a_network_less_revision_is_refused_on_a_slurm_queue(
    client, admin, slurm_queue, process_queue
):
    """A revision stored before the check (or written by an import): the submission
    refuses it, on `definition`, naming the field; on a process queue it is accepted."""
    itype = InstanceType.objects.get(name="ml.g5.xlarge")
    revision = job_definition(
        slurm_queue, process_queue, name="old", command=["python3", "-m", "train"]
    )
    assert revision.network is False

    with pytest.raises(JobError) as refused:
        job_submit(
            data=JobData(
                share=slurm_queue.shares.get(name="qs1"),
                name="no-net",
                revision=revision,
                instance_type=itype,
                expected_duration=60,
            )
        )
    message = refused.value.errors["definition"][0]
    assert message.startswith("old:1: network false (no network) cannot be enforced"), message

    api = APIClient()
    api.force_login(admin)
    response = api.post(
        "/api/v1/jobs/",
        {"definition": "old", "share": slurm_queue.shares.get(name="qs1").pk, "name": "no-net"},
        format="json",
    )
    assert response.status_code == 400, response.json()
    assert "network false (no network) cannot be enforced" in str(response.json()["errors"])

    client.force_login(admin)
    response = client.post(
        reverse("job-create"),
        {
            "definition": revision.definition_id,
            "revision": revision.revision,
            "share": slurm_queue.shares.get(name="qs1").pk,
            "name": "no-net",
            "instance_type": "ml.g5.xlarge",
        },
    )
    assert response.status_code == 200
    assert "network false (no network) cannot be enforced" in response.content.decode()
    assert not Job.objects.exists()

    job = job_submit(
        data=JobData(
            share=process_queue.shares.get(name="qs1"),
            name="isolated",
            revision=revision,
            instance_type=itype,
            expected_duration=60,
        )
    )
    assert job.queue == process_queue
