"""The one bridge between the database and the engine's inputs.

Every translation of rows into what the engine reads lives here: a share row into the
scenario format (`share_scenario`) and a `ShareSpec` (`share_spec`), a queue's capacity
(`queue_capacity`, `queue_scenario`), the borrow-limit convention (`engine_borrow_limit`,
`stored_borrow_limit`, `BORROW_UNLIMITED`), a job's engine id (`engine_id`) and a queue's
recorded jobs as scenario jobs (`recorded_jobs`, the what-if replay's workload). The live
scheduler, the impact preview and the what-if replay all go through it, so they give the
engine the same inputs for the same rows.

`queue_state` reads a queue's policy and its live jobs into an engine Snapshot (plus
the few columns the live scheduler compares its results with); `queue_snapshot` is
the same for callers that only want the snapshot (the impact preview). The live
scheduler applies the engine's decisions back in `scheduler.services.passes`.

Times in a snapshot are integer seconds since the Unix epoch. A job's engine id is
its primary key zero-padded to a fixed width, so the engine's id tie-break (a string
comparison) orders jobs as their submission order does, and `int()` turns it back.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import math
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field, replace

from django.db import connection
from django.db.models import F, FloatField, Func, Q, Sum
from django.utils import timezone

from engine import CONTRACT_FIELDS, PendingJob, QueueSpec, RunningJob, ShareSpec, Snapshot
from engine.board import LAST_ID
from engine.strategies import strategy_capabilities
from engine.types import BLOCKED_BEHIND_HEAD, MISCONFIGURATION_REASONS
from fleet.models import CapacityLimit, InstanceType, Job, JobQueue, QueueCapacity, QuotaShare

ENGINE_ID_WIDTH = 12
# Stored reasons of waiting jobs a lazily fed pass need not read again (see fed_queue_state).
SETTLED_REASONS = (BLOCKED_BEHIND_HEAD, *MISCONFIGURATION_REASONS)


def epoch_seconds(moment) -> int:
    return int(moment.timestamp())


def engine_id(pk: int) -> str:
    return f"{pk:0{ENGINE_ID_WIDTH}d}"


def job_pk(job_id: str) -> int:
    return int(job_id)


# -- the borrow limit ---------------------------------------------------------------------
# A percent of the share's own limit it may borrow on top, or BORROW_UNLIMITED. The column
# is NULL for a share whose strategy takes no borrow limit (it never borrows), and may be NULL
# for one that does (read as unlimited); documents and the engine spell unlimited -1.

BORROW_UNLIMITED = -1


def engine_borrow_limit(value: int | None) -> int:
    """A stored or documented borrow limit as the engine reads it: none is unlimited."""
    return BORROW_UNLIMITED if value is None else value


def stored_borrow_limit(strategy: str, value: int | None) -> int | None:
    """The borrow limit a share of `strategy` keeps: None unless it may borrow."""
    if not strategy_capabilities(strategy).takes_borrow_limit:
        return None
    return engine_borrow_limit(value)


# -- policy rows -> scenario documents and specs -------------------------------------------

# Keys of a share document (history, draft, policy file) the engine does not read.
GOVERNANCE_SHARE_FIELDS = ("team", "priority_ceiling")


def share_scenario(share: QuotaShare) -> dict:
    """The share row as the scenario format spells it (limits by instance type name)."""
    doc = {
        "name": share.name,
        "strategy": share.strategy,
        "in_share_preemption": share.in_share_preemption,
        "state": share.state,
        "capacity_limits": {
            limit.instance_type.name: limit.max_instances
            for limit in sorted(share.limits.all(), key=lambda lim: lim.instance_type.name)
        },
    }
    borrow_limit = stored_borrow_limit(share.strategy, share.borrow_limit)
    if borrow_limit is not None:
        doc["borrow_limit"] = borrow_limit
    return doc


def engine_share_document(doc: Mapping) -> dict:
    """A share document without what only governance reads: the scenario format's share."""
    return {key: value for key, value in doc.items() if key not in GOVERNANCE_SHARE_FIELDS}


