"""The Kueue export read back with a YAML parser and checked field by field against the
mapping documented in governance.policy_code.kueue, and Kueue files written by hand."""

import json
import textwrap

import pytest
import yaml

from fleet.models import QuotaShare
from governance.policy_code import policy_export, policy_file_read
from governance.policy_code.plan import policy_plan
from governance.policy_code.source import PolicyFileError
from tests.factories import TeamFactory
from tests.governance.policy_code.conftest import VARIED_SHARES, build_queue

pytestmark = pytest.mark.django_db

GPUS = {"ml.g5.xlarge": 1, "ml.p4d.24xlarge": 8, "ml.trn1.32xlarge": 16}


def kueue_objects(queue) -> tuple[dict[str, list[dict]], tuple[str, ...]]:
    export = policy_export(format="kueue", queue=queue)
    by_kind: dict[str, list[dict]] = {}
    for obj in yaml.safe_load_all(export.content):
        assert obj["apiVersion"] == "kueue.x-k8s.io/v1beta2"
        by_kind.setdefault(obj["kind"], []).append(obj)
    return by_kind, export.warnings


def test_one_cohort_per_queue_one_flavor_per_type_one_cluster_queue_per_share(varied_queue):
    objects, _warnings = kueue_objects(varied_queue)
    (cohort,) = objects["Cohort"]
    assert cohort["metadata"]["name"] == "research-fleet"
    notes = cohort["metadata"]["annotations"]
    assert notes["quota-governance.io/queue"] == "research fleet"
    assert json.loads(notes["quota-governance.io/capacity"]) == {
        "ml.g5.xlarge": 6,
        "ml.p4d.24xlarge": 4,
        "ml.trn1.32xlarge": 2,
    }
    flavors = {flavor["metadata"]["name"]: flavor for flavor in objects["ResourceFlavor"]}
    assert set(flavors) == set(GPUS)
    for name, flavor in flavors.items():
        assert flavor["spec"]["nodeLabels"] == {"node.kubernetes.io/instance-type": name}
        notes = flavor["metadata"]["annotations"]
        assert notes["quota-governance.io/gpus-per-instance"] == str(GPUS[name])
    queues = objects["ClusterQueue"]
    assert [cq["metadata"]["annotations"]["quota-governance.io/share"] for cq in queues] == [
        share[0] for share in VARIED_SHARES
    ]
    assert queues[0]["metadata"]["name"] == "research-fleet-vision-a"
    # v1beta2 names the cohort in cohortName (v1beta1: cohort), and a Cohort has a spec.
    assert all(cq["spec"]["cohortName"] == "research-fleet" for cq in queues)
    assert not any("cohort" in cq["spec"] for cq in queues)
    assert cohort["spec"] == {}


