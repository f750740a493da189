"""The conflict screen of the policy editors: every differing field, who saved theirs and
when, and the merge field by field, saved only on confirm and checked again."""

import pytest
from django.urls import reverse

from fleet.models import JobQueue, QuotaShare, WorkloadClass
from governance.models import PolicyChange
from governance.policy.services import queue_set_capacity
from scheduler.executors.slurm.binding import SlurmBinding
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def qs1(aws_queue):
    return QuotaShare.objects.get(queue=aws_queue, name="qs1")


@pytest.fixture
def two_admins(client_as, admin):
    other = UserFactory(
        username="other-admin", first_name="Olga", last_name="Berg", roles=["admins"]
    )
    return client_as(other), client_as(admin)


def _conflicted(two_admins, share_post, qs1):
    theirs, mine = two_admins
    url = reverse("share-edit", args=[qs1.pk])
    loaded = share_post(qs1, priority_ceiling=qs1.priority_ceiling)
    assert (
        theirs.post(url, {**loaded, "priority_ceiling": "150", "reason": "Theirs"}).status_code
        == 302
    )
    response = mine.post(
        url, {**loaded, "priority_ceiling": "200", "borrow_limit": "50", "reason": "Mine"}
    )
    return url, mine, response


def test_the_conflict_lists_the_priority_ceiling_and_names_the_other_admin(
    two_admins, share_post, qs1
):
    _, _, response = _conflicted(two_admins, share_post, qs1)

    assert response.status_code == 200
    conflict = response.context["conflict"]
    rows = {row.name: row for row in conflict["rows"]}
    assert set(rows) == {"priority_ceiling", "borrow_limit"}
    assert (rows["priority_ceiling"].theirs, rows["priority_ceiling"].yours) == ("150", "200")
    html = response.content.decode()
    assert "Olga Berg" in html and "saved version 2 at" in html and "Theirs" in html
    assert 'name="merge-priority_ceiling" value="theirs"' in html
    assert "Take all theirs" in html and "Keep all mine" in html
    qs1.refresh_from_db()
    assert qs1.priority_ceiling == 150


def test_take_all_theirs_only_sets_the_choices(two_admins, share_post, qs1):
    url, mine, response = _conflicted(two_admins, share_post, qs1)
    carried = _carried(response)

    again = mine.post(url, {**carried, "merge_all": "theirs"})

    assert again.status_code == 200
    assert {row.choice for row in again.context["conflict"]["rows"]} == {"theirs"}
    qs1.refresh_from_db()
    assert qs1.version == 2


def test_the_merge_saves_a_new_version_with_the_chosen_fields(two_admins, share_post, qs1):
    url, mine, response = _conflicted(two_admins, share_post, qs1)
    carried = _carried(response)

    saved = mine.post(
        url,
        {
            **carried,
            "merge-priority_ceiling": "theirs",
            "merge-borrow_limit": "mine",
            "reason": "Merged with Olga's ceiling",
            "merge": "save",
        },
    )

    assert saved.status_code == 302
    qs1.refresh_from_db()
    assert (qs1.version, qs1.priority_ceiling, qs1.borrow_limit) == (3, 150, 50)
    change = PolicyChange.objects.filter(share=qs1).order_by("-id").first()
    assert change.reason == "Merged with Olga's ceiling"
    assert change.actor.username == "admin-user"


def test_the_merge_needs_a_reason_and_keeps_the_screen(two_admins, share_post, qs1):
    url, mine, response = _conflicted(two_admins, share_post, qs1)

    again = mine.post(url, {**_carried(response), "reason": " ", "merge": "save"})

    assert again.status_code == 200
    assert again.context["conflict"]["errors"]
    assert "The merged version was not saved" in again.content.decode()
    qs1.refresh_from_db()
    assert qs1.version == 2


