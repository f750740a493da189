"""gunicorn's threaded worker, refusing requests fast once it is full.

The stock gthread worker hands every request to its thread pool, whose queue has no
bound: past capacity, requests wait there (and in the listen backlog) until clients
time out, and the worker then still serves requests whose clients are gone. This
worker bounds the wait twice:

- at most `threads + queue_limit` requests in hand: the next one is answered at once,
  from the accepting thread, with 503 and Retry-After;
- a request that waited longer than `max_wait` seconds for a thread is answered the
  same way when a thread takes it, instead of being served late: the queue's length
  in requests says little when their cost varies, its age says how late answers are.

So a client past capacity learns within milliseconds (or at worst `max_wait`) that it
should come back, and those admitted are answered without a long queue ahead of them.
No well-kept library does this inside gunicorn (a proxy such as HAProxy does it with
`maxconn` and `timeout queue`, which a deployment may put in front as well).
"""

from __future__ import annotations

import contextlib
import json
import socket
import time

from gunicorn.workers.gthread import ThreadWorker

RETRY_AFTER_SECONDS = 1
LOG_EVERY_SECONDS = 5
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


def answer_busy(sock: socket.socket) -> None:
    """Send the 503 and close our side. What the client sent is read first, so that
    closing sends FIN rather than a reset that could destroy the answer unread."""
    try:
        sock.setblocking(False)
        with contextlib.suppress(BlockingIOError):
            sock.recv(65536)
        sock.settimeout(1.0)
        sock.sendall(BUSY_RESPONSE)
        sock.shutdown(socket.SHUT_WR)
    except OSError:
        pass  # the client has gone: nothing to tell it


class SheddingThreadWorker(ThreadWorker):
    # Both set by gunicorn.conf.py through with_limits().
    queue_limit = 16
    max_wait = 0.75

    @classmethod
    def with_limits(cls, *, queue: int, max_wait: float) -> type[SheddingThreadWorker]:
        attributes = {"queue_limit": queue, "max_wait": max_wait, "__module__": cls.__module__}
        return type(cls.__name__, (cls,), attributes)

    def init_process(self):
        self._refused = 0
        self._refused_since = time.monotonic()
        super().init_process()

    def in_hand(self) -> int:
        # self.futures also holds finished requests until the main loop next sweeps it.
        return sum(1 for future in self.futures if not future.done())

    def enqueue_req(self, conn):
        if self.in_hand() >= self.cfg.threads + self.queue_limit:
            self.nr_conns -= 1
            answer_busy(conn.sock)
            conn.close()
            self._count_refusal()
            return
        conn.enqueued_at = time.monotonic()
        super().enqueue_req(conn)

    def handle(self, conn):
        if time.monotonic() - conn.enqueued_at > self.max_wait:
            answer_busy(conn.sock)
            self._count_refusal()
            return (False, conn)  # not kept alive: finish_request closes it
        return super().handle(conn)

    def _count_refusal(self) -> None:
        # One line every few seconds, not one per refusal: logging must not add to the
        # load it reports.
        self._refused += 1
        now = time.monotonic()
        if now - self._refused_since >= LOG_EVERY_SECONDS:
            self.log.warning(
                "Busy: answered %d requests with 503 in the last %.0f s",
                self._refused,
                now - self._refused_since,
            )
            self._refused, self._refused_since = 0, now