def _expected_quota(strategy, borrow, instances, gpus) -> dict:
    quota = {"name": "nvidia.com/gpu", "nominalQuota": instances * gpus}
    if strategy == "RESERVE":
        quota.update(borrowingLimit=0, lendingLimit=0)
    elif strategy == "LEND":
        quota["borrowingLimit"] = 0
    elif borrow != -1:
        quota["borrowingLimit"] = (instances * borrow // 100) * gpus
    return quota


def test_every_share_follows_the_documented_mapping(varied_queue):
    objects, _warnings = kueue_objects(varied_queue)
    for cq, (name, team, strategy, borrow, in_share, state, limits) in zip(
        objects["ClusterQueue"], VARIED_SHARES, strict=True
    ):
        spec = cq["spec"]
        notes = cq["metadata"]["annotations"]
        assert notes["quota-governance.io/team"] == team
        assert notes["quota-governance.io/strategy"] == strategy
        assert notes.get("quota-governance.io/borrow-limit") == (
            None if borrow is None else str(borrow)
        )
        (group,) = spec["resourceGroups"]
        assert group["coveredResources"] == ["nvidia.com/gpu"]
        assert [flavor["name"] for flavor in group["flavors"]] == sorted(limits)
        for flavor in group["flavors"]:
            (quota,) = flavor["resources"]
            expected = _expected_quota(
                strategy, borrow, limits[flavor["name"]], GPUS[flavor["name"]]
            )
            assert quota == expected, (name, flavor["name"])
        assert spec["preemption"] == {
            "reclaimWithinCohort": "Any",
            "withinClusterQueue": "LowerPriority" if in_share else "Never",
        }
        assert spec.get("stopPolicy") == ("Hold" if state == "DISABLED" else None)
        assert spec["queueingStrategy"] == "StrictFIFO"
        assert spec["namespaceSelector"] == {}


def test_the_mapping_on_known_numbers(varied_queue):
    """RESERVE lends nothing; LEND borrows nothing; 1000 % of 2 p4d = 20 instances = 160
    GPUs; -1 has no borrowingLimit; 0 % borrows nothing."""
    objects, _warnings = kueue_objects(varied_queue)
    quotas = {
        (cq["metadata"]["annotations"]["quota-governance.io/share"], flavor["name"]): flavor[
            "resources"
        ][0]
        for cq in objects["ClusterQueue"]
        for flavor in cq["spec"]["resourceGroups"][0]["flavors"]
    }
    assert quotas[("held", "ml.trn1.32xlarge")]["lendingLimit"] == 0
    assert quotas[("spare", "ml.g5.xlarge")] == {
        "name": "nvidia.com/gpu",
        "nominalQuota": 3,
        "borrowingLimit": 0,
    }
    assert quotas[("speech", "ml.p4d.24xlarge")] == {
        "name": "nvidia.com/gpu",
        "nominalQuota": 16,
        "borrowingLimit": 160,
    }
    assert "borrowingLimit" not in quotas[("vision/a", "ml.p4d.24xlarge")]
    assert quotas[("nlp", "ml.g5.xlarge")]["borrowingLimit"] == 0


def test_what_kueue_cannot_express_is_warned_in_the_file_and_to_the_caller(varied_queue):
    export = policy_export(format="kueue", queue=varied_queue)
    text = " ".join(export.warnings)
    for words in (
        "first-in first-out borrowing",
        "head-of-line order",
        "retry bounds",
        "default is 3",
        "runnable time limit",
        "stopPolicy Hold",
    ):
        assert words in text
    for warning in export.warnings:
        assert f"# warning: {warning}" in export.content


HAND_WRITTEN = """\
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata:
  name: a100
spec:
  nodeLabels:
    node.kubernetes.io/instance-type: ml.p4d.24xlarge
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata:
  name: team-a
spec:
  cohort: research-fleet
  resourceGroups:
  - coveredResources: [cpu, nvidia.com/gpu]
    flavors:
    - name: a100
      resources:
      - name: cpu
        nominalQuota: 96
      - name: nvidia.com/gpu
        nominalQuota: 16
        borrowingLimit: 8
  preemption:
    reclaimWithinCohort: Any
    withinClusterQueue: LowerPriority
"""


def test_a_hand_written_file_is_read_from_kueue_fields(admin, varied_queue):
    """No annotations: the flavor's node label names the type (8 GPUs each, as known
    here), 16 GPUs are 2 instances, borrowing 8 GPUs of 16 is 50 %."""
    TeamFactory(name="team-a-owners")
    policy = policy_file_read(raw=HAND_WRITTEN, source="hand.yaml", format="kueue")
    (queue,) = policy.queues
    assert queue.name == "research-fleet"
    (share,) = queue.shares
    assert share.doc == {
        "name": "team-a",
        "team": None,
        "strategy": "LEND_AND_BORROW",
        "in_share_preemption": True,
        "state": "ENABLED",
        "capacity_limits": {"ml.p4d.24xlarge": 2},
        "borrow_limit": 50,
    }


def test_a_new_share_without_a_team_is_refused_at_its_annotation(admin, varied_queue):
    policy = policy_file_read(
        raw=HAND_WRITTEN.replace("research-fleet", "research fleet"), source="hand.yaml"
    )
    with pytest.raises(PolicyFileError) as error:
        policy_plan(policy=policy)
    (problem,) = error.value.problems
    assert problem.field == "documents[1].metadata.annotations.quota-governance.io/team"
    assert problem.line == 11  # its metadata: the annotation is missing
    assert "name the team" in problem.message


def test_an_annotation_that_contradicts_the_limits_is_an_error_at_its_line(varied_queue):
    content = policy_export(format="kueue", queue=varied_queue).content
    content = content.replace(
        "quota-governance.io/strategy: LEND\n", "quota-governance.io/strategy: RESERVE\n"
    )
    with pytest.raises(PolicyFileError) as error:
        policy_file_read(raw=content, source="edited.yaml", format="kueue")
    (problem,) = error.value.problems
    assert (
        problem.field == "ClusterQueue research-fleet-spare: metadata.annotations."
        "quota-governance.io/strategy"
    )
    assert content.splitlines()[problem.line - 1].strip() == "quota-governance.io/strategy: RESERVE"
    assert "says RESERVE but the limits say LEND" in problem.message


@pytest.mark.parametrize(
    ("resource", "message"),
    [
        ("nominalQuota: 16\n                lendingLimit: 8", "partial lending"),
        ("nominalQuota: 16\n                borrowingLimit: 3", "not a whole number of instances"),
        ("nominalQuota: 0", "must be at least 1"),
        ("nominalQuota: lots", "must be a whole number"),
    ],
)
def test_what_our_shares_cannot_hold_is_refused(admin, resource, message):
    build_queue(admin, "small", {"ml.p4d.24xlarge": 4}, shares=[])
    text = textwrap.dedent(
        f"""\
        apiVersion: kueue.x-k8s.io/v1beta2
        kind: ClusterQueue
        metadata:
          name: small-a
          annotations:
            quota-governance.io/team: a
        spec:
          cohortName: small
          resourceGroups:
          - coveredResources: [nvidia.com/gpu]
            flavors:
            - name: ml.p4d.24xlarge
              resources:
              - name: nvidia.com/gpu
                {resource}
        """
    )
    with pytest.raises(PolicyFileError) as error:
        policy_file_read(raw=text, source="bad.yaml")
    assert any(message in problem.message for problem in error.value.problems)
    assert all(problem.line for problem in error.value.problems)


def test_lend_and_borrow_with_zero_percent_keeps_its_strategy(admin, varied_queue):
    content = policy_export(format="kueue", queue=varied_queue).content
    policy = policy_file_read(raw=content, source="again.yaml")
    nlp = next(share for share in policy.queues[0].shares if share.name == "nlp")
    assert (nlp.doc["strategy"], nlp.doc["borrow_limit"]) == (
        QuotaShare.Strategy.LEND_AND_BORROW,
        0,
    )


def _one_share_file(version: str, cohort_key: str) -> str:
    return textwrap.dedent(
        f"""\
        apiVersion: {version}
        kind: Cohort
        metadata:
          name: small
        ---
        apiVersion: {version}
        kind: ClusterQueue
        metadata:
          name: small-a
          annotations:
            quota-governance.io/team: a
        spec:
          {cohort_key}: small
          resourceGroups:
          - coveredResources: [nvidia.com/gpu]
            flavors:
            - name: ml.p4d.24xlarge
              resources:
              - name: nvidia.com/gpu
                nominalQuota: 16
                borrowingLimit: 0
        """
    )


@pytest.mark.parametrize(
    ("version", "cohort_key"),
    [("kueue.x-k8s.io/v1beta1", "cohort"), ("kueue.x-k8s.io/v1beta2", "cohortName")],
)
def test_both_api_versions_import_to_the_same_share(admin, version, cohort_key):
    build_queue(admin, "small", {"ml.p4d.24xlarge": 4}, shares=[])
    policy = policy_file_read(raw=_one_share_file(version, cohort_key), source="a.yaml")
    (queue,) = policy.queues
    assert queue.name == "small"
    (share,) = queue.shares
    assert (share.name, share.doc["team"], share.doc["strategy"]) == ("a", "a", "LEND")
    assert share.doc["capacity_limits"] == {"ml.p4d.24xlarge": 2}


@pytest.mark.parametrize(
    ("version", "cohort_key", "message"),
    [
        ("kueue.x-k8s.io/v1beta1", "cohortName", "v1beta2's field"),
        ("kueue.x-k8s.io/v1beta2", "cohort", "v1beta1's field"),
    ],
)
def test_each_version_names_its_cohort_with_its_own_key(admin, version, cohort_key, message):
    build_queue(admin, "small", {"ml.p4d.24xlarge": 4}, shares=[])
    with pytest.raises(PolicyFileError) as error:
        policy_file_read(raw=_one_share_file(version, cohort_key), source="a.yaml")
    (problem,) = error.value.problems
    assert problem.field == f"ClusterQueue small-a: spec.{cohort_key}"
    assert message in problem.message and problem.line == 13


def test_a_v1beta1_export_of_an_older_release_plans_no_changes(admin, varied_queue):
    """A file exported before the move to v1beta2 still reads back to the same policy."""
    content = policy_export(format="kueue", queue=varied_queue).content
    old = content.replace("kueue.x-k8s.io/v1beta2", "kueue.x-k8s.io/v1beta1").replace(
        "cohortName:", "cohort:"
    )
    assert "v1beta2" not in old
    for text in (content, old):
        plan = policy_plan(policy=policy_file_read(raw=text, source="again.yaml"))
        assert plan.is_empty, plan.changes
