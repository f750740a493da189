"""LDAP login against a real slapd (scripts/ldap/slapd.sh): bind, user search, nested
groups to roles and teams, a directory change applied at the next login with its
history entry, separation of duties, a removed user's roles and tokens gone after the
periodic check (their open sessions ended), the lockout on the LDAP path, API tokens of
directory users, StartTLS checked against the directory's CA."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse
from django.utils import timezone

from accounts.models import ApiToken
from accounts.tokens import token_issue
from core import rules
from core.permissions import user_roles
from fleet.models import InstanceType
from governance.directory.ldap import DirectoryUnavailable, ldap_check
from governance.directory.models import DirectoryAccount, GroupMapping
from governance.directory.tasks import sync_ldap_accounts
from governance.exceptions import services as exception_services
from governance.models import ExceptionOwner, ExceptionRequest, PolicyChange
from tests.factories import JobQueueFactory, TeamFactory, UrgencyDefinitionFactory, UserFactory

pytestmark = [pytest.mark.sso, pytest.mark.django_db]
User = get_user_model()
Kind = GroupMapping.Kind


def login(client, username, password):
    """The login page's POST, as a browser sends it; the response."""
    return client.post(reverse("login"), {"username": username, "password": password})


def signed_in(client) -> bool:
    return "_auth_user_id" in client.session


def roles_of(username: str) -> set[str]:
    return set(user_roles(User.objects.get(username=username)))


def directory_changes(username: str):
    return PolicyChange.objects.filter(
        cause=PolicyChange.Cause.DIRECTORY, reason__contains=f" of {username})"
    ).order_by("id")


def test_bind_and_user_search(client, ldap_login):
    response = login(client, "bob", ldap_login.password)
    assert response.status_code == 302 and signed_in(client)
    bob = User.objects.get(username="bob")
    assert (bob.first_name, bob.last_name, bob.email) == ("Bob", "Member", "bob@gpuq.test")
    assert not bob.has_usable_password()  # the directory's password, never a local one
    account = DirectoryAccount.objects.get(user=bob)
    assert account.source == "ldap" and account.listed
    assert "vision" in account.groups


def test_a_wrong_password_and_an_unknown_user_are_refused(client, ldap_login):
    assert login(client, "bob", "not-the-password").status_code == 200
    assert login(client, "nobody-here", ldap_login.password).status_code == 200
    assert not signed_in(client)
    assert not User.objects.filter(username="nobody-here").exists()


def test_a_nested_group_gives_a_role_and_team_lead(client, ldap_login):
    vision = TeamFactory(name="vision")
    # team-leads holds the group vision-leads, which holds alice: nested, two levels.
    GroupMapping.objects.create(group="team-leads", kind=Kind.ROLE, role="team_leads")
    GroupMapping.objects.create(group="vision-leads", kind=Kind.TEAM_LEAD, team=vision)
    GroupMapping.objects.create(group="vision", kind=Kind.TEAM_MEMBER, team=vision)

    assert login(client, "alice", ldap_login.password).status_code == 302
    assert roles_of("alice") == {"team_leads"}
    alice = User.objects.get(username="alice")
    assert list(vision.leads.all()) == [alice]
    assert list(vision.members.all()) == [alice]  # vision holds vision-leads too
    role_change, team_change = directory_changes("alice")
    assert role_change.target == "role" and role_change.subject == alice
    assert role_change.actor is None
    assert role_change.after["roles"] == ["team_leads"]
    assert "team_leads from group team-leads" in role_change.reason
    assert team_change.target == "team" and team_change.team == vision
    assert team_change.after["leads"] == ["alice"] and team_change.before["leads"] == []
    assert "lead of vision from group vision-leads" in team_change.reason
    # A second login with nothing changed in the directory records nothing.
    client.logout()
    assert login(client, "alice", ldap_login.password).status_code == 302
    assert directory_changes("alice").count() == 2