def share_spec(share: QuotaShare) -> ShareSpec:
    return share_spec_from_document(share_scenario(share))


def share_spec_from_document(doc: Mapping) -> ShareSpec:
    """A ShareSpec from the scenario-format/history document of a share."""
    return ShareSpec(
        name=doc["name"],
        capacity_limits=dict(doc.get("capacity_limits", {})),
        strategy=doc["strategy"],
        borrow_limit=engine_borrow_limit(doc.get("borrow_limit")),
        in_share_preemption=bool(doc.get("in_share_preemption", False)),
        enabled=doc.get("state", QuotaShare.State.ENABLED) == QuotaShare.State.ENABLED,
    )


def queue_capacity(queue: JobQueue) -> dict[str, int]:
    """The queue's capacity: instance type name -> instances."""
    return {cap.instance_type.name: cap.instances for cap in queue.capacities.all()}


def queue_scenario(queue: JobQueue) -> dict:
    """The queue row as the scenario format spells it."""
    return {
        "capacity": queue_capacity(queue),
        "default_preemption_retries": queue.default_preemption_retries,
        "runnable_time_limit": queue.runnable_time_limit,
    }


def queue_spec(queue: JobQueue, capacity: dict[str, int] | None = None) -> QueueSpec:
    return QueueSpec(
        capacity=queue_capacity(queue) if capacity is None else capacity,
        default_preemption_retries=queue.default_preemption_retries,
        runnable_time_limit=queue.runnable_time_limit,
    )


def policy_shares(queue: JobQueue) -> list[QuotaShare]:
    return list(
        queue.shares.select_related("team")
        .prefetch_related("limits__instance_type")
        .order_by("position", "id")
    )


@dataclass(frozen=True)
class LiveJob:
    """The columns of a live job the pass compares its results with."""

    pk: int
    state: str
    reason: str
    misconfigured: bool  # its misconfiguration clock is running


@dataclass(frozen=True)
class QueueState:
    snapshot: Snapshot
    now: int
    live: dict[int, LiveJob]
    next_start_seq: int


class EpochSeconds(Func):
    """A timestamp as float seconds since the epoch, computed by PostgreSQL.

    Loading 10,000 integers is several times cheaper than parsing 10,000 timestamps,
    and a pass reads every live job's times. Other databases get the timestamp itself
    (SQLite's text timestamps are parsed in Python anyway); `seconds_of` reads both.
    """

    template = "EXTRACT(EPOCH FROM %(expressions)s)::double precision"
    output_field = FloatField()


def epoch_column(name: str):
    return EpochSeconds(F(name)) if connection.vendor == "postgresql" else F(name)


def fetch_rows(queryset) -> list[tuple]:
    """The rows of a `values_list` queryset, on PostgreSQL straight from the cursor.

    Django applies a converter to every value of every row (some 100 ms for a pass's
    11,000 rows × 14 columns); the columns read here (numbers, text, booleans and
    `epoch_column` floats) need none on PostgreSQL, so a pass skips them.
    """
    if connection.vendor != "postgresql":
        return list(queryset)
    sql, params = queryset.query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


def seconds_of(value) -> float | None:
    """Seconds since the epoch of a value read through `epoch_column`."""
    if value is None or isinstance(value, float):
        return value
    return value.timestamp()


def _int_seconds(value) -> int | None:
    seconds = seconds_of(value)
    return None if seconds is None else int(seconds)


# The columns a pass reads of a live job, in `_read_rows`' order.
JOB_COLUMNS = (
    "pk",
    "state",
    "share_id",
    "priority",
    "instance_type_id",
    "instances",
    "submitted_at",
    "started_at",
    "start_seq",
    "protected_until",
    "preemptions",
    "preemption_retries",
    "misconfigured_since",
    "reason",
    "min_runtime_reclaim",
    "min_runtime_preempt",
    "grace",
    "checkpoint_on_notice",
    "stop_at",
    "notice_for_id",
    "held_instances",
)
_TIMES = {"submitted_at", "started_at", "protected_until", "misconfigured_since", "stop_at"}


