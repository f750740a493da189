"""Plan and apply a policy file: the diff against the live policy, its impact, and the
writes, all through the policy services the editor uses.

A plan compares each part of the file with the live policy, exactly as the history
will record the change (share_document / urgency_document / the queue's capacity):
shares added, changed field by field, and removed. The product never deletes a share
(its jobs and history point to it), so a share the file leaves out is *removed* by
disabling it, and the plan shows that as its state going to DISABLED. Queues, teams,
instance types and urgency definitions the file leaves out stay as they are.

Workload classes are a vocabulary: a file with a `workload_classes` section holds all
of them, so a class it leaves out is deleted (refused at plan time while a share's
default or a job definition would still name it); a file without the section leaves
them as they are, and the plan says so. A share's default class is part of its
document (`default_workload_class`, by name): named in the file, it must be a class
there will be; absent, the share keeps its own. The impact preview adds what the whole
change does to the lenders' worst-case time to get capacity back, in every queue.

The whole proposed policy of each queue is checked at once by the engine's
validate_policy, and each problem is reported at the file's own line and field. The
impact preview is the engine's, for the whole change of each queue.

Applying runs in one transaction: teams and instance types the file needs are created,
then workload classes added or changed, urgency definitions, queue capacity and shares
are written, and last the classes the file deletes, all by governance.policy.services
and governance.policy.workload_classes (validation, optimistic locking against the versions the
plan read, one history entry per changed object with cause "import" and a reason that
names the file). Any refusal rolls everything back.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from django.core.exceptions import ValidationError
from django.db import transaction

from core import bounds, rules
from core.errors import Conflict
from engine import validate_policy
from fleet.executors import DEFAULT_EXECUTOR
from fleet.locks import lock_queues_named
from fleet.models import (
    DEFAULT_PRIORITY_CEILING,
    InstanceType,
    JobQueue,
    QuotaShare,
    Team,
    UrgencyDefinition,
    WorkloadClass,
)
from governance.models import PolicyChange
from governance.policy.impact import ImpactLine, policy_bound_impact, policy_impact
from governance.policy.reviewable import changes_need_review
from governance.policy.services import (
    KEEP_CLASS,
    NON_FIELD,
    PolicyError,
    VersionConflict,
    changed_fields,
    queue_create,
    queue_set_capacity,
    share_create,
    share_data_from_document,
    share_update,
    share_validate_in_policy,
    urgency_document,
    urgency_save,
)
from governance.policy.workload_classes import (
    workload_class_delete,
    workload_class_document,
    workload_class_save,
    workload_class_validate,
)
from governance.policy_code import aws_sync
from governance.policy_code.lengths import check_lengths
from governance.policy_code.live import LiveQueue, live_queue
from governance.policy_code.model import (
    KEEP,
    PolicyFile,
    QueueSpec,
    ShareSpec,
    TeamSpec,
    WorkloadClassSpec,
)
from governance.policy_code.slurm_binding import (
    instance_type_resources,
    instance_type_set_resources,
    queue_binding_document,
    queue_set_slurm_binding,
    slurm_binding_validate,
    slurm_resources_validate,
)
from governance.policy_code.source import FileProblem, Lines, PolicyFileError, Problems, child

# REMOVED: a share the file leaves out, disabled; DELETED: a workload class it leaves out.
ADDED, CHANGED, REMOVED, DELETED = "added", "changed", "removed", "deleted"


@dataclass(frozen=True)
class Change:
    """One object the apply will write, with the documents the history will record."""

    target: str  # PolicyChange.Target
    action: str
    name: str
    queue: str | None
    before: dict | None
    after: dict | None

    @property
    def fields(self) -> list[tuple[str, object, object]]:
        return changed_fields(self.before, self.after)


@dataclass
class QueuePlan:
    name: str
    queue: JobQueue | None  # None: the apply creates it
    spec: QueueSpec
    capacity: dict[str, int]
    share_docs: list[dict]  # every share as it will be, in entitlement order
    capacity_change: Change | None = None
    share_changes: list[Change] = field(default_factory=list)
    binding_change: Change | None = None  # the queue's Slurm binding
    impact: list[ImpactLine] = field(default_factory=list)
    version: int | None = None
    share_versions: dict[str, int] = field(default_factory=dict)
    capacity_before_shares: list[dict[str, int]] = field(default_factory=list)
    capacity_after_shares: dict[str, int] | None = None

    @property
    def changes(self) -> list[Change]:
        return (
            ([self.capacity_change] if self.capacity_change else [])
            + self.share_changes
            + ([self.binding_change] if self.binding_change else [])
        )


@dataclass
class Plan:
    format: str
    source: str
    lines: Lines
    teams: list[TeamSpec]
    instance_types: list
    urgency_changes: list[Change]
    queues: list[QueuePlan]
    warnings: list[str]
    # Classes added or changed (written first, so shares may name them) and deleted
    # (last, once no share of the file names them).
    class_changes: list[Change] = field(default_factory=list)
    # What the class changes do to the queues the file does not describe.
    other_impact: list[ImpactLine] = field(default_factory=list)

    @property
    def class_writes(self) -> list[Change]:
        return [change for change in self.class_changes if change.action != DELETED]

    @property
    def class_deletions(self) -> list[Change]:
        return [change for change in self.class_changes if change.action == DELETED]

    @property
    def changes(self) -> list[Change]:
        return (
            self.class_writes
            + self.urgency_changes
            + [change for queue in self.queues for change in queue.changes]
            + self.class_deletions
        )

    @property
    def is_empty(self) -> bool:
        return not (self.changes or self.teams or self.instance_types)

    def versions(self) -> dict:
        """What the plan read: the apply refuses to go on if any of it changed since."""
        return {
            "queues": {plan.name: plan.version for plan in self.queues},
            "shares": {
                f"{plan.name}/{name}": version
                for plan in self.queues
                for name, version in sorted(plan.share_versions.items())
            },
            "urgencies": {
                change.name: _urgency_version(change.name) for change in self.urgency_changes
            },
            "workload_classes": {
                change.name: _class_version(change.name) for change in self.class_changes
            },
        }


class PlanOutdated(Conflict):
    """The live policy changed after the plan was made."""

    def __init__(self, detail: str):
        super().__init__(
            {
                "versions": [
                    f"{detail} changed since this plan was made: plan again and review the new diff"
                ]
            }
        )


def _urgency_version(name: str) -> int | None:
    return UrgencyDefinition.objects.filter(name=name).values_list("version", flat=True).first()


def _class_version(name: str) -> int | None:
    return WorkloadClass.objects.filter(name=name).values_list("version", flat=True).first()


ENGINE_FIELDS = (
    "name",
    "capacity_limits",
    "strategy",
    "borrow_limit",
    "in_share_preemption",
    "state",
)


def _engine_doc(doc: dict) -> dict:
    """The share in the scenario format the engine validates (no team, no ceiling)."""
    return {key: value for key, value in doc.items() if key in ENGINE_FIELDS}


# Planning.


def policy_plan(*, policy: PolicyFile) -> Plan:
    """The diff, checks and impact of applying `policy`; raises PolicyFileError naming the
    file's lines and fields when any part of it breaks a rule. Changes nothing."""
    problems = Problems(policy.lines)
    check_lengths(policy, problems)
    warnings = list(policy.warnings)
    teams = _teams(policy, problems, warnings)
    types = _instance_types(policy, problems, warnings)
    known_teams = set(Team.objects.values_list("name", flat=True)) | {t.name for t in teams}
    known_types = set(InstanceType.objects.values_list("name", flat=True)) | {t.name for t in types}
    urgency_changes = _urgency_changes(policy, problems, known_teams)
    class_changes = _class_changes(policy, problems, warnings)
    classes = _Classes.of(policy)
    queues = []
    names: set[str] = set()
    for spec in policy.queues:
        if spec.name in names:
            problems.add(spec.path, f"queue '{spec.name}' is described twice")
            continue
        names.add(spec.name)
        queues.append(
            _queue_plan(policy, spec, problems, warnings, known_teams, known_types, classes)
        )
    _check_deletions(class_changes, queues, problems)
    problems.raise_if_any()
    class_docs = classes.documents() if class_changes else None
    for plan in queues:
        if plan.queue is not None and (plan.changes or class_docs is not None):
            if plan.changes:
                plan.impact = policy_impact(
                    queue=plan.queue,
                    share_docs=plan.share_docs,
                    capacity=plan.capacity if plan.capacity_change else None,
                )
            plan.impact += policy_bound_impact(
                queue=plan.queue, share_docs=plan.share_docs, classes=class_docs
            )
    return Plan(
        format=policy.format,
        source=policy.source,
        lines=policy.lines,
        teams=teams,
        instance_types=types,
        urgency_changes=urgency_changes,
        queues=queues,
        warnings=warnings,
        class_changes=class_changes,
        other_impact=_other_impact(class_docs, names),
    )


