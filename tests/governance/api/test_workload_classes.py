"""Workload classes through the API: admins write (recorded, 202 under review), everyone
with policy access reads, bad values are 400s naming the field and change nothing; the
share and definition serializers carry the class."""

import pytest
from rest_framework.test import APIClient

from fleet.models import QuotaShare, WorkloadClass
from governance.models import PolicyChange

URL = "/api/v1/workload-classes/"
BATCH = {
    "name": "batch",
    "description": "Long runs",
    "min_runtime_reclaim": 600,
    "min_runtime_preempt": 0,
    "grace": 120,
    "checkpoint_on_notice": 30,
    "reason": "issue 24",
}


def test_an_admin_creates_changes_and_deletes_a_class(admin_api):
    created = admin_api.post(URL, BATCH, format="json")
    assert created.status_code == 201, created.json()
    body = created.json()
    assert (body["name"], body["grace"], body["version"]) == ("batch", 120, 1)

    changed = admin_api.patch(
        f"{URL}{body['id']}/", {"grace": 60, "version": 1, "reason": "shorter"}, format="json"
    )
    assert changed.status_code == 200, changed.json()
    assert (changed.json()["grace"], changed.json()["min_runtime_reclaim"]) == (60, 600)
    change = PolicyChange.objects.filter(workload_class_id=body["id"]).latest("id")
    assert (change.reason, change.before["grace"], change.after["grace"]) == ("shorter", 120, 60)

    deleted = admin_api.delete(f"{URL}{body['id']}/", {"reason": "unused"}, format="json")
    assert deleted.status_code == 204
    assert not WorkloadClass.objects.exists()


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"grace": -1}, "grace"),
        ({"checkpoint_on_notice": 0}, "checkpoint_on_notice"),
        ({"grace": 0}, "checkpoint_on_notice"),  # a checkpoint on notice needs a grace
        ({"min_runtime_reclaim": "soon"}, "min_runtime_reclaim"),
        ({"reason": ""}, "reason"),
    ],
)
def test_bad_values_are_refused_naming_the_field(admin_api, db, changes, field):
    response = admin_api.post(URL, {**BATCH, **changes}, format="json")

    assert response.status_code == 400
    assert field in response.json()["errors"], response.json()
    assert not WorkloadClass.objects.exists()


def test_a_name_clash_is_refused(admin_api, db):
    admin_api.post(URL, BATCH, format="json")
    response = admin_api.post(URL, {**BATCH, "grace": 5}, format="json")

    assert response.status_code == 400
    assert response.json()["errors"]["name"] == ["a workload class named 'batch' already exists"]
    assert WorkloadClass.objects.count() == 1


def test_a_class_in_use_is_not_deleted_and_the_answer_names_its_use(admin_api, aws_queue):
    body = admin_api.post(URL, BATCH, format="json").json()
    QuotaShare.objects.filter(name="qs1").update(default_workload_class_id=body["id"])

    response = admin_api.delete(f"{URL}{body['id']}/", {"reason": "unused"}, format="json")

    assert response.status_code == 400
    assert "qs1" in response.json()["errors"]["non_field_errors"][0]
    assert WorkloadClass.objects.count() == 1


def test_under_review_a_new_class_is_a_proposal(settings, admin_api, db):
    settings.POLICY_CHANGES_NEED_REVIEW = True

    response = admin_api.post(URL, BATCH, format="json")

    assert response.status_code == 202, response.json()
    assert not WorkloadClass.objects.exists()


def test_a_team_lead_reads_but_does_not_write(team_lead, db):
    WorkloadClass.objects.create(name="batch")
    client = APIClient()
    client.force_login(team_lead)

    assert client.get(URL).status_code == 200
    assert client.post(URL, BATCH, format="json").status_code == 403
    assert WorkloadClass.objects.count() == 1


def test_the_share_serializer_carries_and_sets_the_default_class(admin_api, aws_queue):
    WorkloadClass.objects.create(name="batch", min_runtime_reclaim=600)
    share = aws_queue.shares.get(name="qs1")

    changed = admin_api.patch(
        f"/api/v1/shares/{share.pk}/",
        {"default_workload_class": "batch", "version": share.version, "reason": "contract"},
        format="json",
    )
    assert changed.status_code == 200, changed.json()
    assert changed.json()["default_workload_class"] == "batch"

    refused = admin_api.patch(
        f"/api/v1/shares/{share.pk}/",
        {"default_workload_class": "nonesuch", "version": share.version + 1, "reason": "x"},
        format="json",
    )
    assert refused.status_code == 400
    assert "default_workload_class" in refused.json()["errors"]

    kept = admin_api.patch(
        f"/api/v1/shares/{share.pk}/",
        {"priority_ceiling": 200, "version": share.version + 1, "reason": "raise"},
        format="json",
    )
    assert kept.json()["default_workload_class"] == "batch"


def test_the_definition_serializer_carries_and_sets_the_class(admin_api, aws_queue):
    WorkloadClass.objects.create(name="batch", min_runtime_reclaim=600)
    body = {"name": "train", "queues": ["aws-sample"], "reason": "registered"}

    registered = admin_api.post(
        "/api/v1/job-definitions/", {**body, "workload_class": "batch"}, format="json"
    )
    assert registered.status_code == 201, registered.json()
    assert registered.json()["latest"]["workload_class"] == "batch"

    refused = admin_api.post(
        "/api/v1/job-definitions/",
        {**body, "name": "other", "workload_class": "nonesuch"},
        format="json",
    )
    assert refused.status_code == 400
    assert "workload_class" in refused.json()["errors"]

    revised = admin_api.post(
        f"/api/v1/job-definitions/{registered.json()['id']}/revisions/",
        {"base_revision": 1, "workload_class": None, "reason": "the share decides"},
        format="json",
    )
    assert revised.status_code == 201, revised.json()
    assert revised.json()["latest"]["workload_class"] is None
