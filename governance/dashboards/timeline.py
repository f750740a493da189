"""The month sweep: the job record replayed in time order to measure one month.

Plain data in (jobs, their events, each share's policy and each queue's capacity over
time), per-share figures out. Nothing here queries the database
(governance.dashboards.selectors gathers the rows) and every formula comes from
governance.dashboards.formulas: this module only observes, in order, what happened.

The sweep starts `LOOKBACK` before the month so that a job that became runnable just
before it is judged on the real state of its share (the selectors load every job alive
from then on). It ends at `stop`: the month's end, or the moment of computing for the
month under way.
"""

from __future__ import annotations

import bisect
import datetime as dt
from collections import defaultdict
from dataclasses import dataclass, field

from engine.quota import misconfiguration, quota_max
from engine.strategies import strategy_capabilities
from governance.dashboards import formulas as f

LOOKBACK = dt.timedelta(days=2)
# Order of things at one instant (scenario format, rule 9): finishes, then actions
# (policy and capacity changes), then everything else in the order it was recorded.
_FINISH, _ACTION, _OTHER = 0, 1, 2


@dataclass
class Job:
    pk: int
    name: str
    share_id: int
    queue_id: int
    instance_type: str
    instances: int
    gpus: int  # per instance
    submitted_at: dt.datetime
    priority: int  # when submitted
    restart_overhead: int  # compute seconds per restart
    overhead_spent: int  # compute seconds, all restarts (the job's counter)
    progress: int  # compute seconds, the job's last progress
    preemptions: int
    ran_borrowed: bool
    state: str
    reason: str
    finished_at: dt.datetime | None
    speed: float  # compute seconds per wall-clock second
    workload_class: str = f.NO_CLASS  # as copied at submission
    protected_blocks: int = 0  # the engine's per-job figure (spec v2, V4)


@dataclass
class Event:
    at: dt.datetime
    seq: int
    job_id: int
    type: str
    cause: str
    detail: dict
    by_id: int | None = None


@dataclass
class SharePolicy:
    """One share: its queue and team, and its policy over time.

    `policy` is [(from instant, limits {type: instances}, strategy, borrow limit)],
    oldest first; the first entry holds from before the sweep starts."""

    pk: int
    queue_id: int
    team_id: int
    created_at: dt.datetime
    policy: list[tuple[dt.datetime, dict[str, int], str, int]]


def _by_stop() -> dict:
    return dict.fromkeys(f.STOP_KINDS, 0)


@dataclass
class ClassFigures:
    """The interruption figures of one workload class (spec v2) within a share."""

    reclaim_waits: list[int] = field(default_factory=list)
    stops: dict[str, int] = field(default_factory=_by_stop)
    lost_gpu_seconds: dict[str, float] = field(default_factory=_by_stop)
    protected_blocks: list[int] = field(default_factory=list)