def job_rows(queryset) -> list[tuple]:
    """`JOB_COLUMNS` of the jobs of `queryset`, times as `epoch_column` values."""
    columns = [epoch_column(name) if name in _TIMES else name for name in JOB_COLUMNS]
    return fetch_rows(queryset.values_list(*columns))


@dataclass(frozen=True)
class QueuePolicy:
    """A queue's policy as the engine reads it, with the ids behind its names."""

    queue: QueueSpec
    shares: tuple[ShareSpec, ...]
    share_names: dict[int, str]  # share pk -> name
    type_names: dict[int, str]  # instance type pk -> name
    # The configured capacity, where what the executor can really use now lowered
    # `queue.capacity` (`usable_capacity`); empty when nothing is lowered.
    configured: Mapping[str, int] = field(default_factory=dict)

    def too_big_for_now_only(self, instance_type: str, instances: int) -> bool:
        """A job more than the capacity the queue can use now but not more than its
        configured one: it waits for nodes to return, and is not misconfigured (its
        clock toward `runnable_time_limit` does not run)."""
        configured = self.configured.get(instance_type)
        return configured is not None and instances <= configured

    @property
    def key(self) -> str:
        """A digest of everything misconfiguration depends on (and the rest of the
        policy besides): equal keys, equal judgements of every waiting job."""
        document = {
            "capacity": sorted(self.queue.capacity.items()),
            "retries": self.queue.default_preemption_retries,
            "time_limit": self.queue.runnable_time_limit,
            "shares": [
                [
                    share.name,
                    share.strategy,
                    share.borrow_limit,
                    share.in_share_preemption,
                    share.enabled,
                    sorted(share.capacity_limits.items()),
                ]
                for share in self.shares
            ],
        }
        return hashlib.sha256(json.dumps(document).encode()).hexdigest()


def usable_capacity(
    queue: JobQueue, configured: Mapping[str, int], seen: Mapping[str, int | None]
) -> dict[str, int]:
    """The capacity a pass may use: the configured one, lower where the executor can
    really use fewer instances now (`seen`, per type: nodes down, drained, not
    responding, as its reconciliation records them), never below what the queue's jobs
    hold. A node taken out only withholds capacity from new starts; it never preempts a
    job (a capacity below use would, `capacity_change`): the jobs it ran end as the
    executor reports them."""
    lower = {
        name: seen[name]
        for name, instances in configured.items()
        if isinstance(seen.get(name), int) and seen[name] < instances
    }
    if not lower:
        return dict(configured)
    held = dict(
        Job.objects.filter(queue=queue, state__in=Job.HOLDING_STATES, instance_type__name__in=lower)
        .values("instance_type__name")
        .annotate(used=Sum("instances"))
        .values_list("instance_type__name", "used")
    )
    return {
        name: max(lower[name], held.get(name, 0)) if name in lower else instances
        for name, instances in configured.items()
    }


def queue_policy(queue: JobQueue, *, seen: Mapping[str, int | None] | None = None) -> QueuePolicy:
    """The queue's policy in four queries of values (shares, limits, capacity, types);
    with `seen` (what its executor can really use now, per type), its capacity is that
    when lower (`usable_capacity`)."""
    shares = list(
        queue.shares.order_by("position", "id").values_list(
            "pk", "name", "strategy", "borrow_limit", "in_share_preemption", "state"
        )
    )
    limits: dict[int, dict[str, int]] = {pk: {} for pk, *_ in shares}
    for share_id, type_name, instances in CapacityLimit.objects.filter(
        share__queue=queue
    ).values_list("share_id", "instance_type__name", "max_instances"):
        limits[share_id][type_name] = instances
    capacity = dict(
        QueueCapacity.objects.filter(queue=queue).values_list("instance_type__name", "instances")
    )
    usable = usable_capacity(queue, capacity, seen) if seen else capacity
    return QueuePolicy(
        queue=queue_spec(queue, usable),
        configured={name: n for name, n in capacity.items() if usable.get(name, 0) < n},
        shares=tuple(
            share_spec_from_document(
                {
                    "name": name,
                    "strategy": strategy,
                    "borrow_limit": borrow_limit,
                    "in_share_preemption": in_share_preemption,
                    "state": state,
                    "capacity_limits": limits[pk],
                }
            )
            for pk, name, strategy, borrow_limit, in_share_preemption, state in shares
        ),
        share_names={pk: name for pk, name, *_ in shares},
        type_names=dict(InstanceType.objects.values_list("pk", "name")),
    )