@dataclass(frozen=True)
class _Classes:
    """The workload classes there will be, by name (the file's when it has the section,
    else the live ones), and the live ones the file deletes."""

    after: dict[str, dict]
    deleted: frozenset[str]
    described: bool  # the file has a workload_classes section

    @classmethod
    def of(cls, policy: PolicyFile) -> _Classes:
        live = {wc.name: workload_class_document(wc) for wc in WorkloadClass.objects.all()}
        if policy.workload_classes is None:
            return cls(after=live, deleted=frozenset(), described=False)
        after = {spec.name: spec.doc for spec in policy.workload_classes}
        return cls(after=after, deleted=frozenset(set(live) - set(after)), described=True)

    def documents(self) -> dict[str, dict]:
        return self.after

    def problem(self, name: str) -> str | None:
        """Why a share cannot name the class `name` as its default, or None."""
        if name in self.after:
            return None
        if name in self.deleted:
            return (
                f"workload class '{name}' is not under workload_classes, so this file deletes "
                "it: keep it there, or choose another class"
            )
        where = ": define it under workload_classes" if self.described else ""
        return f"unknown workload class '{name}'{where}"


def _class_changes(policy: PolicyFile, problems: Problems, warnings: list[str]) -> list[Change]:
    """The classes the file adds, changes and (leaving them out) deletes, each checked by
    the editor's own rules at the file's field."""
    if policy.workload_classes is None:
        if policy.has_class_section:
            warnings.append(
                "the file has no workload_classes section: the workload classes stay as they are"
            )
        return []
    live = {wc.name: wc for wc in WorkloadClass.objects.all()}
    changes = []
    for spec in policy.workload_classes:
        current = live.get(spec.name)
        for key, messages in workload_class_validate(spec.doc, workload_class=current).items():
            for message in messages:
                problems.add(spec.field_path(key), message)
        before = workload_class_document(current) if current else None
        if before != spec.doc:
            changes.append(
                Change(
                    target=PolicyChange.Target.WORKLOAD_CLASS,
                    action=CHANGED if current else ADDED,
                    name=spec.name,
                    queue=None,
                    before=before,
                    after=spec.doc,
                )
            )
    named = {spec.name for spec in policy.workload_classes}
    for name in sorted(set(live) - named):
        changes.append(
            Change(
                target=PolicyChange.Target.WORKLOAD_CLASS,
                action=DELETED,
                name=name,
                queue=None,
                before=workload_class_document(live[name]),
                after=None,
            )
        )
    return changes


