"""API throttles: per user, reads and writes counted apart; per address when anonymous.

The rates are read from REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"] on every request
(DRF's own classes read them once, at import), so a changed setting applies at once;
a rate of None turns that throttle off. DRF answers 429 with Retry-After.

Counting is a fixed window: a rate of N per minute accepts the first N requests of each
clock minute (so at most 2N across a window's edge) and refuses the rest until the next
window starts, which Retry-After gives. Each request's number in its window is one
atomic increment of a counter in the default cache, so concurrent requests cannot both
read the same count and both pass (DRF's own throttle reads a list of timestamps and
writes it back, which 32 threads beat: 198 of 200 writes accepted at 120/min):

- Redis (production, shared by every web process): INCR and EXPIRE in one MULTI;
- any other cache (LocMemCache for the SQLite demo, one process): `cache.add` then
  `cache.incr`, which LocMemCache does under its lock.

While Redis is unreachable (core.cache.CacheUnavailable) each web process counts in
its own memory instead, the same way: the limits still hold per process, so a client
gets at most the rate times the number of web processes (gunicorn's workers) in a
window, and the window it was in starts again from zero. Requests are neither refused
for want of Redis nor let through uncounted; once Redis answers, its counters count
again.
"""

from __future__ import annotations

from contextlib import nullcontext

from django.core.cache import DEFAULT_CACHE_ALIAS, BaseCache, caches
from django.core.cache.backends.locmem import LocMemCache
from django.core.cache.backends.redis import RedisCache
from django.utils.connection import ConnectionProxy
from rest_framework.permissions import SAFE_METHODS
from rest_framework.settings import api_settings
from rest_framework.throttling import AnonRateThrottle, UserRateThrottle

from core.cache import CacheUnavailable, SharedClientRedisCache

# A window's counter outlives its window by this many seconds, so it never expires
# while it is still counted.
_MARGIN = 5

# This process's counters while the shared cache is unreachable: room for a window's
# counters of many clients (one entry per client and scope).
_FALLBACK = LocMemCache("throttle-fallback", {"OPTIONS": {"MAX_ENTRIES": 50_000}})


def count_request(cache: BaseCache, key: str, ttl: int) -> int:
    """Count one request under `key` (which names its window) and return its number."""
    if isinstance(cache, RedisCache):
        name = cache.make_and_validate_key(key)
        client = cache._cache.get_client(name, write=True)
        shared = isinstance(cache, SharedClientRedisCache)
        guard = cache.breaker.guard() if shared else nullcontext()
        with guard, client.pipeline(transaction=True) as pipe:
            count, _ = pipe.incr(name).expire(name, ttl).execute()
        return count
    while True:
        cache.add(key, 0, ttl)
        try:
            return cache.incr(key)
        except ValueError:  # gone between add and incr (evicted): count again
            continue


class _LiveRatesFixedWindow:
    def __init__(self):
        pass  # the scope, hence the rate, is only known per request

    def get_rate(self):
        return api_settings.DEFAULT_THROTTLE_RATES.get(self.scope)

    def _prepare(self, scope: str) -> None:
        self.scope = scope
        self.rate = self.get_rate()
        self.num_requests, self.duration = self.parse_rate(self.rate)

    def _cache(self) -> BaseCache:
        cache = self.cache
        return caches[DEFAULT_CACHE_ALIAS] if isinstance(cache, ConnectionProxy) else cache

    def allow_request(self, request, view):
        if self.rate is None:
            return True
        self.key = self.get_cache_key(request, view)
        if self.key is None:
            return True
        self.now = self.timer()
        window = int(self.now // self.duration)
        self.window_end = (window + 1) * self.duration
        key, ttl = f"{self.key}_{window}", self.duration + _MARGIN
        try:
            count = count_request(self._cache(), key, ttl)
        except CacheUnavailable:
            count = count_request(_FALLBACK, key, ttl)
        return count <= self.num_requests

    def wait(self):
        """Seconds until the next window, when this one is spent."""
        return max(self.window_end - self.now, 0)


class UserReadWriteThrottle(_LiveRatesFixedWindow, UserRateThrottle):
    """Signed-in users: `read` for GET, HEAD and OPTIONS, `write` for the rest."""

    def allow_request(self, request, view):
        if not request.user or not request.user.is_authenticated:
            return True
        self._prepare("read" if request.method in SAFE_METHODS else "write")
        return super().allow_request(request, view)


class AnonymousThrottle(_LiveRatesFixedWindow, AnonRateThrottle):
    def allow_request(self, request, view):
        if request.user and request.user.is_authenticated:
            return True
        self._prepare("anon")
        return super().allow_request(request, view)
