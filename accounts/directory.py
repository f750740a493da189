"""What accounts does when the organisation's directory no longer lists a user
(core.signals.directory_user_unlisted, sent by governance.directory): their API tokens
are revoked, one by one so that the identity cache forgets them (accounts.identity), and
their open sessions end (an open browser is signed out at its next request). When an
OIDC account has been idle too long (core.signals.directory_tokens_expired) only its
API tokens go."""

from __future__ import annotations

import logging
from importlib import import_module

from django.conf import settings
from django.contrib.auth import SESSION_KEY
from django.utils import timezone

from accounts.models import ApiToken

log = logging.getLogger(__name__)


def _revoke_tokens(user, why: str) -> int:
    now = timezone.now()
    revoked = 0
    for token in ApiToken.objects.filter(user=user, revoked_at__isnull=True):
        token.revoked_at = now
        token.save(update_fields=["revoked_at"])
        revoked += 1
    if revoked:
        log.info("revoked %d API token(s) of %s: %s", revoked, user, why)
    return revoked


def revoke_tokens_of_unlisted(sender=None, *, user, **_) -> int:
    return _revoke_tokens(user, "the directory no longer lists them")


def revoke_tokens_of_idle(sender=None, *, user, why: str = "idle", **_) -> int:
    return _revoke_tokens(user, why)


def end_sessions_of_unlisted(sender=None, *, user, **_) -> int:
    """Delete every unexpired session signed in as `user` (database-backed session
    engines: db, cached_db, whose store also forgets its cached copy). Another engine
    (signed cookies, cache only) keeps no list of sessions to search: a warning, and the
    session ends when its cookie does (the user's roles are gone already)."""
    store = import_module(settings.SESSION_ENGINE).SessionStore
    if not hasattr(store, "get_model_class"):
        log.warning(
            "cannot end the sessions of %s: SESSION_ENGINE=%s keeps no list of sessions",
            user,
            settings.SESSION_ENGINE,
        )
        return 0
    user_id = str(user._meta.pk.value_to_string(user))
    ended = 0
    sessions = store.get_model_class().objects.filter(expire_date__gt=timezone.now())
    for session in sessions.iterator():
        if session.get_decoded().get(SESSION_KEY) == user_id:
            store(session_key=session.session_key).delete()
            ended += 1
    if ended:
        log.info("ended %d session(s) of %s: the directory no longer lists them", ended, user)
    return ended
