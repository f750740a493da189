"""The aws-batch and cloudformation exports, checked against botocore's own Batch model:
every exported share is a CreateQuotaShare request AWS's SDK accepts as it is."""

import itertools
import json

import botocore.session
import pytest
from botocore.validate import ParamValidator

from demo.organisation import seed_aws_sample, seed_philly
from fleet.models import JobQueue
from governance.policy_code import policy_export
from governance.policy_code.aws_batch import AWS_NAME, aws_name
from tests.factories import UserFactory
from tests.governance.policy_code.conftest import build_queue

pytestmark = pytest.mark.django_db

BATCH = botocore.session.get_session().get_service_model("batch")


def _enum_errors(value, shape, path: str) -> list[str]:
    """botocore leaves enums to the service; the model lists them, so they are checked."""
    if shape.type_name == "structure" and isinstance(value, dict):
        return [
            error
            for key, item in value.items()
            if key in shape.members
            for error in _enum_errors(item, shape.members[key], f"{path}.{key}")
        ]
    if shape.type_name == "list" and isinstance(value, list):
        return [
            error
            for index, item in enumerate(value)
            for error in _enum_errors(item, shape.member, f"{path}[{index}]")
        ]
    if shape.type_name == "string" and shape.enum and value not in shape.enum:
        return [f"{path}: {value!r} is not one of {shape.enum}"]
    return []


def validation_errors(operation: str, params: dict) -> str:
    shape = BATCH.operation_model(operation).input_shape
    report = ParamValidator().validate(params, shape)
    errors = [report.generate_report()] if report.has_errors() else []
    return "\n".join(errors + _enum_errors(params, shape, "params"))


def exported_requests(queue: JobQueue) -> list[dict]:
    body = json.loads(policy_export(format="aws-batch", queue=queue).content)
    assert body["jobQueue"] == queue.name
    return body["quotaShares"]


def assert_valid_requests(queue: JobQueue) -> None:
    requests = exported_requests(queue)
    assert len(requests) == queue.shares.count()
    for request in requests:
        assert validation_errors("CreateQuotaShare", request) == ""
        # The Batch model states the naming rule in words only; we keep it too.
        assert AWS_NAME.match(request["quotaShareName"])
        assert AWS_NAME.match(request["jobQueue"])


def test_the_batch_model_has_the_quota_share_operations():
    assert {"CreateQuotaShare", "UpdateQuotaShare", "ListQuotaShares"} <= set(BATCH.operation_names)


def test_the_validator_refuses_what_aws_refuses():
    """The check the tests rely on can fail: a wrong body is reported."""
    bad = {
        "quotaShareName": "qs1",
        "jobQueue": "q",
        "capacityLimits": [{"maxCapacity": "1", "capacityUnit": "ml.g5.xlarge"}],
        "resourceSharingConfiguration": {"strategy": "SHARE"},
    }
    report = validation_errors("CreateQuotaShare", bad)
    assert "maxCapacity" in report
    assert "strategy" in report
    assert "preemptionConfiguration" in report


def test_every_share_of_the_demo_is_a_valid_create_quota_share_request(admin):
    aws = seed_aws_sample(admin, UserFactory(username="lead-demo"))
    philly = seed_philly(admin)
    assert_valid_requests(aws)
    assert_valid_requests(philly)
    by_name = {request["quotaShareName"]: request for request in exported_requests(aws)}
    assert by_name["qs1"] == {
        "quotaShareName": "qs1",
        "jobQueue": "aws-sample",
        "capacityLimits": [{"maxCapacity": 1, "capacityUnit": "ml.g5.xlarge"}],
        "resourceSharingConfiguration": {"strategy": "LEND_AND_BORROW", "borrowLimit": 200},
        "preemptionConfiguration": {"inSharePreemption": "ENABLED"},
        "state": "ENABLED",
        "tags": {"team": "vision-research"},
    }
    assert by_name["qs2"]["resourceSharingConfiguration"] == {"strategy": "LEND"}
    assert by_name["qs3"]["resourceSharingConfiguration"] == {"strategy": "RESERVE"}
    assert by_name["qs3"]["preemptionConfiguration"] == {"inSharePreemption": "DISABLED"}


GENERATED = [
    (strategy, borrow, state, in_share, types)
    for strategy, borrow in [
        ("RESERVE", None),
        ("LEND", None),
        ("LEND_AND_BORROW", -1),
        ("LEND_AND_BORROW", 0),
        ("LEND_AND_BORROW", 10_000),
    ]
    for state, in_share, types in [
        ("ENABLED", True, ("ml.g5.xlarge",)),
        ("DISABLED", False, ("ml.g5.xlarge", "ml.p4d.24xlarge", "ml.trn1.32xlarge")),
    ]
]


