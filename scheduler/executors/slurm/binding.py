"""A queue's binding to a Slurm cluster (its slurm.conf, partition and account) and an
instance type's Slurm resources (the sbatch options of one instance): the one place
that checks them, called by `manage.py slurm_bind`, the policy editor and the API alike.

`slurm_binding_validate` checks the form of what is given and then asks the cluster
whether the partition exists (`sinfo`, bounded by `SLURM_BIND_TIMEOUT`, 3 s by default).
A cluster that does not answer in time refuses the save, with an error on `slurm_conf`
saying so: a binding nobody could check turns into runs Slurm refuses later, when no
admin is watching, while an admin saving it can simply save again once the cluster
answers. The question is asked only when the binding changes, so an unreachable cluster
never blocks other edits of its queue. The account is checked for its form only: with
accounting off (the test cluster) Slurm has no list of accounts to ask.

A change of cluster is refused while the queue holds runs on the current one: the
reconciliation reads the cluster the queue names, so those runs would look lost (and be
requeued) while the old cluster still ran them. A change of partition may go on: runs
are found by name in the whole cluster.

`queue_bind_slurm` and `instance_type_set_slurm_resources` write what passed, outside
the policy editor (the command, the demo, the benchmarks); they send
`core.signals.executor_binding_written`, which the policy history records as a direct
change.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import F

from core.signals import executor_binding_written
from fleet.models import InstanceType, Job, JobQueue
from scheduler.executors.base import BindingField
from scheduler.executors.slurm.client import (
    EXECUTOR_NAME,
    Cluster,
    SlurmError,
    instances_per_node,
)

_SLURM_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
# sbatch options an instance type may ask for: resources and placement only. The run's
# name, files, environment, requeueing, node count and program are the executor's.
RESOURCE_OPTIONS = frozenset(
    {
        "constraint",
        "cpus-per-gpu",
        "cpus-per-task",
        "exclusive",
        "gpus-per-node",
        "gres",
        "mem",
        "mem-per-cpu",
        "mem-per-gpu",
        "qos",
        "reservation",
        "tmp",
    }
)
_OPTION = re.compile(r"^--(?P<name>[a-z][a-z-]*)(?:=(?P<value>[A-Za-z0-9_.:,=+-]+))?$")
MAX_RESOURCE_OPTIONS = 16

BINDING_FIELDS = ("slurm_conf", "slurm_partition", "slurm_account")
# Their keys in the queue's `executor_settings[EXECUTOR_NAME]`, and the instance type's.
_SETTING_KEYS = ("conf", "partition", "account")
_RESOURCES_KEY = "resources"


def queue_settings(queue: JobQueue) -> dict:
    """This executor's settings on the queue ({} when it has none)."""
    return dict((queue.executor_settings or {}).get(EXECUTOR_NAME) or {})


def instance_type_resources(instance_type: InstanceType) -> list[str]:
    """The sbatch options of one instance of the type ([] when none are set)."""
    stored = (instance_type.executor_settings or {}).get(EXECUTOR_NAME) or {}
    return list(stored.get(_RESOURCES_KEY) or [])


def _with_settings(holder: JobQueue | InstanceType, settings: dict) -> dict:
    """The holder's `executor_settings` with this executor's replaced (dropped when empty)."""
    others = {
        name: value
        for name, value in (holder.executor_settings or {}).items()
        if name != EXECUTOR_NAME
    }
    return {**others, EXECUTOR_NAME: settings} if any(settings.values()) else others


def bind_timeout() -> float:
    """How long the binding's check waits for the cluster (`SLURM_BIND_TIMEOUT`)."""
    return float(getattr(settings, "SLURM_BIND_TIMEOUT", 3))


@dataclass(frozen=True)
class SlurmBinding:
    """A queue's Slurm binding; all three "" = bound to no cluster."""

    conf: str = ""
    partition: str = ""
    account: str = ""

    @classmethod
    def of(cls, queue: JobQueue) -> SlurmBinding:
        stored = queue_settings(queue)
        return cls(*(stored.get(key) or "" for key in _SETTING_KEYS))

    def settings(self) -> dict[str, str]:
        """The binding as `executor_settings` stores it."""
        return dict(zip(_SETTING_KEYS, (self.conf, self.partition, self.account), strict=True))

    @classmethod
    def from_document(cls, doc) -> SlurmBinding:
        return cls(*((doc or {}).get(name) or "" for name in BINDING_FIELDS))

    @property
    def bound(self) -> bool:
        return bool(self.conf)

    def document(self) -> dict[str, str]:
        """The binding as the policy history and the API show it."""
        return dict(zip(BINDING_FIELDS, (self.conf, self.partition, self.account), strict=True))

    def describe(self) -> str:
        if not self.bound:
            return "bound to no Slurm cluster"
        account = f", account {self.account}" if self.account else ""
        return f"{self.conf}, partition {self.partition}{account}"


