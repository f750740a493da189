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
from fleet.models import InstanceType, Job, JobQueue
from governance.models import PolicyChange, PolicyProposal
from governance.policy.membership import DIRECT_REASON
from governance.policy.services import (
    _REVIEWED,
    PolicyError,
    PolicyWrite,
    VersionConflict,
    _Proposal,
    _record,
    _require_reason,
    register_revert,
    reviewable,
)
from scheduler.executors.slurm.binding import (
    BINDING_FIELDS,
    SlurmBinding,
    bind_timeout,
    slurm_binding_apply,
    slurm_binding_validate,
    slurm_resources_validate,
)
from scheduler.executors.slurm.client import Cluster, SlurmError, instances_per_node
from scheduler.executors.slurm.services import slurm_executor_queues

Kind = PolicyProposal.Kind
Target = PolicyChange.Target

__all__ = [
    "BINDING_FIELDS",
    "SlurmBinding",
    "binding_impact",
    "instance_type_set_resources",
    "queue_set_slurm_binding",
    "record_direct_binding_change",
    "slurm_binding_validate",
    "slurm_resources_validate",
]


# A queue's binding.


def _binding_proposal(
    *, queue: JobQueue, binding: Mapping, expected_version: int, **_
) -> _Proposal:
    return _Proposal(
        Kind.QUEUE_SLURM,
        {"binding": SlurmBinding.from_document(binding).document()},
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
    reason = _require_reason(reason)
    locked = lock_queue(queue.pk)
    before = SlurmBinding.of(locked)
    submitted = SlurmBinding.from_document(binding)
    if locked.version != expected_version:
        raise VersionConflict(
            current=before.document(),
            current_version=locked.version,
            submitted=submitted.document(),
        )
    proposed, errors = slurm_binding_validate(
        queue=locked,
        conf=submitted.conf,
        partition=submitted.partition,
        account=submitted.account,
    )
    if errors:
        raise PolicyError(errors)
    if proposed == before:
        return PolicyWrite(applied=locked, entry=None)
    slurm_binding_apply(locked, proposed)
    entry = _record(
        actor=actor,
        reason=reason,
        cause=cause,
        target=Target.QUEUE_SLURM,
        object_repr=str(locked),
        before=before.document(),
        after=proposed.document(),
        queue=locked,
        reverts=reverts,
    )
    return PolicyWrite(applied=locked, entry=entry)


def binding_validate(*, queue: JobQueue, binding: Mapping[str, str]) -> dict[str, list[str]]:
    """Every problem with `binding` as the queue's new binding (the preview's check)."""
    submitted = SlurmBinding.from_document(binding)
    return slurm_binding_validate(
        queue=queue, conf=submitted.conf, partition=submitted.partition, account=submitted.account
    )[1]


def binding_impact(*, queue: JobQueue, binding: Mapping[str, str]) -> list[str]:
    """What saving `binding` would do, in sentences: where the queue's next jobs go, what
    the partition's nodes fit of the queue's capacity, what happens to running jobs."""
    before = SlurmBinding.of(queue)
    after = SlurmBinding.from_document(binding)
    if after == before:
        return [f"Nothing changes: the queue stays {before.describe()}."]
    lines = []
    if not slurm_executor_queues().filter(pk=queue.pk).exists():
        lines.append(
            f"The queue's executor is {queue.executor}: its jobs do not run on Slurm, so "
            "the binding is kept for when it does."
        )
    if not after.bound:
        lines.append(
            "The queue will be bound to no Slurm cluster: none of its jobs can start there."
        )
        return lines
    lines.append(f"Jobs the queue starts from now on are submitted to {after.describe()}.")
    live = Job.objects.filter(queue=queue, state__in=Job.HOLDING_STATES).count()
    if live and before.bound:
        lines.append(
            f"{live} job{'s' if live != 1 else ''} holding capacity now keep running where "
            "they are until they end."
        )
    try:
        nodes = Cluster(after.conf, timeout=bind_timeout()).nodes(after.partition)
    except SlurmError as error:
        lines.append(f"The cluster did not answer ({error}): the partition's nodes are unknown.")
        return lines
    usable = [node for node in nodes if node.usable]
    lines.append(
        f"Partition {after.partition} has {len(nodes)} node{'s' if len(nodes) != 1 else ''}, "
        f"{len(usable)} in service."
    )
    for cap in queue.capacities.select_related("instance_type").order_by("instance_type__name"):
        itype = cap.instance_type
        if not itype.slurm_resources:
            lines.append(
                f"{itype.name} asks Slurm for no resources yet: set them on the instance type "
                "before the queue's jobs of that type can start."
            )
            continue
        fits = sum(instances_per_node(list(itype.slurm_resources), node) for node in usable)
        verdict = "" if fits >= cap.instances else f", {cap.instances - fits} short"
        lines.append(
            f"Its nodes in service fit {fits} × {itype.name} "
            f"({' '.join(itype.slurm_resources)}); the queue's capacity is "
            f"{cap.instances}{verdict}."
        )
    return lines


def _binding_revert(*, actor, change: PolicyChange, reason: str, diff) -> PolicyWrite:
    if change.queue is None or change.before is None:
        raise PolicyError({NON_FIELD: ["this change cannot be reverted"]})
    current = SlurmBinding.of(change.queue).document()
    restored = {**current, **{key: old for key, old, _new in diff if key in BINDING_FIELDS}}
    return queue_set_slurm_binding(
        actor=actor,
        queue=change.queue,
        binding=restored,
        reason=reason,
        expected_version=JobQueue.objects.get(pk=change.queue_id).version,
        cause=PolicyChange.Cause.REVERT,
        reverts=change,
        approved=_REVIEWED,
    )


# An instance type's Slurm resources.


def _resources_proposal(*, instance_type: InstanceType, resources, **_) -> _Proposal:
    return _Proposal(
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
    reason = _require_reason(reason)
    itype = InstanceType.objects.select_for_update().get(pk=instance_type.pk)
    try:
        resources = slurm_resources_validate(resources)
    except ValidationError as error:
        raise PolicyError(error.message_dict) from error
    before = list(itype.slurm_resources or [])
    if resources == before:
        return PolicyWrite(applied=itype, entry=None)
    itype.slurm_resources = resources
    itype.save(update_fields=["slurm_resources"])
    entry = _record(
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
        cause=PolicyChange.Cause.REVERT,
        reverts=change,
        approved=_REVIEWED,
    )


def instance_type_slurm_queues(instance_type: InstanceType) -> list[JobQueue]:
    """The Slurm queues whose capacity has this type: where its resources are asked for."""
    return list(
        slurm_executor_queues()
        .filter(capacities__instance_type=instance_type)
        .distinct()
        .order_by("name")
    )


# Approving a proposal (governance.proposals.services).

PROPOSAL_KINDS = frozenset({Kind.QUEUE_SLURM, Kind.TYPE_SLURM})


def proposal_apply(proposal: PolicyProposal, **common) -> PolicyWrite:
    """Carry out an approved binding or resources proposal through its write."""
    payload = proposal.payload
    if proposal.kind == Kind.QUEUE_SLURM:
        return queue_set_slurm_binding(
            queue=proposal.queue,
            binding=payload["binding"],
            expected_version=proposal.base_version,
            **common,
        )
    itype = InstanceType.objects.filter(name=payload["instance_type"]).first()
    if itype is None:
        raise PolicyError(
            {NON_FIELD: [f"instance type '{payload['instance_type']}' no longer exists"]}
        )
    return instance_type_set_resources(
        instance_type=itype, resources=payload["slurm_resources"], **common
    )


# Direct changes: `manage.py slurm_bind` and the other writers outside the editor.


def record_direct_binding_change(*, sender, instance, before: dict, after: dict, **_) -> None:
    if isinstance(instance, JobQueue):
        target, about = Target.QUEUE_SLURM, {"queue": instance}
    else:
        target, about = Target.INSTANCE_TYPE, {}
    _record(
        actor=None,
        reason=DIRECT_REASON,
        cause=PolicyChange.Cause.DIRECT,
        target=target,
        object_repr=str(instance) if isinstance(instance, JobQueue) else instance.name,
        before=before,
        after=after,
        **about,
    )


register_revert(Target.QUEUE_SLURM, _binding_revert)
register_revert(Target.INSTANCE_TYPE, _resources_revert)
