"""The executor binding as policy: a queue's Slurm cluster, partition and account, and
the Slurm resources of one instance of each instance type.

Both are policy writes like a queue's capacity: a reason, the review-or-apply path
(`reviewable`: with POLICY_CHANGES_NEED_REVIEW they become proposals), a history entry
with before and after, revert. Every check is scheduler.executors.slurm.binding's, the
one `manage.py slurm_bind` uses too (which writes outside the editor: its writes reach
the history as direct changes, `record_direct_binding_change`). The impact preview says
where the queue's next jobs go and what the partition's nodes fit of its capacity.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

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
    executor_queues,
    instance_type_binding,
    instance_type_binding_apply,
    instance_type_binding_validate,
    queue_binding,
    queue_binding_apply,
    queue_binding_impact,
    queue_binding_validate,
)

Kind = PolicyProposal.Kind
Target = PolicyChange.Target

# The executor whose binding this page and these writes edit, through the scheduler's
# executor bindings (its schema checks and stores them). The generic binding page and
# its policy target ("executor binding") replace this module (issue 33).
EXECUTOR = "slurm"
# The binding's document: what the history, the API and the form show.
BINDING_FIELDS = ("slurm_conf", "slurm_partition", "slurm_account")


def binding_document(binding: Mapping | None) -> dict[str, str]:
    """`binding` with every field, stripped of nothing: "" for a field left out."""
    return {name: (binding or {}).get(name) or "" for name in BINDING_FIELDS}


def queue_binding_document(queue: JobQueue) -> dict[str, str]:
    """The queue's binding as the history records it."""
    return queue_binding(queue=queue, executor=EXECUTOR)


def instance_type_resources(instance_type: InstanceType) -> list[str]:
    """What one instance of the type asks the cluster for."""
    binding = instance_type_binding(instance_type=instance_type, executor=EXECUTOR)
    return list(binding["slurm_resources"])


def slurm_binding_validate(
    *, queue: JobQueue, binding: Mapping
) -> tuple[dict[str, str], dict[str, list[str]]]:
    """The binding as it would be saved, and its problems by field."""
    return queue_binding_validate(queue=queue, executor=EXECUTOR, binding=binding_document(binding))


def slurm_resources_validate(resources) -> list[str]:
    """The sbatch options of one instance, checked (ValidationError on slurm_resources)."""
    checked = instance_type_binding_validate(
        executor=EXECUTOR, binding={"slurm_resources": resources}
    )
    return list(checked["slurm_resources"])


# A queue's binding.


def _binding_proposal(*, queue: JobQueue, binding: Mapping, expected_version: int, **_) -> Proposal:
    return Proposal(
        Kind.QUEUE_SLURM,
        {"binding": binding_document(binding)},
        {"queue": queue, "base_version": expected_version},
    )


@reviewable(_binding_proposal)
def queue_set_slurm_binding(
    *,
    actor,
    queue: JobQueue,
    binding: Mapping[str, str],
    reason: str,
    expected_version: int,
    cause: str = PolicyChange.Cause.EDIT,
    reverts: PolicyChange | None = None,
) -> PolicyWrite:
    """Bind the queue to the Slurm cluster, partition and account of `binding` (keys
    slurm_conf, slurm_partition, slurm_account; all "" unbinds it)."""
    reason = require_reason(reason)
    locked = lock_queue(queue.pk)
    before = queue_binding_document(locked)
    submitted = binding_document(binding)
    if locked.version != expected_version:
        raise VersionConflict(
            current=before,
            current_version=locked.version,
            submitted=submitted,
        )
    proposed, errors = slurm_binding_validate(queue=locked, binding=submitted)
    if errors:
        raise PolicyError(errors)
    if proposed == before:
        return PolicyWrite(applied=locked, entry=None)
    queue_binding_apply(queue=locked, executor=EXECUTOR, binding=proposed)
    entry = record_change(
        actor=actor,
        reason=reason,
        cause=cause,
        target=Target.QUEUE_SLURM,
        object_repr=str(locked),
        before=before,
        after=proposed,
        queue=locked,
        reverts=reverts,
    )
    return PolicyWrite(applied=locked, entry=entry)


def binding_validate(*, queue: JobQueue, binding: Mapping[str, str]) -> dict[str, list[str]]:
    """Every problem with `binding` as the queue's new binding (the preview's check)."""
    return slurm_binding_validate(queue=queue, binding=binding)[1]


def binding_impact(*, queue: JobQueue, binding: Mapping[str, str]) -> list[str]:
    """What saving `binding` would do, in sentences (the executor's binding says)."""
    return queue_binding_impact(queue=queue, executor=EXECUTOR, binding=binding_document(binding))


