"""Writes to the share policy: shares, their limits, queue capacity, urgency definitions.

Every rule of a share policy is checked once, by the engine's validate_policy
(the scenario-format rules), on the whole queue document with the proposed
change applied; the form, the API, import and exceptions all call these
functions. Every change writes a PolicyChange (who, when, why, before, after)
inside the same transaction, and one writer per queue holds the queue row lock.

Every write returns one PolicyWrite: either what it applied (the object it saved, or
a revert's own entry, with the PolicyChange it recorded: None when nothing changed;
nothing looks history up afterwards) or the PolicyProposal it became.

Whether a write applies or becomes a proposal is decided in one place, the
`reviewable` decorator every write wears; it, the history entry and the reason rule
are the policy-write kit, governance.policy.reviewable, which the writes of the other
modules (membership, workload classes, prices, the executor binding, the directory's
mappings) are built from too.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from django.db import transaction
from django.db.models import F

from core.bounds import check_lengths
from core.errors import NON_FIELD
from engine import validate_policy
from engine.strategies import DEFAULT_STRATEGY
from fleet.bridge import (
    BORROW_UNLIMITED,
    engine_borrow_limit,
    engine_share_document,
    stored_borrow_limit,
)
from fleet.executors import DEFAULT_EXECUTOR
from fleet.locks import lock_queue
from fleet.models import (
    BORROWING_STRATEGIES,
    CapacityLimit,
    InstanceType,
    JobQueue,
    QueueCapacity,
    QuotaShare,
    Team,
    UrgencyDefinition,
    WorkloadClass,
)
from fleet.selectors import queue_document, share_document
from governance.models import PolicyChange, PolicyProposal
from governance.policy.reviewable import (
    REVIEWED,
    PolicyError,
    PolicyWrite,
    Proposal,
    VersionConflict,
    as_revert_of,
    change_revert,
    record_change,
    register_proposal_kind,
    require_reason,
    reviewable,
)

MAX_LIMITS_PER_SHARE = 5
# The largest borrow limit: a share may borrow up to 100 times its own limit. Beyond
# that a number is a typo, not a policy; BORROW_UNLIMITED (-1) says "unlimited".
BORROW_LIMIT_MAX = 10_000


# ShareData.default_workload_class when the writer does not say (the share keeps its own).
KEEP_CLASS = type("KeepClass", (), {"__repr__": lambda self: "KEEP_CLASS"})()


@dataclass(frozen=True)
class ShareData:
    """A proposed share, as the editor, the API or an import gives it."""

    name: str
    team: Team | None
    strategy: str
    borrow_limit: int | None = None
    in_share_preemption: bool = False
    state: str = QuotaShare.State.ENABLED
    capacity_limits: Mapping[str, int] = field(default_factory=dict)
    # Not part of the scheduling policy (the engine never sees it): the highest priority
    # a lead may give the share's jobs without an exception. None: keep it as it is.
    priority_ceiling: int | None = None
    # Not part of the engine's policy either: the name of the workload class whose
    # contract the share's jobs copy when their definition names none (None: no
    # contract). KEEP_CLASS: keep it as it is.
    default_workload_class: str | None | object = KEEP_CLASS


# Documents: the canonical JSON shape used for validation, history and revert (a saved
# share's or queue's: governance.policy.selectors.share_document / queue_document).


def share_data_document(data: ShareData) -> dict:
    """The canonical document of a submitted share (what saving it would store)."""
    doc = {
        "name": data.name,
        "team": data.team.name if data.team else None,
        "strategy": data.strategy,
        "in_share_preemption": data.in_share_preemption,
        "state": data.state,
        "capacity_limits": dict(sorted(data.capacity_limits.items())),
    }
    # A borrow limit given with another strategy is kept, for validation to refuse.
    if data.borrow_limit is not None or data.strategy in BORROWING_STRATEGIES:
        doc["borrow_limit"] = engine_borrow_limit(data.borrow_limit)
    return doc


_SHARE_PATH = re.compile(r"^shares\[(\d+)\](?:\.(\w+))?(?:\.(.+))?$")


def _share_errors(problems, *, index: int) -> dict[str, list[str]]:
    """Keep the problems of share `index` (and the queue-wide ones), keyed by field name."""
    errors: dict[str, list[str]] = {}
    for problem in problems:
        match = _SHARE_PATH.match(problem.path)
        if match is None:
            key = NON_FIELD
        elif int(match.group(1)) != index:
            continue
        else:
            key = match.group(2) or NON_FIELD
            if key == "capacity_limits" and match.group(3):
                key = f"capacity_limits.{match.group(3)}"
        errors.setdefault(key, []).append(problem.message)
    return errors


def share_validate_in_policy(
    *, queue_doc: dict, share_docs: list[dict], index: int, data: ShareData
) -> dict[str, list[str]]:
    """Every problem with `data` as share `index` of a policy document (the queue and its
    shares in the scenario format; `index == len(share_docs)` adds a share). The one path
    by which the editor, the API, imports and what-if drafts check a share.

    A capacity limit above the queue's capacity of that type is an error when it is set
    or raised, since a share can never use more than the queue has. The limits of all
    shares together may exceed the capacity (shares lend and borrow). A limit already
    above capacity (the queue shrank since) may stay or be lowered, so unrelated edits
    and an exception's expiry still save; an exception itself never raises a limit past
    capacity (governance.exceptions.effects checks that when it applies)."""
    errors: dict[str, list[str]] = {}
    if data.team is None:
        errors["team"] = ["choose the team that owns this share"]
    if not data.name.strip():
        errors["name"] = ["give the share a name"]
    borrow = data.borrow_limit
    if isinstance(borrow, int) and not isinstance(borrow, bool) and borrow > BORROW_LIMIT_MAX:
        errors["borrow_limit"] = [
            f"must be at most {BORROW_LIMIT_MAX} (percent of the share's own limit), "
            f"or {BORROW_UNLIMITED} for unlimited"
        ]
    ceiling = data.priority_ceiling
    if ceiling is not None and (
        not isinstance(ceiling, int) or isinstance(ceiling, bool) or not 0 <= ceiling <= 9999
    ):
        errors["priority_ceiling"] = ["must be a whole number from 0 to 9999"]
    default_class = data.default_workload_class
    if (
        default_class is not KEEP_CLASS
        and default_class is not None
        and not (
            isinstance(default_class, str)
            and WorkloadClass.objects.filter(name=default_class).exists()
        )
    ):
        errors["default_workload_class"] = [
            f"no workload class named {default_class!r}; choose one, or none"
        ]
    capacity = queue_doc.get("capacity") if isinstance(queue_doc.get("capacity"), dict) else {}
    stored = share_docs[index].get("capacity_limits", {}) if index < len(share_docs) else {}
    for type_name, limit in data.capacity_limits.items():
        available = capacity.get(type_name)
        if (
            isinstance(limit, int)
            and isinstance(available, int)
            and limit > available
            and limit > stored.get(type_name, 0)
        ):
            errors[f"capacity_limits.{type_name}"] = [
                f"at most {available}: the queue has {available} {type_name}"
            ]
    docs = [engine_share_document(doc) for doc in share_docs]
    proposed = engine_share_document(share_data_document(data))
    if index == len(docs):
        docs.append(proposed)
    else:
        docs[index] = proposed
    problems = validate_policy(queue_doc, docs)
    for key, messages in _share_errors(problems, index=index).items():
        errors.setdefault(key, []).extend(messages)
    return errors


def share_validate(
    *, queue: JobQueue, data: ShareData, share: QuotaShare | None = None
) -> dict[str, list[str]]:
    """Every problem with `data` as the new state of `share` (or a new share) in `queue`."""
    shares = list(queue.shares.select_related("team").prefetch_related("limits__instance_type"))
    index = (
        len(shares) if share is None else next(i for i, s in enumerate(shares) if s.pk == share.pk)
    )
    return share_validate_in_policy(
        queue_doc=queue_document(queue),
        share_docs=[share_document(s) for s in shares],
        index=index,
        data=data,
    )


Kind = PolicyProposal.Kind
Target = PolicyChange.Target


def _write_limits(share: QuotaShare, limits: Mapping[str, int]) -> None:
    types = {t.name: t for t in InstanceType.objects.filter(name__in=list(limits))}
    share.limits.exclude(instance_type__name__in=list(limits)).delete()
    for type_name, instances in limits.items():
        CapacityLimit.objects.update_or_create(
            share=share, instance_type=types[type_name], defaults={"max_instances": instances}
        )


def _after_policy_change(queue: JobQueue) -> None:
    """Hook for the live scheduler: a policy change triggers a scheduling pass after commit."""
    from core.signals import policy_changed

    transaction.on_commit(lambda: policy_changed.send(sender=JobQueue, queue_id=queue.pk))


def _share_create_proposal(*, queue: JobQueue, data: ShareData, **_) -> Proposal:
    return Proposal(Kind.SHARE_CREATE, {"data": _proposed_document(data)}, {"queue": queue})


@reviewable(_share_create_proposal)
def share_create(
    *,
    actor,
    queue: JobQueue,
    data: ShareData,
    reason: str,
    cause: str = PolicyChange.Cause.EDIT,
) -> PolicyWrite:
    """A new share (or, when changes need review, the proposal of one)."""
    reason = require_reason(reason)
    queue = lock_queue(queue.pk)
    errors = share_validate(queue=queue, data=data)
    if errors:
        raise PolicyError(errors)
    position = queue.shares.order_by("-position").values_list("position", flat=True).first() or 0
    share = QuotaShare.objects.create(
        queue=queue,
        team=data.team,
        name=data.name.strip(),
        strategy=data.strategy,
        borrow_limit=stored_borrow_limit(data.strategy, data.borrow_limit),
        in_share_preemption=data.in_share_preemption,
        state=data.state,
        position=position + 1,
        default_workload_class=_default_class(data, None),
        **({} if data.priority_ceiling is None else {"priority_ceiling": data.priority_ceiling}),
    )
    _write_limits(share, data.capacity_limits)
    entry = record_change(
        actor=actor,
        reason=reason,
        cause=cause,
        target=PolicyChange.Target.SHARE,
        object_repr=str(share),
        before=None,
        after=share_history_document(share),
        queue=queue,
        share=share,
    )
    _after_policy_change(queue)
    return PolicyWrite(applied=share, entry=entry)


def _share_update_proposal(
    *, share: QuotaShare, data: ShareData, expected_version: int, **_
) -> Proposal:
    return Proposal(
        Kind.SHARE_UPDATE,
        {"data": _proposed_document(data)},
        {"share": share, "queue": share.queue, "base_version": expected_version},
    )


@reviewable(_share_update_proposal)
def share_update(
    *,
    actor,
    share: QuotaShare,
    data: ShareData,
    reason: str,
    expected_version: int,
    cause: str = PolicyChange.Cause.EDIT,
    reverts: PolicyChange | None = None,
    exception_request=None,
) -> PolicyWrite:
    """Apply `data` to `share` if nobody saved it since `expected_version` (or, when
    changes need review, propose it). `exception_request` links the recorded change to
    the exception that caused it; `approved` (see reviewable) is the approved proposal
    or what-if draft this write carries out."""
    reason = require_reason(reason)
    queue = lock_queue(share.queue_id)
    current = QuotaShare.objects.select_related("team", "queue").get(pk=share.pk)
    before = share_history_document(current)
    if current.version != expected_version:
        raise VersionConflict(
            current=before, current_version=current.version, submitted=share_data_document(data)
        )
    errors = share_validate(queue=queue, data=data, share=current)
    if errors:
        raise PolicyError(errors)
    ceiling = current.priority_ceiling if data.priority_ceiling is None else data.priority_ceiling
    default_class = _default_class(data, current)
    proposed = {
        **share_data_document(data),
        "priority_ceiling": ceiling,
        "default_workload_class": default_class.name if default_class else None,
    }
    if proposed == before:
        # Nothing changes: no new version, no history entry.
        return PolicyWrite(applied=current, entry=None)
    current.team = data.team
    current.name = data.name.strip()
    current.strategy = data.strategy
    current.borrow_limit = stored_borrow_limit(data.strategy, data.borrow_limit)
    current.in_share_preemption = data.in_share_preemption
    current.state = data.state
    current.priority_ceiling = ceiling
    current.default_workload_class = default_class
    current.version = F("version") + 1
    current.save()
    _write_limits(current, data.capacity_limits)
    current.refresh_from_db()
    after = share_history_document(current)
    entry = None
    if after != before:
        entry = record_change(
            actor=actor,
            reason=reason,
            cause=cause,
            target=PolicyChange.Target.SHARE,
            object_repr=str(current),
            before=before,
            after=after,
            queue=queue,
            share=current,
            reverts=reverts,
            exception_request=exception_request,
        )
        _after_policy_change(queue)
    return PolicyWrite(applied=current, entry=entry)


def share_data_from_document(doc: Mapping, *, team: Team | None = None) -> ShareData:
    """ShareData from a history document (for revert and import)."""
    if team is None and doc.get("team"):
        team = Team.objects.filter(name=doc["team"]).first()
    strategy = doc.get("strategy", DEFAULT_STRATEGY)
    return ShareData(
        name=doc["name"],
        team=team,
        strategy=strategy,
        borrow_limit=doc.get("borrow_limit"),
        in_share_preemption=bool(doc.get("in_share_preemption", False)),
        state=doc.get("state", QuotaShare.State.ENABLED),
        capacity_limits=dict(doc.get("capacity_limits", {})),
        priority_ceiling=doc.get("priority_ceiling"),
        default_workload_class=doc.get("default_workload_class", KEEP_CLASS),
    )


def share_history_document(share: QuotaShare) -> dict:
    """The share as a PolicyChange records it: its policy, its priority ceiling and its
    default workload class."""
    default_class = share.default_workload_class
    return {
        **share_document(share),
        "priority_ceiling": share.priority_ceiling,
        "default_workload_class": default_class.name if default_class else None,
    }


def _proposed_document(data: ShareData) -> dict:
    doc = share_data_document(data)
    if data.priority_ceiling is not None:
        doc["priority_ceiling"] = data.priority_ceiling
    if data.default_workload_class is not KEEP_CLASS:
        doc["default_workload_class"] = data.default_workload_class
    return doc


def _default_class(data: ShareData, share: QuotaShare | None) -> WorkloadClass | None:
    """The default class saving `data` gives the share (validated before)."""
    if data.default_workload_class is KEEP_CLASS:
        return share.default_workload_class if share is not None else None
    if data.default_workload_class is None:
        return None
    return WorkloadClass.objects.get(name=data.default_workload_class)


# Approving a share's proposal (governance.proposals), and reverting a share's change.


def _share_create_apply(proposal: PolicyProposal, **common) -> PolicyWrite:
    return share_create(
        queue=proposal.queue, data=share_data_from_document(proposal.payload["data"]), **common
    )


def _share_update_apply(proposal: PolicyProposal, **common) -> PolicyWrite:
    return share_update(
        share=proposal.share,
        data=share_data_from_document(proposal.payload["data"]),
        expected_version=proposal.base_version,
        **common,
    )


def _share_revert(*, actor, change: PolicyChange, reason: str, diff) -> PolicyWrite:
    if change.share is None:
        raise PolicyError({NON_FIELD: ["the share of this change no longer exists"]})
    share = QuotaShare.objects.select_related("team", "queue").get(pk=change.share_id)
    current = share_document(share)
    if change.before is None:
        restored = {**current, "state": QuotaShare.State.DISABLED}
    else:
        restored = {**current}
        for key, old, _new in diff:
            if old is None and key != "default_workload_class":
                restored.pop(key, None)
            else:
                restored[key] = old
    return share_update(
        actor=actor,
        share=share,
        data=share_data_from_document(restored),
        reason=reason,
        expected_version=share.version,
        **as_revert_of(change),
    )


register_proposal_kind(
    Kind.SHARE_CREATE, target=Target.SHARE, apply=_share_create_apply, revert=_share_revert
)
register_proposal_kind(
    Kind.SHARE_UPDATE, target=Target.SHARE, apply=_share_update_apply, revert=_share_revert
)


def queue_capacity_validate(
    *, queue: JobQueue, capacity: Mapping[str, int]
) -> dict[str, list[str]]:
    """Every problem with `capacity` as the queue's new capacity map, changing nothing."""
    errors: dict[str, list[str]] = {}
    known = set(InstanceType.objects.filter(name__in=list(capacity)).values_list("name", flat=True))
    for name in capacity:
        if name not in known:
            errors.setdefault(f"capacity.{name}", []).append(f"unknown instance type '{name}'")
    if errors:
        return errors
    shares = [
        engine_share_document(share_document(s))
        for s in queue.shares.select_related("team").prefetch_related("limits__instance_type")
    ]
    proposed = {**queue_document(queue), "capacity": dict(capacity)}
    for problem in validate_policy(proposed, shares):
        if not shares and problem.path == "shares":
            continue  # a new queue gets its capacity before its first share
        key = problem.path.removeprefix("queue.")
        errors.setdefault(key, []).append(
            problem.message if key.startswith("capacity") else str(problem)
        )
    return errors


