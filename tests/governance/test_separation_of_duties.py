"""Separation of duties: nobody decides for their own team; with review, no policy write
applies without another admin; priorities above a share's ceiling need an owner's
decision or an urgency naming the team; decision records are append-only and private to
who may see the request; article editors and links follow the same rules."""

from datetime import timedelta

import pytest
from django.utils import timezone

from core import rules
from core.errors import InvalidInput, WrongState
from fleet.models import InstanceType, QuotaShare
from fleet.selectors import share_document
from governance.exceptions import services as exception_services
from governance.knowledge.selectors import article_search
from governance.knowledge.services import (
    ArticleData,
    article_create,
    article_delete,
    article_update,
)
from governance.models import (
    ExceptionOwner,
    ExceptionRequest,
    KnowledgeArticle,
    PolicyChange,
    PolicyProposal,
)
from governance.policy.services import (
    PolicyError,
    policy_change_revert,
    queue_set_capacity,
    share_data_from_document,
    share_update,
    urgency_save,
)
from governance.proposals import services as proposals
from scheduler.services.priorities import job_priority_refusal
from tests.factories import JobFactory, UrgencyDefinitionFactory, UserFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def team_a(aws_queue):
    return aws_queue.shares.get(name="qs1").team


@pytest.fixture
def lead_owner(aws_queue, team_a):
    """A lead of team A who is also an exception owner of the queue."""
    user = UserFactory(username="lead-owner", roles=["team_leads", "exception_owners"])
    team_a.leads.add(user)
    ExceptionOwner.objects.create(user=user, queue=aws_queue)
    return user


@pytest.fixture
def owner(aws_queue):
    user = UserFactory(username="plain-owner", roles=["exception_owners"])
    ExceptionOwner.objects.create(user=user, queue=aws_queue)
    return user


@pytest.fixture
def lead(team_a):
    user = UserFactory(username="lead-a", roles=["team_leads"])
    team_a.leads.add(user)
    return user


@pytest.fixture
def filed(aws_queue, lead, team_a):
    now = timezone.now()
    return exception_services.exception_request_create(
        actor=lead,
        data=exception_services.RequestData(
            kind=ExceptionRequest.Kind.TEMPORARY_CAPACITY,
            team=team_a,
            urgency=UrgencyDefinitionFactory(name="deadline"),
            justification="Launch fine-tune",
            window_start=now + timedelta(hours=1),
            window_end=now + timedelta(hours=5),
            share=aws_queue.shares.get(name="qs1"),
            instance_type=InstanceType.objects.get(name="ml.g5.xlarge"),
            extra_instances=1,
        ),
        submit=True,
    )


# Nobody decides for a team they lead or belong to.


def test_a_co_lead_who_owns_the_queue_cannot_decide_for_the_team(filed, lead_owner):
    with pytest.raises(rules.Refused, match="you lead team team-qs1"):
        exception_services.exception_request_approve(actor=lead_owner, request=filed)
    filed.refresh_from_db()
    assert filed.state == ExceptionRequest.State.SUBMITTED


def test_a_team_member_who_owns_the_queue_cannot_decide(filed, owner, team_a):
    team_a.members.add(owner)
    with pytest.raises(rules.Refused, match="you belong to team team-qs1"):
        exception_services.exception_request_deny(actor=owner, request=filed, note="no")


def test_an_admin_of_the_team_cannot_decide_either(filed, admin, team_a):
    team_a.members.add(admin)
    with pytest.raises(rules.Refused, match="belong to team"):
        exception_services.exception_request_approve(actor=admin, request=filed)


def test_an_owner_outside_the_team_decides(filed, owner, lead_owner):
    exception_services.exception_request_approve(actor=owner, request=filed, note="ok")
    assert filed.state == ExceptionRequest.State.APPROVED


def test_the_decision_queue_and_notices_leave_out_who_may_not_decide(filed, owner, lead_owner):
    from governance.exceptions.selectors import decision_queue, request_owners

    assert list(decision_queue(user=lead_owner)) == []
    assert list(decision_queue(user=owner)) == [filed]
    assert request_owners(request=filed) == [owner]


# Policy writes wait for another admin's review.


@pytest.fixture
def review(settings):
    settings.POLICY_CHANGES_NEED_REVIEW = True


@pytest.fixture
def second_admin():
    return UserFactory(username="second-admin", roles=["admins"])


def _more_for(share, instances=2):
    doc = share_document(share)
    doc["capacity_limits"] = {"ml.g5.xlarge": instances}
    return share_data_from_document(doc)


