"""OpenID Connect login against a real provider process (oidc-provider-mock on loopback;
tests/governance/directory/oidc_provider.py): discovery, the authorization-code flow with
PKCE, state and nonce, the groups claim to roles and teams through the directory mapping
with its history, a second login with other groups, forged and replayed callbacks
refused, local and break-glass accounts never taken over, API tokens of OIDC users, and
RP-initiated logout. The JWKS-by-kid choice of the signing key is tested with keys made
here (the provider's tokens carry no kid)."""

from __future__ import annotations

import base64
import hashlib
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from django.contrib.auth import get_user_model
from django.core.exceptions import SuspiciousOperation
from django.urls import reverse

from core.permissions import user_roles
from governance.directory.models import DirectoryAccount, GroupMapping
from governance.directory.oidc import DirectoryOIDCBackend
from governance.models import PolicyChange
from tests.factories import TeamFactory, UserFactory
from tests.governance.directory.oidc_provider import (
    CLIENT_ID,
    follow,
    query_of,
)

pytestmark = [pytest.mark.sso, pytest.mark.django_db]
User = get_user_model()
Kind = GroupMapping.Kind


def sign_in(client, provider, sub: str, **claims):
    """The whole journey: the login page's button, the provider's authorize page (as
    `sub`, whose claims are set first), the callback; the last response and the URLs."""
    provider.person(sub, **claims)
    page = client.get(reverse("login"))
    assert b'id="oidc-login"' in page.content
    return follow(
        client, provider, "http://testserver" + reverse("oidc_authentication_init"), sub=sub
    )


def signed_in_as(client) -> str | None:
    user_id = client.session.get("_auth_user_id")
    return User.objects.get(pk=user_id).username if user_id else None


def roles_of(username: str) -> set[str]:
    return set(user_roles(User.objects.get(username=username)))


def directory_changes(username: str):
    return PolicyChange.objects.filter(
        cause=PolicyChange.Cause.DIRECTORY, reason__contains=f" of {username})"
    ).order_by("id")


def test_off_by_default_no_button_and_no_oidc_pages(client, settings):
    assert settings.OIDC_ENABLED is False
    assert "governance.directory.oidc.DirectoryOIDCBackend" not in settings.AUTHENTICATION_BACKENDS
    page = client.get(reverse("login"))
    assert page.status_code == 200 and b"Sign in with" not in page.content
    assert client.get(reverse("oidc_authentication_init")).status_code == 404
    assert client.get(reverse("oidc_authentication_callback")).status_code == 404


def test_sign_in_lands_with_the_roles_the_groups_claim_gives(client, oidc_login):
    vision = TeamFactory(name="vision")
    GroupMapping.objects.create(group="gpu-admins", kind=Kind.ROLE, role="admins")
    GroupMapping.objects.create(group="vision-people", kind=Kind.TEAM_MEMBER, team=vision)
    GroupMapping.objects.create(group="unrelated", kind=Kind.ROLE, role="leadership")

    page = client.get(reverse("login"))
    assert "Sign in with Example SSO" in page.content.decode()
    response, visited = sign_in(
        client,
        oidc_login,
        "sub-olga-1",
        preferred_username="olga",
        email="olga@gpuq.test",
        given_name="Olga",
        family_name="Ops",
        groups=["gpu-admins", "vision-people"],
    )
    assert response.status_code == 200, visited
    # Back from the provider, through the callback, on the home page (an admin's: queues).
    assert visited[-3].startswith("http://testserver" + reverse("oidc_authentication_callback"))
    assert visited[-2] == "http://testserver" + reverse("home")
    assert signed_in_as(client) == "olga"

    # The authorization request: code flow, PKCE S256, a state and a nonce.
    authorize = query_of(next(url for url in visited if "/oauth2/authorize" in url))
    assert authorize["response_type"] == "code" and authorize["client_id"] == CLIENT_ID
    assert authorize["code_challenge_method"] == "S256"
    assert len(authorize["code_challenge"]) == 43 and authorize["state"] and authorize["nonce"]
    assert set(authorize["scope"].split()) == {"openid", "email", "profile"}

    olga = User.objects.get(username="olga")
    assert (olga.email, olga.first_name, olga.last_name) == ("olga@gpuq.test", "Olga", "Ops")
    assert not olga.has_usable_password()
    assert roles_of("olga") == {"admins"}
    assert list(vision.members.all()) == [olga]
    account = DirectoryAccount.objects.get(user=olga)
    assert account.source == "oidc" and account.groups == ["gpu-admins", "vision-people"]
    role_change, team_change = directory_changes("olga")
    assert role_change.after["roles"] == ["admins"] and role_change.actor is None
    assert "directory (OpenID Connect login of olga)" in role_change.reason
    assert "admins from group gpu-admins" in role_change.reason
    assert team_change.team == vision and team_change.after["members"] == ["olga"]