def _queue_capacity_proposal(
    *, queue: JobQueue, capacity: Mapping[str, int], expected_version: int, **_
) -> Proposal:
    return Proposal(
        Kind.QUEUE_CAPACITY,
        {"capacity": dict(capacity)},
        {"queue": queue, "base_version": expected_version},
    )


@reviewable(_queue_capacity_proposal)
def queue_set_capacity(
    *,
    actor,
    queue: JobQueue,
    capacity: Mapping[str, int],
    reason: str,
    expected_version: int,
    cause: str = PolicyChange.Cause.EDIT,
    reverts: PolicyChange | None = None,
) -> PolicyWrite:
    """Replace the queue's capacity map (instance type name -> instances)."""
    reason = require_reason(reason)
    locked = lock_queue(queue.pk)
    before = queue_document(locked)
    if locked.version != expected_version:
        raise VersionConflict(
            current={"capacity": before["capacity"]},
            current_version=locked.version,
            submitted={"capacity": dict(capacity)},
        )
    errors = queue_capacity_validate(queue=locked, capacity=capacity)
    if errors:
        raise PolicyError(errors)
    if dict(capacity) == before["capacity"]:
        # Nothing changes: no new version, no history entry.
        return PolicyWrite(applied=locked, entry=None)
    types = {t.name: t for t in InstanceType.objects.filter(name__in=list(capacity))}
    locked.capacities.exclude(instance_type__name__in=list(capacity)).delete()
    for name, instances in capacity.items():
        QueueCapacity.objects.update_or_create(
            queue=locked, instance_type=types[name], defaults={"instances": instances}
        )
    JobQueue.objects.filter(pk=locked.pk).update(version=F("version") + 1)
    locked.refresh_from_db()
    after_capacity = queue_document(locked)["capacity"]
    entry = None
    if after_capacity != before["capacity"]:
        entry = record_change(
            actor=actor,
            reason=reason,
            cause=cause,
            target=PolicyChange.Target.QUEUE,
            object_repr=str(locked),
            before={"capacity": before["capacity"]},
            after={"capacity": after_capacity},
            queue=locked,
            reverts=reverts,
        )
        _after_policy_change(locked)
    return PolicyWrite(applied=locked, entry=entry)


