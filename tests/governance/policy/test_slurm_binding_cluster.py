"""A queue's Slurm binding checked against the real cluster (SLURM_CONF's, two nodes of
four fake GPUs in partition `gpu`): a partition it lacks is refused naming the ones it
has, on the page, in the API and on the command line; `gpu` is saved as policy (history
before and after, review, revert), and the impact preview reads the partition's nodes."""

import os

import pytest
import yaml
from django.core.management import CommandError, call_command
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from fleet.models import InstanceType, JobQueue
from governance.models import PolicyChange, PolicyProposal
from governance.policy.services import policy_change_revert
from governance.policy_code import native, policy_export, policy_file_read
from governance.policy_code.plan import policy_apply, policy_plan
from governance.policy_code.report import plan_lines
from governance.policy_code.source import PolicyFileError
from governance.proposals.services import proposal_approve
from scheduler.executors.slurm.binding import SlurmBinding
from tests.factories import UserFactory

pytestmark = [pytest.mark.slurm, pytest.mark.django_db]

XL = "ml.g5.xlarge"


@pytest.fixture
def aws_queue(aws_queue):
    """The sample queue, run by the Slurm executor (whose settings its binding page edits)."""
    JobQueue.objects.filter(pk=aws_queue.pk).update(executor="slurm")
    aws_queue.refresh_from_db()
    return aws_queue


@pytest.fixture
def conf() -> str:
    return os.environ["SLURM_CONF"]


def clients(user):
    page, api = Client(), APIClient()
    page.force_login(user)
    api.force_authenticate(user)
    return page, api


def test_a_partition_the_cluster_lacks_is_refused_everywhere(admin, aws_queue, conf):
    page, api = clients(admin)
    expected = f"the cluster of '{conf}' has no partition 'nope' (it has: gpu)"

    form = page.post(
        reverse("queue-binding", args=[aws_queue.pk]),
        {"slurm_conf": conf, "slurm_partition": "nope", "reason": "r", "version": "1"},
    )
    answer = api.patch(
        f"/api/v1/queues/{aws_queue.pk}/",
        {"slurm_conf": conf, "slurm_partition": "nope", "reason": "r", "version": 1},
        format="json",
    )
    with pytest.raises(CommandError) as command:
        call_command("slurm_bind", "queue", aws_queue.name, "--conf", conf, "--partition", "nope")

    assert form.context["form"].errors["slurm_partition"] == [expected]
    assert answer.status_code == 400
    assert answer.json()["errors"] == {"slurm_partition": [expected]}
    assert str(command.value) == f"slurm_partition: {expected}"
    aws_queue.refresh_from_db()
    assert (SlurmBinding.of(aws_queue).conf, aws_queue.version) == ("", 1)


def test_binding_to_gpu_is_a_policy_change_with_its_preview_and_revert(admin, aws_queue, conf):
    InstanceType.objects.filter(name=XL).update(
        executor_settings={"slurm": {"resources": ["--gres=gpu:1"]}}
    )
    page, api = clients(admin)
    data = {"slurm_conf": conf, "slurm_partition": "gpu", "reason": "onto the lab cluster"}

    preview = page.post(
        reverse("queue-binding-impact", args=[aws_queue.pk]), {**data, "version": "1"}
    ).content.decode()
    answer = api.patch(f"/api/v1/queues/{aws_queue.pk}/", {**data, "version": 1}, format="json")

    assert f"Jobs the queue starts from now on are submitted to {conf}, partition gpu" in preview
    assert "Partition gpu has 2 nodes, 2 in service." in preview
    assert f"fit 8 × {XL} (--gres=gpu:1); the queue&#x27;s capacity is 3." in preview
    assert answer.status_code == 200, answer.json()
    shown = answer.json()
    assert (shown["slurm_conf"], shown["slurm_partition"], shown["version"]) == (conf, "gpu", 2)
    change = PolicyChange.objects.get(target=PolicyChange.Target.EXECUTOR_BINDING)
    assert (change.queue, change.actor, change.reason) == (aws_queue, admin, data["reason"])
    assert change.before == {"slurm_conf": "", "slurm_partition": "", "slurm_account": ""}
    assert change.after == {"slurm_conf": conf, "slurm_partition": "gpu", "slurm_account": ""}
    history = page.get(reverse("history")).content.decode()
    assert "Slurm partition" in history and "Slurm cluster (slurm.conf)" in history
    detail = page.get(reverse("queue-detail", args=[aws_queue.pk])).content.decode()
    assert "Runs on Slurm:</span> partition gpu of <code>" + conf in detail

    policy_change_revert(actor=admin, change=change, reason="not yet")
    aws_queue.refresh_from_db()
    assert (
        SlurmBinding.of(aws_queue).conf,
        SlurmBinding.of(aws_queue).partition,
        aws_queue.version,
    ) == ("", "", 3)