def test_the_code_verifier_is_the_challenge_sent(client, oidc_login):
    start = client.get(reverse("oidc_authentication_init"))
    challenge = query_of(start["Location"])
    stored = client.session["oidc_states"][challenge["state"]]
    digest = hashlib.sha256(stored["code_verifier"].encode()).digest()
    assert base64.urlsafe_b64encode(digest).rstrip(b"=").decode() == challenge["code_challenge"]
    assert stored["nonce"] == challenge["nonce"]


def test_a_second_login_with_other_groups_changes_roles_and_records_history(client, oidc_login):
    research = TeamFactory(name="research")
    GroupMapping.objects.create(group="research", kind=Kind.TEAM_LEAD, team=research)
    GroupMapping.objects.create(group="deciders", kind=Kind.ROLE, role="exception_owners")
    GroupMapping.objects.create(group="leads", kind=Kind.ROLE, role="team_leads")
    claims = {"preferred_username": "pia", "email": "pia@gpuq.test"}

    response, _ = sign_in(client, oidc_login, "sub-pia", groups=["research", "leads"], **claims)
    assert response.status_code == 200 and signed_in_as(client) == "pia"
    assert roles_of("pia") == {"team_leads"}
    assert [u.username for u in research.leads.all()] == ["pia"]
    first = directory_changes("pia").count()

    # The same groups again: nothing to record.
    client.post(reverse("logout"))
    sign_in(client, oidc_login, "sub-pia", groups=["research", "leads"], **claims)
    assert directory_changes("pia").count() == first

    # At the provider: pia leaves research and leads, joins deciders.
    client.post(reverse("logout"))
    response, _ = sign_in(client, oidc_login, "sub-pia", groups=["deciders"], **claims)
    assert response.status_code == 200 and signed_in_as(client) == "pia"
    assert roles_of("pia") == {"exception_owners"}
    assert list(research.leads.all()) == []
    *_, role_change, team_change = directory_changes("pia")
    assert role_change.before["roles"] == ["team_leads"]
    assert role_change.after["roles"] == ["exception_owners"]
    assert "exception_owners from group deciders" in role_change.reason
    assert "team_leads removed (no group of theirs)" in role_change.reason
    assert team_change.before["leads"] == ["pia"] and team_change.after["leads"] == []
    assert DirectoryAccount.objects.get(user__username="pia").groups == ["deciders"]


def test_a_forged_callback_is_refused(client, oidc_login):
    oidc_login.person("sub-mallory", preferred_username="mallory", groups=[])
    # A state this session never started.
    response = client.get(reverse("oidc_authentication_callback"), {"code": "x", "state": "y"})
    assert response.status_code == 302 and response["Location"] == reverse("login")
    assert signed_in_as(client) is None

    # A real code, but started by another browser: this session has no such state.
    other = client.__class__()
    start = other.get(reverse("oidc_authentication_init"))
    client.get(reverse("oidc_authentication_init"))  # this session has a state of its own
    callback = _authorized(oidc_login, start["Location"], "sub-mallory")
    response = client.get(reverse("oidc_authentication_callback"), query_of(callback))
    assert response.status_code == 400 and signed_in_as(client) is None

    # The right state, but the nonce in the ID token is not the one this session sent.
    start = client.get(reverse("oidc_authentication_init"))
    state = query_of(start["Location"])["state"]
    session = client.session
    session["oidc_states"][state]["nonce"] = "not-the-nonce-sent"
    session.save()
    callback = _authorized(oidc_login, start["Location"], "sub-mallory")
    response = client.get(reverse("oidc_authentication_callback"), query_of(callback))
    assert response.status_code == 400 and signed_in_as(client) is None

    # A genuine callback works once; replayed, its state is gone.
    start = client.get(reverse("oidc_authentication_init"))
    callback = _authorized(oidc_login, start["Location"], "sub-mallory")
    assert (
        client.get(reverse("oidc_authentication_callback"), query_of(callback)).status_code == 302
    )
    assert signed_in_as(client) == "mallory"
    client.logout()
    client.get(reverse("oidc_authentication_init"))
    replay = client.get(reverse("oidc_authentication_callback"), query_of(callback))
    assert replay.status_code == 400 and signed_in_as(client) is None