def _queue_create_proposal(
    *,
    name: str,
    capacity: Mapping[str, int],
    description: str,
    default_preemption_retries: int | None,
    runnable_time_limit: int | None,
    executor: str,
    **_,
) -> Proposal:
    payload = {
        "name": name,
        "capacity": dict(capacity),
        "description": description,
        "default_preemption_retries": default_preemption_retries,
        "runnable_time_limit": runnable_time_limit,
        "executor": executor,
    }
    return Proposal(Kind.QUEUE_CREATE, payload)


@reviewable(_queue_create_proposal)
def queue_create(
    *,
    actor,
    name: str,
    capacity: Mapping[str, int],
    reason: str,
    description: str = "",
    default_preemption_retries: int | None = None,
    runnable_time_limit: int | None = None,
    executor: str = DEFAULT_EXECUTOR,
    cause: str = PolicyChange.Cause.EDIT,
) -> PolicyWrite:
    """A new queue with its first capacity, recorded as one change. Nothing is kept on error."""
    reason = require_reason(reason)
    check_lengths({"description": description}, ["description"], error=PolicyError)
    name = (name or "").strip()
    if not name:
        raise PolicyError({"name": ["give the queue a name"]})
    if JobQueue.objects.filter(name=name).exists():
        raise PolicyError({"name": [f"a queue named '{name}' already exists"]})
    queue = JobQueue.objects.create(
        name=name,
        description=description,
        default_preemption_retries=default_preemption_retries,
        runnable_time_limit=runnable_time_limit,
        executor=executor,
    )
    return queue_set_capacity(
        actor=actor,
        queue=queue,
        capacity=capacity,
        reason=reason,
        expected_version=queue.version,
        cause=cause,
        approved=REVIEWED,
    )


