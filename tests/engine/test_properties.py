"""Property-based tests: random scenarios, the spec's invariants checked at every instant.

`Oracle` rebuilds the state of the queue instant by instant from a result's events and
the scenario's actions (usage per share and type, the policy as actions change it, the
priorities, who is RUNNABLE since when) and checks each event against the scenario
format, with its own arithmetic written from the spec rather than taken from the
engine:

- never over capacity: a start needs `n <= free(T)`; every type fits its capacity once
  the instant is done;
- a RESERVE share's idle capacity is never used by others (v1.1: in every phase): no
  start leaves `free(T)` below the idle of the RESERVE shares other than the starter's;
- borrowing (rule 1): only an ENABLED LEND_AND_BORROW share borrows, within its cap and
  the lendable pool; `borrowed` says whether the start took the share over its limit;
- head-of-line (rule 2, v1.1): no job starts while a job of its share ordered before it
  (priority, submission, id) is RUNNABLE and not misconfigured. A pass victim keeps its
  place and blocks its share for the rest of its pass, so the spec leaves no exception;
- reclaim (rule 4) only for a start within the starter's own limit, and only of jobs of
  other shares over their limit when chosen; in-share victims (rule 3) of the same share
  and type with strictly lower priority; neither ever protected;
- victim sets are minimal and sufficient: they make room, and without any one of them
  the start (or the capacity change) would not fit;
- misconfiguration (rule 7) is judged once per instant, after actions and submissions
  (v1.1): a job fails for `runnable_time_limit` exactly when it has been judged
  misconfigured that long, and a job never ends RUNNABLE past its limit;
- `waiting_time` is the time spent RUNNABLE, counted for a job that never finishes to
  the last instant processed (v1.1: the last event or action);
- the end of each instant is a fixed point: no share's head could start within its limit
  or by borrowing, and `schedule` on a fresh snapshot of the state decides nothing (the
  simulator's incremental state agrees with the live scheduler's from-scratch one).

The settings are derandomised with no example database, so CI runs the same examples
every time, in bounded time.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from engine import (
    PendingJob,
    QueueSpec,
    RunningJob,
    ScenarioError,
    ShareSpec,
    Snapshot,
    dump_result,
    load_scenario,
    result_to_json,
    schedule,
    simulate,
)

TYPES = ("g", "h")
STRATEGIES = ("RESERVE", "LEND", "LEND_AND_BORROW")
WAITING_REASONS = {
    "WAITING_FOR_CAPACITY",
    "SHARE_LIMIT_REACHED",
    "BORROW_LIMIT_REACHED",
    "BLOCKED_BEHIND_HEAD",
}


def deterministic(examples: int):
    return settings(
        max_examples=examples,
        derandomize=True,
        database=None,
        deadline=None,
        print_blob=True,
        suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow],
    )


# -- scenarios ----------------------------------------------------------------------------


def _share(draw, index: int, types: list[str]) -> dict:
    strategy = draw(st.sampled_from(STRATEGIES + ("LEND_AND_BORROW",)))
    limited = draw(st.lists(st.sampled_from(types), min_size=1, max_size=2, unique=True))
    share = {
        "name": f"s{index}",
        "capacity_limits": {t: draw(st.integers(1, 4)) for t in limited},
        "strategy": strategy,
        "in_share_preemption": draw(st.booleans()),
        "state": draw(st.sampled_from(["ENABLED"] * 11 + ["DISABLED"])),
    }
    if strategy == "LEND_AND_BORROW":
        share["borrow_limit"] = draw(st.sampled_from([-1, -1, 0, 50, 100, 200]))
    return share


def _policy_action(draw, shares: list[dict], types: list[str], at: int) -> dict:
    if draw(st.booleans()):
        return {
            "at": at,
            "type": "set_capacity",
            "capacity": {t: draw(st.integers(1, 8)) for t in types},
        }
    share = draw(st.sampled_from(shares))
    change = {"at": at, "type": "update_share", "share": share["name"]}
    what = draw(st.sampled_from(["limits", "limits", "state", "strategy"]))
    if what == "limits":
        change["capacity_limits"] = {t: draw(st.integers(1, 5)) for t in share["capacity_limits"]}
    elif what == "state":
        change["state"] = draw(st.sampled_from(["ENABLED", "DISABLED"]))
    else:
        change["strategy"] = draw(st.sampled_from(STRATEGIES))
    return change


@st.composite
def scenarios(draw) -> dict:
    """Anything the format allows on a small scale: 1-2 types, 1-4 shares, up to 20 jobs,
    actions (some at one instant, some after every job ended)."""
    types = list(TYPES[: draw(st.integers(1, 2))])
    capacity = {t: draw(st.integers(2, 8)) for t in types}
    shares = [_share(draw, index, types) for index in range(draw(st.integers(1, 4)))]
    jobs = []
    for index in range(draw(st.integers(1, 20))):
        jobs.append(
            {
                "id": f"j{index}",
                "share": draw(st.sampled_from([s["name"] for s in shares])),
                "priority": draw(st.integers(0, 3)),
                "instance_type": draw(st.sampled_from(types)),
                "instances": draw(st.sampled_from([1, 1, 1, 2, 2, 3, 5])),
                "submit_at": draw(st.integers(0, 20)) * 10,
                "duration": draw(st.integers(1, 50)) * 10,
                "checkpoint_interval": draw(st.sampled_from([None, 7, 20, 45])),
                "restart_overhead": draw(st.sampled_from([0, 0, 5, 15])),
                "preemption_retries": draw(st.sampled_from([None, None, 0, 1, 2])),
                "protected_until": draw(st.sampled_from([None, None, 25, 70])),
            }
        )
    actions = []
    for _ in range(draw(st.integers(0, 4))):
        kind = draw(st.sampled_from(["set_priority", "policy", "policy", "terminate"]))
        at = draw(st.sampled_from([0, 10, 20, 30, 50, 90, 150, 400, 900, 2000]))
        if kind == "set_priority":
            job = draw(st.sampled_from(jobs))["id"]
            actions.append(
                {"at": at, "type": kind, "job": job, "priority": draw(st.integers(0, 3))}
            )
        elif kind == "terminate":
            job = draw(st.sampled_from(jobs))
            at = job["submit_at"] + draw(st.integers(1, 8)) * 5
            actions.append({"at": at, "type": kind, "job": job["id"]})
        else:
            actions.append(_policy_action(draw, shares, types, at))
            if draw(st.booleans()):
                # A second policy change at the same instant may undo the first's cure.
                actions.append(_policy_action(draw, shares, types, at))
    queue = {
        "capacity": capacity,
        "runnable_time_limit": draw(st.sampled_from([None, None, 40, 150])),
        "default_preemption_retries": draw(st.sampled_from([None, None, 1])),
    }
    return {"name": "random", "queue": queue, "shares": shares, "jobs": jobs, "actions": actions}


@st.composite
def contended(draw) -> dict:
    """Borrowers fill the queue early; lenders' and high-priority jobs arrive later, so
    reclaims, in-share preemptions and victims blocking their share are common."""
    shares = [
        {
            "name": "borrower",
            "capacity_limits": {"g": draw(st.integers(1, 3))},
            "strategy": "LEND_AND_BORROW",
            "borrow_limit": draw(st.sampled_from([-1, 100, 200])),
            "in_share_preemption": draw(st.booleans()),
        },
        {
            "name": "lender",
            "capacity_limits": {"g": draw(st.integers(1, 4))},
            "strategy": draw(st.sampled_from(["LEND", "LEND_AND_BORROW"])),
            "in_share_preemption": draw(st.booleans()),
        },
    ]
    if draw(st.booleans()):
        shares.append(
            {
                "name": "reserved",
                "capacity_limits": {"g": draw(st.integers(1, 2))},
                "strategy": "RESERVE",
                "in_share_preemption": draw(st.booleans()),
            }
        )
    draw(st.randoms()).shuffle(shares)
    total = sum(share["capacity_limits"]["g"] for share in shares)
    capacity = max(1, total + draw(st.integers(-2, 1)))
    jobs = []
    for index in range(draw(st.integers(2, 14))):
        share = draw(st.sampled_from(shares))["name"]
        early = share == "borrower"
        jobs.append(
            {
                "id": f"j{index}",
                "share": share,
                "priority": draw(st.integers(0, 3)),
                "instance_type": "g",
                "instances": draw(st.sampled_from([1, 1, 2, 3])),
                "submit_at": draw(st.integers(0, 3 if early else 12)) * 10,
                "duration": draw(st.integers(5 if early else 1, 40)) * 10,
                "checkpoint_interval": draw(st.sampled_from([None, 15, 40])),
                "restart_overhead": draw(st.sampled_from([0, 5])),
                "preemption_retries": draw(st.sampled_from([None, None, 0, 1])),
                "protected_until": draw(st.sampled_from([None, None, None, 50])),
            }
        )
    actions = []
    if draw(st.booleans()):
        job = draw(st.sampled_from(jobs))
        actions.append(
            {
                "at": draw(st.integers(0, 12)) * 10,
                "type": "set_priority",
                "job": job["id"],
                "priority": draw(st.integers(0, 5)),
            }
        )
    return {
        "name": "contended",
        "queue": {"capacity": {"g": capacity}},
        "shares": shares,
        "jobs": jobs,
        "actions": actions,
    }


# -- the oracle -----------------------------------------------------------------------------


@dataclass
class Oracle:
    capacity: dict
    shares: dict  # name -> share document (scenario format), as actions leave it
    order: list  # share names in listed order
    specs: dict  # job id -> job document
    time_limit: int | None
    default_retries: int | None
    priority: dict = field(default_factory=dict)
    running: dict = field(default_factory=dict)  # id -> (started_at, start_seq)
    pending: set = field(default_factory=set)
    preemptions: dict = field(default_factory=dict)
    since: dict = field(default_factory=dict)  # id -> when judged misconfigured
    runnable_from: dict = field(default_factory=dict)
    waited: dict = field(default_factory=dict)
    start_seq: int = 0

    # Quota arithmetic (spec, "Definitions"); `removed` are running jobs taken as stopped.

    def strategy(self, share):
        return self.shares[share]["strategy"]

    def limit(self, share, itype):
        return self.shares[share]["capacity_limits"].get(itype, 0)

    def usage(self, share, itype, removed=()):
        return sum(
            self.specs[j]["instances"]
            for j in self.running
            if j not in removed
            and self.specs[j]["share"] == share
            and self.specs[j]["instance_type"] == itype
        )

    def free(self, itype, removed=()):
        return self.capacity.get(itype, 0) - sum(self.usage(s, itype, removed) for s in self.order)

    def idle(self, share, itype, removed=()):
        return max(0, self.limit(share, itype) - self.usage(share, itype, removed))

    def over(self, share, itype, removed=()):
        return max(0, self.usage(share, itype, removed) - self.limit(share, itype))

    def held_for_others(self, share, itype, removed=()):
        """Idle capacity of the RESERVE shares other than `share`."""
        return sum(
            self.idle(r, itype, removed)
            for r in self.order
            if r != share and self.strategy(r) == "RESERVE"
        )

    def avail(self, share, itype, removed=()):
        return self.free(itype, removed) - self.held_for_others(share, itype, removed)

    def pool(self, itype, removed=()):
        lent = sum(
            self.idle(s, itype, removed) for s in self.order if self.strategy(s) != "RESERVE"
        )
        return lent - sum(self.over(s, itype, removed) for s in self.order)

    def cap(self, share, itype):
        percent = self.shares[share].get("borrow_limit", -1)
        return None if percent == -1 else self.limit(share, itype) * percent // 100

    def may_borrow(self, share):
        spec = self.shares[share]
        return spec["strategy"] == "LEND_AND_BORROW" and spec.get("state", "ENABLED") == "ENABLED"

    def can_borrow(self, share, itype, n, removed=()):
        """Rule 1, with the RESERVE shares' idle held (v1.1)."""
        if not self.may_borrow(share):
            return False
        cap = self.cap(share, itype)
        over_after = self.usage(share, itype, removed) + n - self.limit(share, itype)
        return (
            n <= self.avail(share, itype, removed)
            and n <= self.pool(itype, removed)
            and (cap is None or over_after <= cap)
        )

    def fits_own_limit(self, share, itype, n, removed=()):
        return self.usage(share, itype, removed) + n <= self.limit(share, itype)

    def can_start(self, share, itype, n, removed=()):
        entitled = self.fits_own_limit(share, itype, n, removed) and n <= self.avail(
            share, itype, removed
        )
        return entitled or self.can_borrow(share, itype, n, removed)

    def misconfiguration(self, job):
        """Rule 7, in its order, against the current policy."""
        spec = self.specs[job]
        share, itype, n = spec["share"], spec["instance_type"], spec["instances"]
        if n > self.capacity.get(itype, 0):
            return "SERVICE_ENVIRONMENT_MAX_RESOURCE"
        limit = self.limit(share, itype)
        if self.strategy(share) != "LEND_AND_BORROW":
            if n > limit:
                return "QUOTA_MANAGEMENT_LIMIT_EXCEEDED"
            return None
        cap = self.cap(share, itype)
        if cap is not None and n > limit + cap:
            return "QUOTA_MANAGEMENT_LIMIT_EXCEEDED"
        others = sum(
            self.limit(s, itype) for s in self.order if s != share and self.strategy(s) != "RESERVE"
        )
        if n > limit + others:
            return "BORROWABLE_CAPACITY_EXCEEDED"
        return None

    def queue_key(self, job):
        """Rule 2: priority (higher first), submission time, id."""
        return (-self.priority[job], self.specs[job]["submit_at"], job)

    def head(self, share):
        waiting = [
            j
            for j in self.pending
            if self.specs[j]["share"] == share and self.misconfiguration(j) is None
        ]
        return min(waiting, key=self.queue_key, default=None)

    def retries(self, job):
        own = self.specs[job]["preemption_retries"]
        return self.default_retries if own is None else own

    # Bookkeeping.

    def make_runnable(self, job, t):
        self.pending.add(job)
        self.runnable_from[job] = t

    def leave_runnable(self, job, t):
        self.pending.discard(job)
        self.waited[job] = self.waited.get(job, 0) + t - self.runnable_from.pop(job)
        self.since.pop(job, None)

    def snapshot(self) -> Snapshot:
        shares = tuple(
            ShareSpec(
                name=s["name"],
                capacity_limits=s["capacity_limits"],
                strategy=s["strategy"],
                borrow_limit=s.get("borrow_limit", -1),
                in_share_preemption=s["in_share_preemption"],
                enabled=s.get("state", "ENABLED") == "ENABLED",
            )
            for s in (self.shares[name] for name in self.order)
        )
        running = tuple(
            RunningJob(
                id=j,
                share=self.specs[j]["share"],
                priority=self.priority[j],
                instance_type=self.specs[j]["instance_type"],
                instances=self.specs[j]["instances"],
                started_at=started_at,
                start_seq=seq,
                protected_until=self.specs[j]["protected_until"],
                preemptions=self.preemptions.get(j, 0),
                preemption_retries=self.retries(j),
                submitted_at=self.specs[j]["submit_at"],
            )
            for j, (started_at, seq) in self.running.items()
        )
        pending = tuple(
            PendingJob(
                id=j,
                share=self.specs[j]["share"],
                priority=self.priority[j],
                instance_type=self.specs[j]["instance_type"],
                instances=self.specs[j]["instances"],
                submitted_at=self.specs[j]["submit_at"],
                preemptions=self.preemptions.get(j, 0),
                preemption_retries=self.retries(j),
                protected_until=self.specs[j]["protected_until"],
            )
            for j in sorted(self.pending)
        )
        return Snapshot(
            queue=QueueSpec(capacity=self.capacity), shares=shares, running=running, pending=pending
        )