@dataclass
class ShareFigures:
    """What one share's jobs and capacity did in the month (additive across shares)."""

    instance_seconds: list[float] = field(default_factory=lambda: [0.0] * 4)
    gpu_seconds: list[float] = field(default_factory=lambda: [0.0] * 4)
    # By instance type (what a price applies to): instance-seconds and GPU-seconds used
    # within limit, borrowed, and lent to others (formulas.lent_out), in that order.
    by_type: dict[str, dict[str, list[float]]] = field(
        default_factory=lambda: defaultdict(
            lambda: {"instance_seconds": [0.0] * 3, "gpu_seconds": [0.0] * 3}
        )
    )
    runs: int = 0
    lost_instance_seconds: dict[str, float] = field(
        default_factory=lambda: dict.fromkeys(f.LOST_CAUSES, 0.0)
    )
    lost_gpu_seconds: dict[str, float] = field(
        default_factory=lambda: dict.fromkeys(f.LOST_CAUSES, 0.0)
    )
    overhead_instance_seconds: float = 0.0
    overhead_gpu_seconds: float = 0.0
    preemptions: dict[str, int] = field(
        default_factory=lambda: dict.fromkeys(f.PREEMPTION_CAUSES, 0)
    )
    jobs_preempted: set[int] = field(default_factory=set)
    turnaround: dict[str, list[int]] = field(
        default_factory=lambda: {"all": [], "within": [], "borrowed": []}
    )
    wait: list[int] = field(default_factory=list)
    wait_after_interruption: list[int] = field(default_factory=list)
    entitled: int = 0
    honoured: int = 0
    reclaim_waits: list[int] = field(default_factory=list)
    # Spec v2: reclaim episodes ended by this share's starts (formulas.reclaim_time),
    # stops and lost work by how the job stopped (formulas.stop_kind), by cause, and
    # the protected blocks of the jobs that ended (formulas.preemptions_avoided).
    reclaim_time: list[int] = field(default_factory=list)
    stops: dict[str, dict[str, int]] = field(
        default_factory=lambda: {cause: _by_stop() for cause in f.PREEMPTION_CAUSES}
    )
    lost_gpu_seconds_by_stop: dict[str, dict[str, float]] = field(
        default_factory=lambda: {cause: _by_stop() for cause in f.PREEMPTION_CAUSES}
    )
    protected_blocks: list[int] = field(default_factory=list)
    classes: dict[str, ClassFigures] = field(default_factory=lambda: defaultdict(ClassFigures))
    waiting_at_end: list[tuple[int, str]] = field(default_factory=list)  # (age s, job name)
    jobs_started: int = 0
    jobs_succeeded: int = 0
    jobs_failed: int = 0
    preempted_ended: int = 0
    preempted_resumed: int = 0
    preempted_succeeded: int = 0
    preempted_failed: int = 0
    retries_exhausted: int = 0
    priority_changes: int = 0
    yielders: list[dict] = field(default_factory=list)
    # Per week of the month: preemptions by cause and lost GPU-seconds by cause.
    weekly_preemptions: dict[int, dict[str, int]] = field(
        default_factory=lambda: defaultdict(lambda: dict.fromkeys(f.PREEMPTION_CAUSES, 0))
    )
    weekly_lost: dict[int, dict[str, float]] = field(
        default_factory=lambda: defaultdict(lambda: dict.fromkeys(f.LOST_CAUSES, 0.0))
    )


@dataclass
class _Run:
    """A job's state while the sweep replays it."""

    job: Job
    priority: int
    key: tuple = ()
    running: bool = False
    run_start: dt.datetime | None = None
    runnable_since: dt.datetime | None = None
    started_ever: bool = False
    interrupted_at: dt.datetime | None = None
    resumed_after_preemption: bool = False
    overhead_left: int = 0
    pending: tuple[dt.datetime, bool] | None = None  # (became runnable, lent out)
    # The workload classes of the jobs this one preempted since its last start.
    victim_classes: set[str] = field(default_factory=set)


