"""Where forecasts are kept and how a new one is asked for (see the package doc): the
shared cache (Redis when REDIS_URL is set) and, per process, the last one read of each
queue; whether a stored one is current; the background task's side (requests
coalesce; one computation per queue at a time).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import threading
import time

from django.conf import settings
from django.core.cache import cache
from django.db import connection, transaction
from django.utils import timezone

from core.cache import CacheUnavailable
from core.celery import task
from engine.gc_pause import cyclic_gc_paused
from fleet.models import JobQueue
from scheduler.services.estimates.forecast import Stored, compute_forecast, queue_fingerprint

logger = logging.getLogger(__name__)


# A stored forecast is pickled, so it names the modules of its classes (Stored, WhatIf,
# History, Clock): raise this whenever one of them moves or changes shape, so that no
# release reads what another stored (2: they moved into this package's modules; 3: rows
# carry the calibrated p10–p90 range and WhatIf the record's calibrations; 4: the
# standing's policy carries the queue's orders and its borrowing heads are jobs).
STORED_FORMAT = 4


def cache_key(queue_id: int) -> str:
    return f"eta:{STORED_FORMAT}:{connection.settings_dict['NAME']}:{queue_id}"


# Per process, the last forecast read of each queue (by version), so a process reads a
# forecast from the cache once; a small header says which version is current.
_LOCAL: dict[int, Stored] = {}
_LOCAL_LOCK = threading.Lock()
_LOCAL_QUEUES = 8  # 2.8 MB pickled each at 10,000 waiting jobs (bench_eta)


def load(queue_id: int) -> Stored | None:
    key = cache_key(queue_id)
    with _LOCAL_LOCK:
        local = _LOCAL.get(queue_id)
    try:
        header = cache.get(key + ":v")
        if header is None:
            return None
        if local is not None and local.version == header[0]:
            return local
        with cyclic_gc_paused():  # some 100,000 objects at 10,000 waiting jobs, no cycles
            stored = cache.get(key)
    except CacheUnavailable:
        return local  # Redis is down: this process's last one, or none (then computed)
    if stored is None:
        return None
    _remember(queue_id, stored)
    return stored


def _remember(queue_id: int, stored: Stored) -> None:
    with _LOCAL_LOCK:
        _LOCAL.pop(queue_id, None)
        _LOCAL[queue_id] = stored
        while len(_LOCAL) > _LOCAL_QUEUES:
            _LOCAL.pop(next(iter(_LOCAL)))


def _save(queue_id: int, stored: Stored) -> None:
    key = cache_key(queue_id)
    timeout = getattr(settings, "ESTIMATE_STORE_SECONDS", 24 * 3600)
    _remember(queue_id, stored)
    with contextlib.suppress(CacheUnavailable):  # kept in this process meanwhile
        cache.set(key, stored, timeout)
        cache.set(key + ":v", (stored.version, stored.now, time.time(), stored.spent), timeout)


def forget(queue: JobQueue) -> None:
    """Drop what is stored about the queue (the next estimate computes afresh)."""
    key = cache_key(queue.pk)
    cache.delete_many([key, key + ":v"])
    with _LOCAL_LOCK:
        _LOCAL.pop(queue.pk, None)


def forget_local() -> None:
    """Drop what this process kept of the stored forecasts (as a fresh process)."""
    with _LOCAL_LOCK:
        _LOCAL.clear()


def _fresh(stored: Stored, fingerprint: tuple, now: dt.datetime) -> bool:
    keep = getattr(settings, "ESTIMATE_CACHE_SECONDS", 30)
    return stored.fingerprint == fingerprint and stored.now <= now <= stored.now + dt.timedelta(
        seconds=keep
    )


def stored_forecast(queue: JobQueue, now: dt.datetime | None) -> tuple[Stored, bool]:
    """The queue's stored forecast and whether it is current.

    Current: the queue's fingerprint is the one it was made with, and it is at most
    `ESTIMATE_CACHE_SECONDS` old (and not from after `now`). Otherwise the last one is
    served as it is (pages say "as of") and a new one is asked of the background task,
    unless nothing is stored yet, the queue is small (`ESTIMATE_SYNC_MAX_LIVE` live
    jobs: computing costs less than asking), or the caller asks about a given `now`:
    then it is computed here."""
    given = now is not None
    now = now or timezone.now()
    fingerprint, live = queue_fingerprint(queue)
    stored = load(queue.pk)
    if stored is not None and _fresh(stored, fingerprint, now):
        return stored, True
    small = live <= getattr(settings, "ESTIMATE_SYNC_MAX_LIVE", 300)
    if stored is None or small or given:
        computed = compute_forecast(queue, now=now, fingerprint=fingerprint)
        if stored is None or computed.now >= stored.now:
            _save(queue.pk, computed)
        return computed, True
    request_estimates(queue.pk, read=True)
    return stored, False


def peek(queue: JobQueue) -> tuple[Stored | None, bool]:
    """The queue's stored forecast and whether it is current, computing and asking for
    nothing (what the health of the background forecasts is read from)."""
    stored = load(queue.pk)
    if stored is None:
        return None, False
    fingerprint, _ = queue_fingerprint(queue)
    return stored, _fresh(stored, fingerprint, timezone.now())


# -- the background task's side ---------------------------------------------------------------

# A request waits for its task this long at most (its message may be lost).
REQUEST_STALE = 30


def request_estimates(queue_id: int, *, read: bool = False) -> None:
    """Ask, once the current transaction commits, for the queue's forecast to be made
    again in the background (`scheduler.estimate_queue`, on the interactive queue).

    Requests coalesce: while one waits, another only relies on it (at most one message
    per queue waits). After a pass (`read` False) the task recomputes only if the queue
    changed; after a read of a forecast that is no longer current, also when it is
    merely old. A queue whose forecast is costly is not recomputed more often than the
    time the last one took after it ended."""
    transaction.on_commit(lambda: send_estimates(queue_id, read=read))


def send_estimates(queue_id: int, *, read: bool = False, wait: float = 0.0) -> None:
    try:
        _send_estimates(queue_id, read=read, wait=wait)
    except CacheUnavailable as error:  # Redis is down: the next read or pass asks again
        logger.warning("could not ask for the estimates of queue %s (%s)", queue_id, error)


def _send_estimates(queue_id: int, *, read: bool, wait: float) -> None:
    key = cache_key(queue_id) + ":asked"
    kind = "read" if read else "change"
    if not cache.add(key, kind, REQUEST_STALE):
        if read and cache.get(key) == "change":
            cache.set(key, kind, REQUEST_STALE)  # the waiting task recomputes an old one too
        return
    header = cache.get(cache_key(queue_id) + ":v")
    countdown = wait
    if header is not None:
        _, _, finished, spent = header
        countdown = min(10.0, max(wait, finished + spent - time.time()))
    try:
        task("scheduler.estimate_queue").apply_async((queue_id,), countdown=countdown or None)
    except Exception:  # noqa: BLE001 - any broker failure: the next read asks again
        cache.delete(key)
        logger.exception("could not enqueue the estimates of queue %s", queue_id)


def refresh_estimates(queue_id: int) -> str:
    """The background task: forecast the queue again if it changed (or, asked by a
    read, if its forecast is old); one computation per queue at a time."""
    key = cache_key(queue_id)
    kind = cache.get(key + ":asked") or "change"
    cache.delete(key + ":asked")  # from now on a request needs a new task
    if not cache.add(key + ":computing", 1, 600):
        send_estimates(queue_id, read=kind == "read", wait=1.0)  # after the running one
        return "busy"
    try:
        queue = JobQueue.objects.filter(pk=queue_id).first()
        if queue is None:
            return "no such queue"
        now = timezone.now()
        fingerprint, _ = queue_fingerprint(queue)
        stored = load(queue_id)
        if stored is not None and (
            _fresh(stored, fingerprint, now)
            or (kind == "change" and stored.fingerprint == fingerprint)
        ):
            return "unchanged"
        _save(queue_id, compute_forecast(queue, now=now, fingerprint=fingerprint))
        return "computed"
    finally:
        cache.delete(key + ":computing")