# Approving a queue's proposal, and reverting a change of its capacity.


def _queue_capacity_apply(proposal: PolicyProposal, **common) -> PolicyWrite:
    return queue_set_capacity(
        queue=proposal.queue,
        capacity=proposal.payload["capacity"],
        expected_version=proposal.base_version,
        **common,
    )


def _queue_create_apply(proposal: PolicyProposal, **common) -> PolicyWrite:
    fields = {key: value for key, value in proposal.payload.items() if key != "after"}
    return queue_create(**fields, **common)


def _queue_revert(*, actor, change: PolicyChange, reason: str, diff) -> PolicyWrite:
    if change.queue is None or change.before is None:
        raise PolicyError({NON_FIELD: ["this change cannot be reverted"]})
    return queue_set_capacity(
        actor=actor,
        queue=change.queue,
        capacity=change.before["capacity"],
        reason=reason,
        expected_version=JobQueue.objects.get(pk=change.queue_id).version,
        **as_revert_of(change),
    )


register_proposal_kind(
    Kind.QUEUE_CAPACITY, target=Target.QUEUE, apply=_queue_capacity_apply, revert=_queue_revert
)
register_proposal_kind(
    Kind.QUEUE_CREATE, target=Target.QUEUE, apply=_queue_create_apply, revert=_queue_revert
)


