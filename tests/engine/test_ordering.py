"""The ordering seam (`engine.ordering`): the borrowing order and the victim order are
named strategies a queue picks, today's the default.

- an unknown name is refused, named;
- the defaults are today's orders: replays with them equal replays with reference
  copies of the keys the pass wrote inline before the seam (`(submitted_at, id)` for
  borrowing, `(priority, -started_at, -start_seq, id)` for victims), on random scenarios;
- a queue that picks another registered order gets it in the full pass, the fed pass
  and the simulator (another job borrows first, another victim is reclaimed), and a
  queue that picks the defaults again gets today's decisions.
"""

from __future__ import annotations

import json
import pickle
import random
from dataclasses import replace

import pytest
from hypothesis import given

from engine import (
    PendingJob,
    QueueSpec,
    RunningJob,
    ShareSpec,
    Snapshot,
    Start,
    dump_result,
    load_scenario,
    schedule,
    simulate,
)
from engine.board import Board
from engine.explain import Explainer
from engine.ordering import (
    BORROWING_ORDERS,
    VICTIM_ORDERS,
    FirstComeFirstServed,
    VictimOrderV1,
    borrowing_order,
    register_borrowing_order,
    register_victim_order,
    victim_order,
)
from engine.quota import Policy
from engine.scheduling import schedule_fed
from engine.types import Preempt
from tests.engine.test_contract_properties import contracted
from tests.engine.test_properties import deterministic, scenarios

G = "g"


class KeyedRound:
    """A borrowing round that tries the heads by a fixed key."""

    def __init__(self, key) -> None:
        self.key = key
        self.heads: list = []

    def offer(self, job) -> None:
        self.heads.append(job)

    def next(self):
        if not self.heads:
            return None
        first = min(self.heads, key=self.key)
        self.heads.remove(first)
        return first


class KeyedBorrowing:
    rebalance = None

    def __init__(self, name: str, key) -> None:
        self.name, self._key = name, key

    def round(self, board):
        return KeyedRound(self._key)


class KeyedVictims:
    def __init__(self, name: str, key) -> None:
        self.name, self.key = name, key

    def choose(self, board, candidates, taken):
        return min(candidates, key=self.key)


# The keys the pass and the board wrote inline before the seam, copied here.
def fifo_key(job) -> tuple:
    return (job.submitted_at, job.id)


def v1_key(job) -> tuple:
    return (job.priority, -job.started_at, -job.start_seq, job.id)


# Other orders: the newest submission borrows first; the highest priority, then the
# oldest start, is stopped first. (Functions, not lambdas: a stored standing pickles its
# queue's orders.)
def newest_key(job) -> tuple:
    return (-job.submitted_at, job.id)


def highest_priority_key(job) -> tuple:
    return (-job.priority, job.started_at, job.start_seq, job.id)


REFERENCE_BORROWING = KeyedBorrowing("REFERENCE_FIFO", fifo_key)
REFERENCE_VICTIMS = KeyedVictims("REFERENCE_V1", v1_key)
NEWEST_FIRST = KeyedBorrowing("NEWEST_FIRST", newest_key)
HIGHEST_PRIORITY_FIRST = KeyedVictims("HIGHEST_PRIORITY_FIRST", highest_priority_key)


@pytest.fixture(scope="module")
def orders():
    """The test's orders registered for this module's tests, and removed after them."""
    for order in (REFERENCE_BORROWING, NEWEST_FIRST):
        register_borrowing_order(order)
    for order in (REFERENCE_VICTIMS, HIGHEST_PRIORITY_FIRST):
        register_victim_order(order)
    yield
    for name in (REFERENCE_BORROWING.name, NEWEST_FIRST.name):
        del BORROWING_ORDERS[name]
    for name in (REFERENCE_VICTIMS.name, HIGHEST_PRIORITY_FIRST.name):
        del VICTIM_ORDERS[name]


def picking(queue: QueueSpec, borrowing: str = "FIFO", victims: str = "V1") -> QueueSpec:
    return replace(queue, borrowing_order=borrowing, victim_order=victims)


# -- the registry -------------------------------------------------------------------------


