"""The executor binding as policy: a queue's settings for its executor (where its jobs
run) and an instance type's (what one instance asks for), whatever the executor.

Both are policy writes like a queue's capacity: a reason, the review-or-apply path
(`reviewable`: with POLICY_CHANGES_NEED_REVIEW they become proposals), a history entry
with before and after (the schema's documents), revert. Which fields there are, every
check, the live check and the impact are the executor's binding schema's, reached
through scheduler.services.executor_bindings: a new executor's binding needs nothing
here. Writes outside the editor (an executor's own command) send
`core.signals.executor_binding_written`, recorded here as direct changes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.core.exceptions import ValidationError

from core.errors import NON_FIELD
from fleet.locks import lock_queue
from fleet.models import InstanceType, JobQueue
from governance.models import PolicyChange, PolicyProposal
from governance.policy.membership import DIRECT_REASON
from governance.policy.reviewable import (
    PolicyError,
    PolicyWrite,
    Proposal,
    VersionConflict,
    as_revert_of,
    record_change,
    register_proposal_kind,
    require_reason,
    reviewable,
)
from scheduler.services.executor_bindings import (
    binding_executors,
    executor_queues,
    has_binding,
    instance_type_binding,
    instance_type_binding_apply,
    instance_type_binding_executor,
    instance_type_binding_fields,
    instance_type_binding_validate,
    queue_binding,
    queue_binding_apply,
    queue_binding_fields,
    queue_binding_impact,
    queue_binding_validate,
    queue_runs_on,
)

Kind = PolicyProposal.Kind
TARGET = PolicyChange.Target.EXECUTOR_BINDING

__all__ = [
    "binding_executors",
    "binding_impact",
    "binding_validate",
    "has_binding",
    "instance_type_binding_document",
    "instance_type_binding_fields",
    "instance_type_fields_given",
    "queue_binding_field_names",
    "instance_type_binding_set",
    "instance_type_binding_shown",
    "instance_type_queues",
    "queue_binding_document",
    "queue_binding_fields",
    "queue_binding_set",
]


def _no_binding(executor: str) -> PolicyError:
    return PolicyError({NON_FIELD: [f"executor {executor} has no binding settings"]})


def queue_binding_document(queue: JobQueue) -> dict[str, Any]:
    """The queue's binding as the history records it ({} when its executor has none)."""
    return (
        queue_binding(queue=queue, executor=queue.executor) if has_binding(queue.executor) else {}
    )


def instance_type_binding_document(instance_type: InstanceType, executor: str) -> dict[str, Any]:
    return instance_type_binding(instance_type=instance_type, executor=executor)


def instance_type_binding_shown(instance_type: InstanceType, executor: str) -> list[tuple]:
    """The type's settings for `executor` as a list page shows them: (label, value) of
    each field set, a list as its words."""
    document = instance_type_binding_document(instance_type, executor)
    return [
        (field.label, " ".join(value) if isinstance(value, list) else value)
        for field in instance_type_binding_fields(executor)
        if (value := document.get(field.name))
    ]


def queue_binding_field_names(queue: JobQueue) -> list[str]:
    """The names of the queue's settings for its executor ([] when it has none)."""
    if not has_binding(queue.executor):
        return []
    return [field.name for field in queue_binding_fields(queue.executor)]


def instance_type_fields_given(data: Mapping) -> tuple[str | None, dict[str, Any]]:
    """The executor whose instance-type settings `data` (a request's) gives, and those
    settings; (None, {}) when it gives none."""
    for executor in binding_executors():
        names = [field.name for field in instance_type_binding_fields(executor)]
        given = {name: data[name] for name in names if name in data}
        if given:
            return executor, given
    return None, {}


def _document(fields, binding: Mapping | None) -> dict[str, Any]:
    """`binding` with every field of the schema (None for one left out: the schema says
    what its empty value is)."""
    return {name: (binding or {}).get(name) for name in fields}


