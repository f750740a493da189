"""The directory mapping page (admins), and break-glass local logins (no directory
needed: these run without slapd)."""

from __future__ import annotations

import pytest
from django.urls import reverse

from accounts.backends import password_login_allowed
from governance.directory.models import GroupMapping
from tests.factories import TeamFactory, UserFactory

pytestmark = pytest.mark.django_db
URL = "/directory/"
WHY = "the leads group is the source of truth"


def test_only_admins_open_it(client, team_lead):
    client.force_login(team_lead)
    assert client.get(URL).status_code == 403
    assert client.post(URL, {"group": "x", "kind": "role", "role": "admins"}).status_code == 403
    assert not GroupMapping.objects.exists()


def test_an_admin_maps_a_group_to_a_role_and_a_team(client, admin):
    vision = TeamFactory(name="vision")
    client.force_login(admin)
    response = client.post(
        URL, {"group": " ml-leads ", "kind": "role", "role": "team_leads", "reason": WHY}
    )
    assert response.status_code == 302
    response = client.post(
        URL, {"group": "vision-leads", "kind": "team_lead", "team": vision.pk, "reason": WHY}
    )
    assert response.status_code == 302
    page = client.get(URL)
    assert page.status_code == 200
    text = page.content.decode()
    assert "ml-leads" in text and "team lead of" in text and "vision" in text
    role, team = GroupMapping.objects.order_by("id")
    assert (role.group, role.kind, role.role, role.team, role.created_by) == (
        "ml-leads",
        "role",
        "team_leads",
        None,
        admin,
    )
    assert (team.kind, team.team) == ("team_lead", vision)
    # Removing one.
    response = client.post(
        reverse("directory-mapping-delete", args=[role.pk]), {f"remove-{role.pk}-reason": WHY}
    )
    assert response.status_code == 302
    assert list(GroupMapping.objects.all()) == [team]


@pytest.mark.parametrize(
    ("data", "field", "message"),
    [
        ({"group": "", "kind": "role", "role": "admins"}, "group", "name the directory group"),
        ({"group": "g", "kind": "role", "role": ""}, "role", "choose the role this group gives"),
        ({"group": "g", "kind": "team_member"}, "team", "choose the team this group"),
        ({"group": "g", "kind": "role", "role": "wizards"}, "role", "Select a valid choice"),
        ({"group": "g", "kind": "sometimes", "role": "admins"}, "kind", "Select a valid choice"),
        ({"group": "g", "kind": "exception_owner"}, "queue", "choose the queue whose"),
        ({"group": "x" * 10_000, "kind": "role", "role": "admins"}, "group", "at most 255"),
        ({"group": "g\x00", "kind": "role", "role": "admins"}, "group", "Null characters"),
        ({"group": "g", "kind": "team_lead", "team": "999999"}, "team", "Select a valid choice"),
    ],
)
def test_bad_input_is_named_by_its_field_and_changes_nothing(client, admin, data, field, message):
    client.force_login(admin)
    response = client.post(URL, data)
    assert response.status_code == 400
    form = response.context["form"]
    assert message in " ".join(form.errors[field])
    assert f'id="id_{field}_error"' in response.content.decode()
    assert not GroupMapping.objects.exists()


def test_a_role_mapping_names_no_team_and_a_duplicate_is_refused(client, admin):
    vision = TeamFactory(name="vision")
    client.force_login(admin)
    response = client.post(URL, {"group": "g", "kind": "role", "role": "admins", "team": vision.pk})
    assert response.status_code == 400
    assert "names no team: leave it empty" in " ".join(response.context["form"].errors["team"])
    assert (
        client.post(
            URL, {"group": "Admins", "kind": "role", "role": "admins", "reason": WHY}
        ).status_code
        == 302
    )
    response = client.post(
        URL, {"group": "admins", "kind": "role", "role": "admins", "reason": WHY}
    )
    assert response.status_code == 400
    assert "already gives this" in " ".join(response.context["form"].errors["group"])
    assert GroupMapping.objects.count() == 1


def _login(client, username, password="pw-for-tests-1"):
    return client.post(reverse("login"), {"username": username, "password": password})