def test_a_share_edit_becomes_a_proposal_and_applies_when_another_admin_approves(
    review, aws_queue, admin, second_admin
):
    share = aws_queue.shares.get(name="qs2")
    changes = PolicyChange.objects.count()
    write = share_update(
        actor=admin, share=share, data=_more_for(share), reason="bursts", expected_version=1
    )
    proposal = write.proposal
    assert proposal.is_pending and (write.applied, write.entry) == (None, None)
    assert PolicyChange.objects.count() == changes
    assert share_document(QuotaShare.objects.get(pk=share.pk))["capacity_limits"] == {
        "ml.g5.xlarge": 1
    }
    assert proposal.payload["after"]["capacity_limits"] == {"ml.g5.xlarge": 2}

    with pytest.raises(rules.Refused, match="another admin must review"):
        proposals.proposal_approve(actor=admin, proposal=proposal)
    approved = proposals.proposal_approve(actor=second_admin, proposal=proposal, note="ok")

    assert approved.state == PolicyProposal.State.APPLIED
    change = approved.applied_change
    assert change.actor == admin and change.after["capacity_limits"] == {"ml.g5.xlarge": 2}
    with pytest.raises(WrongState, match="already approved"):
        proposals.proposal_approve(actor=second_admin, proposal=proposal)


def test_a_proposal_checks_the_rules_when_proposed(review, aws_queue, admin):
    share = aws_queue.shares.get(name="qs2")
    with pytest.raises(PolicyError) as caught:
        share_update(
            actor=admin, share=share, data=_more_for(share, 99), reason="r", expected_version=1
        )
    assert "capacity_limits.ml.g5.xlarge" in caught.value.errors
    assert not PolicyProposal.objects.exists()


def test_capacity_urgency_and_revert_are_proposals_too(review, aws_queue, admin, second_admin):
    capacity = queue_set_capacity(
        actor=admin, queue=aws_queue, capacity={"ml.g5.xlarge": 4}, reason="r", expected_version=1
    ).proposal
    urgency = urgency_save(
        actor=admin,
        data={"name": "Launch", "meaning": "m", "priority": 5, "max_window_hours": 2},
        reason="r",
    ).proposal
    assert {capacity.kind, urgency.kind} == {"queue_capacity", "urgency_create"}
    proposals.proposal_approve(actor=second_admin, proposal=capacity)
    change = PolicyChange.objects.get(target=PolicyChange.Target.QUEUE)
    revert = policy_change_revert(actor=second_admin, change=change, reason="too much").proposal
    assert revert.reverts == change
    proposals.proposal_approve(actor=admin, proposal=revert)
    aws_queue.refresh_from_db()
    assert aws_queue.capacities.get().instances == 3


def test_a_stale_proposal_is_refused_on_approval(review, aws_queue, admin, second_admin, settings):
    share = aws_queue.shares.get(name="qs2")
    proposal = share_update(
        actor=admin, share=share, data=_more_for(share), reason="r", expected_version=1
    ).proposal
    settings.POLICY_CHANGES_NEED_REVIEW = False
    share_update(
        actor=second_admin, share=share, data=_more_for(share, 3), reason="r", expected_version=1
    )
    with pytest.raises(InvalidInput, match="changed since this was proposed"):
        proposals.proposal_approve(actor=second_admin, proposal=proposal)
    proposal.refresh_from_db()
    assert proposal.is_pending


def test_reject_needs_a_note_and_only_the_author_withdraws(review, aws_queue, admin, second_admin):
    share = aws_queue.shares.get(name="qs2")
    proposal = share_update(
        actor=admin, share=share, data=_more_for(share), reason="r", expected_version=1
    ).proposal
    with pytest.raises(InvalidInput, match="say why"):
        proposals.proposal_reject(actor=second_admin, proposal=proposal, note="")
    with pytest.raises(rules.Refused, match="only the admin who proposed"):
        proposals.proposal_withdraw(actor=second_admin, proposal=proposal)
    assert proposals.proposal_withdraw(actor=admin, proposal=proposal).state == "WITHDRAWN"


def test_changes_made_by_an_approved_exception_apply_at_once(review, filed, owner):
    exception_services.exception_request_approve(actor=owner, request=filed, now=filed.window_start)
    filed.refresh_from_db()
    assert filed.state == ExceptionRequest.State.ACTIVE
    assert not PolicyProposal.objects.exists()
    assert PolicyChange.objects.filter(exception_request=filed).exists()


def test_the_services_check_the_actor(aws_queue, team_lead):
    share = aws_queue.shares.get(name="qs2")
    with pytest.raises(rules.Refused, match="only platform admins change the policy"):
        share_update(
            actor=team_lead, share=share, data=_more_for(share), reason="r", expected_version=1
        )


# Priorities above a share's ceiling.


