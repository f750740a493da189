"""Workload classes in policy files: the native format carries every class and each
share's default class; the plan diffs and checks them with the class editor's rules,
naming the file's field; the apply writes them through the class services."""

import json
import re

import pytest
import yaml
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from fleet.models import QuotaShare, WorkloadClass
from governance.models import PolicyChange
from governance.policy.services import changed_fields, share_data_from_document, share_update
from governance.policy.workload_classes import MAX_CONTRACT_SECONDS, workload_class_save
from governance.policy_code import IMPORT_FORMATS, native, policy_export, policy_file_read
from governance.policy_code.live import history_document
from governance.policy_code.plan import PlanOutdated, policy_apply, policy_plan
from governance.policy_code.report import plan_document, plan_lines
from governance.policy_code.source import PolicyFileError
from governance.proposals.services import proposal_approve
from tests.factories import UserFactory, job_definition
from tests.governance.policy_code.conftest import REASON, build_queue, empty_database

pytestmark = pytest.mark.django_db

INTERACTIVE = {
    "name": "interactive",
    "description": "Notebooks and short experiments.",
    "min_runtime_reclaim": 600,
    "min_runtime_preempt": 0,
    "grace": 120,
    "checkpoint_on_notice": 60,
}
BATCH = {
    "name": "batch",
    "description": "",
    "min_runtime_reclaim": 0,
    "min_runtime_preempt": 0,
    "grace": 0,
    "checkpoint_on_notice": None,
}


def set_default(admin, share: QuotaShare, class_name: str | None) -> None:
    share = QuotaShare.objects.get(pk=share.pk)
    share_update(
        actor=admin,
        share=share,
        data=share_data_from_document(
            {**history_document(share), "default_workload_class": class_name}
        ),
        reason=REASON,
        expected_version=share.version,
    )


@pytest.fixture
def classed_queue(admin, varied_queue):
    """The varied queue with two classes; its unlimited borrower 'vision/a' defaults to
    'interactive' (so every lender of ml.g5.xlarge waits up to 600 + 120 s)."""
    for data in (INTERACTIVE, BATCH):
        workload_class_save(actor=admin, data=data, reason=REASON)
    set_default(admin, varied_queue.shares.get(name="vision/a"), "interactive")
    return varied_queue


# What the file's short entry {"name": "overnight", "min_runtime_reclaim": 3600} means.
OVERNIGHT = {
    "name": "overnight",
    "description": "",
    "min_runtime_reclaim": 3600,
    "min_runtime_preempt": 0,
    "grace": 0,
    "checkpoint_on_notice": None,
}


def exported(queue=None) -> dict:
    return yaml.safe_load(policy_export(format="native", queue=queue).content)


def share_entry(data: dict, name: str) -> dict:
    return next(share for share in data["queues"][0]["shares"] if share["name"] == name)


def class_entry(data: dict, name: str) -> dict:
    return next(entry for entry in data["workload_classes"] if entry["name"] == name)


def read(data: dict):
    return policy_file_read(raw=native.dump(data), source="classes.yaml")


def problems_of(admin, content: str):
    count = PolicyChange.objects.count()
    classes = list(WorkloadClass.objects.values_list("name", "version"))
    with pytest.raises(PolicyFileError) as error:
        policy_apply(
            reason="test", actor=admin, policy=policy_file_read(raw=content, source="bad.yaml")
        )
    assert PolicyChange.objects.count() == count
    assert list(WorkloadClass.objects.values_list("name", "version")) == classes
    return error.value.problems


def line_of(content: str, needle: str, *, after: str = "") -> int:
    start = content.index(after) if after else 0
    return content.count("\n", 0, content.index(needle, start)) + 1


# Export and round trip.


def test_the_export_writes_every_class_and_each_shares_default(classed_queue):
    data = exported(classed_queue)
    assert data["workload_classes"] == [BATCH, INTERACTIVE]
    assert share_entry(data, "vision/a")["workload_class"] == "interactive"
    assert share_entry(data, "nlp")["workload_class"] is None