def test_a_membership_change_applies_at_the_next_login(client, ldap_login):
    d = ldap_login
    research = TeamFactory(name="research")
    uid = d.person("frank")
    members = d.group("research-people", d.person_dn(uid), d.person_dn("erin"))
    owners = d.group("owners", d.group_dn(d.group("owner-core", d.person_dn("carol"))))
    GroupMapping.objects.create(group=members, kind=Kind.TEAM_MEMBER, team=research)
    GroupMapping.objects.create(group=owners, kind=Kind.ROLE, role="exception_owners")

    assert login(client, uid, d.password).status_code == 302
    frank = User.objects.get(username=uid)
    assert roles_of(uid) == set() and list(research.members.all()) == [frank]

    # In the directory: frank leaves research-people and joins the owners' group.
    d.leave(members, d.person_dn(uid))
    d.join(owners, d.person_dn(uid))
    client.logout()
    assert login(client, uid, d.password).status_code == 302
    assert roles_of(uid) == {"exception_owners"}
    assert list(research.members.all()) == []
    *_, role_change, team_change = directory_changes(uid)
    assert role_change.before["roles"] == [] and role_change.after["roles"] == ["exception_owners"]
    assert f"exception_owners from group {owners}" in role_change.reason
    assert team_change.before["members"] == [uid] and team_change.after["members"] == []
    assert "no longer member of research (no group of theirs)" in team_change.reason