def _check_deletions(changes: list[Change], queues: list[QueuePlan], problems: Problems) -> None:
    """A class the file deletes must be used by nothing once the file is applied: no
    share's default (the shares of the file's queues as the file leaves them, the others
    as they are) and no job definition (which a file does not describe). A share the file
    lists that still names it was reported at its own field."""
    planned = {
        (plan.name, doc["name"]): doc.get("default_workload_class")
        for plan in queues
        for doc in plan.share_docs
    }
    listed = {(plan.name, share.name) for plan in queues for share in plan.spec.shares}
    for change in changes:
        if change.action != DELETED:
            continue
        workload_class = WorkloadClass.objects.get(name=change.name)
        users = [
            f"the default of share {share}"
            for share in workload_class.default_of_shares.select_related("queue").order_by(
                "queue__name", "name"
            )
            if (share.queue.name, share.name) not in listed
            and planned.get((share.queue.name, share.name), change.name) == change.name
        ]
        users += [
            f"job definition {revision}"
            for revision in workload_class.definition_revisions.select_related(
                "definition"
            ).order_by("definition__name", "revision")
        ]
        if users:
            shown = "; ".join(users[:5]) + (
                f"; and {len(users) - 5} more" if len(users) > 5 else ""
            )
            problems.add(
                "workload_classes",
                f"workload class '{change.name}' is not in the file, so it would be deleted, "
                f"but it is in use ({shown}): keep it in the file, or choose another class "
                "there first",
            )


def _other_impact(class_docs: dict | None, described: set[str]) -> list[ImpactLine]:
    """The class changes' effect on the queues the file does not describe."""
    if class_docs is None:
        return []
    lines = []
    for queue in JobQueue.objects.exclude(name__in=described).order_by("name"):
        lines += [
            replace(line, text=f"{queue.name}: {line.text}")
            for line in policy_bound_impact(queue=queue, classes=class_docs)
        ]
    return lines


def _teams(policy: PolicyFile, problems: Problems, warnings: list[str]) -> list[TeamSpec]:
    existing = {team.name: team for team in Team.objects.all()}
    wanted = {team.name: team for team in policy.teams}
    if policy.creates_named_teams:
        for queue in policy.queues:
            for share in queue.shares:
                if share.doc.get("team"):
                    wanted.setdefault(share.doc["team"], TeamSpec(share.doc["team"]))
    for name, team in wanted.items():
        if name in existing and team.description and team.description != existing[name].description:
            warnings.append(f"team '{name}' exists: its description stays as it is")
    return [team for name, team in sorted(wanted.items()) if name not in existing]


