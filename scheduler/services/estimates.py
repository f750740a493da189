"""Why a job waits, where it stands, and when it should start: the database side.

Reads a queue's live snapshot (through `fleet.bridge`, the one bridge to the
engine) and the work figures of its live jobs, and hands them to the engine
(`engine.explain`, `engine.eta`): positions and blockers come
from the same Board the live pass uses, estimates from a forward simulation of the
snapshot with each job's declared duration corrected by history (how long finished
jobs of the same definition, else the same share, else the queue, really ran against
what they declared; `HISTORY_DAYS` of single-run jobs).

The queue's clock: a simulated queue runs `speed` compute seconds per real second, so
the forecast works in compute seconds (epoch seconds x speed) and every instant is
turned back into a real one for display; waits are given in the queue's clock too.

What is computed for a queue (its explanations, both forecasts and what "if you submit
this now" reads of them) is stored in the shared cache (Redis when REDIS_URL is set)
with the queue's fingerprint (`_fingerprint`: its last job event, its live jobs'
figures, its policy) and its instant, and each process keeps the last one it read. A
read serves it when it is current (same fingerprint, at most `ESTIMATE_CACHE_SECONDS`
old); otherwise it serves it all the same, marked not current (pages say "as of",
the API gives `estimated_at` and `current`), and asks for a new one: the Celery task
`scheduler.estimate_queue` on the interactive queue, also asked after every pass
(`request_estimates`: coalesced, at most one waiting per queue; it recomputes only
when the queue changed). Only the first forecast of a queue, a small queue's
(`ESTIMATE_SYNC_MAX_LIVE` live jobs, 300: some 40 ms on PostgreSQL, less than asking)
and one asked for a given `now` are computed by the read. Pages, the pending list and
the estimate endpoint all read the same forecast, so they agree. At 10,000 waiting
jobs a forecast takes over a second; serving one costs some 10 ms, 30 ms when the
process reads it from the cache first (`manage.py bench_eta`).
"""

from __future__ import annotations

import datetime as dt
import logging
import re
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, replace

from django.conf import settings
from django.core.cache import cache
from django.db import connection, transaction
from django.db.models import Count, Max, Sum
from django.utils import timezone

from config.celery import task
from engine import PendingJob, RunningJob, Snapshot
from engine.eta import (
    Correction,
    Range,
    correction_of,
    estimate_range,
    pick_correction,
)
from engine.explain import (
    STARTS_NOW,
    Explainer,
    Forecast,
    Standing,
    Work,
    describe,
    dispatch_order,
    extra_start,
    is_misconfigured,
    ready_at,
)
from engine.gc_pause import cyclic_gc_paused
from engine.quota import Policy
from engine.strategies import strategy_capabilities
from engine.types import SERVICE_ENVIRONMENT_MAX_RESOURCE
from fleet.bridge import (
    engine_id,
    epoch_column,
    epoch_seconds,
    fetch_rows,
    job_pk,
    policy_shares,
    queue_snapshot,
    queue_spec,
    seconds_of,
    share_spec,
)
from fleet.models import CapacityLimit, Job, JobEvent, JobQueue, QueueCapacity
from scheduler.executors import executor_for
from scheduler.services.jobs import JobData, JobError, job_preview

logger = logging.getLogger(__name__)

HISTORY_DAYS = 30
HISTORY_ROWS = 2000


# -- the queue's clock ------------------------------------------------------------------


@dataclass(frozen=True)
class Clock:
    """Real instants <-> the queue's clock (compute seconds; epoch seconds x speed)."""

    speed: float
    simulated: bool

    def to_queue(self, seconds: float | None) -> int | None:
        return None if seconds is None else int(seconds * self.speed)

    def to_real(self, value: int | None) -> dt.datetime | None:
        if value is None:
            return None
        return dt.datetime.fromtimestamp(value / self.speed, tz=dt.UTC)


def queue_clock(queue: JobQueue) -> Clock:
    executor = executor_for(queue)
    simulated = executor.capabilities.modelled_clock
    return Clock(speed=executor.speed if simulated else 1.0, simulated=simulated)


