"""Choosing another kind of workload on the page uses that kind's own start, and the API
runs the workload it was given, not a stale copy of the empty default."""

from __future__ import annotations

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from governance.models import WhatIfComparison
from governance.whatif import services
from tests.governance.whatif.conftest import AWS_PHILLY_MAPPING

pytestmark = pytest.mark.django_db


def test_choosing_philly_after_the_recorded_default_uses_the_philly_start(client, admin, aws_queue):
    comparison = services.comparison_create(actor=admin, queue=aws_queue)  # recorded, no jobs
    client.force_login(admin)
    page = client.get(reverse("whatif-detail", args=[comparison.pk])).content.decode()
    shown = comparison.workload_params["start"][:10]
    assert f'name="start_shown" value="{shown}"' in page
    # The page's form as the browser sends it: the kind switched, the start left as shown.
    answer = client.post(
        reverse("whatif-workload", args=[comparison.pk]),
        {
            "kind": "PHILLY",
            "start": shown,
            "start_of_kind": "RECORDED",
            "start_shown": shown,
            "days": "1",
            "scale": "0.1",
        },
    )
    assert answer.status_code == 302, answer.content.decode()[:2000]
    comparison.refresh_from_db()
    assert comparison.workload_kind == "PHILLY"
    assert comparison.workload_params["start"] == "2017-10-01"
    # No Philly team is named like an AWS share: every team is listed, left out, and the
    # page says so before the run.
    teams = comparison.share_mapping["teams"]
    assert teams and all(entry["share"] is None for entry in teams)
    assert comparison.workload_jobs == []
    page = client.get(reverse("whatif-detail", args=[comparison.pk])).content.decode()
    assert "Left out of the replay: 271 jobs of 9 teams mapped to no share" in page


def test_a_philly_start_the_user_typed_is_kept_and_a_bad_one_is_not_about_uploads(
    client, admin, aws_queue
):
    comparison = services.comparison_create(actor=admin, queue=aws_queue)
    client.force_login(admin)
    shown = comparison.workload_params["start"][:10]
    form = {"kind": "PHILLY", "start_of_kind": "RECORDED", "start_shown": shown, "days": "1"}
    answer = client.post(
        reverse("whatif-workload", args=[comparison.pk]), {**form, "start": "2017-11-02"}
    )
    assert answer.status_code == 302
    comparison.refresh_from_db()
    assert comparison.workload_params["start"] == "2017-11-02"
    answer = client.post(
        reverse("whatif-workload", args=[comparison.pk]), {**form, "start": "2019-01-01"}
    )
    assert answer.status_code == 400
    text = answer.content.decode()
    assert "upload the file again" not in text
    assert "the Philly trace has no job in that window" in text


def test_the_api_runs_a_philly_workload_on_a_queue_without_recorded_jobs(admin, aws_queue):
    api = APIClient()
    api.force_authenticate(admin)
    answer = api.post(
        reverse("api-whatif-list"),
        {
            "queue": aws_queue.pk,
            "workload": {
                "kind": "PHILLY",
                "start": "2017-10-02",
                "days": 1,
                "scale": 0.1,
                "mapping": AWS_PHILLY_MAPPING,
            },
            "run": True,
        },
        format="json",
    )
    assert answer.status_code == 201, answer.json()
    assert answer.json()["status"] == WhatIfComparison.Status.QUEUED
    assert answer.json()["workload"]["jobs"] > 0


def test_the_api_still_refuses_to_run_an_empty_workload(admin, aws_queue):
    api = APIClient()
    api.force_authenticate(admin)
    answer = api.post(reverse("api-whatif-list"), {"queue": aws_queue.pk}, format="json")
    assert answer.status_code == 400
    assert "the workload has no jobs" in str(answer.json())
    assert not WhatIfComparison.objects.exists()
