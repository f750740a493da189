"""directory_sync on its own (no directory server: the groups are given), for what the
LDAP tests do not reach: review mode, roles no mapping names, the history page."""

from __future__ import annotations

import pytest

from core.permissions import user_roles
from governance.directory.models import DirectoryAccount, GroupMapping
from governance.directory.services import directory_sync
from governance.models import PolicyChange, PolicyProposal
from tests.factories import TeamFactory, UserFactory

pytestmark = pytest.mark.django_db
Kind = GroupMapping.Kind


def sync(user, groups, trigger="login"):
    return directory_sync(user=user, groups=groups, source="ldap", trigger=trigger)


def test_with_review_on_a_directory_change_applies_at_once(settings):
    settings.POLICY_CHANGES_NEED_REVIEW = True
    GroupMapping.objects.create(group="ml-leads", kind=Kind.ROLE, role="team_leads")
    team = TeamFactory(name="speech")
    GroupMapping.objects.create(group="speech", kind=Kind.TEAM_MEMBER, team=team)
    user = UserFactory(username="dir-user")
    result = sync(user, ["ML-Leads", "speech"])  # names match whatever their case
    assert set(user_roles(type(user).objects.get(pk=user.pk))) == {"team_leads"}
    assert list(team.members.all()) == [user]
    assert not PolicyProposal.objects.exists()
    assert [change.cause for change in result.changes] == ["directory", "directory"]


def test_roles_no_mapping_names_stay_as_admins_set_them():
    GroupMapping.objects.create(group="ml-leads", kind=Kind.ROLE, role="team_leads")
    user = UserFactory(username="dir-user", roles=["leadership", "team_leads"])
    sync(user, ["someone-elses-group"])
    assert set(user_roles(type(user).objects.get(pk=user.pk))) == {"leadership"}
    (change,) = PolicyChange.objects.filter(cause="directory")
    assert change.before["roles"] == ["leadership", "team_leads"]
    assert change.after["roles"] == ["leadership"]
    assert "team_leads removed (no group of theirs)" in change.reason


def test_an_unlisted_user_loses_every_role_and_team():
    team = TeamFactory(name="unmapped-team")
    user = UserFactory(username="gone-user", roles=["leadership"])
    team.members.add(user)
    result = sync(user, None, trigger="periodic check")
    assert result.unlisted_now and not result.listed
    assert user_roles(type(user).objects.get(pk=user.pk)) == frozenset()
    assert list(team.members.all()) == []
    assert not DirectoryAccount.objects.get(user=user).listed
    # A second check of a user still unlisted records nothing more.
    again = sync(user, None, trigger="periodic check")
    assert again.changes == [] and not again.unlisted_now


def test_the_history_page_shows_directory_changes(client, admin):
    GroupMapping.objects.create(group="leaders", kind=Kind.ROLE, role="leadership")
    sync(UserFactory(username="dir-leader"), ["leaders"])
    client.force_login(admin)
    response = client.get("/history/", {"cause": "directory"})
    assert response.status_code == 200
    text = response.content.decode()
    assert "dir-leader" in text and "leadership from group leaders" in text


def test_exception_owner_scopes_follow_the_groups(aws_queue):
    from governance.models import ExceptionOwner

    GroupMapping.objects.create(group="owners", kind=Kind.EXCEPTION_OWNER, queue=aws_queue)
    user = UserFactory(username="dir-owner")
    sync(user, ["owners"])
    assert ExceptionOwner.objects.filter(user=user, queue=aws_queue).exists()
    sync(user, [])
    assert not ExceptionOwner.objects.filter(user=user).exists()
    given, taken = PolicyChange.objects.filter(cause="directory", subject=user).order_by("id")
    assert given.before["exception_owner_of"] == [] and given.after["exception_owner_of"] == [
        "queue aws-sample"
    ]
    assert "from group owners" in given.reason
    assert "no longer exception owner of queue aws-sample" in taken.reason
    assert taken.after["exception_owner_of"] == []