def _add_rows(
    rows: list[tuple],
    policy: QueuePolicy,
    now_seconds: int,
    live: dict[int, LiveJob],
    running: list[RunningJob],
    pending: list[PendingJob],
    notice_floor: int = 0,
) -> int:
    """Turn rows of `job_rows` into engine jobs; returns the highest start_seq seen.

    `notice_floor` is the least notice a victim gets: 1 where a victim is a real
    process, whose capacity is free only once it has exited, so even a job without
    grace is given notice (SIGTERM) and its starter waits for its exit.

    A STOPPING job is a running one with `stopping_until` (spec v2, V7); a waiting
    starter's victims are filled in by `_with_waits` once every running job is read."""
    share_names, type_names = policy.share_names, policy.type_names
    max_seq = 0
    for (
        pk,
        state,
        share_id,
        priority,
        itype_id,
        instances,
        submitted_at,
        started_at,
        start_seq,
        protected_until,
        preemptions,
        retries,
        misconfigured_since,
        reason,
        min_runtime_reclaim,
        min_runtime_preempt,
        grace,
        checkpoint_on_notice,
        stop_at,
        notice_for_id,
        held_instances,
    ) in rows:
        live[pk] = LiveJob(pk, state, reason, misconfigured_since is not None)
        if state in Job.HOLDING_STATES:
            max_seq = max(max_seq, start_seq)
            started = _int_seconds(started_at)
            started = now_seconds if started is None else started
            stopping = state == Job.State.STOPPING
            running.append(
                RunningJob(
                    id=engine_id(pk),
                    share=share_names[share_id],
                    priority=priority,
                    instance_type=type_names[itype_id],
                    instances=instances,
                    started_at=started,
                    start_seq=start_seq,
                    protected_until=_int_seconds(protected_until),
                    preemptions=preemptions,
                    preemption_retries=retries,
                    # A job this pass (or a forecast's later one) preempts goes back to
                    # its share's queue in its place by submission, not by its start.
                    submitted_at=_int_seconds(submitted_at),
                    min_runtime_reclaim=min_runtime_reclaim,
                    min_runtime_preempt=min_runtime_preempt,
                    grace=max(grace, notice_floor),
                    checkpoint_on_notice=checkpoint_on_notice,
                    run_started_at=started,
                    stopping_until=_ceil_seconds(stop_at) if stopping else None,
                    notice_for=engine_id(notice_for_id)
                    if stopping and notice_for_id is not None
                    else None,
                )
            )
        else:
            pending.append(
                PendingJob(
                    id=engine_id(pk),
                    share=share_names[share_id],
                    priority=priority,
                    instance_type=type_names[itype_id],
                    instances=instances,
                    submitted_at=_int_seconds(submitted_at),
                    submit_seq=pk,
                    preemptions=preemptions,
                    preemption_retries=retries,
                    protected_until=_int_seconds(protected_until),
                    misconfigured_since=_int_seconds(misconfigured_since),
                    held_instances=held_instances,
                )
            )
    return max_seq


def _ceil_seconds(value) -> int | None:
    """A stop instant in whole seconds, rounded up: capacity is never free early."""
    seconds = seconds_of(value)
    return None if seconds is None else math.ceil(seconds - 1e-6)


