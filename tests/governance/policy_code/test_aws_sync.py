"""The optional AWS Batch sync, against botocore's Stubber: the requests the client would
send are checked against the Batch model and the expected parameters; no network."""

import json

import botocore.session
import pytest
from botocore.stub import Stubber

from demo.organisation import seed_aws_sample
from governance.policy_code import policy_export, policy_file_read
from governance.policy_code.aws_sync import (
    CREATED,
    FAILED,
    UNCHANGED,
    UPDATED,
    SyncUnavailable,
    drift,
    push,
)
from governance.policy_code.plan import policy_apply
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

ARN = "arn:aws:batch:us-east-1:123456789012:job-queue/aws-sample"


def share_arn(name: str) -> str:
    return f"arn:aws:batch:us-east-1:123456789012:quota-share/aws-sample/{name}"


@pytest.fixture
def synced(settings, admin):
    settings.AWS_BATCH_SYNC = True
    settings.AWS_BATCH_QUEUE_ARNS = {"aws-sample": ARN}
    return seed_aws_sample(admin, UserFactory(username="lead-demo"))


@pytest.fixture
def client():
    return botocore.session.get_session().create_client(
        "batch",
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )


def requests_of(queue) -> list[dict]:
    return json.loads(policy_export(format="aws-batch", queue=queue).content)["quotaShares"]


def described(request: dict, **changes) -> dict:
    """DescribeQuotaShare's answer for a share as AWS holds it."""
    answer = {
        "quotaShareName": request["quotaShareName"],
        "quotaShareArn": share_arn(request["quotaShareName"]),
        "jobQueueArn": ARN,
        "capacityLimits": request["capacityLimits"],
        "resourceSharingConfiguration": request["resourceSharingConfiguration"],
        "preemptionConfiguration": request["preemptionConfiguration"],
        "state": request["state"],
        "status": "VALID",
    }
    answer.update(changes)
    return answer


def stub_remote(stubber: Stubber, shares: list[dict]) -> None:
    stubber.add_response(
        "list_quota_shares",
        {
            "quotaShares": [
                {"quotaShareName": s["quotaShareName"], "quotaShareArn": s["quotaShareArn"]}
                for s in shares
            ]
        },
        {"jobQueue": ARN},
    )
    for share in shares:
        stubber.add_response(
            "describe_quota_share", share, {"quotaShareArn": share["quotaShareArn"]}
        )


def test_applying_a_file_creates_and_updates_aws_quota_shares(admin, synced, client):
    requests = requests_of(synced)
    body = {"jobQueue": "aws-sample", "quotaShares": [dict(r) for r in requests]}
    body["quotaShares"][0]["resourceSharingConfiguration"]["borrowLimit"] = 100
    policy = policy_file_read(raw=json.dumps(body), source="less-borrowing.json")
    qs1, qs2, qs3 = requests_of(synced)
    stubber = Stubber(client)
    # AWS holds qs1 as it was (now out of date) and qs2; qs3 is missing.
    stub_remote(stubber, [described(qs1), described(qs2)])
    updated = {
        **qs1,
        "resourceSharingConfiguration": {"strategy": "LEND_AND_BORROW", "borrowLimit": 100},
    }
    stubber.add_response(
        "update_quota_share",
        {"quotaShareName": "qs1", "quotaShareArn": share_arn("qs1")},
        {
            "quotaShareArn": share_arn("qs1"),
            "capacityLimits": updated["capacityLimits"],
            "resourceSharingConfiguration": updated["resourceSharingConfiguration"],
            "preemptionConfiguration": updated["preemptionConfiguration"],
            "state": updated["state"],
        },
    )
    stubber.add_response(
        "create_quota_share",
        {"quotaShareName": "qs3", "quotaShareArn": share_arn("qs3")},
        {**qs3, "jobQueue": ARN},
    )
    with stubber:
        result = policy_apply(reason="test", actor=admin, policy=policy, batch_client=client)
    stubber.assert_no_pending_responses()
    assert [(line.share, line.action) for line in result.sync] == [
        ("qs1", UPDATED),
        ("qs2", UNCHANGED),
        ("qs3", CREATED),
    ]
    assert result.sync_lines()[0] == "AWS Batch: aws-sample/qs1 updated"