def _queue_document_of(queue: JobQueue, binding: Mapping | None) -> dict[str, Any]:
    return _document([field.name for field in queue_binding_fields(queue.executor)], binding)


# A queue's binding.


def _binding_proposal(*, queue: JobQueue, binding: Mapping, expected_version: int, **_) -> Proposal:
    return Proposal(
        Kind.QUEUE_BINDING,
        {"executor": queue.executor, "binding": dict(binding)},
        {"queue": queue, "base_version": expected_version},
    )


@reviewable(_binding_proposal)
def queue_binding_set(
    *,
    actor,
    queue: JobQueue,
    binding: Mapping[str, Any],
    reason: str,
    expected_version: int,
    cause: str = PolicyChange.Cause.EDIT,
    reverts: PolicyChange | None = None,
) -> PolicyWrite:
    """Set the queue's settings for its executor (the fields of its binding schema)."""
    reason = require_reason(reason)
    locked = lock_queue(queue.pk)
    if not has_binding(locked.executor):
        raise _no_binding(locked.executor)
    before = queue_binding_document(locked)
    submitted = _queue_document_of(locked, binding)
    if locked.version != expected_version:
        raise VersionConflict(current=before, current_version=locked.version, submitted=submitted)
    proposed, errors = queue_binding_validate(
        queue=locked, executor=locked.executor, binding=submitted
    )
    if errors:
        raise PolicyError(errors)
    if proposed == before:
        return PolicyWrite(applied=locked, entry=None)
    queue_binding_apply(queue=locked, executor=locked.executor, binding=proposed)
    entry = record_change(
        actor=actor,
        reason=reason,
        cause=cause,
        target=TARGET,
        object_repr=str(locked),
        before=before,
        after=proposed,
        queue=locked,
        reverts=reverts,
    )
    return PolicyWrite(applied=locked, entry=entry)


def binding_validate(*, queue: JobQueue, binding: Mapping[str, Any]) -> dict[str, list[str]]:
    """Every problem with `binding` as the queue's new binding (the preview's check, the
    live one included); nothing is changed."""
    if not has_binding(queue.executor):
        return _no_binding(queue.executor).errors
    document = _queue_document_of(queue, binding)
    return queue_binding_validate(queue=queue, executor=queue.executor, binding=document)[1]


def binding_impact(*, queue: JobQueue, binding: Mapping[str, Any]) -> list[str]:
    """What saving `binding` would do, in sentences (the executor's binding says)."""
    document = _queue_document_of(queue, binding)
    return queue_binding_impact(queue=queue, executor=queue.executor, binding=document)


def _queue_revert(*, actor, change: PolicyChange, reason: str, diff) -> PolicyWrite:
    queue = JobQueue.objects.get(pk=change.queue_id)
    current = queue_binding_document(queue)
    restored = {**current, **{key: old for key, old, _new in diff if key in current}}
    return queue_binding_set(
        actor=actor,
        queue=queue,
        binding=restored,
        reason=reason,
        expected_version=queue.version,
        **as_revert_of(change),
    )


def _queue_apply(proposal: PolicyProposal, **common) -> PolicyWrite:
    if not queue_runs_on(proposal.queue, proposal.payload.get("executor")):
        raise PolicyError(
            {
                NON_FIELD: [
                    f"the queue's executor is {proposal.queue.executor} now, not "
                    f"{proposal.payload.get('executor')}: this binding is no longer its"
                ]
            }
        )
    return queue_binding_set(
        queue=proposal.queue,
        binding=proposal.payload["binding"],
        expected_version=proposal.base_version,
        **common,
    )


# An instance type's settings for one executor.


def _type_proposal(*, instance_type: InstanceType, executor: str, binding, **_) -> Proposal:
    return Proposal(
        Kind.TYPE_BINDING,
        {"instance_type": instance_type.name, "executor": executor, "binding": dict(binding)},
    )