# Urgency definitions.

URGENCY_FIELDS = ("name", "meaning", "examples", "priority", "max_window_hours", "allowed_kinds")


def urgency_document(urgency: UrgencyDefinition) -> dict:
    doc = {name: getattr(urgency, name) for name in URGENCY_FIELDS}
    doc["invokers"] = sorted(team.name for team in urgency.invokers.all())
    return doc


def urgency_validate(data: Mapping, *, urgency: UrgencyDefinition | None = None) -> dict:
    errors: dict[str, list[str]] = {}
    name = (data.get("name") or "").strip()
    if not name:
        errors["name"] = ["give the urgency a name"]
    elif (
        UrgencyDefinition.objects.filter(name=name)
        .exclude(pk=getattr(urgency, "pk", None))
        .exists()
    ):
        errors["name"] = [f"an urgency definition named '{name}' already exists"]
    if not (data.get("meaning") or "").strip():
        errors["meaning"] = ["say what this urgency means"]
    priority = data.get("priority")
    if not isinstance(priority, int) or isinstance(priority, bool) or not 0 <= priority <= 9999:
        errors["priority"] = ["must be a whole number from 0 to 9999"]
    window = data.get("max_window_hours")
    if not isinstance(window, int) or isinstance(window, bool) or window < 1:
        errors["max_window_hours"] = ["must be a whole number of hours, at least 1"]
    unknown_teams = _teams(data.get("invokers") or [])[1]
    if unknown_teams:
        errors["invokers"] = [f"unknown team '{unknown_teams[0]}'"]
    kinds = data.get("allowed_kinds") or []
    valid = set(UrgencyDefinition.Kind.values)
    bad = [kind for kind in kinds if kind not in valid]
    if bad:
        errors["allowed_kinds"] = [
            f"unknown kind {bad[0]!r}; choose from {', '.join(sorted(valid))}"
        ]
    return errors