def test_an_unknown_order_is_refused_by_its_name():
    queue = QueueSpec({G: 2})
    shares = [ShareSpec("a", {G: 2}, "LEND_AND_BORROW")]
    with pytest.raises(ValueError, match=r"unknown borrowing order 'FAIR_SHARE' \(known: FIFO"):
        Policy(picking(queue, borrowing="FAIR_SHARE"), shares)
    with pytest.raises(ValueError, match=r"unknown victim order 'NEWEST' \(known: .*V1\)"):
        schedule(Snapshot(picking(queue, victims="NEWEST"), shares), 0)
    with pytest.raises(ValueError, match="unknown borrowing order 'fifo'"):
        borrowing_order("fifo")


def test_a_name_is_registered_once(orders):
    with pytest.raises(ValueError, match="borrowing order 'FIFO' is already registered"):
        register_borrowing_order(KeyedBorrowing("FIFO", fifo_key))
    with pytest.raises(ValueError, match="victim order 'V1' is already registered"):
        register_victim_order(KeyedVictims("V1", v1_key))
    assert isinstance(borrowing_order("FIFO"), FirstComeFirstServed)
    assert isinstance(victim_order("V1"), VictimOrderV1)


def test_the_defaults_are_todays_orders():
    queue = QueueSpec({G: 1})
    assert (queue.borrowing_order, queue.victim_order) == ("FIFO", "V1")
    policy = Policy(queue, [ShareSpec("a", {G: 1}, "LEND")])
    assert policy.borrowing_order is borrowing_order("FIFO")
    assert policy.victim_order is victim_order("V1")


# -- the defaults are today's ---------------------------------------------------------------


def _replayed(document: dict, borrowing: str = "FIFO", victims: str = "V1") -> str:
    scenario = load_scenario(document)
    scenario = replace(scenario, queue=picking(scenario.queue, borrowing, victims))
    return dump_result(simulate(scenario))


def _contended(seed: int) -> dict:
    """Three borrowing shares, a lender and sometimes a RESERVE share, more work than
    capacity, submission ties, priorities, a capacity cut now and then: borrowing order
    and victim order both decide things here."""
    rng = random.Random(seed)
    shares = [
        {"name": "lender", "capacity_limits": {G: rng.randint(1, 3)}, "strategy": "LEND"},
        *(
            {
                "name": f"b{index}",
                "capacity_limits": {G: rng.randint(1, 2)},
                "strategy": "LEND_AND_BORROW",
                "borrow_limit": rng.choice((-1, -1, 100, 200)),
                "in_share_preemption": rng.random() < 0.5,
            }
            for index in range(3)
        ),
    ]
    if rng.random() < 0.3:
        shares.append({"name": "reserved", "capacity_limits": {G: 1}, "strategy": "RESERVE"})
    capacity = sum(share["capacity_limits"][G] for share in shares) - rng.randint(0, 2)
    jobs = [
        {
            "id": f"j{number:02d}",
            "share": rng.choice(shares)["name"],
            "priority": rng.choice((0, 0, 1, 2, 3)),
            "instance_type": G,
            "instances": rng.choice((1, 1, 1, 2)),
            "submit_at": rng.randrange(0, 30) * 10,
            "duration": rng.randrange(3, 30) * 10,
            "checkpoint_interval": rng.choice((None, 25)),
        }
        for number in range(30)
    ]
    jobs = [{key: value for key, value in job.items() if value is not None} for job in jobs]
    actions = []
    if rng.random() < 0.3:
        actions.append({"at": 150, "type": "set_capacity", "capacity": {G: max(1, capacity - 2)}})
    queue = {"capacity": {G: capacity}}
    return {
        "name": f"contended-{seed}",
        "queue": queue,
        "shares": shares,
        "jobs": jobs,
        "actions": actions,
    }


def test_the_defaults_replay_as_the_inline_keys_did_and_the_orders_matter(orders):
    """On contended queues the default orders give exactly what reference copies of the
    former inline keys give, while other orders change many of the replays (so the
    comparison could fail)."""
    changed_by_borrowing = changed_by_victims = 0
    for seed in range(40):
        document = _contended(seed)
        today = _replayed(document)
        assert _replayed(document, "REFERENCE_FIFO", "REFERENCE_V1") == today, seed
        changed_by_borrowing += _replayed(document, "NEWEST_FIRST") != today
        changed_by_victims += _replayed(document, victims="HIGHEST_PRIORITY_FIRST") != today
    assert changed_by_borrowing >= 10
    assert changed_by_victims >= 10


