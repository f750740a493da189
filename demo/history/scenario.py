"""Any scenario's history (manage.py load_history): simulate it and write its result as
the history of a queue, with a policy record that says what its policy was meanwhile."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field

from django.db import transaction
from django.utils import timezone

from demo.history.load import (
    job_tables_analyze,
    queue_for_scenario,
    result_load,
    share_for_scenario,
)
from engine import simulate
from engine.types import Scenario, SetCapacity, UpdateShare
from fleet.locks import lock_queues_named
from fleet.models import Job, JobQueue, QuotaShare
from governance.models import PolicyChange

LOAD_REASON = "Recorded history loaded from scenario {name!r} (load_history)"


class HistoryLoadError(ValueError):
    """A history that cannot be loaded; `field` names what to change."""

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        super().__init__(f"{field}: {message}")


@dataclass
class HistoryLoadSummary:
    queue: str = ""
    created_queue: bool = False
    created_shares: list[str] = field(default_factory=list)
    origin: dt.datetime | None = None
    end: dt.datetime | None = None
    jobs: int = 0
    events: int = 0
    never_finished: int = 0
    policy_changes: int = 0
    months: list[dt.date] = field(default_factory=list)


def _share_spec_document(spec, team_name: str) -> dict:
    strategy = str(getattr(spec.strategy, "value", spec.strategy))
    doc = {
        "name": spec.name,
        "team": team_name,
        "strategy": strategy,
        "in_share_preemption": spec.in_share_preemption,
        "state": QuotaShare.State.ENABLED if spec.enabled else QuotaShare.State.DISABLED,
        "capacity_limits": dict(sorted(spec.capacity_limits.items())),
    }
    if strategy == QuotaShare.Strategy.LEND_AND_BORROW:
        doc["borrow_limit"] = spec.borrow_limit
    return doc


def _same_policy(a: dict, b: dict, keys: tuple[str, ...]) -> bool:
    return all(a.get(key) == b.get(key) for key in keys)


SHARE_KEYS = ("strategy", "capacity_limits", "borrow_limit", "state", "in_share_preemption")


def history_load(
    *,
    scenario: Scenario,
    queue_name: str,
    start: dt.datetime,
    name_prefix: str,
    gpus_per_instance: int = 1,
    now: dt.datetime | None = None,
) -> HistoryLoadSummary:
    """Simulate `scenario` and write its result as the history of queue `queue_name`
    from `start`, with the loader the demo uses (`result_load`); then refresh the
    rollups of every month from `start`'s to `now`'s.

    The queue, its shares and their teams are created when missing (as
    `queue_for_scenario`, with the scenario's first policy). The policy record follows
    the history: where the policy in force at `start` differs from the scenario's, an
    import change at `start` sets the scenario's; each `update_share` and
    `set_capacity` action is an import change at its instant (replayed, not an admin's
    edit: the dashboard's policy edits leave it out); where the scenario's last policy
    differs from the current one, an import change at the history's end brings it back.
    Jobs the scenario never finishes stay RUNNABLE with their reason.
    """
    from governance.dashboards.rollups import rollups_refresh
    from governance.dashboards.selectors.calendar import month_start, next_month
    from governance.dashboards.selectors.reads import policy_in_force

    now = now or timezone.now()
    if start.tzinfo is None:
        raise HistoryLoadError("--start", "give a time zone, such as 2025-03-01T00:00:00Z")
    result = simulate(scenario)
    end = start + dt.timedelta(seconds=result.makespan)
    if end > now:
        raise HistoryLoadError(
            "--start",
            f"the history would end at {end:%Y-%m-%d %H:%M:%S} UTC, after now; start it earlier",
        )
    summary = HistoryLoadSummary(queue=queue_name, origin=start, end=end)
    with transaction.atomic():
        queue = lock_queues_named([queue_name]).get(queue_name)
        if queue is None:
            queue, shares, types = queue_for_scenario(
                scenario=scenario, name=queue_name, gpu_count=gpus_per_instance
            )
            summary.created_queue = True
        else:
            shares, types = _existing_queue(scenario, queue, summary)
        if Job.objects.filter(queue=queue, name__startswith=name_prefix).exists():
            raise HistoryLoadError(
                "--prefix",
                f"queue {queue_name!r} already holds jobs named {name_prefix!r}…; "
                "choose another prefix",
            )
        changes = _history_policy(scenario, queue, shares, start, end, policy_in_force)
        loaded = result_load(
            scenario=scenario,
            result=result,
            queue=queue,
            shares=shares,
            instance_types=types,
            origin=start,
            name_prefix=name_prefix,
        )
        for change_at, change in changes:
            change.save()
            PolicyChange.objects.filter(pk=change.pk).update(created_at=change_at)
        job_tables_analyze()
    summary.jobs, summary.events = loaded.jobs, loaded.events
    summary.never_finished = sum(job.finished_at is None for job in result.jobs)
    summary.policy_changes = len(changes)
    # Every month of the span, from the history's start to now: the months after its
    # last event change too (its shares exist from `start`, so their idle capacity counts,
    # and jobs it never finishes still wait), and a month left without figures would be
    # a hole in every trend.
    month = month_start(start.astimezone(dt.UTC).date())
    while month <= now.astimezone(dt.UTC).date():
        rollups_refresh(month=month, now=now)
        summary.months.append(month)
        month = next_month(month)
    return summary


def _existing_queue(scenario: Scenario, queue: JobQueue, summary: HistoryLoadSummary):
    """The queue's shares and types by the scenario's names; missing shares are made."""
    capacity = {cap.instance_type.name: cap.instance_type for cap in queue.capacities.all()}
    for type_name in scenario.queue.capacity:
        if type_name not in capacity:
            raise HistoryLoadError(
                "queue.capacity",
                f"{type_name!r} is not an instance type of queue {queue.name!r} "
                f"(it has {', '.join(sorted(capacity)) or 'none'})",
            )
    shares = {share.name: share for share in queue.shares.select_related("team")}
    position = len(shares)
    for spec in scenario.shares:
        if spec.name in shares:
            continue
        shares[spec.name] = share_for_scenario(
            queue=queue, spec=spec, position=position, types=capacity
        )
        position += 1
        summary.created_shares.append(spec.name)
    return {spec.name: shares[spec.name] for spec in scenario.shares}, capacity


def _history_policy(scenario, queue, shares, start, end, policy_in_force):
    """The PolicyChange rows (unsaved, with their instants) that make the policy record
    say what the scenario's policy was during its history."""
    from fleet.selectors import queue_document, share_document

    reason = LOAD_REASON.format(name=scenario.name)

    def change(at, cause, target, share, before, after):
        return (
            at,
            PolicyChange(
                cause=cause,
                target=target,
                queue=queue,
                share=share,
                object_repr=str(share or queue)[:200],
                before=before,
                after=after,
                reason=reason,
            ),
        )

    changes = []
    docs = {
        spec.name: _share_spec_document(spec, shares[spec.name].team.name)
        for spec in scenario.shares
    }
    for name, doc in docs.items():
        in_force = policy_in_force(share_id=shares[name].pk, at=start)
        if not _same_policy(in_force, doc, SHARE_KEYS):
            changes.append(
                change(
                    start,
                    PolicyChange.Cause.IMPORT,
                    PolicyChange.Target.SHARE,
                    shares[name],
                    in_force,
                    doc,
                )
            )
    capacity = {"capacity": dict(scenario.queue.capacity)}
    in_force = policy_in_force(queue_id=queue.pk, at=start)
    if in_force.get("capacity") != capacity["capacity"]:
        changes.append(
            change(
                start,
                PolicyChange.Cause.IMPORT,
                PolicyChange.Target.QUEUE,
                None,
                in_force,
                capacity,
            )
        )
    for action in scenario.actions:
        at = start + dt.timedelta(seconds=action.at)
        if isinstance(action, UpdateShare):
            name = action.share.name
            after = _share_spec_document(action.share, shares[name].team.name)
            changes.append(
                change(
                    at,
                    PolicyChange.Cause.IMPORT,
                    PolicyChange.Target.SHARE,
                    shares[name],
                    docs[name],
                    after,
                )
            )
            docs[name] = after
        elif isinstance(action, SetCapacity):
            after = {"capacity": dict(action.capacity)}
            changes.append(
                change(
                    at, PolicyChange.Cause.IMPORT, PolicyChange.Target.QUEUE, None, capacity, after
                )
            )
            capacity = after
    for name, doc in docs.items():
        current = share_document(shares[name])
        if not _same_policy(current, doc, SHARE_KEYS):
            changes.append(
                change(
                    end,
                    PolicyChange.Cause.IMPORT,
                    PolicyChange.Target.SHARE,
                    shares[name],
                    doc,
                    current,
                )
            )
    current_capacity = {"capacity": queue_document(queue)["capacity"]}
    if current_capacity["capacity"] != capacity["capacity"]:
        changes.append(
            change(
                end,
                PolicyChange.Cause.IMPORT,
                PolicyChange.Target.QUEUE,
                None,
                capacity,
                current_capacity,
            )
        )
    return changes
