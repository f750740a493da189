"""The periodic directory check (beat: every DIRECTORY_SYNC_MINUTES, config/celery.py).

Everyone who signed in through LDAP is checked against the directory: their roles and
mapped teams follow their groups now, and one the directory no longer lists loses them
and their API tokens, without waiting for a login that may never come (an API token
needs none). So a token of a user removed from the directory stops working at most
DIRECTORY_SYNC_MINUTES (15) after the removal, plus the run of the check.
"""

from __future__ import annotations

import logging

from celery import shared_task
from django.conf import settings

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


@shared_task(name="governance.directory.sync")
def sync_directory() -> dict[str, int]:
    return sync_ldap_accounts()