# A job with an interruption contract (spec v2, V1).
HAS_CONTRACT = (
    Q(grace__gt=0)
    | Q(min_runtime_reclaim__gt=0)
    | Q(min_runtime_preempt__gt=0)
    | Q(checkpoint_on_notice__isnull=False)
)


_CONTRACT_COLUMNS = tuple(
    JOB_COLUMNS.index(name)
    for name in ("min_runtime_reclaim", "min_runtime_preempt", "grace", "checkpoint_on_notice")
)


def _rows_have_contracts(rows: list[tuple]) -> bool:
    """Whether one of these rows of `job_rows` has a contract (HAS_CONTRACT's test)."""
    reclaim, preempt, grace, on_notice = _CONTRACT_COLUMNS
    return any(
        row[reclaim] or row[preempt] or row[grace] or row[on_notice] is not None for row in rows
    )


def _has_contracts(queue: JobQueue, running: list[RunningJob]) -> bool:
    """Whether some live job of the queue has a contract: the pass applies v2's rules.
    A pass that has not read every waiting job asks the database (`queue_state`, which
    has, reads it off its rows)."""
    if any(job.grace or job.min_runtime_reclaim or job.min_runtime_preempt for job in running):
        return True
    return Job.objects.filter(HAS_CONTRACT, queue=queue, state__in=Job.LIVE_STATES).exists()


def _with_waits(running: list[RunningJob], pending: list[PendingJob]) -> list[PendingJob]:
    """The pending jobs, each waiting starter (V8) with the STOPPING victims it waits
    for (in victim id order) and its held instances; a job nobody stops for holds none."""
    victims: dict[str, list[str]] = {}
    for job in running:
        if job.stopping_until is not None and job.notice_for is not None:
            victims.setdefault(job.notice_for, []).append(job.id)
    out = []
    for job in pending:
        awaiting = tuple(sorted(victims.get(job.id, ())))
        if awaiting or job.held_instances:
            job = replace(
                job, awaiting_victims=awaiting, held_instances=job.held_instances if awaiting else 0
            )
        out.append(job)
    return out


def queue_state(
    queue: JobQueue,
    *,
    now: dt.datetime,
    policy: QueuePolicy | None = None,
    notice_floor: int = 0,
) -> QueueState:
    """The queue's policy and every live job at `now`: one query for the jobs, values only."""
    policy = policy or queue_policy(queue)
    now_seconds = epoch_seconds(now)
    running: list[RunningJob] = []
    pending: list[PendingJob] = []
    live: dict[int, LiveJob] = {}
    rows = job_rows(Job.objects.filter(queue=queue, state__in=Job.LIVE_STATES).order_by("pk"))
    max_seq = _add_rows(rows, policy, now_seconds, live, running, pending, notice_floor)
    snapshot = Snapshot(
        queue=policy.queue,
        shares=policy.shares,
        running=tuple(running),
        pending=tuple(_with_waits(running, pending)),
        contracts=_rows_have_contracts(rows),
    )
    return QueueState(snapshot=snapshot, now=now_seconds, live=live, next_start_seq=max_seq + 1)


# -- the lazily fed pass --------------------------------------------------------------

PAGE = 32


def _second(seconds: int) -> dt.datetime:
    return dt.datetime.fromtimestamp(seconds, tz=dt.UTC)


