"""CloudFormation templates: the export checked by cfn-lint offline (its bundled resource
schemas hold AWS::Batch::JobQueue, ServiceEnvironment, SchedulingPolicy and QuotaShare),
and templates in JSON and YAML planned and applied through the upload, the API and the
command like the other formats."""

import io
import json

import pytest
import yaml
from cfnlint.api import ManualArgs, lint
from django.core.management import call_command
from django.urls import reverse

from fleet.models import JobQueue, QuotaShare
from governance.models import PolicyChange
from governance.policy_code import detect_format, policy_export, policy_file_read
from governance.policy_code.plan import policy_plan
from governance.policy_code.source import MAX_FILE_BYTES, PolicyFileError
from tests.governance.policy_code.test_api import client_for
from tests.governance.policy_code.test_views import apply_payload, upload

pytestmark = pytest.mark.django_db

NLP_BORROW = "Resources.QuotaShareNlp.Properties.ResourceSharingConfiguration.BorrowLimit"


def template(queue) -> dict:
    return json.loads(policy_export(format="cloudformation", queue=queue).content)


def cfn_lint(text: str) -> list[str]:
    return [str(match) for match in lint(text, config=ManualArgs(regions=["us-east-1"]))]


class _ShortForms(yaml.SafeDumper):
    """Dumps {"Ref": x} as `!Ref x` and {"Fn::GetAtt": [a, b]} as `!GetAtt a.b`, as
    CloudFormation's YAML templates are usually written."""


def _represent_dict(dumper, data):
    if list(data) == ["Ref"]:
        return dumper.represent_scalar("!Ref", data["Ref"])
    if list(data) == ["Fn::GetAtt"]:
        return dumper.represent_scalar("!GetAtt", ".".join(data["Fn::GetAtt"]))
    return dumper.represent_dict(data)


_ShortForms.add_representer(dict, _represent_dict)


def as_yaml(data: dict) -> str:
    return yaml.dump(data, Dumper=_ShortForms, sort_keys=False, allow_unicode=True)


def problems_of(text: str) -> list:
    with pytest.raises(PolicyFileError) as error:
        policy_plan(policy=policy_file_read(raw=text, source="t", format="cloudformation"))
    return error.value.problems


@pytest.mark.slow
def test_cfn_lint_finds_nothing_wrong_in_the_export(varied_queue, settings):
    settings.AWS_BATCH_QUEUE_ARNS = {
        "research fleet": "arn:aws:batch:us-east-1:123456789012:job-queue/research"
    }
    text = policy_export(format="cloudformation", queue=varied_queue).content
    assert cfn_lint(text) == []
    assert cfn_lint(as_yaml(json.loads(text))) == []


def test_cfn_lint_can_fail():
    """The check above can fail: cfn-lint knows the Batch types' properties."""
    bad = {
        "Resources": {
            "Env": {
                "Type": "AWS::Batch::ServiceEnvironment",
                "Properties": {"ServiceEnvironmentType": "SAGEMAKER_TRAINING", "Size": 3},
            },
            "Share": {
                "Type": "AWS::Batch::QuotaShare",
                "Properties": {
                    "QuotaShareName": "a",
                    "JobQueue": "q",
                    "CapacityLimits": [{"MaxCapacity": 1, "CapacityUnit": "ml.g5.xlarge"}],
                    "ResourceSharingConfiguration": {"Strategy": "SHARE"},
                    "PreemptionConfiguration": {"InSharePreemption": "ENABLED"},
                },
            },
        }
    }
    report = "\n".join(cfn_lint(json.dumps(bad)))
    assert "CapacityLimits" in report and "Size" in report
    assert "'share' is not one of" in report


@pytest.mark.parametrize("spelling", ["json", "yaml"])
def test_export_then_upload_plans_no_changes(varied_queue, spelling):
    text = policy_export(format="cloudformation", queue=varied_queue).content
    if spelling == "yaml":
        text = as_yaml(json.loads(text))
        assert "!Ref 'JobQueue'" in text and "!GetAtt 'SchedulingPolicy.Arn'" in text
    assert detect_format(text) == "cloudformation"
    policy = policy_file_read(raw=text, source="t")
    (queue,) = policy.queues
    assert queue.name == "research fleet"
    assert queue.capacity == {"ml.g5.xlarge": 6, "ml.p4d.24xlarge": 4, "ml.trn1.32xlarge": 2}
    assert queue.runnable_time_limit == 3600
    plan = policy_plan(policy=policy)
    assert plan.is_empty, plan.changes


