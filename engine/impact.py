"""Impact preview: what a proposed policy change does to the current jobs, now.

An admin editing a share or the queue's capacity sees, before saving, which running jobs
become reclaimable (or stop being), how much each share can borrow, whether the limits
outgrow the capacity, which jobs a pass would preempt or start right away, and which
waiting jobs become misconfigured or are cured. Everything is computed with the
engine's own quota math and pass on the current and the proposed policy, and reported
as differences between the two.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, replace

from .board import board_from_snapshot
from .quota import Policy
from .scheduling import schedule
from .types import (
    BORROWABLE_CAPACITY_EXCEEDED,
    QUOTA_MANAGEMENT_LIMIT_EXCEEDED,
    SERVICE_ENVIRONMENT_MAX_RESOURCE,
    Fail,
    PendingJob,
    Preempt,
    RunningJob,
    ShareSpec,
    Snapshot,
    Start,
)
from .victims import reclaimable

# Impacts are listed in this order of kinds, then by share (listed order), then type.
KINDS = (
    "would_preempt",
    "would_fail",
    "would_start",
    "becomes_reclaimable",
    "no_longer_reclaimable",
    "becomes_misconfigured",
    "cured",
    "borrow_capacity",
    "limits_exceed_capacity",
    "no_effect",
)

_WHY_MISCONFIGURED = {
    SERVICE_ENVIRONMENT_MAX_RESOURCE: "need more {type} than the queue has",
    QUOTA_MANAGEMENT_LIMIT_EXCEEDED: "need more {type} than the share's quota allows",
    BORROWABLE_CAPACITY_EXCEEDED: "need more {type} than the share could ever borrow",
}
_WHY_PREEMPTED = {
    "reclaim": "to give back borrowed capacity to shares within their limits",
    "priority": "for higher-priority jobs of the same share",
    "capacity_change": "because the queue's capacity would be below what is running",
}


@dataclass(frozen=True)
class Impact:
    """One consequence of a policy change. `share` is the share's name (None for the
    queue as a whole); `jobs` the ids of the jobs concerned; `text` plain English."""

    kind: str
    share: str | None
    instance_type: str | None
    count: int
    jobs: tuple[str, ...]
    text: str


def _jobs_phrase(count: int, adjective: str) -> str:
    return f"{count} {adjective} job" + ("" if count == 1 else "s")


def _limit_change(old: ShareSpec | None, new: ShareSpec, itype: str) -> str:
    before = old.capacity_limits.get(itype, 0) if old is not None else 0
    after = new.capacity_limits.get(itype, 0)
    if after < before:
        return f"lowering {itype} from {before} to {after}"
    if after > before:
        return f"raising {itype} from {before} to {after}"
    return "this change"


def _latest_time(snapshot: Snapshot) -> int:
    times = [job.started_at for job in snapshot.running]
    times += [job.submitted_at for job in snapshot.pending]
    return max(times, default=0)


def assess_policy_change(
    snapshot: Snapshot,
    *,
    shares: Sequence[ShareSpec] | None = None,
    capacity: Mapping[str, int] | None = None,
    now: int | None = None,
) -> tuple[Impact, ...]:
    """Compare the snapshot's policy with the proposed shares and/or capacity.

    `shares` is the whole proposed list (matched by name; a new name is a new share).
    `now` defaults to the latest start or submission in the snapshot; it decides which
    jobs are still protected and which misconfigured jobs are overdue. Raises ValueError
    when the proposal drops a share that still has jobs.
    """
    if now is None:
        now = _latest_time(snapshot)
    proposed_queue = (
        snapshot.queue if capacity is None else replace(snapshot.queue, capacity=capacity)
    )
    proposed = Snapshot(
        queue=proposed_queue,
        shares=tuple(snapshot.shares if shares is None else shares),
        running=snapshot.running,
        pending=snapshot.pending,
    )
    names = {share.name for share in proposed.shares}
    for job in (*snapshot.running, *snapshot.pending):
        if job.share not in names:
            raise ValueError(f"share '{job.share}' still has jobs and cannot be removed")

    impacts: list[Impact] = []
    impacts += _decision_impacts(snapshot, proposed, now)
    impacts += _reclaimable_impacts(snapshot, proposed, now)
    impacts += _misconfiguration_impacts(snapshot, proposed)
    impacts += _borrow_impacts(snapshot, proposed)
    impacts += _capacity_impacts(snapshot, proposed)
    if not impacts:
        impacts.append(
            Impact(
                kind="no_effect",
                share=None,
                instance_type=None,
                count=0,
                jobs=(),
                text="this change affects no current job and no share's borrowing",
            )
        )
    share_order = {share.name: i for i, share in enumerate(proposed.shares)}
    impacts.sort(
        key=lambda impact: (
            KINDS.index(impact.kind),
            share_order.get(impact.share, -1),
            impact.instance_type or "",
        )
    )
    return tuple(impacts)


Decision = Start | Preempt | Fail


def decision_changes(
    current: Snapshot, proposed: Snapshot, now: int
) -> tuple[tuple[Decision, ...], tuple[Decision, ...]]:
    """(made, dropped): the decisions a pass at `now` would make on `proposed` and not on
    `current`, and those it would make on `current` and no longer on `proposed`, each in
    the order the pass makes them."""
    before = schedule(current, now).decisions
    after = schedule(proposed, now).decisions
    before_set, after_set = set(before), set(after)
    made = tuple(decision for decision in after if decision not in before_set)
    dropped = tuple(decision for decision in before if decision not in after_set)
    return made, dropped


def assess_job_change(
    snapshot: Snapshot,
    change: Callable[[RunningJob | PendingJob], RunningJob | PendingJob],
    jobs: Collection[str],
    now: int,
) -> tuple[tuple[Decision, ...], tuple[Decision, ...]]:
    """What changing some jobs (a priority raise, a protection) does to a pass now:
    `decision_changes` between the snapshot and the snapshot with `change` applied to
    the jobs whose ids are in `jobs`."""
    proposed = replace(
        snapshot,
        running=tuple(change(job) if job.id in jobs else job for job in snapshot.running),
        pending=tuple(change(job) if job.id in jobs else job for job in snapshot.pending),
    )
    return decision_changes(snapshot, proposed, now)


def _job_info(snapshot: Snapshot) -> dict[str, tuple[str, str]]:
    return {
        job.id: (job.share, job.instance_type) for job in (*snapshot.running, *snapshot.pending)
    }


def _decision_impacts(current: Snapshot, proposed: Snapshot, now: int) -> list[Impact]:
    """Decisions a pass would make now under the proposal and not under the current policy."""
    made, _ = decision_changes(current, proposed, now)
    info = _job_info(current)
    groups: dict[tuple, list[str]] = {}
    for decision in made:
        share, itype = info[decision.job]
        if isinstance(decision, Preempt):
            key = ("would_preempt", share, itype, decision.cause)
        elif isinstance(decision, Start):
            key = ("would_start", share, itype, None)
        else:
            key = ("would_fail", share, itype, decision.cause)
        jobs = groups.setdefault(key, [])
        if decision.job not in jobs:
            jobs.append(decision.job)
    impacts = []
    for (kind, share, itype, cause), jobs in groups.items():
        count = len(jobs)
        if kind == "would_preempt":
            text = (
                f"{_jobs_phrase(count, 'running')} of share {share} would be stopped now "
                f"{_WHY_PREEMPTED[cause]}"
            )
        elif kind == "would_start":
            text = f"{_jobs_phrase(count, 'waiting')} of share {share} would start now"
        else:
            text = (
                f"{_jobs_phrase(count, 'waiting')} of share {share} would fail now: "
                "misconfigured for longer than the queue allows"
            )
        impacts.append(Impact(kind, share, itype, count, tuple(jobs), text))
    return impacts


def _reclaimable_impacts(current: Snapshot, proposed: Snapshot, now: int) -> list[Impact]:
    old_board, _ = board_from_snapshot(current)
    new_board, _ = board_from_snapshot(proposed)
    old_specs = {share.name: share for share in current.shares}
    impacts = []
    for rule in new_board.policy.shares:
        old_rule = old_board.policy.by_name.get(rule.name)
        for itype in new_board.policy.types:
            exposed = {job.id for job in reclaimable(new_board, rule, itype, now)}
            was = (
                {job.id for job in reclaimable(old_board, old_rule, itype, now)}
                if old_rule is not None
                else set()
            )
            cause = _limit_change(old_specs.get(rule.name), rule.spec, itype)
            newly = sorted(exposed - was)
            if newly:
                impacts.append(
                    Impact(
                        "becomes_reclaimable",
                        rule.name,
                        itype,
                        len(newly),
                        tuple(newly),
                        f"{cause} makes {_jobs_phrase(len(newly), 'running')} of share "
                        f"{rule.name} reclaimable: other shares can take their "
                        f"{itype} back at any time",
                    )
                )
            safe = sorted(was - exposed)
            if safe:
                impacts.append(
                    Impact(
                        "no_longer_reclaimable",
                        rule.name,
                        itype,
                        len(safe),
                        tuple(safe),
                        f"{cause} means {_jobs_phrase(len(safe), 'running')} of share "
                        f"{rule.name} can no longer be reclaimed",
                    )
                )
    return impacts


def _misconfiguration_impacts(current: Snapshot, proposed: Snapshot) -> list[Impact]:
    old_policy = Policy(current.queue, current.shares)
    new_policy = Policy(proposed.queue, proposed.shares)
    groups: dict[tuple, list[str]] = {}
    for job in current.pending:
        old_rule = old_policy.by_name[job.share]
        new_rule = new_policy.by_name[job.share]
        before = old_policy.misconfiguration(old_rule.index, job.instance_type, job.instances)
        after = new_policy.misconfiguration(new_rule.index, job.instance_type, job.instances)
        if before == after:
            continue
        if after is not None:
            key = ("becomes_misconfigured", job.share, job.instance_type, after)
        else:
            key = ("cured", job.share, job.instance_type, before)
        groups.setdefault(key, []).append(job.id)
    impacts = []
    for (kind, share, itype, reason), jobs in groups.items():
        count = len(jobs)
        if kind == "becomes_misconfigured":
            text = (
                f"{_jobs_phrase(count, 'waiting')} of share {share} could never start "
                f"({reason}): they " + _WHY_MISCONFIGURED[reason].format(type=itype)
            )
        else:
            text = (
                f"{_jobs_phrase(count, 'waiting')} of share {share} that could never start "
                f"({reason}) become schedulable"
            )
        impacts.append(Impact(kind, share, itype, count, tuple(sorted(jobs)), text))
    return impacts


def _borrow_impacts(current: Snapshot, proposed: Snapshot) -> list[Impact]:
    old_policy = Policy(current.queue, current.shares)
    new_policy = Policy(proposed.queue, proposed.shares)
    impacts = []
    for rule in new_policy.shares:
        old_rule = old_policy.by_name.get(rule.name)
        for itype in sorted(proposed.queue.capacity):
            after = new_policy.borrow_ceiling(rule.index, itype)
            before = old_policy.borrow_ceiling(old_rule.index, itype) if old_rule is not None else 0
            if after == before:
                continue
            change = after - before
            direction = "more" if change > 0 else "fewer"
            impacts.append(
                Impact(
                    "borrow_capacity",
                    rule.name,
                    itype,
                    abs(change),
                    (),
                    f"share {rule.name} can borrow {abs(change)} {direction} {itype} "
                    f"(at most {after} beyond its limit)",
                )
            )
    return impacts


def _capacity_impacts(current: Snapshot, proposed: Snapshot) -> list[Impact]:
    old_policy = Policy(current.queue, current.shares)
    new_policy = Policy(proposed.queue, proposed.shares)
    impacts = []
    for itype in sorted(proposed.queue.capacity):
        total = new_policy.limit_sum(itype)
        capacity = proposed.queue.capacity[itype]
        if total <= capacity:
            continue
        if (old_policy.limit_sum(itype), current.queue.capacity.get(itype, 0)) == (
            total,
            capacity,
        ):
            continue
        impacts.append(
            Impact(
                "limits_exceed_capacity",
                None,
                itype,
                total - capacity,
                (),
                f"the queue's limits now add up to {total} of {capacity} {itype}: "
                "shares cannot all use their full limits at once",
            )
        )
    return impacts
