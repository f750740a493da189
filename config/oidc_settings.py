"""mozilla-django-oidc's settings from the OIDC_* environment (config/settings.py calls
oidc_settings only when OIDC_CLIENT_ID is set). No Django models here, and no network:
it runs while the settings load; the provider's discovery document is read at the first
login (governance.directory.oidc). It sits with the settings, not with the directory
feature, so the settings import no app."""

from __future__ import annotations

from urllib.parse import urlsplit


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}" if parts.scheme and parts.netloc else ""


def oidc_settings(
    *,
    client_id: str,
    client_secret: str,
    issuer: str = "",
    authorization_endpoint: str = "",
    token_endpoint: str = "",
    userinfo_endpoint: str = "",
    jwks_endpoint: str = "",
    logout_endpoint: str = "",
    provider_name: str = "single sign-on",
    scopes: str = "openid email profile",
    username_claim: str = "preferred_username",
    groups_claim: str = "groups",
    sign_algo: str = "RS256",
    verify_tls: bool = True,
    timeout: float = 10,
) -> dict:
    """The OIDC_* settings: the authorization-code flow with PKCE (S256), state and nonce,
    the ID token signed with `sign_algo` by a key of the provider's JWKS (by `kid`).
    Endpoints left empty come from `issuer`'s discovery document
    (<issuer>/.well-known/openid-configuration); explicit ones win over it."""
    from django.core.exceptions import ImproperlyConfigured

    endpoints = {
        "OIDC_OP_AUTHORIZATION_ENDPOINT": authorization_endpoint,
        "OIDC_OP_TOKEN_ENDPOINT": token_endpoint,
        "OIDC_OP_JWKS_ENDPOINT": jwks_endpoint,
    }
    missing = [name.replace("OIDC_OP_", "OIDC_") for name, url in endpoints.items() if not url]
    if not issuer and missing:
        raise ImproperlyConfigured(
            f"OIDC_CLIENT_ID is set but neither OIDC_ISSUER (for discovery) nor "
            f"{', '.join(missing)} is"
        )
    if not client_secret:
        raise ImproperlyConfigured("OIDC_CLIENT_ID is set but OIDC_CLIENT_SECRET is not")
    if not sign_algo.startswith(("RS", "ES", "PS")):
        raise ImproperlyConfigured(
            f"OIDC_SIGN_ALGO={sign_algo!r}: use an asymmetric algorithm (RS256, ES256, PS256)"
        )
    if "openid" not in scopes.split():
        raise ImproperlyConfigured(f"OIDC_SCOPES={scopes!r} must include openid")
    return {
        "OIDC_ENABLED": True,
        "OIDC_PROVIDER_NAME": provider_name,
        "OIDC_RP_CLIENT_ID": client_id,
        "OIDC_RP_CLIENT_SECRET": client_secret,
        "OIDC_OP_ISSUER": issuer.rstrip("/"),
        **endpoints,
        "OIDC_OP_USER_ENDPOINT": userinfo_endpoint,
        "OIDC_OP_LOGOUT_ENDPOINT": logout_endpoint,
        "OIDC_RP_SIGN_ALGO": sign_algo,
        "OIDC_RP_SCOPES": scopes,
        "OIDC_USERNAME_CLAIM": username_claim,
        "OIDC_GROUPS_CLAIM": groups_claim,
        "OIDC_USE_PKCE": True,
        "OIDC_PKCE_CODE_CHALLENGE_METHOD": "S256",
        "OIDC_USE_NONCE": True,
        # The ID token is the logout's id_token_hint (RP-initiated logout).
        "OIDC_STORE_ID_TOKEN": True,
        "OIDC_OP_LOGOUT_URL_METHOD": "governance.directory.oidc.provider_logout_url",
        "OIDC_VERIFY_SSL": verify_tls,
        "OIDC_TIMEOUT": timeout,
        "OIDC_CREATE_USER": True,
        "LOGIN_REDIRECT_URL_FAILURE": "login",
        # The logout form's redirect to the provider's end_session_endpoint (on the
        # issuer's origin, or OIDC_LOGOUT_ENDPOINT's): browsers hold a form submission's
        # redirects to the Content-Security-Policy's form-action.
        "OIDC_FORM_ACTION_ORIGINS": sorted(
            {origin for origin in (_origin(issuer), _origin(logout_endpoint)) if origin}
        ),
    }
