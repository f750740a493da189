"""The `aws-batch` format: a queue as the AWS Batch request bodies that create it.

    {"jobQueue": "<queue>",
     "createServiceEnvironment": <CreateServiceEnvironment request>,
     "createSchedulingPolicy": <CreateSchedulingPolicy request>,
     "createJobQueue": <CreateJobQueue request>,
     "quotaShares": [<CreateQuotaShare request>, ...]}

AWS Batch models quota shares on a job queue of type SAGEMAKER_TRAINING whose service
environment is quota-managed (its capacity limits are per instance type) and whose
scheduling policy is a quota share policy. The queue maps to them as follows:

    createServiceEnvironment    serviceEnvironmentName: the queue's AWS name;
                                serviceEnvironmentType: SAGEMAKER_TRAINING; state: ENABLED;
                                capacityLimits[]: one {"maxCapacity": instances,
                                "capacityUnit": instance type} per type of the queue's
                                capacity (the queue's capacity, read back on import)
    createSchedulingPolicy      name: the queue's AWS name; quotaSharePolicy:
                                {"idleResourceAssignmentStrategy": FIFO} (AWS's only
                                choice; a fairsharePolicy is refused on import)
    createJobQueue              jobQueueName: the queue's AWS name; jobQueueType:
                                SAGEMAKER_TRAINING; priority: 1 (the product does not
                                rank queues; any 0 to 1000 is read); state: ENABLED;
                                serviceEnvironmentOrder: [the service environment];
                                schedulingPolicyArn: the policy's ARN in the region and
                                account of the queue's ARN from AWS_BATCH_QUEUE_ARNS
                                (left out, with a warning, when none is configured);
                                jobStateTimeLimitActions: the runnable time limit as
                                {"state": RUNNABLE, "action": TERMINATE (AWS's only action
                                for SageMaker queues), "maxTimeSeconds": the limit,
                                "reason": ...} when it is within AWS's 600 to 86,400 s
                                (else left out, with a warning); tags: {"queue-name": the
                                queue's own name} when it had to be mapped

On import each of the three is optional (a file of quota shares alone keeps the queue's
capacity and settings): the service environment's capacity limits are the queue's
capacity, and a job queue's RUNNABLE action its runnable time limit (none: kept). The
queue's description and retry bound have no AWS field: they stay as they are.

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
from dataclasses import dataclass

from django.conf import settings

from fleet.bridge import BORROW_UNLIMITED, stored_borrow_limit
from fleet.models import DEFAULT_PRIORITY_CEILING, MAX_PRIORITY, JobQueue, QuotaShare
from governance.policy_code import source as read
from governance.policy_code.live import LiveQueue, live_queue
from governance.policy_code.model import (
    KEEP,
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
ARN_PREFIX = re.compile(r"^(?P<prefix>arn:[^:]+:batch:[^:]*:[^:]*:)job-queue/")
QUEUE_NAME_TAG = "queue-name"
SAGEMAKER_TRAINING = "SAGEMAKER_TRAINING"
JOB_QUEUE_PRIORITY = 1
MAX_JOB_QUEUE_PRIORITY = 1000
# AWS's bounds of a job state time limit action (CreateJobQueue's documentation).
MIN_STATE_SECONDS, MAX_STATE_SECONDS = 600, 86_400
RUNNABLE_REASON = "runnable time limit (quota-governance)"
QUEUE_PARTS = ("createServiceEnvironment", "createSchedulingPolicy", "createJobQueue")

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


def scheduling_policy_arn(queue_name: str, policy_name: str) -> str | None:
    """The policy's ARN in the region and account of the queue's configured ARN."""
    match = ARN_PREFIX.match(queue_arns().get(queue_name, ""))
    return f"{match.group('prefix')}scheduling-policy/{policy_name}" if match else None


def queue_requests(live: LiveQueue, warnings: list[str]) -> dict[str, dict]:
    """The CreateServiceEnvironment, CreateSchedulingPolicy and CreateJobQueue requests
    of the queue (see the module's mapping), by the key the file gives them."""
    queue = live.queue
    arn = queue_arns().get(queue.name)
    match = ARN_QUEUE.match(arn or "")
    name = aws_name(match.group("name") if match else queue.name, set())
    tags = {QUEUE_NAME_TAG: queue.name} if name != queue.name else {}
    environment = {
        "serviceEnvironmentName": name,
        "serviceEnvironmentType": SAGEMAKER_TRAINING,
        "state": "ENABLED",
        "capacityLimits": [
            {"maxCapacity": instances, "capacityUnit": type_name}
            for type_name, instances in live.capacity.items()
        ],
    }
    policy = {"name": name, "quotaSharePolicy": {"idleResourceAssignmentStrategy": "FIFO"}}
    job_queue = {
        "jobQueueName": name,
        "jobQueueType": SAGEMAKER_TRAINING,
        "priority": JOB_QUEUE_PRIORITY,
        "state": "ENABLED",
        "serviceEnvironmentOrder": [{"order": 1, "serviceEnvironment": name}],
    }
    policy_arn = scheduling_policy_arn(queue.name, name)
    if policy_arn:
        job_queue["schedulingPolicyArn"] = policy_arn
    else:
        warnings.append(
            f"queue '{queue.name}': createJobQueue has no schedulingPolicyArn (an ARN needs "
            "the region and account: name the queue's ARN in AWS_BATCH_QUEUE_ARNS, or add "
            f"the ARN of scheduling policy '{name}' once it is created)"
        )
    limit = queue.runnable_time_limit
    if limit is not None and MIN_STATE_SECONDS <= limit <= MAX_STATE_SECONDS:
        job_queue["jobStateTimeLimitActions"] = [
            {
                "reason": RUNNABLE_REASON,
                "state": "RUNNABLE",
                "maxTimeSeconds": limit,
                "action": "TERMINATE",
            }
        ]
    elif limit is not None:
        warnings.append(
            f"queue '{queue.name}': its runnable time limit ({limit} s) is outside AWS's "
            f"{MIN_STATE_SECONDS} to {MAX_STATE_SECONDS} s, so createJobQueue has no "
            "jobStateTimeLimitActions (on import the limit stays as it is)"
        )
    if tags:
        job_queue["tags"] = tags
    return {
        "createServiceEnvironment": environment,
        "createSchedulingPolicy": policy,
        "createJobQueue": job_queue,
    }


def export(*, queue: JobQueue) -> Export:
    live = live_queue(queue=queue)
    warnings: list[str] = []
    job_queue = job_queue_reference(queue.name, warnings)
    body = {
        "jobQueue": queue.name,
        **queue_requests(live, warnings),
        "quotaShares": quota_share_requests(live, job_queue, warnings),
    }
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
    read.unknown_fields(problems, top, {"jobQueue", "quotaShares", "nextToken", *QUEUE_PARTS}, "")
    items = (
        read.sequence(problems, top.get("quotaShares"), "quotaShares")
        if read.required(problems, top, "quotaShares", "")
        else None
    )
    references: list[tuple[str, str]] = []
    named = None
    if "jobQueue" in top:
        named = read.text(problems, top["jobQueue"], "jobQueue")
    parts = QueueParts.read(
        problems, {part: (top.get(part), part) for part in QUEUE_PARTS if part in top}
    )
    shares: list[ShareSpec] = []
    types: dict[str, InstanceTypeSpec] = {}
    for index, item in enumerate(items or []):
        path = f"quotaShares[{index}]"
        share = _parse_item(problems, item, path, references, types)
        if share is not None:
            shares.append(share)
    if target_queue is None and named is not None:
        target_queue = named.strip()
    if target_queue is None and parts.queue_name is not None:
        target_queue = parts.queue_name
    if target_queue is None:
        target_queue = queue_from_references(problems, references)
    _check_unique_names(problems, shares)
    problems.raise_if_any()
    return PolicyFile(
        format=FORMAT,
        source=source,
        lines=document.lines,
        queues=[parts.queue_spec(target_queue, "jobQueue", shares, types)],
        instance_types=list(types.values()),
    )


def queue_from_references(problems: Problems, references: list[tuple[str, str]]) -> str:
    """The one queue the shares' jobQueue values name."""
    names = {queue_name_from_reference(value) for _path, value in references}
    if not names:
        problems.add("jobQueue", "name the job queue (or choose the target queue)")
    elif len(names) > 1:
        for path, value in references:
            problems.add(path, f"names job queue '{value}': one file describes one job queue")
    return next(iter(names), "")


def _same(key: str) -> str:
    return key


@dataclass
class QueueParts:
    """What a file's CreateServiceEnvironment, CreateSchedulingPolicy and CreateJobQueue
    say of the queue: its capacity, its runnable time limit and its name."""

    capacity: dict[str, int] | None = None
    capacity_path: str = ""
    runnable_time_limit: object = KEEP
    runnable_path: str = ""
    queue_name: str | None = None

    @classmethod
    def read(cls, problems: Problems, parts: dict, k=_same) -> QueueParts:
        """`parts`: the part's key in QUEUE_PARTS -> (its mapping, its path). `k` spells
        each field as the file does (CloudFormation capitalises them)."""
        result = cls()
        names: dict[str, str | None] = {}
        for part, (value, path) in parts.items():
            body = read.mapping(problems, value, path)
            if body is not None:
                names[part] = getattr(result, "_" + part)(problems, body, path, k)
        environment = names.get("createServiceEnvironment")
        policy = names.get("createSchedulingPolicy")
        if "createJobQueue" in parts and isinstance(parts["createJobQueue"][0], dict):
            result._links(problems, *parts["createJobQueue"], environment, policy, k)
        return result

    def queue_spec(self, name: str, path: str, shares, types) -> QueueSpec:
        spec = QueueSpec(name=name, path=path, shares=shares, capacity=self.capacity)
        spec.runnable_time_limit = self.runnable_time_limit
        spec.fields = {"capacity": self.capacity_path or path}
        if self.runnable_path:
            spec.fields["runnable_time_limit"] = self.runnable_path
        for type_name in self.capacity or {}:
            types.setdefault(
                type_name,
                InstanceTypeSpec(type_name, 1, gpus_known=False, path=self.capacity_path),
            )
        return spec

    @staticmethod
    def _name(problems, body, key: str, path: str) -> str | None:
        if not read.required(problems, body, key, path):
            return None
        name = read.text(problems, body[key], child(path, key))
        if name is not None and not AWS_NAME.match(name):
            problems.add(
                child(path, key),
                "must be 1 to 128 characters of letters, digits, - and _ (AWS's rule)",
            )
        return name

    @staticmethod
    def _enabled(problems, body, path: str, k) -> None:
        if k("state") in body:
            read.choice(problems, body[k("state")], child(path, k("state")), ("ENABLED",))

    def _createServiceEnvironment(self, problems, body, path, k) -> str | None:  # noqa: N802
        read.unknown_fields(
            problems,
            body,
            {
                k(key)
                for key in (
                    "serviceEnvironmentName",
                    "serviceEnvironmentType",
                    "state",
                    "capacityLimits",
                    "tags",
                    "serviceEnvironmentArn",
                )
            },
            path,
        )
        name = self._name(problems, body, k("serviceEnvironmentName"), path)
        if read.required(problems, body, k("serviceEnvironmentType"), path):
            read.choice(
                problems,
                body[k("serviceEnvironmentType")],
                child(path, k("serviceEnvironmentType")),
                (SAGEMAKER_TRAINING,),
            )
        self._enabled(problems, body, path, k)
        if read.required(problems, body, k("capacityLimits"), path):
            self.capacity_path = child(path, k("capacityLimits"))
            limits = _capacity_limits(problems, body[k("capacityLimits")], self.capacity_path, k)
            if limits == {}:
                problems.add(self.capacity_path, "must list at least one instance type")
            elif limits is not None:
                self.capacity = dict(sorted(limits.items()))
        return name

    def _createSchedulingPolicy(self, problems, body, path, k) -> str | None:  # noqa: N802
        read.unknown_fields(
            problems,
            body,
            {k(key) for key in ("name", "quotaSharePolicy", "fairsharePolicy", "tags", "arn")},
            path,
        )
        name = self._name(problems, body, k("name"), path)
        if k("fairsharePolicy") in body:
            problems.add(
                child(path, k("fairsharePolicy")),
                "a fair-share policy does not schedule quota shares: give quotaSharePolicy",
            )
        elif read.required(problems, body, k("quotaSharePolicy"), path):
            policy_path = child(path, k("quotaSharePolicy"))
            policy = read.mapping(problems, body[k("quotaSharePolicy")], policy_path)
            strategy = k("idleResourceAssignmentStrategy")
            if policy is not None:
                read.unknown_fields(problems, policy, {strategy}, policy_path)
                if read.required(problems, policy, strategy, policy_path):
                    read.choice(problems, policy[strategy], child(policy_path, strategy), ("FIFO",))
        return name

    def _createJobQueue(self, problems, body, path, k) -> str | None:  # noqa: N802
        read.unknown_fields(
            problems,
            body,
            {
                k(key)
                for key in (
                    "jobQueueName",
                    "state",
                    "schedulingPolicyArn",
                    "priority",
                    "serviceEnvironmentOrder",
                    "jobQueueType",
                    "tags",
                    "jobStateTimeLimitActions",
                    "computeEnvironmentOrder",
                    "jobQueueArn",
                )
            },
            path,
        )
        name = self._name(problems, body, k("jobQueueName"), path)
        tags = body.get(k("tags")) or {}
        if read.mapping(problems, tags, child(path, k("tags"))) is None:
            tags = {}
        if QUEUE_NAME_TAG in tags:
            named = read.text(
                problems, tags[QUEUE_NAME_TAG], child(child(path, k("tags")), QUEUE_NAME_TAG)
            )
            self.queue_name = named.strip() if named else None
        elif name is not None:
            self.queue_name = queue_name_from_reference(name)
        if read.required(problems, body, k("priority"), path):
            priority = read.whole(
                problems, body[k("priority")], child(path, k("priority")), minimum=0
            )
            if priority is not None and priority > MAX_JOB_QUEUE_PRIORITY:
                problems.add(
                    child(path, k("priority")), f"must be at most {MAX_JOB_QUEUE_PRIORITY}"
                )
        if read.required(problems, body, k("jobQueueType"), path):
            read.choice(
                problems,
                body[k("jobQueueType")],
                child(path, k("jobQueueType")),
                (SAGEMAKER_TRAINING,),
            )
        self._enabled(problems, body, path, k)
        if k("computeEnvironmentOrder") in body:
            problems.add(
                child(path, k("computeEnvironmentOrder")),
                "quota shares run on a service environment: give serviceEnvironmentOrder",
            )
        if k("jobStateTimeLimitActions") in body:
            self._time_limit(problems, body[k("jobStateTimeLimitActions")], path, k)
        return name

    def _time_limit(self, problems, value, path, k) -> None:
        path = child(path, k("jobStateTimeLimitActions"))
        actions = read.sequence(problems, value, path)
        if actions is None:
            return
        if len(actions) > 1:
            problems.add(path, "holds one action at most: the queue has one runnable time limit")
            return
        for index, action in enumerate(actions):
            entry_path = child(path, index)
            action = read.mapping(problems, action, entry_path)
            if action is None:
                continue
            keys = {key: k(key) for key in ("reason", "state", "maxTimeSeconds", "action")}
            read.unknown_fields(problems, action, set(keys.values()), entry_path)
            if not all([read.required(problems, action, key, entry_path) for key in keys.values()]):
                continue
            read.text(problems, action[keys["reason"]], child(entry_path, keys["reason"]))
            read.choice(
                problems, action[keys["state"]], child(entry_path, keys["state"]), ("RUNNABLE",)
            )
            read.choice(
                problems,
                action[keys["action"]],
                child(entry_path, keys["action"]),
                ("TERMINATE",),
            )
            seconds_path = child(entry_path, keys["maxTimeSeconds"])
            seconds = read.whole(
                problems, action[keys["maxTimeSeconds"]], seconds_path, minimum=MIN_STATE_SECONDS
            )
            if seconds is not None and seconds > MAX_STATE_SECONDS:
                problems.add(seconds_path, f"must be at most {MAX_STATE_SECONDS} (AWS's bound)")
            elif seconds is not None:
                self.runnable_time_limit = seconds
                self.runnable_path = seconds_path

    def _links(self, problems, body, path, environment, policy, k) -> None:
        """The job queue names the file's service environment and scheduling policy."""
        order_path = child(path, k("serviceEnvironmentOrder"))
        if not read.required(problems, body, k("serviceEnvironmentOrder"), path):
            return
        orders = read.sequence(problems, body[k("serviceEnvironmentOrder")], order_path)
        named = []
        for index, order in enumerate(orders or []):
            entry_path = child(order_path, index)
            order = read.mapping(problems, order, entry_path)
            if order is None:
                continue
            read.unknown_fields(problems, order, {k("order"), k("serviceEnvironment")}, entry_path)
            if read.required(problems, order, k("order"), entry_path):
                read.whole(problems, order[k("order")], child(entry_path, k("order")), minimum=0)
            if read.required(problems, order, k("serviceEnvironment"), entry_path):
                value = read.text(
                    problems,
                    order[k("serviceEnvironment")],
                    child(entry_path, k("serviceEnvironment")),
                )
                if value is not None:
                    named.append((child(entry_path, k("serviceEnvironment")), value))
        if orders is not None and len(orders) != 1:
            problems.add(order_path, "must name one service environment: the queue's capacity")
        if environment is not None:
            for where, value in named:
                if value.rsplit("/", 1)[-1] != environment:
                    problems.add(
                        where, f"must name service environment '{environment}' of this file"
                    )
        arn_key = k("schedulingPolicyArn")
        if policy is not None and arn_key in body:
            value = read.text(problems, body[arn_key], child(path, arn_key))
            if value is not None and value.rsplit("/", 1)[-1] != policy:
                problems.add(
                    child(path, arn_key), f"must name scheduling policy '{policy}' of this file"
                )


def _parse_item(  # noqa: C901
    problems: Problems, item, path: str, references, types, k=lambda key: key
) -> ShareSpec | None:
    """One CreateQuotaShare request; `k` spells each field as the file does."""
    item = read.mapping(problems, item, path)
    if item is None:
        return None
    read.unknown_fields(problems, item, {k(key) for key in _ITEM_FIELDS}, path)
    for key in (k("jobQueue"), k("jobQueueArn")):
        if key in item and read.text(problems, item[key], child(path, key)):
            references.append((child(path, key), item[key]))
    ok = all(
        read.required(problems, item, key, path)
        for key in (
            k("quotaShareName"),
            k("capacityLimits"),
            k("resourceSharingConfiguration"),
            k("preemptionConfiguration"),
        )
    )
    if not ok:
        return None
    fields = {"name": child(path, k("quotaShareName"))}
    name = read.text(problems, item[k("quotaShareName")], fields["name"])
    if name is not None and not AWS_NAME.match(name):
        problems.add(
            fields["name"], "must be 1 to 128 characters of letters, digits, - and _ (AWS's rule)"
        )
    tags = item.get(k("tags")) or {}
    tags_path = child(path, k("tags"))
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
    limits = _capacity_limits(
        problems, item[k("capacityLimits")], child(path, k("capacityLimits")), k
    )
    fields["capacity_limits"] = child(path, k("capacityLimits"))
    for type_name in limits or {}:
        types.setdefault(
            type_name,
            InstanceTypeSpec(type_name, 1, gpus_known=False, path=fields["capacity_limits"]),
        )
    sharing_path = child(path, k("resourceSharingConfiguration"))
    sharing = read.mapping(problems, item[k("resourceSharingConfiguration")], sharing_path)
    strategy = borrow_limit = None
    if sharing is not None:
        read.unknown_fields(problems, sharing, {k("strategy"), k("borrowLimit")}, sharing_path)
        fields["strategy"] = child(sharing_path, k("strategy"))
        if read.required(problems, sharing, k("strategy"), sharing_path):
            strategy = read.choice(
                problems, sharing[k("strategy")], fields["strategy"], QuotaShare.Strategy.values
            )
        fields["borrow_limit"] = child(sharing_path, k("borrowLimit"))
        if k("borrowLimit") in sharing:
            borrow_limit = read.whole(
                problems,
                sharing[k("borrowLimit")],
                fields["borrow_limit"],
                minimum=BORROW_UNLIMITED,
            )
            if borrow_limit is not None and strategy not in (None, "LEND_AND_BORROW"):
                problems.add(fields["borrow_limit"], "only allowed with LEND_AND_BORROW")
    preemption_path = child(path, k("preemptionConfiguration"))
    preemption = read.mapping(problems, item[k("preemptionConfiguration")], preemption_path)
    in_share = None
    if preemption is not None:
        read.unknown_fields(problems, preemption, {k("inSharePreemption")}, preemption_path)
        fields["in_share_preemption"] = child(preemption_path, k("inSharePreemption"))
        if read.required(problems, preemption, k("inSharePreemption"), preemption_path):
            in_share = read.choice(
                problems,
                preemption[k("inSharePreemption")],
                fields["in_share_preemption"],
                ("ENABLED", "DISABLED"),
            )
    fields["state"] = child(path, k("state"))
    state = read.choice(
        problems, item.get(k("state"), "ENABLED"), fields["state"], ("ENABLED", "DISABLED")
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


def _capacity_limits(
    problems: Problems, value, path: str, k=lambda key: key
) -> dict[str, int] | None:
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
        read.unknown_fields(problems, entry, {k("maxCapacity"), k("capacityUnit")}, entry_path)
        if not (
            read.required(problems, entry, k("maxCapacity"), entry_path)
            & read.required(problems, entry, k("capacityUnit"), entry_path)
        ):
            ok = False
            continue
        unit = read.text(problems, entry[k("capacityUnit")], child(entry_path, k("capacityUnit")))
        count = read.whole(
            problems, entry[k("maxCapacity")], child(entry_path, k("maxCapacity")), minimum=1
        )
        if unit is None or count is None:
            ok = False
        elif unit in limits:
            problems.add(child(entry_path, k("capacityUnit")), f"'{unit}' is listed twice")
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