def test_priorities_up_to_the_ceiling_need_nothing(aws_queue):
    share = aws_queue.shares.get(name="qs1")
    assert share.priority_ceiling == 100
    assert job_priority_refusal(share=share, priority=100) is None
    assert "above the ceiling of share qs1 (100)" in job_priority_refusal(share=share, priority=101)


def test_an_urgency_grants_its_priority_only_to_teams_it_names(aws_queue):
    share = aws_queue.shares.get(name="qs1")
    everyone = UrgencyDefinitionFactory(name="Production incident", priority=950)
    named = UrgencyDefinitionFactory(name="Vision deadline", priority=800)
    named.invokers.add(share.team)
    assert job_priority_refusal(share=share, priority=950, urgency=everyone) is not None
    assert job_priority_refusal(share=share, priority=800, urgency=named) is None
    assert job_priority_refusal(share=share, priority=900, urgency=named) is not None


def test_an_active_priority_raise_lifts_the_ceiling_for_its_jobs(aws_queue, lead, owner):
    share = aws_queue.shares.get(name="qs1")
    job = JobFactory(share=share, instance_type=InstanceType.objects.get(name="ml.g5.xlarge"))
    assert job_priority_refusal(share=share, priority=600, job=job) is not None
    now = timezone.now()
    request = exception_services.exception_request_create(
        actor=lead,
        data=exception_services.RequestData(
            kind=ExceptionRequest.Kind.PRIORITY_RAISE,
            team=share.team,
            urgency=UrgencyDefinitionFactory(name="raise", priority=700),
            justification="deadline",
            window_start=now - timedelta(minutes=1),
            window_end=now + timedelta(hours=2),
            jobs=[job],
        ),
        submit=True,
    )
    exception_services.exception_request_approve(actor=owner, request=request, note="ok")
    assert job_priority_refusal(share=share, priority=600, job=job) is None
    assert job_priority_refusal(share=share, priority=701, job=job) is not None


# Decision records and articles.


@pytest.fixture
def record(filed, owner):
    exception_services.exception_request_deny(
        actor=owner, request=filed, note="Wait for the next quarter."
    )
    return KnowledgeArticle.objects.get(decision_for=filed)


def test_a_decision_record_is_append_only_even_for_its_decider(record, owner, admin):
    data = ArticleData(title="Rewritten", body="Nothing happened.")
    with pytest.raises(rules.Refused, match="append-only"):
        article_update(actor=owner, article=record, data=data, expected_version=1)
    with pytest.raises(rules.Refused, match="append-only"):
        article_update(actor=admin, article=record, data=data, expected_version=1)
    with pytest.raises(rules.Refused, match="append-only"):
        article_delete(actor=owner, article=record)
    assert KnowledgeArticle.objects.get(pk=record.pk).body == record.body


def test_a_decision_record_is_seen_only_by_who_may_see_the_request(
    record, lead, owner, leadership, outsider
):
    for user in (lead, owner):
        assert rules.allowed(user, "article.view", record)
        assert record in [hit.article for hit in article_search(user=user, query="quarter")]
    for user in (leadership, outsider):
        assert not rules.allowed(user, "article.view", record)
        assert article_search(user=user, query="quarter") == []
        assert record not in [hit.article for hit in article_search(user=user)]


def test_editors_must_be_able_to_write_knowledge(admin, leadership, team_lead):
    with pytest.raises(InvalidInput) as caught:
        article_create(
            actor=admin, data=ArticleData(title="T", body="B", editors=[leadership, team_lead])
        )
    assert list(caught.value.errors) == ["editors"]
    assert "leader-user may not write" in caught.value.errors["editors"][0]


def test_only_the_owner_or_an_admin_changes_the_editor_list(admin, team_lead, exception_owner):
    article = article_create(
        actor=team_lead, data=ArticleData(title="T", body="B", editors=[exception_owner])
    )
    with pytest.raises(rules.Refused, match="changes who may edit"):
        article_update(
            actor=exception_owner,
            article=article,
            data=ArticleData(title="T", body="B2", editors=[]),
            expected_version=1,
        )
    edited = article_update(
        actor=exception_owner,
        article=article,
        data=ArticleData(title="T", body="B2", editors=[exception_owner]),
        expected_version=1,
    )
    assert edited.body == "B2"
    article_update(actor=admin, article=edited, data=ArticleData(title="T", body="B3"),
                   expected_version=2)  # fmt: skip
    assert list(article.editors.all()) == []


def test_linking_a_request_the_author_may_not_see_reads_as_an_unknown_id(filed, team_lead):
    with pytest.raises(InvalidInput) as caught:
        article_create(
            actor=team_lead,
            data=ArticleData(title="T", body="B", exception_requests=[filed]),
        )
    assert caught.value.errors == {
        "exception_requests": [f'Invalid pk "{filed.pk}" - object does not exist.']
    }
