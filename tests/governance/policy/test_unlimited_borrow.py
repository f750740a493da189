"""An unlimited borrow limit reads "unlimited" everywhere (issue 26 point 6): the queue
page, the API, the policy files and /metrics (tests/fleet/test_metrics.py); never 0 and
never a number that looks like a cap."""

from __future__ import annotations

import json

import pytest
import yaml
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from fleet.models import QuotaShare
from governance.policy_code import policy_export

pytestmark = pytest.mark.django_db


@pytest.fixture(params=[-1, None], ids=["minus-one", "null-column"])
def unlimited(request, aws_queue):
    """qs1 (LEND_AND_BORROW) borrows without a limit: stored -1, or a NULL column, which
    fleet.bridge reads as unlimited too."""
    QuotaShare.objects.filter(queue=aws_queue, name="qs1").update(borrow_limit=request.param)
    return QuotaShare.objects.get(queue=aws_queue, name="qs1")


def test_the_queue_page_says_unlimited(unlimited, leadership):
    client = Client()
    client.force_login(leadership)
    html = client.get(reverse("queue-detail", args=[unlimited.queue_id])).content.decode()
    row = html[html.index(f'id="share-{unlimited.pk}"') :]
    row = row[: row.index("</tr>")]
    assert "unlimited" in row and "borrow cap unlimited" in row
    assert "borrow cap 0" not in row and "0%" not in row


def test_the_api_says_unlimited(unlimited, leadership):
    client = APIClient()
    client.force_authenticate(leadership)
    share = client.get(f"/api/v1/shares/{unlimited.pk}/").json()
    assert share["borrow_limit"] == -1 and share["borrow_unlimited"] is True
    other = client.get(f"/api/v1/shares/{unlimited.queue.shares.get(name='qs2').pk}/").json()
    assert other["borrow_limit"] is None and other["borrow_unlimited"] is False


def test_the_policy_files_say_unlimited(unlimited):
    native = policy_export(format="native", queue=unlimited.queue).content
    assert "-1 = unlimited" in native
    (queue,) = yaml.safe_load(native)["queues"]
    assert next(s for s in queue["shares"] if s["name"] == "qs1")["borrow_limit"] == -1
    batch = json.loads(policy_export(format="aws-batch", queue=unlimited.queue).content)
    qs1 = next(s for s in batch["quotaShares"] if s["quotaShareName"] == "qs1")
    assert qs1["resourceSharingConfiguration"]["borrowLimit"] == -1  # AWS Batch: unlimited
    # Kueue: no borrowingLimit is unlimited borrowing.
    kueue = [doc for doc in yaml.safe_load_all(policy_export(format="kueue").content) if doc]
    (cluster_queue,) = [
        doc
        for doc in kueue
        if doc["kind"] == "ClusterQueue" and doc["metadata"]["name"] == "aws-sample-qs1"
    ]
    assert "borrowingLimit" not in json.dumps(cluster_queue["spec"])
    assert cluster_queue["metadata"]["annotations"]["quota-governance.io/borrow-limit"] == "-1"