@reviewable(_type_proposal)
def instance_type_binding_set(
    *,
    actor,
    instance_type: InstanceType,
    executor: str,
    binding: Mapping[str, Any],
    reason: str,
    cause: str = PolicyChange.Cause.EDIT,
    reverts: PolicyChange | None = None,
) -> PolicyWrite:
    """Set what one instance of the type asks `executor` for (its binding schema's
    instance-type fields)."""
    reason = require_reason(reason)
    if not has_binding(executor):
        raise _no_binding(executor)
    itype = InstanceType.objects.select_for_update().get(pk=instance_type.pk)
    fields = [field.name for field in instance_type_binding_fields(executor)]
    try:
        proposed = instance_type_binding_validate(
            executor=executor, binding=_document(fields, binding)
        )
    except ValidationError as error:
        raise PolicyError(error.message_dict) from error
    before = instance_type_binding_document(itype, executor)
    if proposed == before:
        return PolicyWrite(applied=itype, entry=None)
    instance_type_binding_apply(instance_type=itype, executor=executor, binding=proposed)
    entry = record_change(
        actor=actor,
        reason=reason,
        cause=cause,
        target=TARGET,
        object_repr=itype.name,
        before=before,
        after=proposed,
        reverts=reverts,
    )
    return PolicyWrite(applied=itype, entry=entry)


def _type_revert(*, actor, change: PolicyChange, reason: str, diff) -> PolicyWrite:
    itype = InstanceType.objects.filter(name=change.object_repr).first()
    if itype is None:
        raise PolicyError({NON_FIELD: ["the instance type of this change no longer exists"]})
    executor = instance_type_binding_executor(change.before or change.after or {})
    if executor is None:
        raise PolicyError({NON_FIELD: ["no executor has the settings of this change"]})
    return instance_type_binding_set(
        actor=actor,
        instance_type=itype,
        executor=executor,
        binding=change.before,
        reason=reason,
        **as_revert_of(change),
    )


def _type_apply(proposal: PolicyProposal, **common) -> PolicyWrite:
    payload = proposal.payload
    itype = InstanceType.objects.filter(name=payload["instance_type"]).first()
    if itype is None:
        raise PolicyError(
            {NON_FIELD: [f"instance type '{payload['instance_type']}' no longer exists"]}
        )
    return instance_type_binding_set(
        instance_type=itype, executor=payload["executor"], binding=payload["binding"], **common
    )


def _revert(*, change: PolicyChange, **rest) -> PolicyWrite:
    """One target, two holders: a change with its queue is a queue's binding."""
    if change.before is None:
        raise PolicyError({NON_FIELD: ["this change cannot be reverted"]})
    if change.queue_id is not None:
        return _queue_revert(change=change, **rest)
    return _type_revert(change=change, **rest)


register_proposal_kind(Kind.QUEUE_BINDING, target=TARGET, apply=_queue_apply, revert=_revert)
register_proposal_kind(Kind.TYPE_BINDING, target=TARGET, apply=_type_apply, revert=_revert)


def instance_type_queues(instance_type: InstanceType, executor: str) -> list[JobQueue]:
    """The executor's queues whose capacity has this type: where its settings are used."""
    return list(
        executor_queues(executor=executor)
        .filter(capacities__instance_type=instance_type)
        .distinct()
        .order_by("name")
    )


# Direct changes: an executor's command and the other writers outside the editor.


def record_direct_binding_change(*, sender, instance, before: dict, after: dict, **_) -> None:
    about = {"queue": instance} if isinstance(instance, JobQueue) else {}
    record_change(
        actor=None,
        reason=DIRECT_REASON,
        cause=PolicyChange.Cause.DIRECT,
        target=TARGET,
        object_repr=str(instance) if isinstance(instance, JobQueue) else instance.name,
        before=before,
        after=after,
        **about,
    )