def test_classes_and_defaults_survive_export_and_import_into_an_empty_database(
    admin, classed_queue
):
    first = policy_export(format="native", queue=classed_queue).content
    empty_database()
    assert not WorkloadClass.objects.exists()
    policy_apply(
        reason="test", actor=admin, policy=policy_file_read(raw=first, source="policy.yaml")
    )
    assert policy_export(format="native").content == first
    interactive = WorkloadClass.objects.get(name="interactive")
    assert (interactive.grace, interactive.checkpoint_on_notice) == (120, 60)
    assert QuotaShare.objects.get(name="vision/a").default_workload_class == interactive
    created = PolicyChange.objects.filter(target="workload_class")
    assert sorted(created.values_list("object_repr", "cause")) == [
        ("batch", "import"),
        ("interactive", "import"),
    ]


def test_an_exported_file_applied_again_is_a_plan_with_no_change(admin, classed_queue):
    for format in IMPORT_FORMATS:
        content = policy_export(format=format, queue=classed_queue).content
        policy = policy_file_read(raw=content, source="same", format=format)
        assert policy_plan(policy=policy).changes == [], format
        count = PolicyChange.objects.count()
        policy_apply(reason="test", actor=admin, policy=policy)
        assert PolicyChange.objects.count() == count, format
    # Formats without classes leave the defaults as they are.
    assert QuotaShare.objects.get(name="vision/a").default_workload_class.name == "interactive"


# Plan and apply.


def quarterly(queue) -> dict:
    """Interactive gets more notice, 'overnight' is new and nlp defaults to it, 'batch'
    goes."""
    data = exported(queue)
    class_entry(data, "interactive")["grace"] = 300
    data["workload_classes"] = [c for c in data["workload_classes"] if c["name"] != "batch"]
    data["workload_classes"].append({"name": "overnight", "min_runtime_reclaim": 3600})
    share_entry(data, "nlp")["workload_class"] = "overnight"
    return data


def test_the_plan_shows_classes_added_changed_and_deleted_and_the_defaults_that_move(
    admin, classed_queue
):
    plan = policy_plan(policy=read(quarterly(classed_queue)))
    planned = {(c.target, c.action, c.name): c.fields for c in plan.changes}
    assert planned == {
        ("workload_class", "changed", "interactive"): [("grace", 120, 300)],
        ("workload_class", "added", "overnight"): changed_fields(None, OVERNIGHT),
        ("workload_class", "deleted", "batch"): changed_fields(BATCH, None),
        ("share", "changed", "nlp"): [("default_workload_class", None, "overnight")],
    }
    assert plan.class_writes[1].after == OVERNIGHT
    lines = plan_lines(plan)
    assert "workload class interactive: changed" in lines
    assert "    grace: 120 -> 300" in lines
    assert "workload class batch: deleted" in lines
    document = plan_document(plan)
    assert [(c["action"], c["name"]) for c in document["workload_classes"]] == [
        ("changed", "interactive"),
        ("added", "overnight"),
        ("deleted", "batch"),
    ]
    assert document["versions"]["workload_classes"] == {
        "interactive": 1,
        "overnight": None,
        "batch": 1,
    }


def test_the_apply_writes_them_through_the_class_services_as_the_plan_said(admin, classed_queue):
    policy = read(quarterly(classed_queue))
    planned = {(c.target, c.name): c.fields for c in policy_plan(policy=policy).changes}
    result = policy_apply(actor=admin, policy=policy, reason="Quarterly review")
    recorded = {
        (change.target, change.object_repr.rsplit(" / ", 1)[-1]): changed_fields(
            change.before, change.after
        )
        for change in result.changes
    }
    assert recorded == planned
    assert {change.cause for change in result.changes} == {"import"}
    assert all(
        change.reason == "Quarterly review (applied from policy file classes.yaml)"
        for change in result.changes
    )
    assert not WorkloadClass.objects.filter(name="batch").exists()
    assert WorkloadClass.objects.get(name="interactive").grace == 300
    assert QuotaShare.objects.get(name="nlp").default_workload_class.name == "overnight"
    assert policy_plan(policy=policy).changes == []


