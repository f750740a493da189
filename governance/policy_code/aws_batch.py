"""The `aws-batch` format: a queue's shares as AWS Batch CreateQuotaShare request bodies.

    {"jobQueue": "<queue>", "quotaShares": [<CreateQuotaShare request>, ...]}

Each item is what `aws batch create-quota-share --cli-input-json` takes as it is:

    quotaShareName                       the share's name (mapped, see below)
    jobQueue                             the queue's job queue ARN when AWS_BATCH_QUEUE_ARNS
                                         names one, else the queue's name (mapped)
    capacityLimits[]                     one {"maxCapacity": instances, "capacityUnit":
                                         instance type} per capacity limit, by type name
    resourceSharingConfiguration         {"strategy": RESERVE | LEND | LEND_AND_BORROW}, and
                                         "borrowLimit" (percent, -1 = unlimited) only with
                                         LEND_AND_BORROW
    preemptionConfiguration              {"inSharePreemption": ENABLED | DISABLED}
    state                                ENABLED | DISABLED
    tags                                 {"team": the owning team}; {"share-name": the
                                         share's own name} when the name had to be mapped;
                                         {"priority-ceiling": "N"} when the share's ceiling
                                         is not the default 100 (AWS has no such field);
                                         {"workload-class": name} when the share has a
                                         default workload class (AWS has none: the
                                         class itself is the native format's; on
                                         import it must exist, and a share without the
                                         tag keeps its own)

Items are in entitlement order. AWS names are up to 128 characters of
[A-Za-z0-9_-]: a name that breaks this has every other character replaced by "-",
is cut to 128 characters and, when that collides with another share's name, gets
"-2", "-3", ... in share order; every mapping is reported as a warning, and the
`share-name` tag brings the original name back on import.

Import reads the same shape, and also the output of `aws batch list-quota-shares` or
`describe-quota-share` (read-only fields `quotaShareArn`, `jobQueueArn` and `status` are
accepted and ignored; `nextToken` too). The queue is the one named by the top-level
`jobQueue` (or the items' `jobQueue`, a job queue ARN resolved through
AWS_BATCH_QUEUE_ARNS or by its name), unless the caller names the target queue.
AWS holds no queue capacity: an existing queue keeps its capacity, and a new queue is
created with the sum of its shares' limits per instance type. Teams named by the `team`
tag that do not exist are created; an instance type that does not exist is created with
1 GPU per instance (a warning says so: AWS does not say how many it has).
"""

from __future__ import annotations

import json
import re

from django.conf import settings

from fleet.bridge import BORROW_UNLIMITED, stored_borrow_limit
from fleet.models import DEFAULT_PRIORITY_CEILING, MAX_PRIORITY, JobQueue, QuotaShare
from governance.policy_code import source as read
from governance.policy_code.live import LiveQueue, live_queue
from governance.policy_code.model import (
    Export,
    InstanceTypeSpec,
    PolicyFile,
    QueueSpec,
    ShareSpec,
)
from governance.policy_code.source import Problems, child

FORMAT = "aws-batch"
AWS_NAME = re.compile(r"^[A-Za-z0-9_-]{1,128}$")
MAX_AWS_NAME = 128
TEAM_TAG = "team"
NAME_TAG = "share-name"
CEILING_TAG = "priority-ceiling"
CLASS_TAG = "workload-class"
ARN_QUEUE = re.compile(r"^arn:[^:]+:batch:[^:]*:[^:]*:job-queue/(?P<name>.+)$")

_ITEM_FIELDS = {
    "quotaShareName",
    "jobQueue",
    "capacityLimits",
    "resourceSharingConfiguration",
    "preemptionConfiguration",
    "state",
    "tags",
    # Read back from AWS (list-quota-shares, describe-quota-share): accepted, not used.
    "quotaShareArn",
    "jobQueueArn",
    "status",
}


def aws_name(name: str, taken: set[str]) -> str:
    """`name` within AWS's naming rules, unique among `taken` (which it joins)."""
    mapped = re.sub(r"[^A-Za-z0-9_-]", "-", name)[:MAX_AWS_NAME] or "share"
    candidate, number = mapped, 1
    while candidate in taken:
        number += 1
        suffix = f"-{number}"
        candidate = mapped[: MAX_AWS_NAME - len(suffix)] + suffix
    taken.add(candidate)
    return candidate


def queue_arns() -> dict[str, str]:
    return dict(getattr(settings, "AWS_BATCH_QUEUE_ARNS", {}) or {})


def job_queue_reference(queue_name: str, warnings: list[str]) -> str:
    """The ARN configured for the queue, else its name within AWS's rules."""
    arn = queue_arns().get(queue_name)
    if arn:
        return arn
    mapped = aws_name(queue_name, set())
    if mapped != queue_name:
        warnings.append(
            f"queue '{queue_name}' is named '{mapped}' for AWS (up to 128 characters of "
            "letters, digits, - and _)"
        )
    return mapped