def _in_clock(snapshot: Snapshot, clock: Clock) -> Snapshot:
    if clock.speed == 1:
        return snapshot
    speed = clock.speed

    def q(value):
        return None if value is None else int(value * speed)

    # Built field by field: `dataclasses.replace` costs several times more per job.
    running = tuple(
        RunningJob(
            id=job.id,
            share=job.share,
            priority=job.priority,
            instance_type=job.instance_type,
            instances=job.instances,
            started_at=q(job.started_at),
            start_seq=job.start_seq,
            protected_until=q(job.protected_until),
            preemptions=job.preemptions,
            preemption_retries=job.preemption_retries,
            submitted_at=q(job.submitted_at),
        )
        for job in snapshot.running
    )
    pending = tuple(
        PendingJob(
            id=job.id,
            share=job.share,
            priority=job.priority,
            instance_type=job.instance_type,
            instances=job.instances,
            submitted_at=q(job.submitted_at),
            submit_seq=job.submit_seq,
            preemptions=job.preemptions,
            preemption_retries=job.preemption_retries,
            protected_until=q(job.protected_until),
            misconfigured_since=q(job.misconfigured_since),
        )
        for job in snapshot.pending
    )
    return replace(snapshot, running=running, pending=pending)


# -- history ------------------------------------------------------------------------------


@dataclass(frozen=True)
class History:
    by_definition: dict[int, Correction]
    by_share: dict[int, Correction]
    queue: Correction | None

    def correction(self, definition_id: int | None, share_id: int) -> Correction:
        return pick_correction(
            self.by_definition.get(definition_id) if definition_id else None,
            self.by_share.get(share_id),
            self.queue,
        )


def queue_history(queue: JobQueue, clock: Clock, now: dt.datetime) -> History:
    """Ratios actual / declared of the queue's recent single-run successes."""
    rows = (
        Job.objects.filter(
            queue=queue,
            state=Job.State.SUCCEEDED,
            attempt=1,
            finished_at__gte=now - dt.timedelta(days=HISTORY_DAYS),
        )
        .order_by("finished_at", "pk")
        .values_list(
            "share_id",
            "definition_revision__definition_id",
            "expected_duration",
            epoch_column("started_at"),
            epoch_column("finished_at"),
        )
    )
    count = rows.count()
    if count > HISTORY_ROWS:
        rows = rows[count - HISTORY_ROWS :]
    by_definition: dict[int, list[float]] = defaultdict(list)
    by_share: dict[int, list[float]] = defaultdict(list)
    everything: list[float] = []
    for share_id, definition_id, expected, started, finished in fetch_rows(rows):
        if started is None or finished is None:
            continue
        actual = (seconds_of(finished) - seconds_of(started)) * clock.speed
        ratio = max(actual, 1.0) / max(expected, 1)
        everything.append(ratio)
        by_share[share_id].append(ratio)
        if definition_id is not None:
            by_definition[definition_id].append(ratio)

    def groups(values: dict[int, list[float]], basis: str) -> dict[int, Correction]:
        found = {}
        for key, ratios in values.items():
            correction = correction_of(ratios, basis)
            if correction is not None:
                found[key] = correction
        return found

    return History(
        by_definition=groups(by_definition, "definition"),
        by_share=groups(by_share, "share"),
        queue=correction_of(everything, "queue"),
    )


# -- the live state -------------------------------------------------------------------------


@dataclass(frozen=True)
class JobFacts:
    pk: int
    name: str
    share_id: int
    definition_id: int | None


@dataclass
class QueueView:
    queue: JobQueue
    clock: Clock
    now: dt.datetime
    now_q: int  # now in the queue's clock
    snapshot: Snapshot
    work: dict[str, Work]
    facts: dict[str, JobFacts]
    history: History
    share_ids: dict[str, int]
    share_order: dict[str, int]