def _partitions(conf: str) -> list[str]:
    """The cluster's partitions, hidden ones included; SlurmError when it does not answer."""
    out = Cluster(conf, timeout=bind_timeout()).run("sinfo", "--all", "--noheader", "--format=%R")
    return sorted({line.strip() for line in out.splitlines() if line.strip()})


def slurm_binding_validate(
    *, queue: JobQueue, conf: str, partition: str, account: str = ""
) -> tuple[SlurmBinding, dict[str, list[str]]]:
    """The binding as it would be saved (stripped), and every problem with it, field by
    field; nothing is changed. An unchanged binding is not asked of the cluster again."""
    binding = SlurmBinding((conf or "").strip(), (partition or "").strip(), (account or "").strip())
    errors: dict[str, list[str]] = {}
    if binding == SlurmBinding.of(queue):
        return binding, errors
    if not binding.bound and not binding.partition and not binding.account:
        _check_live_runs(queue, binding, errors)
        return binding, errors  # unbinding
    if not binding.conf:
        errors["slurm_conf"] = ["give the path of the cluster's slurm.conf (SLURM_CONF)"]
    elif not Path(binding.conf).is_absolute():
        errors["slurm_conf"] = [f"'{binding.conf}' is not an absolute path"]
    elif not Path(binding.conf).is_file():
        errors["slurm_conf"] = [f"no file at '{binding.conf}'"]
    if not _SLURM_NAME.match(binding.partition):
        errors["slurm_partition"] = [
            "give the Slurm partition: letters, digits, '_', '.', '-' (at most 64)"
        ]
    if binding.account and not _SLURM_NAME.match(binding.account):
        errors["slurm_account"] = ["a Slurm account is letters, digits, '_', '.', '-' (at most 64)"]
    _check_live_runs(queue, binding, errors)
    if errors:
        return binding, errors
    try:
        partitions = _partitions(binding.conf)
    except SlurmError as error:
        why = "refused the question" if error.refused else "did not answer"
        errors["slurm_conf"] = [
            f"the cluster of '{binding.conf}' {why} ({error}), so partition "
            f"'{binding.partition}' could not be checked; nothing was saved: save again "
            "once the cluster answers"
        ]
        return binding, errors
    if binding.partition not in partitions:
        known = ", ".join(partitions) or "none"
        errors["slurm_partition"] = [
            f"the cluster of '{binding.conf}' has no partition '{binding.partition}' "
            f"(it has: {known})"
        ]
    return binding, errors


def _check_live_runs(queue: JobQueue, binding: SlurmBinding, errors: dict) -> None:
    current = SlurmBinding.of(queue).conf
    if binding.conf == current or not current or queue.pk is None:
        return
    live = Job.objects.filter(queue=queue, state__in=Job.HOLDING_STATES).count()
    if live:
        errors.setdefault("slurm_conf", []).append(
            f"{live} job{'s' if live != 1 else ''} of queue '{queue.name}' hold capacity on "
            f"the cluster of '{current}': let them end (or stop them) before moving "
            "the queue to another cluster"
        )


def slurm_binding_check(*, queue: JobQueue, conf: str, partition: str, account: str = ""):
    """slurm_binding_validate, raising its problems as one ValidationError."""
    binding, errors = slurm_binding_validate(
        queue=queue, conf=conf, partition=partition, account=account
    )
    if errors:
        raise ValidationError(errors)
    return binding


def slurm_binding_apply(queue: JobQueue, binding: SlurmBinding) -> None:
    """Store a checked binding and take the queue to its next version (an editor open on
    the old one gets a conflict). The nodes seen belong to the old partition."""
    JobQueue.objects.filter(pk=queue.pk).update(
        executor_settings=_with_settings(queue, binding.settings()),
        capacity_seen=None,
        version=F("version") + 1,
    )
    queue.refresh_from_db()


@transaction.atomic
def queue_bind_slurm(*, queue: JobQueue, conf: str, partition: str, account: str = "") -> JobQueue:
    """Bind a queue to a Slurm cluster (its slurm.conf), partition and account, outside
    the policy editor (recorded as a direct change)."""
    locked = JobQueue.objects.select_for_update().get(pk=queue.pk)
    before = SlurmBinding.of(locked)
    binding = slurm_binding_check(queue=locked, conf=conf, partition=partition, account=account)
    if binding != before:
        slurm_binding_apply(locked, binding)
        executor_binding_written.send(
            sender=JobQueue, instance=locked, before=before.document(), after=binding.document()
        )
        queue.refresh_from_db()  # the caller's object says what was saved
    return queue