def test_a_third_save_before_the_merge_shows_the_conflict_again(two_admins, share_post, qs1):
    url, mine, response = _conflicted(two_admins, share_post, qs1)
    theirs = two_admins[0]
    qs1.refresh_from_db()
    theirs.post(url, {**share_post(qs1, priority_ceiling=300), "reason": "Third"})

    again = mine.post(url, {**_carried(response), "merge": "save"})

    assert again.status_code == 200
    conflict = again.context["conflict"]
    assert conflict["version"] == 3
    rows = {row.name: row for row in conflict["rows"]}
    assert rows["priority_ceiling"].theirs == "300"
    qs1.refresh_from_db()
    assert (qs1.version, qs1.priority_ceiling) == (3, 300)


def test_capacity_conflict_merges_too(admin_client, admin, aws_queue):
    queue_set_capacity(
        actor=admin, queue=aws_queue, capacity={"ml.g5.xlarge": 4}, reason="t", expected_version=1
    )
    url = reverse("queue-capacity", args=[aws_queue.pk])
    payload = {
        "version": "1",
        "reason": "mine",
        "capacity-0-instance_type": "ml.g5.xlarge",
        "capacity-0-max_instances": "6",
    }
    response = admin_client.post(url, payload)
    [row] = response.context["conflict"]["rows"]
    assert (row.name, row.theirs, row.yours) == ("capacity", "ml.g5.xlarge × 4", "ml.g5.xlarge × 6")
    assert "admin-user" in response.content.decode()

    saved = admin_client.post(
        url, {**_carried(response), "merge-capacity": "mine", "merge": "save"}
    )

    assert saved.status_code == 302
    queue = JobQueue.objects.get(pk=aws_queue.pk)
    assert (queue.version, queue.capacities.get().instances) == (3, 6)


def test_workload_class_conflict_lists_its_fields(admin_client, admin):
    workload_class = WorkloadClass.objects.create(name="training", grace=30)
    url = reverse("workload-class-edit", args=[workload_class.pk])
    WorkloadClass.objects.filter(pk=workload_class.pk).update(version=2, grace=45)
    payload = {
        "name": "training",
        "description": "",
        "min_runtime_reclaim": "0",
        "min_runtime_preempt": "0",
        "grace": "60",
        "checkpoint_on_notice": "",
        "version": "1",
        "reason": "mine",
    }

    response = admin_client.post(url, payload)

    assert [(r.name, r.theirs, r.yours) for r in response.context["conflict"]["rows"]] == [
        ("grace", "45", "60")
    ]


def _carried(response) -> dict:
    """What the conflict screen's form posts back (its hidden inputs and reason)."""
    conflict = response.context["conflict"]
    data: dict = {}
    for key, value in conflict["carried"]:
        data.setdefault(key, []).append(value)
    data["version"] = str(conflict["version"])
    data["reason"] = conflict["reason"]
    return data


def test_slurm_binding_conflict_lists_its_fields_and_who_saved(admin_client, aws_queue):
    JobQueue.objects.filter(pk=aws_queue.pk).update(
        version=2,
        executor="slurm",
        executor_settings={"slurm": {"conf": "/etc/slurm/slurm.conf", "partition": "gpu"}},
    )
    url = reverse("queue-binding", args=[aws_queue.pk])
    payload = {
        "slurm_conf": "",
        "slurm_partition": "",
        "slurm_account": "",
        "version": "1",
        "reason": "unbind",
    }

    response = admin_client.post(url, payload)

    assert response.status_code == 200
    rows = {row.name: row for row in response.context["conflict"]["rows"]}
    assert set(rows) == {"slurm_conf", "slurm_partition"}
    assert rows["slurm_partition"].theirs == "gpu"
    assert SlurmBinding.of(JobQueue.objects.get(pk=aws_queue.pk)).partition == "gpu"


def test_the_capacity_preview_survives_a_failed_save(admin_client, aws_queue):
    response = admin_client.post(
        reverse("queue-capacity", args=[aws_queue.pk]),
        {
            "version": "1",
            "reason": "",
            "capacity-0-instance_type": "ml.g5.xlarge",
            "capacity-0-max_instances": "2",
        },
    )

    assert response.context["form"].errors["reason"]
    impact = response.context["impact"]
    assert impact["ready"] and impact["lines"]
    assert "Change a field to see its effect" not in response.content.decode()
    assert JobQueue.objects.get(pk=aws_queue.pk).capacities.get().instances == 3