@deterministic(150)
@given(scenarios())
def test_the_defaults_are_the_inline_keys_on_any_scenario(orders, document):
    assert _replayed(document, "REFERENCE_FIFO", "REFERENCE_V1") == _replayed(document)


@deterministic(100)
@given(contracted(cuts=True))
def test_the_defaults_are_the_inline_keys_with_contracts(orders, document):
    """Spec v2: notices, STOPPING jobs (sorted by the victim order too) and capacity cuts."""
    assert _replayed(document, "REFERENCE_FIFO", "REFERENCE_V1") == _replayed(document)


# -- another order, picked by a queue ------------------------------------------------------

# Capacity 3: the lender's limit of 1 is idle, b and c each run one job within their
# limit of 1. b's head was submitted at 10, c's at 20; one instance is free, so one of
# them borrows.
BORROW_SHARES = (
    ShareSpec("lender", {G: 1}, "LEND"),
    ShareSpec("b", {G: 1}, "LEND_AND_BORROW"),
    ShareSpec("c", {G: 1}, "LEND_AND_BORROW"),
)
BORROW_RUNNING = (RunningJob("b-run", "b", 0, G, 1, 0, 0), RunningJob("c-run", "c", 0, G, 1, 0, 1))
BORROW_PENDING = (PendingJob("b-old", "b", 0, G, 1, 10), PendingJob("c-new", "c", 0, G, 1, 20))

# Capacity 4: b and c (limit 1 each) borrow the idle lender's 2; the lender's job needs
# 1, so one job of b or c is reclaimed.
RECLAIM_SHARES = (
    ShareSpec("lender", {G: 2}, "LEND"),
    ShareSpec("b", {G: 1}, "LEND_AND_BORROW"),
    ShareSpec("c", {G: 1}, "LEND_AND_BORROW"),
)
RECLAIM_RUNNING = (
    RunningJob("b1", "b", 2, G, 1, 0, 0),
    RunningJob("b2", "b", 4, G, 1, 0, 1),
    RunningJob("c1", "c", 3, G, 1, 0, 2),
    RunningJob("c2", "c", 5, G, 1, 0, 3),
)
RECLAIM_PENDING = (PendingJob("l1", "lender", 0, G, 1, 100),)


class WholeFeed:
    """A share's pending jobs, all in one page (the fed pass asks for them)."""

    def __init__(self, jobs) -> None:
        self.jobs = list(jobs)
        self.frontier: tuple | None = (-(10**9), 0, "")

    def more(self):
        self.frontier = None
        return self.jobs


def _started(decisions) -> list[str]:
    return [d.job for d in decisions if isinstance(d, Start)]


def _reclaimed(decisions) -> list[str]:
    return [d.job for d in decisions if isinstance(d, Preempt) and d.cause == "reclaim"]


def _passes(queue, shares, running, pending, now):
    """The decisions of the full pass and of the fed pass (each pending job fed by its
    share's feed), which must agree."""
    full = schedule(Snapshot(queue, shares, running, pending), now).decisions
    feeds = {
        share.name: WholeFeed(job for job in pending if job.share == share.name) for share in shares
    }
    fed = schedule_fed(Snapshot(queue, shares, running, ()), now, feeds).decisions
    assert fed == full
    return full


@pytest.mark.parametrize(
    ("borrowing", "first"), [("FIFO", "b-old"), ("NEWEST_FIRST", "c-new"), ("FIFO", "b-old")]
)
def test_the_queues_borrowing_order_decides_who_borrows_first_in_a_pass(orders, borrowing, first):
    queue = picking(QueueSpec({G: 3}), borrowing=borrowing)
    decisions = _passes(queue, BORROW_SHARES, BORROW_RUNNING, BORROW_PENDING, 50)
    assert decisions == (Start(first, borrowed=True),)