def _apply_action(oracle: Oracle, action: dict) -> None:
    kind = action["type"]
    if kind == "set_priority":
        oracle.priority[action["job"]] = action["priority"]
    elif kind == "set_capacity":
        oracle.capacity = dict(action["capacity"])
    elif kind == "update_share":
        merged = {**oracle.shares[action["share"]]}
        merged.update({k: v for k, v in action.items() if k not in ("at", "type", "share")})
        if merged["strategy"] != "LEND_AND_BORROW" and "borrow_limit" not in action:
            merged.pop("borrow_limit", None)
        oracle.shares[action["share"]] = merged


def check_replay(document: dict, result: dict) -> dict:
    """Replay `result` on the oracle, asserting every invariant; return counts of what the
    scenario exercised (starts, borrowed starts, preemptions by cause, time-limit fails)."""
    queue = document["queue"]
    oracle = Oracle(
        capacity=dict(queue["capacity"]),
        shares={s["name"]: dict(s) for s in document["shares"]},
        order=[s["name"] for s in document["shares"]],
        specs={j["id"]: j for j in document["jobs"]},
        time_limit=queue.get("runnable_time_limit"),
        default_retries=queue.get("default_preemption_retries"),
    )
    oracle.priority = {j["id"]: j["priority"] for j in document["jobs"]}
    actions = sorted(enumerate(document.get("actions", [])), key=lambda a: (a[1]["at"], a[0]))
    events = result["events"]
    protection_ends = {j["protected_until"] for j in document["jobs"]} - {None}
    instants = sorted({e["t"] for e in events} | {a["at"] for _, a in actions} | protection_ends)
    seen: dict[str, int] = {}
    position = next_action = 0
    for t in instants:
        while next_action < len(actions) and actions[next_action][1]["at"] == t:
            # The finishes at t come before the actions but only release capacity, which
            # no check of an action's effects depends on.
            _apply_action(oracle, actions[next_action][1])
            next_action += 1
        group: list[dict] = []  # victims of the start about to come
        shrink: list[dict] = []  # victims of a capacity change
        while position < len(events) and events[position]["t"] == t:
            event = events[position]
            position += 1
            if shrink and event.get("cause") not in ("capacity_change", "retries_exhausted"):
                _check_capacity_victims(oracle, shrink, t)
            kind = event["type"] if event["type"] != "PREEMPTED" else event["cause"]
            seen[kind] = seen.get(kind, 0) + 1
            _check_event(oracle, event, group, shrink, t)
        if shrink:
            _check_capacity_victims(oracle, shrink, t)
        assert not group, f"t={t}: victims {group} made room for no start"
        _end_of_instant(oracle, t)
    end = max([events[-1]["t"] if events else 0, *(a["at"] for _, a in actions)])
    _check_outcomes(oracle, result, end)
    return seen