def _instance_types(policy: PolicyFile, problems: Problems, warnings: list[str]) -> list:
    existing = {itype.name: itype for itype in InstanceType.objects.all()}
    created = []
    for spec in policy.instance_types:
        live = existing.get(spec.name)
        if spec.slurm_resources is not None:
            try:
                slurm_resources_validate(spec.slurm_resources)
            except ValidationError as error:
                for message in error.message_dict["slurm_resources"]:
                    problems.add(child(spec.path, "slurm_resources"), message)
        if live is None:
            created.append(spec)
            if not spec.gpus_known:
                warnings.append(
                    f"instance type '{spec.name}' is new and the file does not say how many "
                    "GPUs it has: it is created with 1 GPU per instance"
                )
        elif spec.gpus_known and live.gpu_count != spec.gpu_count:
            problems.add(
                spec.path,
                f"instance type '{spec.name}' has {live.gpu_count} GPUs per instance here and "
                f"{spec.gpu_count} in the file; a policy file does not change instance types",
            )
        elif spec.gpus_known and spec.gpu_model and live.gpu_model != spec.gpu_model:
            warnings.append(f"instance type '{spec.name}': its GPU model stays {live.gpu_model!r}")
        live_resources = instance_type_resources(live) if live is not None else None
        if live is not None and spec.slurm_resources not in (None, live_resources):
            warnings.append(
                f"instance type '{spec.name}': its Slurm resources stay "
                f"{' '.join(live_resources) or 'none'} (change them on its page)"
            )
    return sorted(created, key=lambda spec: spec.name)


def _urgency_changes(policy: PolicyFile, problems: Problems, known_teams: set[str]) -> list:
    changes = []
    existing = {
        urgency.name: urgency for urgency in UrgencyDefinition.objects.prefetch_related("invokers")
    }
    for spec in policy.urgencies or []:
        for index, team in enumerate(spec.doc["invokers"]):
            if team not in known_teams:
                problems.add(
                    f"{spec.fields.get('invokers', spec.path)}[{index}]",
                    f"unknown team '{team}'",
                )
        live = existing.get(spec.name)
        before = urgency_document(live) if live else None
        if before != spec.doc:
            changes.append(
                Change(
                    target=PolicyChange.Target.URGENCY,
                    action=CHANGED if live else ADDED,
                    name=spec.name,
                    queue=None,
                    before=before,
                    after=spec.doc,
                )
            )
    return changes


_SETTINGS = ("executor", "default_preemption_retries", "runnable_time_limit")


def _queue_plan(policy, spec: QueueSpec, problems, warnings, known_teams, known_types, classes):
    queue = JobQueue.objects.filter(name=spec.name).first()
    live = live_queue(queue=queue) if queue else None
    if live is not None:
        _check_settings(spec, live, problems, warnings)
    docs, origins = _share_docs(spec, live, problems)
    _check_share_references(docs, origins, problems, known_teams, known_types, classes)
    capacity = _queue_capacity(spec, live, docs, warnings)
    for type_name in capacity:
        if type_name not in known_types:
            problems.add(
                spec.field_path("capacity"),
                f"unknown instance type '{type_name}': define it under instance_types",
            )
    queue_doc = {
        "capacity": capacity,
        "default_preemption_retries": _setting(spec, live, "default_preemption_retries"),
        "runnable_time_limit": _setting(spec, live, "runnable_time_limit"),
    }
    _validate(spec, queue_doc, docs, origins, live, problems)
    plan = QueuePlan(name=spec.name, queue=queue, spec=spec, capacity=capacity, share_docs=docs)
    if live is None:
        plan.capacity_change = Change(
            PolicyChange.Target.QUEUE,
            ADDED,
            spec.name,
            spec.name,
            {"capacity": {}},
            {"capacity": capacity},
        )
    else:
        _compare_with_live(plan, live, warnings)
    plan.binding_change = _binding_change(spec, queue, problems)
    plan.share_changes = _share_changes(spec, live, docs)
    return plan