class ShareFeed:
    """One share's well-configured waiting jobs, a page at a time in the engine's queue
    order (priority, then whole second of submission, then id), read through
    `job_dispatch_order_idx`: the engine's `Feed`.

    The index orders by the instant of submission, the engine by its whole second and
    then id, so the jobs of one (priority, second) are contiguous in both orders but not
    in the same order. A page read in index order therefore keeps only its whole
    groups, leaving the last (perhaps cut) group to the next page; a page that is one
    group alone is read again in id order, `page` jobs at a time.
    """

    def __init__(self, state: FedState, share_id: int, page: int) -> None:
        self.state = state
        self.share_id = share_id
        self.page = page
        self.frontier: tuple[int, int, str] | None = (-(10**9), 0, "")  # nothing read
        # What has been read: None, or (priority, second, the last id read of that
        # group, None when all of it).
        self.after: tuple[int, int, int | None] | None = None
        # The next page, read already (see `_read_first_pages`): its rows, and the
        # frontier and `after` it moves on to.
        self.read_ahead: tuple[list[tuple], tuple | None, tuple | None] | None = None

    def _base(self):
        return Job.objects.filter(
            queue_id=self.state.queue_id,
            share_id=self.share_id,
            state=Job.State.RUNNABLE,
            misconfigured_since__isnull=True,
        )

    def _group_query(self, priority: int, second: int, after_pk: int | None) -> list[tuple]:
        rows = self._base().filter(
            priority=priority,
            submitted_at__gte=_second(second),
            submitted_at__lt=_second(second + 1),
        )
        if after_pk is not None:
            rows = rows.filter(pk__gt=after_pk)
        return job_rows(rows.order_by("pk")[: self.page])

    def _group_read(self, priority: int, second: int, rows: list[tuple]) -> list[tuple]:
        """Rows of one (priority, second) read in id order: move the frontier past them."""
        if len(rows) == self.page:
            last = rows[-1][0]
            self.after = (priority, second, last)
            self.frontier = (-priority, second, engine_id(last))
        else:
            self.after = (priority, second, None)
            self.frontier = (-priority, second, LAST_ID)
        return rows

    def _page_read(self, rows: list[tuple]) -> list[tuple] | tuple[int, int]:
        """Rows of a page read in index order: the whole groups among them (the frontier
        moved past them), or the (priority, second) to read in id order when the page is
        one group alone."""
        if len(rows) < self.page:
            self.frontier = None
            return rows

        def group(row):
            return row[3], _int_seconds(row[6])

        last = group(rows[-1])
        whole = [row for row in rows if group(row) != last]
        if not whole:
            return last
        priority, second = group(whole[-1])
        self.after = (priority, second, None)
        self.frontier = (-priority, second, LAST_ID)
        return whole

    def _page_query(self) -> list[tuple]:
        rows = self._base().order_by("-priority", "submitted_at", "pk")
        if self.after is not None:
            priority, second, _ = self.after
            rows = rows.filter(
                Q(priority__lt=priority)
                | Q(priority=priority, submitted_at__gte=_second(second + 1)),
                priority__lte=priority,
            )
        return job_rows(rows[: self.page])

    def more(self) -> list[PendingJob]:
        if self.read_ahead is not None:
            # The frontier moves only now: the engine must not skip these rows.
            (rows, self.frontier, self.after), self.read_ahead = self.read_ahead, None
            return self.state.take(rows)
        if self.frontier is None:
            return []
        if self.after is not None and self.after[2] is not None:
            # Finish a group read in id order.
            priority, second, after_pk = self.after
            rows = self._group_query(priority, second, after_pk)
            return self.state.take(self._group_read(priority, second, rows))
        page = self._page_read(self._page_query())
        if isinstance(page, tuple):
            priority, second = page
            page = self._group_read(priority, second, self._group_query(priority, second, None))
        return self.state.take(page)