def test_the_capacity_is_planned_from_the_service_environment(varied_queue):
    data = template(varied_queue)
    limits = data["Resources"]["ServiceEnvironment"]["Properties"]["CapacityLimits"]
    limits[0]["MaxCapacity"] = 9
    plan = policy_plan(policy=policy_file_read(raw=json.dumps(data), source="t"))
    (change,) = plan.changes
    assert change.fields == [
        (
            "capacity",
            {"ml.g5.xlarge": 6, "ml.p4d.24xlarge": 4, "ml.trn1.32xlarge": 2},
            {"ml.g5.xlarge": 9, "ml.p4d.24xlarge": 4, "ml.trn1.32xlarge": 2},
        )
    ]


def test_an_error_names_the_resource_and_property_at_its_line(varied_queue):
    data = template(varied_queue)
    sharing = data["Resources"]["QuotaShareNlp"]["Properties"]["ResourceSharingConfiguration"]
    sharing["BorrowLimit"] = "lots"
    text = json.dumps(data, indent=2)
    (problem,) = problems_of(text)
    assert (problem.field, problem.message) == (NLP_BORROW, "must be a whole number")
    assert '"BorrowLimit": "lots"' in text.splitlines()[problem.line - 1]


@pytest.mark.parametrize(
    ("edit", "field", "message"),
    [
        (
            lambda r: r["JobQueue"]["Properties"].update(JobQueueType="ECS"),
            "Resources.JobQueue.Properties.JobQueueType",
            "must be one of SAGEMAKER_TRAINING",
        ),
        (
            lambda r: r["SchedulingPolicy"]["Properties"].update(
                FairsharePolicy={"ShareDecaySeconds": 60}
            ),
            "Resources.SchedulingPolicy.Properties.FairsharePolicy",
            "a fair-share policy does not schedule quota shares",
        ),
        (
            lambda r: r["ServiceEnvironment"]["Properties"]["CapacityLimits"][1].update(
                MaxCapacity=0
            ),
            "Resources.ServiceEnvironment.Properties.CapacityLimits[1].MaxCapacity",
            "must be at least 1",
        ),
        (
            lambda r: r["QuotaShareNlp"]["Properties"].update(
                JobQueue={"Fn::Sub": "${AWS::StackName}-q"}
            ),
            "Resources.QuotaShareNlp.Properties.JobQueue.Fn::Sub",
            "Fn::Sub is not read here",
        ),
        (
            lambda r: r["QuotaShareNlp"]["Properties"].update(JobQueue={"Ref": "Elsewhere"}),
            "Resources.QuotaShareNlp.Properties.JobQueue.Ref",
            "'Elsewhere' is neither a resource nor a parameter",
        ),
        (
            lambda r: r["QuotaShareNlp"]["Properties"].update(JobQueue="other-queue"),
            "Resources.QuotaShareNlp.Properties.JobQueue",
            "names job queue 'other-queue'",
        ),
        (
            lambda r: r["JobQueue"]["Properties"]["JobStateTimeLimitActions"][0].update(
                MaxTimeSeconds=90_000
            ),
            "Resources.JobQueue.Properties.JobStateTimeLimitActions[0].MaxTimeSeconds",
            "must be at most 86400",
        ),
        (
            lambda r: r.update(Second={**r["JobQueue"]}),
            "Resources.Second",
            "a second AWS::Batch::JobQueue",
        ),
    ],
)
def test_what_the_queue_cannot_be_is_refused_at_its_field(varied_queue, edit, field, message):
    data = template(varied_queue)
    edit(data["Resources"])
    problems = problems_of(json.dumps(data, indent=2))
    assert any(p.field == field and message in p.message for p in problems), problems
    assert all(problem.line for problem in problems)


def test_other_resource_types_are_ignored_and_listed(varied_queue):
    data = template(varied_queue)
    data["Resources"]["Logs"] = {"Type": "AWS::S3::Bucket", "Properties": {}}
    data["Resources"]["Compute"] = {"Type": "AWS::Batch::ComputeEnvironment"}
    policy = policy_file_read(raw=json.dumps(data), source="t")
    (warning,) = policy.warnings
    assert "ignored: Logs (AWS::S3::Bucket), Compute (AWS::Batch::ComputeEnvironment)" in warning
    assert policy_plan(policy=policy).is_empty


