"""What accounts does when the organisation's directory no longer lists a user
(core.signals.directory_user_unlisted, sent by governance.directory): their API tokens
are revoked, one by one so that the identity cache forgets them (accounts.identity)."""

from __future__ import annotations

import logging

from django.utils import timezone

from accounts.models import ApiToken

log = logging.getLogger(__name__)


def revoke_tokens_of_unlisted(sender=None, *, user, **_) -> int:
    now = timezone.now()
    revoked = 0
    for token in ApiToken.objects.filter(user=user, revoked_at__isnull=True):
        token.revoked_at = now
        token.save(update_fields=["revoked_at"])
        revoked += 1
    if revoked:
        log.info("revoked %d API token(s) of %s: the directory no longer lists them", revoked, user)
    return revoked