def _authorized(provider, authorize_url: str, sub: str) -> str:
    """The provider's redirect back to the product after `sub` authorized."""
    import requests

    answer = requests.post(authorize_url, data={"sub": sub}, allow_redirects=False, timeout=10)
    assert answer.status_code == 302, answer.text
    return answer.headers["Location"]


def test_a_local_account_and_a_break_glass_admin_are_never_taken_over(client, oidc_login, settings):
    UserFactory(username="lena", roles=["team_leads"], password="pw-for-tests-1")
    GroupMapping.objects.create(group="gpu-admins", kind=Kind.ROLE, role="admins")
    response, visited = sign_in(
        client, oidc_login, "sub-lena", preferred_username="lena", groups=["gpu-admins"]
    )
    assert signed_in_as(client) is None
    assert visited[-1] == "http://testserver" + reverse("login")
    assert "did not succeed" in response.content.decode()
    assert roles_of("lena") == {"team_leads"}
    assert not DirectoryAccount.objects.filter(user__username="lena").exists()

    settings.BREAK_GLASS_USERS = ["root-admin"]
    sign_in(client, oidc_login, "sub-root", preferred_username="root-admin", groups=["gpu-admins"])
    assert signed_in_as(client) is None
    assert not User.objects.filter(username="root-admin").exists()

    # A groups claim that is not a list of names: refused before anything is written.
    sign_in(client, oidc_login, "sub-odd", preferred_username="odd", groups=[1, 2])
    assert signed_in_as(client) is None and not User.objects.filter(username="odd").exists()

    # No username claim: refused, no account made.
    sign_in(client, oidc_login, "sub-anon", email="anon@gpuq.test", groups=["gpu-admins"])
    assert signed_in_as(client) is None and not User.objects.filter(email="anon@gpuq.test").exists()


def test_failed_callbacks_lock_no_address_out(client, oidc_login, settings):
    """Failed OIDC logins carry no username for the lockout to count them by: they must
    not lock out everyone's OIDC login from that address (the provider locks out)."""
    UserFactory(username="lena", password="pw-for-tests-1")
    for _ in range(settings.AXES_FAILURE_LIMIT + 1):
        sign_in(client, oidc_login, "sub-lena", preferred_username="lena", groups=[])
        assert signed_in_as(client) is None
    response, visited = sign_in(client, oidc_login, "sub-ok", preferred_username="okay", groups=[])
    assert response.status_code != 429, visited
    assert signed_in_as(client) == "okay"
    # A password login with ?code=&state= in its URL never reaches the provider.
    client.logout()
    response = client.post(
        reverse("login") + "?code=x&state=y", {"username": "lena", "password": "pw-for-tests-1"}
    )
    assert response.status_code == 302 and signed_in_as(client) == "lena"


def test_api_tokens_work_for_an_oidc_user(client, oidc_login):
    GroupMapping.objects.create(group="gpu-admins", kind=Kind.ROLE, role="admins")
    sign_in(client, oidc_login, "sub-gus", preferred_username="gus", groups=["gpu-admins"])
    assert signed_in_as(client) == "gus"
    response = client.post(
        reverse("api-token-list"), {"name": "ci"}, content_type="application/json"
    )
    assert response.status_code == 201, response.content
    key = response.json()["token"]
    client.post(reverse("logout"))
    api = client.__class__()
    assert api.get("/api/v1/teams/", HTTP_AUTHORIZATION=f"Token {key}").status_code == 200
    assert api.get("/api/v1/teams/", HTTP_AUTHORIZATION="Token not-a-key").status_code == 401


def test_logout_ends_the_providers_session_too(client, oidc_login):
    sign_in(client, oidc_login, "sub-ria", preferred_username="ria", groups=[])
    id_token = client.session["oidc_id_token"]
    response = client.post(reverse("logout"))
    assert response.status_code == 302 and oidc_login.is_provider(response["Location"])
    logout = query_of(response["Location"])
    assert response["Location"].startswith(f"{oidc_login.issuer}/oauth2/end_session?")
    assert logout["id_token_hint"] == id_token and logout["client_id"] == CLIENT_ID
    assert logout["post_logout_redirect_uri"] == "http://testserver" + reverse("login")
    assert signed_in_as(client) is None
    # The provider confirms and sends the browser back to the login page.
    last, visited = follow(client, oidc_login, response["Location"])
    assert visited[-1] == "http://testserver" + reverse("login") and last.status_code == 200


