"""An executor's binding, for callers that must not know any executor's internals (the
policy editor, policy as code): a queue's settings (where its executor runs its jobs)
and an instance type's (what one instance asks for), read, checked, described and
written through the executor's binding schema (`Executor.binding`,
scheduler.executors.base.BindingSchema).

Documents are the keys the policy history and the API show (`queue_fields`,
`instance_type_fields` of the schema); how they are stored on the rows
(`executor_settings`) is the executor's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.db.models import QuerySet

from fleet.models import InstanceType, JobQueue
from scheduler.executors import executor_named
from scheduler.executors.base import BindingSchema


def binding_schema(executor: str) -> BindingSchema:
    """The executor's binding schema; LookupError when it has none."""
    schema = executor_named(executor).binding
    if schema is None:
        raise LookupError(f"executor {executor} has no binding settings")
    return schema


def executor_queues(*, executor: str) -> QuerySet[JobQueue]:
    """The queues the executor runs."""
    return JobQueue.objects.filter(executor=executor)


def queue_binding(*, queue: JobQueue, executor: str) -> dict[str, Any]:
    return binding_schema(executor).queue_document(queue)


def queue_binding_validate(
    *, queue: JobQueue, executor: str, binding: Mapping[str, Any]
) -> tuple[dict[str, Any], dict[str, list[str]]]:
    """The binding as it would be saved, and its problems by field (a live check of a
    changed binding included); nothing is changed."""
    return binding_schema(executor).queue_validate(queue=queue, binding=binding)


def queue_binding_apply(*, queue: JobQueue, executor: str, binding: Mapping[str, Any]) -> None:
    """Store a checked binding (the caller holds the queue's lock)."""
    binding_schema(executor).queue_apply(queue=queue, binding=binding)


def queue_binding_impact(
    *, queue: JobQueue, executor: str, binding: Mapping[str, Any]
) -> list[str]:
    return binding_schema(executor).queue_impact(queue=queue, binding=binding)


def queue_binding_describe(*, executor: str, binding: Mapping[str, Any]) -> str:
    return binding_schema(executor).describe(binding)


def instance_type_binding(*, instance_type: InstanceType, executor: str) -> dict[str, Any]:
    return binding_schema(executor).instance_type_document(instance_type)


def instance_type_binding_validate(*, executor: str, binding: Mapping[str, Any]) -> dict:
    """The instance type's settings as they would be saved; ValidationError by field."""
    return binding_schema(executor).instance_type_validate(binding)


def instance_type_binding_apply(
    *, instance_type: InstanceType, executor: str, binding: Mapping[str, Any]
) -> None:
    binding_schema(executor).instance_type_apply(instance_type=instance_type, binding=binding)
