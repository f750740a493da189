"""Free text is bounded in the services too (issue 28, point 1 follow-up): a caller that
skips the forms and serializers (a management command, a task, the demo) is refused an
over-long value with an error naming the field, and nothing is written."""

from __future__ import annotations

import io
from datetime import timedelta

import pytest
from django.core.management import CommandError, call_command

from core.bounds import MAX_ARTICLE_BODY, MAX_TEXT, check_lengths
from core.errors import InvalidInput
from fleet.models import JobQueue, Team, UrgencyDefinition, WorkloadClass
from governance.exceptions import services as exceptions
from governance.knowledge.services import ArticleData, article_create, article_update
from governance.models import (
    ArticleRevision,
    ExceptionEvent,
    ExceptionRequest,
    KnowledgeArticle,
    PolicyChange,
    PolicyProposal,
    WhatIfReview,
)
from governance.policy import membership
from governance.policy.services import (
    PolicyError,
    queue_create,
    share_data_from_document,
    share_document,
    share_update,
    urgency_save,
)
from governance.policy.workload_classes import workload_class_save
from governance.policy_code import policy_file_read
from governance.policy_code.plan import policy_apply
from governance.proposals import services as proposals
from governance.whatif import services as whatif
from tests.factories import UserFactory
from tests.governance.exceptions.conftest import scene  # noqa: F401 (a fixture)
from tests.governance.policy_code.conftest import varied_queue  # noqa: F401 (a fixture)
from tests.governance.policy_code.test_views import edited
from tests.governance.whatif.conftest import comparison, lend_and_borrow_qs2, run_now  # noqa: F401

pytestmark = pytest.mark.django_db

LONG = "x" * (MAX_TEXT + 1)
SAID = f"at most {MAX_TEXT:,} characters (this has {MAX_TEXT + 1:,})"


def refused(error, field: str, said: str = SAID) -> None:
    assert error.value.errors == {field: [said]}, error.value.errors


# The helper.


class _Obj:
    description = "d" * 11
    note = None


def test_the_helper_reads_a_mapping_or_an_object_and_names_every_field_at_fault():
    check_lengths({"note": "n" * 10, "reason": "r" * 10}, {"note": 10, "reason": 10})
    with pytest.raises(InvalidInput) as error:
        check_lengths({"note": "n" * 11, "reason": "r" * 12}, {"note": 10, "reason": 11})
    assert error.value.errors == {
        "note": ["at most 10 characters (this has 11)"],
        "reason": ["at most 11 characters (this has 12)"],
    }
    with pytest.raises(PolicyError) as error:
        check_lengths(_Obj(), {"description": 10, "note": 10, "missing": 10}, error=PolicyError)
    assert error.value.errors == {"description": ["at most 10 characters (this has 11)"]}
    check_lengths({"reason": "r" * MAX_TEXT}, ["reason"])  # the bound itself is allowed


# Policy writes (governance/policy): every PolicyWrite's reason, and the descriptions.


def test_a_policy_write_refuses_an_over_long_reason(aws_queue, admin, unchanged):
    share = aws_queue.shares.get(name="qs2")
    doc = share_document(share)
    doc["capacity_limits"] = {"ml.g5.xlarge": 2}
    with unchanged(), pytest.raises(PolicyError) as error:
        share_update(
            actor=admin,
            share=share,
            data=share_data_from_document(doc),
            reason=LONG,
            expected_version=share.version,
        )
    refused(error, "reason")
    # At the bound it applies.
    share_update(
        actor=admin,
        share=share,
        data=share_data_from_document(doc),
        reason="r" * MAX_TEXT,
        expected_version=share.version,
    )
    assert PolicyChange.objects.filter(reason="r" * MAX_TEXT).exists()


def test_under_review_an_over_long_reason_makes_no_proposal(aws_queue, admin, settings, unchanged):
    settings.POLICY_CHANGES_NEED_REVIEW = True
    share = aws_queue.shares.get(name="qs2")
    doc = share_document(share)
    doc["capacity_limits"] = {"ml.g5.xlarge": 2}
    with unchanged(), pytest.raises(PolicyError) as error:
        share_update(
            actor=admin,
            share=share,
            data=share_data_from_document(doc),
            reason=LONG,
            expected_version=share.version,
        )
    refused(error, "reason")
    assert not PolicyProposal.objects.exists()