def test_a_template_of_shares_alone_keeps_the_queue_and_reads_a_parameter(varied_queue):
    """The former export: shares naming the queue through a parameter's Default."""
    data = template(varied_queue)
    for logical in ("JobQueue", "ServiceEnvironment", "SchedulingPolicy"):
        del data["Resources"][logical]
    data["Parameters"] = {"Queue": {"Type": "String", "Default": "research-fleet"}}
    for resource in data["Resources"].values():
        resource["Properties"]["JobQueue"] = {"Ref": "Queue"}
    policy = policy_file_read(raw=json.dumps(data), source="t", target_queue="research fleet")
    assert policy.queues[0].capacity is None
    assert policy_plan(policy=policy).is_empty


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("Resources:\n  A: {Type: AWS::Batch::JobQueue, Properties: " + "[" * 100, "nested deeper"),
        (
            "Resources:\n  A:\n    Type: AWS::Batch::JobQueue\n    Properties:\n"
            '      JobQueueName: "q\\0"\n',
            "control characters (\\x00",
        ),
        (
            'a: &a ["x","x","x","x","x","x","x","x","x","x"]\n'
            + "".join(
                f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 10)}]\n"
                for i in range(6)
            )
            + "Resources: {}\n",
            "holds more than",
        ),
    ],
)
def test_hostile_templates_meet_the_shared_limits(admin, text, message):
    before = PolicyChange.objects.count()
    with pytest.raises(PolicyFileError) as error:
        policy_file_read(raw=text, source="t", format="cloudformation")
    assert any(message in problem.message for problem in error.value.problems)
    with pytest.raises(PolicyFileError):
        policy_file_read(raw=b" " * (MAX_FILE_BYTES + 1), source="t", format="cloudformation")
    assert PolicyChange.objects.count() == before


def test_the_api_plans_and_applies_a_template_with_a_reason(admin, varied_queue):
    data = template(varied_queue)
    data["Resources"]["QuotaShareNlp"]["Properties"]["State"] = "DISABLED"
    content = json.dumps(data)
    client = client_for(admin)
    plan = client.post("/api/v1/policy/plan/", {"content": content}, format="json")
    assert plan.status_code == 200, plan.content
    body = {"content": content, "filename": "pause.json", "versions": plan.json()["versions"]}
    refused = client.post("/api/v1/policy/apply/", {**body, "reason": " "}, format="json")
    assert refused.status_code == 400 and "reason" in refused.json()["errors"]
    assert QuotaShare.objects.get(name="nlp").state == "ENABLED"
    applied = client.post("/api/v1/policy/apply/", {**body, "reason": "Pause"}, format="json")
    assert applied.status_code == 200, applied.content
    assert QuotaShare.objects.get(name="nlp").state == "DISABLED"
    change = PolicyChange.objects.latest("id")
    assert change.reason == "Pause (applied from policy file pause.json)"
    assert change.cause == "import"


def test_the_command_plans_and_applies_a_yaml_template(admin, varied_queue, tmp_path):
    data = template(varied_queue)
    data["Resources"]["ServiceEnvironment"]["Properties"]["CapacityLimits"][0]["MaxCapacity"] = 8
    path = tmp_path / "grow.yaml"
    path.write_text(as_yaml(data))
    out = io.StringIO()
    call_command("policy", "plan", str(path), stdout=out)
    assert "(cloudformation format)" in out.getvalue()
    assert JobQueue.objects.get(name="research fleet").capacities.count() == 3
    out = io.StringIO()
    call_command(
        "policy", "apply", str(path), "--user", "admin-user", "--reason", "Grow", stdout=out
    )
    assert "Applied: 1 change recorded in the history." in out.getvalue()
    queue = JobQueue.objects.get(name="research fleet")
    assert queue.capacities.get(instance_type__name="ml.g5.xlarge").instances == 8


def test_the_upload_plans_and_applies_a_template(client, admin, varied_queue):
    client.force_login(admin)
    data = template(varied_queue)
    sharing = data["Resources"]["QuotaShareNlp"]["Properties"]["ResourceSharingConfiguration"]
    sharing["BorrowLimit"] = 25
    plan = upload(client, varied_queue, "nlp.yaml", as_yaml(data))
    text = plan.content.decode()
    assert plan.status_code == 200 and "share nlp: changed" in text
    applied = client.post(
        reverse("queue-policy-apply", args=[varied_queue.pk]),
        {"payload": apply_payload(plan), "reason": "nlp borrows a quarter"},
    )
    assert applied.status_code == 302
    assert QuotaShare.objects.get(name="nlp").borrow_limit == 25
    bad = upload(client, varied_queue, "bad.json", json.dumps({"Resources": {"A": []}}))
    assert "Resources.A: must be a mapping of fields" in bad.content.decode()


def test_yaml_short_forms_as_written_by_hand(varied_queue):
    text = policy_export(format="cloudformation", queue=varied_queue).content
    hand = (
        as_yaml(json.loads(text))
        .replace("!Ref 'JobQueue'", "!Ref JobQueue")
        .replace("!GetAtt 'SchedulingPolicy.Arn'", "!GetAtt [SchedulingPolicy, Arn]")
    )
    assert "!GetAtt [SchedulingPolicy, Arn]" in hand and "!Ref JobQueue" in hand
    assert policy_plan(policy=policy_file_read(raw=hand, source="t")).is_empty