def _urgency_save_proposal(
    *, data: Mapping, urgency: UrgencyDefinition | None, expected_version: int | None, **_
) -> Proposal:
    document = {key: data.get(key) for key in URGENCY_FIELDS}
    if data.get("invokers") is not None:
        document["invokers"] = [
            team.name if isinstance(team, Team) else str(team) for team in data["invokers"]
        ]
    return Proposal(
        Kind.URGENCY_CREATE if urgency is None else Kind.URGENCY_UPDATE,
        {"data": document},
        {"urgency": urgency, "base_version": expected_version},
    )


@reviewable(_urgency_save_proposal)
def urgency_save(
    *,
    actor,
    data: Mapping,
    reason: str,
    urgency: UrgencyDefinition | None = None,
    expected_version: int | None = None,
    cause: str = PolicyChange.Cause.EDIT,
    reverts: PolicyChange | None = None,
) -> PolicyWrite:
    """Create (urgency=None) or update an urgency definition from URGENCY_FIELDS + invokers."""
    reason = require_reason(reason)
    check_lengths(data, ["meaning", "examples"], error=PolicyError)
    before = None
    if urgency is not None:
        urgency = UrgencyDefinition.objects.select_for_update().get(pk=urgency.pk)
        before = urgency_document(urgency)
        if expected_version is not None and urgency.version != expected_version:
            raise VersionConflict(
                current=before, current_version=urgency.version, submitted=dict(data)
            )
    errors = urgency_validate(data, urgency=urgency)
    if errors:
        raise PolicyError(errors)
    if before is not None and _urgency_proposal(data, before) == before:
        # Nothing changes: no new version, no history entry.
        return PolicyWrite(applied=urgency, entry=None)
    if urgency is None:
        urgency = UrgencyDefinition()
    else:
        urgency.version = F("version") + 1
    urgency.name = data["name"].strip()
    urgency.meaning = data["meaning"].strip()
    urgency.examples = (data.get("examples") or "").strip()
    urgency.priority = data["priority"]
    urgency.max_window_hours = data["max_window_hours"]
    urgency.allowed_kinds = list(data.get("allowed_kinds") or [])
    urgency.save()
    invokers = data.get("invokers")
    if invokers is not None:
        urgency.invokers.set(_teams(invokers)[0])
    urgency.refresh_from_db()
    after = urgency_document(urgency)
    entry = None
    if after != before:
        entry = record_change(
            actor=actor,
            reason=reason,
            cause=cause,
            target=PolicyChange.Target.URGENCY,
            object_repr=urgency.name,
            before=before,
            after=after,
            urgency=urgency,
            reverts=reverts,
        )
    return PolicyWrite(applied=urgency, entry=entry)


