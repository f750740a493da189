"""POST /api/v1/what-if/ and GET /api/v1/what-if/{id}/."""

from __future__ import annotations

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from fleet.models import QuotaShare
from governance.models import WhatIfComparison
from governance.whatif import services
from tests.governance.whatif.conftest import AWS_PHILLY_MAPPING

pytestmark = pytest.mark.django_db


@pytest.fixture
def api():
    return APIClient()


def test_create_edit_run_and_read(api, admin, aws_queue, comparison):
    api.force_authenticate(admin)
    response = api.post(
        reverse("api-whatif-list"),
        {
            "queue": aws_queue.pk,
            "title": "qs2 borrows",
            "shares": [{"name": "qs2", "strategy": "LEND_AND_BORROW"}],
            "workload": {
                "kind": "PHILLY",
                "start": "2017-10-02",
                "days": 1,
                "scale": 0.1,
                "mapping": AWS_PHILLY_MAPPING,
            },
        },
        format="json",
    )
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["status"] == WhatIfComparison.Status.QUEUED
    assert body["draft_policy"]["shares"][1]["strategy"] == "LEND_AND_BORROW"
    assert body["workload"]["kind"] == "PHILLY" and body["workload"]["jobs"] > 0
    mapping = {item["team"]: item["share"] for item in body["workload"]["mapping"]["teams"]}
    assert {team: mapping[team] for team in AWS_PHILLY_MAPPING} == AWS_PHILLY_MAPPING
    left_out = {item["team"]: item["jobs"] for item in body["workload"]["mapping"]["left_out"]}
    assert set(left_out) == set(mapping) - set(AWS_PHILLY_MAPPING) and all(left_out.values())
    assert QuotaShare.objects.get(name="qs2").strategy == "LEND"

    services.comparison_execute(comparison_id=body["id"])
    read = api.get(reverse("api-whatif-detail", args=[body["id"]]))
    assert read.status_code == 200
    assert read.json()["status"] == "DONE"
    assert set(read.json()["results"]) >= {"current", "draft", "sentences"}
    assert read.json()["results"]["left_out"]["jobs"] == sum(left_out.values())


def test_a_mapping_naming_an_unknown_share_or_team_is_refused_by_name(api, admin, aws_queue):
    api.force_authenticate(admin)
    response = api.post(
        reverse("api-whatif-list"),
        {
            "queue": aws_queue.pk,
            "workload": {
                "kind": "PHILLY",
                "start": "2017-10-02",
                "days": 1,
                "mapping": {"6214e9": "qs9", "nosuch": "qs1"},
            },
        },
        format="json",
    )
    assert response.status_code == 400
    errors = response.json()["errors"]
    assert errors["mapping.6214e9"] == [
        "no share named 'qs9' in the cloned policy (one of qs1, qs2, qs3, or empty to leave it out)"
    ]
    assert errors["mapping.nosuch"] == ["no team 'nosuch' in this workload"]
    assert not WhatIfComparison.objects.exists()


def test_errors_have_the_project_shape_and_keep_nothing(api, admin, aws_queue):
    api.force_authenticate(admin)
    count = WhatIfComparison.objects.count()
    response = api.post(
        reverse("api-whatif-list"),
        {"queue": aws_queue.pk, "shares": [{"name": "qs2", "borrow_limit": 50}]},
        format="json",
    )
    assert response.status_code == 400
    assert response.json() == {
        "detail": "shares[1].borrow_limit: only allowed with LEND_AND_BORROW",
        "errors": {"shares[1].borrow_limit": ["only allowed with LEND_AND_BORROW"]},
    }
    bad_csv = "timestamp,duration,num_gpus,gpu_time,cluster\n2017-10-09 07:01:55,1,0,1,a\n"
    response = api.post(
        reverse("api-whatif-list"),
        {"queue": aws_queue.pk, "workload": {"kind": "UPLOAD", "csv": bad_csv}},
        format="json",
    )
    assert response.status_code == 400
    assert response.json()["errors"] == {
        "workload": ["line 2: num_gpus must be a whole number, at least 1"]
    }
    response = api.post(reverse("api-whatif-list"), {"queue": 99999}, format="json")
    assert response.status_code == 400
    assert "queue" in response.json()["errors"]
    assert WhatIfComparison.objects.count() == count


@pytest.mark.parametrize("role", ["team_lead", "leadership", "outsider"])
def test_only_admins(api, request, comparison, aws_queue, role):
    api.force_authenticate(request.getfixturevalue(role))
    assert api.get(reverse("api-whatif-detail", args=[comparison.pk])).status_code == 403
    response = api.post(reverse("api-whatif-list"), {"queue": aws_queue.pk}, format="json")
    assert response.status_code == 403
    assert response.json() == {
        "detail": "what-if comparisons are for platform admins",
        "errors": {},
    }


def test_anonymous_gets_401(api, comparison):
    assert api.get(reverse("api-whatif-detail", args=[comparison.pk])).status_code == 401


def test_missing_comparison_is_404(api, admin):
    api.force_authenticate(admin)
    response = api.get(reverse("api-whatif-detail", args=[424242]))
    assert response.status_code == 404
    assert response.json()["errors"] == {}


def test_unknown_workload_kind(api, admin, aws_queue):
    api.force_authenticate(admin)
    response = api.post(
        reverse("api-whatif-list"),
        {"queue": aws_queue.pk, "workload": {"kind": "SOMETHING"}},
        format="json",
    )
    assert response.status_code == 400
    assert response.json()["errors"] == {"workload.kind": ["must be RECORDED, PHILLY or UPLOAD"]}