def test_separation_of_duties_sees_a_directory_membership_at_once(client, ldap_login, aws_queue):
    d = ldap_login
    team = aws_queue.shares.get(name="qs1").team
    uid = d.person("olga")
    owners = d.group("deciders", d.person_dn(uid))
    qs1 = d.group("qs1-people", d.person_dn("bob"))
    GroupMapping.objects.create(group=owners, kind=Kind.ROLE, role="exception_owners")
    GroupMapping.objects.create(group=owners, kind=Kind.EXCEPTION_OWNER, queue=aws_queue)
    GroupMapping.objects.create(group=qs1, kind=Kind.TEAM_MEMBER, team=team)
    assert login(client, uid, d.password).status_code == 302
    olga = User.objects.get(username=uid)
    assert ExceptionOwner.objects.filter(user=olga, queue=aws_queue).exists()
    scope_change = directory_changes(uid).last()
    assert scope_change.after["exception_owner_of"] == [f"queue {aws_queue.name}"]
    assert f"exception owner of queue {aws_queue.name} from group {owners}" in scope_change.reason
    lead = UserFactory(username="lead-qs1", roles=["team_leads"])
    team.leads.add(lead)
    now = timezone.now()
    filed = exception_services.exception_request_create(
        actor=lead,
        data=exception_services.RequestData(
            kind=ExceptionRequest.Kind.TEMPORARY_CAPACITY,
            team=team,
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
    assert rules.allowed(User.objects.get(pk=olga.pk), "exception.decide", filed)

    d.join(qs1, d.person_dn(uid))  # olga joins the team in the directory
    client.logout()
    assert login(client, uid, d.password).status_code == 302
    with pytest.raises(rules.Refused, match=f"you belong to team {team.name}"):
        exception_services.exception_request_approve(
            actor=User.objects.get(pk=olga.pk), request=filed
        )


def test_a_user_removed_from_the_directory_loses_roles_tokens_and_sessions(client, ldap_login):
    d = ldap_login
    vision = TeamFactory(name="vision")
    uid = d.person("gina")
    admins = d.group("gpu-admins", d.person_dn(uid), d.person_dn("erin"))
    GroupMapping.objects.create(group=admins, kind=Kind.ROLE, role="admins")
    GroupMapping.objects.create(group=admins, kind=Kind.TEAM_LEAD, team=vision)
    queue = JobQueueFactory(name="gina-queue")
    GroupMapping.objects.create(group=admins, kind=Kind.EXCEPTION_OWNER, queue=queue)
    assert login(client, uid, d.password).status_code == 302
    assert roles_of(uid) == {"admins"}
    assert ExceptionOwner.objects.filter(user__username=uid, queue=queue).exists()
    # A directory user's API token works like a local one's.
    response = client.post(
        reverse("api-token-list"), {"name": "ci"}, content_type="application/json"
    )
    assert response.status_code == 201, response.content
    key = response.json()["token"]
    api = client.__class__()
    assert api.get("/api/v1/teams/", HTTP_AUTHORIZATION=f"Token {key}").status_code == 200
    # erin is signed in too, in a browser of her own.
    erin = client.__class__()
    assert login(erin, "erin", d.password).status_code == 302

    # A check while the user is still listed changes nothing, and ends no session.
    assert sync_ldap_accounts()["unlisted"] == 0
    assert roles_of(uid) == {"admins"}
    assert not client.get(reverse("home"))["Location"].startswith(reverse("login"))

    d.leave(admins, d.person_dn(uid))
    d.delete(d.person_dn(uid))
    assert ldap_check(uid) is None
    counts = sync_ldap_accounts()
    assert counts["unlisted"] == 1
    gina = User.objects.get(username=uid)
    assert roles_of(uid) == set()
    assert [u.username for u in vision.leads.all()] == ["erin"]  # still listed, still lead
    assert not ExceptionOwner.objects.filter(user=gina).exists()
    assert not ApiToken.objects.filter(user=gina, revoked_at__isnull=True).exists()
    assert api.get("/api/v1/teams/", HTTP_AUTHORIZATION=f"Token {key}").status_code == 401
    assert not DirectoryAccount.objects.get(user=gina).listed
    # gina's open browser is signed out at its next request; erin's is not.
    assert client.session.get("_auth_user_id") is None
    assert client.get(reverse("home"))["Location"].startswith(reverse("login"))
    assert erin.session.get("_auth_user_id") is not None
    role_change = directory_changes(uid).filter(target="role").last()
    assert "periodic check" in role_change.reason
    assert "the directory no longer lists them" in role_change.reason
    # And the directory's password no longer signs them in.
    assert login(client, uid, d.password).status_code == 200


def test_an_unreachable_directory_takes_nothing_away(client, ldap_login, settings):
    GroupMapping.objects.create(group="platform-admins", kind=Kind.ROLE, role="admins")
    assert login(client, "dana", ldap_login.password).status_code == 302
    dana = User.objects.get(username="dana")
    token_issue(user=dana, name="deploys")
    settings.AUTH_LDAP_SERVER_URI = "ldap://127.0.0.1:9"  # nothing listens there
    with pytest.raises(DirectoryUnavailable):
        ldap_check("dana")
    assert sync_ldap_accounts()["checked"] == 0
    assert roles_of("dana") == {"admins"}
    assert ApiToken.objects.filter(user=dana, revoked_at__isnull=True).count() == 1


def test_the_lockout_applies_to_the_ldap_login(client, ldap_login, settings):
    for _ in range(settings.AXES_FAILURE_LIMIT):
        login(client, "erin", "wrong-password")
    response = login(client, "erin", ldap_login.password)
    assert response.status_code == 429
    assert not signed_in(client)
    assert not User.objects.filter(username="erin").exists()


def test_break_glass_keeps_named_admins_and_the_directory(client, ldap_login, settings):
    settings.LOCAL_PASSWORD_LOGIN = False
    settings.BREAK_GLASS_USERS = ["root-admin"]
    UserFactory(username="root-admin", roles=["admins"], password="pw-for-tests-1")
    UserFactory(username="local-lead", roles=["team_leads"], password="pw-for-tests-1")
    assert login(client, "local-lead", "pw-for-tests-1").status_code == 200
    assert not signed_in(client)
    assert login(client, "root-admin", "pw-for-tests-1").status_code == 302
    client.logout()
    assert login(client, "erin", ldap_login.password).status_code == 302
    assert roles_of("erin") == set()


def test_a_break_glass_admin_never_signs_in_through_the_directory(client, ldap_login, settings):
    settings.BREAK_GLASS_USERS = ["dana"]  # dana is in the directory too
    assert login(client, "dana", ldap_login.password).status_code == 200
    assert not User.objects.filter(username="dana").exists()


def test_a_removed_users_next_login_is_the_check(client, ldap_login):
    d = ldap_login
    uid = d.person("hank")
    leaders = d.group("leaders", d.person_dn(uid), d.person_dn("erin"))
    GroupMapping.objects.create(group=leaders, kind=Kind.ROLE, role="leadership")
    assert login(client, uid, d.password).status_code == 302
    hank = User.objects.get(username=uid)
    token_issue(user=hank, name="reports")
    client.logout()
    # A wrong password while still listed changes nothing.
    assert login(client, uid, "wrong-password").status_code == 200
    assert roles_of(uid) == {"leadership"}

    d.delete(d.person_dn(uid))
    assert login(client, uid, d.password).status_code == 200
    assert roles_of(uid) == set()
    assert not ApiToken.objects.filter(user=hank, revoked_at__isnull=True).exists()
    change = directory_changes(uid).last()
    assert "LDAP login of" in change.reason and "no longer lists them" in change.reason


def test_a_local_account_is_not_taken_over_by_a_directory_entry_of_its_name(client, ldap_login):
    UserFactory(username="carol", password="pw-for-tests-1", roles=["admins"])
    assert login(client, "carol", ldap_login.password).status_code == 200
    assert not DirectoryAccount.objects.filter(user__username="carol").exists()
    assert login(client, "carol", "pw-for-tests-1").status_code == 302  # the local password
    assert roles_of("carol") == {"admins"}


def _tls_settings(settings, directory, **tls):
    from config.ldap_settings import ldap_settings

    for name, value in ldap_settings(
        server_uri=directory.uri,
        bind_dn=directory.bind_dn,
        bind_password=directory.bind_password,
        user_search_base=directory.people,
        group_search_base=directory.groups,
        **tls,
    ).items():
        setattr(settings, name, value)


def test_start_tls_checks_the_directorys_certificate(
    client, ldap_login, ldap_server, settings, tmp_path
):
    """LDAP_START_TLS=1 and LDAP_CA_CERT_FILE against the test slapd's certificate (signed
    by a CA scripts/ldap/slapd.sh makes with openssl at each start)."""
    import subprocess

    ca = ldap_server.get("LDAP_TEST_CA_CERT")
    if not ca:
        from tests.conftest import REQUIRE_SERVICES

        why = "the test directory has no TLS (openssl missing when slapd.sh started)"
        if REQUIRE_SERVICES:
            pytest.fail(f"REQUIRE_SERVICES=1 but {why}", pytrace=False)
        pytest.skip(f"needs sso: {why}")
    GroupMapping.objects.create(group="platform-admins", kind=Kind.ROLE, role="admins")
    _tls_settings(settings, ldap_login, start_tls=True, ca_cert_file=ca)
    assert login(client, "dana", ldap_login.password).status_code == 302
    assert roles_of("dana") == {"admins"}
    assert ldap_check("dana") is not None
    client.logout()

    # Another CA (one this test makes): the certificate is refused, no login, no check.
    other = tmp_path / "other-ca.pem"
    subprocess.run(
        [
            "openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
            "-subj", "/CN=another CA", "-keyout", str(tmp_path / "k"), "-out", str(other),
        ],
        check=True,
        capture_output=True,
    )  # fmt: skip
    _tls_settings(settings, ldap_login, start_tls=True, ca_cert_file=str(other))
    assert login(client, "dana", ldap_login.password).status_code == 200
    assert not signed_in(client)
    with pytest.raises(DirectoryUnavailable):
        ldap_check("dana")
    assert sync_ldap_accounts()["checked"] == 0  # nothing taken away
    assert roles_of("dana") == {"admins"}

    # The same wrong CA with LDAP_TLS_REQUIRE_CERT=never (tests only): the certificate is
    # not checked, so it connects; only saying so turns the check off.
    _tls_settings(
        settings, ldap_login, start_tls=True, ca_cert_file=str(other), require_cert="never"
    )
    assert ldap_check("dana") is not None
