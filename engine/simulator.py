"""Discrete-event replay of a scenario, driving the same pass as the live scheduler.

Order at one instant (spec rule 9): jobs finishing (in the order they started), then
actions (time, then listed order), then submissions (listed order), then the judgement
of misconfiguration (v1.1: once, so a cure undone at the same instant keeps the
clock), then `runnable_time_limit` failures (in the order the jobs became
misconfigured), then the passes. Passes also run when a running job's
`protected_until` passes, since it may become a victim then. Finishes, time-limit
clocks and protection ends sit in one heap keyed (time, kind, sequence), so equal
times stay deterministic; a preempted run's finish entry is dropped lazily (its token
no longer matches). Submissions and actions are already sorted lists.

Work model (spec rule 8): a start resumes from the last checkpoint after
`restart_overhead` when it is a restart; a preemption saves progress up to the last
multiple of `checkpoint_interval` and loses the rest (`lost_work`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from heapq import heappop, heappush
from typing import Any

from .board import DONE, FAIL, NOTICE, PENDING, PREEMPT, RUNNING, START, STOPPED, Board, Job
from .gc_pause import cyclic_gc_paused
from .quota import Policy
from .results import Event, JobOutcome, SimulationResult
from .scheduling import enforce_capacity, run_passes
from .types import Scenario, SetCapacity, SetPriority, ShareSpec, Terminate, UpdateShare
from .validation import load_scenario
from .work import checkpointed, overhead_spent, run_length, run_progress

# The kinds of the replay's heap entries, in their order at one instant (explain's
# forward replays push them too). STOP: a STOPPING job's stop instant (spec v2, V11);
# PROTECTION_ENDS also marks V5's wake-ups.
FINISH, STOP, TIME_LIMIT, PROTECTION_ENDS = 0, 1, 2, 3
# A named tuple's own constructor runs in Python, and a replay builds one per event:
# events are built as `_new(Event, (t, type, job, share, borrowed, cause, by, grace_until))`.
_new = tuple.__new__


class SimJob(Job):
    """A job with its work model and the figures of its outcome."""

    __slots__ = (
        "spec",
        "saved",
        "overhead",
        "run_start",
        "token",
        "first_started_at",
        "finished_at",
        "lost_work",
        "restarting",
        "waiting",
        "runnable_since",
        "ran_borrowed",
        "outcome",
        "notice_at",
        "notice_cause",
        "notice_by",
        "saves",
        "notice_time",
    )

    def __init__(self, spec, share: int) -> None:
        super().__init__(
            id=spec.id,
            share=share,
            priority=spec.priority,
            itype=spec.instance_type,
            n=spec.instances,
            submitted_at=spec.submit_at,
            protected_until=spec.protected_until,
            retries=spec.preemption_retries,
            min_reclaim=spec.min_runtime_reclaim,
            min_preempt=spec.min_runtime_preempt,
            grace=spec.grace,
            ckpt_notice=spec.checkpoint_on_notice,
        )
        self.spec = spec
        self.saved = 0
        self.overhead = 0
        self.token = 0
        self.first_started_at: int | None = None
        # When the current run began, as recorded here: the board's own start time
        # already names the next run when a job is preempted and restarted at once.
        self.run_start = 0
        self.finished_at: int | None = None
        self.lost_work = 0
        self.restarting = 0
        self.waiting = 0
        self.runnable_since = 0
        self.ran_borrowed = False
        self.outcome: tuple[str, str | None] | None = None
        # The current notice (spec v2): when, why and by whom, whether it saves on it.
        self.notice_at = 0
        self.notice_cause: str | None = None
        self.notice_by: str | None = None
        self.saves = False
        self.notice_time = 0


class Replay:
    """One scenario's replay on one board (explain's forecast and capture extend it)."""

    # Called as on_instant(replay, now, submitted) at each instant with submissions,
    # after them and before the instant's passes (explain.capture observes so).
    on_instant: Callable[[Replay, int, list[SimJob]], None] | None = None

    def __init__(self, scenario: Scenario) -> None:
        self.scenario = scenario
        self.queue = scenario.queue
        self.shares: list[ShareSpec] = list(scenario.shares)
        self.board = Board(Policy(self.queue, self.shares), on_misconfigured=self._clock)
        # A v2 document (spec V2): the board follows the contracts, the result has the
        # v2 fields; `reclaims` are the reclaim episodes' lengths (V12).
        self.v2 = self.board.v2 = scenario.contracts
        self.reclaims: list[int] = []
        self.reclaim_episodes: list[tuple[str, int, int]] = []
        index = {share.name: i for i, share in enumerate(self.shares)}
        self.jobs = [SimJob(spec, index[spec.share]) for spec in scenario.jobs]
        self.by_id = {job.id: job for job in self.jobs}
        self.heap: list[tuple] = []
        self.seq = 0
        self.events: list[Event] = []
        self.out: list = []
        self._share_name = [share.name for share in self.shares]

    def _push(self, t: int, kind: int, job: SimJob, token: int) -> None:
        self.seq += 1
        heappush(self.heap, (t, kind, self.seq, job, token))

    def _clock(self, job: Job) -> None:
        """Start the runnable_time_limit clock of a job that became misconfigured."""
        limit = self.queue.runnable_time_limit
        if limit is not None:
            self._push(job.misconfigured_since + limit, TIME_LIMIT, job, job.misconfigured_since)

    # -- what happens to jobs -------------------------------------------------------

    def _record(self, now: int) -> None:
        """Apply the work model to the board's decisions and log their events."""
        events = self.events
        share_name = self._share_name
        for entry in self.out:
            kind, job = entry[0], entry[1]
            share = share_name[job.share]
            if kind == START:
                borrowed = entry[2]
                job.waiting += now - job.runnable_since
                if job.first_started_at is None:
                    job.first_started_at = now
                    job.overhead = 0
                else:
                    job.overhead = job.spec.restart_overhead
                job.ran_borrowed = job.ran_borrowed or borrowed
                job.run_start = now
                job.token += 1
                if job.protected(now):
                    # Passes must run when the protection ends: the job may be a victim then.
                    self._push(job.protected_until, PROTECTION_ENDS, job, job.token)
                length = run_length(
                    saved=job.saved, overhead=job.overhead, duration=job.spec.duration
                )
                self._push(now + length, FINISH, job, job.token)
                if self.v2:
                    self._contract_start(job, now, length)
                events.append(
                    _new(Event, (now, "STARTED", job.id, share, borrowed, None, None, None))
                )
            elif kind == PREEMPT:
                _, _, cause, by, fails = entry
                self._stop_run(job, now)
                progress = run_progress(
                    saved=job.saved,
                    elapsed=now - job.run_start,
                    overhead=job.overhead,
                    duration=job.spec.duration,
                )
                job.saved = checkpointed(progress, job.spec.checkpoint_interval)
                job.lost_work += progress - job.saved
                events.append(
                    _new(
                        Event,
                        (now, "PREEMPTED", job.id, share, None, cause, by.id if by else None, None),
                    )
                )
                if fails:
                    self._end(job, now, "FAILED", "retries_exhausted")
                else:
                    job.runnable_since = now
            elif kind == FAIL:
                self._end(job, now, "FAILED", entry[2])
            elif kind == NOTICE:
                _, _, cause, by, _, grace_until, stop_at, saves = entry
                job.notice_at, job.notice_cause, job.notice_by = now, cause, by.id
                job.saves = saves
                self._push(stop_at, STOP, job, job.token)
                events.append(
                    _new(Event, (now, "PREEMPTED", job.id, share, None, cause, by.id, grace_until))
                )
            elif kind == STOPPED:
                self._stopped(job, now, entry[2], entry[3])
        self.out.clear()

    def _contract_start(self, job: SimJob, now: int, length: int) -> None:
        """Spec v2 at a start: a reclaim episode ends (V12); the ends of the run's
        protections are wake-ups (V5), unless the run is over by then."""
        if job.episode is not None:
            self.reclaims.append(now - job.episode)
            self.reclaim_episodes.append((job.id, job.episode, now))
            job.episode = None
        ends = {now + job.min_reclaim, now + job.min_preempt} - {now}
        for end in sorted(ends):
            if end < now + length:
                self._push(end, PROTECTION_ENDS, job, job.token)

    def _stopped(self, job: SimJob, now: int, cause: str | None, fails: bool) -> None:
        """A STOPPING job stopped (V9; `cause` set for a capacity cut, V10.1): its progress
        is saved on notice or rolled back to its last periodic checkpoint."""
        self._stop_run(job, now)
        job.notice_time += now - job.notice_at
        progress = run_progress(
            saved=job.saved,
            elapsed=now - job.run_start,
            overhead=job.overhead,
            duration=job.spec.duration,
        )
        if cause is None and job.saves:
            job.saved = progress
        else:
            job.saved = checkpointed(progress, job.spec.checkpoint_interval)
        job.lost_work += progress - job.saved
        by = None if cause is not None else job.notice_by
        event = (now, "STOPPED", job.id, self._share_name[job.share], None)
        self.events.append(_new(Event, (*event, cause or job.notice_cause, by, None)))
        if fails:
            self._end(job, now, "FAILED", "retries_exhausted")
        else:
            job.runnable_since = now

    def _stop_run(self, job: SimJob, now: int) -> None:
        job.restarting += overhead_spent(elapsed=now - job.run_start, overhead=job.overhead)

    def _end(self, job: SimJob, now: int, state: str, cause: str | None) -> None:
        job.finished_at = now
        job.outcome = (state, cause)
        if state == "FAILED":
            share = self._share_name[job.share]
            self.events.append(_new(Event, (now, "FAILED", job.id, share, None, cause, None, None)))

    # -- the instant ------------------------------------------------------------------

    def _finish(self, job: SimJob, now: int) -> None:
        self._stop_run(job, now)
        if job.stopping:  # its work completed during its notice (V7)
            job.notice_time += now - job.notice_at
        self.board.finish(job)
        job.finished_at = now
        job.outcome = ("SUCCEEDED", None)
        share = self._share_name[job.share]
        self.events.append(_new(Event, (now, "SUCCEEDED", job.id, share, None, None, None, None)))

    def _act(self, action, now: int) -> None:
        board = self.board
        if isinstance(action, SetPriority):
            board.set_priority(self.by_id[action.job], action.priority)
        elif isinstance(action, Terminate):
            job = self.by_id[action.job]
            if job.state == RUNNING:
                self._stop_run(job, now)
                if job.stopping:  # V10.2
                    job.notice_time += now - job.notice_at
            elif job.state == PENDING:
                job.waiting += now - job.runnable_since
            if job.state in (RUNNING, PENDING):
                board.fail(job, "terminated", self.out)
                self._record(now)
        elif isinstance(action, UpdateShare):
            index = next(i for i, s in enumerate(self.shares) if s.name == action.share.name)
            self.shares[index] = action.share
            board.set_policy(Policy(self.queue, self.shares))
        elif isinstance(action, SetCapacity):
            self.queue = replace(self.queue, capacity=action.capacity)
            board.set_policy(Policy(self.queue, self.shares))
            enforce_capacity(board, self.out)
            self._record(now)

    def _submit(self, job: SimJob, now: int) -> None:
        share = self.shares[job.share]
        self.events.append(
            _new(Event, (now, "SUBMITTED", job.id, share.name, None, None, None, None))
        )
        job.runnable_since = now
        if not share.enabled:
            job.state = DONE
            self._end(job, now, "FAILED", "share_disabled")
            return
        self.board.enqueue(job)

    def _time_limit(self, job: SimJob, since: int, now: int) -> None:
        if job.state == PENDING and job.reason is not None and job.misconfigured_since == since:
            job.waiting += now - job.runnable_since
            self.board.fail(job, "time_limit", self.out)
            self._record(now)

    def run(self, progress: Callable[[int, int, int], None] | None) -> None:  # noqa: C901
        order = sorted(range(len(self.jobs)), key=lambda i: (self.jobs[i].submitted_at, i))
        submissions = [self.jobs[i] for i in order]
        actions = list(self.scenario.actions)
        heap, board, out = self.heap, self.board, self.out
        next_submission = next_action = 0
        instants = 0
        on_instant = self.on_instant
        while True:
            now = heap[0][0] if heap else None
            if next_submission < len(submissions):
                t = submissions[next_submission].submitted_at
                now = t if now is None or t < now else now
            if next_action < len(actions):
                t = actions[next_action].at
                now = t if now is None or t < now else now
            if now is None:
                break
            if self.v2:
                if heap and heap[0][0] == now and self._drop_stale():
                    continue  # `now` held nothing but stale entries: not an instant
                # The passes run at every instant processed (a protection may have ended).
                board.dirty = True
            while heap and heap[0][0] == now and heap[0][1] == FINISH:
                _, _, _, job, token = heappop(heap)
                if job.token == token and job.state == RUNNING:
                    self._finish(job, now)
            while heap and heap[0][0] == now and heap[0][1] == STOP:
                _, _, _, job, token = heappop(heap)
                if job.token == token and job.stopping:
                    if board.stop(job, None, out):
                        board.enqueue(job)
                    self._record(now)
            while next_action < len(actions) and actions[next_action].at == now:
                self._act(actions[next_action], now)
                next_action += 1
            submitted = [] if on_instant is not None else None
            while (
                next_submission < len(submissions)
                and submissions[next_submission].submitted_at == now
            ):
                self._submit(submissions[next_submission], now)
                if submitted is not None:
                    submitted.append(submissions[next_submission])
                next_submission += 1
            if board.unsettled:
                board.settle(now)
            if submitted:
                on_instant(self, now, submitted)
            while heap and heap[0][0] == now and heap[0][1] == TIME_LIMIT:
                _, _, _, job, since = heappop(heap)
                self._time_limit(job, since, now)
            while heap and heap[0][0] == now:
                _, _, _, job, token = heappop(heap)  # a protection ends
                if job.token == token and job.state == RUNNING:
                    board.protection_ended(job)
            run_passes(board, now, out)
            if out:
                self._record(now)
            instants += 1
            if progress is not None and instants % 4096 == 0:
                progress(now, next_submission, len(submissions))
        if progress is not None:
            progress(self.events[-1].t if self.events else 0, len(submissions), len(submissions))

    def _drop_stale(self) -> bool:
        """Drop the stale entries at the top of the heap (a finish or stop of a run that
        ended otherwise, a wake-up after its run's end, V5); say whether any went."""
        heap = self.heap
        dropped = False
        while heap:
            _, kind, _, job, token = heap[0]
            if kind == FINISH:
                live = job.token == token and job.state == RUNNING
            elif kind == STOP:
                live = job.token == token and job.stopping
            elif kind == TIME_LIMIT:
                live = (
                    job.state == PENDING
                    and job.reason is not None
                    and job.misconfigured_since == token
                )
            else:
                live = job.token == token and job.state == RUNNING and not job.stopping
            if live:
                break
            heappop(heap)
            dropped = True
        return dropped

    def result(self) -> SimulationResult:
        makespan = self.events[-1].t if self.events else 0
        # Every submission is an event, so the last instant processed is the makespan or
        # a later action (v1.1): a job that never finishes waits until then.
        actions = self.scenario.actions
        end = max(makespan, actions[-1].at) if actions else makespan
        reasons = self.board.pending_reasons()
        outcomes = []
        for job in self.jobs:
            if job.outcome is None:
                state, reason = "RUNNABLE", reasons[job.id]
                job.waiting += end - job.runnable_since
            else:
                state, reason = job.outcome
            outcomes.append(
                JobOutcome(
                    id=job.id,
                    state=state,
                    reason=reason,
                    share=self._share_name[job.share],
                    submitted_at=job.submitted_at,
                    first_started_at=job.first_started_at,
                    finished_at=job.finished_at,
                    preemptions=job.preemptions,
                    ran_borrowed=job.ran_borrowed,
                    lost_work=job.lost_work,
                    restart_overhead=job.restarting,
                    waiting_time=job.waiting,
                    notice_time=job.notice_time,
                    protected_blocks=job.protected_blocks,
                )
            )
        return SimulationResult(
            scenario=self.scenario.name,
            shares=tuple(self._share_name),
            makespan=makespan,
            jobs=tuple(outcomes),
            events=tuple(self.events),
            contracts=self.v2,
            reclaims=tuple(self.reclaims),
            reclaim_episodes=tuple(self.reclaim_episodes),
        )


def simulate(
    scenario: Scenario | Mapping[str, Any],
    *,
    progress: Callable[[int, int, int], None] | None = None,
) -> SimulationResult:
    """Replay a scenario (a `Scenario`, or a document `load_scenario` accepts).

    `progress(now, submitted, total)` is called every few thousand instants and at the end.
    """
    if not isinstance(scenario, Scenario):
        scenario = load_scenario(scenario)
    with cyclic_gc_paused():
        replay = Replay(scenario)
        replay.run(progress)
        return replay.result()
