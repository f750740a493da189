"""Optional sync with AWS Batch: push applied policy changes, and read back the drift.

Off unless AWS_BATCH_SYNC=1, and only for the queues AWS_BATCH_QUEUE_ARNS maps to a
job queue ARN (the client's region is the ARN's; credentials come from the usual AWS
environment). After a policy file is applied, each synced queue's shares are compared
with its AWS quota shares (ListQuotaShares, then DescribeQuotaShare for each) and a
share AWS lacks is created (CreateQuotaShare, the aws-batch export's request as it is),
one that differs is updated (UpdateQuotaShare). Shares only AWS holds are left alone
and reported. The product's change stands whatever AWS answers: a failure is reported,
and the drift report shows what is still out of step.

Drift compares the same fields: capacity limits, strategy, borrow limit, in-share
preemption and state, per share, by its AWS name.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings

from fleet.models import JobQueue
from governance.policy_code.aws_batch import queue_arns, quota_share_requests
from governance.policy_code.live import live_queue

CREATED, UPDATED, UNCHANGED, FAILED = "created", "updated", "unchanged", "failed"


@dataclass(frozen=True)
class SyncLine:
    queue: str
    share: str
    action: str
    detail: str = ""

    def __str__(self) -> str:
        text = f"AWS Batch: {self.queue}/{self.share} {self.action}"
        return f"{text}: {self.detail}" if self.detail else text


@dataclass(frozen=True)
class Drift:
    share: str
    field: str
    ours: object
    theirs: object


class SyncUnavailable(Exception):
    pass


def sync_enabled() -> bool:
    return bool(getattr(settings, "AWS_BATCH_SYNC", False))


def queue_arn(queue: JobQueue) -> str | None:
    return queue_arns().get(queue.name)


def batch_client(arn: str):
    """A Batch client in the ARN's region; boto3 is loaded only when sync is used."""
    import boto3

    return boto3.client("batch", region_name=arn.split(":")[3] or None)


def _sharing_state(share: dict) -> dict:
    """The fields a quota share is compared by, from a request or AWS's description."""
    sharing = share.get("resourceSharingConfiguration", {})
    strategy = sharing.get("strategy")
    return {
        "capacityLimits": sorted(
            (limit["capacityUnit"], limit["maxCapacity"])
            for limit in share.get("capacityLimits", [])
        ),
        "strategy": strategy,
        "borrowLimit": sharing.get("borrowLimit", -1) if strategy == "LEND_AND_BORROW" else None,
        "inSharePreemption": share.get("preemptionConfiguration", {}).get("inSharePreemption"),
        "state": share.get("state", "ENABLED"),
    }


def remote_shares(client, job_queue: str) -> dict[str, dict]:
    """AWS's quota shares of the job queue, by name, each as DescribeQuotaShare gives it."""
    shares: dict[str, dict] = {}
    token = None
    while True:
        page = client.list_quota_shares(
            jobQueue=job_queue, **({"nextToken": token} if token else {})
        )
        for listed in page.get("quotaShares", []):
            described = client.describe_quota_share(quotaShareArn=listed["quotaShareArn"])
            shares[described.get("quotaShareName", listed["quotaShareName"])] = described
        token = page.get("nextToken")
        if not token:
            return shares


def _requests(queue: JobQueue, arn: str) -> list[dict]:
    return quota_share_requests(live_queue(queue=queue), arn, [])


def push(*, queue: JobQueue, client=None) -> list[SyncLine]:
    """Bring AWS's quota shares of the queue's job queue in line with the product."""
    from botocore.exceptions import BotoCoreError, ClientError

    arn = queue_arn(queue)
    if arn is None:
        return []
    lines: list[SyncLine] = []
    try:
        client = client or batch_client(arn)
        remote = remote_shares(client, arn)
        for request in _requests(queue, arn):
            name = request["quotaShareName"]
            current = remote.pop(name, None)
            if current is None:
                client.create_quota_share(**request)
                lines.append(SyncLine(queue.name, name, CREATED))
            elif _sharing_state(current) != _sharing_state(request):
                client.update_quota_share(
                    quotaShareArn=current["quotaShareArn"],
                    **{
                        key: request[key]
                        for key in (
                            "capacityLimits",
                            "resourceSharingConfiguration",
                            "preemptionConfiguration",
                            "state",
                        )
                    },
                )
                lines.append(SyncLine(queue.name, name, UPDATED))
            else:
                lines.append(SyncLine(queue.name, name, UNCHANGED))
        for name in sorted(remote):
            lines.append(SyncLine(queue.name, name, UNCHANGED, "only in AWS: left as it is"))
    except (BotoCoreError, ClientError) as error:
        lines.append(SyncLine(queue.name, "*", FAILED, str(error)))
    return lines


def drift(*, queue: JobQueue, client=None) -> list[Drift]:
    """Where AWS's quota shares differ from the product's policy (a change made outside)."""
    from botocore.exceptions import BotoCoreError, ClientError

    arn = queue_arn(queue)
    if arn is None:
        raise SyncUnavailable(f"no job queue ARN is configured for queue '{queue.name}'")
    try:
        client = client or batch_client(arn)
        remote = remote_shares(client, arn)
    except (BotoCoreError, ClientError) as error:
        raise SyncUnavailable(f"AWS Batch did not answer: {error}") from error
    found: list[Drift] = []
    for request in _requests(queue, arn):
        name = request["quotaShareName"]
        current = remote.pop(name, None)
        if current is None:
            found.append(Drift(name, "share", "present", "missing"))
            continue
        ours, theirs = _sharing_state(request), _sharing_state(current)
        found += [
            Drift(name, key, ours[key], theirs[key]) for key in ours if ours[key] != theirs[key]
        ]
    found += [Drift(name, "share", "missing", "present") for name in sorted(remote)]
    return found