def test_a_new_queue_refuses_an_over_long_description(aws_queue, admin, unchanged):
    itype = aws_queue.capacities.get().instance_type
    with unchanged(), pytest.raises(PolicyError) as error:
        queue_create(
            actor=admin,
            name="long-queue",
            capacity={itype.name: 1},
            reason="a new queue",
            description=LONG,
        )
    refused(error, "description")
    assert not JobQueue.objects.filter(name="long-queue").exists()


def test_a_team_refuses_an_over_long_description(admin, unchanged):
    with unchanged(), pytest.raises(PolicyError) as error:
        membership.team_save(
            actor=admin,
            data=membership.TeamData(name="long-team", description=LONG),
            reason="a new team",
        )
    refused(error, "description")
    assert not Team.objects.filter(name="long-team").exists()


def test_a_workload_class_refuses_an_over_long_description(admin):
    classes = WorkloadClass.objects.count()
    with pytest.raises(PolicyError) as error:
        workload_class_save(
            actor=admin,
            data={"name": "long-class", "description": LONG},
            reason="a new class",
        )
    refused(error, "description")
    assert WorkloadClass.objects.count() == classes


def test_an_urgency_refuses_over_long_meaning_and_examples(admin, unchanged):
    data = {
        "name": "Long",
        "meaning": LONG,
        "examples": LONG,
        "priority": 10,
        "max_window_hours": 4,
        "allowed_kinds": [],
    }
    with unchanged(), pytest.raises(PolicyError) as error:
        urgency_save(actor=admin, data=data, reason="a new urgency")
    assert error.value.errors == {"meaning": [SAID], "examples": [SAID]}
    assert not UrgencyDefinition.objects.filter(name="Long").exists()


def test_a_policy_file_apply_refuses_an_over_long_reason(admin, varied_queue, unchanged):  # noqa: F811
    policy = policy_file_read(raw=edited(varied_queue), source="nlp.yaml")
    with unchanged(), pytest.raises(PolicyError) as error:
        policy_apply(actor=admin, policy=policy, reason=LONG)
    # The history stores the reason with the file named, and that is what is bounded.
    stored = len(LONG) + len(" (applied from policy file nlp.yaml)")
    refused(error, "reason", f"at most {MAX_TEXT:,} characters (this has {stored:,})")


def test_the_policy_command_refuses_an_over_long_reason_naming_it(
    admin,
    varied_queue,  # noqa: F811
    tmp_path,
    unchanged,
):
    path = tmp_path / "nlp.yaml"
    path.write_text(edited(varied_queue))
    with unchanged(), pytest.raises(CommandError, match=r"^--reason: at most 10,000 characters"):
        call_command(
            "policy",
            "apply",
            str(path),
            "--user",
            "admin-user",
            "--reason",
            LONG,
            stdout=io.StringIO(),
            stderr=io.StringIO(),
        )


# Exception requests (governance/exceptions).


def test_filing_or_editing_a_request_refuses_an_over_long_justification(scene, unchanged):  # noqa: F811
    with unchanged(), pytest.raises(InvalidInput) as error:
        scene.file(scene.capacity(justification=LONG))
    refused(error, "justification")
    draft = scene.file(submit=False)
    with unchanged(), pytest.raises(InvalidInput) as error:
        exceptions.exception_request_update(
            actor=scene.lead, request=draft, data=scene.capacity(justification=LONG), now=scene.now
        )
    refused(error, "justification")


@pytest.mark.parametrize("step", ["approve", "deny"])
def test_a_decision_refuses_an_over_long_note(scene, unchanged, step):  # noqa: F811
    request = scene.file()
    events = ExceptionEvent.objects.count()
    decide = getattr(exceptions, f"exception_request_{step}")
    with unchanged(), pytest.raises(InvalidInput) as error:
        decide(actor=scene.owner, request=request, note=LONG, now=scene.now)
    refused(error, "note")
    assert ExceptionRequest.objects.get(pk=request.pk).state == ExceptionRequest.State.SUBMITTED
    assert ExceptionEvent.objects.count() == events


