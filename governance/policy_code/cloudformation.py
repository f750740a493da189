"""The `cloudformation` format: a template of AWS::Batch::QuotaShare resources.

One resource per share, in entitlement order, built from the same CreateQuotaShare
request as the `aws-batch` format (governance.policy_code.aws_batch, which documents
the mapping and the naming rule) with each key spelt as CloudFormation spells it:

    QuotaShareName                  quotaShareName
    JobQueue                        {"Ref": "JobQueue"}: the job queue is the template's
                                    parameter, by default the queue's ARN from
                                    AWS_BATCH_QUEUE_ARNS (else its name)
    CapacityLimits[]                [{"MaxCapacity", "CapacityUnit"}]
    ResourceSharingConfiguration    {"Strategy", "BorrowLimit" (LEND_AND_BORROW only)}
    PreemptionConfiguration         {"InSharePreemption"}
    State                           ENABLED | DISABLED
    Tags                            {"team": ..., "share-name": ... when mapped}

Logical ids are "QuotaShare" and the share's AWS name in letters and digits, made
unique with a number. The template is JSON; it is an export only (import the
`aws-batch` or `native` format).
"""

from __future__ import annotations

import json
import re

from fleet.models import JobQueue
from governance.policy_code.aws_batch import aws_name, job_queue_reference, quota_share_requests
from governance.policy_code.live import live_queue
from governance.policy_code.model import Export

FORMAT = "cloudformation"
PARAMETER = "JobQueue"
_KEYS = {
    "quotaShareName": "QuotaShareName",
    "jobQueue": "JobQueue",
    "capacityLimits": "CapacityLimits",
    "maxCapacity": "MaxCapacity",
    "capacityUnit": "CapacityUnit",
    "resourceSharingConfiguration": "ResourceSharingConfiguration",
    "strategy": "Strategy",
    "borrowLimit": "BorrowLimit",
    "preemptionConfiguration": "PreemptionConfiguration",
    "inSharePreemption": "InSharePreemption",
    "state": "State",
    "tags": "Tags",
}


def _properties(value, *, inside_tags: bool = False):
    if isinstance(value, dict):
        return {
            key if inside_tags else _KEYS[key]: _properties(item, inside_tags=key == "tags")
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [_properties(item) for item in value]
    return value


def logical_id(name: str, taken: set[str]) -> str:
    base = "QuotaShare" + "".join(
        part[:1].upper() + part[1:] for part in re.split(r"[^A-Za-z0-9]+", name) if part
    )
    candidate, number = base, 1
    while candidate in taken:
        number += 1
        candidate = f"{base}{number}"
    taken.add(candidate)
    return candidate


def export(*, queue: JobQueue) -> Export:
    live = live_queue(queue=queue)
    warnings: list[str] = []
    job_queue = job_queue_reference(queue.name, warnings)
    resources = {}
    taken: set[str] = set()
    for request in quota_share_requests(live, job_queue, warnings):
        properties = _properties(request)
        properties["JobQueue"] = {"Ref": PARAMETER}
        resources[logical_id(request["quotaShareName"], taken)] = {
            "Type": "AWS::Batch::QuotaShare",
            "Properties": properties,
        }
    template = {
        "AWSTemplateFormatVersion": "2010-09-09",
        "Description": f"Quota shares of job queue {queue.name}, exported by quota-governance.",
        "Parameters": {
            PARAMETER: {
                "Type": "String",
                "Default": job_queue,
                "Description": "Name or ARN of the AWS Batch job queue the shares belong to.",
            }
        },
        "Resources": resources,
    }
    return Export(
        content=json.dumps(template, indent=2, ensure_ascii=False) + "\n",
        filename=f"{aws_name(queue.name, set())}.cloudformation.json",
        media_type="application/json",
        warnings=tuple(warnings),
    )
