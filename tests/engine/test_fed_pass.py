"""The lazily fed pass (`schedule_fed`) decides exactly what the pass over every pending
job (`schedule`) decides, on random queues.

Each queue mixes strategies (RESERVE holds, lenders, borrowers with and without caps,
disabled shares), in-share preemption, protected running jobs, shares over their limit
(reclaim), misconfigured jobs (some due to fail under `runnable_time_limit`) and
submission-time ties within a second. The fed pass gets what the live pass reads up
front (a random part of the pending jobs, always the misconfigured ones due to fail);
the rest of each share's well-configured jobs comes through a feed that pages in
queue order as the live scheduler's `ShareFeed` does (pages of a random size, extended
to the end of their last job's (priority, second)); misconfigured jobs not due are
never read, as in the database.
"""

from __future__ import annotations

import random

import pytest

from engine import PendingJob, QueueSpec, RunningJob, ShareSpec, Snapshot, schedule
from engine.board import LAST_ID
from engine.quota import Policy
from engine.scheduling import schedule_fed
from engine.types import BLOCKED_BEHIND_HEAD, MISCONFIGURATION_REASONS

TYPES = ("g5", "p4")
NOW = 10_000


class ListFeed:
    """A share's left-out jobs served as `fleet.bridge.ShareFeed` serves rows:
    pages of whole (priority, second) groups, or of one group in id order when a page
    holds nothing else."""

    def __init__(self, jobs: list[PendingJob], page: int, held: set[str]) -> None:
        self.jobs = sorted(jobs, key=key)
        self.page = page
        self.held = held
        self.frontier: tuple | None = (-(10**9), 0, "")
        self.calls = 0

    def more(self) -> list[PendingJob]:
        self.calls += 1
        if self.frontier is None:
            return []
        after = [job for job in self.jobs if key(job) > self.frontier]
        rows = after[: self.page]
        if len(rows) < self.page:
            self.frontier = None
        else:
            last = rows[-1]
            group = (last.priority, last.submitted_at)
            whole = [job for job in rows if (job.priority, job.submitted_at) != group]
            if whole:
                rows = whole
                self.frontier = (-whole[-1].priority, whole[-1].submitted_at, LAST_ID)
            else:
                self.frontier = key(last)
        fresh = [job for job in rows if job.id not in self.held]
        self.held.update(job.id for job in fresh)
        return fresh


def key(job: PendingJob) -> tuple:
    return (-job.priority, job.submitted_at, job.id)


def random_queue(rng: random.Random) -> tuple[Snapshot, int | None]:
    limit = rng.choice([None, None, 50, 500])
    capacity = {t: rng.randint(2, 12) for t in TYPES}
    shares = []
    for index in range(rng.randint(1, 4)):
        strategy = rng.choice(["RESERVE", "LEND", "LEND_AND_BORROW", "LEND_AND_BORROW"])
        shares.append(
            ShareSpec(
                name=f"s{index}",
                capacity_limits={t: rng.randint(0, 6) for t in TYPES if rng.random() < 0.85},
                strategy=strategy,
                borrow_limit=rng.choice([-1, -1, 0, 50, 100, 200]),
                in_share_preemption=rng.random() < 0.5,
                enabled=rng.random() < 0.9,
            )
        )
    queue = QueueSpec(capacity=capacity, runnable_time_limit=limit)
    policy = Policy(queue, shares)
    used = dict.fromkeys(TYPES, 0)
    running = []
    seq = 0
    for number in range(rng.randint(0, 14)):
        share = rng.randrange(len(shares))
        itype = rng.choice(TYPES)
        n = rng.randint(1, 3)
        if used[itype] + n > capacity[itype]:
            continue
        used[itype] += n
        seq += 1
        started = NOW - rng.randint(0, 3)
        running.append(
            RunningJob(
                id=f"r{number:04d}",
                share=shares[share].name,
                priority=rng.randint(0, 3),
                instance_type=itype,
                instances=n,
                started_at=started,
                start_seq=seq,
                protected_until=NOW + 5 if rng.random() < 0.15 else None,
                preemption_retries=rng.choice([None, None, 0, 1]),
                submitted_at=started - rng.randint(0, 5),
            )
        )
    pending = []
    for number in range(rng.randint(0, 60)):
        share = rng.randrange(len(shares))
        itype = rng.choice(TYPES)
        n = rng.choice([1, 1, 1, 2, 2, 3, 5, 9])
        misconfigured = policy.misconfiguration(share, itype, n) is not None
        pending.append(
            PendingJob(
                id=f"p{number:04d}",
                share=shares[share].name,
                priority=rng.randint(0, 3),
                instance_type=itype,
                instances=n,
                submitted_at=NOW - rng.randint(0, 6),
                preemption_retries=rng.choice([None, 1]),
                misconfigured_since=(
                    NOW - rng.choice([0, 10, 100, 1000]) if misconfigured else None
                ),
            )
        )
    return Snapshot(queue=queue, shares=tuple(shares), running=running, pending=pending), limit