def _read_first_pages(feeds: list[ShareFeed]) -> None:
    """The first page of every share in two queries (PostgreSQL: LATERAL joins through
    `job_dispatch_order_idx`), not one or two per share; each feed hands it out on its
    first `more()`. Other databases read each share's page when the engine asks."""
    if connection.vendor != "postgresql" or not feeds:
        return
    table = Job._meta.db_table
    columns = ", ".join(
        f"EXTRACT(EPOCH FROM j.{name})::double precision"
        if name in _TIMES
        else f"j.{'id' if name == 'pk' else name}"
        for name in JOB_COLUMNS
    )
    waiting = (
        "j.queue_id = %s AND j.share_id = v.share_id AND j.state = 'RUNNABLE' "
        "AND j.misconfigured_since IS NULL"
    )
    queue_id, page = feeds[0].state.queue_id, feeds[0].page
    start = (feeds[0].frontier, feeds[0].after)  # nothing read yet
    by_share = {feed.share_id: feed for feed in feeds}
    rows: dict[int, list[tuple]] = {feed.share_id: [] for feed in feeds}
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT v.share_id, {columns} FROM unnest(%s::bigint[]) AS v(share_id) "
            f"CROSS JOIN LATERAL (SELECT * FROM {table} j WHERE {waiting} "
            "ORDER BY j.priority DESC, j.submitted_at, j.id LIMIT %s) j",
            [list(by_share), queue_id, page],
        )
        for share_id, *row in cursor.fetchall():
            rows[share_id].append(tuple(row))
        groups = {}
        for share_id, feed in by_share.items():
            read = feed._page_read(rows[share_id])
            if isinstance(read, tuple):
                groups[share_id] = read
            else:
                feed.read_ahead = (read, feed.frontier, feed.after)
                feed.frontier, feed.after = start
        if not groups:
            return
        ids = list(groups)
        cursor.execute(
            f"SELECT v.share_id, {columns} FROM unnest(%s::bigint[], %s::int[], "
            "%s::timestamptz[], %s::timestamptz[]) AS v(share_id, priority, low, high) "
            f"CROSS JOIN LATERAL (SELECT * FROM {table} j WHERE {waiting} "
            "AND j.priority = v.priority AND j.submitted_at >= v.low "
            "AND j.submitted_at < v.high ORDER BY j.id LIMIT %s) j",
            [
                ids,
                [groups[pk][0] for pk in ids],
                [_second(groups[pk][1]) for pk in ids],
                [_second(groups[pk][1] + 1) for pk in ids],
                queue_id,
                page,
            ],
        )
        group_rows: dict[int, list[tuple]] = {pk: [] for pk in ids}
        for share_id, *row in cursor.fetchall():
            group_rows[share_id].append(tuple(row))
    for share_id, (priority, second) in groups.items():
        feed = by_share[share_id]
        read = feed._group_read(priority, second, group_rows[share_id])
        feed.read_ahead = (read, feed.frontier, feed.after)
        feed.frontier, feed.after = start


@dataclass
class FedState:
    """What a lazily fed pass holds: the snapshot to start from, the feeds, and every
    live job it read so far (`live` grows as the engine asks the feeds for more)."""

    queue_id: int
    policy: QueuePolicy
    now: int
    snapshot: Snapshot
    live: dict[int, LiveJob]
    next_start_seq: int
    feeds: dict[str, ShareFeed]

    def take(self, rows: list[tuple]) -> list[PendingJob]:
        """The rows' pending jobs not held yet, now held."""
        fresh = [row for row in rows if row[0] not in self.live]
        running: list[RunningJob] = []
        pending: list[PendingJob] = []
        _add_rows(fresh, self.policy, self.now, self.live, running, pending)
        if running:
            raise RuntimeError("a feed read a running job")
        return pending


