"""The `cloudformation` format: a queue as an AWS CloudFormation template, JSON or YAML.

The template holds the same requests as the `aws-batch` format
(governance.policy_code.aws_batch documents the mapping and the naming rule), each as
one resource whose properties are the request's keys with their first letter upper
case, as CloudFormation spells them (`quotaShareName` -> `QuotaShareName`; tag keys
stay as they are):

    ServiceEnvironment   AWS::Batch::ServiceEnvironment   CreateServiceEnvironment
    SchedulingPolicy     AWS::Batch::SchedulingPolicy     CreateSchedulingPolicy
    JobQueue             AWS::Batch::JobQueue             CreateJobQueue, with
                         ServiceEnvironmentOrder[0].ServiceEnvironment
                         {"Fn::GetAtt": ["ServiceEnvironment", "ServiceEnvironmentArn"]}
                         and SchedulingPolicyArn {"Fn::GetAtt": ["SchedulingPolicy", "Arn"]}
    QuotaShare<Name>     AWS::Batch::QuotaShare           CreateQuotaShare, with
                         JobQueue {"Ref": "JobQueue"} (a job queue's Ref is its ARN)

Logical ids of shares are "QuotaShare" and the share's AWS name in letters and digits,
made unique with a number. The export is JSON.

Import reads such a template, in JSON or in YAML (with the short forms `!Ref` and
`!GetAtt`). Of the intrinsic functions it resolves `Ref` to a resource of the template
(its name) or to a parameter with a `Default`, and `Fn::GetAtt` to a resource's ARN
attribute; any other function (Fn::Sub, Fn::Join, Fn::If, ...) or pseudo parameter
(AWS::Region, ...) is refused at its field: write the value. A template describes one
job queue: at most one of each of the three queue resources, and every share's JobQueue
naming it. Resources of any other type (AWS::S3::Bucket, AWS::Batch::ComputeEnvironment,
...) are ignored, and the plan's warnings list each of them. Errors name the resource
and the property as the template spells them
(`Resources.QuotaShareNlp.Properties.ResourceSharingConfiguration.BorrowLimit`).
The limits of every file (size, nesting, values, control characters) apply.
"""

from __future__ import annotations

import json
import re

from fleet.models import JobQueue
from governance.policy_code import aws_batch
from governance.policy_code import source as read
from governance.policy_code.aws_batch import (
    QueueParts,
    aws_name,
    job_queue_reference,
    queue_from_references,
    queue_requests,
    quota_share_requests,
)
from governance.policy_code.live import live_queue
from governance.policy_code.model import Export, InstanceTypeSpec, PolicyFile, ShareSpec
from governance.policy_code.source import FileProblem, PolicyFileError, Problems, child

FORMAT = "cloudformation"
JOB_QUEUE = "JobQueue"
SERVICE_ENVIRONMENT = "ServiceEnvironment"
SCHEDULING_POLICY = "SchedulingPolicy"
QUOTA_SHARE_TYPE = "AWS::Batch::QuotaShare"
# Resource type -> (the aws-batch part it is, the property holding its name, its ARN).
QUEUE_TYPES = {
    "AWS::Batch::ServiceEnvironment": (
        "createServiceEnvironment",
        "ServiceEnvironmentName",
        "ServiceEnvironmentArn",
    ),
    "AWS::Batch::SchedulingPolicy": ("createSchedulingPolicy", "Name", "Arn"),
    "AWS::Batch::JobQueue": ("createJobQueue", "JobQueueName", "JobQueueArn"),
}
NAME_PROPERTY = {
    **{type_: name for type_, (_part, name, _arn) in QUEUE_TYPES.items()},
    QUOTA_SHARE_TYPE: "QuotaShareName",
}
ARN_ATTRIBUTE = {
    **{type_: arn for type_, (_part, _name, arn) in QUEUE_TYPES.items()},
    QUOTA_SHARE_TYPE: "QuotaShareArn",
}
TEMPLATE_SECTIONS = {
    "AWSTemplateFormatVersion",
    "Description",
    "Metadata",
    "Parameters",
    "Rules",
    "Mappings",
    "Conditions",
    "Transform",
    "Resources",
    "Outputs",
}
RESOURCE_KEYS = {
    "Type",
    "Properties",
    "DependsOn",
    "Metadata",
    "DeletionPolicy",
    "UpdateReplacePolicy",
    "UpdatePolicy",
    "CreationPolicy",
    "Condition",
}
SHOWN_IGNORED = 20


def spelt(key: str) -> str:
    """An API key as CloudFormation spells it: quotaShareName -> QuotaShareName."""
    return key[:1].upper() + key[1:]