def _check_event(oracle: Oracle, event: dict, group: list, shrink: list, t: int) -> None:
    job = event["job"]
    spec = oracle.specs[job]
    share, itype, n = spec["share"], spec["instance_type"], spec["instances"]
    kind = event["type"]
    assert event["share"] == share
    if kind == "SUBMITTED":
        assert spec["submit_at"] == t
        oracle.make_runnable(job, t)
    elif kind == "STARTED":
        assert job in oracle.pending, f"t={t}: {job} starts but is not RUNNABLE"
        assert oracle.misconfiguration(job) is None, f"t={t}: misconfigured {job} starts"
        _check_start(oracle, job, share, itype, n, group, t, event["borrowed"])
        group.clear()
        oracle.leave_runnable(job, t)
        oracle.running[job] = (t, oracle.start_seq)
        oracle.start_seq += 1
    elif kind == "PREEMPTED":
        assert job in oracle.running, f"t={t}: {job} preempted but not running"
        victim = {**event, "was_over": oracle.over(share, itype) > 0}
        (shrink if event["cause"] == "capacity_change" else group).append(victim)
        del oracle.running[job]
        oracle.preemptions[job] = oracle.preemptions.get(job, 0) + 1
        oracle.make_runnable(job, t)
    elif kind == "SUCCEEDED":
        assert job in oracle.running, f"t={t}: {job} succeeds but is not running"
        del oracle.running[job]
    else:
        _check_failure(oracle, event, t)