def fed_queue_state(
    queue: JobQueue,
    *,
    now: dt.datetime,
    policy: QueuePolicy,
    page: int = PAGE,
    notice_floor: int = 0,
) -> FedState:
    """The start of a lazily fed pass: the running jobs (bounded by capacity), the
    waiting jobs whose stored reason may be stale (new ones are judged before this, see
    scheduler.services.passes; the heads of the last pass), and the misconfigured ones
    due to fail at `now`, each read through its partial index; the rest of each share's
    queue comes through its `ShareFeed` as the engine asks."""
    now_seconds = epoch_seconds(now)
    live: dict[int, LiveJob] = {}
    running: list[RunningJob] = []
    pending: list[PendingJob] = []
    # No ORDER BY: sorted below; an order by id tempts the planner to walk the primary key.
    rows = job_rows(Job.objects.filter(queue=queue, state__in=Job.HOLDING_STATES).order_by())
    waiting = Job.objects.filter(queue=queue, state=Job.State.RUNNABLE)
    rows += job_rows(waiting.exclude(reason__in=SETTLED_REASONS).order_by())
    # Starters waiting for STOPPING victims (V8) are in the snapshot with their waits.
    starters = {row[JOB_COLUMNS.index("notice_for_id")] for row in rows if row[1] == "STOPPING"}
    starters.discard(None)
    if starters:
        rows += job_rows(waiting.filter(pk__in=starters).order_by())
    limit = policy.queue.runnable_time_limit
    if limit is not None:
        rows += job_rows(
            waiting.filter(misconfigured_since__lte=now - dt.timedelta(seconds=limit)).order_by()
        )
    seen: set[int] = set()
    unique = []
    for row in sorted(rows, key=lambda row: row[0]):
        if row[0] not in seen:
            seen.add(row[0])
            unique.append(row)
    max_seq = _add_rows(unique, policy, now_seconds, live, running, pending, notice_floor)
    state = FedState(
        queue_id=queue.pk,
        policy=policy,
        now=now_seconds,
        snapshot=Snapshot(
            queue=policy.queue,
            shares=policy.shares,
            running=tuple(running),
            pending=tuple(_with_waits(running, pending)),
            contracts=_has_contracts(queue, running),
        ),
        live=live,
        next_start_seq=max_seq + 1,
        feeds={},
    )
    state.feeds = {
        name: ShareFeed(state, share_id, page) for share_id, name in policy.share_names.items()
    }
    _read_first_pages(list(state.feeds.values()))
    return state


def queue_snapshot(queue: JobQueue, *, now=None) -> tuple[Snapshot, int]:
    """The queue's policy and live jobs as an engine Snapshot, and `now` in epoch seconds."""
    state = queue_state(queue, now=now or timezone.now())
    return state.snapshot, state.now


# -- recorded jobs -> scenario jobs (the what-if replay's workload) ---------------------------


def recorded_jobs(
    queue: JobQueue,
    *,
    start: dt.datetime,
    end: dt.datetime,
    share_names: Mapping[int, str],
    instance_types: Collection[str],
) -> list[dict]:
    """The queue's jobs submitted in [start, end) as scenario jobs, in submission order.

    Each job keeps its live engine id and its whole second of submission (counted from
    the first job's), so the replay orders jobs of one second as the live scheduler does.
    `share_names` names the shares by primary key; a job of another share, or of an
    instance type not in `instance_types`, is left out. A job keeps the interruption
    contract it copied at submission (spec v2): only the fields it has, so jobs without
    a contract make a v1 document."""
    rows = (
        Job.objects.filter(queue=queue, submitted_at__gte=start, submitted_at__lt=end)
        .order_by("submitted_at", "id")
        .values_list(
            "id",
            "share_id",
            "priority",
            "instance_type__name",
            "instances",
            "submitted_at",
            "expected_duration",
            "checkpoint_interval",
            "restart_overhead",
            "preemption_retries",
            "min_runtime_reclaim",
            "min_runtime_preempt",
            "grace",
            "checkpoint_on_notice",
        )
    )
    jobs = []
    origin = None
    for (
        pk,
        share_id,
        priority,
        itype,
        instances,
        submitted,
        duration,
        ckpt,
        overhead,
        retries,
        *contract,
    ) in rows:
        if share_id not in share_names or itype not in instance_types:
            continue
        if origin is None:
            origin = epoch_seconds(submitted)
        job = {
            "id": engine_id(pk),
            "share": share_names[share_id],
            "priority": priority,
            "instance_type": itype,
            "instances": instances,
            "submit_at": epoch_seconds(submitted) - origin,
            "duration": duration,
            "restart_overhead": overhead,
        }
        if ckpt:
            job["checkpoint_interval"] = ckpt
        if retries is not None:
            job["preemption_retries"] = retries
        for name, value in zip(CONTRACT_FIELDS, contract, strict=True):
            if value:  # 0 and None are the absent field's own meaning
                job[name] = value
        jobs.append(job)
    return jobs