def queue_view(queue: JobQueue, *, now: dt.datetime | None = None) -> QueueView:
    now = now or timezone.now()
    clock = queue_clock(queue)
    snapshot, _ = queue_snapshot(queue, now=now)
    snapshot = _in_clock(snapshot, clock)
    now_q = clock.to_queue(epoch_seconds(now))
    rows = (
        Job.objects.filter(queue=queue, state__in=Job.LIVE_STATES)
        .order_by()
        .values_list(
            "pk",
            "state",
            "name",
            "share_id",
            "definition_revision__definition_id",
            "expected_duration",
            "checkpointed",
            "progress",
            "run_overhead",
            "checkpoint_interval",
            "restart_overhead",
            "attempt",
            epoch_column("started_at"),
        )
    )
    process = executor_for(queue).capabilities.reports_progress
    work: dict[str, Work] = {}
    facts: dict[str, JobFacts] = {}
    for (
        pk,
        state,
        name,
        share_id,
        definition_id,
        expected,
        saved,
        progress,
        overhead,
        interval,
        restart,
        attempt,
        started,
    ) in fetch_rows(rows):
        job_id = engine_id(pk)
        facts[job_id] = JobFacts(pk, name, share_id, definition_id)
        if state == Job.State.RUNNING and process and started is not None:
            # A process reports its progress: its end is `now + what is left`.
            elapsed = now.timestamp() - seconds_of(started)
            saved = max(0, progress - max(0, int(elapsed) - overhead))
        work[job_id] = Work(
            duration=expected,
            saved=saved,
            overhead=overhead if state == Job.State.RUNNING else 0,
            checkpoint_interval=interval,
            restart_overhead=restart,
            restarted=attempt > 0,
        )
    shares = list(queue.shares.order_by("position", "id").values_list("name", "pk"))
    return QueueView(
        queue=queue,
        clock=clock,
        now=now,
        now_q=now_q,
        snapshot=snapshot,
        work=work,
        facts=facts,
        history=queue_history(queue, clock, now),
        share_ids={name: pk for name, pk in shares},
        share_order={name: index for index, (name, _) in enumerate(shares)},
    )


def _corrections(view: QueueView) -> dict[str, Correction]:
    history = view.history
    return {
        job_id: history.correction(fact.definition_id, fact.share_id)
        for job_id, fact in view.facts.items()
    }


# -- what pages and the API show -------------------------------------------------------------


@dataclass(frozen=True)
class Estimate:
    """A start range: real instants, and waits in the queue's clock (seconds) from the
    instant the forecast was made (`estimated_at` of what carries it)."""

    start_p50: dt.datetime | None
    start_p90: dt.datetime | None
    wait_p50: int | None
    wait_p90: int | None
    basis: str  # where the duration correction came from
    borrowing: bool | None

    @property
    def never(self) -> bool:
        return self.start_p50 is None


@dataclass(frozen=True)
class PendingEntry:
    job_id: int
    name: str
    share: str
    order: int  # 1-based place in the dispatch order
    position: int | None
    queue_length: int
    borrow_position: int | None
    borrow_queue_length: int
    reason: str  # the engine's code
    blocker: str  # plain words
    estimate: Estimate
    needs_decision: bool  # it can never start as configured
    estimated_at: dt.datetime | None = None  # the forecast's instant
    current: bool = True  # False: the queue changed since (or it is old); a new one is due


class Entries(Sequence):
    """A forecast's entries in dispatch order, each built when read (a page of them)."""

    def __init__(self, stored: Stored, now: dt.datetime, current: bool) -> None:
        self.stored, self.now, self.current = stored, now, current

    def __len__(self) -> int:
        return len(self.stored.rows)

    def __getitem__(self, index):
        rows = self.stored.rows
        if isinstance(index, slice):
            return [self._build(i) for i in range(*index.indices(len(rows)))]
        if index < 0:
            index += len(rows)
        if not 0 <= index < len(rows):
            raise IndexError(index)
        return self._build(index)

    def of_job(self, job_id: int) -> PendingEntry | None:
        index = self.stored.index.get(job_id)
        return None if index is None else self._build(index)

    def _build(self, index: int) -> PendingEntry:
        stored = self.stored
        (job_id, name, share, position, length, borrow, borrow_length, reason, words, p50, p90,
         basis, borrowed, decide) = stored.rows[index]  # fmt: skip
        return PendingEntry(
            job_id=job_id,
            name=name,
            share=share,
            order=index + 1,
            position=position,
            queue_length=length,
            borrow_position=borrow,
            borrow_queue_length=borrow_length,
            reason=reason,
            blocker=_instants(words, stored.clock, self.now),
            estimate=_estimate(stored.clock, stored.now_q, p50, p90, basis, borrowed),
            needs_decision=decide,
            estimated_at=stored.now,
            current=self.current,
        )