class MonthSweep:
    def __init__(
        self,
        *,
        start: dt.datetime,
        stop: dt.datetime,
        jobs: list[Job],
        events: list[Event],
        shares: list[SharePolicy],
        capacity: dict[int, list[tuple[dt.datetime, dict[str, int]]]],
        gpus: dict[str, int],
        week_of,
    ) -> None:
        self.start, self.stop = start, stop
        self.judge_from = start - LOOKBACK
        self.gpus = gpus
        self.week_of = week_of
        self.jobs = {job.pk: _Run(job=job, priority=job.priority) for job in jobs}
        for run in self.jobs.values():
            run.overhead_left = run.job.overhead_spent
        self.events = events
        self.shares = {share.pk: share for share in shares}
        self.capacity_changes = capacity
        self.figures: dict[int, ShareFigures] = {share.pk: ShareFigures() for share in shares}
        # Current state, per share and type.
        self.usage: dict[tuple[int, str], int] = defaultdict(int)
        self.since: dict[tuple[int, str], dt.datetime] = {}
        self.limits: dict[int, dict[str, int]] = {}
        self.strategy: dict[int, str] = {}
        self.borrow_limit: dict[int, int] = {}
        self.capacity: dict[int, dict[str, int]] = {}
        self.runnable: dict[int, list[tuple]] = defaultdict(list)
        self.queue_shares: dict[int, list[int]] = defaultdict(list)
        for share in shares:
            self.queue_shares[share.queue_id].append(share.pk)
        # Per (queue, type): since when its lending was last measured (`_flush_lent`).
        self.lent_since: dict[tuple[int, str], dt.datetime] = {}

    # -- capacity use -------------------------------------------------------------------

    def _types_of(self, share_id: int) -> set[str]:
        types = set(self.limits.get(share_id, {}))
        types.update(t for (s, t), used in self.usage.items() if s == share_id and used)
        return types

    def _flush_lent(self, queue_id: int, type_name: str, until: dt.datetime) -> None:
        """Add the time since the last change of any share's use or policy of the type in
        the queue to its lenders' lent-out figures (formulas.lent_out). Called first by
        every `_flush`, before the state changes, so each interval is measured once."""
        key = (queue_id, type_name)
        begin = max(self.lent_since.get(key, self.start), self.start)
        end = min(until, self.stop)
        self.lent_since[key] = max(until, self.lent_since.get(key, until))
        if end <= begin:
            return
        borrowed, idle = 0, {}
        for pk in self.queue_shares[queue_id]:
            if pk not in self.limits or self.shares[pk].created_at > begin:
                continue
            used = self.usage[(pk, type_name)]
            limit = self.limits[pk].get(type_name, 0)
            borrowed += max(0, used - limit)
            if strategy_capabilities(self.strategy[pk]).lends and limit > used:
                idle[pk] = limit - used
        lent = f.lent_out(borrowed=borrowed, idle=idle)
        if not lent:
            return
        seconds = (end - begin).total_seconds()
        gpus = self.gpus.get(type_name, 1)
        for pk, instances in lent.items():
            figures = self.figures[pk].by_type[type_name]
            figures["instance_seconds"][2] += instances * seconds
            figures["gpu_seconds"][2] += instances * gpus * seconds

    def _flush(self, share_id: int, type_name: str, until: dt.datetime) -> None:
        """Add the time since the last change of (share, type) to its capacity use."""
        key = (share_id, type_name)
        share = self.shares[share_id]
        self._flush_lent(share.queue_id, type_name, until)
        begin = max(self.since.get(key, self.start), self.start, share.created_at)
        end = min(until, self.stop)
        self.since[key] = until
        if end <= begin:
            return
        seconds = (end - begin).total_seconds()
        split = f.capacity_split(
            usage=self.usage[key],
            limit=self.limits[share_id].get(type_name, 0),
            reserved=strategy_capabilities(self.strategy[share_id]).holds_idle,
        )
        figures = self.figures[share_id]
        gpus = self.gpus.get(type_name, 1)
        for index, instances in enumerate(split):
            figures.instance_seconds[index] += instances * seconds
            figures.gpu_seconds[index] += instances * gpus * seconds
        if split[0] or split[1]:
            by_type = figures.by_type[type_name]
            for index in (0, 1):
                by_type["instance_seconds"][index] += split[index] * seconds
                by_type["gpu_seconds"][index] += split[index] * gpus * seconds

    def _set_policy(self, share_id: int, at: dt.datetime, limits, strategy, borrow) -> None:
        if share_id in self.limits:
            for type_name in self._types_of(share_id) | set(limits):
                self._flush(share_id, type_name, at)
        self.limits[share_id] = dict(limits)
        self.strategy[share_id] = strategy
        self.borrow_limit[share_id] = borrow

    # -- entitlement ----------------------------------------------------------------------

    def _can_ever_start(self, share_id: int, queue_id: int, job: Job) -> bool:
        """Rule 7 of the scenario format: a job larger than the queue's capacity of its
        type, or than its share's quota may ever hold, is skipped by the scheduler (the
        engine's rule, engine.quota.misconfiguration)."""
        type_name = job.instance_type
        largest = quota_max(
            self.limits[share_id].get(type_name, 0),
            self.strategy[share_id],
            self.borrow_limit[share_id],
        )
        capacity = self.capacity.get(queue_id, {}).get(type_name, 0)
        return misconfiguration(job.instances, capacity, largest) is None

    def _ahead(self, run: _Run):
        share_id = run.job.share_id
        queue = self.runnable[share_id]
        position = bisect.bisect_left(queue, run.key)
        for index in range(position):
            other = self.jobs[queue[index][2]]
            if self._can_ever_start(share_id, other.job.queue_id, other.job):
                yield other.job.instance_type, other.job.instances

    def _judge(self, run: _Run, at: dt.datetime) -> None:
        """Whether a job that just became runnable is entitled to start, and whether its
        capacity is lent out (formulas.fits_within_limit, formulas.capacity_lent_out)."""
        run.pending = None
        if at < self.judge_from:
            return
        job = run.job
        share_id, type_name = job.share_id, job.instance_type
        limits = self.limits[share_id]
        room = {t: limits.get(t, 0) - self.usage[(share_id, t)] for t in set(limits) | {type_name}}
        ahead = list(self._ahead(run))
        if not f.fits_within_limit(
            instance_type=type_name, instances=job.instances, room=room, ahead=iter(ahead)
        ):
            return
        need = job.instances + sum(n for t, n in ahead if t == type_name)
        borrowed_by_others = reserved_for_others = used = 0
        for other in self.queue_shares[job.queue_id]:
            if other not in self.limits:
                continue
            usage = self.usage[(other, type_name)]
            limit = self.limits[other].get(type_name, 0)
            used += usage
            if other == share_id:
                continue
            borrowed_by_others += max(0, usage - limit)
            holds_idle = strategy_capabilities(self.strategy[other]).holds_idle
            if holds_idle and self.shares[other].created_at <= at:
                reserved_for_others += max(0, limit - usage)
        free = self.capacity.get(job.queue_id, {}).get(type_name, 0) - used
        lent = f.capacity_lent_out(
            borrowed_by_others=borrowed_by_others,
            free=free,
            reserved_for_others=reserved_for_others,
            need=need,
        )
        run.pending = (at, lent)

    def _settle(self, run: _Run, started: dt.datetime | None, ended: dt.datetime | None) -> None:
        """Count a pending entitled start once it is settled (formulas.entitlement_honoured)."""
        if run.pending is None:
            return
        became, lent = run.pending
        deadline = became + dt.timedelta(seconds=f.ENTITLEMENT_GRACE_S)
        figures = self.figures[run.job.share_id]
        if started is not None:
            run.pending = None
            settled = min(started, deadline)
            if self._in_month(settled):
                figures.entitled += 1
                figures.honoured += started <= deadline
            if lent and self._in_month(started):
                figures.reclaim_waits.append(_seconds(started - became))
            return
        if ended is not None and ended <= deadline:
            run.pending = None  # ended within its five minutes: no start was owed
            return
        if deadline < (ended or self.stop):
            run.pending = None
            if self._in_month(deadline):
                figures.entitled += 1

    # -- the sweep -------------------------------------------------------------------------

    def _in_month(self, at: dt.datetime) -> bool:
        return self.start <= at < self.stop

    def _queue_insert(self, run: _Run) -> None:
        job = run.job
        run.key = (-run.priority, job.submitted_at, job.pk)
        bisect.insort(self.runnable[job.share_id], run.key)

    def _queue_remove(self, run: _Run) -> None:
        queue = self.runnable[run.job.share_id]
        index = bisect.bisect_left(queue, run.key)
        if index < len(queue) and queue[index] == run.key:
            queue.pop(index)

    def _end_run(self, run: _Run, at: dt.datetime) -> None:
        job = run.job
        key = (job.share_id, job.instance_type)
        self._flush(job.share_id, job.instance_type, at)
        self.usage[key] -= job.instances
        if run.run_start < self.stop and at > self.start:
            self.figures[job.share_id].runs += 1
        run.running = False
        run.run_start = None

    def _lose(self, run: _Run, at: dt.datetime, cause: str, compute_seconds: int) -> float:
        """Count lost work; returns the GPU-seconds counted in the month."""
        if not self._in_month(at) or not compute_seconds:
            return 0.0
        job = run.job
        instance_seconds = compute_seconds * job.instances / job.speed
        figures = self.figures[job.share_id]
        figures.lost_instance_seconds[cause] += instance_seconds
        figures.lost_gpu_seconds[cause] += instance_seconds * job.gpus
        figures.weekly_lost[self.week_of(at)][cause] += instance_seconds * job.gpus
        return instance_seconds * job.gpus

    def _stopped(self, run: _Run, at: dt.datetime, cause: str, kind: str, gpu_seconds: float):
        """A preempted job stopped (at once, or at the end of its notice)."""
        if not self._in_month(at) or cause not in f.PREEMPTION_CAUSES:
            return
        figures = self.figures[run.job.share_id]
        figures.stops[cause][kind] += 1
        figures.lost_gpu_seconds_by_stop[cause][kind] += gpu_seconds
        by_class = figures.classes[run.job.workload_class]
        by_class.stops[kind] += 1
        by_class.lost_gpu_seconds[kind] += gpu_seconds

    def _requeue(self, run: _Run, at: dt.datetime) -> None:
        run.interrupted_at = at
        run.runnable_since = at
        self._queue_insert(run)
        self._judge(run, at)

    def _ended(self, run: _Run, at: dt.datetime, succeeded: bool) -> None:
        if not self._in_month(at):
            return
        job = run.job
        figures = self.figures[job.share_id]
        if succeeded:
            figures.jobs_succeeded += 1
            turnaround = _seconds(at - job.submitted_at)
            figures.turnaround["all"].append(turnaround)
            figures.turnaround["borrowed" if job.ran_borrowed else "within"].append(turnaround)
        else:
            figures.jobs_failed += 1
            if job.reason == "retries_exhausted":
                figures.retries_exhausted += 1
        figures.protected_blocks.append(job.protected_blocks)
        figures.classes[job.workload_class].protected_blocks.append(job.protected_blocks)
        if job.preemptions:
            figures.preempted_ended += 1
            if succeeded:
                figures.preempted_succeeded += 1
            else:
                figures.preempted_failed += 1
            if run.resumed_after_preemption:
                figures.preempted_resumed += 1
        if job.preemptions >= f.REPEATED_YIELDER_PREEMPTIONS:
            figures.yielders.append(
                {
                    "job_id": job.pk,
                    "name": job.name,
                    "preemptions": job.preemptions,
                    "state": job.state,
                    "reason": job.reason,
                    "finished_at": at.isoformat(),
                }
            )

    def _timeline(self) -> list[tuple]:
        items = []
        for event in self.events:
            if event.at >= self.stop:
                continue
            order = _FINISH if event.type == "SUCCEEDED" else _OTHER
            items.append((event.at, order, event.seq, "job", event))
        for share in self.shares.values():
            for index, (at, limits, strategy, borrow) in enumerate(share.policy):
                if index and at < self.stop:
                    change = (share.pk, limits, strategy, borrow)
                    items.append((at, _ACTION, index, "policy", change))
        for queue_id, changes in self.capacity_changes.items():
            for index, (at, capacity) in enumerate(changes):
                if index and at < self.stop:
                    items.append((at, _ACTION, index, "capacity", (queue_id, capacity)))
        items.sort(key=lambda item: (item[0], item[1], item[2]))
        return items

    def run(self) -> dict[int, ShareFigures]:
        for share in self.shares.values():
            _, limits, strategy, borrow = share.policy[0]
            self._set_policy(share.pk, self.start, limits, strategy, borrow)
        for queue_id, changes in self.capacity_changes.items():
            self.capacity[queue_id] = dict(changes[0][1])
        submitted: list[_Run] = []
        submitted_at = None
        for at, _order, _seq, kind, item in self._timeline():
            if submitted and (at != submitted_at or kind != "job" or item.type != "SUBMITTED"):
                for run in submitted:
                    self._judge(run, submitted_at)
                submitted = []
            if kind == "policy":
                self._set_policy(item[0], at, *item[1:])
                continue
            if kind == "capacity":
                self.capacity[item[0]] = dict(item[1])
                continue
            run = self.jobs.get(item.job_id)
            if run is None:
                continue
            if item.type == "SUBMITTED":
                # Judged together with the other submissions of the instant, before its
                # scheduling pass: a job listed later may still be queued ahead of it.
                run.runnable_since = at
                self._queue_insert(run)
                submitted.append(run)
                submitted_at = at
            else:
                self._apply(run, item)
        for run in submitted:
            self._judge(run, submitted_at)
        self._close()
        return self.figures

    def _apply(self, run: _Run, event: Event) -> None:
        kind = event.type
        in_month = self._in_month(event.at)
        if kind == "STARTED":
            self._on_started(run, event, in_month)
        elif kind == "PREEMPTED" and "grace_until" in (event.detail or {}):
            # Notice (spec v2): the job runs on, holding its capacity, until STOPPED.
            self._preempted(run, event, in_month)
        elif kind == "STOPPED":
            self._on_stopped(run, event)
        elif kind in ("PREEMPTED", "REQUEUED"):
            self._on_interrupted(run, event, in_month)
        elif kind in ("SUCCEEDED", "FAILED"):
            self._on_finished(run, event)
        elif kind == "PRIORITY_CHANGED":
            self._on_priority_changed(run, event, in_month)

    def _on_started(self, run: _Run, event: Event, in_month: bool) -> None:
        """A start: the wait (or the restart overhead) counted, its usage begins."""
        job, at = run.job, event.at
        figures = self.figures[job.share_id]
        self._queue_remove(run)
        self._settle(run, started=at, ended=None)
        reclaim_wait = (event.detail or {}).get("reclaim_wait")
        if reclaim_wait is not None and in_month:
            figures.reclaim_time.append(int(reclaim_wait))
            for name in sorted(run.victim_classes or {f.NO_CLASS}):
                figures.classes[name].reclaim_waits.append(int(reclaim_wait))
        run.victim_classes = set()
        if not run.started_ever:
            run.started_ever = True
            if in_month:
                figures.jobs_started += 1
                figures.wait.append(_seconds(at - job.submitted_at))
        else:
            self._restart_overhead(run, figures, in_month)
        if run.interrupted_at is not None:
            run.resumed_after_preemption = True
            if in_month:
                figures.wait_after_interruption.append(_seconds(at - run.interrupted_at))
            run.interrupted_at = None
        key = (job.share_id, job.instance_type)
        self._flush(job.share_id, job.instance_type, at)
        self.usage[key] += job.instances
        run.running = True
        run.run_start = at
        run.runnable_since = None

    def _restart_overhead(self, run: _Run, figures: ShareFigures, in_month: bool) -> None:
        """A restart pays the job's restart overhead, up to what its run has left."""
        job = run.job
        overhead = min(job.restart_overhead, run.overhead_left)
        run.overhead_left -= overhead
        if in_month and overhead:
            instance_seconds = overhead * job.instances / job.speed
            figures.overhead_instance_seconds += instance_seconds
            figures.overhead_gpu_seconds += instance_seconds * job.gpus

    def _on_stopped(self, run: _Run, event: Event) -> None:
        """The end of a preemption with notice: the work lost (or saved) and requeued."""
        at = event.at
        if run.running:
            self._end_run(run, at)
        detail = event.detail or {}
        cause = event.cause if event.cause in f.LOST_CAUSES else "requeued"
        lost = self._lose(run, at, cause, int(detail.get("lost_work", 0)))
        saved = bool(detail.get("saved_on_notice"))
        self._stopped(run, at, event.cause, f.stop_kind(notice=True, saved_on_notice=saved), lost)
        self._requeue(run, at)

    def _on_interrupted(self, run: _Run, event: Event, in_month: bool) -> None:
        """A preemption without notice, or a requeue: the run ends at once and requeues."""
        at, kind = event.at, event.type
        if run.running:
            self._end_run(run, at)
        cause = event.cause if kind == "PREEMPTED" else "requeued"
        if cause not in f.LOST_CAUSES:
            cause = "requeued"
        lost = self._lose(run, at, cause, int((event.detail or {}).get("lost_work", 0)))
        if kind == "PREEMPTED":
            self._preempted(run, event, in_month)
            self._stopped(
                run, at, event.cause, f.stop_kind(notice=False, saved_on_notice=False), lost
            )
        self._requeue(run, at)

    def _on_finished(self, run: _Run, event: Event) -> None:
        """SUCCEEDED or FAILED: the job leaves the queue or its run for good."""
        at, kind = event.at, event.type
        if run.running:
            self._end_run(run, at)
        else:
            self._queue_remove(run)
        self._settle(run, started=None, ended=at)
        run.pending = None
        run.runnable_since = None
        run.interrupted_at = None
        if kind == "FAILED":
            cause = "terminated" if event.cause == "terminated" else "failed"
            self._lose(run, at, cause, run.job.progress)
        self._ended(run, at, succeeded=kind == "SUCCEEDED")

    def _on_priority_changed(self, run: _Run, event: Event, in_month: bool) -> None:
        """Counted; a queued job takes its new place in the queue."""
        if in_month:
            self.figures[run.job.share_id].priority_changes += 1
        new = (event.detail or {}).get("to")
        if new is None:
            return
        queued = run.runnable_since is not None and not run.running
        if queued:
            self._queue_remove(run)
        run.priority = int(new)
        if queued:
            self._queue_insert(run)

    def _preempted(self, run: _Run, event: Event, in_month: bool) -> None:
        """A preemption decision (with or without notice): counted, and the victim's
        class noted on the job it made room for."""
        starter = self.jobs.get(event.by_id) if event.by_id is not None else None
        if starter is not None and event.cause == "reclaim":
            starter.victim_classes.add(run.job.workload_class)
        if in_month and event.cause in f.PREEMPTION_CAUSES:
            figures = self.figures[run.job.share_id]
            figures.preemptions[event.cause] += 1
            figures.weekly_preemptions[self.week_of(event.at)][event.cause] += 1
            figures.jobs_preempted.add(run.job.pk)

    def _close(self) -> None:
        """The month's end: runs still going, capacity to the end, who still waits."""
        for run in self.jobs.values():
            if run.running and run.run_start < self.stop:
                self.figures[run.job.share_id].runs += 1
            if run.pending is not None:
                self._settle(run, started=None, ended=None)
            if run.runnable_since is not None and not run.running:
                self.figures[run.job.share_id].waiting_at_end.append(
                    (_seconds(self.stop - run.runnable_since), run.job.name)
                )
        for share_id in self.shares:
            for type_name in self._types_of(share_id):
                self._flush(share_id, type_name, self.stop)


def _seconds(delta: dt.timedelta) -> int:
    return int(delta.total_seconds())
