"""gunicorn's threaded worker, refusing requests fast once it is full.

The stock gthread worker hands every request to its thread pool, whose queue has no
bound: past capacity, requests wait there (and in the listen backlog) until clients
time out, and the worker then still serves requests whose clients are gone. This
worker keeps at most `threads + queue_limit` requests in hand; the next one is answered
at once, from the accepting thread, with 503 and Retry-After, so a client past capacity
learns in milliseconds that it should come back, and those admitted wait at most a
bounded queue. No well-kept library does this inside gunicorn (proxies such as HAProxy
do it with `maxconn` and a queue timeout, which a deployment may add in front).
"""

from __future__ import annotations

import contextlib
import json
import socket

from gunicorn.workers.gthread import ThreadWorker

RETRY_AFTER_SECONDS = 1
_BODY = json.dumps(
    {"detail": "The server is busy: retry in a moment.", "errors": {}}, separators=(",", ":")
).encode()
BUSY_RESPONSE = (
    b"HTTP/1.1 503 Service Unavailable\r\n"
    b"Content-Type: application/json\r\n"
    + f"Retry-After: {RETRY_AFTER_SECONDS}\r\n".encode()
    + f"Content-Length: {len(_BODY)}\r\n".encode()
    + b"Connection: close\r\n\r\n"
    + _BODY
)


class SheddingThreadWorker(ThreadWorker):
    # Requests waiting for a thread, beyond those being served; gunicorn.conf.py sets it.
    queue_limit = 16

    @classmethod
    def with_queue_limit(cls, limit: int) -> type[SheddingThreadWorker]:
        return type(cls.__name__, (cls,), {"queue_limit": limit, "__module__": cls.__module__})

    def in_hand(self) -> int:
        # self.futures also holds finished requests until the main loop next sweeps it.
        return sum(1 for future in self.futures if not future.done())

    def enqueue_req(self, conn):
        if self.in_hand() >= self.cfg.threads + self.queue_limit:
            self.refuse(conn)
        else:
            super().enqueue_req(conn)

    def refuse(self, conn) -> None:
        self.nr_conns -= 1
        sock = conn.sock
        try:
            # Read what the client sent, so that closing sends FIN rather than a reset
            # that could destroy the answer before the client reads it.
            sock.setblocking(False)
            with contextlib.suppress(BlockingIOError):
                sock.recv(65536)
            sock.settimeout(1.0)
            sock.sendall(BUSY_RESPONSE)
            sock.shutdown(socket.SHUT_WR)
        except OSError:
            pass  # the client has gone: nothing to tell it
        finally:
            conn.close()
        self.log.warning("Busy: refused a request with 503 (%d in hand)", self.in_hand())