def test_revoking_refuses_an_over_long_reason(scene, unchanged):  # noqa: F811
    request = scene.file()
    exceptions.exception_request_approve(actor=scene.owner, request=request, now=scene.now)
    request.refresh_from_db()
    assert request.state == ExceptionRequest.State.ACTIVE
    events = ExceptionEvent.objects.count()
    with unchanged(), pytest.raises(InvalidInput) as error:
        exceptions.exception_request_revoke(
            actor=scene.owner, request=request, reason=LONG, now=scene.now + timedelta(minutes=1)
        )
    refused(error, "reason")
    assert ExceptionEvent.objects.count() == events


# Knowledge articles (governance/knowledge).


def test_an_article_refuses_an_over_long_body_or_reason(admin, unchanged):
    body = "b" * (MAX_ARTICLE_BODY + 1)
    with unchanged(), pytest.raises(InvalidInput) as error:
        article_create(actor=admin, data=ArticleData(title="Long", body=body), reason=LONG)
    assert error.value.errors == {
        "body": [f"at most {MAX_ARTICLE_BODY:,} characters (this has {MAX_ARTICLE_BODY + 1:,})"],
        "reason": [SAID],
    }
    article = article_create(actor=admin, data=ArticleData(title="Short", body="fine"))
    revisions = ArticleRevision.objects.count()
    with unchanged(), pytest.raises(InvalidInput) as error:
        article_update(
            actor=admin,
            article=article,
            data=ArticleData(title="Short", body="edited"),
            expected_version=article.version,
            reason=LONG,
        )
    refused(error, "reason")
    assert KnowledgeArticle.objects.get(pk=article.pk).body == "fine"
    assert ArticleRevision.objects.count() == revisions


# Policy proposals (governance/proposals): the reviewer's note.


@pytest.mark.parametrize("step", ["approve", "reject"])
def test_a_proposal_review_refuses_an_over_long_note(aws_queue, admin, settings, step):
    settings.POLICY_CHANGES_NEED_REVIEW = True
    share = aws_queue.shares.get(name="qs2")
    doc = share_document(share)
    doc["capacity_limits"] = {"ml.g5.xlarge": 2}
    proposal = share_update(
        actor=admin,
        share=share,
        data=share_data_from_document(doc),
        reason="bursts",
        expected_version=share.version,
    ).proposal
    reviewer = UserFactory(username="second-admin", roles=["admins"])
    changes = PolicyChange.objects.count()
    with pytest.raises(InvalidInput) as error:
        getattr(proposals, f"proposal_{step}")(actor=reviewer, proposal=proposal, note=LONG)
    refused(error, "note")
    proposal.refresh_from_db()
    assert proposal.is_pending and proposal.review_note == ""
    assert PolicyChange.objects.count() == changes


# What-if comparisons (governance/whatif).


def test_saving_or_applying_a_comparison_refuses_over_long_text(comparison, admin):  # noqa: F811
    with pytest.raises(InvalidInput) as error:
        whatif.comparison_save(actor=admin, comparison=comparison, title="Kept", note=LONG)
    refused(error, "note")
    comparison.refresh_from_db()
    assert (comparison.saved, comparison.note) == (False, "")
    changes = PolicyChange.objects.count()
    with pytest.raises(InvalidInput) as error:
        whatif.comparison_apply(actor=admin, comparison=comparison, reason=LONG)
    refused(error, "reason")
    assert PolicyChange.objects.count() == changes


def test_proposing_or_reviewing_a_comparison_refuses_an_over_long_note(
    comparison,  # noqa: F811
    admin,
    settings,
):
    settings.POLICY_CHANGES_NEED_REVIEW = True
    lend_and_borrow_qs2(comparison)
    run_now(comparison)
    with pytest.raises(InvalidInput) as error:
        whatif.comparison_propose(actor=admin, comparison=comparison, note=LONG)
    refused(error, "note")
    comparison.refresh_from_db()
    assert comparison.review_state != comparison.Review.PROPOSED
    assert not WhatIfReview.objects.exists()

    whatif.comparison_propose(actor=admin, comparison=comparison)
    other = UserFactory(username="second-admin", roles=["admins"])
    for approve in (True, False):
        with pytest.raises(InvalidInput) as error:
            whatif.comparison_review(actor=other, comparison=comparison, approve=approve, note=LONG)
        refused(error, "note")
    comparison.refresh_from_db()
    assert comparison.review_state == comparison.Review.PROPOSED
    assert WhatIfReview.objects.count() == 1
