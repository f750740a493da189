"""Django's Redis cache backend, keeping one client per connection pool, and failing fast
while Redis is unreachable.

django.core.cache.backends.redis builds a new redis.Redis for every operation, and that
constructor (its tables of response callbacks) costs more CPU than the operation itself;
the API throttles count every request. A redis.Redis may be shared by
threads: each command borrows a connection from the pool.

An unreachable Redis costs every operation its connect or socket timeout (settings:
CACHES' `socket_connect_timeout`, `socket_timeout`), and a request makes several. So the
first failure opens a circuit for CIRCUIT_SECONDS (an OPTIONS key): until then, every
operation of this process (every thread) raises CacheUnavailable at once, without touching the
network; the first one after it tries Redis again. Callers on the request path
(accounts.identity, accounts.throttling) catch CacheUnavailable and carry on without the
cache; the others see it as the connection error it is.

Also here: `liveness_cache`, the cache every process reads alike (the settings' `liveness`
alias), which the scheduler's tick marks and every periodic task's coalescing asks.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from contextlib import contextmanager

import redis
from django.conf import settings
from django.core.cache import caches
from django.core.cache.backends.redis import RedisCache, RedisCacheClient

logger = logging.getLogger(__name__)

# Errors of the connection, not of a command: a refused or timed-out connect, a reset
# socket, a read that timed out.
_UNREACHABLE = (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError)


def liveness_cache():
    """A cache other processes can read (Redis, or files on the demo's one machine);
    without the `liveness` alias, the default cache."""
    return caches["liveness" if "liveness" in settings.CACHES else "default"]


class CacheUnavailable(redis.exceptions.ConnectionError):
    """The cache's Redis cannot be reached (now, or a moment ago: the circuit is open)."""


class CircuitBreaker:
    """Remembers for `seconds` that Redis failed, so this process's next operations fail
    at once instead of each waiting for a timeout. After that one operation tries Redis
    (the others still fail at once while it does): its success closes the circuit, its
    failure opens it again."""

    def __init__(self, seconds: float):
        self.seconds = seconds
        self._open_until = 0.0  # 0: closed, nothing failed since the last success
        self._probing = False
        self._lock = threading.Lock()

    @property
    def is_open(self) -> bool:
        return time.monotonic() < self._open_until

    @contextmanager
    def guard(self):
        probe = False
        if self._open_until:
            with self._lock:
                if self.is_open or self._probing:
                    raise CacheUnavailable("the cache's Redis failed a moment ago")
                self._probing = probe = True
        try:
            yield
        except _UNREACHABLE as error:
            with self._lock:
                newly = not self._open_until
                self._open_until = time.monotonic() + self.seconds
            if newly:
                logger.warning(
                    "cache unreachable (%s): going without it for %.1f s at a time",
                    error,
                    self.seconds,
                )
            raise CacheUnavailable(str(error)) from error
        else:
            if probe:
                self._open_until = 0.0
                logger.warning("cache reachable again")
        finally:
            if probe:
                self._probing = False


# One breaker per Redis server and process: Django keeps a cache backend per thread.
_BREAKERS: dict[tuple, CircuitBreaker] = {}
_BREAKERS_LOCK = threading.Lock()


def breaker_for(servers: list[str], seconds: float) -> CircuitBreaker:
    with _BREAKERS_LOCK:
        return _BREAKERS.setdefault((*servers, seconds), CircuitBreaker(seconds))


def _guarded(method):
    @functools.wraps(method)
    def guarded(self, *args, **kwargs):
        with self.breaker.guard():
            return method(self, *args, **kwargs)

    return guarded


class _SharedClient(RedisCacheClient):
    def __init__(self, servers, *args, circuit_seconds: float, **kwargs):
        super().__init__(servers, *args, **kwargs)
        self._clients = {}
        self.breaker = breaker_for(servers, circuit_seconds)

    def get_client(self, key=None, *, write=False):
        pool = self._get_connection_pool(write)
        client = self._clients.get(id(pool))
        if client is None:
            client = self._clients[id(pool)] = self._client(connection_pool=pool)
        return client

    add = _guarded(RedisCacheClient.add)
    get = _guarded(RedisCacheClient.get)
    set = _guarded(RedisCacheClient.set)
    touch = _guarded(RedisCacheClient.touch)
    delete = _guarded(RedisCacheClient.delete)
    get_many = _guarded(RedisCacheClient.get_many)
    has_key = _guarded(RedisCacheClient.has_key)
    incr = _guarded(RedisCacheClient.incr)
    set_many = _guarded(RedisCacheClient.set_many)
    delete_many = _guarded(RedisCacheClient.delete_many)
    clear = _guarded(RedisCacheClient.clear)


class SharedClientRedisCache(RedisCache):
    def __init__(self, server, params):
        options = dict(params.get("OPTIONS", {}))
        circuit_seconds = float(options.pop("CIRCUIT_SECONDS", 2.0))
        super().__init__(server, {**params, "OPTIONS": options})
        self._class = functools.partial(_SharedClient, circuit_seconds=circuit_seconds)

    @property
    def breaker(self) -> CircuitBreaker:
        return self._cache.breaker