def test_break_glass_lets_only_the_named_admins_use_a_password(client, settings):
    UserFactory(username="root-admin", roles=["admins"])
    UserFactory(username="named-lead", roles=["team_leads"])
    UserFactory(username="other-admin", roles=["admins"])
    settings.LOCAL_PASSWORD_LOGIN = False
    settings.BREAK_GLASS_USERS = ["root-admin", "named-lead"]
    # Named but not an admin, and an admin not named: both refused, like a wrong password.
    assert _login(client, "named-lead").status_code == 200
    assert _login(client, "other-admin").status_code == 200
    assert "_auth_user_id" not in client.session
    assert _login(client, "root-admin").status_code == 302
    assert password_login_allowed("root-admin")
    assert not password_login_allowed("other-admin")


def test_local_logins_are_unchanged_by_default(client, settings):
    assert settings.LOCAL_PASSWORD_LOGIN
    UserFactory(username="plain-lead", roles=["team_leads"])
    assert _login(client, "plain-lead").status_code == 302


def test_refused_break_glass_logins_count_towards_the_lockout(client, settings):
    UserFactory(username="other-admin", roles=["admins"])
    settings.LOCAL_PASSWORD_LOGIN = False
    settings.BREAK_GLASS_USERS = []
    for _ in range(settings.AXES_FAILURE_LIMIT):
        _login(client, "other-admin")
    assert _login(client, "other-admin").status_code == 429


def test_an_admin_maps_a_group_to_a_queues_exception_owners(client, admin, aws_queue):
    client.force_login(admin)
    data = {"group": "owners", "kind": "exception_owner", "queue": aws_queue.pk, "reason": WHY}
    assert client.post(URL, data).status_code == 302
    (mapping,) = GroupMapping.objects.all()
    assert mapping.queue == aws_queue and mapping.gives == "exception owner of queue aws-sample"
    assert "exception owner of queue" in client.get(URL).content.decode()


def test_mapping_edits_are_in_the_policy_history_and_revert(client, admin, settings):
    from governance.models import PolicyChange
    from governance.policy.services import policy_change_revert

    vision = TeamFactory(name="vision")
    client.force_login(admin)
    # Bad input records nothing.
    assert client.post(URL, {"group": "", "kind": "role", "role": "admins"}).status_code == 400
    assert not PolicyChange.objects.filter(target="group_mapping").exists()

    assert client.post(
        URL, {"group": "vision-leads", "kind": "team_lead", "team": vision.pk, "reason": WHY}
    )
    (added,) = PolicyChange.objects.filter(target="group_mapping")
    assert added.actor == admin and added.cause == "edit" and added.before is None
    assert added.after == {
        "group": "vision-leads",
        "kind": "team_lead",
        "role": "",
        "team": "vision",
        "queue": None,
        "gives": "lead of vision",
    }
    assert added.reason == WHY
    assert added.team == vision and added.object_repr == "vision-leads → lead of vision"

    mapping = GroupMapping.objects.get()
    removal = {f"remove-{mapping.pk}-reason": "the vision team is led by hand now"}
    url = reverse("directory-mapping-delete", args=[mapping.pk])
    assert client.post(url, removal).status_code == 302
    removed = PolicyChange.objects.filter(target="group_mapping").order_by("id").last()
    assert removed.actor == admin and removed.after is None
    assert removed.before == added.after
    assert removed.reason == "the vision team is led by hand now"
    assert not GroupMapping.objects.exists()

    # Who changed which mapping, before and after, on the history page.
    page = client.get(reverse("history")).content.decode()
    assert "Directory group mapping" in page and "vision-leads → lead of vision" in page

    # A removal reverted adds the mapping again; that addition reverted removes it.
    again = policy_change_revert(actor=admin, change=removed, reason="removed by mistake")
    mapping = GroupMapping.objects.get()
    assert (mapping.group, mapping.kind, mapping.team) == ("vision-leads", "team_lead", vision)
    assert again.entry.cause == "revert" and again.entry.reverts == removed
    policy_change_revert(actor=admin, change=again.entry, reason="it was right")
    assert not GroupMapping.objects.exists()
