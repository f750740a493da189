"""Plan and apply: the plan's diff is what the history records, the impact is the
engine's, and the apply is all or nothing with optimistic locking."""

import json

import pytest
import yaml

from core.rules import Refused
from demo.organisation import seed_aws_sample
from fleet.models import JobQueue, QuotaShare, Team, UrgencyDefinition
from governance.models import PolicyChange
from governance.policy.services import ShareData, changed_fields, share_update
from governance.policy_code import native, policy_export, policy_file_read
from governance.policy_code.plan import PlanOutdated, policy_apply, policy_plan
from governance.policy_code.source import PolicyFileError
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


def native_data(queue) -> dict:
    return yaml.safe_load(policy_export(format="native", queue=queue).content)


def share_entry(data: dict, name: str) -> dict:
    return next(share for share in data["queues"][0]["shares"] if share["name"] == name)


def reviewed_change(queue) -> str:
    """A quarterly review: more g5, nlp may borrow half, 'held' goes, a share is added,
    the deadline urgency grants a higher priority."""
    data = native_data(queue)
    data["queues"][0]["capacity"]["ml.g5.xlarge"] = 8
    share_entry(data, "nlp")["borrow_limit"] = 50
    data["queues"][0]["shares"] = [s for s in data["queues"][0]["shares"] if s["name"] != "held"]
    data["queues"][0]["shares"].append(
        {
            "name": "robotics",
            "team": "robotics",
            "strategy": "LEND",
            "capacity_limits": {"ml.g5.xlarge": 1},
        }
    )
    data["teams"].append({"name": "robotics", "description": "New this quarter"})
    data["urgency_definitions"][0]["priority"] = 850
    return native.dump(data)


def _object_name(change: PolicyChange) -> str:
    return {
        "share": lambda: change.share.name,
        "queue": lambda: change.queue.name,
        "urgency": lambda: change.urgency.name,
    }[change.target]()


def test_the_plans_diff_is_the_history_diff_after_apply(admin, varied_queue):
    policy = policy_file_read(raw=reviewed_change(varied_queue), source="review.yaml")
    plan = policy_plan(policy=policy)
    planned = {(change.target, change.name): change.fields for change in plan.changes}
    assert {(change.action, change.name) for change in plan.changes} == {
        ("changed", "Deadline"),
        ("changed", "research fleet"),
        ("changed", "nlp"),
        ("removed", "held"),
        ("added", "robotics"),
    }
    assert planned[("share", "held")] == [("state", "ENABLED", "DISABLED")]
    assert planned[("share", "nlp")] == [("borrow_limit", 0, 50)]
    assert [team.name for team in plan.teams] == ["robotics"]

    result = policy_apply(actor=admin, policy=policy, reason="Quarterly review")
    recorded = {
        (change.target, _object_name(change)): changed_fields(change.before, change.after)
        for change in result.changes
    }
    assert recorded == planned
    for change in result.changes:
        assert change.reason == "Quarterly review (applied from policy file review.yaml)"
        assert change.cause == PolicyChange.Cause.IMPORT
        assert change.actor == admin
    assert Team.objects.get(name="robotics").description == "New this quarter"
    assert UrgencyDefinition.objects.get(name="Deadline").priority == 850
    assert varied_queue.shares.get(name="held").state == "DISABLED"
    assert varied_queue.shares.order_by("-position").first().name == "robotics"


def test_the_plan_previews_the_engines_impact_on_running_jobs(admin):
    queue = seed_aws_sample(admin, UserFactory(username="lead-demo"))
    body = json.loads(policy_export(format="aws-batch", queue=queue).content)
    body["quotaShares"][0]["resourceSharingConfiguration"]["borrowLimit"] = 0
    policy = policy_file_read(raw=json.dumps(body), source="no-borrowing.json")
    plan = policy_plan(policy=policy)
    (queue_plan,) = plan.queues
    assert [change.fields for change in queue_plan.changes] == [[("borrow_limit", 200, 0)]]
    assert [line.text for line in queue_plan.impact] == [
        "share qs1 can borrow 1 fewer ml.g5.xlarge (at most 0 beyond its limit)"
    ]