def fed_run(snapshot: Snapshot, limit: int | None, rng: random.Random):
    policy = Policy(snapshot.queue, snapshot.shares)
    index = {rule.name: rule.index for rule in policy.shares}
    loaded, left_out = [], []
    for job in snapshot.pending:
        misconfigured = (
            policy.misconfiguration(index[job.share], job.instance_type, job.instances) is not None
        )
        due = misconfigured and limit is not None and job.misconfigured_since + limit <= NOW
        if due or (not misconfigured and rng.random() < 0.2):
            loaded.append(job)  # what the live pass reads up front
        elif not misconfigured:
            left_out.append(job)
    held = {job.id for job in loaded}
    page = rng.choice([1, 2, 3, 8])
    feeds = {
        share.name: ListFeed([job for job in left_out if job.share == share.name], page, held)
        for share in snapshot.shares
    }
    fed = Snapshot(
        queue=snapshot.queue,
        shares=snapshot.shares,
        running=snapshot.running,
        pending=sorted(loaded, key=lambda job: job.id),
    )
    return schedule_fed(fed, NOW, feeds), held, feeds


@pytest.mark.parametrize("seed", range(400))
def test_the_fed_pass_decides_what_the_full_pass_decides(seed):
    rng = random.Random(seed)
    snapshot, limit = random_queue(rng)
    full = schedule(snapshot, NOW)
    fed, held, _ = fed_run(snapshot, limit, rng)

    assert fed.decisions == full.decisions
    for job_id, reason in fed.reasons.items():
        assert full.reasons[job_id] == reason, job_id
    stored = {job.id: job for job in snapshot.pending}
    for job_id, reason in full.reasons.items():
        if job_id in fed.reasons:
            continue
        # A job the fed pass never read keeps its stored state, which must be right:
        # behind its share's head, or misconfigured with its clock running.
        assert job_id not in held
        if stored[job_id].misconfigured_since is None:
            assert reason == BLOCKED_BEHIND_HEAD, job_id
        else:
            assert reason in MISCONFIGURATION_REASONS, job_id


def test_random_queues_cover_what_matters():
    """The generator reaches every case the comparison is about."""
    seen = set()
    for seed in range(400):
        rng = random.Random(seed)
        snapshot, limit = random_queue(rng)
        full = schedule(snapshot, NOW)
        for decision in full.decisions:
            seen.add(type(decision).__name__ + ":" + getattr(decision, "cause", "") or "")
            if type(decision).__name__ == "Start" and decision.borrowed:
                seen.add("borrowed start")
        if any(share.strategy == "RESERVE" for share in snapshot.shares):
            seen.add("reserve")
        if any(reason in MISCONFIGURATION_REASONS for reason in full.reasons.values()):
            seen.add("misconfigured")
    assert {
        "Start:",
        "borrowed start",
        "Preempt:reclaim",
        "Preempt:priority",
        "Fail:time_limit",
        "reserve",
        "misconfigured",
    } <= seen, seen


def test_a_pass_reads_pages_only_as_heads_start():
    """A queue of 500 waiting jobs, 2 free instances: the fed pass reads one page of each
    share, not the queue."""
    shares = (ShareSpec(name="a", capacity_limits={"g5": 2}, strategy="LEND_AND_BORROW"),)
    queue = QueueSpec(capacity={"g5": 2})
    waiting = [
        PendingJob(
            id=f"p{n:04d}",
            share="a",
            priority=n % 3,
            instance_type="g5",
            instances=1,
            submitted_at=NOW - 1000 + n,
        )
        for n in range(500)
    ]
    held: set[str] = set()
    feed = ListFeed(waiting, 8, held)
    result = schedule_fed(Snapshot(queue=queue, shares=shares), NOW, {"a": feed})
    full = schedule(Snapshot(queue=queue, shares=shares, pending=waiting), NOW)
    assert result.decisions == full.decisions
    assert len(result.decisions) == 2
    assert feed.calls == 1 and len(held) == 7  # the last group of a page waits for the next
