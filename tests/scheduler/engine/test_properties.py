"""Property-based tests: random scenarios, invariants checked after every event.

The oracle below replays a result's events on its own model of the queue (usage per
share and type, the policy as the actions change it) and checks each start and
preemption against the rules of the spec, written out again here independently of the
engine's quota module. After every instant it also asks `schedule` (built fresh from a
snapshot of the oracle's state) whether anything could still start: the simulator's
incremental state must have reached the same fixed point.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from scheduler.engine import (
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
END_REASONS = {
    "SERVICE_ENVIRONMENT_MAX_RESOURCE",
    "QUOTA_MANAGEMENT_LIMIT_EXCEEDED",
    "BORROWABLE_CAPACITY_EXCEEDED",
    "WAITING_FOR_CAPACITY",
    "SHARE_LIMIT_REACHED",
    "BORROW_LIMIT_REACHED",
    "BLOCKED_BEHIND_HEAD",
}


@st.composite
def scenarios(draw) -> dict:
    types = list(TYPES[: draw(st.integers(1, 2))])
    capacity = {t: draw(st.integers(2, 8)) for t in types}
    shares = []
    for index in range(draw(st.integers(1, 4))):
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
        shares.append(share)
    jobs = []
    for index in range(draw(st.integers(1, 20))):
        job = {
            "id": f"j{index}",
            "share": draw(st.sampled_from([s["name"] for s in shares])),
            "priority": draw(st.integers(0, 3)),
            "instance_type": draw(st.sampled_from(types)),
            "instances": draw(st.sampled_from([1, 1, 1, 2, 2, 3])),
            "submit_at": draw(st.integers(0, 20)) * 10,
            "duration": draw(st.integers(1, 50)) * 10,
            "checkpoint_interval": draw(st.sampled_from([None, 7, 20, 45])),
            "restart_overhead": draw(st.sampled_from([0, 0, 5, 15])),
            "preemption_retries": draw(st.sampled_from([None, None, 0, 1, 2])),
            "protected_until": draw(st.sampled_from([None, None, 25, 70])),
        }
        jobs.append(job)
    actions = []
    for _ in range(draw(st.integers(0, 3))):
        kind = draw(st.sampled_from(["set_priority", "update_share", "set_capacity", "terminate"]))
        at = draw(st.integers(0, 9)) * 10
        if kind == "set_priority":
            actions.append(
                {
                    "at": at,
                    "type": kind,
                    "job": draw(st.sampled_from(jobs))["id"],
                    "priority": draw(st.integers(0, 3)),
                }
            )
        elif kind == "terminate":
            job = draw(st.sampled_from(jobs))
            actions.append(
                {
                    "at": job["submit_at"] + draw(st.integers(1, 8)) * 5,
                    "type": kind,
                    "job": job["id"],
                }
            )
        elif kind == "update_share":
            share = draw(st.sampled_from(shares))
            change = {"at": at, "type": kind, "share": share["name"]}
            what = draw(st.sampled_from(["limits", "state", "strategy"]))
            if what == "limits":
                change["capacity_limits"] = {
                    t: draw(st.integers(1, 5)) for t in share["capacity_limits"]
                }
            elif what == "state":
                change["state"] = draw(st.sampled_from(["ENABLED", "DISABLED"]))
            else:
                change["strategy"] = draw(st.sampled_from(STRATEGIES))
            actions.append(change)
        elif all(a["at"] != at for a in actions if a["type"] == "set_capacity"):
            # One capacity change per instant, so each change's victims can be told apart.
            actions.append(
                {"at": at, "type": kind, "capacity": {t: draw(st.integers(1, 8)) for t in types}}
            )
    queue = {
        "capacity": capacity,
        "runnable_time_limit": draw(st.sampled_from([None, None, None, 40, 150])),
        "default_preemption_retries": draw(st.sampled_from([None, None, 1])),
    }
    return {"name": "random", "queue": queue, "shares": shares, "jobs": jobs, "actions": actions}


@st.composite
def contended(draw) -> dict:
    """Borrowers fill the queue early; lenders' and high-priority jobs arrive later, so
    reclaims and in-share preemptions are common."""
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
    total = sum(share["capacity_limits"]["g"] for share in shares)
    capacity = max(1, total + draw(st.integers(-1, 1)))
    jobs = []
    for index in range(draw(st.integers(2, 12))):
        share = draw(st.sampled_from(shares))["name"]
        early = share == "borrower"
        jobs.append(
            {
                "id": f"j{index}",
                "share": share,
                "priority": draw(st.integers(0, 3)),
                "instance_type": "g",
                "instances": draw(st.sampled_from([1, 1, 2])),
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


# -- the oracle -------------------------------------------------------------------------


@dataclass
class Oracle:
    capacity: dict
    shares: dict  # name -> share dict (scenario format)
    order: list  # share names in listed order
    specs: dict  # job id -> job dict
    priority: dict = field(default_factory=dict)
    running: dict = field(default_factory=dict)  # id -> (started_at, start_seq)
    pending: dict = field(default_factory=dict)  # id -> preemptions
    preemptions: dict = field(default_factory=dict)
    start_seq: int = 0

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

    def avail(self, share, itype, removed=()):
        held = sum(
            self.idle(r, itype, removed)
            for r in self.order
            if r != share and self.shares[r]["strategy"] == "RESERVE"
        )
        return self.free(itype, removed) - held

    def pool(self, itype, removed=()):
        lent = sum(
            self.idle(s, itype, removed)
            for s in self.order
            if self.shares[s]["strategy"] != "RESERVE"
        )
        return lent - sum(self.over(s, itype, removed) for s in self.order)

    def cap(self, share, itype):
        percent = self.shares[share].get("borrow_limit", -1)
        return None if percent == -1 else self.limit(share, itype) * percent // 100

    def can_borrow(self, share, itype, n, removed=()):
        spec = self.shares[share]
        if spec["strategy"] != "LEND_AND_BORROW" or spec.get("state", "ENABLED") != "ENABLED":
            return False
        over_after = self.usage(share, itype, removed) + n - self.limit(share, itype)
        cap = self.cap(share, itype)
        return (
            n <= self.avail(share, itype, removed)
            and n <= self.pool(itype, removed)
            and (cap is None or over_after <= cap)
        )

    def fits_own_limit(self, share, itype, n, removed=()):
        return self.usage(share, itype, removed) + n <= self.limit(share, itype)

    def can_start(self, share, itype, n, removed=()):
        within = self.fits_own_limit(share, itype, n, removed) and n <= self.avail(
            share, itype, removed
        )
        return within or self.can_borrow(share, itype, n, removed)

    def snapshot(self, queue: dict) -> Snapshot:
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
                preemption_retries=self.retries(j, queue),
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
                preemption_retries=self.retries(j, queue),
                protected_until=self.specs[j]["protected_until"],
            )
            for j in self.pending
        )
        return Snapshot(
            queue=QueueSpec(capacity=self.capacity, runnable_time_limit=None),
            shares=shares,
            running=running,
            pending=pending,
        )

    def retries(self, job, queue):
        own = self.specs[job]["preemption_retries"]
        return queue.get("default_preemption_retries") if own is None else own


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


def check_replay(document: dict, result: dict) -> None:
    """Replay `result` on the oracle and assert every invariant of the issue."""
    queue = document["queue"]
    oracle = Oracle(
        capacity=dict(queue["capacity"]),
        shares={s["name"]: dict(s) for s in document["shares"]},
        order=[s["name"] for s in document["shares"]],
        specs={j["id"]: j for j in document["jobs"]},
    )
    oracle.priority = {j["id"]: j["priority"] for j in document["jobs"]}
    actions = sorted(enumerate(document.get("actions", [])), key=lambda a: (a[1]["at"], a[0]))
    events = result["events"]
    instants = sorted(
        {e["t"] for e in events}
        | {a["at"] for _, a in actions}
        | {j["protected_until"] for j in document["jobs"] if j["protected_until"] is not None}
    )
    position = 0
    next_action = 0
    for t in instants:
        while next_action < len(actions) and actions[next_action][1]["at"] <= t:
            # Policy changes at t apply before the instant's passes; finishes at t come
            # first but only release capacity, which no check below depends on.
            _apply_action(oracle, actions[next_action][1])
            next_action += 1
        group: list[dict] = []  # victims of the start about to come
        shrink: list[dict] = []  # victims of a capacity change
        while position < len(events) and events[position]["t"] == t:
            event = events[position]
            position += 1
            if shrink and event.get("cause") not in ("capacity_change", "retries_exhausted"):
                _check_capacity_victims(oracle, shrink, t)
            _check_event(oracle, event, group, shrink, t)
        if shrink:
            _check_capacity_victims(oracle, shrink, t)
        for itype in oracle.capacity:
            assert oracle.free(itype) >= 0, f"t={t}: {itype} over capacity"
        decisions = schedule(oracle.snapshot(queue), t).decisions
        assert decisions == (), f"t={t}: not a fixed point: {decisions}"
    for job_id, outcome in result["jobs"].items():
        assert outcome["state"] in ("SUCCEEDED", "FAILED", "RUNNABLE")
        if outcome["state"] == "RUNNABLE":
            assert outcome["reason"] in END_REASONS
        interval = oracle.specs[job_id]["checkpoint_interval"]
        if outcome["preemptions"] == 0:
            assert outcome["lost_work"] == 0
        elif interval is not None:
            assert outcome["lost_work"] < outcome["preemptions"] * interval


def _check_event(oracle: Oracle, event: dict, group: list, shrink: list, t: int) -> None:
    job = event["job"]
    spec = oracle.specs[job]
    share, itype, n = spec["share"], spec["instance_type"], spec["instances"]
    kind = event["type"]
    if kind == "SUBMITTED":
        if oracle.shares[share].get("state", "ENABLED") == "ENABLED":
            oracle.pending[job] = 0
    elif kind == "STARTED":
        _check_start(oracle, job, share, itype, n, group, t, event["borrowed"])
        group.clear()
        oracle.pending.pop(job)
        oracle.running[job] = (t, oracle.start_seq)
        oracle.start_seq += 1
    elif kind == "PREEMPTED":
        victim_was_over = oracle.over(share, itype) > 0
        if event["cause"] == "capacity_change":
            shrink.append(event)
        else:
            group.append({**event, "was_over": victim_was_over})
        oracle.running.pop(job)
        oracle.preemptions[job] = oracle.preemptions.get(job, 0) + 1
        oracle.pending[job] = oracle.preemptions[job]
    elif kind in ("SUCCEEDED", "FAILED"):
        oracle.running.pop(job, None)
        oracle.pending.pop(job, None)


def _check_capacity_victims(oracle: Oracle, shrink: list, t: int) -> None:
    """The victims of a capacity change bring usage within capacity, and each was needed."""
    for event in shrink:
        spec = oracle.specs[event["job"]]
        assert event["by"] is None
        itype = spec["instance_type"]
        assert oracle.free(itype) >= 0
        assert oracle.free(itype) - spec["instances"] < 0, f"t={t}: {event['job']} not needed"
    shrink.clear()


def _check_start(oracle, job, share, itype, n, group, t, borrowed) -> None:
    assert n <= oracle.free(itype), f"t={t}: {job} starts beyond capacity"
    usage = oracle.usage(share, itype)
    limit = oracle.limit(share, itype)
    assert borrowed == (usage + n > limit)
    strategy = oracle.shares[share]["strategy"]
    if strategy != "LEND_AND_BORROW":
        assert usage + n <= limit, f"t={t}: {strategy} share {share} starts {job} beyond its limit"
    cap = oracle.cap(share, itype)
    if cap is not None and usage + n > limit:
        assert usage + n - limit <= cap, f"t={t}: {job} borrows past the cap"
    limits_fit = sum(oracle.limit(s, itype) for s in oracle.order) <= oracle.capacity.get(itype, 0)
    held_before = oracle.free(itype) >= sum(
        oracle.idle(r, itype) for r in oracle.order if oracle.shares[r]["strategy"] == "RESERVE"
    )
    if group:
        victims = [v["job"] for v in group]
        causes = {v["cause"] for v in group}
        assert len(causes) == 1 and all(v["by"] == job for v in group)
        # The victims are already off the oracle's books: `removed` reconstructs before.
        for victim in victims:
            oracle.running[victim] = (None, None)
        try:
            _check_victims(oracle, job, share, itype, n, group, causes.pop(), t)
        finally:
            for victim in victims:
                del oracle.running[victim]
    if limits_fit and held_before:
        oracle.running[job] = (t, -1)
        try:
            held = sum(
                oracle.idle(r, itype)
                for r in oracle.order
                if oracle.shares[r]["strategy"] == "RESERVE"
            )
            assert oracle.free(itype) >= held, f"t={t}: {job} takes reserved idle capacity"
        finally:
            del oracle.running[job]


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

        def met(removed):
            return oracle.can_start(share, itype, n, removed)

    assert met(victims), f"t={t}: victims {victims} do not make room for {job}"
    for victim in victims:
        rest = [v for v in victims if v != victim]
        assert not met(rest), f"t={t}: {victim} could have been spared for {job}"


@settings(
    max_examples=250,
    deadline=None,
    suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow],
)
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


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(contended())
def test_contended_scenarios_keep_every_invariant(document):
    result = simulate(load_scenario(copy.deepcopy(document)))
    check_replay(document, result_to_json(result))
