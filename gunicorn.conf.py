"""gunicorn for this app: `gunicorn -c gunicorn.conf.py config.wsgi` (docker compose's
web service, make bench-load). Every figure can be set from the environment (GUNICORN_*,
listed in .env.example); an invalid value stops start-up naming the variable.

Sizing: Django holds the GIL while it works, so processes do the computing and a few
threads each overlap the waits on PostgreSQL and Redis. More threads do not serve more:
threads contending for one GIL cost CPU of their own, and on a 2-CPU machine with
PostgreSQL beside it, 8 threads in each of 2 processes served 96 requests/s of
`make bench-load`'s mix where 2 threads in each of 3 served 160. Past `threads + queue` requests
in hand, or for one that waited past GUNICORN_MAX_WAIT, a worker answers 503 with
Retry-After (config.gunicorn_worker) rather than letting clients queue until they
time out.
"""

import os

from config.gunicorn_worker import SheddingThreadWorker
from config.settings import env_float, env_int, env_str

bind = env_str("GUNICORN_BIND", "0.0.0.0:8000")
workers = env_int("GUNICORN_WORKERS", 0) or (os.cpu_count() or 1) + 1
threads = env_int("GUNICORN_THREADS", 2, minimum=1)
# Requests a worker holds waiting for a thread, and how long one may wait: past either,
# 503 with Retry-After (config.gunicorn_worker). 0.75 s: at 200 clients on 2 CPUs the
# offered load is about what the machine serves, and with 0.5 s brief bursts were shed
# (69 of 32,040 requests in one `make bench-load`); past capacity, clients still learn
# within a second that they should retry.
worker_class = SheddingThreadWorker.with_limits(
    queue=env_int("GUNICORN_QUEUE", 32), max_wait=env_float("GUNICORN_MAX_WAIT", 0.75)
)
# Connections a worker holds open (idle keep-alive ones included).
worker_connections = env_int("GUNICORN_WORKER_CONNECTIONS", 1000, minimum=1)
# Connections the kernel holds before a worker accepts them: workers accept at once
# and refuse what they cannot serve, so a short backlog is enough, and a bounded one
# keeps a stalled server from collecting connections it will never serve in time.
backlog = env_int("GUNICORN_BACKLOG", 256, minimum=1)
# A worker silent this long is killed and replaced; a request is never this slow.
timeout = env_int("GUNICORN_TIMEOUT", 30, minimum=1)
# On SIGTERM a worker stops accepting and finishes the requests it holds, for up to this
# long (docker compose's stop_grace_period for web is longer). A plain stop still leaves
# a window while nothing listens; a deploy without one is rolling (README, "Deploying
# without downtime"): USR2 starts a new master with the new code on the same socket, and
# SIGTERM to the old one once the new one serves. HUP only replaces the workers, from
# the code already loaded (preload_app), so it is no way to deploy new code.
graceful_timeout = env_int("GUNICORN_GRACEFUL_TIMEOUT", 30, minimum=1)
keepalive = env_int("GUNICORN_KEEPALIVE", 5, minimum=1)
# Replace each worker after this many requests (the jitter spreads the restarts), so a
# slow leak cannot grow without bound; the app is loaded before forking, so a restart
# costs a fork, not an import of Django. Not much more often than every quarter of an
# hour at full load: a restart closes the worker's keep-alive connections and starts
# it cold, and at 5,000 requests `make bench-load` saw one a minute, each with a burst
# of 503s and reset connections.
max_requests = env_int("GUNICORN_MAX_REQUESTS", 50000)
max_requests_jitter = env_int("GUNICORN_MAX_REQUESTS_JITTER", 5000)
preload_app = True
# Off by default: the proxy in front logs requests; "-" logs them to stdout.
accesslog = env_str("GUNICORN_ACCESS_LOG", "") or None
errorlog = "-"
# The proxy in front terminates TLS and sets X-Forwarded-Proto (SECURE_PROXY_SSL_HEADER).
forwarded_allow_ips = env_str("GUNICORN_FORWARDED_ALLOW_IPS", "127.0.0.1,::1")
