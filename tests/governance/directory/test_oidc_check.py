"""What the periodic directory check does for OpenID Connect accounts, against the real
provider process (oidc-provider-mock 0.3.4 issues a refresh token at each login unless
started with --no-refresh-token, and its POST /users/<sub>/revoke-tokens makes it refuse
that refresh token with invalid_grant, as a provider does for a user removed, disabled or
whose grant was revoked): the refresh token kept encrypted, a granted refresh bringing the
groups now, a refused one unlisting the user (roles, teams, API tokens, open sessions), a
provider that does not answer (or answers 500 / invalid_client, from a token endpoint of
our own) taking nothing away, and the idle expiry of accounts without a refresh token.
Also the user's stable identity: found by (issuer, sub), a renamed username keeps its
account, another sub with a held username is refused."""

from __future__ import annotations

import json
import threading
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.contrib.auth import get_user_model
from django.contrib.sessions.models import Session
from django.urls import reverse
from django.utils import timezone

from accounts.models import ApiToken
from accounts.tokens import token_issue
from core.permissions import user_roles
from governance.directory.models import DirectoryAccount, GroupMapping
from governance.directory.secrets import reveal
from governance.directory.tasks import sync_directory, sync_oidc_accounts
from governance.models import PolicyChange
from tests.factories import TeamFactory
from tests.governance.directory.oidc_provider import configure_for, follow

pytestmark = [pytest.mark.sso, pytest.mark.django_db]
User = get_user_model()
Kind = GroupMapping.Kind


def sign_in(client, provider, sub: str, **claims):
    provider.person(sub, **claims)
    return follow(
        client, provider, "http://testserver" + reverse("oidc_authentication_init"), sub=sub
    )


def signed_in_as(client) -> str | None:
    user_id = client.session.get("_auth_user_id")
    return User.objects.get(pk=user_id).username if user_id else None


def roles_of(username: str) -> set[str]:
    return set(user_roles(User.objects.get(username=username)))


@pytest.fixture
def mapped():
    vision = TeamFactory(name="vision")
    GroupMapping.objects.create(group="gpu-admins", kind=Kind.ROLE, role="admins")
    GroupMapping.objects.create(group="vision-people", kind=Kind.TEAM_MEMBER, team=vision)
    GroupMapping.objects.create(group="deciders", kind=Kind.ROLE, role="exception_owners")
    return vision


def test_the_refresh_token_is_kept_encrypted_and_server_side_only(client, oidc_login):
    sign_in(client, oidc_login, "sub-kim", preferred_username="kim", groups=[])
    assert signed_in_as(client) == "kim"
    account = DirectoryAccount.objects.get(user__username="kim")
    assert (account.issuer, account.subject) == (oidc_login.issuer, "sub-kim")
    secret = reveal(account.refresh_token)
    assert secret and secret not in account.refresh_token
    # Neither in the session nor in a page.
    session = Session.objects.get(session_key=client.session.session_key).get_decoded()
    assert secret not in json.dumps(session)
    assert secret not in client.get(reverse("home"), follow=True).content.decode()
    # Another SECRET_KEY cannot read it (a database dump alone gives nothing).
    from django.test import override_settings

    with override_settings(SECRET_KEY="another-key-" * 4):
        assert reveal(account.refresh_token) == ""


def test_a_granted_refresh_brings_the_groups_the_provider_lists_now(client, oidc_login, mapped):
    sign_in(client, oidc_login, "sub-ola", preferred_username="ola", groups=["gpu-admins"])
    assert roles_of("ola") == {"admins"}
    # At the provider: ola leaves gpu-admins, joins deciders and vision-people. No login.
    oidc_login.person("sub-ola", preferred_username="ola", groups=["deciders", "vision-people"])
    counts = sync_directory()["oidc"]
    assert counts["checked"] == 1 and counts["unlisted"] == 0 and counts["changes"] == 2
    assert roles_of("ola") == {"exception_owners"}
    assert [u.username for u in mapped.members.all()] == ["ola"]
    role_change = (
        PolicyChange.objects.filter(cause="directory", target="role").order_by("id").last()
    )
    assert "OpenID Connect periodic check of ola" in role_change.reason
    assert "exception_owners from group deciders" in role_change.reason
    assert signed_in_as(client) == "ola"  # still listed: the session stays
    # Nothing changed since: the next check records nothing.
    assert sync_oidc_accounts()["changes"] == 0


