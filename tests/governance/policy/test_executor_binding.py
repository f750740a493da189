"""The generic executor binding: a page per queue and per instance type built from the
executor's binding schema alone (a fake executor registered here gets one without any
governance code), one policy target with history, review and revert, and the
migration that converts the Slurm binding's stored proposals and changes."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.test import Client
from django.urls import reverse

from fleet import executors as executor_names
from fleet.models import InstanceType, JobQueue
from governance.models import PolicyChange, PolicyProposal
from governance.policy.services import policy_change_revert
from governance.proposals.services import proposal_approve
from scheduler import executors
from scheduler.executors.base import BaseExecutor, BindingField, Capabilities
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

BINDING = PolicyChange.Target.EXECUTOR_BINDING


class FakeBindingSchema:
    """A binding nothing in governance knows: a region and a list of node labels."""

    queue_fields = ("fake_region",)
    instance_type_fields = ("fake_labels",)
    field_descriptions = {
        "fake_region": BindingField("fake_region", "Fake region", "Where the jobs go."),
        "fake_labels": BindingField("fake_labels", "Fake node labels", many=True),
    }

    def queue_document(self, queue):
        return {"fake_region": (queue.executor_settings or {}).get("fake", {}).get("region", "")}

    def queue_validate(self, *, queue, binding):
        region = (binding.get("fake_region") or "").strip()
        errors = {}
        if region and not region.startswith("eu-"):
            errors["fake_region"] = [f"'{region}' is not a European region (eu-...)"]
        return {"fake_region": region}, errors

    def queue_apply(self, *, queue, binding):
        settings = {**(queue.executor_settings or {}), "fake": {"region": binding["fake_region"]}}
        JobQueue.objects.filter(pk=queue.pk).update(
            executor_settings=settings, version=queue.version + 1
        )

    def queue_impact(self, *, queue, binding):
        return [f"Jobs go to {binding.get('fake_region') or 'nowhere'} from now on."]

    def describe(self, binding):
        return binding.get("fake_region") or "unbound"

    def instance_type_document(self, instance_type):
        stored = (instance_type.executor_settings or {}).get("fake", {})
        return {"fake_labels": list(stored.get("labels") or [])}

    def instance_type_validate(self, binding):
        labels = binding.get("fake_labels")
        if not isinstance(labels, list) or any(" " in label for label in labels):
            raise ValidationError({"fake_labels": ["give a list of labels"]})
        return {"fake_labels": labels}

    def instance_type_apply(self, *, instance_type, binding):
        instance_type.executor_settings = {
            **(instance_type.executor_settings or {}),
            "fake": {"labels": binding["fake_labels"]},
        }
        instance_type.save(update_fields=["executor_settings"])


class FakeExecutor(BaseExecutor):
    name = "fake"
    label = "Fake"
    capabilities = Capabilities()
    binding = FakeBindingSchema()


@pytest.fixture
def fake():
    executor = executors.register(FakeExecutor())  # the one registration
    yield executor
    executors._EXECUTORS.pop(executor.name)
    executor_names._LABELS.pop(executor.name)
    executor_names._DECISION_CAUSES.pop(executor.name)


@pytest.fixture
def fake_queue(fake, aws_queue):
    JobQueue.objects.filter(pk=aws_queue.pk).update(executor="fake")
    aws_queue.refresh_from_db()
    return aws_queue


def page_client(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def region_post(queue, region, reason="Move the queue to Europe"):
    return {"fake_region": region, "reason": reason, "version": str(queue.version)}


def test_a_new_executor_gets_a_binding_page_from_its_schema_alone(admin, fake_queue):
    client = page_client(admin)
    url = reverse("queue-binding", args=[fake_queue.pk])

    page = client.get(url)
    assert page.status_code == 200
    html = page.content.decode()
    assert "Fake region" in html and "Where the jobs go." in html
    assert "Executor binding of" in html

    preview = client.post(
        reverse("queue-binding-impact", args=[fake_queue.pk]), region_post(fake_queue, "eu-1")
    )
    assert "Jobs go to eu-1 from now on." in preview.content.decode()

    bad = client.post(url, region_post(fake_queue, "us-1"))
    assert bad.status_code == 200
    assert bad.context["form"].errors["fake_region"] == ["'us-1' is not a European region (eu-...)"]
    no_reason = client.post(url, region_post(fake_queue, "eu-1", reason=""))
    assert list(no_reason.context["form"].errors) == ["reason"]
    fake_queue.refresh_from_db()
    assert (fake_queue.executor_settings, fake_queue.version) == ({}, 1)
    assert not PolicyChange.objects.filter(target=BINDING).exists()

    saved = client.post(url, region_post(fake_queue, "eu-1"))
    assert saved.status_code == 302
    fake_queue.refresh_from_db()
    assert fake_queue.executor_settings == {"fake": {"region": "eu-1"}}
    change = PolicyChange.objects.get(target=BINDING)
    assert (change.queue, change.before, change.after) == (
        fake_queue,
        {"fake_region": ""},
        {"fake_region": "eu-1"},
    )
    history = client.get(reverse("history")).content.decode()
    assert "Fake region" in history and "eu-1" in history

    policy_change_revert(actor=admin, change=change, reason="back home")
    fake_queue.refresh_from_db()
    assert fake_queue.executor_settings == {"fake": {"region": ""}}


def test_a_new_executors_instance_type_settings_page_history_and_revert(admin, fake):
    itype = InstanceType.objects.create(name="a100", gpu_count=1)
    client = page_client(admin)
    url = f"{reverse('instance-type-binding', args=[itype.pk])}?executor=fake"

    assert "Fake node labels" in client.get(url).content.decode()
    listed = client.get(reverse("instance-type-list")).content.decode()
    assert "?executor=fake" in listed
    saved = client.post(url, {"fake_labels": "big\nfast", "reason": "label them"})
    assert saved.status_code == 302
    change = PolicyChange.objects.get(target=BINDING)
    assert (change.queue, change.object_repr, change.after) == (
        None,
        "a100",
        {"fake_labels": ["big", "fast"]},
    )

    policy_change_revert(actor=admin, change=change, reason="no labels")
    itype.refresh_from_db()
    assert itype.executor_settings == {"fake": {"labels": []}}
    nowhere = client.get(f"{reverse('instance-type-binding', args=[itype.pk])}?executor=none")
    assert nowhere.status_code == 404


def test_under_review_a_new_executors_binding_waits_and_applies(settings, admin, fake_queue):
    settings.POLICY_CHANGES_NEED_REVIEW = True
    client = page_client(admin)

    answer = client.post(
        reverse("queue-binding", args=[fake_queue.pk]), region_post(fake_queue, "eu-2")
    )

    assert answer.status_code == 302 and answer.url == reverse("proposal-list")
    proposal = PolicyProposal.objects.get()
    assert (proposal.kind, proposal.payload["executor"]) == ("queue_binding", "fake")
    assert "executor binding" in client.get(reverse("proposal-list")).content.decode()
    fake_queue.refresh_from_db()
    assert fake_queue.executor_settings == {}

    proposal_approve(
        actor=UserFactory(username="second-admin", roles=["admins"]), proposal=proposal
    )

    fake_queue.refresh_from_db()
    assert fake_queue.executor_settings == {"fake": {"region": "eu-2"}}
    proposal.refresh_from_db()
    assert proposal.applied_change.target == BINDING


def test_a_queue_whose_executor_has_no_settings_says_so(admin, aws_queue):
    page = page_client(admin).get(reverse("queue-binding", args=[aws_queue.pk]))

    assert page.status_code == 200
    assert "has no settings to bind" in page.content.decode()


def test_the_old_addresses_lead_to_the_generic_pages(admin, aws_queue):
    client = page_client(admin)
    itype = InstanceType.objects.get(name="ml.g5.xlarge")

    queue_page = client.get(f"/queues/{aws_queue.pk}/slurm/")
    type_page = client.get(f"/instance-types/{itype.pk}/slurm/")

    assert queue_page.url == reverse("queue-binding", args=[aws_queue.pk])
    assert type_page.url == f"{reverse('instance-type-binding', args=[itype.pk])}?executor=slurm"
    assert client.get(f"/queues/{aws_queue.pk}/nothing/").status_code == 404


# The migration of the Slurm binding's stored rows.

BEFORE = [("governance", "0022_group_mapping_proposals")]
AFTER = [("governance", "0023_executor_binding")]


def _migrate(targets):
    executor = MigrationExecutor(connection)
    return executor.migrate(targets).apps


@pytest.mark.django_db(transaction=True)
def test_old_slurm_rows_become_executor_binding_rows_and_back():
    try:
        apps = _migrate(BEFORE)
        Queue = apps.get_model("fleet", "JobQueue")
        Change = apps.get_model("governance", "PolicyChange")
        Proposal = apps.get_model("governance", "PolicyProposal")
        queue = Queue.objects.create(name="lab", executor="slurm")
        queue_doc = {"slurm_conf": "/etc/slurm.conf", "slurm_partition": "gpu", "slurm_account": ""}
        Change.objects.create(
            reason="r", target="queue_slurm", queue=queue, before={}, after=queue_doc
        )
        Change.objects.create(
            reason="r",
            target="instance_type",
            object_repr="a100",
            before={"slurm_resources": []},
            after={"slurm_resources": ["--gres=gpu:1"]},
        )
        Change.objects.create(reason="r", target="queue", queue=queue, before={}, after={})
        Proposal.objects.create(
            kind="queue_slurm",
            queue=queue,
            reason="r",
            object_repr="lab",
            payload={"binding": queue_doc, "after": queue_doc},
        )
        Proposal.objects.create(
            kind="type_slurm",
            reason="r",
            object_repr="a100",
            payload={
                "instance_type": "a100",
                "slurm_resources": ["--exclusive"],
                "after": {"slurm_resources": ["--exclusive"]},
            },
        )

        apps = _migrate(AFTER)
        Change = apps.get_model("governance", "PolicyChange")
        Proposal = apps.get_model("governance", "PolicyProposal")
        assert sorted(Change.objects.values_list("target", flat=True)) == [
            "executor_binding",
            "executor_binding",
            "queue",
        ]
        assert Change.objects.get(object_repr="a100").after == {"slurm_resources": ["--gres=gpu:1"]}
        queue_kind, type_kind = Proposal.objects.order_by("pk")
        assert (queue_kind.kind, queue_kind.payload) == (
            "queue_binding",
            {"executor": "slurm", "binding": queue_doc, "after": queue_doc},
        )
        assert (type_kind.kind, type_kind.payload) == (
            "type_binding",
            {
                "instance_type": "a100",
                "executor": "slurm",
                "binding": {"slurm_resources": ["--exclusive"]},
                "after": {"slurm_resources": ["--exclusive"]},
            },
        )

        apps = _migrate(BEFORE)
        Change = apps.get_model("governance", "PolicyChange")
        Proposal = apps.get_model("governance", "PolicyProposal")
        assert sorted(Change.objects.values_list("target", flat=True)) == [
            "instance_type",
            "queue",
            "queue_slurm",
        ]
        queue_kind, type_kind = Proposal.objects.order_by("pk")
        assert (queue_kind.kind, queue_kind.payload) == (
            "queue_slurm",
            {"binding": queue_doc, "after": queue_doc},
        )
        assert (type_kind.kind, type_kind.payload["slurm_resources"]) == (
            "type_slurm",
            ["--exclusive"],
        )
        assert "binding" not in type_kind.payload
    finally:
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())