def _check_failure(oracle: Oracle, event: dict, t: int) -> None:
    job, cause = event["job"], event["cause"]
    if cause == "share_disabled":
        assert oracle.specs[job]["submit_at"] == t
        assert oracle.shares[event["share"]].get("state") == "DISABLED"
    elif cause == "retries_exhausted":
        retries = oracle.retries(job)
        assert retries is not None and oracle.preemptions[job] == retries + 1
    elif cause == "time_limit":
        assert job in oracle.pending
        assert oracle.misconfiguration(job) is not None, f"t={t}: {job} failed while fit"
        since = oracle.since.get(job)
        assert since is not None and since + oracle.time_limit == t, (
            f"t={t}: {job} failed for the time limit, misconfigured since {since}"
        )
    else:
        assert cause == "terminated"
    if job in oracle.running:
        assert cause == "terminated"
        del oracle.running[job]
    else:
        oracle.leave_runnable(job, t)


def _check_start(oracle, job, share, itype, n, group, t, borrowed) -> None:
    assert n <= oracle.free(itype), f"t={t}: {job} starts beyond capacity"
    usage, limit = oracle.usage(share, itype), oracle.limit(share, itype)
    assert borrowed == (usage + n > limit), f"t={t}: {job} borrowed flag"
    held = oracle.held_for_others(share, itype)
    assert oracle.free(itype) - n >= held, f"t={t}: {job} takes RESERVE shares' idle capacity"
    if borrowed:
        assert oracle.may_borrow(share), f"t={t}: {job} borrows for a share that may not"
        cap = oracle.cap(share, itype)
        assert cap is None or usage + n - limit <= cap, f"t={t}: {job} borrows past the cap"
        assert n <= oracle.pool(itype), f"t={t}: {job} borrows more than the lendable pool"
    before = [
        other
        for other in oracle.pending
        if other != job
        and oracle.specs[other]["share"] == share
        and oracle.misconfiguration(other) is None
        and oracle.queue_key(other) < oracle.queue_key(job)
    ]
    assert not before, f"t={t}: {job} starts ahead of {sorted(before)} of its share"
    if group:
        victims = [v["job"] for v in group]
        causes = {v["cause"] for v in group}
        assert len(causes) == 1 and all(v["by"] == job for v in group)
        # The victims are already off the oracle's books: put them back to judge the set.
        for victim in victims:
            oracle.running[victim] = (None, None)
        try:
            _check_victims(oracle, job, share, itype, n, group, causes.pop(), t)
        finally:
            for victim in victims:
                del oracle.running[victim]