@dataclass(frozen=True)
class QueueEstimates:
    queue: JobQueue
    clock: Clock
    now: dt.datetime  # the forecast's instant
    entries: Entries
    current: bool = True

    @property
    def estimated_at(self) -> dt.datetime:
        return self.now

    def by_job(self) -> dict[int, PendingEntry]:
        return {entry.job_id: entry for entry in self.entries}

    def of_job(self, job_id: int) -> PendingEntry | None:
        return self.entries.of_job(job_id)


# An instant in a stored blocker sentence, printed when it is read (the reader's time
# zone and day): "\x00<queue clock>\x00".
_INSTANT = re.compile("\x00(-?[0-9]+)\x00")


def _mark(value: int) -> str:
    return f"\x00{value}\x00"


def _when(clock: Clock, now: dt.datetime):
    def when(value: int) -> str:
        moment = timezone.localtime(clock.to_real(value))
        if moment.date() == timezone.localtime(now).date():
            return moment.strftime("%H:%M")
        return moment.strftime("%Y-%m-%d %H:%M")

    return when


def _instants(words: str, clock: Clock, now: dt.datetime) -> str:
    if "\x00" not in words:
        return words
    when = _when(clock, now)
    return _INSTANT.sub(lambda found: when(int(found[1])), words)


def _estimate(clock: Clock, now_q: int, p50, p90, basis: str, borrowed) -> Estimate:
    return Estimate(
        start_p50=clock.to_real(p50),
        start_p90=clock.to_real(p90),
        wait_p50=None if p50 is None else max(0, p50 - now_q),
        wait_p90=None if p90 is None else max(0, p90 - now_q),
        basis=basis,
        borrowing=borrowed,
    )


def _namer(names: dict[str, str]):
    def name(job_id: str) -> str:
        found = names.get(job_id)
        return f"job {job_pk(job_id)} ({found})" if found is not None else f"job {job_pk(job_id)}"

    return name


# -- the stored forecast ----------------------------------------------------------------------


@dataclass(frozen=True)
class WhatIf:
    """What "if you submit this now" reads: the board's standing at the forecast's
    instant, both recorded runs' usage timelines, when each share's queue is through
    down to each priority, and the names and ends its sentence may mention."""

    shape: Snapshot  # the queue and shares, no jobs
    standing: Standing
    low: Forecast  # times and usages only
    high: Forecast
    # share -> [(priority, (low, high) start of the last job at that priority or above)],
    # highest priority first; None: one of them never starts
    through: dict[str, list[tuple[int, tuple[int | None, int | None]]]]
    names: dict[str, str]
    ends: dict[str, int]
    history: History


@dataclass(frozen=True)
class Stored:
    """A queue's forecast as kept in the shared cache (see the module doc)."""

    version: str
    fingerprint: tuple
    now: dt.datetime
    now_q: int
    clock: Clock
    spent: float  # seconds the computation took
    rows: list[tuple]  # Entries._build's fields, in dispatch order
    index: dict[int, int]  # job pk -> row
    whatif: WhatIf


def _key(queue_id: int) -> str:
    return f"eta:{connection.settings_dict['NAME']}:{queue_id}"


# Per process, the last forecast read of each queue (by version), so a process reads a
# forecast from the cache once; a small header says which version is current.
_LOCAL: dict[int, Stored] = {}
_LOCAL_LOCK = threading.Lock()
_LOCAL_QUEUES = 8  # 2.8 MB pickled each at 10,000 waiting jobs (bench_eta)