def _share_docs(
    spec: QueueSpec, live: LiveQueue | None, problems: Problems
) -> tuple[list[dict], list[ShareSpec | None]]:
    """Every share of the queue as it will be, in entitlement order: the live shares first
    (the file's version of each, or disabled when the file leaves it out), then the file's
    new ones; beside each, the file's share it came from (None: not in the file)."""
    docs: list[dict] = []
    origins: list[ShareSpec | None] = []
    by_name = {share.name: share for share in spec.shares}
    for live_doc in live.share_docs if live else []:
        share = by_name.get(live_doc["name"])
        if share is None:
            docs.append({**live_doc, "state": QuotaShare.State.DISABLED})
        else:
            docs.append(
                {
                    **share.doc,
                    "team": share.doc.get("team") or live_doc["team"],
                    "priority_ceiling": share.doc.get(
                        "priority_ceiling", live_doc["priority_ceiling"]
                    ),
                    "default_workload_class": share.doc.get(
                        "default_workload_class", live_doc["default_workload_class"]
                    ),
                }
            )
        origins.append(share)
    live_names = {doc["name"] for doc in docs}
    for share in spec.shares:
        if share.name in live_names:
            continue
        if not share.doc.get("team"):
            problems.add(share.field_path("team"), f"name the team that owns share '{share.name}'")
        docs.append(
            {
                "priority_ceiling": DEFAULT_PRIORITY_CEILING,
                "default_workload_class": None,
                **share.doc,
            }
        )
        origins.append(share)
    return docs, origins


def _check_share_references(docs, origins, problems, known_teams, known_types, classes) -> None:
    """The teams, workload classes and instance types the file's shares name exist."""
    for doc, origin in zip(docs, origins, strict=True):
        if origin is None:
            continue
        if doc["team"] and doc["team"] not in known_teams:
            problems.add(
                origin.field_path("team"),
                f"unknown team '{doc['team']}': define it under teams",
            )
        default_class = doc["default_workload_class"]
        if default_class is not None:
            why = classes.problem(default_class)
            if why:
                problems.add(origin.field_path("default_workload_class"), why)
        for type_name in doc["capacity_limits"]:
            if type_name not in known_types:
                problems.add(
                    origin.field_path("capacity_limits"),
                    f"unknown instance type '{type_name}': define it under instance_types",
                )


def _queue_capacity(
    spec: QueueSpec, live: LiveQueue | None, docs: list[dict], warnings: list[str]
) -> dict[str, int]:
    """The file's capacity, else the live one; a new queue without one gets the sum of its
    shares' limits, with a warning."""
    if spec.capacity is not None:
        return dict(spec.capacity)
    if live is not None:
        return dict(live.capacity)
    capacity: dict[str, int] = {}
    for doc in docs:
        for type_name, instances in doc["capacity_limits"].items():
            capacity[type_name] = capacity.get(type_name, 0) + instances
    capacity = dict(sorted(capacity.items()))
    warnings.append(
        f"queue '{spec.name}' is new and the file does not give its capacity: it gets the "
        f"sum of its shares' limits, {_counts(capacity)}"
    )
    return capacity


def _compare_with_live(plan: QueuePlan, live: LiveQueue, warnings: list[str]) -> None:
    """What the plan changes of an existing queue's capacity, and the versions it was read
    at (the apply refuses if they moved)."""
    spec = plan.spec
    plan.version = plan.queue.version
    plan.share_versions = {share.name: share.version for share in live.shares}
    if plan.capacity != live.capacity:
        plan.capacity_change = Change(
            PolicyChange.Target.QUEUE,
            CHANGED,
            spec.name,
            spec.name,
            {"capacity": live.capacity},
            {"capacity": plan.capacity},
        )
        _order_capacity(plan, live, warnings)
    listed = [share.name for share in spec.shares if live.share(share.name)]
    if listed != [doc["name"] for doc in live.share_docs if doc["name"] in listed]:
        warnings.append(
            f"queue '{spec.name}': the file lists its shares in another order; the "
            "entitlement order stays as it is"
        )


def _share_changes(spec: QueueSpec, live: LiveQueue | None, docs: list[dict]) -> list[Change]:
    """A change per share the plan adds, changes or removes (disables)."""
    in_file = {share.name for share in spec.shares}
    changes = []
    for doc in docs:
        before = live.share_doc(doc["name"]) if live else None
        if before == doc:
            continue
        action = ADDED if before is None else CHANGED
        if before is not None and doc["name"] not in in_file:
            action = REMOVED
        changes.append(
            Change(PolicyChange.Target.SHARE, action, doc["name"], spec.name, before, doc)
        )
    return changes


def _binding_change(spec: QueueSpec, queue: JobQueue | None, problems) -> Change | None:
    """The file's Slurm binding, checked by the binding service (which asks the cluster
    whether the partition exists), as a change of the queue; None when it keeps it."""
    if spec.slurm is KEEP:
        return None
    current = queue if queue is not None else JobQueue(name=spec.name)
    before = queue_binding_document(current)
    binding, errors = slurm_binding_validate(queue=current, binding=spec.slurm)
    for key, messages in errors.items():
        for message in messages:
            problems.add(spec.field_path(key), message)
    if binding == before:
        return None
    action = ADDED if not before["slurm_conf"] else CHANGED
    return Change(
        PolicyChange.Target.EXECUTOR_BINDING, action, spec.name, spec.name, before, binding
    )