def _check_victims(oracle, job, share, itype, n, group, cause, t) -> None:
    victims = [v["job"] for v in group]
    for victim in victims:
        vspec = oracle.specs[victim]
        assert vspec["instance_type"] == itype
        protected = vspec["protected_until"]
        assert protected is None or t >= protected, f"t={t}: protected {victim} preempted"
    if cause == "reclaim":
        assert oracle.fits_own_limit(share, itype, n, victims), "reclaim for a borrower"
        for v in group:
            assert oracle.specs[v["job"]]["share"] != share
            assert v["was_over"], f"t={t}: reclaimed {v['job']} of a share within its limit"

        def met(removed):
            return n <= oracle.avail(share, itype, removed)
    else:
        assert cause == "priority"
        for victim in victims:
            assert oracle.specs[victim]["share"] == share
            assert oracle.priority[victim] < oracle.priority[job], "in-share victim not lower"
        assert not oracle.can_start(share, itype, n), f"t={t}: {job} preempted needlessly"

        def met(removed):
            return oracle.can_start(share, itype, n, removed)

    assert met(victims), f"t={t}: victims {victims} do not make room for {job}"
    for victim in victims:
        rest = [v for v in victims if v != victim]
        assert not met(rest), f"t={t}: {victim} could have been spared for {job}"