def test_under_review_a_binding_waits_and_is_checked_again_when_approved(
    settings, admin, aws_queue, conf
):
    settings.POLICY_CHANGES_NEED_REVIEW = True
    page, _api = clients(admin)

    response = page.post(
        reverse("queue-binding", args=[aws_queue.pk]),
        {"slurm_conf": conf, "slurm_partition": "gpu", "reason": "lab", "version": "1"},
    )

    assert response.status_code == 302 and response.url == reverse("proposal-list")
    proposal = PolicyProposal.objects.get()
    assert (proposal.kind, proposal.queue, proposal.base_version) == ("queue_binding", aws_queue, 1)
    assert proposal.payload["after"]["slurm_partition"] == "gpu"
    aws_queue.refresh_from_db()
    assert SlurmBinding.of(aws_queue).conf == ""

    proposal_approve(
        actor=UserFactory(username="second-admin", roles=["admins"]), proposal=proposal
    )

    aws_queue.refresh_from_db()
    assert (SlurmBinding.of(aws_queue).conf, SlurmBinding.of(aws_queue).partition) == (conf, "gpu")
    proposal.refresh_from_db()
    assert proposal.applied_change.target == PolicyChange.Target.EXECUTOR_BINDING


def test_the_command_binds_as_a_direct_change(aws_queue, conf):
    call_command("slurm_bind", "queue", aws_queue.name, "--conf", conf, "--partition", "gpu")

    queue = JobQueue.objects.get(pk=aws_queue.pk)
    assert (SlurmBinding.of(queue).conf, SlurmBinding.of(queue).partition) == (conf, "gpu")
    change = PolicyChange.objects.get(target=PolicyChange.Target.EXECUTOR_BINDING)
    assert (change.cause, change.queue, change.after["slurm_partition"]) == (
        PolicyChange.Cause.DIRECT,
        queue,
        "gpu",
    )


def test_policy_as_code_carries_the_binding(admin, aws_queue, conf):
    data = yaml.safe_load(policy_export(format="native", queue=aws_queue).content)
    assert "slurm" not in data["queues"][0]  # an unbound queue's file says nothing of it
    data["queues"][0]["slurm"] = {"conf": conf, "partition": "nope"}

    with pytest.raises(PolicyFileError) as refused:
        policy_plan(policy=policy_file_read(raw=native.dump(data), source="lab.yaml"))
    [problem] = refused.value.problems
    assert problem.field == "queues[0].slurm.partition"
    assert problem.message == f"the cluster of '{conf}' has no partition 'nope' (it has: gpu)"
    assert problem.line is not None

    data["queues"][0]["slurm"]["partition"] = "gpu"
    policy = policy_file_read(raw=native.dump(data), source="lab.yaml")
    plan = policy_plan(policy=policy)
    assert "  Slurm binding of queue aws-sample: added" in plan_lines(plan)
    assert f"      slurm_conf:  -> {conf}" in plan_lines(plan)
    policy_apply(actor=admin, policy=policy, reason="bind the queue")

    aws_queue.refresh_from_db()
    assert (SlurmBinding.of(aws_queue).conf, SlurmBinding.of(aws_queue).partition) == (conf, "gpu")
    change = PolicyChange.objects.get(target=PolicyChange.Target.EXECUTOR_BINDING)
    assert change.cause == PolicyChange.Cause.IMPORT
    assert change.after == {"slurm_conf": conf, "slurm_partition": "gpu", "slurm_account": ""}
    exported = yaml.safe_load(policy_export(format="native", queue=aws_queue).content)
    assert exported["queues"][0]["slurm"] == {"conf": conf, "partition": "gpu"}
    again = policy_plan(policy=policy_file_read(raw=native.dump(exported), source="lab.yaml"))
    assert again.is_empty

    exported["queues"][0]["slurm"] = None
    policy_apply(
        actor=admin,
        policy=policy_file_read(raw=native.dump(exported), source="unbind.yaml"),
        reason="unbind the queue",
    )
    aws_queue.refresh_from_db()
    assert SlurmBinding.of(aws_queue).conf == ""
