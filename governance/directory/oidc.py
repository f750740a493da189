"""The OpenID Connect login (mozilla-django-oidc, configured by config/settings.py from
OIDC_*; config.oidc_settings).

The flow is the authorization code with PKCE (S256), a state and a nonce kept in the
session (a callback whose state this session did not start is refused). The ID token is
checked against the provider's JWKS, the key chosen by the token's `kid` (RS256 unless
OIDC_SIGN_ALGO says otherwise), with its audience (our client id) and issuer. The
provider's endpoints come from its discovery document (OIDC_ISSUER), read at the first
login and kept; an endpoint set explicitly (OIDC_AUTHORIZATION_ENDPOINT, ...) wins.

DirectoryOIDCBackend is mozilla-django-oidc's backend, plus: a user is found by the
provider's stable identity (issuer and `sub`, kept on DirectoryAccount) first, so a
username claim that changes renames the same account; then by the username claim
(OIDC_USERNAME_CLAIM, never by email) for a first login, where a username held by
another `sub` of the provider is refused (no takeover); a local account or a break-glass
admin is never signed in or taken over by the provider, and the create/update hooks
send the groups claim (OIDC_GROUPS_CLAIM) through directory_sync, so the session starts
with the roles and teams the provider's groups give, and every change is in the history.
The provider's refresh token, when it issues one, is kept encrypted on DirectoryAccount
for the periodic check (governance.directory.oidc_check).

Logging out ends the provider's session too when it names an end_session_endpoint
(RP-initiated logout, with the ID token as id_token_hint)."""

from __future__ import annotations

import logging
import threading
from urllib.parse import urlencode

import jwt
import requests
from django.conf import settings
from django.contrib import messages
from django.contrib.auth import get_user_model
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_not_required
from django.core.exceptions import ImproperlyConfigured, SuspiciousOperation
from django.http import Http404, HttpResponseRedirect
from django.shortcuts import redirect, resolve_url
from django.utils.encoding import smart_str
from mozilla_django_oidc import views as oidc_views
from mozilla_django_oidc.auth import OIDCAuthenticationBackend
from mozilla_django_oidc.utils import import_from_settings

from governance.directory.models import DirectoryAccount
from governance.directory.secrets import seal
from governance.directory.services import directory_sync

log = logging.getLogger(__name__)

# Our setting -> the discovery document's field.
DISCOVERED = {
    "OIDC_OP_AUTHORIZATION_ENDPOINT": "authorization_endpoint",
    "OIDC_OP_TOKEN_ENDPOINT": "token_endpoint",
    "OIDC_OP_USER_ENDPOINT": "userinfo_endpoint",
    "OIDC_OP_JWKS_ENDPOINT": "jwks_uri",
    "OIDC_OP_LOGOUT_ENDPOINT": "end_session_endpoint",
}
_documents: dict[str, dict] = {}
_documents_lock = threading.Lock()


class ProviderUnavailable(Exception):
    """The provider's discovery document could not be read (or names another issuer)."""


def enabled() -> bool:
    return bool(getattr(settings, "OIDC_ENABLED", False))


def provider_name() -> str:
    """The login page's "Sign in with <name>" (empty while OIDC is off)."""
    return settings.OIDC_PROVIDER_NAME if enabled() else ""


def discovery_document(issuer: str) -> dict:
    """The provider's /.well-known/openid-configuration, read once per process."""
    with _documents_lock:
        if issuer in _documents:
            return _documents[issuer]
    url = f"{issuer}/.well-known/openid-configuration"
    try:
        response = requests.get(
            url,
            timeout=import_from_settings("OIDC_TIMEOUT", 10),
            verify=import_from_settings("OIDC_VERIFY_SSL", True),
        )
        response.raise_for_status()
        document = response.json()
    except (requests.RequestException, ValueError) as error:
        raise ProviderUnavailable(f"could not read {url}: {error}") from error
    if not isinstance(document, dict) or document.get("issuer", "").rstrip("/") != issuer:
        raise ProviderUnavailable(
            f"{url} names the issuer {document.get('issuer')!r}, not OIDC_ISSUER={issuer!r}"
            if isinstance(document, dict)
            else f"{url} is not a discovery document"
        )
    with _documents_lock:
        _documents[issuer] = document
    return document


def forget_discovery() -> None:
    """Read the discovery documents afresh at the next login (tests; a provider moved)."""
    with _documents_lock:
        _documents.clear()