def test_a_refused_refresh_unlists_the_user_tokens_and_sessions_go(client, oidc_login, mapped):
    sign_in(
        client,
        oidc_login,
        "sub-uma",
        preferred_username="uma",
        groups=["gpu-admins", "vision-people"],
    )
    uma = User.objects.get(username="uma")
    _, key = token_issue(user=uma, name="ci")
    api = client.__class__()
    assert api.get("/api/v1/teams/", HTTP_AUTHORIZATION=f"Token {key}").status_code == 200
    other = client.__class__()  # someone else's open session stays
    sign_in(other, oidc_login, "sub-vic", preferred_username="vic", groups=["gpu-admins"])

    oidc_login.revoke("sub-uma")  # the provider's admin removes uma's access
    counts = sync_oidc_accounts()
    assert counts["checked"] == 2 and counts["unlisted"] == 1
    assert roles_of("uma") == set() and list(mapped.members.all()) == []
    assert not ApiToken.objects.filter(user=uma, revoked_at__isnull=True).exists()
    assert api.get("/api/v1/teams/", HTTP_AUTHORIZATION=f"Token {key}").status_code == 401
    account = DirectoryAccount.objects.get(user=uma)
    assert not account.listed and account.refresh_token == ""
    # uma's open browser is signed out; vic's is not.
    assert signed_in_as(client) is None
    assert client.get(reverse("home"))["Location"].startswith(reverse("login"))
    assert signed_in_as(other) == "vic" and roles_of("vic") == {"admins"}
    reasons = " ".join(
        PolicyChange.objects.filter(cause="directory", subject=uma).values_list("reason", flat=True)
    )
    assert "periodic check of uma" in reasons and "no longer lists them" in reasons
    # Checked again: uma is not asked about any more, nothing more is written.
    before = PolicyChange.objects.count()
    assert sync_oidc_accounts()["unlisted"] == 0
    assert PolicyChange.objects.count() == before

    # uma signs in again (the provider lists them again): the groups give back the roles.
    sign_in(client, oidc_login, "sub-uma", preferred_username="uma", groups=["gpu-admins"])
    assert signed_in_as(client) == "uma" and roles_of("uma") == {"admins"}
    account.refresh_from_db()
    assert account.listed and reveal(account.refresh_token)


