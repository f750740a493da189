"""A bad file gets errors that name its line and field, and changes nothing."""

import json

import pytest

from fleet.models import InstanceType, QuotaShare, Team
from governance.models import PolicyChange
from governance.policy_code import policy_export, policy_file_read
from governance.policy_code.plan import policy_apply
from governance.policy_code.source import PolicyFileError

pytestmark = pytest.mark.django_db


def line_of(content: str, needle: str, *, after: str = "") -> int:
    start = content.index(after) if after else 0
    return content.count("\n", 0, content.index(needle, start)) + 1


def snapshot() -> tuple:
    return (
        PolicyChange.objects.count(),
        Team.objects.count(),
        InstanceType.objects.count(),
        sorted(QuotaShare.objects.values_list("name", "version", "state")),
    )


def problems_of(admin, content: str, format: str | None = None):
    before = snapshot()
    with pytest.raises(PolicyFileError) as error:
        policy = policy_file_read(raw=content, source="bad", format=format)
        policy_apply(reason="test", actor=admin, policy=policy)
    assert snapshot() == before
    return error.value.problems


@pytest.fixture
def native_text(varied_queue):
    return policy_export(format="native", queue=varied_queue).content


def test_yaml_that_does_not_parse_names_its_line(admin, native_text):
    broken = native_text.replace("  strategy: LEND\n", "  strategy: [LEND\n", 1)
    (problem,) = problems_of(admin, broken, "native")
    assert problem.field == "file"
    assert "not valid YAML" in problem.message
    assert abs(problem.line - line_of(broken, "strategy: [LEND")) <= 1


def test_a_wrong_value_names_its_field_and_line(admin, native_text):
    bad = native_text.replace("borrow_limit: 150", "borrow_limit: lots")
    (problem,) = problems_of(admin, bad)
    assert problem.field == "queues[0].shares[5].borrow_limit"
    assert problem.line == line_of(bad, "borrow_limit: lots")
    assert problem.message == "must be a whole number"
    assert (
        str(problem)
        == f"line {problem.line}: queues[0].shares[5].borrow_limit: must be a whole number"
    )


def test_every_problem_of_a_file_is_reported_at_once(admin, native_text):
    bad = native_text.replace("borrow_limit: 150", "burrow_limit: 150").replace(
        "in_share_preemption: true", "in_share_preemption: maybe", 1
    )
    problems = problems_of(admin, bad)
    assert {problem.field for problem in problems} == {
        "queues[0].shares[0].in_share_preemption",
        "queues[0].shares[5].burrow_limit",
    }
    assert all(problem.line for problem in problems)


def test_another_version_of_the_format_is_refused(admin, native_text):
    (problem,) = problems_of(admin, native_text.replace("version: 1", "version: 2"))
    assert (problem.field, problem.line) == ("version", line_of(native_text, "version: 1"))


def test_a_limit_on_a_type_the_queue_lacks_is_the_engines_rule_at_the_files_line(
    admin, native_text
):
    bad = native_text.replace(
        "  capacity_limits:\n      ml.g5.xlarge: 1\n",
        "  capacity_limits:\n      ml.g6.xlarge: 1\n",
    )
    assert bad != native_text
    problems = problems_of(admin, bad)
    assert {problem.field for problem in problems} == {"queues[0].shares[1].capacity_limits"}
    messages = " ".join(problem.message for problem in problems)
    assert "instance type 'ml.g6.xlarge' is not in the queue" in messages
    assert problems[0].line == line_of(bad, "capacity_limits:", after="  - name: nlp\n    team")


def test_a_limit_above_the_queues_capacity_is_the_editors_rule_at_the_files_line(
    admin, native_text
):
    bad = native_text.replace(
        "  capacity_limits:\n      ml.g5.xlarge: 1\n", "  capacity_limits:\n      ml.g5.xlarge: 7\n"
    )
    (problem,) = problems_of(admin, bad)
    assert problem.field == "queues[0].shares[1].capacity_limits"
    assert problem.message == "at most 6: the queue has 6 ml.g5.xlarge"


def test_an_unknown_team_in_the_native_format_is_not_created(admin, native_text):
    bad = native_text.replace("team: nlp", "team: nlpp", 1)
    (problem,) = problems_of(admin, bad)
    assert problem.field == "queues[0].shares[1].team"
    assert "unknown team 'nlpp'" in problem.message
    assert problem.line == line_of(bad, "team: nlpp")


def test_json_that_does_not_parse_names_its_line(admin, varied_queue):
    content = policy_export(format="aws-batch", queue=varied_queue).content
    broken = content.replace('"state": "DISABLED",', '"state": "DISABLED"', 1)
    (problem,) = problems_of(admin, broken, "aws-batch")
    assert problem.field == "file"
    assert "not valid JSON" in problem.message
    assert problem.line == line_of(broken, '"tags"', after='"state": "DISABLED"')


def test_aws_fields_are_checked_by_their_own_names(admin, varied_queue):
    body = json.loads(policy_export(format="aws-batch", queue=varied_queue).content)
    body["quotaShares"][4]["resourceSharingConfiguration"]["borrowLimit"] = 10
    body["quotaShares"][1]["quotaShareName"] = "n l p"
    body["quotaShares"][2]["capacityLimits"][0]["maxCapacity"] = 0
    content = json.dumps(body, indent=2)
    problems = {problem.field: problem for problem in problems_of(admin, content)}
    assert set(problems) == {
        "quotaShares[4].resourceSharingConfiguration.borrowLimit",
        "quotaShares[1].quotaShareName",
        "quotaShares[2].capacityLimits[0].maxCapacity",
    }
    assert problems["quotaShares[1].quotaShareName"].line == line_of(content, '"n l p"')
    assert "only allowed with LEND_AND_BORROW" in (
        problems["quotaShares[4].resourceSharingConfiguration.borrowLimit"].message
    )


def test_a_file_in_no_known_format_says_so(admin):
    (problem,) = problems_of(admin, "just: some yaml\n")
    assert problem.field == "format"
    with pytest.raises(PolicyFileError):
        policy_file_read(raw=b"\xff\xfe", source="binary")