def test_a_local_users_logout_stays_local(client, oidc_login):
    UserFactory(username="lou", password="pw-for-tests-1")
    client.post(reverse("login"), {"username": "lou", "password": "pw-for-tests-1"})
    assert signed_in_as(client) == "lou"
    response = client.post(reverse("logout"))
    assert response.status_code == 302 and response["Location"] == reverse("login")


def test_explicit_endpoints_need_no_discovery(client, oidc_login, settings):
    issuer = oidc_login.issuer
    settings.OIDC_OP_ISSUER = ""
    settings.OIDC_OP_AUTHORIZATION_ENDPOINT = f"{issuer}/oauth2/authorize"
    settings.OIDC_OP_TOKEN_ENDPOINT = f"{issuer}/oauth2/token"
    settings.OIDC_OP_USER_ENDPOINT = f"{issuer}/userinfo"
    settings.OIDC_OP_JWKS_ENDPOINT = f"{issuer}/jwks"
    sign_in(client, oidc_login, "sub-ed", preferred_username="ed", groups=[])
    assert signed_in_as(client) == "ed"


def test_an_unreachable_provider_is_a_clear_message(client, oidc_login, settings):
    from governance.directory import oidc

    settings.OIDC_OP_ISSUER = "http://127.0.0.1:9"  # nothing listens there
    oidc.forget_discovery()
    response = client.get(reverse("oidc_authentication_init"), follow=True)
    assert response.redirect_chain[-1][0] == reverse("login")
    assert "Example SSO did not answer" in response.content.decode()


# The JWKS by kid, with keys made here and a JWKS endpoint of our own.


class _Keys(BaseHTTPRequestHandler):
    jwks: dict = {}

    def do_GET(self):  # noqa: N802
        body = json.dumps(self.jwks).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def jwks_endpoint(settings):
    keys = {kid: rsa.generate_private_key(public_exponent=65537, key_size=2048) for kid in "ab"}
    handler = type("Keys", (_Keys,), {})
    handler.jwks = {
        "keys": [
            {
                **json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key())),
                "kid": kid,
                "use": "sig",
            }
            for kid, key in keys.items()
        ]
    }
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    settings.OIDC_ENABLED = True
    settings.OIDC_OP_ISSUER = ""
    settings.OIDC_RP_CLIENT_ID = CLIENT_ID
    settings.OIDC_RP_CLIENT_SECRET = "s"
    settings.OIDC_RP_SIGN_ALGO = "RS256"
    settings.OIDC_OP_JWKS_ENDPOINT = f"http://127.0.0.1:{server.server_port}/jwks"
    yield keys
    server.shutdown()
    server.server_close()


def _token(key, *, kid=None, aud=CLIENT_ID, alg="RS256", nonce="n1", exp_in=300):
    now = int(time.time())
    claims = {"sub": "s1", "aud": aud, "iat": now, "exp": now + exp_in, "nonce": nonce}
    return jwt.encode(claims, key, algorithm=alg, headers={"kid": kid} if kid else None)


def test_the_signing_key_is_the_one_its_kid_names(jwks_endpoint):
    backend = DirectoryOIDCBackend()
    a, b = jwks_endpoint["a"], jwks_endpoint["b"]
    assert backend.verify_token(_token(a, kid="a"), nonce="n1")["sub"] == "s1"
    assert backend.verify_token(_token(b, kid="b"), nonce="n1")["sub"] == "s1"
    refused = {
        "signed by a, naming b": _token(a, kid="b"),
        "a kid the JWKS has not": _token(a, kid="c"),
        "no kid, two keys": _token(a),
        "another audience": _token(a, kid="a", aud="someone-else"),
        "expired": _token(a, kid="a", exp_in=-120),
        "HS256 with a shared secret": _token("s" * 32, kid="a", alg="HS256"),
    }
    for why, token in refused.items():
        with pytest.raises(SuspiciousOperation):
            backend.verify_token(token, nonce="n1")
            pytest.fail(f"accepted: {why}")
    with pytest.raises(SuspiciousOperation, match="Nonce"):
        backend.verify_token(_token(a, kid="a"), nonce="another")
