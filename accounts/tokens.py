"""API tokens: issue, revoke (services) and look up (selectors)."""

from __future__ import annotations

import hashlib
import secrets
from datetime import timedelta

from django.conf import settings
from django.db.models import QuerySet
from django.utils import timezone

from accounts import identity
from accounts.models import ApiToken


def _digest(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()


def token_issue(*, user, name: str, days: int | None = None) -> tuple[ApiToken, str]:
    """A new token for `user`, valid for `days` (the configured default when None).
    Returns the row and the token itself, which is shown once and never stored."""
    days = settings.API_TOKEN_DAYS if days is None else days
    if not 1 <= days <= settings.API_TOKEN_MAX_DAYS:
        raise ValueError(f"days must be between 1 and {settings.API_TOKEN_MAX_DAYS}")
    key = secrets.token_urlsafe(32)
    now = timezone.now()
    token = ApiToken.objects.create(
        user=user,
        name=name,
        prefix=key[:8],
        digest=_digest(key),
        created_at=now,
        expires_at=now + timedelta(days=days),
    )
    return token, key


def token_revoke(*, user, token_id: int) -> ApiToken | None:
    """Revoke one of `user`'s own tokens; None when they have no token with that id.
    Revoking twice keeps the first time."""
    token = ApiToken.objects.filter(user=user, pk=token_id).first()
    if token is not None and token.revoked_at is None:
        token.revoked_at = timezone.now()
        token.save(update_fields=["revoked_at"])
    return token


def token_list(*, user) -> QuerySet[ApiToken]:
    return ApiToken.objects.filter(user=user)


def token_for_key(*, key: str) -> ApiToken | None:
    """The token `key` names, with its user; from the identity cache when it holds it."""
    digest = _digest(key)
    token, generation = identity.cached_token(digest)
    if token is None:
        token = ApiToken.objects.select_related("user").filter(digest=digest).first()
        if token is not None:
            identity.remember(token, generation)
    return token