def test_a_file_without_the_section_leaves_the_classes_and_says_so(admin, classed_queue):
    data = exported(classed_queue)
    del data["workload_classes"]
    share_entry(data, "nlp")["workload_class"] = "batch"
    plan = policy_plan(policy=read(data))
    assert [(c.target, c.name) for c in plan.changes] == [("share", "nlp")]
    assert (
        "the file has no workload_classes section: the workload classes stay as they are"
        in plan.warnings
    )
    policy_apply(reason="test", actor=admin, policy=read(data))
    assert sorted(WorkloadClass.objects.values_list("name", flat=True)) == ["batch", "interactive"]
    assert QuotaShare.objects.get(name="nlp").default_workload_class.name == "batch"


def test_a_share_without_workload_class_keeps_its_own_and_null_clears_it(admin, classed_queue):
    data = exported(classed_queue)
    del share_entry(data, "vision/a")["workload_class"]
    assert policy_plan(policy=read(data)).changes == []
    share_entry(data, "vision/a")["workload_class"] = None
    (change,) = policy_plan(policy=read(data)).changes
    assert change.fields == [("default_workload_class", "interactive", None)]


def test_the_impact_says_what_a_class_change_does_to_the_lenders_wait(admin, classed_queue):
    other = build_queue(
        admin,
        "inference",
        {"ml.g5.xlarge": 2},
        shares=[
            ("serving", "serving", "LEND", None, False, "ENABLED", {"ml.g5.xlarge": 1}),
            ("burst", "serving", "LEND_AND_BORROW", -1, False, "ENABLED", {"ml.g5.xlarge": 1}),
        ],
    )
    set_default(admin, other.shares.get(name="burst"), "interactive")
    data = exported(classed_queue)
    class_entry(data, "interactive")["grace"] = 300
    plan = policy_plan(policy=read(data))
    (queue_plan,) = plan.queues
    texts = [line.text for line in queue_plan.impact]
    assert (
        "nlp's worst-case time to get its ml.g5.xlarge back: 12 m 00 s (720 s) → 15 m 00 s (900 s)"
        in texts
    ), texts
    assert [line.text for line in plan.other_impact] == [
        "inference: serving's worst-case time to get its ml.g5.xlarge back: "
        "12 m 00 s (720 s) → 15 m 00 s (900 s)"
    ]


# Errors name the field.