def _properties(value, *, inside_tags: bool = False):
    if isinstance(value, dict):
        return {
            key if inside_tags else spelt(key): _properties(item, inside_tags=key == "tags")
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
    parts = queue_requests(live, warnings)
    # The template holds its own ARNs: the warning about a missing one does not apply.
    warnings = [warning for warning in warnings if "schedulingPolicyArn" not in warning]
    job_queue = _properties(parts["createJobQueue"])
    job_queue["SchedulingPolicyArn"] = {"Fn::GetAtt": [SCHEDULING_POLICY, "Arn"]}
    job_queue["ServiceEnvironmentOrder"] = [
        {
            "Order": 1,
            "ServiceEnvironment": {"Fn::GetAtt": [SERVICE_ENVIRONMENT, "ServiceEnvironmentArn"]},
        }
    ]
    resources = {
        SERVICE_ENVIRONMENT: {
            "Type": "AWS::Batch::ServiceEnvironment",
            "Properties": _properties(parts["createServiceEnvironment"]),
        },
        SCHEDULING_POLICY: {
            "Type": "AWS::Batch::SchedulingPolicy",
            "Properties": _properties(parts["createSchedulingPolicy"]),
        },
        JOB_QUEUE: {"Type": "AWS::Batch::JobQueue", "Properties": job_queue},
    }
    taken = set(resources)
    reference = job_queue_reference(queue.name, warnings)
    for request in quota_share_requests(live, reference, warnings):
        properties = _properties(request)
        properties["JobQueue"] = {"Ref": JOB_QUEUE}
        resources[logical_id(request["quotaShareName"], taken)] = {
            "Type": QUOTA_SHARE_TYPE,
            "Properties": properties,
        }
    template = {
        "AWSTemplateFormatVersion": "2010-09-09",
        "Description": f"Job queue {queue.name} and its quota shares, exported by "
        "quota-governance.",
        "Resources": resources,
    }
    return Export(
        content=json.dumps(template, indent=2, ensure_ascii=False) + "\n",
        filename=f"{aws_name(queue.name, set())}.cloudformation.json",
        media_type="application/json",
        warnings=tuple(warnings),
    )


# Import.


def looks_like_template(data) -> bool:
    return isinstance(data, dict) and ("Resources" in data or "AWSTemplateFormatVersion" in data)


def _load(text: str) -> read.Document:
    if text.lstrip().startswith("{"):
        return read.load_json_document(text)
    documents = read.load_documents(text, short_forms=True)
    if len(documents) != 1:
        raise PolicyFileError([FileProblem(None, "file", "must hold one template")])
    return documents[0]


class _Resolver:
    """Ref and Fn::GetAtt, resolved against the template's resources and parameters."""

    def __init__(self, problems: Problems, resources: dict, parameters: dict, queue_name):
        self.problems = problems
        self.resources = resources
        self.parameters = parameters
        self.queue_name = queue_name

    def name_of(self, logical: str) -> str:
        resource = self.resources[logical]
        if resource["Type"] == "AWS::Batch::JobQueue" and self.queue_name is not None:
            return self.queue_name
        value = resource.get("Properties", {}).get(NAME_PROPERTY.get(resource["Type"], ""))
        return value if isinstance(value, str) else logical

    def resolve(self, value, path: str):
        if isinstance(value, list):
            return [self.resolve(item, child(path, index)) for index, item in enumerate(value)]
        if not isinstance(value, dict):
            return value
        functions = [key for key in value if key == "Ref" or key.startswith("Fn::")]
        if not functions:
            return {key: self.resolve(item, child(path, key)) for key, item in value.items()}
        if len(value) != 1:
            self.problems.add(path, "an intrinsic function must be the only key of its mapping")
            return None
        (function,) = functions
        if function == "Ref":
            return self._ref(value["Ref"], child(path, "Ref"))
        if function == "Fn::GetAtt":
            return self._get_att(value[function], child(path, function))
        self.problems.add(
            child(path, function),
            f"{function} is not read here (only Ref and Fn::GetAtt): write the value itself",
        )
        return None

    def _ref(self, target, path: str):
        if not isinstance(target, str) or not target:
            self.problems.add(path, "must name a resource or a parameter")
            return None
        if target in self.resources:
            return self.name_of(target)
        if target in self.parameters:
            parameter = self.parameters[target]
            default = parameter.get("Default") if isinstance(parameter, dict) else None
            if isinstance(default, str | int) and not isinstance(default, bool):
                return default
            self.problems.add(
                path, f"parameter '{target}' has no Default: give the value in the template"
            )
            return None
        if target.startswith("AWS::"):
            self.problems.add(path, f"pseudo parameter {target} is not read here: write the value")
            return None
        self.problems.add(path, f"'{target}' is neither a resource nor a parameter of the template")
        return None

    def _get_att(self, target, path: str):
        if (
            not isinstance(target, list)
            or len(target) != 2
            or not all(isinstance(part, str) for part in target)
        ):
            self.problems.add(path, "must be [logical id, attribute]")
            return None
        logical, attribute = target
        resource = self.resources.get(logical)
        if resource is None:
            self.problems.add(path, f"'{logical}' is not a resource of the template")
            return None
        wanted = ARN_ATTRIBUTE.get(resource["Type"])
        if attribute != wanted:
            self.problems.add(
                path,
                f"{resource['Type']} {logical}: only its {wanted} attribute is read"
                if wanted
                else f"{logical} is a {resource['Type']}, which this file does not describe",
            )
            return None
        return self.name_of(logical)


def parse(text: str, *, source: str, target_queue: str | None = None) -> PolicyFile:
    document = _load(text)
    problems = Problems(document.lines)
    top = read.mapping(problems, document.data, "")
    problems.raise_if_any()
    read.unknown_fields(problems, top, TEMPLATE_SECTIONS, "")
    if not read.required(problems, top, "Resources", ""):
        problems.raise_if_any()
    listed = read.mapping(problems, top["Resources"], "Resources")
    parameters = top.get("Parameters") or {}
    if read.mapping(problems, parameters, "Parameters") is None:
        parameters = {}
    problems.raise_if_any()
    resources, ignored = _resources(problems, listed)
    by_type: dict[str, list[str]] = {}
    for logical, resource in resources.items():
        by_type.setdefault(resource["Type"], []).append(logical)
    for type_ in QUEUE_TYPES:
        for logical in by_type.get(type_, [])[1:]:
            problems.add(
                child("Resources", logical),
                f"a second {type_}: one template describes one job queue",
            )
    queue_name = _queue_name(resources, by_type)
    resolver = _Resolver(problems, resources, parameters, queue_name)
    properties = {
        logical: resolver.resolve(
            resource["Properties"], child(child("Resources", logical), "Properties")
        )
        for logical, resource in resources.items()
    }
    problems.raise_if_any()
    parts = QueueParts.read(
        problems,
        {
            QUEUE_TYPES[type_][0]: (
                properties[by_type[type_][0]],
                child(child("Resources", by_type[type_][0]), "Properties"),
            )
            for type_ in QUEUE_TYPES
            if by_type.get(type_)
        },
        spelt,
    )
    references: list[tuple[str, str]] = []
    shares: list[ShareSpec] = []
    types: dict[str, InstanceTypeSpec] = {}
    for logical in by_type.get(QUOTA_SHARE_TYPE, []):
        path = child(child("Resources", logical), "Properties")
        share = aws_batch._parse_item(problems, properties[logical], path, references, types, spelt)
        if share is not None:
            shares.append(share)
    if not shares and not by_type:
        problems.add("Resources", "holds no AWS::Batch::JobQueue or AWS::Batch::QuotaShare")
    if queue_name is not None:
        for path, value in references:
            if aws_batch.queue_name_from_reference(value) != queue_name:
                problems.add(path, f"names job queue '{value}': the template's is {JOB_QUEUE}")
    if target_queue is None:
        target_queue = (
            queue_name if queue_name is not None else queue_from_references(problems, references)
        )
    aws_batch._check_unique_names(problems, shares)
    problems.raise_if_any()
    return PolicyFile(
        format=FORMAT,
        source=source,
        lines=document.lines,
        queues=[parts.queue_spec(target_queue, "Resources", shares, types)],
        instance_types=list(types.values()),
        warnings=_ignored_warning(ignored),
    )


def _resources(problems: Problems, listed: dict) -> tuple[dict[str, dict], list[str]]:
    """The template's resources of the types read here, and the others (ignored)."""
    resources: dict[str, dict] = {}
    ignored: list[str] = []
    for logical, resource in listed.items():
        path = child("Resources", logical)
        resource = read.mapping(problems, resource, path)
        if resource is None:
            continue
        read.unknown_fields(problems, resource, RESOURCE_KEYS, path)
        if not read.required(problems, resource, "Type", path):
            continue
        type_ = read.text(problems, resource["Type"], child(path, "Type"))
        if type_ is None:
            continue
        if type_ not in NAME_PROPERTY:
            ignored.append(f"{logical} ({type_})")
            continue
        if read.required(problems, resource, "Properties", path) and (
            read.mapping(problems, resource["Properties"], child(path, "Properties")) is not None
        ):
            resources[logical] = resource
    return resources, ignored


def _ignored_warning(ignored: list[str]) -> list[str]:
    if not ignored:
        return []
    shown = ", ".join(ignored[:SHOWN_IGNORED])
    more = f" and {len(ignored) - SHOWN_IGNORED} more" if len(ignored) > SHOWN_IGNORED else ""
    return [
        f"ignored: {shown}{more}; this product reads "
        "AWS::Batch::JobQueue, ServiceEnvironment, SchedulingPolicy and QuotaShare only"
    ]


def _queue_name(resources: dict, by_type: dict) -> str | None:
    """Our queue's name from the template's JobQueue: its queue-name tag, else its
    JobQueueName (a configured ARN's queue, else the name itself)."""
    logicals = by_type.get("AWS::Batch::JobQueue")
    if not logicals:
        return None
    properties = resources[logicals[0]]["Properties"]
    tags = properties.get("Tags")
    if isinstance(tags, dict) and isinstance(tags.get(aws_batch.QUEUE_NAME_TAG), str):
        return tags[aws_batch.QUEUE_NAME_TAG].strip() or None
    name = properties.get("JobQueueName")
    return aws_batch.queue_name_from_reference(name) if isinstance(name, str) else None