def _order_capacity(plan: QueuePlan, live: LiveQueue, warnings: list[str]) -> None:
    """The services check each write against the policy as it then is: the capacity goes
    first when the shares as they are allow it, after them when the shares as they will
    be fit the present capacity, and otherwise in two steps, the queue holding both maps'
    types while the shares change."""
    now_used = {name for doc in live.share_docs for name in doc["capacity_limits"]}
    then_used = {name for doc in plan.share_docs for name in doc["capacity_limits"]}
    if now_used <= set(plan.capacity):
        plan.capacity_before_shares = [plan.capacity]
    elif then_used <= set(live.capacity):
        plan.capacity_after_shares = plan.capacity
    else:
        plan.capacity_before_shares = [{**live.capacity, **plan.capacity}]
        plan.capacity_after_shares = plan.capacity
        warnings.append(
            f"queue '{plan.name}': its shares move between instance types, so its capacity "
            "is written in two steps (first with the types of both maps)"
        )


def _counts(capacity: dict[str, int]) -> str:
    return ", ".join(f"{instances} × {name}" for name, instances in capacity.items()) or "none"


def _setting(spec: QueueSpec, live: LiveQueue | None, name: str):
    value = getattr(spec, name)
    if value is KEEP:
        return getattr(live.queue, name) if live else None
    return value


def _check_settings(spec: QueueSpec, live: LiveQueue, problems: Problems, warnings) -> None:
    for name in _SETTINGS:
        value = getattr(spec, name)
        current = getattr(live.queue, name)
        if value is not KEEP and value != current:
            problems.add(
                spec.field_path(name),
                f"is {current!r} on queue '{spec.name}' and {value!r} in the file; a policy "
                "file sets it only when it creates the queue",
            )
    if spec.description is not KEEP and spec.description != live.queue.description:
        warnings.append(f"queue '{spec.name}': its description stays as it is")


def _validate(spec: QueueSpec, queue_doc, docs, origins, live, problems: Problems) -> None:
    """The queue-wide rules on the whole proposed policy; each share of the file through
    share_validate_in_policy, the check the editor and the API use."""
    for problem in validate_policy(queue_doc, [_engine_doc(doc) for doc in docs]):
        path = problem.path
        if path.startswith("queue."):
            problems.add(spec.field_path("capacity"), problem.message)
        elif not path.startswith("shares["):
            problems.add(spec.path, problem.message, label=f"queue '{spec.name}' {path}")
        else:
            index_text, _, rest = path[len("shares[") :].partition("]")
            index = int(index_text)
            if origins[index] is None:
                problems.add(
                    spec.field_path("capacity"),
                    f"share '{docs[index]['name']}' is not in the file (so it is disabled) "
                    f"but keeps {rest.lstrip('.')}: {problem.message}",
                )
    before = {doc["name"]: doc for doc in live.share_docs} if live else {}
    for index, (doc, origin) in enumerate(zip(docs, origins, strict=True)):
        if origin is None or before.get(doc["name"]) == doc:
            continue
        stored = [
            _engine_doc(other)
            for other in [*docs[:index], before.get(doc["name"], {}), *docs[index + 1 :]]
        ]
        # The default class is checked against the classes the file leaves (above).
        data = replace(
            share_data_from_document(doc, team=Team(name=doc["team"] or "")),
            default_workload_class=KEEP_CLASS,
        )
        errors = share_validate_in_policy(
            queue_doc=queue_doc, share_docs=stored, index=index, data=data
        )
        for key, messages in errors.items():
            if key == NON_FIELD:
                continue  # queue-wide: reported once above
            for message in messages:
                problems.add(origin.field_path(key.split(".", 1)[0]), message)


# Applying.


@dataclass
class ApplyResult:
    plan: Plan
    changes: list[PolicyChange]
    # With POLICY_CHANGES_NEED_REVIEW: one PolicyProposal per change, waiting for review.
    proposals: list = field(default_factory=list)
    sync: list = field(default_factory=list)  # aws_sync.SyncLine, when AWS_BATCH_SYNC is on

    def sync_lines(self) -> list[str]:
        return [str(line) for line in self.sync]

    def summary(self) -> str:
        if self.proposals:
            count = len(self.proposals)
            return (
                f"{count} proposal{'s' if count != 1 else ''} wait for another admin's review; "
                "nothing changes until approved."
            )
        count = len(self.changes)
        return f"{count} change{'s' if count != 1 else ''} recorded in the history."


