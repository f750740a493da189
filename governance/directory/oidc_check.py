"""The periodic check of OpenID Connect accounts (governance.directory.tasks): does the
provider still list the user, and with which groups?

The provider answers through the refresh token it issued at the user's last login (kept
encrypted on DirectoryAccount): the refresh-token grant at its token endpoint, then its
userinfo endpoint with the new access token for the groups claim.

- The provider refuses the grant with `invalid_grant` (it removed or disabled the user,
  or revoked the grant or the session): the user is unlisted (`None`).
- It grants it: the user is listed, with the groups its userinfo names now (or, without
  a userinfo endpoint, the groups of their last login).
- It does not answer, answers 5xx, or refuses for another reason (invalid_client is our
  configuration, not the user): ProviderUnavailable, and nothing is taken away.
"""

from __future__ import annotations

import logging
from urllib.parse import quote

import requests
from django.core.exceptions import SuspiciousOperation
from requests.auth import HTTPBasicAuth

from governance.directory.models import DirectoryAccount
from governance.directory.oidc import ProviderUnavailable, oidc_setting, string_list
from governance.directory.secrets import reveal, seal

log = logging.getLogger(__name__)


def _post_token(refresh_token: str) -> requests.Response:
    try:
        return requests.post(
            oidc_setting("OIDC_OP_TOKEN_ENDPOINT"),
            data={"grant_type": "refresh_token", "refresh_token": refresh_token},
            # HTTP Basic: the client authentication every authorization server must
            # support (RFC 6749, 2.3.1); some allow no other for this grant.
            auth=HTTPBasicAuth(
                quote(oidc_setting("OIDC_RP_CLIENT_ID"), safe=""),
                quote(oidc_setting("OIDC_RP_CLIENT_SECRET"), safe=""),
            ),
            timeout=oidc_setting("OIDC_TIMEOUT", 10),
            verify=oidc_setting("OIDC_VERIFY_SSL", True),
        )
    except requests.RequestException as error:
        raise ProviderUnavailable(f"the token endpoint did not answer: {error}") from error


def _error_of(response: requests.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return ""
    return str(body.get("error", "")) if isinstance(body, dict) else ""


def _userinfo_groups(account: DirectoryAccount, access_token: str) -> list[str] | None:
    """The groups claim of the provider's userinfo now (None: it has no userinfo)."""
    endpoint = oidc_setting("OIDC_OP_USER_ENDPOINT")
    if not endpoint:
        return None
    try:
        response = requests.get(
            endpoint,
            headers={"Authorization": f"Bearer {access_token}"},
            timeout=oidc_setting("OIDC_TIMEOUT", 10),
            verify=oidc_setting("OIDC_VERIFY_SSL", True),
        )
        response.raise_for_status()
        info = response.json()
    except (requests.RequestException, ValueError) as error:
        raise ProviderUnavailable(f"the userinfo endpoint did not answer: {error}") from error
    if not isinstance(info, dict) or (account.subject and info.get("sub") != account.subject):
        raise ProviderUnavailable(
            f"the userinfo for {account.user.username} names another sub ({info.get('sub')!r})"
            if isinstance(info, dict)
            else "the userinfo is not a JSON object"
        )
    claim = oidc_setting("OIDC_GROUPS_CLAIM", "groups")
    try:
        return string_list(info.get(claim), claim)
    except SuspiciousOperation as error:  # a malformed claim decides nothing
        raise ProviderUnavailable(str(error)) from error


def oidc_check(account: DirectoryAccount) -> list[str] | None:
    """`account`'s groups at the provider now, or None when it no longer lists them.
    Raises ProviderUnavailable when the provider gives no answer to go by. The account
    must have a refresh token (`has_refresh_token`)."""
    refresh_token = reveal(account.refresh_token)
    if not refresh_token:
        raise ValueError(f"{account} has no refresh token")
    response = _post_token(refresh_token)
    if response.status_code in (400, 401):
        error = _error_of(response)
        if error == "invalid_grant":
            return None
        raise ProviderUnavailable(
            f"the token endpoint refused the refresh with {response.status_code} "
            f"{error or response.text[:200]!r}"
        )
    if not response.ok:
        raise ProviderUnavailable(f"the token endpoint answered {response.status_code}")
    try:
        token = response.json()
    except ValueError as error:
        raise ProviderUnavailable("the token endpoint's answer is not JSON") from error
    rotated = token.get("refresh_token") if isinstance(token, dict) else None
    if isinstance(rotated, str) and rotated and rotated != refresh_token:
        # A provider that rotates refresh tokens: the old one is spent.
        DirectoryAccount.objects.filter(pk=account.pk).update(refresh_token=seal(rotated))
    access_token = token.get("access_token") if isinstance(token, dict) else None
    if not isinstance(access_token, str) or not access_token:
        raise ProviderUnavailable("the token endpoint's answer has no access_token")
    groups = _userinfo_groups(account, access_token)
    return list(account.groups) if groups is None else groups


def has_refresh_token(account: DirectoryAccount) -> bool:
    return bool(reveal(account.refresh_token))