def _binding_revert(*, actor, change: PolicyChange, reason: str, diff) -> PolicyWrite:
    if change.queue is None or change.before is None:
        raise PolicyError({NON_FIELD: ["this change cannot be reverted"]})
    current = queue_binding_document(change.queue)
    restored = {**current, **{key: old for key, old, _new in diff if key in BINDING_FIELDS}}
    return queue_set_slurm_binding(
        actor=actor,
        queue=change.queue,
        binding=restored,
        reason=reason,
        expected_version=JobQueue.objects.get(pk=change.queue_id).version,
        **as_revert_of(change),
    )


def _binding_apply(proposal: PolicyProposal, **common) -> PolicyWrite:
    return queue_set_slurm_binding(
        queue=proposal.queue,
        binding=proposal.payload["binding"],
        expected_version=proposal.base_version,
        **common,
    )


register_proposal_kind(
    Kind.QUEUE_SLURM, target=Target.QUEUE_SLURM, apply=_binding_apply, revert=_binding_revert
)


# An instance type's Slurm resources.


def _resources_proposal(*, instance_type: InstanceType, resources, **_) -> Proposal:
    return Proposal(
        Kind.TYPE_SLURM,
        {"instance_type": instance_type.name, "slurm_resources": resources},
    )


@reviewable(_resources_proposal)
def instance_type_set_resources(
    *,
    actor,
    instance_type: InstanceType,
    resources: Sequence[str],
    reason: str,
    cause: str = PolicyChange.Cause.EDIT,
    reverts: PolicyChange | None = None,
) -> PolicyWrite:
    """Set the sbatch options that ask Slurm for one instance of the type."""
    reason = require_reason(reason)
    itype = InstanceType.objects.select_for_update().get(pk=instance_type.pk)
    try:
        resources = slurm_resources_validate(resources)
    except ValidationError as error:
        raise PolicyError(error.message_dict) from error
    before = instance_type_resources(itype)
    if resources == before:
        return PolicyWrite(applied=itype, entry=None)
    instance_type_binding_apply(
        instance_type=itype, executor=EXECUTOR, binding={"slurm_resources": resources}
    )
    entry = record_change(
        actor=actor,
        reason=reason,
        cause=cause,
        target=Target.INSTANCE_TYPE,
        object_repr=itype.name,
        before={"slurm_resources": before},
        after={"slurm_resources": resources},
        reverts=reverts,
    )
    return PolicyWrite(applied=itype, entry=entry)


def _resources_revert(*, actor, change: PolicyChange, reason: str, diff) -> PolicyWrite:
    itype = InstanceType.objects.filter(name=change.object_repr).first()
    if itype is None or change.before is None:
        raise PolicyError({NON_FIELD: ["the instance type of this change no longer exists"]})
    return instance_type_set_resources(
        actor=actor,
        instance_type=itype,
        resources=list(change.before.get("slurm_resources") or []),
        reason=reason,
        **as_revert_of(change),
    )


def _resources_apply(proposal: PolicyProposal, **common) -> PolicyWrite:
    payload = proposal.payload
    itype = InstanceType.objects.filter(name=payload["instance_type"]).first()
    if itype is None:
        raise PolicyError(
            {NON_FIELD: [f"instance type '{payload['instance_type']}' no longer exists"]}
        )
    return instance_type_set_resources(
        instance_type=itype, resources=payload["slurm_resources"], **common
    )


register_proposal_kind(
    Kind.TYPE_SLURM, target=Target.INSTANCE_TYPE, apply=_resources_apply, revert=_resources_revert
)


def instance_type_slurm_queues(instance_type: InstanceType) -> list[JobQueue]:
    """The Slurm queues whose capacity has this type: where its resources are asked for."""
    return list(
        executor_queues(executor=EXECUTOR)
        .filter(capacities__instance_type=instance_type)
        .distinct()
        .order_by("name")
    )


# Direct changes: `manage.py slurm_bind` and the other writers outside the editor.


def record_direct_binding_change(*, sender, instance, before: dict, after: dict, **_) -> None:
    if isinstance(instance, JobQueue):
        target, about = Target.QUEUE_SLURM, {"queue": instance}
    else:
        target, about = Target.INSTANCE_TYPE, {}
    record_change(
        actor=None,
        reason=DIRECT_REASON,
        cause=PolicyChange.Cause.DIRECT,
        target=target,
        object_repr=str(instance) if isinstance(instance, JobQueue) else instance.name,
        before=before,
        after=after,
        **about,
    )