def oidc_setting(name: str, *default):
    """An OIDC_* setting; an endpoint left empty comes from the discovery document."""
    if name in DISCOVERED:
        value = getattr(settings, name, "") or ""
        issuer = getattr(settings, "OIDC_OP_ISSUER", "")
        if not value and issuer:
            value = discovery_document(issuer).get(DISCOVERED[name]) or ""
        if value or default or name in ("OIDC_OP_LOGOUT_ENDPOINT", "OIDC_OP_USER_ENDPOINT"):
            return value or (default[0] if default else "")
        raise ImproperlyConfigured(
            f"{name.replace('OIDC_OP_', 'OIDC_')} is not set and the provider's discovery "
            f"document names no {DISCOVERED[name]}"
        )
    return import_from_settings(name, *default)


class _Endpoints:
    """mozilla-django-oidc reads its endpoints when a backend or view is built: here
    they are read when used, so that a page view of a signed-in user never waits for
    (or fails with) the provider."""

    get_settings = staticmethod(oidc_setting)

    @property
    def OIDC_OP_AUTH_ENDPOINT(self):  # noqa: N802 (mozilla-django-oidc's names)
        return oidc_setting("OIDC_OP_AUTHORIZATION_ENDPOINT")

    @property
    def OIDC_OP_TOKEN_ENDPOINT(self):  # noqa: N802
        return oidc_setting("OIDC_OP_TOKEN_ENDPOINT")

    @property
    def OIDC_OP_USER_ENDPOINT(self):  # noqa: N802
        return oidc_setting("OIDC_OP_USER_ENDPOINT")

    @property
    def OIDC_OP_JWKS_ENDPOINT(self):  # noqa: N802
        return oidc_setting("OIDC_OP_JWKS_ENDPOINT")

    @property
    def OIDC_RP_CLIENT_ID(self):  # noqa: N802
        return oidc_setting("OIDC_RP_CLIENT_ID")

    @property
    def OIDC_RP_CLIENT_SECRET(self):  # noqa: N802
        return oidc_setting("OIDC_RP_CLIENT_SECRET")

    @property
    def OIDC_RP_SIGN_ALGO(self):  # noqa: N802
        return oidc_setting("OIDC_RP_SIGN_ALGO", "RS256")

    @property
    def OIDC_RP_IDP_SIGN_KEY(self):  # noqa: N802
        return None  # always the provider's JWKS