@pytest.mark.parametrize(
    ("edit", "field", "message"),
    [
        (
            {"grace": -1},
            "workload_classes[1].grace",
            f"must be a whole number of seconds from 0 to {MAX_CONTRACT_SECONDS}",
        ),
        (
            {"min_runtime_reclaim": "ten minutes"},
            "workload_classes[1].min_runtime_reclaim",
            f"must be a whole number of seconds from 0 to {MAX_CONTRACT_SECONDS}",
        ),
        (
            {"min_runtime_preempt": MAX_CONTRACT_SECONDS + 1},
            "workload_classes[1].min_runtime_preempt",
            f"must be a whole number of seconds from 0 to {MAX_CONTRACT_SECONDS}",
        ),
        (
            {"grace": True},
            "workload_classes[1].grace",
            f"must be a whole number of seconds from 0 to {MAX_CONTRACT_SECONDS}",
        ),
        (
            {"checkpoint_on_notice": 0},
            "workload_classes[1].checkpoint_on_notice",
            f"must be a whole number of seconds from 1 to {MAX_CONTRACT_SECONDS}, or empty "
            "(its jobs do not checkpoint on notice)",
        ),
        (
            {"grace": 0},
            "workload_classes[1].checkpoint_on_notice",
            "needs a grace: with grace 0 no notice is given, so leave it empty or give a grace",
        ),
        ({"name": "x" * 101}, "workload_classes[1].name", "at most 100 characters"),
        ({"name": ["interactive"]}, "workload_classes[1].name", "must be a non-empty text"),
        (
            {"notice": 30},
            "workload_classes[1].notice",
            "unknown field; expected checkpoint_on_notice, description, grace, "
            "min_runtime_preempt, min_runtime_reclaim, name",
        ),
    ],
)
def test_a_bad_class_is_refused_at_its_field_and_line(admin, classed_queue, edit, field, message):
    data = exported(classed_queue)
    class_entry(data, "interactive").update(edit)
    content = native.dump(data)
    problems = problems_of(admin, content)
    assert [(p.field, p.message) for p in problems if p.field == field] == [(field, message)]
    (problem,) = [p for p in problems if p.field == field]
    if "name" not in edit:
        key = field.rsplit(".", 1)[1]
        assert problem.line == line_of(content, f"  {key}: ", after="- name: interactive")


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("nightly", "unknown workload class 'nightly': define it under workload_classes"),
        (5, "must be the name of a workload class, or null for none"),
        ("", "must be the name of a workload class, or null for none"),
    ],
)
def test_a_share_naming_no_class_is_refused_at_its_field(admin, classed_queue, value, message):
    data = exported(classed_queue)
    share_entry(data, "nlp")["workload_class"] = value
    content = native.dump(data)
    (problem,) = problems_of(admin, content)
    assert (problem.field, problem.message) == ("queues[0].shares[1].workload_class", message)
    assert problem.line == line_of(content, "workload_class:", after="  - name: nlp")


def test_the_section_must_be_a_list_of_uniquely_named_classes(admin, classed_queue):
    data = exported(classed_queue)
    data["workload_classes"].append(dict(BATCH))
    problems = problems_of(admin, native.dump(data))
    assert [(p.field, p.message) for p in problems] == [
        ("workload_classes[2].name", "workload class 'batch' is listed twice")
    ]
    data["workload_classes"] = {"interactive": INTERACTIVE}
    problems = problems_of(admin, native.dump(data))
    assert [(p.field, p.message) for p in problems] == [("workload_classes", "must be a list")]


def test_a_nul_byte_in_a_class_is_refused_before_anything_else(admin, classed_queue):
    data = exported(classed_queue)
    class_entry(data, "batch")["description"] = "night\x00ly"
    content = native.dump(data)
    (problem,) = problems_of(admin, content)
    assert problem.field == "workload_classes[0].description"
    assert "control characters (\\x00 at character 6)" in problem.message


# Deleting a class still in use.


def test_deleting_a_class_a_share_of_the_file_still_names_is_refused(admin, classed_queue):
    data = exported(classed_queue)
    data["workload_classes"] = [c for c in data["workload_classes"] if c["name"] != "interactive"]
    (problem,) = problems_of(admin, native.dump(data))
    assert problem.field == "queues[0].shares[0].workload_class"
    assert problem.message == (
        "workload class 'interactive' is not under workload_classes, so this file deletes "
        "it: keep it there, or choose another class"
    )


def test_deleting_a_class_used_outside_the_file_is_refused_naming_its_users(admin, classed_queue):
    other = build_queue(
        admin,
        "inference",
        {"ml.g5.xlarge": 2},
        shares=[("serving", "serving", "LEND", None, False, "ENABLED", {"ml.g5.xlarge": 1})],
    )
    set_default(admin, other.shares.get(name="serving"), "batch")
    batch = WorkloadClass.objects.get(name="batch")
    job_definition(classed_queue, name="finetune", workload_class=batch)
    data = exported(classed_queue)
    data["workload_classes"] = [c for c in data["workload_classes"] if c["name"] != "batch"]
    content = native.dump(data)
    (problem,) = problems_of(admin, content)
    assert problem.field == "workload_classes"
    assert problem.line == line_of(content, "workload_classes:")
    assert problem.message == (
        "workload class 'batch' is not in the file, so it would be deleted, but it is in use "
        "(the default of share inference / serving; job definition finetune:1): keep it "
        "in the file, or choose another class there first"
    )