def _check_capacity_victims(oracle: Oracle, shrink: list, t: int) -> None:
    """A capacity change's victims bring usage within capacity, and each was needed."""
    for event in shrink:
        spec = oracle.specs[event["job"]]
        assert event["by"] is None
        itype = spec["instance_type"]
        assert oracle.free(itype) >= 0
        assert oracle.free(itype) - spec["instances"] < 0, f"t={t}: {event['job']} not needed"
    shrink.clear()


def _end_of_instant(oracle: Oracle, t: int) -> None:
    for itype in set(oracle.capacity) | {s["instance_type"] for s in oracle.specs.values()}:
        assert oracle.free(itype) >= 0, f"t={t}: {itype} over capacity"
    # Judge misconfiguration (nothing a pass does changes it, so the end of the instant
    # judges what the spec judges after actions and submissions).
    for job in oracle.pending:
        if oracle.misconfiguration(job) is None:
            oracle.since.pop(job, None)
        else:
            since = oracle.since.setdefault(job, t)
            limit = oracle.time_limit
            assert limit is None or since + limit > t, f"t={t}: {job} outlived its time limit"
    for share in oracle.order:
        head = oracle.head(share)
        if head is not None:
            spec = oracle.specs[head]
            assert not oracle.can_start(share, spec["instance_type"], spec["instances"]), (
                f"t={t}: {share}'s head {head} could still start"
            )
    decisions = schedule(oracle.snapshot(), t).decisions
    assert decisions == (), f"t={t}: not a fixed point: {decisions}"


