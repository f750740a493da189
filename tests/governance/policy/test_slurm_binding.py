"""The executor binding as policy, without a cluster: a queue's Slurm binding and an
instance type's Slurm resources reach the same checks on the page, in the API and on
the command line (scheduler.executors.slurm.binding), are recorded in the history with
before and after, wait for review with POLICY_CHANGES_NEED_REVIEW, and revert. What
needs a cluster that answers (a partition found, or not) is in
test_slurm_binding_cluster.py."""

import pytest
import yaml
from django.core.management import call_command
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from fleet.models import InstanceType, JobQueue
from governance.models import PolicyChange, PolicyProposal
from governance.policy.services import policy_change_revert
from governance.policy_code import native, policy_export, policy_file_read
from governance.policy_code.plan import policy_apply, policy_plan
from governance.policy_code.source import PolicyFileError
from governance.proposals.services import proposal_approve
from scheduler.executors.slurm.binding import SlurmBinding, instance_type_resources
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

XL = "ml.g5.xlarge"


@pytest.fixture
def aws_queue(aws_queue):
    """The sample queue, run by the Slurm executor (whose settings its binding page edits)."""
    JobQueue.objects.filter(pk=aws_queue.pk).update(executor="slurm")
    aws_queue.refresh_from_db()
    return aws_queue


@pytest.fixture
def unreachable(settings, tmp_path) -> str:
    """A cluster whose controller nobody runs (Slurm's client alone waits ~9 s for it)."""
    settings.SLURM_BIND_TIMEOUT = 1
    conf = tmp_path / "slurm.conf"
    conf.write_text("ClusterName=gone\nSlurmctldHost=localhost\nSlurmctldPort=1\n")
    return str(conf)