def test_generated_policies_export_valid_requests_field_by_field(admin):
    shares = [
        (
            f"s{index}",
            f"team-{index % 3}",
            strategy,
            borrow,
            in_share,
            state,
            {name: 1 + position for position, name in enumerate(types)},
        )
        for index, (strategy, borrow, state, in_share, types) in enumerate(GENERATED)
    ]
    queue = build_queue(
        admin,
        "generated",
        {"ml.g5.xlarge": 9, "ml.p4d.24xlarge": 4, "ml.trn1.32xlarge": 4},
        shares=shares,
    )
    assert_valid_requests(queue)
    for request, (name, team, strategy, borrow, in_share, state, limits) in zip(
        exported_requests(queue), shares, strict=True
    ):
        assert request["quotaShareName"] == name
        assert request["tags"] == {"team": team}
        assert request["state"] == state
        assert request["preemptionConfiguration"]["inSharePreemption"] == (
            "ENABLED" if in_share else "DISABLED"
        )
        sharing = request["resourceSharingConfiguration"]
        assert sharing["strategy"] == strategy
        assert sharing.get("borrowLimit") == borrow
        assert {
            limit["capacityUnit"]: limit["maxCapacity"] for limit in request["capacityLimits"]
        } == limits


def test_names_aws_refuses_are_mapped_and_reported(varied_queue):
    export = policy_export(format="aws-batch", queue=varied_queue)
    requests = json.loads(export.content)["quotaShares"]
    assert requests[0]["quotaShareName"] == "vision-a"
    assert requests[0]["tags"] == {"team": "vision", "share-name": "vision/a"}
    assert requests[0]["jobQueue"] == "research-fleet"
    assert any("'vision/a' is named 'vision-a'" in warning for warning in export.warnings)
    assert any(
        "'research fleet' is named 'research-fleet'" in warning for warning in export.warnings
    )
    assert_valid_requests(varied_queue)


def test_mapped_names_stay_unique_and_within_128_characters():
    taken: set[str] = set()
    assert aws_name("a b", taken) == "a-b"
    assert aws_name("a-b", taken) == "a-b-2"
    assert aws_name("a/b", taken) == "a-b-3"
    long = aws_name("é" * 200, set())
    assert len(long) == 128 and AWS_NAME.match(long)
    clash = {"x" * 128}
    assert aws_name("x" * 130, clash) == "x" * 126 + "-2"
    assert all(AWS_NAME.match(name) for name in taken)


def test_a_configured_job_queue_arn_is_the_job_queue(varied_queue, settings):
    arn = "arn:aws:batch:us-east-1:123456789012:job-queue/research"
    settings.AWS_BATCH_QUEUE_ARNS = {"research fleet": arn}
    body = json.loads(policy_export(format="aws-batch", queue=varied_queue).content)
    assert {request["jobQueue"] for request in body["quotaShares"]} == {arn}
    job_queue = body["createJobQueue"]
    assert job_queue["jobQueueName"] == "research"
    assert job_queue["schedulingPolicyArn"] == (
        "arn:aws:batch:us-east-1:123456789012:scheduling-policy/research"
    )
    assert body["createSchedulingPolicy"]["name"] == "research"
    assert validation_errors("CreateJobQueue", job_queue) == ""


def test_the_queue_is_a_service_environment_a_scheduling_policy_and_a_job_queue(varied_queue):
    """AWS Batch's quota shares live on a SAGEMAKER_TRAINING job queue over a
    quota-managed service environment (capacity per instance type) with a quota share
    scheduling policy: each request is one botocore's model accepts as it is."""
    export = policy_export(format="aws-batch", queue=varied_queue)
    body = json.loads(export.content)
    environment = body["createServiceEnvironment"]
    policy = body["createSchedulingPolicy"]
    job_queue = body["createJobQueue"]
    assert validation_errors("CreateServiceEnvironment", environment) == ""
    assert validation_errors("CreateSchedulingPolicy", policy) == ""
    assert validation_errors("CreateJobQueue", job_queue) == ""
    assert environment == {
        "serviceEnvironmentName": "research-fleet",
        "serviceEnvironmentType": "SAGEMAKER_TRAINING",
        "state": "ENABLED",
        "capacityLimits": [
            {"maxCapacity": 6, "capacityUnit": "ml.g5.xlarge"},
            {"maxCapacity": 4, "capacityUnit": "ml.p4d.24xlarge"},
            {"maxCapacity": 2, "capacityUnit": "ml.trn1.32xlarge"},
        ],
    }
    assert policy == {
        "name": "research-fleet",
        "quotaSharePolicy": {"idleResourceAssignmentStrategy": "FIFO"},
    }
    assert job_queue["jobQueueType"] == "SAGEMAKER_TRAINING"
    assert job_queue["serviceEnvironmentOrder"] == [
        {"order": 1, "serviceEnvironment": "research-fleet"}
    ]
    (action,) = job_queue["jobStateTimeLimitActions"]
    assert (action["state"], action["action"], action["maxTimeSeconds"]) == (
        "RUNNABLE",
        "TERMINATE",
        3600,
    )
    assert job_queue["tags"] == {"queue-name": "research fleet"}
    # No ARN can be made without the queue's region and account: said, not invented.
    assert "schedulingPolicyArn" not in job_queue
    assert any("schedulingPolicyArn" in warning for warning in export.warnings)


