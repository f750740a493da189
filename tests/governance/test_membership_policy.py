"""Membership is policy (issue 23, point 4): a team's leads and members, and a user's
roles and exception-owner scopes, change with a reason, are recorded in the policy
history with who, when, why and a diff, and with review required become proposals
another admin approves. An exception decision checks, and keeps, the decider's
membership as it is at the decision."""

from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from core import rules
from core.errors import InvalidInput
from fleet.models import InstanceType, Team
from governance.exceptions import services as exception_services
from governance.models import ExceptionOwner, ExceptionRequest, PolicyChange, PolicyProposal
from governance.policy.membership import (
    DIRECT_REASON,
    TeamData,
    team_document,
    team_save,
    user_roles_set,
)
from governance.policy.services import policy_change_revert
from governance.proposals import services as proposals
from tests.factories import UrgencyDefinitionFactory, UserFactory

pytestmark = pytest.mark.django_db
User = get_user_model()
TEAM = PolicyChange.Target.TEAM
ROLE = PolicyChange.Target.ROLE


def client_for(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


@pytest.fixture
def second_admin():
    return UserFactory(username="second-admin", roles=["admins"])


@pytest.fixture
def team_a(aws_queue):
    return aws_queue.shares.get(name="qs1").team


@pytest.fixture
def lead(team_a):
    user = UserFactory(username="lead-a", roles=["team_leads"])
    team_a.leads.add(user)
    return user


@pytest.fixture
def owner(aws_queue, team_a):
    """An exception owner of the queue who belongs to team A."""
    user = UserFactory(username="owner-a", roles=["exception_owners"])
    ExceptionOwner.objects.create(user=user, queue=aws_queue)
    team_a.members.add(user)
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


def _members(team) -> list[str]:
    return sorted(team.members.values_list("username", flat=True))


def _patch_members(user, team, members, reason):
    return client_for(user).patch(
        f"/api/v1/teams/{team.pk}/", {"members": members, "reason": reason}, format="json"
    )


def _team_history(team) -> list[dict]:
    """The team's history as the API returns it, oldest first."""
    rows = client_for(UserFactory(username="auditor", roles=["admins"])).get(
        "/api/v1/policy-changes/", {"target": "team", "team": team.pk}
    )
    assert rows.status_code == 200
    return list(reversed(rows.json()["results"]))


# The attack, replayed with review on.


def test_remove_approve_re_add_needs_a_second_admin_and_is_all_in_the_history(
    settings, admin, second_admin, owner, filed, team_a
):
    settings.POLICY_CHANGES_NEED_REVIEW = True
    others = [name for name in _members(team_a) if name != "owner-a"]

    # 1. The admin removes the owner from the team: a proposal, nothing changes.
    removal = _patch_members(admin, team_a, others, "owner-a moves to the platform team")
    assert removal.status_code == 202, removal.json()
    proposal = removal.json()
    assert (proposal["kind"], proposal["state"]) == ("team_update", "PENDING")
    assert proposal["before"]["members"] == sorted([*others, "owner-a"])
    assert proposal["after"]["members"] == others
    assert "owner-a" in _members(team_a)
    assert not PolicyChange.objects.filter(target=TEAM).exists()

    # The owner, still a member, may not decide; the admin may not approve their own removal.
    with pytest.raises(rules.Refused, match="you belong to team team-qs1"):
        exception_services.exception_request_approve(actor=owner, request=filed)
    url = f"/api/v1/policy-proposals/{proposal['id']}/approve/"
    own = client_for(admin).post(url, {}, format="json")
    assert own.status_code == 403
    assert own.json()["detail"] == "you proposed this change: another admin must review it"
    assert "owner-a" in _members(team_a)

    # 2. Only a second admin's approval removes them.
    assert client_for(second_admin).post(url, {"note": "ok"}, format="json").status_code == 200
    assert "owner-a" not in _members(team_a)

    # 3. Now outside the team, the owner decides, and the decision keeps that membership.
    exception_services.exception_request_approve(actor=owner, request=filed)
    filed.refresh_from_db()
    assert filed.state == ExceptionRequest.State.APPROVED
    assert filed.decided_membership == {
        "team": "team-qs1",
        "member": False,
        "lead": False,
        "roles": ["exception_owners"],
        "exception_owner_of": ["queue aws-sample"],
    }

    # 4. Re-adding them is a proposal again, applied by the second admin.
    readd = _patch_members(admin, team_a, [*others, "owner-a"], "owner-a is back")
    assert readd.status_code == 202
    readd_url = f"/api/v1/policy-proposals/{readd.json()['id']}/approve/"
    assert client_for(second_admin).post(readd_url, {}, format="json").status_code == 200
    assert "owner-a" in _members(team_a)

    # Every step is in the history: who, why, and the diff.
    history = _team_history(team_a)
    assert [(row["actor"], row["reason"], row["changes"]) for row in history] == [
        (
            "admin-user",
            "owner-a moves to the platform team",
            [{"field": "members", "before": sorted([*others, "owner-a"]), "after": others}],
        ),
        (
            "admin-user",
            "owner-a is back",
            [{"field": "members", "before": others, "after": sorted([*others, "owner-a"])}],
        ),
    ]
    applied = PolicyProposal.objects.filter(kind=PolicyProposal.Kind.TEAM_UPDATE)
    assert {p.reviewer.username for p in applied} == {"second-admin"}
    assert {p.applied_change.pk for p in applied} == {row["id"] for row in history}


def test_the_decision_records_the_membership_it_was_checked_against(owner, filed, team_a):
    team_a.members.remove(owner)
    team_a.leads.add(owner)  # a lead without the lead role: still of the team
    with pytest.raises(rules.Refused, match="you belong to team team-qs1"):
        exception_services.exception_request_deny(actor=owner, request=filed, note="no")
    team_a.leads.remove(owner)
    exception_services.exception_request_deny(actor=owner, request=filed, note="not now")
    filed.refresh_from_db()
    assert filed.state == ExceptionRequest.State.DENIED
    assert (filed.decided_membership["member"], filed.decided_membership["lead"]) == (False, False)
    # An audit reads it in the API and on the request's page.
    detail = client_for(owner).get(f"/api/v1/exception-requests/{filed.pk}/").json()
    assert detail["decided_membership"] == filed.decided_membership
    client = Client()
    client.force_login(owner)
    page = client.get(reverse("exception-detail", args=[filed.pk])).content.decode()
    assert "outside team team-qs1; roles: exception_owners" in page


def test_a_decision_reads_the_membership_again_not_a_cached_one(owner, filed, team_a):
    """The owner's teams were read (and cached on the user) while they were outside the
    team; they join before deciding: the decision sees them as a member."""
    team_a.members.remove(owner)
    assert rules.allowed(owner, "exception.decide", filed)  # caches their teams
    team_a.members.add(owner)
    with pytest.raises(rules.Refused, match="you belong to team team-qs1"):
        exception_services.exception_request_approve(actor=owner, request=filed)


# Without review: applied and recorded.


def test_without_review_team_writes_apply_and_are_recorded(admin):
    UserFactory(username="ana")
    UserFactory(username="ben")
    api = client_for(admin)
    created = api.post(
        "/api/v1/teams/",
        {"name": "speech", "members": ["ana"], "leads": ["ben"], "reason": "new ASR team"},
        format="json",
    )
    assert created.status_code == 201, created.json()
    team = Team.objects.get(name="speech")
    changed = api.patch(
        f"/api/v1/teams/{team.pk}/", {"leads": ["ana"], "reason": "Ana leads now"}, format="json"
    )
    assert changed.status_code == 200, changed.json()
    assert changed.json()["leads"] == ["ana"] and changed.json()["members"] == ["ana"]

    first, second = PolicyChange.objects.filter(target=TEAM).order_by("id")
    assert (first.actor, first.reason, first.before, first.cause) == (
        admin,
        "new ASR team",
        None,
        PolicyChange.Cause.EDIT,
    )
    assert first.after == {
        "name": "speech",
        "description": "",
        "leads": ["ben"],
        "members": ["ana"],
    }
    assert second.team == team and second.reason == "Ana leads now"
    assert [row["field"] for row in _team_history(team)[1]["changes"]] == ["leads"]
    assert (second.before["leads"], second.after["leads"]) == (["ben"], ["ana"])


def test_an_unchanged_team_write_records_nothing(admin, team_a):
    response = _patch_members(admin, team_a, _members(team_a), "no-op")
    assert response.status_code == 200
    assert not PolicyChange.objects.filter(target=TEAM).exists()


def test_deleting_a_team_is_recorded(admin):
    team = Team.objects.create(name="spare")
    response = client_for(admin).delete(
        f"/api/v1/teams/{team.pk}/", {"reason": "merged into vision"}, format="json"
    )
    assert response.status_code == 204
    change = PolicyChange.objects.get(target=TEAM)
    assert (change.object_repr, change.after, change.reason) == (
        "spare",
        None,
        "merged into vision",
    )
    assert change.before["name"] == "spare"


# Bad input: a 400 naming the field, nothing changes.


@pytest.mark.parametrize("reason", [None, "", "   "])
def test_a_missing_reason_is_a_400_naming_reason(admin, team_a, reason):
    UserFactory(username="ana")
    before = team_document(team_a)
    body = {"members": ["ana"]} if reason is None else {"members": ["ana"], "reason": reason}
    response = client_for(admin).patch(f"/api/v1/teams/{team_a.pk}/", body, format="json")
    assert response.status_code == 400
    assert response.json()["errors"] == {"reason": ["say why this change is made"]}
    deleted = client_for(admin).delete(f"/api/v1/teams/{team_a.pk}/", {}, format="json")
    assert deleted.status_code == 400 and list(deleted.json()["errors"]) == ["reason"]
    assert team_document(Team.objects.get(pk=team_a.pk)) == before
    assert not PolicyChange.objects.filter(target=TEAM).exists()


def test_an_unknown_user_is_a_400_naming_the_field(admin, team_a):
    response = _patch_members(admin, team_a, ["ghost"], "add a ghost")
    assert response.status_code == 400
    assert response.json()["errors"] == {"members": ["unknown user 'ghost'"]}


def test_non_admins_may_not_change_a_team(team_lead, team_a):
    response = _patch_members(team_lead, team_a, [], "empty it")
    assert response.status_code == 403
    assert not PolicyChange.objects.filter(target=TEAM).exists()


# A proposal applies exactly its diff.


def test_a_proposal_applies_exactly_its_diff(settings, admin, second_admin, team_a):
    settings.POLICY_CHANGES_NEED_REVIEW = True
    UserFactory(username="ana")
    written = team_save(
        actor=admin,
        team=team_a,
        data=TeamData(name=team_a.name, leads=[], members=[User.objects.get(username="ana")]),
        reason="Ana is the only member",
    )
    proposal = written.proposal
    assert proposal.team == team_a and proposal.before == team_document(team_a)
    proposals.proposal_approve(actor=second_admin, proposal=proposal)
    proposal.refresh_from_db()
    team_a.refresh_from_db()
    assert team_document(team_a) == proposal.payload["after"]
    change = proposal.applied_change
    assert (change.before, change.after) == (proposal.before, proposal.payload["after"])
    assert (change.actor, change.reason) == (admin, "Ana is the only member")


def test_a_proposal_does_not_apply_over_a_team_changed_since(settings, admin, second_admin, team_a):
    settings.POLICY_CHANGES_NEED_REVIEW = True
    UserFactory(username="ana")
    UserFactory(username="ben")
    first = _patch_members(admin, team_a, ["ana"], "Ana only").json()["id"]
    second = _patch_members(admin, team_a, ["ben"], "Ben only").json()["id"]
    proposals.proposal_approve(actor=second_admin, proposal=PolicyProposal.objects.get(pk=first))
    stale = PolicyProposal.objects.get(pk=second)
    with pytest.raises(InvalidInput, match="was changed since this was proposed"):
        proposals.proposal_approve(actor=second_admin, proposal=stale)
    assert _members(team_a) == ["ana"]
    assert PolicyChange.objects.filter(target=TEAM).count() == 1


def test_a_team_change_reverts_as_a_new_change(admin, team_a):
    UserFactory(username="ana")
    before = _members(team_a)
    _patch_members(admin, team_a, ["ana"], "Ana only")
    change = PolicyChange.objects.get(target=TEAM)
    written = policy_change_revert(actor=admin, change=change, reason="that was a mistake")
    assert _members(team_a) == before
    assert (written.entry.cause, written.entry.reverts) == (PolicyChange.Cause.REVERT, change)


# Role assignments.


def test_role_assignment_through_the_service_is_recorded_and_reviewed(
    settings, admin, second_admin
):
    user = UserFactory(username="carol")
    written = user_roles_set(
        actor=admin, user=user, roles=["team_leads"], reason="Carol leads speech"
    )
    change = written.entry
    assert (change.target, change.actor, change.reason, change.subject) == (
        ROLE,
        admin,
        "Carol leads speech",
        user,
    )
    assert (change.before["roles"], change.after["roles"]) == ([], ["team_leads"])

    settings.POLICY_CHANGES_NEED_REVIEW = True
    proposed = user_roles_set(
        actor=admin, user=user, roles=["team_leads", "exception_owners"], reason="owner too"
    ).proposal
    assert proposed.kind == PolicyProposal.Kind.ROLES
    assert not user.groups.filter(name="exception_owners").exists()
    proposals.proposal_approve(actor=second_admin, proposal=proposed)
    assert set(user.groups.values_list("name", flat=True)) == {"team_leads", "exception_owners"}


def test_an_unknown_role_is_refused_naming_roles(admin):
    user = UserFactory(username="dave")
    with pytest.raises(InvalidInput) as refused:
        user_roles_set(actor=admin, user=user, roles=["wizards"], reason="magic")
    assert list(refused.value.errors) == ["roles"]


def test_a_role_group_changed_directly_is_recorded_without_an_actor(db):
    user = UserFactory(username="erin")
    leads = Group.objects.get_or_create(name="team_leads")[0]
    user.groups.add(leads)
    leads.user_set.remove(user)  # the other side of the relation
    user.groups.add(Group.objects.get_or_create(name="not-a-role")[0])  # not a role
    changes = list(PolicyChange.objects.filter(target=ROLE, subject=user).order_by("id"))
    assert [(c.before["roles"], c.after["roles"]) for c in changes] == [
        ([], ["team_leads"]),
        (["team_leads"], []),
    ]
    assert {(c.actor, c.cause, c.reason) for c in changes} == {
        (None, PolicyChange.Cause.DIRECT, DIRECT_REASON)
    }


def test_appointing_an_exception_owner_is_recorded_with_its_actor(admin, aws_queue):
    user = UserFactory(username="frank")
    exception_services.exception_owner_add(actor=admin, user=user, queue=aws_queue)
    change = PolicyChange.objects.filter(target=ROLE, subject=user).latest("id")
    assert (change.actor, change.cause) == (admin, PolicyChange.Cause.EDIT)
    assert change.after == {
        "roles": ["exception_owners"],
        "exception_owner_of": ["queue aws-sample"],
    }
    owner = ExceptionOwner.objects.get(user=user)
    exception_services.exception_owner_remove(actor=admin, owner=owner)
    removal = PolicyChange.objects.filter(target=ROLE, subject=user).latest("id")
    assert (removal.before["exception_owner_of"], removal.after["exception_owner_of"]) == (
        ["queue aws-sample"],
        [],
    )
    assert removal.actor == admin and "aws-sample" in removal.reason


def test_a_role_change_reverts(admin):
    user = UserFactory(username="gina")
    change = user_roles_set(actor=admin, user=user, roles=["leadership"], reason="joins").entry
    policy_change_revert(actor=admin, change=change, reason="left again")
    assert not user.groups.exists()


# The team pages follow the same path: a reason, the proposal message, field errors.


def test_the_team_page_saves_with_a_reason_and_records_it(client, admin, team_a):
    client.force_login(admin)
    ana = UserFactory(username="ana")
    url = reverse("team-edit", args=[team_a.pk])
    response = client.post(
        url, {"name": team_a.name, "members": [ana.pk], "reason": "Ana joins"}, follow=True
    )
    assert response.status_code == 200
    assert "See this change in the history" in response.content.decode()
    change = PolicyChange.objects.get(target=TEAM)
    assert (change.actor, change.reason, change.after["members"]) == (admin, "Ana joins", ["ana"])
    listed = client.get(reverse("team-list")).content.decode()
    assert "ana" in listed


def test_the_team_page_names_the_field_at_fault(client, admin, team_a):
    client.force_login(admin)
    Team.objects.create(name="taken")
    before = team_document(team_a)
    response = client.post(reverse("team-edit", args=[team_a.pk]), {"name": "taken"})
    assert response.status_code == 200
    errors = response.context["form"].errors
    assert errors["reason"] == ["say why this change is made"]
    assert errors["name"] == ["a team named 'taken' already exists"]
    assert 'id="id_reason_error"' in response.content.decode()
    assert team_document(Team.objects.get(pk=team_a.pk)) == before


def test_the_team_page_proposes_under_review(settings, client, admin, team_a):
    settings.POLICY_CHANGES_NEED_REVIEW = True
    client.force_login(admin)
    response = client.post(
        reverse("team-create"), {"name": "speech", "reason": "new ASR team"}, follow=True
    )
    assert response.redirect_chain[-1][0] == reverse("proposal-list")
    assert "Proposed, waiting for another admin&#x27;s review: new team speech" in (
        response.content.decode()
    )
    assert not Team.objects.filter(name="speech").exists()
    assert PolicyProposal.objects.get().kind == PolicyProposal.Kind.TEAM_CREATE


# Membership as of the decision, under concurrency (PostgreSQL: real row locks).


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_decision_waits_for_a_membership_write_in_flight_and_sees_it(
    admin, aws_queue, team_a, lead
):
    """An admin's write adding the owner to the team holds the team's row; a decision
    made meanwhile waits for it, and is refused once the owner is a member."""
    import threading
    import time

    from django.db import connection, transaction

    owner = UserFactory(username="owner-b", roles=["exception_owners"])
    ExceptionOwner.objects.create(user=owner, queue=aws_queue)
    now = timezone.now()
    request = exception_services.exception_request_create(
        actor=lead,
        data=exception_services.RequestData(
            kind=ExceptionRequest.Kind.TEMPORARY_CAPACITY,
            team=team_a,
            urgency=UrgencyDefinitionFactory(name="deadline"),
            justification="Launch",
            window_start=now + timedelta(hours=1),
            window_end=now + timedelta(hours=5),
            share=aws_queue.shares.get(name="qs1"),
            instance_type=InstanceType.objects.get(name="ml.g5.xlarge"),
            extra_instances=1,
        ),
        submit=True,
    )
    outcome = {}

    def decide():
        try:
            exception_services.exception_request_approve(actor=owner, request=request)
            outcome["result"] = "approved"
        except Exception as error:  # noqa: BLE001 - the test reads what happened
            outcome["result"] = f"{type(error).__name__}: {error}"
        finally:
            from django.db import connection as thread_connection

            thread_connection.close()

    with transaction.atomic():
        team_save(
            actor=admin,
            team=team_a,
            data=TeamData(
                name=team_a.name,
                leads=list(team_a.leads.all()),
                members=[*team_a.members.all(), owner],
            ),
            reason="owner-b joins the team",
        )
        decider = threading.Thread(target=decide)
        decider.start()
        with connection.cursor() as cursor:
            for _ in range(200):  # until the decision waits on the team's row lock
                # pg_stat_activity is a snapshot within a transaction: clear it each time.
                cursor.execute("SELECT pg_stat_clear_snapshot()")
                cursor.execute(
                    "SELECT count(*) FROM pg_stat_activity "
                    "WHERE wait_event_type = 'Lock' AND datname = current_database()"
                )
                if cursor.fetchone()[0]:
                    break
                time.sleep(0.05)
            else:
                pytest.fail(f"the decision did not wait for the membership write: {outcome}")
    decider.join(timeout=30)
    assert outcome["result"].startswith("Refused: you belong to team team-qs1")
    request.refresh_from_db()
    assert request.state == ExceptionRequest.State.SUBMITTED
