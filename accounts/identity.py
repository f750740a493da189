"""Who an API token belongs to, and what they may do, kept briefly in the cache.

Authenticating a token request reads the token, its user, the user's roles and their
teams: four queries on every API call, most of a read's cost. The cache keeps all of
that per token digest for API_IDENTITY_CACHE_SECONDS, read in one round-trip together
with the authorisation generation. Anything that can change who a user is or what
they may do (a token issued or revoked, a user saved or deleted, a group or team
membership changed, a role group or team renamed or deleted) sets a new generation
(accounts.apps wires the signals; see forget_everyone), and an entry of an older
generation is never used: a revoked token or a removed role stops working on the
next request, not after the time-to-live. Changes that send no signal (a bulk
`QuerySet.update` of users) are bounded by the time-to-live.

Expiry and revocation are still checked on every request, from the cached token.

While the cache is unreachable (core.cache.CacheUnavailable, at once while its circuit
is open) every request reads the token and its user from the database, and nothing is
kept. A change made meanwhile could not set a new generation, so entries kept before
the outage could outlive it. So a process that met the outage owes a new generation,
and sets it before it next trusts the cache; and the process that made the change
also tries to set it every second in the background until the cache answers, so
processes that met no outage stop trusting the old entries within about a second of
its return (at worst, when that process is gone, after the time-to-live).
"""

from __future__ import annotations

import logging
import secrets
import threading
import time

from django.conf import settings
from django.core.cache import cache
from django.db import transaction

from accounts.models import ApiToken
from core.cache import CacheUnavailable

logger = logging.getLogger(__name__)

GENERATION = "identity:generation"


class _Outage:
    """Whether this process met the cache unreachable since it last set a generation,
    and whether it is trying to set one in the background."""

    met = False
    retrying = False
    lock = threading.Lock()


# How often the background retry tries the cache again.
RETRY_SECONDS = 1.0


def _entry_key(digest: str) -> str:
    return f"identity:token:{digest}"


def _seconds() -> int:
    return settings.API_IDENTITY_CACHE_SECONDS


def cached_token(digest: str) -> tuple[ApiToken | None, str]:
    """The cached token (its user and the user's roles and teams attached) for `digest`,
    or None; and the current generation, which `remember` needs ("" when the cache is
    unreachable: nothing is kept)."""
    if not _seconds():
        return None, ""
    try:
        if _Outage.met:
            return None, _new_generation()
        found = cache.get_many([_entry_key(digest), GENERATION])
        generation = found.get(GENERATION)
        if generation is None:
            generation = secrets.token_hex(8)
            if not cache.add(GENERATION, generation, timeout=None):
                generation = cache.get(GENERATION) or generation
            return None, generation
    except CacheUnavailable:
        _Outage.met = True
        return None, ""
    entry = found.get(_entry_key(digest))
    if entry is None or entry[0] != generation:
        return None, generation
    return entry[1], generation


def remember(token: ApiToken, generation: str) -> None:
    """Keep `token` (read from the database after `generation` was read) with its user's
    roles and teams computed, so a cached request asks nothing more of the database."""
    if not _seconds() or not generation:
        return
    from core import permissions
    from fleet import teams

    user = token.user
    permissions.user_roles(user)
    teams.led_team_ids(user)
    teams.member_team_ids(user)
    try:
        cache.set(_entry_key(token.digest), (generation, token), timeout=_seconds())
    except CacheUnavailable:
        _Outage.met = True


def _new_generation() -> str:
    generation = secrets.token_hex(8)
    cache.set(GENERATION, generation, timeout=None)
    if _Outage.met:
        _Outage.met = False
        logger.warning("identity cache reachable again: what it kept before is dropped")
    return generation


def _try_new_generation() -> None:
    try:
        _new_generation()
    except CacheUnavailable:
        _Outage.met = True  # owed: set before this process next trusts the cache
        _retry_in_background()


def _retry_in_background() -> None:
    with _Outage.lock:
        if _Outage.retrying:
            return
        _Outage.retrying = True
    threading.Thread(target=_retry_new_generation, name="identity-generation", daemon=True).start()


def _retry_new_generation() -> None:
    # Past the time-to-live every entry kept before the change has expired anyway.
    deadline = time.monotonic() + _seconds()
    try:
        while True:
            time.sleep(RETRY_SECONDS)
            if not _Outage.met or time.monotonic() > deadline:
                return  # set meanwhile (by a request), or no longer needed
            try:
                _new_generation()
                return
            except CacheUnavailable:
                continue
    finally:
        with _Outage.lock:
            _Outage.retrying = False


def forget_everyone(**_signal_arguments) -> None:
    """A new generation now and another once the current transaction commits: every
    cached identity is stale. (Between the two a request can still read the old rows
    and cache them under the first new generation; the second one drops them.)"""
    _try_new_generation()
    transaction.on_commit(_try_new_generation)