def test_a_class_the_file_stops_using_may_go_in_the_same_file(admin, classed_queue):
    data = exported(classed_queue)
    data["workload_classes"] = [c for c in data["workload_classes"] if c["name"] != "interactive"]
    share_entry(data, "vision/a")["workload_class"] = "batch"
    result = policy_apply(reason="test", actor=admin, policy=read(data))
    assert [(c.target, c.object_repr, c.after is None) for c in result.changes] == [
        ("share", "research fleet / vision/a", False),
        ("workload_class", "interactive", True),
    ]
    assert list(WorkloadClass.objects.values_list("name", flat=True)) == ["batch"]


# Review.


def test_with_review_each_class_change_is_a_proposal_another_admin_approves(
    admin, classed_queue, settings
):
    settings.POLICY_CHANGES_NEED_REVIEW = True
    data = exported(classed_queue)
    class_entry(data, "interactive")["grace"] = 300
    share_entry(data, "nlp")["workload_class"] = "batch"
    data["workload_classes"] = [c for c in data["workload_classes"] if c["name"] != "batch"] + [
        dict(BATCH)
    ]
    count = PolicyChange.objects.count()
    result = policy_apply(actor=admin, policy=read(data), reason="More notice")
    assert result.changes == []
    assert sorted(p.kind for p in result.proposals) == ["class_update", "share_update"]
    assert PolicyChange.objects.count() == count
    assert WorkloadClass.objects.get(name="interactive").grace == 120

    reviewer = UserFactory(username="second-admin", roles=["admins"])
    for proposal in result.proposals:
        proposal_approve(actor=reviewer, proposal=proposal, note="Fine")
    assert WorkloadClass.objects.get(name="interactive").grace == 300
    assert QuotaShare.objects.get(name="nlp").default_workload_class.name == "batch"
    assert policy_plan(policy=read(data)).changes == []


def test_with_review_deleting_an_unused_class_is_a_proposal_too(admin, classed_queue, settings):
    settings.POLICY_CHANGES_NEED_REVIEW = True
    data = exported(classed_queue)
    data["workload_classes"] = [c for c in data["workload_classes"] if c["name"] != "batch"]
    (proposal,) = policy_apply(actor=admin, policy=read(data), reason="Unused").proposals
    assert proposal.kind == "class_delete"
    assert WorkloadClass.objects.filter(name="batch").exists()
    reviewer = UserFactory(username="second-admin", roles=["admins"])
    proposal_approve(actor=reviewer, proposal=proposal, note="Fine")
    assert not WorkloadClass.objects.filter(name="batch").exists()
    change = PolicyChange.objects.latest("id")
    assert (change.target, change.object_repr, change.after) == ("workload_class", "batch", None)


@pytest.mark.parametrize(
    ("edit", "blocker"),
    [
        (
            lambda data: (
                data["workload_classes"].append({"name": "overnight"}),
                share_entry(data, "nlp").update(workload_class="overnight"),
            ),
            "share 'nlp' of queue 'research fleet' names workload class 'overnight', which it "
            "creates: propose the class first",
        ),
        (
            lambda data: (
                data.update(
                    workload_classes=[
                        c for c in data["workload_classes"] if c["name"] != "interactive"
                    ]
                ),
                share_entry(data, "vision/a").update(workload_class=None),
            ),
            "it deletes workload class 'interactive', which shares use until their changes "
            "are approved: propose the share changes first, then the deletion",
        ),
    ],
)
def test_with_review_changes_that_depend_on_each_other_are_refused(
    admin, classed_queue, settings, edit, blocker
):
    settings.POLICY_CHANGES_NEED_REVIEW = True
    data = exported(classed_queue)
    edit(data)
    (problem,) = problems_of(admin, native.dump(data))
    assert problem.message == (
        f"policy changes need review, one proposal per change, but {blocker}"
    )


