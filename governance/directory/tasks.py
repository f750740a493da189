"""The periodic directory check (beat: every DIRECTORY_SYNC_MINUTES, config/celery.py).

Everyone who signed in through LDAP is checked against the directory: their roles and
mapped teams follow their groups now, and one the directory no longer lists loses them,
their API tokens and their open sessions, without waiting for a login that may never
come (an API token needs none). So a token of a user removed from the directory stops
working at most DIRECTORY_SYNC_MINUTES (15) after the removal, plus the run of the check.

Everyone who signed in through OpenID Connect is checked the same way where the provider
issued a refresh token at their login (governance.directory.oidc_check): a refused
refresh (invalid_grant) unlists them, a granted one brings their groups now. One without
a refresh token who has not signed in for OIDC_MAX_IDLE_HOURS loses their API tokens
(roles and teams stay until their next login brings the provider's groups).
A directory or provider that does not answer takes nothing away: the check stops.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from celery import shared_task
from django.conf import settings
from django.utils import timezone

from core.signals import directory_tokens_expired
from governance.directory.models import DirectoryAccount
from governance.directory.services import directory_sync

log = logging.getLogger(__name__)


def sync_ldap_accounts() -> dict[str, int]:
    """Check every LDAP account; counts of checked, unlisted and failed ones. Stops at
    the first DirectoryUnavailable: nothing is taken away while the directory is down."""
    from governance.directory.ldap import DirectoryUnavailable, ldap_check

    counts = {"checked": 0, "unlisted": 0, "changes": 0}
    if not settings.LDAP_SERVER_URI:
        return counts
    accounts = DirectoryAccount.objects.filter(source=DirectoryAccount.Source.LDAP)
    for account in accounts.select_related("user"):
        try:
            groups = ldap_check(account.user.get_username())
        except DirectoryUnavailable as error:
            log.warning("directory check stopped, the directory did not answer: %s", error)
            break
        result = directory_sync(
            user=account.user,
            groups=groups,
            source=DirectoryAccount.Source.LDAP,
            trigger="periodic check",
        )
        counts["checked"] += 1
        counts["unlisted"] += int(result.unlisted_now)
        counts["changes"] += len(result.changes)
    return counts


def sync_oidc_accounts() -> dict[str, int]:
    """Check every OpenID Connect account; counts of checked (by refresh), unlisted,
    changes, and idle ones whose API tokens expired."""
    from governance.directory import oidc
    from governance.directory.oidc_check import has_refresh_token, oidc_check

    counts = {"checked": 0, "unlisted": 0, "changes": 0, "idle_expired": 0}
    if not oidc.enabled():
        return counts
    idle_since = timezone.now() - timedelta(hours=settings.OIDC_MAX_IDLE_HOURS)
    accounts = DirectoryAccount.objects.filter(source=DirectoryAccount.Source.OIDC, listed=True)
    for account in accounts.select_related("user").order_by("pk"):
        if not has_refresh_token(account):
            last = account.user.last_login
            if last is None or last < idle_since:
                answers = directory_tokens_expired.send(
                    sender=DirectoryAccount,
                    user=account.user,
                    why=f"no {settings.OIDC_PROVIDER_NAME} sign-in for "
                    f"{settings.OIDC_MAX_IDLE_HOURS:g} hours",
                )
                counts["idle_expired"] += int(any(revoked for _, revoked in answers))
            continue
        try:
            groups = oidc_check(account)
        except oidc.ProviderUnavailable as error:
            log.warning("OIDC check stopped, the provider did not answer: %s", error)
            break
        result = directory_sync(
            user=account.user,
            groups=groups,
            source=DirectoryAccount.Source.OIDC,
            trigger="periodic check",
        )
        if groups is None:
            # Spent: the provider refused it. The next login stores a new one.
            DirectoryAccount.objects.filter(pk=account.pk).update(refresh_token="")
        counts["checked"] += 1
        counts["unlisted"] += int(result.unlisted_now)
        counts["changes"] += len(result.changes)
    return counts


@shared_task(name="governance.directory.sync")
def sync_directory() -> dict[str, dict[str, int]]:
    return {"ldap": sync_ldap_accounts(), "oidc": sync_oidc_accounts()}
