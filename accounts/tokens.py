"""API tokens: issue, revoke (services) and look up (selectors)."""

from __future__ import annotations

import hashlib
import secrets
from datetime import timedelta

from django.conf import settings
from django.core.cache import cache
from django.db.models import Q, QuerySet
from django.utils import timezone

from accounts import identity
from accounts.models import ApiToken
from core.cache import CacheUnavailable

# A token's last use is kept to this many seconds: one write a minute per token at most,
# not one per request.
LAST_USE_SECONDS = 60


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


def token_used(*, token: ApiToken) -> None:
    """Record that `token` authenticated a request now, at most once a LAST_USE_SECONDS.

    The cache says whether this minute's use is recorded already (one round-trip, no
    query); unreachable, the database does, with an update that matches nothing within
    the minute. An update, not a save: a save of a token sends the signal that drops
    every cached identity (accounts.identity), and a use changes nobody's identity."""
    now = timezone.now()
    try:
        if not cache.add(f"identity:used:{token.pk}", 1, timeout=LAST_USE_SECONDS):
            return
    except CacheUnavailable:
        pass
    stale = Q(last_used_at__isnull=True) | Q(
        last_used_at__lt=now - timedelta(seconds=LAST_USE_SECONDS)
    )
    ApiToken.objects.filter(stale, pk=token.pk).update(last_used_at=now)


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