def test_a_class_changed_after_the_plan_stops_the_apply(admin, classed_queue):
    data = exported(classed_queue)
    class_entry(data, "interactive")["grace"] = 300
    policy = read(data)
    versions = policy_plan(policy=policy).versions()
    interactive = WorkloadClass.objects.get(name="interactive")
    workload_class_save(
        actor=admin,
        data={**INTERACTIVE, "grace": 200},
        reason="Someone else, meanwhile",
        workload_class=interactive,
        expected_version=interactive.version,
    )
    with pytest.raises(PlanOutdated, match="workload class 'interactive' changed"):
        policy_apply(reason="test", actor=admin, policy=policy, expected_versions=versions)
    assert WorkloadClass.objects.get(name="interactive").grace == 200


# AWS Batch has no classes: a tag carries each share's default, as it carries the ceiling.


def aws_body(queue) -> dict:
    return json.loads(policy_export(format="aws-batch", queue=queue).content)


def test_the_aws_export_tags_each_shares_default_class_and_reads_it_back(admin, classed_queue):
    body = aws_body(classed_queue)
    tags = {
        item["tags"].get("share-name", item["quotaShareName"]): item["tags"]
        for item in body["quotaShares"]
    }
    assert tags["vision/a"]["workload-class"] == "interactive"
    assert "workload-class" not in tags["nlp"]
    nlp = next(item for item in body["quotaShares"] if item["quotaShareName"] == "nlp")
    nlp["tags"]["workload-class"] = "batch"
    policy = policy_file_read(raw=json.dumps(body), source="aws.json")
    plan = policy_plan(policy=policy)
    assert [(c.name, c.fields) for c in plan.changes] == [
        ("nlp", [("default_workload_class", None, "batch")])
    ]
    assert "workload_classes section" not in " ".join(plan.warnings)
    policy_apply(reason="test", actor=admin, policy=policy)
    assert QuotaShare.objects.get(name="nlp").default_workload_class.name == "batch"


def test_an_aws_tag_naming_no_class_is_refused_at_the_tag(admin, classed_queue):
    body = aws_body(classed_queue)
    nlp = next(item for item in body["quotaShares"] if item["quotaShareName"] == "nlp")
    nlp["tags"]["workload-class"] = "nightly"
    with pytest.raises(PolicyFileError) as error:
        policy_plan(policy=policy_file_read(raw=json.dumps(body), source="aws.json"))
    (problem,) = error.value.problems
    assert (problem.field, problem.message) == (
        "quotaShares[1].tags.workload-class",
        "unknown workload class 'nightly'",
    )


def test_the_plan_page_lists_class_changes_and_applies_them(client, admin, classed_queue):
    client.force_login(admin)
    data = exported(classed_queue)
    class_entry(data, "interactive")["grace"] = 300
    response = client.post(
        reverse("queue-policy-plan", args=[classed_queue.pk]),
        {"file": SimpleUploadedFile("classes.yaml", native.dump(data).encode())},
    )
    page = response.content.decode()
    assert "workload class interactive: changed" in page
    assert "nlp&#x27;s worst-case time to get its ml.g5.xlarge back" in page
    payload = re.search(r'name="payload" value="([^"]+)"', page).group(1)
    response = client.post(
        reverse("queue-policy-apply", args=[classed_queue.pk]),
        {"payload": payload, "reason": "More notice"},
    )
    assert response.status_code == 302
    assert WorkloadClass.objects.get(name="interactive").grace == 300


def test_the_kueue_export_says_it_cannot_carry_the_default_classes(classed_queue):
    export = policy_export(format="kueue", queue=classed_queue)
    assert (
        "research fleet: the shares' default workload classes (vision/a → interactive) and "
        "their interruption contracts have no Kueue field and are not exported; applying "
        "this file keeps them"
    ) in export.warnings