def quota_share_requests(live: LiveQueue, job_queue: str, warnings: list[str]) -> list[dict]:
    """One CreateQuotaShare request per share, in entitlement order."""
    taken: set[str] = set()
    requests = []
    for doc in live.share_docs:
        name = aws_name(doc["name"], taken)
        tags = {TEAM_TAG: doc["team"]}
        if doc["priority_ceiling"] != DEFAULT_PRIORITY_CEILING:
            tags[CEILING_TAG] = str(doc["priority_ceiling"])
        if doc["default_workload_class"]:
            tags[CLASS_TAG] = doc["default_workload_class"]
        if name != doc["name"]:
            tags[NAME_TAG] = doc["name"]
            warnings.append(
                f"share '{doc['name']}' is named '{name}' for AWS (up to 128 characters of "
                "letters, digits, - and _)"
            )
        sharing = {"strategy": doc["strategy"]}
        if doc["strategy"] == QuotaShare.Strategy.LEND_AND_BORROW:
            sharing["borrowLimit"] = doc["borrow_limit"]
        requests.append(
            {
                "quotaShareName": name,
                "jobQueue": job_queue,
                "capacityLimits": [
                    {"maxCapacity": instances, "capacityUnit": type_name}
                    for type_name, instances in doc["capacity_limits"].items()
                ],
                "resourceSharingConfiguration": sharing,
                "preemptionConfiguration": {
                    "inSharePreemption": "ENABLED" if doc["in_share_preemption"] else "DISABLED"
                },
                "state": doc["state"],
                "tags": tags,
            }
        )
    return requests


def export(*, queue: JobQueue) -> Export:
    live = live_queue(queue=queue)
    warnings: list[str] = []
    job_queue = job_queue_reference(queue.name, warnings)
    body = {"jobQueue": queue.name, "quotaShares": quota_share_requests(live, job_queue, warnings)}
    return Export(
        content=json.dumps(body, indent=2, ensure_ascii=False) + "\n",
        filename=f"{aws_name(queue.name, set())}.aws-batch.json",
        media_type="application/json",
        warnings=tuple(warnings),
    )


def queue_name_from_reference(reference: str) -> str:
    """Our queue for a jobQueue value: a configured ARN, an ARN's name, or a name."""
    for name, arn in queue_arns().items():
        if arn == reference:
            return name
    match = ARN_QUEUE.match(reference)
    return match.group("name") if match else reference


def parse(text: str, *, source: str, target_queue: str | None = None) -> PolicyFile:
    document = read.load_json_document(text)
    problems = Problems(document.lines)
    top = read.mapping(problems, document.data, "")
    problems.raise_if_any()
    read.unknown_fields(problems, top, {"jobQueue", "quotaShares", "nextToken"}, "")
    items = (
        read.sequence(problems, top.get("quotaShares"), "quotaShares")
        if read.required(problems, top, "quotaShares", "")
        else None
    )
    references: list[tuple[str, str]] = []
    named = None
    if "jobQueue" in top:
        named = read.text(problems, top["jobQueue"], "jobQueue")
    shares: list[ShareSpec] = []
    types: dict[str, InstanceTypeSpec] = {}
    for index, item in enumerate(items or []):
        path = f"quotaShares[{index}]"
        share = _parse_item(problems, item, path, references, types)
        if share is not None:
            shares.append(share)
    if target_queue is None and named is not None:
        target_queue = named.strip()
    if target_queue is None:
        names = {queue_name_from_reference(value) for _path, value in references}
        if not names:
            problems.add("jobQueue", "name the job queue (or choose the target queue)")
        elif len(names) > 1:
            for path, value in references:
                problems.add(path, f"names job queue '{value}': one file describes one job queue")
        target_queue = next(iter(names), "")
    _check_unique_names(problems, shares)
    problems.raise_if_any()
    return PolicyFile(
        format=FORMAT,
        source=source,
        lines=document.lines,
        queues=[QueueSpec(name=target_queue, path="jobQueue", shares=shares)],
        instance_types=list(types.values()),
    )