def _urgency_proposal(data: Mapping, before: dict) -> dict:
    invokers = data.get("invokers")
    return {
        "name": data["name"].strip(),
        "meaning": data["meaning"].strip(),
        "examples": (data.get("examples") or "").strip(),
        "priority": data["priority"],
        "max_window_hours": data["max_window_hours"],
        "allowed_kinds": list(data.get("allowed_kinds") or []),
        "invokers": before["invokers"]
        if invokers is None
        else sorted(team.name for team in _teams(invokers)[0]),
    }


def _teams(values) -> tuple[list[Team], list[str]]:
    """Teams named (or given) in `values`, and the names that match no team."""
    teams, unknown = [], []
    for value in values:
        if isinstance(value, Team):
            teams.append(value)
            continue
        team = Team.objects.filter(name=value).first()
        if team is None and str(value).isdigit():
            team = Team.objects.filter(pk=int(value)).first()
        if team is None:
            unknown.append(str(value))
        else:
            teams.append(team)
    return teams, unknown


def _urgency_apply(proposal: PolicyProposal, **common) -> PolicyWrite:
    return urgency_save(
        data=proposal.payload["data"],
        urgency=proposal.urgency,
        expected_version=proposal.base_version,
        **common,
    )


def _urgency_revert(*, actor, change: PolicyChange, reason: str, diff) -> PolicyWrite:
    if change.urgency is None or change.before is None:
        raise PolicyError({NON_FIELD: ["this change cannot be reverted"]})
    current = urgency_document(change.urgency)
    restored = {**current, **{key: old for key, old, _new in diff}}
    return urgency_save(
        actor=actor,
        data=restored,
        reason=reason,
        urgency=change.urgency,
        **as_revert_of(change),
    )