def _load(queue_id: int) -> Stored | None:
    key = _key(queue_id)
    header = cache.get(key + ":v")
    if header is None:
        return None
    with _LOCAL_LOCK:
        local = _LOCAL.get(queue_id)
    if local is not None and local.version == header[0]:
        return local
    with cyclic_gc_paused():  # some 100,000 objects at 10,000 waiting jobs, no cycles
        stored = cache.get(key)
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
    key = _key(queue_id)
    timeout = getattr(settings, "ESTIMATE_STORE_SECONDS", 24 * 3600)
    cache.set(key, stored, timeout)
    cache.set(key + ":v", (stored.version, stored.now, time.time(), stored.spent), timeout)
    _remember(queue_id, stored)


def forget(queue: JobQueue) -> None:
    """Drop what is stored about the queue (the next estimate computes afresh)."""
    key = _key(queue.pk)
    cache.delete_many([key, key + ":v"])
    with _LOCAL_LOCK:
        _LOCAL.pop(queue.pk, None)


def forget_local() -> None:
    """Drop what this process kept of the stored forecasts (as a fresh process)."""
    with _LOCAL_LOCK:
        _LOCAL.clear()


def _fingerprint(queue: JobQueue) -> tuple[tuple, int]:
    """Changes whenever anything an estimate reads changes: a job event (submissions,
    starts, preemptions, ends, priority changes all write one), the live jobs' figures,
    the policy (shares, limits, capacity, queue-wide rules). With the live jobs' count."""
    last_event = (
        JobEvent.objects.filter(job__queue_id=queue.pk)
        .order_by("-pk")
        .values_list("pk", flat=True)
        .first()
    )
    live = Job.objects.filter(queue=queue, state__in=Job.LIVE_STATES).aggregate(
        n=Count("pk"),
        last=Max("pk"),
        work=Sum("expected_duration"),
        priority=Sum("priority"),
        size=Sum("instances"),
        saved=Sum("checkpointed"),
    )
    shares = tuple(
        queue.shares.order_by("position", "id").values_list(
            "pk", "name", "strategy", "borrow_limit", "in_share_preemption", "state"
        )
    )
    limits = tuple(
        CapacityLimit.objects.filter(share__queue=queue)
        .order_by("pk")
        .values_list("share_id", "instance_type_id", "max_instances")
    )
    capacity = tuple(
        QueueCapacity.objects.filter(queue=queue)
        .order_by("pk")
        .values_list("instance_type_id", "instances")
    )
    rules = JobQueue.objects.filter(pk=queue.pk).values_list(
        "executor", "runnable_time_limit", "default_preemption_retries"
    )
    fingerprint = (
        last_event,
        tuple(sorted(live.items())),
        shares,
        limits,
        capacity,
        tuple(rules),
    )
    return fingerprint, live["n"] or 0


def _fresh(stored: Stored, fingerprint: tuple, now: dt.datetime) -> bool:
    keep = getattr(settings, "ESTIMATE_CACHE_SECONDS", 30)
    return stored.fingerprint == fingerprint and stored.now <= now <= stored.now + dt.timedelta(
        seconds=keep
    )


def compute_forecast(queue: JobQueue, *, now: dt.datetime | None = None, fingerprint=None):
    """Forecast the queue at `now` (a forward simulation of every waiting job, twice)
    and store it; what the background task runs."""
    began = time.perf_counter()
    if fingerprint is None:
        fingerprint, _ = _fingerprint(queue)
    view = queue_view(queue, now=now)
    explainer = Explainer(view.snapshot, view.now_q)
    corrections = _corrections(view)
    ranges, low, high = estimate_range(
        view.snapshot, view.now_q, view.work, corrections, record=True
    )
    rows = _rows(view, explainer, corrections, low, ranges)
    standing = explainer.standing.detached()
    names = {
        job_id: view.facts[job_id].name for job_id in standing.referenced() if job_id in view.facts
    }
    borrowers = {b.job for _, found in standing._facts.values() for b in found}
    whatif = WhatIf(
        shape=replace(view.snapshot, running=(), pending=()),
        standing=standing,
        low=Forecast(
            starts={}, borrowed={}, ends={}, preempted={}, times=low.times, usages=low.usages
        ),  # fmt: skip
        high=Forecast(
            starts={}, borrowed={}, ends={}, preempted={}, times=high.times, usages=high.usages
        ),  # fmt: skip
        through=_through(view, low, high),
        names=names,
        ends={job_id: low.ends[job_id] for job_id in borrowers if job_id in low.ends},
        history=view.history,
    )
    stored = Stored(
        version=uuid.uuid4().hex,
        fingerprint=fingerprint,
        now=view.now,
        now_q=view.now_q,
        clock=view.clock,
        spent=time.perf_counter() - began,
        rows=rows,
        index={row[0]: i for i, row in enumerate(rows)},
        whatif=whatif,
    )
    return stored