def _parse_item(problems: Problems, item, path: str, references, types) -> ShareSpec | None:
    item = read.mapping(problems, item, path)
    if item is None:
        return None
    read.unknown_fields(problems, item, _ITEM_FIELDS, path)
    for key in ("jobQueue", "jobQueueArn"):
        if key in item and read.text(problems, item[key], child(path, key)):
            references.append((child(path, key), item[key]))
    ok = all(
        read.required(problems, item, key, path)
        for key in (
            "quotaShareName",
            "capacityLimits",
            "resourceSharingConfiguration",
            "preemptionConfiguration",
        )
    )
    if not ok:
        return None
    fields = {"name": child(path, "quotaShareName")}
    name = read.text(problems, item["quotaShareName"], fields["name"])
    if name is not None and not AWS_NAME.match(name):
        problems.add(
            fields["name"], "must be 1 to 128 characters of letters, digits, - and _ (AWS's rule)"
        )
    tags = item.get("tags") or {}
    tags_path = child(path, "tags")
    if read.mapping(problems, tags, tags_path) is None:
        tags = {}
    if NAME_TAG in tags:
        fields["name"] = child(tags_path, NAME_TAG)
        name = read.text(problems, tags[NAME_TAG], fields["name"])
    team = None
    fields["team"] = child(tags_path, TEAM_TAG)
    if TEAM_TAG in tags:
        team = read.text(problems, tags[TEAM_TAG], fields["team"])
    ceiling = None
    fields["priority_ceiling"] = child(tags_path, CEILING_TAG)
    if CEILING_TAG in tags:
        value = tags[CEILING_TAG]
        if isinstance(value, str) and value.isdigit() and int(value) <= MAX_PRIORITY:
            ceiling = int(value)
        else:
            problems.add(
                fields["priority_ceiling"], f"must be a whole number from 0 to {MAX_PRIORITY}"
            )
    fields["default_workload_class"] = child(tags_path, CLASS_TAG)
    default_class = None
    if CLASS_TAG in tags:
        default_class = read.text(problems, tags[CLASS_TAG], fields["default_workload_class"])
    limits = _capacity_limits(problems, item["capacityLimits"], child(path, "capacityLimits"))
    fields["capacity_limits"] = child(path, "capacityLimits")
    for type_name in limits or {}:
        types.setdefault(
            type_name,
            InstanceTypeSpec(type_name, 1, gpus_known=False, path=fields["capacity_limits"]),
        )
    sharing_path = child(path, "resourceSharingConfiguration")
    sharing = read.mapping(problems, item["resourceSharingConfiguration"], sharing_path)
    strategy = borrow_limit = None
    if sharing is not None:
        read.unknown_fields(problems, sharing, {"strategy", "borrowLimit"}, sharing_path)
        fields["strategy"] = child(sharing_path, "strategy")
        if read.required(problems, sharing, "strategy", sharing_path):
            strategy = read.choice(
                problems, sharing["strategy"], fields["strategy"], QuotaShare.Strategy.values
            )
        fields["borrow_limit"] = child(sharing_path, "borrowLimit")
        if "borrowLimit" in sharing:
            borrow_limit = read.whole(
                problems, sharing["borrowLimit"], fields["borrow_limit"], minimum=BORROW_UNLIMITED
            )
            if borrow_limit is not None and strategy not in (None, "LEND_AND_BORROW"):
                problems.add(fields["borrow_limit"], "only allowed with LEND_AND_BORROW")
    preemption_path = child(path, "preemptionConfiguration")
    preemption = read.mapping(problems, item["preemptionConfiguration"], preemption_path)
    in_share = None
    if preemption is not None:
        read.unknown_fields(problems, preemption, {"inSharePreemption"}, preemption_path)
        fields["in_share_preemption"] = child(preemption_path, "inSharePreemption")
        if read.required(problems, preemption, "inSharePreemption", preemption_path):
            in_share = read.choice(
                problems,
                preemption["inSharePreemption"],
                fields["in_share_preemption"],
                ("ENABLED", "DISABLED"),
            )
    fields["state"] = child(path, "state")
    state = read.choice(
        problems, item.get("state", "ENABLED"), fields["state"], ("ENABLED", "DISABLED")
    )
    if None in (name, limits, strategy, in_share, state):
        return None
    doc = {
        "name": name,
        "team": team,
        "strategy": strategy,
        "in_share_preemption": in_share == "ENABLED",
        "state": state,
        "capacity_limits": dict(sorted(limits.items())),
    }
    if strategy == QuotaShare.Strategy.LEND_AND_BORROW:
        doc["borrow_limit"] = stored_borrow_limit(strategy, borrow_limit)
    if ceiling is not None:
        doc["priority_ceiling"] = ceiling
    if default_class is not None:
        doc["default_workload_class"] = default_class.strip()
    return ShareSpec(doc=doc, path=path, fields=fields)


def _capacity_limits(problems: Problems, value, path: str) -> dict[str, int] | None:
    entries = read.sequence(problems, value, path)
    if entries is None:
        return None
    limits: dict[str, int] = {}
    ok = True
    for index, entry in enumerate(entries):
        entry_path = child(path, index)
        entry = read.mapping(problems, entry, entry_path)
        if entry is None:
            ok = False
            continue
        read.unknown_fields(problems, entry, {"maxCapacity", "capacityUnit"}, entry_path)
        if not (
            read.required(problems, entry, "maxCapacity", entry_path)
            & read.required(problems, entry, "capacityUnit", entry_path)
        ):
            ok = False
            continue
        unit = read.text(problems, entry["capacityUnit"], child(entry_path, "capacityUnit"))
        count = read.whole(
            problems, entry["maxCapacity"], child(entry_path, "maxCapacity"), minimum=1
        )
        if unit is None or count is None:
            ok = False
        elif unit in limits:
            problems.add(child(entry_path, "capacityUnit"), f"'{unit}' is listed twice")
            ok = False
        else:
            limits[unit] = count
    return limits if ok else None


def _check_unique_names(problems: Problems, shares: list[ShareSpec]) -> None:
    seen: set[str] = set()
    for share in shares:
        if share.name in seen:
            problems.add(share.field_path("name"), f"share '{share.name}' is listed twice")
        seen.add(share.name)
