"""A policy file's names and texts have the editor's bounds, in every format (issue 28,
point 1): an over-long value is refused at plan time naming its field and line, and
nothing changes."""

import pytest
import yaml

from core.bounds import MAX_TEXT
from governance.policy_code import policy_export, policy_file_read
from governance.policy_code.plan import policy_plan
from tests.governance.policy_code.test_errors import problems_of

pytestmark = pytest.mark.django_db


def test_native_over_long_share_name_and_queue_description_are_refused(admin, varied_queue):
    doc = yaml.safe_load(policy_export(format="native", queue=varied_queue).content)
    doc["queues"][0]["description"] = "d" * (MAX_TEXT + 1)
    doc["queues"][0]["shares"][1]["name"] = "s" * 101
    content = yaml.safe_dump(doc, sort_keys=False)
    problems = {problem.field: problem for problem in problems_of(admin, content, "native")}
    assert problems["queues[0].description"].message == (
        f"at most {MAX_TEXT:,} characters (this has {MAX_TEXT + 1:,})"
    )
    assert problems["queues[0].shares[1].name"].message == "at most 100 characters (this has 101)"
    assert problems["queues[0].shares[1].name"].line is not None


def test_native_text_at_its_bound_plans(admin, varied_queue):
    doc = yaml.safe_load(policy_export(format="native", queue=varied_queue).content)
    doc["queues"][0]["description"] = "d" * MAX_TEXT
    plan = policy_plan(policy=policy_file_read(raw=yaml.safe_dump(doc), source="ok"))
    assert plan.queues[0].name == varied_queue.name


def test_aws_batch_share_name_longer_than_a_share_name_is_refused(admin, varied_queue):
    content = policy_export(format="aws-batch", queue=varied_queue).content
    long_name = "n" * 120  # AWS takes 128 characters; a share's name is at most 100
    assert '"quotaShareName": "nlp"' in content
    content = content.replace('"quotaShareName": "nlp"', f'"quotaShareName": "{long_name}"')
    problems = [str(problem) for problem in problems_of(admin, content, "aws-batch")]
    assert any(
        "quotaShareName: at most 100 characters (this has 120)" in problem for problem in problems
    ), problems


def test_kueue_over_long_share_and_team_names_are_refused(admin, varied_queue):
    content = policy_export(format="kueue", queue=varied_queue).content
    content = content.replace(
        "quota-governance.io/share: vision/a", f"quota-governance.io/share: {'k' * 150}"
    )
    content = content.replace(
        "quota-governance.io/team: nlp", f"quota-governance.io/team: {'t' * 101}"
    )
    problems = [str(problem) for problem in problems_of(admin, content, "kueue")]
    assert any("at most 100 characters (this has 150)" in problem for problem in problems), problems
    assert any("at most 100 characters (this has 101)" in problem for problem in problems), problems