def page_client(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def api_client(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def binding_post(queue, **fields):
    return {
        "slurm_conf": "",
        "slurm_partition": "",
        "slurm_account": "",
        "reason": "Move the queue onto the lab cluster",
        "version": str(queue.version),
        **fields,
    }


def test_the_page_reaches_the_services_checks(admin, aws_queue, unreachable):
    client = page_client(admin)
    url = reverse("queue-binding", args=[aws_queue.pk])

    assert client.get(url).status_code == 200
    bad_name = client.post(
        url, binding_post(aws_queue, slurm_conf=unreachable, slurm_partition="gpu;rm")
    )
    assert bad_name.status_code == 200
    assert bad_name.context["form"].errors["slurm_partition"] == [
        "give the Slurm partition: letters, digits, '_', '.', '-' (at most 64)"
    ]
    down = client.post(url, binding_post(aws_queue, slurm_conf=unreachable, slurm_partition="gpu"))
    [message] = down.context["form"].errors["slurm_conf"]
    assert "did not answer" in message and "nothing was saved" in message
    preview = client.post(
        reverse("queue-binding-impact", args=[aws_queue.pk]),
        binding_post(aws_queue, slurm_conf=unreachable, slurm_partition="gpu"),
    )
    assert "This change cannot be saved yet" in preview.content.decode()
    assert "did not answer" in preview.content.decode()
    aws_queue.refresh_from_db()
    assert (SlurmBinding.of(aws_queue).conf, aws_queue.version) == ("", 1)
    assert not PolicyChange.objects.filter(target=PolicyChange.Target.EXECUTOR_BINDING).exists()


def test_the_api_reaches_the_same_checks(admin, aws_queue, unreachable):
    client = api_client(admin)
    url = f"/api/v1/queues/{aws_queue.pk}/"

    shown = client.get(url).json()
    assert (shown["slurm_conf"], shown["slurm_partition"], shown["slurm_account"]) == ("", "", "")
    body = {"slurm_conf": unreachable, "reason": "r", "version": aws_queue.version}
    bad = client.patch(url, {**body, "slurm_partition": "a b", "slurm_account": "ml"}, "json")
    assert bad.status_code == 400
    assert list(bad.json()["errors"]) == ["slurm_partition"]
    down = client.patch(url, {**body, "slurm_partition": "gpu"}, format="json")
    assert down.status_code == 400 and list(down.json()["errors"]) == ["slurm_conf"]
    assert "did not answer" in down.json()["errors"]["slurm_conf"][0]
    both = client.patch(url, {**body, "capacity": {XL: 4}}, format="json")
    assert both.status_code == 400 and list(both.json()["errors"]) == ["slurm_conf"]
    # An unchanged binding is not asked of the cluster again: a queue whose cluster is
    # down still takes other edits, and saving the same binding changes nothing.
    JobQueue.objects.filter(pk=aws_queue.pk).update(
        executor_settings={"slurm": {"conf": unreachable, "partition": "gpu"}}
    )
    same = client.patch(url, {**body, "slurm_partition": "gpu"}, format="json")
    assert same.status_code == 200, same.json()
    capacity = client.patch(
        url, {"capacity": {XL: 4}, "reason": "r", "version": aws_queue.version}, format="json"
    )
    assert capacity.status_code == 200, capacity.json()
    assert not PolicyChange.objects.filter(target=PolicyChange.Target.EXECUTOR_BINDING).exists()


def test_an_instance_types_resources_on_the_page_the_api_and_the_command(admin):
    itype = InstanceType.objects.create(name="a100", gpu_count=1)
    page = page_client(admin).post(
        reverse("instance-type-binding", args=[itype.pk]),
        {"slurm_resources": "--gres=gpu:a100:1\n--wrap=id", "reason": "r"},
    )
    assert page.status_code == 200
    assert "--wrap is not a resource option" in page.context["form"].errors["slurm_resources"][0]

    client = api_client(admin)
    url = f"/api/v1/instance-types/{itype.pk}/"
    for bad, message in (
        (["--output=job.out"], "--output is not a resource option"),
        ("--gres=gpu:1", "give a list of sbatch options"),
        (["--gres=gpu:1 --wrap=id"], "is not an sbatch option"),
    ):
        answer = client.patch(url, {"slurm_resources": bad, "reason": "r"}, format="json")
        assert answer.status_code == 400, bad
        assert list(answer.json()["errors"]) == ["slurm_resources"]
        assert message in answer.json()["errors"]["slurm_resources"][0]
    mixed = client.patch(url, {"slurm_resources": [], "gpu_count": 2, "reason": "r"}, "json")
    assert mixed.status_code == 400 and list(mixed.json()["errors"]) == ["gpu_count"]
    no_reason = client.patch(url, {"slurm_resources": ["--gres=gpu:1"]}, format="json")
    assert no_reason.status_code == 400 and list(no_reason.json()["errors"]) == ["reason"]

    with pytest.raises(Exception, match="--output is not a resource option"):
        call_command("slurm_bind", "instance-type", "a100", "--", "--output=job.out")
    itype.refresh_from_db()
    assert instance_type_resources(itype) == []
    assert not PolicyChange.objects.filter(target=PolicyChange.Target.EXECUTOR_BINDING).exists()


def test_a_resources_change_is_history_with_before_and_after_and_reverts(admin):
    itype = InstanceType.objects.create(name="a100", gpu_count=1)
    client = api_client(admin)

    saved = client.patch(
        f"/api/v1/instance-types/{itype.pk}/",
        {"slurm_resources": ["--gres=gpu:a100:1", "--mem=64G"], "reason": "one GPU each"},
        format="json",
    )

    assert saved.status_code == 200
    assert saved.json()["slurm_resources"] == ["--gres=gpu:a100:1", "--mem=64G"]
    change = PolicyChange.objects.get(target=PolicyChange.Target.EXECUTOR_BINDING)
    assert (change.target, change.object_repr, change.actor, change.reason) == (
        PolicyChange.Target.EXECUTOR_BINDING,
        "a100",
        admin,
        "one GPU each",
    )
    assert change.before == {"slurm_resources": []}
    assert change.after == {"slurm_resources": ["--gres=gpu:a100:1", "--mem=64G"]}
    history = page_client(admin).get(reverse("history")).content.decode()
    assert "Slurm resources of one instance" in history
    assert "--gres=gpu:a100:1 --mem=64G" in history

    reverted = policy_change_revert(actor=admin, change=change, reason="back to none")
    itype.refresh_from_db()
    assert instance_type_resources(itype) == []
    assert reverted.entry.reverts == change
    assert reverted.entry.after == {"slurm_resources": []}


def test_the_commands_writes_are_direct_changes_in_the_history(admin):
    InstanceType.objects.create(name="a100", gpu_count=1)

    call_command("slurm_bind", "instance-type", "a100", "--", "--gres=gpu:1")

    change = PolicyChange.objects.get(target=PolicyChange.Target.EXECUTOR_BINDING)
    assert (change.target, change.cause, change.actor) == (
        PolicyChange.Target.EXECUTOR_BINDING,
        PolicyChange.Cause.DIRECT,
        None,
    )
    assert (change.before, change.after) == (
        {"slurm_resources": []},
        {"slurm_resources": ["--gres=gpu:1"]},
    )


def test_under_review_resources_wait_for_another_admin(settings, admin):
    itype = InstanceType.objects.create(name="a100", gpu_count=1)
    settings.POLICY_CHANGES_NEED_REVIEW = True

    answer = api_client(admin).patch(
        f"/api/v1/instance-types/{itype.pk}/",
        {"slurm_resources": ["--gres=gpu:1"], "reason": "one GPU each"},
        format="json",
    )
    page = page_client(admin).post(
        reverse("instance-type-binding", args=[itype.pk]),
        {"slurm_resources": "--exclusive", "reason": "whole nodes"},
    )

    assert answer.status_code == 202
    assert page.status_code == 302 and page.url == reverse("proposal-list")
    first, second = PolicyProposal.objects.order_by("pk")
    assert (first.kind, first.author, first.state) == ("type_binding", admin, "PENDING")
    assert first.payload["after"] == {"slurm_resources": ["--gres=gpu:1"]}
    assert second.payload["binding"]["slurm_resources"] == ["--exclusive"]
    listed = page_client(admin).get(reverse("proposal-list")).content.decode()
    assert "Change of an instance type&#x27;s executor binding" in listed
    assert "Slurm resources of one instance" in listed
    itype.refresh_from_db()
    assert instance_type_resources(itype) == []
    assert not PolicyChange.objects.filter(target=PolicyChange.Target.EXECUTOR_BINDING).exists()

    proposal_approve(actor=UserFactory(username="second-admin", roles=["admins"]), proposal=first)

    itype.refresh_from_db()
    assert instance_type_resources(itype) == ["--gres=gpu:1"]
    first.refresh_from_db()
    assert first.state == PolicyProposal.State.APPLIED
    assert first.applied_change.after == {"slurm_resources": ["--gres=gpu:1"]}
    assert first.applied_change.actor == admin


def test_the_native_file_carries_an_instance_types_resources(admin, aws_queue):
    InstanceType.objects.filter(name=XL).update(
        executor_settings={"slurm": {"resources": ["--gres=gpu:1"]}}
    )
    data = yaml.safe_load(policy_export(format="native", queue=aws_queue).content)
    [entry] = data["instance_types"]
    assert entry["slurm_resources"] == ["--gres=gpu:1"]

    entry["slurm_resources"] = ["--exclusive"]
    data["instance_types"].append({"name": "a100", "gpus": 8, "slurm_resources": ["--wrap=id"]})
    with pytest.raises(PolicyFileError) as refused:
        policy_plan(policy=policy_file_read(raw=native.dump(data), source="types.yaml"))
    [problem] = refused.value.problems
    assert problem.field == "instance_types[1].slurm_resources"
    assert problem.message.startswith("--wrap is not a resource option")

    data["instance_types"][1]["slurm_resources"] = ["--exclusive", "--constraint=a100"]
    policy = policy_file_read(raw=native.dump(data), source="types.yaml")
    plan = policy_plan(policy=policy)
    assert (
        f"instance type '{XL}': its Slurm resources stay --gres=gpu:1 (change them on its page)"
        in plan.warnings
    )
    policy_apply(actor=admin, policy=policy, reason="bind the queue")

    assert instance_type_resources(InstanceType.objects.get(name=XL)) == ["--gres=gpu:1"]
    assert instance_type_resources(InstanceType.objects.get(name="a100")) == [
        "--exclusive",
        "--constraint=a100",
    ]
    change = PolicyChange.objects.get(target=PolicyChange.Target.EXECUTOR_BINDING)
    assert (change.object_repr, change.cause) == ("a100", PolicyChange.Cause.IMPORT)
    assert change.after == {"slurm_resources": ["--exclusive", "--constraint=a100"]}