def test_a_runnable_time_limit_aws_cannot_hold_is_left_out_and_said(admin):
    queue = build_queue(
        admin,
        "short",
        {"ml.g5.xlarge": 2},
        shares=[("a", "a", "RESERVE", None, False, "ENABLED", {"ml.g5.xlarge": 2})],
        runnable_time_limit=60,
    )
    export = policy_export(format="aws-batch", queue=queue)
    assert "jobStateTimeLimitActions" not in json.loads(export.content)["createJobQueue"]
    assert any("60 s) is outside AWS's 600 to 86400 s" in w for w in export.warnings)


def _api_spelling(value):
    """CloudFormation's keys back in the API's spelling (tags keep their own keys)."""
    if isinstance(value, dict):
        return {
            key
            if key in ("team", "share-name", "queue-name", "Ref", "Fn::GetAtt")
            else key[:1].lower() + key[1:]: _api_spelling(item)
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [_api_spelling(item) for item in value]
    return value


def test_the_cloudformation_template_holds_the_same_requests(varied_queue):
    template = json.loads(policy_export(format="cloudformation", queue=varied_queue).content)
    body = json.loads(policy_export(format="aws-batch", queue=varied_queue).content)
    assert template["AWSTemplateFormatVersion"] == "2010-09-09"
    resources = template["Resources"]
    queue_parts = {
        "ServiceEnvironment": ("AWS::Batch::ServiceEnvironment", "createServiceEnvironment"),
        "SchedulingPolicy": ("AWS::Batch::SchedulingPolicy", "createSchedulingPolicy"),
        "JobQueue": ("AWS::Batch::JobQueue", "createJobQueue"),
    }
    for logical_id, (type_, part) in queue_parts.items():
        resource = resources.pop(logical_id)
        assert resource["Type"] == type_
        as_request = _api_spelling(resource["Properties"])
        if part == "createJobQueue":
            assert as_request.pop("schedulingPolicyArn") == {
                "Fn::GetAtt": ["SchedulingPolicy", "Arn"]
            }
            order = as_request["serviceEnvironmentOrder"][0]
            assert order["serviceEnvironment"] == {
                "Fn::GetAtt": ["ServiceEnvironment", "ServiceEnvironmentArn"]
            }
            order["serviceEnvironment"] = body[part]["serviceEnvironmentOrder"][0][
                "serviceEnvironment"
            ]
        assert as_request == body[part]
        operation = "Create" + part[len("create") :]
        assert validation_errors(operation, as_request) == ""
    requests = body["quotaShares"]
    resources = list(resources.items())
    assert len(resources) == len(requests)
    ids = [logical_id for logical_id, _resource in resources]
    assert len(set(ids)) == len(ids)
    assert all(logical_id.isalnum() for logical_id in ids)
    for (_logical_id, resource), request in zip(resources, requests, strict=True):
        assert resource["Type"] == "AWS::Batch::QuotaShare"
        properties = resource["Properties"]
        assert set(properties) == {
            "QuotaShareName",
            "JobQueue",
            "CapacityLimits",
            "ResourceSharingConfiguration",
            "PreemptionConfiguration",
            "State",
            "Tags",
        }
        assert properties["JobQueue"] == {"Ref": "JobQueue"}
        as_request = _api_spelling(properties)
        as_request["jobQueue"] = request["jobQueue"]
        assert as_request == request
        assert validation_errors("CreateQuotaShare", as_request) == ""


def test_every_combination_of_strategy_and_state_is_covered():
    combinations = {(strategy, state) for strategy, _b, state, _i, _t in GENERATED}
    assert combinations == set(
        itertools.product(["RESERVE", "LEND", "LEND_AND_BORROW"], ["ENABLED", "DISABLED"])
    )