def slurm_resources_validate(resources) -> list[str]:
    """The sbatch options of one instance, checked: a list of `--option[=value]`."""
    if not isinstance(resources, list) or not all(isinstance(r, str) for r in resources):
        raise ValidationError({"slurm_resources": ["give a list of sbatch options"]})
    if len(resources) > MAX_RESOURCE_OPTIONS:
        raise ValidationError(
            {"slurm_resources": [f"at most {MAX_RESOURCE_OPTIONS} options, not {len(resources)}"]}
        )
    for option in resources:
        match = _OPTION.match(option)
        if match is None:
            raise ValidationError(
                {
                    "slurm_resources": [
                        f"'{option}' is not an sbatch option (--name or --name=value)"
                    ]
                }
            )
        if match["name"] not in RESOURCE_OPTIONS:
            allowed = ", ".join(f"--{name}" for name in sorted(RESOURCE_OPTIONS))
            raise ValidationError(
                {"slurm_resources": [f"--{match['name']} is not a resource option ({allowed})"]}
            )
    return list(resources)


def instance_type_resources_apply(instance_type: InstanceType, resources: list[str]) -> None:
    """Store checked resources on the instance type."""
    instance_type.executor_settings = _with_settings(instance_type, {_RESOURCES_KEY: resources})
    instance_type.save(update_fields=["executor_settings"])


def instance_type_set_slurm_resources(*, instance_type: InstanceType, resources) -> InstanceType:
    """Set what one instance of the type asks Slurm for, outside the policy editor
    (recorded as a direct change)."""
    resources = slurm_resources_validate(resources)
    before = instance_type_resources(instance_type)
    if resources != before:
        instance_type_resources_apply(instance_type, resources)
        executor_binding_written.send(
            sender=InstanceType,
            instance=instance_type,
            before={"slurm_resources": before},
            after={"slurm_resources": resources},
        )
    return instance_type


def slurm_executor_queues():
    """The queues this executor runs."""
    return JobQueue.objects.filter(executor=EXECUTOR_NAME)


def binding_impact(*, queue: JobQueue, binding) -> list[str]:
    """What saving `binding` would do, in sentences: where the queue's next jobs go, what
    the partition's nodes fit of the queue's capacity, what happens to running jobs."""
    before = SlurmBinding.of(queue)
    after = SlurmBinding.from_document(binding)
    if after == before:
        return [f"Nothing changes: the queue stays {before.describe()}."]
    lines = []
    if queue.executor != EXECUTOR_NAME:
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
        resources = instance_type_resources(itype)
        if not resources:
            lines.append(
                f"{itype.name} asks Slurm for no resources yet: set them on the instance type "
                "before the queue's jobs of that type can start."
            )
            continue
        fits = sum(instances_per_node(resources, node) for node in usable)
        verdict = "" if fits >= cap.instances else f", {cap.instances - fits} short"
        lines.append(
            f"Its nodes in service fit {fits} × {itype.name} "
            f"({' '.join(resources)}); the queue's capacity is "
            f"{cap.instances}{verdict}."
        )
    return lines


class SlurmBindingSchema:
    """The binding as every executor's (`base.BindingSchema`): documents keyed as the
    policy history and the API show them (BINDING_FIELDS, `slurm_resources`)."""

    queue_fields = BINDING_FIELDS
    instance_type_fields = ("slurm_resources",)
    field_descriptions = {
        field.name: field
        for field in (
            BindingField(
                "slurm_conf",
                "Slurm cluster (slurm.conf)",
                "The absolute path of the cluster's slurm.conf (what SLURM_CONF names).",
            ),
            BindingField(
                "slurm_partition",
                "Slurm partition",
                "A partition of that cluster; it is checked with the cluster when you save.",
                max_length=64,
            ),
            BindingField(
                "slurm_account",
                "Slurm account",
                "Leave empty for the user's default account.",
                max_length=64,
            ),
            BindingField(
                "slurm_resources",
                "Slurm resources of one instance",
                "sbatch options, e.g. --gres=gpu:a100:1 for a GPU, or --exclusive "
                "--constraint=a100 for a whole node. Empty: none.",
                many=True,
                max_length=2000,
            ),
        )
    }

    def queue_document(self, queue: JobQueue) -> dict:
        return SlurmBinding.of(queue).document()

    def queue_validate(self, *, queue: JobQueue, binding) -> tuple[dict, dict[str, list[str]]]:
        submitted = SlurmBinding.from_document(binding)
        proposed, errors = slurm_binding_validate(
            queue=queue,
            conf=submitted.conf,
            partition=submitted.partition,
            account=submitted.account,
        )
        return proposed.document(), errors

    def queue_apply(self, *, queue: JobQueue, binding) -> None:
        slurm_binding_apply(queue, SlurmBinding.from_document(binding))

    def queue_impact(self, *, queue: JobQueue, binding) -> list[str]:
        return binding_impact(queue=queue, binding=binding)

    def describe(self, binding) -> str:
        return SlurmBinding.from_document(binding).describe()

    def instance_type_document(self, instance_type: InstanceType) -> dict:
        return {"slurm_resources": instance_type_resources(instance_type)}

    def instance_type_validate(self, binding) -> dict:
        return {"slurm_resources": slurm_resources_validate(binding.get("slurm_resources"))}

    def instance_type_apply(self, *, instance_type: InstanceType, binding) -> None:
        instance_type_resources_apply(instance_type, list(binding["slurm_resources"]))
