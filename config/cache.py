"""Django's Redis cache backend, keeping one client per connection pool.

django.core.cache.backends.redis builds a new redis.Redis for every operation, and that
constructor (its tables of response callbacks) costs more CPU than the operation itself;
the API throttles count every request. A redis.Redis may be shared by
threads: each command borrows a connection from the pool.
"""

from django.core.cache.backends.redis import RedisCache, RedisCacheClient


class _SharedClient(RedisCacheClient):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._clients = {}

    def get_client(self, key=None, *, write=False):
        pool = self._get_connection_pool(write)
        client = self._clients.get(id(pool))
        if client is None:
            client = self._clients[id(pool)] = self._client(connection_pool=pool)
        return client


class SharedClientRedisCache(RedisCache):
    def __init__(self, server, params):
        super().__init__(server, params)
        self._class = _SharedClient