def test_an_aws_failure_is_reported_and_the_change_stands(admin, synced, client):
    body = json.loads(policy_export(format="aws-batch", queue=synced).content)
    body["quotaShares"][1]["state"] = "DISABLED"
    policy = policy_file_read(raw=json.dumps(body), source="disable-qs2.json")
    stubber = Stubber(client)
    stubber.add_client_error(
        "list_quota_shares", "AccessDeniedException", "not allowed", http_status_code=403
    )
    with stubber:
        result = policy_apply(reason="test", actor=admin, policy=policy, batch_client=client)
    (line,) = result.sync
    assert line.action == FAILED
    assert "AccessDeniedException" in line.detail
    assert synced.shares.get(name="qs2").state == "DISABLED"


def test_without_sync_nothing_is_sent(admin, settings, client):
    settings.AWS_BATCH_QUEUE_ARNS = {"aws-sample": ARN}
    queue = seed_aws_sample(admin, UserFactory(username="lead-demo"))
    body = json.loads(policy_export(format="aws-batch", queue=queue).content)
    body["quotaShares"][1]["state"] = "DISABLED"
    stubber = Stubber(client)
    with stubber:
        result = policy_apply(
            reason="test",
            actor=admin,
            policy=policy_file_read(raw=json.dumps(body), source="x.json"),
            batch_client=client,
        )
    assert result.sync == []
    assert len(result.changes) == 1


def test_drift_shows_a_share_changed_outside_the_product(synced, client):
    qs1, qs2, qs3 = requests_of(synced)
    stubber = Stubber(client)
    stub_remote(
        stubber,
        [
            described(qs1, capacityLimits=[{"maxCapacity": 2, "capacityUnit": "ml.g5.xlarge"}]),
            described(qs2, state="DISABLED"),
            described(
                {**qs3, "quotaShareName": "made-in-console"},
            ),
        ],
    )
    with stubber:
        found = drift(queue=synced, client=client)
    assert [(d.share, d.field, d.ours, d.theirs) for d in found] == [
        ("qs1", "capacityLimits", [("ml.g5.xlarge", 1)], [("ml.g5.xlarge", 2)]),
        ("qs2", "state", "ENABLED", "DISABLED"),
        ("qs3", "share", "present", "missing"),
        ("made-in-console", "share", "missing", "present"),
    ]


def test_drift_follows_aws_pages(synced, client):
    requests = requests_of(synced)
    stubber = Stubber(client)
    shares = [described(request) for request in requests]
    stubber.add_response(
        "list_quota_shares",
        {
            "quotaShares": [{"quotaShareName": "qs1", "quotaShareArn": share_arn("qs1")}],
            "nextToken": "page-2",
        },
        {"jobQueue": ARN},
    )
    stubber.add_response("describe_quota_share", shares[0], {"quotaShareArn": share_arn("qs1")})
    stubber.add_response(
        "list_quota_shares",
        {
            "quotaShares": [
                {"quotaShareName": s["quotaShareName"], "quotaShareArn": s["quotaShareArn"]}
                for s in shares[1:]
            ]
        },
        {"jobQueue": ARN, "nextToken": "page-2"},
    )
    for share in shares[1:]:
        stubber.add_response(
            "describe_quota_share", share, {"quotaShareArn": share["quotaShareArn"]}
        )
    with stubber:
        assert drift(queue=synced, client=client) == []


def test_drift_needs_a_configured_job_queue(admin, settings, varied_queue):
    settings.AWS_BATCH_SYNC = True
    with pytest.raises(SyncUnavailable, match="no job queue ARN"):
        drift(queue=varied_queue)
    assert push(queue=varied_queue) == []