def _through(view: QueueView, low: Forecast, high: Forecast) -> dict:
    """For each share and each priority among its waiting jobs: when the last of its jobs
    at that priority or above starts in each run (`explain.ready_at`, the engine's rule,
    asked for a job of that priority submitted after them)."""
    by_share: dict[str, list[PendingJob]] = defaultdict(list)
    for job in view.snapshot.pending:
        by_share[job.share].append(job)
    found = {}
    for share, pending in by_share.items():
        part = replace(view.snapshot, pending=tuple(pending))
        levels = []
        for priority in sorted({job.priority for job in pending}, reverse=True):
            probe = PendingJob(
                id="probe",
                share=share,
                priority=priority,
                instance_type=pending[0].instance_type,
                instances=1,
                submitted_at=view.now_q + 1,
            )
            levels.append(
                (
                    priority,
                    (
                        ready_at(part, low.starts, probe, view.now_q),
                        ready_at(part, high.starts, probe, view.now_q),
                    ),
                )
            )
        found[share] = levels
    return found


def _rows(view: QueueView, explainer: Explainer, corrections, low: Forecast, ranges) -> list:
    explanations = explainer.explanations
    order = dispatch_order(explanations, low.starts, view.share_order)
    facts = view.facts

    def name(job_id: str) -> str:
        fact = facts.get(job_id)
        return f"job {job_pk(job_id)} ({fact.name})" if fact else f"job {job_pk(job_id)}"

    rows = []
    # Pending jobs a pass at `now` would start (the live pass has not run yet) come
    # first: the engine does not explain them as waiting.
    for job in view.snapshot.pending:
        if job.id in explanations or job.id not in ranges:
            continue
        r = ranges[job.id]
        rows.append(
            (
                job_pk(job.id),
                facts[job.id].name,
                job.share,
                None,
                0,
                None,
                0,
                STARTS_NOW,
                "it starts at the next scheduling pass",
                r.p50,
                r.p90,
                corrections[job.id].basis,
                r.borrowed,
                False,
            )  # fmt: skip
        )
    ends = low.ends
    for job_id in order:
        e = explanations[job_id]
        r = ranges[job_id]
        words = describe(e, name=name, when=_mark, ends=ends)
        fact = facts.get(job_id)
        rows.append(
            (
                job_pk(job_id),
                fact.name if fact else "",
                e.share,
                e.position,
                e.queue_length,
                e.borrow_position,
                e.borrow_queue_length,
                e.code,
                words,
                r.p50,
                r.p90,
                corrections[job_id].basis,
                r.borrowed,
                is_misconfigured(e.code),
            )  # fmt: skip
        )
    return rows