def _check_outcomes(oracle: Oracle, result: dict, end: int) -> None:
    for job in list(oracle.pending):
        oracle.leave_runnable(job, end)
    for job_id, outcome in result["jobs"].items():
        assert outcome["waiting_time"] == oracle.waited.get(job_id, 0), f"{job_id} waiting"
        assert outcome["preemptions"] == oracle.preemptions.get(job_id, 0)
        state = outcome["state"]
        if state == "RUNNABLE":
            reason = oracle.misconfiguration(job_id)
            if reason is not None:
                assert outcome["reason"] == reason, f"{job_id} reason"
            else:
                assert outcome["reason"] in WAITING_REASONS, f"{job_id} reason"
        else:
            assert state in ("SUCCEEDED", "FAILED")
        interval = oracle.specs[job_id]["checkpoint_interval"]
        if outcome["preemptions"] == 0:
            assert outcome["lost_work"] == 0
        elif interval is not None:
            assert outcome["lost_work"] < outcome["preemptions"] * interval
    assert not oracle.running, f"jobs {sorted(oracle.running)} never end"


def _replay_checked(document: dict) -> dict:
    result = simulate(load_scenario(copy.deepcopy(document)))
    return check_replay(document, result_to_json(result))


@pytest.mark.slow
@deterministic(250)
@given(scenarios())
def test_random_scenarios_keep_every_invariant(document):
    try:
        scenario = load_scenario(copy.deepcopy(document))
    except ScenarioError:
        assume(False)
    result = simulate(scenario)
    check_replay(document, result_to_json(result))
    again = simulate(load_scenario(copy.deepcopy(document)))
    assert dump_result(again) == dump_result(result)


@pytest.mark.slow
@deterministic(250)
@given(contended())
def test_contended_scenarios_keep_every_invariant(document):
    _replay_checked(document)