def string_list(value, claim: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return list(value)
    raise SuspiciousOperation(f"the {claim} claim is not a list of group names")


class DirectoryOIDCBackend(_Endpoints, OIDCAuthenticationBackend):
    def __init__(self, *args, **kwargs):
        # Nothing read here (see _Endpoints); the user model as the base class keeps it.
        self.UserModel = get_user_model()

    def authenticate(self, request, **kwargs):
        # Only the callback view's call (it passes the session's nonce); never a
        # password login's, even with ?code=&state= in its URL.
        if not enabled() or "nonce" not in kwargs or "password" in kwargs:
            return None
        return super().authenticate(request, **kwargs)

    # The ID token: signed by the key its kid names, for us, by our issuer.

    def retrieve_matching_jwk(self, token):
        """The provider's key that signed `token`: the JWKS key of the token's `kid`;
        a token without a kid only when the JWKS holds a single key for its algorithm."""
        response = requests.get(
            self.OIDC_OP_JWKS_ENDPOINT,
            verify=self.get_settings("OIDC_VERIFY_SSL", True),
            timeout=self.get_settings("OIDC_TIMEOUT", 10),
        )
        response.raise_for_status()
        keys = response.json().get("keys", [])
        try:
            header = jwt.get_unverified_header(token)
        except jwt.InvalidTokenError as error:
            raise SuspiciousOperation(f"the ID token is not a JWT: {error}") from error
        alg = smart_str(header.get("alg", ""))
        usable = [
            key
            for key in keys
            if key.get("use", "sig") == "sig"
            and ("alg" not in key or key["alg"] == alg)
            and key.get("kty") == {"RS": "RSA", "PS": "RSA", "ES": "EC"}.get(alg[:2])
        ]
        kid = header.get("kid")
        if kid is not None:
            usable = [key for key in usable if key.get("kid") == smart_str(kid)]
            if not usable:
                raise SuspiciousOperation(f"no key of the provider's JWKS has the kid {kid!r}")
        elif len(usable) != 1:
            raise SuspiciousOperation(
                "the ID token names no kid and the provider's JWKS holds "
                f"{len(usable)} keys for {alg}"
            )
        return jwt.PyJWK(usable[0])

    def _verify_jws(self, payload, key):
        header = jwt.get_unverified_header(payload)
        if header.get("alg") != self.OIDC_RP_SIGN_ALGO:
            raise SuspiciousOperation(
                f"the ID token is signed with {header.get('alg')!r}, not {self.OIDC_RP_SIGN_ALGO}"
            )
        issuer = self.get_settings("OIDC_OP_ISSUER", "")
        try:
            return jwt.decode(
                payload,
                key,
                algorithms=[self.OIDC_RP_SIGN_ALGO],
                audience=self.OIDC_RP_CLIENT_ID,
                issuer=issuer or None,
                options={"require": ["exp", "iat", "sub"]},
                leeway=30,
            )
        except jwt.InvalidTokenError as error:
            raise SuspiciousOperation(f"the ID token is refused: {error}") from error

    # The claims: the ID token's, with the userinfo endpoint's over them.

    def get_userinfo(self, access_token, id_token, payload):
        claims = dict(payload)
        if self.OIDC_OP_USER_ENDPOINT:
            info = super().get_userinfo(access_token, id_token, payload)
            if info.get("sub") != payload.get("sub"):
                raise SuspiciousOperation("the userinfo's sub is not the ID token's")
            claims.update(info)
        return claims

    def verify_claims(self, claims):
        username = self._username(claims)
        if not username:
            log.warning("OIDC login refused: no %s claim", self.get_settings("OIDC_USERNAME_CLAIM"))
            return False
        if username in settings.BREAK_GLASS_USERS:
            # A break-glass admin is local only (the provider may be what is broken).
            log.warning("OIDC login of break-glass admin %s refused", username)
            return False
        self._groups(claims)  # a malformed groups claim refuses the login
        return True

    def _username(self, claims) -> str:
        value = claims.get(self.get_settings("OIDC_USERNAME_CLAIM", "preferred_username"))
        return value.strip() if isinstance(value, str) else ""

    def _groups(self, claims) -> list[str]:
        claim = self.get_settings("OIDC_GROUPS_CLAIM", "groups")
        return string_list(claims.get(claim), claim)

    # The user: by the provider's stable identity first, then by the username claim.

    def get_token(self, payload):
        # The token response, kept for _sync (the refresh token, stored encrypted).
        self._token_info = super().get_token(payload)
        return self._token_info

    def _identity(self, claims) -> tuple[str, str]:
        """(issuer, sub) of the claims: the provider's stable name for the user."""
        issuer = claims.get("iss") or self.get_settings("OIDC_OP_ISSUER", "")
        sub = claims.get("sub")
        if not isinstance(sub, str) or not sub:
            raise SuspiciousOperation("the ID token has no sub")
        return str(issuer).rstrip("/"), sub

    def filter_users_by_claims(self, claims):
        issuer, sub = self._identity(claims)
        known = self.UserModel.objects.filter(
            directory_account__issuer=issuer, directory_account__subject=sub
        )
        if known.exists():
            # The same person, whatever the username claim says today.
            return known
        users = self.UserModel.objects.filter(username=self._username(claims))
        account = DirectoryAccount.objects.filter(user__in=users).exclude(subject="").first()
        if account is not None:
            # Another person of the provider (another sub) with a username someone holds:
            # never a takeover of that account.
            self._refuse(
                f"OIDC login refused: the provider's user {sub!r} of {issuer} names the "
                f"username {account.user.username!r}, which belongs to the provider's "
                f"user {account.subject!r} (of {account.issuer}); an admin must resolve it",
                f"Your {settings.OIDC_PROVIDER_NAME} account names the username "
                f"{account.user.username}, which another person's account holds here. "
                "Ask a platform admin.",
            )
        return users

    def _refuse(self, log_message: str, user_message: str):
        log.warning("%s", log_message)
        request = getattr(self, "request", None)
        if request is not None:
            request.oidc_refusal = user_message
        raise SuspiciousOperation(log_message)

    def create_user(self, claims):
        user = self.UserModel(username=self._username(claims))
        user.set_unusable_password()  # the provider's login, never a local password
        self._copy_profile(user, claims)
        return self._sync(user, claims)

    def update_user(self, user, claims):
        if user.has_usable_password() and not DirectoryAccount.objects.filter(user=user).exists():
            # A local account is never taken over by the provider's user of the same name:
            # to move it to single sign-on, clear its password (set_unusable_password).
            raise SuspiciousOperation(f"{user.username} is a local account")
        self._rename(user, claims)
        self._copy_profile(user, claims)
        return self._sync(user, claims)

    def _rename(self, user, claims) -> None:
        """A username claim that changed renames the account found by its sub."""
        username = self._username(claims)
        if username == user.username:
            return
        if self.UserModel.objects.filter(username=username).exclude(pk=user.pk).exists():
            self._refuse(
                f"OIDC login refused: the provider renamed {user.username!r} to "
                f"{username!r}, a username another account holds",
                f"Your {settings.OIDC_PROVIDER_NAME} username changed to {username}, which "
                "another account holds here. Ask a platform admin.",
            )
        log.info("OIDC user %s is now %s (same sub)", user.username, username)
        user.username = username

    @staticmethod
    def _copy_profile(user, claims) -> None:
        for field, claim in (
            ("email", "email"),
            ("first_name", "given_name"),
            ("last_name", "family_name"),
        ):
            value = claims.get(claim)
            if isinstance(value, str):
                setattr(user, field, value[: user._meta.get_field(field).max_length])
        user.save()

    def _sync(self, user, claims):
        directory_sync(
            user=user,
            groups=self._groups(claims),
            source=DirectoryAccount.Source.OIDC,
            trigger="login",
        )
        issuer, sub = self._identity(claims)
        refresh = (getattr(self, "_token_info", None) or {}).get("refresh_token")
        # No refresh token this time (the provider issues none): the idle expiry applies.
        DirectoryAccount.objects.filter(user=user).update(
            issuer=issuer,
            subject=sub,
            refresh_token=seal(refresh) if isinstance(refresh, str) else "",
        )
        return user


def _end_session_url(request) -> str | None:
    """The provider's logout page for this session (RP-initiated logout), or None."""
    id_token = request.session.get("oidc_id_token")
    if not enabled() or not id_token:
        return None
    try:
        endpoint = oidc_setting("OIDC_OP_LOGOUT_ENDPOINT")
    except ProviderUnavailable as error:
        log.warning("no provider logout: %s", error)
        return None
    if not endpoint:
        return None
    query = urlencode(
        {
            "id_token_hint": id_token,
            "client_id": oidc_setting("OIDC_RP_CLIENT_ID"),
            "post_logout_redirect_uri": request.build_absolute_uri(
                resolve_url(settings.LOGOUT_REDIRECT_URL)
            ),
        }
    )
    return f"{endpoint}{'&' if '?' in endpoint else '?'}{query}"


def provider_logout_url(request) -> str:
    """OIDC_OP_LOGOUT_URL_METHOD: where a logout goes (the provider's or our own)."""
    return _end_session_url(request) or resolve_url(settings.LOGOUT_REDIRECT_URL)


# Views (config/urls.py). Each is a 404 while OIDC is off.


class _Enabled:
    def dispatch(self, request, *args, **kwargs):
        if not enabled():
            raise Http404("OpenID Connect login is off")
        try:
            return super().dispatch(request, *args, **kwargs)
        except (ProviderUnavailable, requests.RequestException) as error:
            log.warning("OIDC login failed: %s", error)
            messages.error(
                request,
                f"{settings.OIDC_PROVIDER_NAME} did not answer: sign-in is not possible "
                "right now. Try again later, or ask a platform admin.",
            )
            return redirect("login")


class AuthenticationRequestView(_Enabled, _Endpoints, oidc_views.OIDCAuthenticationRequestView):
    def __init__(self, **kwargs):
        oidc_views.View.__init__(self, **kwargs)


class AuthenticationCallbackView(_Enabled, oidc_views.OIDCAuthenticationCallbackView):
    get_settings = staticmethod(oidc_setting)

    @property
    def failure_url(self):
        # mozilla-django-oidc redirects to the setting as it is; a URL name is resolved.
        return resolve_url(self.get_settings("LOGIN_REDIRECT_URL_FAILURE", "login"))

    def login_failure(self):
        if not self.request.user.is_authenticated:
            messages.error(
                self.request,
                getattr(self.request, "oidc_refusal", "")
                or f"Signing in with {settings.OIDC_PROVIDER_NAME} did not succeed. "
                "Try again, or ask a platform admin.",
            )
        return super().login_failure()


class LogoutView(auth_views.LogoutView):
    """Django's logout; for a session the provider started, its logout page after."""

    def post(self, request, *args, **kwargs):
        provider = _end_session_url(request)
        response = super().post(request, *args, **kwargs)
        return HttpResponseRedirect(provider) if provider else response


authenticate_view = login_not_required(AuthenticationRequestView.as_view())
callback_view = login_not_required(AuthenticationCallbackView.as_view())
logout_view = LogoutView.as_view()