def _forecast(queue: JobQueue, now: dt.datetime | None) -> tuple[Stored, bool]:
    """The queue's stored forecast and whether it is current.

    Current: the queue's fingerprint is the one it was made with, and it is at most
    `ESTIMATE_CACHE_SECONDS` old (and not from after `now`). Otherwise the last one is
    served as it is (pages say "as of") and a new one is asked of the background task,
    unless nothing is stored yet, the queue is small (`ESTIMATE_SYNC_MAX_LIVE` live
    jobs: computing costs less than asking), or the caller asks about a given `now`:
    then it is computed here."""
    given = now is not None
    now = now or timezone.now()
    fingerprint, live = _fingerprint(queue)
    stored = _load(queue.pk)
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
    stored = _load(queue.pk)
    if stored is None:
        return None, False
    fingerprint, _ = _fingerprint(queue)
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
    key = _key(queue_id) + ":asked"
    kind = "read" if read else "change"
    if not cache.add(key, kind, REQUEST_STALE):
        if read and cache.get(key) == "change":
            cache.set(key, kind, REQUEST_STALE)  # the waiting task recomputes an old one too
        return
    header = cache.get(_key(queue_id) + ":v")
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
    key = _key(queue_id)
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
        fingerprint, _ = _fingerprint(queue)
        stored = _load(queue_id)
        if stored is not None and (
            _fresh(stored, fingerprint, now)
            or (kind == "change" and stored.fingerprint == fingerprint)
        ):
            return "unchanged"
        _save(queue_id, compute_forecast(queue, now=now, fingerprint=fingerprint))
        return "computed"
    finally:
        cache.delete(key + ":computing")


# -- reading it -------------------------------------------------------------------------------


def queue_estimates(queue: JobQueue, *, now: dt.datetime | None = None) -> QueueEstimates:
    """Every pending job of the queue in dispatch order, with position, blocker, estimate
    (built as they are read), from the stored forecast (see `_forecast`)."""
    stored, current = _forecast(queue, now)
    return QueueEstimates(
        queue=queue,
        clock=stored.clock,
        now=stored.now,
        entries=Entries(stored, now or timezone.now(), current),
        current=current,
    )


def job_estimate(job: Job, *, now: dt.datetime | None = None) -> PendingEntry | None:
    """One RUNNABLE job's entry (None for a job that is not waiting, or that the stored
    forecast does not know yet)."""
    if job.state != Job.State.RUNNABLE:
        return None
    return queue_estimates(job.queue, now=now).of_job(job.pk)


def job_positions(jobs) -> dict[int, PendingEntry]:
    """Entries of the RUNNABLE jobs among `jobs` (a page of a list), by job id."""
    found: dict[int, PendingEntry] = {}
    queues = {job.queue_id: job.queue for job in jobs if job.state == Job.State.RUNNABLE}
    for queue in queues.values():
        listed = queue_estimates(queue)
        for job in jobs:
            if job.queue_id == queue.pk and job.state == Job.State.RUNNABLE:
                entry = listed.of_job(job.pk)
                if entry is not None:
                    found[job.pk] = entry
    return found


# -- if you submit this now -------------------------------------------------------------------


@dataclass(frozen=True)
class SubmissionEstimate:
    queue: JobQueue
    clock: Clock
    share: str
    instance_type: str
    instances: int
    priority: int
    estimate: Estimate
    position: int | None
    queue_length: int
    borrow_position: int | None
    blocker: str
    within_limit: bool | None  # None: it would never start
    reclaimable_by: list[str]
    warnings: list[str]
    too_big: bool
    estimated_at: dt.datetime | None = None  # the forecast's instant
    current: bool = True  # False: the queue changed since; a new forecast is due


def _ready(whatif: WhatIf, share: str, priority: int, now_q: int) -> tuple:
    """When the last job ahead of a new job of `share` at `priority` starts, per run."""
    found = (now_q, now_q)
    for level, latest in whatif.through.get(share, ()):
        if level < priority:
            break
        found = latest
    return found