# What a policy file's apply answers without a reason: the share editor's words, for the
# page, the API and `manage.py policy apply` alike.
REASON_MISSING = "say why this change is made"


def apply_reason(*, source: str, reason: str) -> str:
    """The history's reason of a file's changes: the person's, with the file named."""
    return f"{reason.strip()} (applied from policy file {source})"


def policy_apply(
    *,
    actor,
    policy: PolicyFile,
    reason: str,
    expected_versions: dict | None = None,
    batch_client=None,
) -> ApplyResult:
    """Apply `policy` as its plan says, all or nothing. `expected_versions` (from
    Plan.versions of the plan the person reviewed) makes a change made meanwhile a
    PlanOutdated instead of a silent overwrite. Once committed, queues synced with AWS
    Batch are pushed there (governance.policy_code.aws_sync).

    A policy file is an admin's edit: with POLICY_CHANGES_NEED_REVIEW each of its changes
    goes through the services as an edit, so each becomes a proposal another admin
    approves (governance.proposals.services). A proposal is checked against the policy as
    it is, so a file whose changes depend on each other (a new queue, team or instance
    type, or shares that move to a new instance type) is refused then, naming what to
    create or propose first. Without review the file applies at once, as an import.

    Like every policy write, it needs a reason (PolicyError naming `reason`, and nothing
    changes): the history records it for each change, with the file's name."""
    result = _apply(actor=actor, policy=policy, reason=reason, expected_versions=expected_versions)
    if aws_sync.sync_enabled() and not result.proposals:
        for queue_plan in result.plan.queues:
            if queue_plan.changes:
                queue = JobQueue.objects.get(name=queue_plan.name)
                result.sync += aws_sync.push(queue=queue, client=batch_client)
    return result


def _review_blockers(plan: Plan) -> list[str]:
    """Why the plan's changes cannot be proposed one by one."""
    blockers = []
    if plan.teams:
        names = ", ".join(team.name for team in plan.teams)
        blockers.append(f"it creates teams ({names}): create them first")
    if plan.instance_types:
        names = ", ".join(itype.name for itype in plan.instance_types)
        blockers.append(f"it creates instance types ({names}): create them first")
    created = {change.name for change in plan.class_writes if change.action == ADDED}
    for queue_plan in plan.queues:
        for change in queue_plan.share_changes:
            default_class = (change.after or {}).get("default_workload_class")
            if default_class in created:
                blockers.append(
                    f"share '{change.name}' of queue '{queue_plan.name}' names workload class "
                    f"'{default_class}', which it creates: propose the class first"
                )
    for change in plan.class_deletions:
        if WorkloadClass.objects.filter(name=change.name, default_of_shares__isnull=False).exists():
            blockers.append(
                f"it deletes workload class '{change.name}', which shares use until their "
                "changes are approved: propose the share changes first, then the deletion"
            )
    for queue_plan in plan.queues:
        if queue_plan.queue is None:
            blockers.append(f"it creates queue '{queue_plan.name}': propose the queue first")
        elif queue_plan.capacity_after_shares is not None:
            blockers.append(
                f"the shares of queue '{queue_plan.name}' must change before its capacity: "
                "propose the share changes first, then the capacity"
            )
    return blockers


@transaction.atomic
def _apply(*, actor, policy: PolicyFile, reason: str, expected_versions: dict | None):
    rules.require(actor, "policy.edit")
    if not (reason or "").strip():
        raise PolicyError({"reason": [REASON_MISSING]})
    bounds.check_lengths(
        {"reason": apply_reason(source=policy.source, reason=reason)}, ["reason"], error=PolicyError
    )
    lock_queues_named(spec.name for spec in policy.queues)
    plan = policy_plan(policy=policy)
    if expected_versions is not None and plan.versions() != expected_versions:
        raise PlanOutdated(_what_changed(expected_versions, plan.versions()))
    review = changes_need_review()
    if review and (blockers := _review_blockers(plan)):
        raise PolicyFileError(
            FileProblem(
                None, "file", f"policy changes need review, one proposal per change, but {why}"
            )
            for why in blockers
        )
    writer = _Writer(
        actor=actor,
        reason=apply_reason(source=policy.source, reason=reason),
        cause=PolicyChange.Cause.EDIT if review else PolicyChange.Cause.IMPORT,
        lines=plan.lines,
    )
    for team in plan.teams:
        Team.objects.create(name=team.name, description=team.description)
    for itype in plan.instance_types:
        created = InstanceType.objects.create(
            name=itype.name, gpu_count=itype.gpu_count, gpu_model=itype.gpu_model
        )
        if itype.slurm_resources:
            writer.call(
                None,
                None,
                instance_type_set_resources,
                instance_type=created,
                resources=itype.slurm_resources,
            )
    class_specs = {spec.name: spec for spec in policy.workload_classes or []}
    try:
        for change in plan.class_writes:
            current = WorkloadClass.objects.filter(name=change.name).first()
            writer.call(
                None,
                class_specs.get(change.name),
                workload_class_save,
                data=change.after,
                workload_class=current,
                expected_version=current.version if current else None,
            )
        for change in plan.urgency_changes:
            urgency = UrgencyDefinition.objects.filter(name=change.name).first()
            writer.call(
                None,
                None,
                urgency_save,
                data=change.after,
                urgency=urgency,
                expected_version=urgency.version if urgency else None,
            )
        for queue_plan in plan.queues:
            writer.queue(queue_plan)
        for change in plan.class_deletions:
            writer.call(
                None,
                None,
                workload_class_delete,
                workload_class=WorkloadClass.objects.get(name=change.name),
            )
    except VersionConflict as conflict:
        raise PlanOutdated(f"the policy (now version {conflict.current_version})") from conflict
    return ApplyResult(plan=plan, changes=writer.changes, proposals=writer.proposals)