register_proposal_kind(
    Kind.URGENCY_CREATE, target=Target.URGENCY, apply=_urgency_apply, revert=_urgency_revert
)
register_proposal_kind(
    Kind.URGENCY_UPDATE, target=Target.URGENCY, apply=_urgency_apply, revert=_urgency_revert
)


# History.


def changed_fields(
    before: Mapping | None, after: Mapping | None
) -> list[tuple[str, object, object]]:
    """Field-level diff: (field, old, new) for the fields that differ, in a stable order."""
    before = before or {}
    after = after or {}
    keys = sorted(set(before) | set(after))
    return [
        (key, before.get(key), after.get(key)) for key in keys if before.get(key) != after.get(key)
    ]


def _revert_proposal(*, change: PolicyChange, **_) -> Proposal:
    about = {
        "reverts": change,
        "queue": change.queue,
        "share": change.share,
        "urgency": change.urgency,
        "team": change.team,
        "subject": change.subject,
        "workload_class": change.workload_class,
    }
    return Proposal(Kind.REVERT, {}, about)


@reviewable(_revert_proposal, cause=PolicyChange.Cause.REVERT)
def policy_change_revert(*, actor, change: PolicyChange, reason: str) -> PolicyWrite:
    """Take back what `change` did, as a new change (PolicyWrite.applied is that change).
    Only the fields it changed are restored, so later edits of other fields stay."""
    reason = require_reason(reason)
    written = change_revert(
        actor=actor, change=change, reason=reason, diff=changed_fields(change.before, change.after)
    )
    entry = written.entry
    if entry is None:
        raise PolicyError({NON_FIELD: ["nothing to revert: the current policy already matches"]})
    return PolicyWrite(applied=entry, entry=entry)


def _revert_apply(proposal: PolicyProposal, **common) -> PolicyWrite:
    return policy_change_revert(change=proposal.reverts, **common)


# A revert records a change of the target it reverts, so taking it back in turn is that
# target's revert (change_revert), as for any change.
register_proposal_kind(Kind.REVERT, target=None, apply=_revert_apply, revert=change_revert)