def submission_estimate(*, data: JobData, now: dt.datetime | None = None) -> SubmissionEstimate:
    """What would happen to this job if it were submitted now. Stores nothing; raises
    JobError (field keys as for a submission) when the submission would be refused.

    Read from the queue's stored forecast, as of its instant: the jobs ahead of it in
    its share start when that forecast says; from then on, the recorded usage after
    each instant says when it fits (`explain.extra_start`), and the board's standing
    where it would stand and what would hold it."""
    resolved = job_preview(data=data)
    share = data.share
    if not share.enabled:
        raise JobError({"share": [f"share {share.name} is disabled: the job would fail at once"]})
    queue = share.queue
    stored, current = _forecast(queue, now)
    whatif = stored.whatif
    now_q = stored.now_q
    last = Job.objects.order_by("-pk").values_list("pk", flat=True).first() or 0
    job_id = engine_id(last + 1)
    priority = data.priority
    if priority is None:
        priority = data.urgency.priority if data.urgency is not None else 0
    itype = resolved.instance_type.name
    new = PendingJob(
        id=job_id,
        share=share.name,
        priority=priority,
        instance_type=itype,
        instances=resolved.instances,
        submitted_at=now_q,
    )
    definition_id = data.revision.definition_id if data.revision is not None else None
    correction = whatif.history.correction(definition_id, share.pk)
    starts = []
    for run, ready in zip(
        (whatif.low, whatif.high), _ready(whatif, share.name, priority, now_q), strict=True
    ):
        starts.append((None, None) if ready is None else extra_start(whatif.shape, run, new, ready))
    (p50, borrowing), (p90, _) = starts
    if p50 is None or p90 is None:
        r = Range(p50 if p90 is None else p90, None, borrowing)
    else:
        r = Range(min(p50, p90), max(p50, p90), borrowing)
    e = whatif.standing.if_submitted(new)
    code = e.code
    if r.p50 is not None and r.p50 <= now_q and not is_misconfigured(code):
        code = STARTS_NOW
        blocker = "it would start at the next scheduling pass"
    else:
        names = dict(whatif.names)
        names[job_id] = data.name or "your job"
        blocker = describe(
            e,
            name=_namer(names),
            when=_when(stored.clock, now or timezone.now()),
            ends=whatif.ends,
        )
    warnings = []
    too_big = code == SERVICE_ENVIRONMENT_MAX_RESOURCE
    if too_big:
        capacity = whatif.shape.queue.capacity.get(itype, 0)
        warnings.append(
            f"it needs {resolved.instances} {itype} but queue {queue.name} has {capacity}: it "
            "would be accepted but can never start as it is, and goes straight to the "
            "jobs that need a decision; lower its instances"
        )
    elif is_misconfigured(code):
        warnings.append(f"it can never start as configured: {blocker}")
    reclaimers = []
    if borrowing:
        for spec in whatif.shape.shares:
            if (
                spec.name != share.name
                and spec.enabled
                and strategy_capabilities(spec.strategy).lends
                and spec.capacity_limits.get(itype, 0) > 0
            ):
                reclaimers.append(spec.name)
    return SubmissionEstimate(
        queue=queue,
        clock=stored.clock,
        share=share.name,
        instance_type=itype,
        instances=resolved.instances,
        priority=priority,
        estimate=_estimate(stored.clock, now_q, r.p50, r.p90, correction.basis, r.borrowed),
        position=e.position,
        queue_length=e.queue_length,
        borrow_position=e.borrow_position,
        blocker=blocker,
        within_limit=None if borrowing is None else not borrowing,
        reclaimable_by=reclaimers,
        warnings=warnings,
        too_big=too_big,
        estimated_at=stored.now,
        current=current,
    )


def too_big_warning(*, data: JobData) -> str | None:
    """The warning for a job bigger than its whole queue (the engine's
    SERVICE_ENVIRONMENT_MAX_RESOURCE): it is accepted, as AWS Batch does, but can never
    start as it is, so it goes straight to the jobs that need a decision. None when
    the job fits; raises JobError as a submission would."""
    resolved = job_preview(data=data)
    queue = data.share.queue
    shares = policy_shares(queue)
    policy = Policy(queue_spec(queue), [share_spec(share) for share in shares])
    index = next(i for i, share in enumerate(shares) if share.pk == data.share.pk)
    itype = resolved.instance_type.name
    if (
        policy.misconfiguration(index, itype, resolved.instances)
        != SERVICE_ENVIRONMENT_MAX_RESOURCE
    ):
        return None
    return (
        f"It needs {resolved.instances} {itype} but queue {queue.name} has only "
        f"{policy.capacity.get(itype, 0)}: it would be accepted but can never start as it "
        "is, and would go straight to the jobs that need a decision. Lower its instances, "
        "or submit it anyway."
    )