_PARTS = {
    "queues": "queue",
    "shares": "share",
    "urgencies": "urgency",
    "workload_classes": "workload class",
}


def _what_changed(expected: dict, now: dict) -> str:
    for part, what in _PARTS.items():
        for name in sorted(set(expected.get(part, {})) | set(now.get(part, {}))):
            if expected.get(part, {}).get(name) != now.get(part, {}).get(name):
                return f"{what} '{name}'"
    return "the policy"


@dataclass
class _Writer:
    """Calls the policy services for one apply and keeps the history entries and the
    proposals they return."""

    actor: object
    reason: str
    cause: str
    lines: Lines
    proposals: list = field(default_factory=list)
    changes: list[PolicyChange] = field(default_factory=list)

    def call(
        self,
        spec: QueueSpec | None,
        origin: ShareSpec | WorkloadClassSpec | None,
        function,
        **kwargs,
    ) -> None:
        """Call the service and keep the history entry it recorded or the proposal it made;
        its refusal becomes the file's problem at the field it names."""
        try:
            write = function(actor=self.actor, reason=self.reason, cause=self.cause, **kwargs)
        except PolicyError as error:
            problems = Problems(self.lines)
            for key, messages in error.errors.items():
                name = key.split(".", 1)[0]
                path = origin.field_path(name) if origin else spec.field_path(name) if spec else ""
                for message in messages:
                    problems.add(path, message, label=None if path else "file")
            raise PolicyFileError(problems.items) from error
        if write.entry is not None:
            self.changes.append(write.entry)
        if write.proposal is not None:
            self.proposals.append(write.proposal)

    def capacity(self, plan: QueuePlan, queue: JobQueue, capacity: dict) -> None:
        self.call(
            plan.spec,
            None,
            queue_set_capacity,
            queue=queue,
            capacity=capacity,
            expected_version=queue.version,
        )

    def queue(self, plan: QueuePlan) -> None:
        spec = plan.spec
        if plan.queue is None:
            self.call(
                spec,
                None,
                queue_create,
                name=spec.name,
                capacity=plan.capacity,
                description="" if spec.description is KEEP else spec.description,
                default_preemption_retries=_setting(spec, None, "default_preemption_retries"),
                runnable_time_limit=_setting(spec, None, "runnable_time_limit"),
                executor=DEFAULT_EXECUTOR if spec.executor is KEEP else spec.executor,
            )
        else:
            for capacity in plan.capacity_before_shares:
                self.capacity(plan, JobQueue.objects.get(pk=plan.queue.pk), capacity)
        queue = JobQueue.objects.get(name=spec.name)
        by_name = {share.name: share for share in spec.shares}
        for change in plan.share_changes:
            share = queue.shares.select_related("team").filter(name=change.name).first()
            data = share_data_from_document(change.after)
            if share is None:
                self.call(spec, by_name.get(change.name), share_create, queue=queue, data=data)
            else:
                self.call(
                    spec,
                    by_name.get(change.name),
                    share_update,
                    share=share,
                    data=data,
                    expected_version=plan.share_versions[change.name],
                )
        if plan.capacity_after_shares is not None:
            self.capacity(plan, JobQueue.objects.get(pk=queue.pk), plan.capacity_after_shares)
        if plan.binding_change is not None:
            queue = JobQueue.objects.get(pk=queue.pk)
            self.call(
                spec,
                None,
                queue_set_slurm_binding,
                queue=queue,
                binding=plan.binding_change.after,
                expected_version=queue.version,
            )
