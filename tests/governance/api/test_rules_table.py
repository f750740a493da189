"""The API asks the rules table: policy writes under review answer 202 with a proposal
that another admin approves; decision records are private to who may see the request and
never change; a link to a request the author may not see reads as an unknown id."""

from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from fleet.models import InstanceType, QuotaShare
from governance.exceptions import services as exception_services
from governance.models import ExceptionOwner, ExceptionRequest, KnowledgeArticle, PolicyChange
from tests.factories import UrgencyDefinitionFactory, UserFactory

pytestmark = pytest.mark.django_db


def client_for(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


@pytest.fixture
def second_admin():
    return UserFactory(username="second-admin", roles=["admins"])


def test_a_share_update_under_review_answers_202_and_applies_on_approval(
    settings, admin, second_admin, aws_queue
):
    settings.POLICY_CHANGES_NEED_REVIEW = True
    share = aws_queue.shares.get(name="qs2")
    body = {"capacity_limits": {"ml.g5.xlarge": 2}, "reason": "bursts", "version": 1}

    response = client_for(admin).patch(f"/api/v1/shares/{share.pk}/", body, format="json")

    assert response.status_code == 202
    proposal = response.json()
    assert proposal["state"] == "PENDING" and proposal["kind"] == "share_update"
    assert proposal["after"]["capacity_limits"] == {"ml.g5.xlarge": 2}
    assert QuotaShare.objects.get(pk=share.pk).version == 1
    assert not PolicyChange.objects.filter(share=share).exists()

    url = f"/api/v1/policy-proposals/{proposal['id']}/approve/"
    refused = client_for(admin).post(url, {}, format="json")
    assert refused.status_code == 403
    assert refused.json()["detail"] == "you proposed this change: another admin must review it"

    approved = client_for(second_admin).post(url, {"note": "fine"}, format="json")
    assert approved.status_code == 200 and approved.json()["state"] == "APPLIED"
    assert QuotaShare.objects.get(pk=share.pk).version == 2
    listed = client_for(admin).get("/api/v1/policy-proposals/").json()["results"]
    assert [row["id"] for row in listed] == [proposal["id"]]


def test_a_revert_under_review_answers_202(settings, admin, aws_queue):
    share = aws_queue.shares.get(name="qs2")
    client_for(admin).patch(
        f"/api/v1/shares/{share.pk}/", {"state": "DISABLED", "reason": "r", "version": 1},
        format="json",
    )  # fmt: skip
    change = PolicyChange.objects.get(share=share)
    settings.POLICY_CHANGES_NEED_REVIEW = True

    response = client_for(admin).post(
        f"/api/v1/policy-changes/{change.pk}/revert/", {"reason": "back"}, format="json"
    )

    assert response.status_code == 202 and response.json()["kind"] == "revert"
    assert PolicyChange.objects.filter(share=share).count() == 1


def test_the_ceiling_is_set_by_admins_in_the_api(admin, aws_queue):
    share = aws_queue.shares.get(name="qs1")
    url = f"/api/v1/shares/{share.pk}/"
    response = client_for(admin).patch(
        url, {"priority_ceiling": 500, "reason": "vision runs launches", "version": 1},
        format="json",
    )  # fmt: skip
    assert response.status_code == 200 and response.json()["priority_ceiling"] == 500
    change = PolicyChange.objects.get(share=share)
    assert (change.before["priority_ceiling"], change.after["priority_ceiling"]) == (100, 500)
    too_high = client_for(admin).patch(
        url, {"priority_ceiling": 10_000, "reason": "r", "version": 2}, format="json"
    )
    assert too_high.status_code == 400 and "priority_ceiling" in too_high.json()["errors"]


@pytest.fixture
def decided(aws_queue, team_lead, exception_owner):
    qs1 = aws_queue.shares.get(name="qs1")
    qs1.team.leads.add(team_lead)
    ExceptionOwner.objects.create(user=exception_owner, queue=aws_queue)
    now = timezone.now()
    request = exception_services.exception_request_create(
        actor=team_lead,
        data=exception_services.RequestData(
            kind=ExceptionRequest.Kind.TEMPORARY_CAPACITY,
            team=qs1.team,
            urgency=UrgencyDefinitionFactory(name="deadline"),
            justification="A confidential launch",
            window_start=now + timedelta(hours=1),
            window_end=now + timedelta(hours=3),
            share=qs1,
            instance_type=InstanceType.objects.get(name="ml.g5.xlarge"),
            extra_instances=1,
        ),
        submit=True,
    )
    exception_services.exception_request_deny(
        actor=exception_owner, request=request, note="Not this week."
    )
    return request


def test_a_decision_record_is_private_and_append_only(
    decided, team_lead, exception_owner, leadership, outsider
):
    record = KnowledgeArticle.objects.get(decision_for=decided)
    url = f"/api/v1/knowledge/articles/{record.pk}/"
    for user in (leadership, outsider):
        assert client_for(user).get(url).status_code == 404
        listed = client_for(user).get("/api/v1/knowledge/articles/?q=confidential").json()
        assert listed["results"] == []
    assert client_for(team_lead).get(url).status_code == 200
    edit = client_for(exception_owner).patch(
        url, {"body": "Approved after all.", "version": 1}, format="json"
    )
    assert edit.status_code == 403 and "append-only" in edit.json()["detail"]
    assert client_for(exception_owner).delete(url).status_code == 403
    assert KnowledgeArticle.objects.get(pk=record.pk).version == 1


def test_linking_an_unseen_request_gives_the_unknown_id_error(decided):
    stranger = UserFactory(username="lead-of-another-team", roles=["team_leads"])
    client = client_for(stranger)

    def link(pk):
        body = {"title": "T", "body": "B", "exception_requests": [pk]}
        return client.post("/api/v1/knowledge/articles/", body, format="json")

    unseen, unknown = link(decided.pk), link(decided.pk + 1000)

    assert unseen.status_code == unknown.status_code == 400
    assert unseen.json()["errors"] == {
        key: [message.replace(str(decided.pk + 1000), str(decided.pk)) for message in messages]
        for key, messages in unknown.json()["errors"].items()
    }
