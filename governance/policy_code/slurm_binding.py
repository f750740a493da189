"""The Slurm binding as the policy files carry it (the native file's `slurm` of a queue
and `slurm_resources` of an instance type): read, checked and written through the
generic executor binding (governance.policy.executor_binding), under the Slurm
executor's name. A file format names the executor it binds; the policy writes do not.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from fleet.models import InstanceType, JobQueue
from governance.models import PolicyChange
from governance.policy.executor_binding import instance_type_binding_set, queue_binding_set
from governance.policy.reviewable import PolicyWrite
from scheduler.services.executor_bindings import (
    instance_type_binding,
    instance_type_binding_validate,
    queue_binding,
    queue_binding_validate,
)

EXECUTOR = "slurm"
BINDING_FIELDS = ("slurm_conf", "slurm_partition", "slurm_account")


def binding_document(binding: Mapping | None) -> dict[str, str]:
    return {name: (binding or {}).get(name) or "" for name in BINDING_FIELDS}


def queue_binding_document(queue: JobQueue) -> dict[str, str]:
    """The queue's Slurm binding (whatever its executor: a file may bind it ahead)."""
    return queue_binding(queue=queue, executor=EXECUTOR)


def instance_type_resources(instance_type: InstanceType) -> list[str]:
    return list(
        instance_type_binding(instance_type=instance_type, executor=EXECUTOR)["slurm_resources"]
    )


def slurm_binding_validate(*, queue: JobQueue, binding: Mapping):
    """The binding as it would be saved, and its problems by field."""
    return queue_binding_validate(queue=queue, executor=EXECUTOR, binding=binding_document(binding))


def slurm_resources_validate(resources) -> list[str]:
    """The sbatch options of one instance, checked (ValidationError on slurm_resources)."""
    checked = instance_type_binding_validate(
        executor=EXECUTOR, binding={"slurm_resources": resources}
    )
    return list(checked["slurm_resources"])


def queue_set_slurm_binding(*, binding: Mapping, **write) -> PolicyWrite:
    return queue_binding_set(binding=binding_document(binding), **write)


def instance_type_set_resources(
    *, resources: Sequence[str], cause: str = PolicyChange.Cause.EDIT, **write
) -> PolicyWrite:
    return instance_type_binding_set(
        executor=EXECUTOR, binding={"slurm_resources": list(resources)}, cause=cause, **write
    )