@pytest.mark.parametrize(
    ("victims", "victim"), [("V1", "b1"), ("HIGHEST_PRIORITY_FIRST", "c2"), ("V1", "b1")]
)
def test_the_queues_victim_order_decides_who_is_reclaimed_in_a_pass(orders, victims, victim):
    queue = picking(QueueSpec({G: 4}), victims=victims)
    decisions = _passes(queue, RECLAIM_SHARES, RECLAIM_RUNNING, RECLAIM_PENDING, 100)
    assert _reclaimed(decisions) == [victim]
    assert _started(decisions) == ["l1"]


def _job(job_id, share, submit_at, duration, priority=0) -> dict:
    return {
        "id": job_id,
        "share": share,
        "priority": priority,
        "instance_type": G,
        "instances": 1,
        "submit_at": submit_at,
        "duration": duration,
    }


def _shares(limits: dict[str, int]) -> list[dict]:
    return [
        {"name": name, "capacity_limits": {G: limit}, "strategy": strategy}
        for (name, limit), strategy in zip(
            limits.items(), ("LEND", "LEND_AND_BORROW", "LEND_AND_BORROW"), strict=True
        )
    ]


BORROW_DOCUMENT = {
    "name": "who-borrows-first",
    "queue": {"capacity": {G: 3}},
    "shares": _shares({"lender": 1, "b": 1, "c": 1}),
    "jobs": [
        _job("a-run", "lender", 0, 50),
        _job("b-run", "b", 0, 1000),
        _job("c-run", "c", 0, 1000),
        _job("b-old", "b", 10, 100),
        _job("c-new", "c", 20, 100),
    ],
}
RECLAIM_DOCUMENT = {
    "name": "who-is-reclaimed",
    "queue": {"capacity": {G: 4}},
    "shares": _shares({"lender": 2, "b": 1, "c": 1}),
    "jobs": [
        _job("b1", "b", 0, 1000, priority=2),
        _job("b2", "b", 0, 1000, priority=4),
        _job("c1", "c", 0, 1000, priority=3),
        _job("c2", "c", 0, 1000, priority=5),
        _job("l1", "lender", 100, 100),
    ],
}


def _started_at(result: str, t: int) -> list[str]:
    events = json.loads(result)["events"]
    return [e["job"] for e in events if e["t"] == t and e["type"] == "STARTED"]


def _reclaims(result: str) -> list[str]:
    events = json.loads(result)["events"]
    return [e["job"] for e in events if e["type"] == "PREEMPTED" and e["cause"] == "reclaim"]


def test_the_queues_orders_decide_in_the_simulator(orders):
    today_borrowing = _replayed(BORROW_DOCUMENT)
    assert _started_at(today_borrowing, 50) == ["b-old"]
    assert _started_at(_replayed(BORROW_DOCUMENT, "NEWEST_FIRST"), 50) == ["c-new"]
    assert _replayed(BORROW_DOCUMENT, "FIFO") == today_borrowing

    today_reclaim = _replayed(RECLAIM_DOCUMENT)
    assert _reclaims(today_reclaim) == ["b1"]
    assert _reclaims(_replayed(RECLAIM_DOCUMENT, victims="HIGHEST_PRIORITY_FIRST")) == ["c2"]
    assert _replayed(RECLAIM_DOCUMENT, victims="V1") == today_reclaim


def test_a_policy_change_keeps_the_queues_victim_order(orders):
    board = Board(Policy(QueueSpec({G: 1}), RECLAIM_SHARES))
    other = Policy(picking(QueueSpec({G: 1}), victims="HIGHEST_PRIORITY_FIRST"), RECLAIM_SHARES)
    with pytest.raises(ValueError, match="keeps the queue's victim order"):
        board.set_policy(other)


@pytest.mark.parametrize(
    ("borrowing", "ranks"),
    [("FIFO", {"b-old": 1, "c-new": 2, "d-new": 3}), ("NEWEST_FIRST", {"c-new": 1, "b-old": 2})],
)
def test_explain_places_a_job_in_the_queues_borrowing_order(orders, borrowing, ranks):
    """The borrowing positions explain gives (and a stored standing gives a job that
    would be submitted now) follow the order the queue picked."""
    shares = (*BORROW_SHARES, ShareSpec("d", {G: 1}, "LEND_AND_BORROW"))
    running = (
        *BORROW_RUNNING,
        RunningJob("d-run", "d", 0, G, 1, 0, 2),
        RunningJob("l", "lender", 0, G, 1, 0, 3),
    )
    queue = picking(QueueSpec({G: 4}), borrowing=borrowing)
    explainer = Explainer(Snapshot(queue, shares, running, BORROW_PENDING), 50)
    found = {job: e.borrow_position for job, e in explainer.explanations.items()}
    assert found == {"b-old": ranks["b-old"], "c-new": ranks["c-new"]}
    new = PendingJob("d-new", "d", 0, G, 1, 30)
    stored = pickle.loads(pickle.dumps(explainer.standing.detached()))
    for standing in (explainer.standing, stored):
        assert standing.if_submitted(new).borrow_position == ranks.get("d-new", 1)