class _TokenEndpoint(BaseHTTPRequestHandler):
    status = 500
    body: dict = {}

    def do_POST(self):  # noqa: N802
        body = json.dumps(self.body).encode()
        self.send_response(self.status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def token_endpoint():
    handler = type("Token", (_TokenEndpoint,), {})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    handler.url = f"http://127.0.0.1:{server.server_port}/token"
    yield handler
    server.shutdown()
    server.server_close()


def test_a_provider_that_does_not_answer_takes_nothing_away(
    client, oidc_login, mapped, settings, token_endpoint
):
    sign_in(client, oidc_login, "sub-dan", preferred_username="dan", groups=["gpu-admins"])
    dan = User.objects.get(username="dan")
    token_issue(user=dan, name="deploys")
    before = PolicyChange.objects.count()
    answers = {
        "nothing listens": ("http://127.0.0.1:9/token", None, None),
        "500": (token_endpoint.url, 500, {"error": "server_error"}),
        "invalid_client (our configuration, not the user)": (
            token_endpoint.url,
            401,
            {"error": "invalid_client"},
        ),
    }
    for why, (url, status, body) in answers.items():
        token_endpoint.status, token_endpoint.body = status, body
        settings.OIDC_OP_TOKEN_ENDPOINT = url
        assert sync_oidc_accounts()["checked"] == 0, why
        assert roles_of("dan") == {"admins"}, why
        assert ApiToken.objects.filter(user=dan, revoked_at__isnull=True).count() == 1, why
        assert DirectoryAccount.objects.get(user=dan).listed, why
        assert signed_in_as(client) == "dan", why
    assert PolicyChange.objects.count() == before
    # The same refusal as the provider's, from our endpoint: unlisted.
    token_endpoint.status, token_endpoint.body = 400, {"error": "invalid_grant"}
    assert sync_oidc_accounts()["unlisted"] == 1 and roles_of("dan") == set()


def test_without_a_refresh_token_an_idle_account_loses_its_api_tokens(
    client, settings, oidc_provider_without_refresh, mapped
):
    provider = oidc_provider_without_refresh
    for _ in configure_for(settings, provider):
        sign_in(client, provider, "sub-ida", preferred_username="ida", groups=["gpu-admins"])
        sign_in(
            client.__class__(), provider, "sub-ivo", preferred_username="ivo", groups=["gpu-admins"]
        )
        ida, ivo = User.objects.get(username="ida"), User.objects.get(username="ivo")
        assert DirectoryAccount.objects.get(user=ida).refresh_token == ""
        for user in (ida, ivo):
            token_issue(user=user, name="ci")
        settings.OIDC_MAX_IDLE_HOURS = 720
        # ida last signed in 721 hours ago, ivo 719.
        User.objects.filter(pk=ida.pk).update(last_login=timezone.now() - timedelta(hours=721))
        User.objects.filter(pk=ivo.pk).update(last_login=timezone.now() - timedelta(hours=719))
        counts = sync_oidc_accounts()
        assert counts == {"checked": 0, "unlisted": 0, "changes": 0, "idle_expired": 1}
        assert not ApiToken.objects.filter(user=ida, revoked_at__isnull=True).exists()
        assert ApiToken.objects.filter(user=ivo, revoked_at__isnull=True).count() == 1
        # Roles and teams stay until the next login brings the provider's groups.
        assert roles_of("ida") == {"admins"}
        assert DirectoryAccount.objects.get(user=ida).listed
        assert sync_oidc_accounts()["idle_expired"] == 0  # nothing left to expire


# The stable identity: (issuer, sub).


def test_a_changed_username_claim_keeps_the_same_account(client, oidc_login, mapped):
    sign_in(client, oidc_login, "sub-rae", preferred_username="rae", groups=["gpu-admins"])
    rae = User.objects.get(username="rae")
    _, key = token_issue(user=rae, name="ci")
    client.post(reverse("logout"))
    sign_in(client, oidc_login, "sub-rae", preferred_username="rae.new", groups=["gpu-admins"])
    assert signed_in_as(client) == "rae.new"
    renamed = User.objects.get(pk=rae.pk)
    assert renamed.username == "rae.new" and not User.objects.filter(username="rae").exists()
    assert roles_of("rae.new") == {"admins"}
    api = client.__class__()
    assert api.get("/api/v1/teams/", HTTP_AUTHORIZATION=f"Token {key}").status_code == 200


def test_another_sub_with_a_held_username_is_refused(client, oidc_login, mapped, caplog):
    sign_in(client, oidc_login, "sub-ann", preferred_username="ann", groups=["gpu-admins"])
    ann = User.objects.get(username="ann")
    client.post(reverse("logout"))
    other = client.__class__()
    response, visited = sign_in(
        other, oidc_login, "sub-impostor", preferred_username="ann", groups=["deciders"]
    )
    assert signed_in_as(other) is None
    assert visited[-1] == "http://testserver" + reverse("login")
    page = response.content.decode()
    assert "names the username ann, which another person" in page
    assert (
        "'sub-impostor'" in caplog.text
        and "belongs to the provider's user 'sub-ann'" in caplog.text
    )
    assert roles_of("ann") == {"admins"}
    assert DirectoryAccount.objects.get(user=ann).subject == "sub-ann"
    assert User.objects.filter(username="ann").count() == 1

    # A rename onto a username another account holds: refused too, nothing renamed.
    sign_in(client, oidc_login, "sub-bo", preferred_username="bo", groups=[])
    client.post(reverse("logout"))
    response, _ = sign_in(client, oidc_login, "sub-bo", preferred_username="ann", groups=[])
    assert signed_in_as(client) is None
    assert "changed to ann, which another account holds" in response.content.decode()
    assert User.objects.filter(username="bo").exists()


def test_an_account_from_before_subs_were_kept_adopts_its_sub(client, oidc_login):
    sign_in(client, oidc_login, "sub-old", preferred_username="old", groups=[])
    DirectoryAccount.objects.filter(user__username="old").update(issuer="", subject="")
    client.post(reverse("logout"))
    sign_in(client, oidc_login, "sub-old", preferred_username="old", groups=[])
    assert signed_in_as(client) == "old"
    assert DirectoryAccount.objects.get(user__username="old").subject == "sub-old"
