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
from scheduler.executors import executor_named, registered
from scheduler.executors import queue_runs_on as queue_runs_on  # governance asks here
from scheduler.executors.base import BindingField, BindingSchema


def binding_schema(executor: str) -> BindingSchema:
    """The executor's binding schema; LookupError when it has none."""
    schema = executor_named(executor).binding
    if schema is None:
        raise LookupError(f"executor {executor} has no binding settings")
    return schema


def has_binding(executor: str) -> bool:
    try:
        return executor_named(executor).binding is not None
    except KeyError:
        return False


def binding_executors() -> list[str]:
    """The executors with binding settings, in registration order."""
    return [executor.name for executor in registered() if executor.binding is not None]


def queue_binding_fields(executor: str) -> list[BindingField]:
    """The queue's settings of the executor, described for a page (in the schema's order)."""
    schema = binding_schema(executor)
    return [_described(schema, name) for name in schema.queue_fields]


def instance_type_binding_fields(executor: str) -> list[BindingField]:
    schema = binding_schema(executor)
    return [_described(schema, name) for name in schema.instance_type_fields]


def _described(schema: BindingSchema, name: str) -> BindingField:
    described = getattr(schema, "field_descriptions", {}).get(name)
    return described or BindingField(name, name.replace("_", " ").capitalize())


def binding_field_labels() -> dict[str, str]:
    """Every binding field's label, by its name (what the history's diff says)."""
    return {
        field.name: field.label
        for executor in binding_executors()
        for field in queue_binding_fields(executor) + instance_type_binding_fields(executor)
    }


def instance_type_binding_executor(fields) -> str | None:
    """The executor whose instance-type settings have these fields (a history entry's
    document says whose it is by its keys); None when none has."""
    wanted = set(fields)
    for executor in binding_executors():
        if wanted and wanted <= set(binding_schema(executor).instance_type_fields):
            return executor
    return None


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