@pytest.mark.parametrize(
    ("victims", "victim"), [("V1", "low-a"), ("HIGHEST_PRIORITY_FIRST", "low-b")]
)
def test_in_share_preemption_takes_lower_priorities_in_the_queues_victim_order(
    orders, victims, victim
):
    """Phase 3 stops only jobs of strictly lower priority than the head, whatever comes
    first in the queue's victim order (here the higher-priority job `high` does)."""
    queue = picking(QueueSpec({G: 3}), victims=victims)
    shares = (ShareSpec("s", {G: 3}, "LEND", in_share_preemption=True),)
    running = (
        RunningJob("low-a", "s", 0, G, 1, 0, 0),
        RunningJob("low-b", "s", 1, G, 1, 0, 1),
        RunningJob("high", "s", 5, G, 1, 0, 2),
    )
    pending = (PendingJob("head", "s", 3, G, 1, 10),)
    decisions = _passes(queue, shares, running, pending, 20)
    # (Then, with `low-b` stopped, it stops `low-a` for itself in a later pass.)
    assert decisions[:2] == (Preempt(victim, "priority", "head", False), Start("head", False))


def preempt_lower_priority_borrowers(tools) -> None:
    """A phase 2b for the test: a head beyond its share's limit that cannot borrow stops
    the first job, in victim order, of another share over its limit with a lower
    priority, then borrows if it now can."""
    board = tools.board
    ledger, rules = board.ledger, board.policy.shares
    for rule in rules:
        head = board.head(rule.index) if rule.can_borrow else None
        if head is None or head.held or ledger.within_limit(rule, head.itype, head.n):
            continue
        if ledger.borrow_blocker(rule, head.itype, head.n) is None:
            continue
        candidates = [
            job
            for other in rules
            if other is not rule
            and ledger.used(other, head.itype) > other.limits.get(head.itype, 0)
            for _, job in board.running.get((other.index, head.itype), [])[:1]
            if job.priority < head.priority
        ]
        if not candidates:
            continue
        victim = board.policy.victim_order.choose(board, candidates, {})
        if tools.take([victim], "reclaim", head) and (
            ledger.borrow_blocker(rule, head.itype, head.n) is None
        ):
            tools.start(head)


class PreemptingBorrowers(KeyedBorrowing):
    rebalance = staticmethod(preempt_lower_priority_borrowers)


@pytest.mark.parametrize(
    ("borrowing", "decisions"),
    [
        ("FIFO", ()),
        (
            "PREEMPTING_BORROWERS",
            (Preempt("c-borrow", "reclaim", "b-urgent", False), Start("b-urgent", True)),
        ),
    ],
)
def test_a_borrowing_order_may_bring_its_own_phase_2b(orders, borrowing, decisions):
    """Today's order has none; an order with one (as v3's fair-share preemption will
    be) runs it after phase 2 in the full and the fed pass, with the pass's rules."""
    register_borrowing_order(PreemptingBorrowers("PREEMPTING_BORROWERS", fifo_key))
    try:
        queue = picking(QueueSpec({G: 3}), borrowing=borrowing)
        running = (
            RunningJob("b-run", "b", 0, G, 1, 0, 0),
            RunningJob("c-run", "c", 0, G, 1, 0, 1),
            RunningJob("c-borrow", "c", 0, G, 1, 5, 2),
        )
        pending = (PendingJob("b-urgent", "b", 5, G, 1, 10),)
        assert _passes(queue, BORROW_SHARES, running, pending, 20) == decisions
    finally:
        del BORROWING_ORDERS["PREEMPTING_BORROWERS"]