def test_a_change_made_after_the_plan_stops_the_apply(admin, varied_queue):
    policy = policy_file_read(raw=reviewed_change(varied_queue), source="review.yaml")
    versions = policy_plan(policy=policy).versions()
    nlp = varied_queue.shares.get(name="nlp")
    share_update(
        actor=admin,
        share=nlp,
        data=ShareData(
            name="nlp",
            team=nlp.team,
            strategy="LEND",
            capacity_limits={"ml.g5.xlarge": 1},
        ),
        reason="Someone else, meanwhile",
        expected_version=nlp.version,
    )
    count = PolicyChange.objects.count()
    with pytest.raises(PlanOutdated, match="share 'research fleet/nlp' changed"):
        policy_apply(reason="test", actor=admin, policy=policy, expected_versions=versions)
    assert PolicyChange.objects.count() == count
    assert not Team.objects.filter(name="robotics").exists()


def test_someone_who_may_not_edit_the_policy_changes_nothing(admin, team_lead, varied_queue):
    policy = policy_file_read(raw=reviewed_change(varied_queue), source="review.yaml")
    count = PolicyChange.objects.count()
    with pytest.raises(Refused) as error:
        policy_apply(reason="test", actor=team_lead, policy=policy)
    assert "only platform admins change the policy" in str(error.value)
    assert PolicyChange.objects.count() == count
    assert not Team.objects.filter(name="robotics").exists()
    assert UrgencyDefinition.objects.get(name="Deadline").priority == 800


def test_shares_that_move_between_instance_types_get_the_capacity_in_two_steps(admin):
    from tests.governance.policy_code.conftest import build_queue

    queue = build_queue(
        admin,
        "moving",
        {"ml.g5.xlarge": 2},
        shares=[("only", "a", "LEND", None, False, "ENABLED", {"ml.g5.xlarge": 1})],
    )
    data = native_data(queue)
    data["queues"][0]["capacity"] = {"ml.p4d.24xlarge": 2}
    data["queues"][0]["shares"][0]["capacity_limits"] = {"ml.p4d.24xlarge": 1}
    data["instance_types"].append(
        {"name": "ml.p4d.24xlarge", "gpus": 8, "gpu_model": "NVIDIA A100"}
    )
    policy = policy_file_read(raw=native.dump(data), source="move.yaml")
    plan = policy_plan(policy=policy)
    assert any("two steps" in warning for warning in plan.warnings)
    result = policy_apply(reason="test", actor=admin, policy=policy)
    capacities = [change.after["capacity"] for change in result.changes if change.target == "queue"]
    assert capacities == [{"ml.g5.xlarge": 2, "ml.p4d.24xlarge": 2}, {"ml.p4d.24xlarge": 2}]
    assert JobQueue.objects.get(name="moving").capacities.get().instance_type.name == (
        "ml.p4d.24xlarge"
    )
    assert QuotaShare.objects.get(name="only").limits.get().instance_type.name == "ml.p4d.24xlarge"


def test_with_review_on_each_change_becomes_a_proposal_another_admin_approves(
    admin, varied_queue, settings
):
    from governance.proposals.services import proposal_approve

    settings.POLICY_CHANGES_NEED_REVIEW = True
    data = native_data(varied_queue)
    share_entry(data, "nlp")["borrow_limit"] = 50
    data["urgency_definitions"][0]["priority"] = 850
    policy = policy_file_read(raw=native.dump(data), source="review.yaml")
    count = PolicyChange.objects.count()
    result = policy_apply(actor=admin, policy=policy, reason="Quarterly review")
    assert result.changes == []
    assert len(result.proposals) == 2
    assert result.summary().startswith("2 proposals wait for another admin's review")
    assert PolicyChange.objects.count() == count
    assert QuotaShare.objects.get(name="nlp").borrow_limit == 0

    reviewer = UserFactory(username="second-admin", roles=["admins"])
    nlp_proposal = next(p for p in result.proposals if p.share_id)
    proposal_approve(actor=reviewer, proposal=nlp_proposal, note="Fine")
    assert QuotaShare.objects.get(name="nlp").borrow_limit == 50
    change = PolicyChange.objects.latest("id")
    assert change.reason == "Quarterly review (applied from policy file review.yaml)"
    assert changed_fields(change.before, change.after) == [("borrow_limit", 0, 50)]


def test_with_review_on_a_file_whose_changes_depend_on_each_other_is_refused(
    admin, varied_queue, settings
):
    settings.POLICY_CHANGES_NEED_REVIEW = True
    policy = policy_file_read(raw=reviewed_change(varied_queue), source="review.yaml")
    count = PolicyChange.objects.count()
    with pytest.raises(PolicyFileError) as error:
        policy_apply(reason="test", actor=admin, policy=policy)
    (problem,) = error.value.problems
    assert "it creates teams (robotics): create them first" in problem.message
    assert PolicyChange.objects.count() == count
    assert not Team.objects.filter(name="robotics").exists()
