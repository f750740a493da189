"""The `native` format: everything the product holds about a policy, as versioned YAML.

    version: 1                       the format's version; a file of another is refused
    instance_types:                  the types the queues use
    - name: ml.g5.xlarge
      gpus: 1                        GPUs per instance (at least 1)
      gpu_model: NVIDIA A10G         optional
      slurm_resources: [--gres=gpu:1]  optional: what one instance asks a Slurm cluster for
                                     (set when the file creates the type; a type that
                                     exists keeps its own, changed on its page)
    teams:                           every team the shares and urgency definitions name
    - name: vision-research
      description: ''                optional
    urgency_definitions:             optional; when present, each one is added or changed
    - name: Production incident      (definitions the file leaves out stay as they are)
      meaning: ...
      examples: ...                  optional
      priority: 950                  0 to 9999
      max_window_hours: 24           at least 1
      allowed_kinds: [PRIORITY_RAISE, TEMPORARY_CAPACITY, PREEMPTION_PROTECTION]
      invokers: [vision-research]    teams that may invoke it; [] = every team
    workload_classes:                optional; when present, the whole vocabulary: each class
    - name: interactive              is added or changed, and a class the file leaves out is
      description: ''                deleted (refused while a share or a job definition uses it);
      min_runtime_reclaim: 600       absent: the classes stay as they are. Seconds, 0 to a week
      min_runtime_preempt: 0         (each optional, default 0), checkpoint_on_notice 1 to a
      grace: 120                     week or null (optional, default null: its jobs do not
      checkpoint_on_notice: 60       checkpoint on notice; only with a grace)
    queues:
    - name: aws-sample
      description: ...               optional: these four are set when a queue is
      executor: simulated            created; on an existing queue they must match it
      default_preemption_retries: null
      runnable_time_limit: null      seconds, or null
      slurm:                         optional: the Slurm cluster the queue's jobs run on
        conf: /etc/slurm/slurm.conf  (its slurm.conf), partition and account (optional);
        partition: gpu               null unbinds, absent keeps it; the partition is
        account: ml                  asked of the cluster, which must answer
      capacity: {ml.g5.xlarge: 3}    instance type -> instances (1 to 5 types)
      shares:                        in entitlement order
      - name: qs1
        team: vision-research
        strategy: LEND_AND_BORROW    RESERVE | LEND | LEND_AND_BORROW
        borrow_limit: 200            percent, -1 = unlimited; only with LEND_AND_BORROW
        in_share_preemption: true    optional, default false
        state: ENABLED               optional, ENABLED (default) or DISABLED
        priority_ceiling: 100        optional: the highest job priority its team leads give
                                     without an exception (0 to 9999; a new share gets 100,
                                     an existing one keeps its own)
        workload_class: interactive  optional: the class whose contract its jobs copy when
                                     their definition names none; null: none (a new share
                                     gets none, an existing one keeps its own)
        capacity_limits: {ml.g5.xlarge: 1}

The field names and values are the scenario format's (shared by the engine and the
history). Team members and leads, jobs and exception requests are not policy and are
not exported; nor are job definitions (the scheduler's, with their revisions), so a
definition's class is not in the file: a class a definition uses is kept. A queue
exported alone comes with the teams and instance types it uses, every urgency
definition (with the teams that may invoke them) and every workload class (they are
global, as urgency definitions are, so applying one queue's file deletes none).
"""

from __future__ import annotations

import yaml

from engine.contracts import CONTRACT_FIELDS
from fleet.bridge import BORROW_UNLIMITED
from fleet.executors import executor_choices
from fleet.models import (
    DEFAULT_PRIORITY_CEILING,
    MAX_PRIORITY,
    JobQueue,
    QuotaShare,
    UrgencyDefinition,
)
from governance.policy_code import source as read
from governance.policy_code.live import (
    live_queue,
    live_urgencies,
    live_workload_classes,
    teams_named,
)
from governance.policy_code.model import (
    KEEP,
    Export,
    InstanceTypeSpec,
    PolicyFile,
    QueueSpec,
    ShareSpec,
    TeamSpec,
    UrgencySpec,
    WorkloadClassSpec,
)
from governance.policy_code.slurm_binding import instance_type_resources, queue_binding_document
from governance.policy_code.source import Problems, child

FORMAT = "native"
VERSION = 1
HEADER = (
    "# Quota policy, quota-governance native format version 1.\n"
    "# Plan a change with `manage.py policy plan FILE`, apply it with `manage.py policy apply`.\n"
    "# borrow_limit: percent of the share's own limit it may borrow; -1 = unlimited.\n"
)
_TOP_FIELDS = {
    "version",
    "instance_types",
    "teams",
    "urgency_definitions",
    "workload_classes",
    "queues",
}
_QUEUE_FIELDS = {
    "name",
    "description",
    "executor",
    "default_preemption_retries",
    "runnable_time_limit",
    "slurm",
    "capacity",
    "shares",
}
_SHARE_FIELDS = {
    "name",
    "team",
    "strategy",
    "borrow_limit",
    "in_share_preemption",
    "state",
    "priority_ceiling",
    "workload_class",
    "capacity_limits",
}
_URGENCY_FIELDS = {
    "name",
    "meaning",
    "examples",
    "priority",
    "max_window_hours",
    "allowed_kinds",
    "invokers",
}


def _share_entry(doc: dict) -> dict:
    entry = {"name": doc["name"], "team": doc["team"], "strategy": doc["strategy"]}
    if "borrow_limit" in doc:
        entry["borrow_limit"] = doc["borrow_limit"]
    entry["in_share_preemption"] = doc["in_share_preemption"]
    entry["state"] = doc["state"]
    entry["priority_ceiling"] = doc["priority_ceiling"]
    entry["workload_class"] = doc["default_workload_class"]
    entry["capacity_limits"] = doc["capacity_limits"]
    return entry


def _slurm_entry(queue: JobQueue) -> dict:
    """The queue's Slurm binding, when it has one (an unbound queue's file says nothing)."""
    bound = queue_binding_document(queue)
    if not bound["slurm_conf"]:
        return {}
    binding = {"conf": bound["slurm_conf"], "partition": bound["slurm_partition"]}
    if bound["slurm_account"]:
        binding["account"] = bound["slurm_account"]
    return {"slurm": binding}


def _resources_entry(itype) -> dict:
    """The type's Slurm resources, when it has some."""
    resources = instance_type_resources(itype)
    return {"slurm_resources": resources} if resources else {}


def document(queues: list[JobQueue]) -> dict:
    lives = [live_queue(queue=queue) for queue in sorted(queues, key=lambda q: q.name)]
    urgencies = live_urgencies()
    team_names = {doc["team"] for live in lives for doc in live.share_docs}
    team_names |= {name for urgency in urgencies for name in urgency["invokers"]}
    types = {itype.name: itype for live in lives for itype in live.instance_types}
    return {
        "version": VERSION,
        "instance_types": [
            {
                "name": itype.name,
                "gpus": itype.gpu_count,
                "gpu_model": itype.gpu_model,
                **_resources_entry(itype),
            }
            for itype in (types[name] for name in sorted(types))
        ],
        "teams": [
            {"name": team.name, "description": team.description} for team in teams_named(team_names)
        ],
        "urgency_definitions": urgencies,
        "workload_classes": live_workload_classes(),
        "queues": [
            {
                "name": live.queue.name,
                "description": live.queue.description,
                "executor": live.queue.executor,
                "default_preemption_retries": live.queue.default_preemption_retries,
                "runnable_time_limit": live.queue.runnable_time_limit,
                **_slurm_entry(live.queue),
                "capacity": live.capacity,
                "shares": [_share_entry(doc) for doc in live.share_docs],
            }
            for live in lives
        ],
    }


def dump(data: dict) -> str:
    return HEADER + yaml.safe_dump(
        data, sort_keys=False, allow_unicode=True, default_flow_style=False, width=100
    )


def export(*, queue: JobQueue | None = None) -> Export:
    queues = [queue] if queue is not None else list(JobQueue.objects.order_by("name"))
    name = queue.name if queue is not None else "policy"
    return Export(
        content=dump(document(queues)),
        filename=f"{name}.policy.yaml",
        media_type="application/yaml",
    )


def parse(text: str, *, source: str, target_queue: str | None = None) -> PolicyFile:
    documents = read.load_documents(text)
    if len(documents) != 1:
        raise read.PolicyFileError([read.FileProblem(None, "file", "must hold one YAML document")])
    lines = documents[0].lines
    problems = Problems(lines)
    top = read.mapping(problems, documents[0].data, "")
    problems.raise_if_any()
    read.unknown_fields(problems, top, _TOP_FIELDS, "")
    if read.required(problems, top, "version", "") and top["version"] != VERSION:
        problems.add("version", f"this product reads version {VERSION} of the native format")
    policy = PolicyFile(
        format=FORMAT,
        source=source,
        lines=lines,
        queues=[],
        creates_named_teams=False,
        has_class_section=True,
    )
    for index, entry in enumerate(_list(problems, top, "instance_types")):
        itype = _instance_type(problems, entry, f"instance_types[{index}]")
        if itype is not None:
            policy.instance_types.append(itype)
    for index, entry in enumerate(_list(problems, top, "teams")):
        team = _team(problems, entry, f"teams[{index}]")
        if team is not None:
            policy.teams.append(team)
    _vocabularies(problems, top, policy)
    if read.required(problems, top, "queues", ""):
        for index, entry in enumerate(_list(problems, top, "queues")):
            queue = _queue(problems, entry, f"queues[{index}]")
            if queue is not None:
                policy.queues.append(queue)
    if target_queue is not None and len(policy.queues) == 1:
        policy.queues[0].name = target_queue
    elif target_queue is not None:
        problems.add("queues", "must describe exactly one queue to be applied to a chosen queue")
    _unique(
        problems,
        [(t.name, f"instance_types[{i}].name") for i, t in enumerate(policy.instance_types)],
        "instance type",
    )
    _unique(problems, [(t.name, f"teams[{i}].name") for i, t in enumerate(policy.teams)], "team")
    _unique(
        problems, [(u.name, f"{u.path}.name") for u in policy.urgencies or []], "urgency definition"
    )
    _unique(
        problems,
        [(c.name, c.field_path("name")) for c in policy.workload_classes or []],
        "workload class",
    )
    _unique(problems, [(q.name, f"{q.path}.name") for q in policy.queues], "queue")
    problems.raise_if_any()
    return policy


def _vocabularies(problems: Problems, top, policy: PolicyFile) -> None:
    """The optional sections: absent, the file leaves them as they are."""
    if "urgency_definitions" in top:
        policy.urgencies = []
        for index, entry in enumerate(_list(problems, top, "urgency_definitions")):
            urgency = _urgency(problems, entry, f"urgency_definitions[{index}]")
            if urgency is not None:
                policy.urgencies.append(urgency)
    if "workload_classes" in top:
        policy.workload_classes = []
        for index, entry in enumerate(_list(problems, top, "workload_classes")):
            workload_class = _workload_class(problems, entry, f"workload_classes[{index}]")
            if workload_class is not None:
                policy.workload_classes.append(workload_class)


def _list(problems: Problems, top, key: str) -> list:
    if key not in top:
        return []
    return read.sequence(problems, top[key], key) or []


def _unique(problems: Problems, names: list[tuple[str, str]], what: str) -> None:
    seen: set[str] = set()
    for name, path in names:
        if name in seen:
            problems.add(path, f"{what} '{name}' is listed twice")
        seen.add(name)


def _instance_type(problems: Problems, entry, path: str) -> InstanceTypeSpec | None:
    entry = read.mapping(problems, entry, path)
    if entry is None:
        return None
    read.unknown_fields(problems, entry, {"name", "gpus", "gpu_model", "slurm_resources"}, path)
    if not (
        read.required(problems, entry, "name", path) & read.required(problems, entry, "gpus", path)
    ):
        return None
    name = read.text(problems, entry["name"], child(path, "name"))
    gpus = read.whole(problems, entry["gpus"], child(path, "gpus"), minimum=1)
    model = read.text(
        problems, entry.get("gpu_model") or "", child(path, "gpu_model"), required=False
    )
    resources = None
    if "slurm_resources" in entry:
        resources = read.sequence(
            problems, entry["slurm_resources"], child(path, "slurm_resources")
        )
    if None in (name, gpus, model):
        return None
    return InstanceTypeSpec(
        name=name.strip(),
        gpu_count=gpus,
        gpu_model=model.strip(),
        path=path,
        slurm_resources=resources,
    )


def _team(problems: Problems, entry, path: str) -> TeamSpec | None:
    entry = read.mapping(problems, entry, path)
    if entry is None:
        return None
    read.unknown_fields(problems, entry, {"name", "description"}, path)
    if not read.required(problems, entry, "name", path):
        return None
    name = read.text(problems, entry["name"], child(path, "name"))
    description = read.text(
        problems, entry.get("description") or "", child(path, "description"), required=False
    )
    if name is None or description is None:
        return None
    return TeamSpec(name=name.strip(), description=description, path=path)


def _urgency(problems: Problems, entry, path: str) -> UrgencySpec | None:
    entry = read.mapping(problems, entry, path)
    if entry is None:
        return None
    read.unknown_fields(problems, entry, _URGENCY_FIELDS, path)
    present = [
        read.required(problems, entry, key, path)
        for key in ("name", "meaning", "priority", "max_window_hours")
    ]
    if not all(present):
        return None
    name = read.text(problems, entry["name"], child(path, "name"))
    meaning = read.text(problems, entry["meaning"], child(path, "meaning"))
    examples = read.text(
        problems, entry.get("examples") or "", child(path, "examples"), required=False
    )
    priority = read.whole(problems, entry["priority"], child(path, "priority"), minimum=0)
    if priority is not None and priority > MAX_PRIORITY:
        problems.add(child(path, "priority"), f"must be between 0 and {MAX_PRIORITY}")
        priority = None
    window = read.whole(
        problems, entry["max_window_hours"], child(path, "max_window_hours"), minimum=1
    )
    kinds = _names(problems, entry.get("allowed_kinds", []), child(path, "allowed_kinds"))
    for index, kind in enumerate(kinds or []):
        read.choice(
            problems,
            kind,
            child(child(path, "allowed_kinds"), index),
            UrgencyDefinition.Kind.values,
        )
    invokers = _names(problems, entry.get("invokers", []), child(path, "invokers"))
    if None in (name, meaning, examples, priority, window, kinds, invokers):
        return None
    doc = {
        "name": name.strip(),
        "meaning": meaning.strip(),
        "examples": examples.strip(),
        "priority": priority,
        "max_window_hours": window,
        "allowed_kinds": list(kinds),
        "invokers": sorted(set(invokers)),
    }
    return UrgencySpec(
        doc=doc, path=path, fields={key: child(path, key) for key in _URGENCY_FIELDS}
    )


_CLASS_FIELDS = ("name", "description", *CONTRACT_FIELDS)


def _workload_class(problems: Problems, entry, path: str) -> WorkloadClassSpec | None:
    """A class's name and description; its contract fields as given (absent: 0, or null
    for checkpoint_on_notice), for the plan to check with the editor's own rules
    (workload_class_validate), which name the field."""
    entry = read.mapping(problems, entry, path)
    if entry is None:
        return None
    read.unknown_fields(problems, entry, _CLASS_FIELDS, path)
    if not read.required(problems, entry, "name", path):
        return None
    fields = {key: child(path, key) for key in _CLASS_FIELDS}
    name = read.text(problems, entry["name"], fields["name"])
    description = read.text(
        problems, entry.get("description") or "", fields["description"], required=False
    )
    if name is None or description is None:
        return None
    doc = {"name": name.strip(), "description": description.strip()}
    for key in CONTRACT_FIELDS:
        value = entry.get(key)
        # Null is absent (spec v2, V1): 0, or "does not checkpoint on notice".
        doc[key] = 0 if value is None and key != "checkpoint_on_notice" else value
    return WorkloadClassSpec(doc=doc, path=path, fields=fields)


def _names(problems: Problems, value, path: str) -> list[str] | None:
    items = read.sequence(problems, value, path)
    if items is None:
        return None
    names = [read.text(problems, item, child(path, index)) for index, item in enumerate(items)]
    return None if None in names else [name.strip() for name in names]


def _optional_whole(problems: Problems, entry, key: str, path: str, *, minimum: int):
    if key not in entry:
        return KEEP
    if entry[key] is None:
        return None
    value = read.whole(problems, entry[key], child(path, key), minimum=minimum)
    return KEEP if value is None else value


def _queue(problems: Problems, entry, path: str) -> QueueSpec | None:
    entry = read.mapping(problems, entry, path)
    if entry is None:
        return None
    read.unknown_fields(problems, entry, _QUEUE_FIELDS, path)
    present = [read.required(problems, entry, key, path) for key in ("name", "capacity", "shares")]
    if not all(present):
        return None
    name = read.text(problems, entry["name"], child(path, "name"))
    capacity = _counts(problems, entry["capacity"], child(path, "capacity"))
    queue = QueueSpec(
        name=(name or "").strip(),
        path=path,
        shares=[],
        capacity=capacity,
        fields={key: child(path, key) for key in _QUEUE_FIELDS},
    )
    if "description" in entry:
        description = read.text(
            problems, entry["description"] or "", child(path, "description"), required=False
        )
        queue.description = KEEP if description is None else description
    if "executor" in entry:
        executor = read.choice(
            problems,
            entry["executor"],
            child(path, "executor"),
            [name for name, _label in executor_choices()],
        )
        queue.executor = KEEP if executor is None else executor
    queue.default_preemption_retries = _optional_whole(
        problems, entry, "default_preemption_retries", path, minimum=0
    )
    queue.runnable_time_limit = _optional_whole(
        problems, entry, "runnable_time_limit", path, minimum=1
    )
    if "slurm" in entry:
        queue.slurm = _slurm_binding(problems, entry["slurm"], child(path, "slurm"))
        for key in ("conf", "partition", "account"):
            queue.fields[f"slurm_{key}"] = child(child(path, "slurm"), key)
    shares = read.sequence(problems, entry["shares"], child(path, "shares")) or []
    for index, share_entry in enumerate(shares):
        share = _share(problems, share_entry, child(child(path, "shares"), index))
        if share is not None:
            queue.shares.append(share)
    _unique(problems, [(s.name, s.field_path("name")) for s in queue.shares], "share")
    if name is None or capacity is None:
        return None
    return queue


def _slurm_binding(problems: Problems, value, path: str):
    """The binding as the history records it; null unbinds. Its rules (an absolute path,
    a partition the cluster has) are the binding service's, checked by the plan."""
    if value is None:
        return {"slurm_conf": "", "slurm_partition": "", "slurm_account": ""}
    entry = read.mapping(problems, value, path)
    if entry is None:
        return KEEP
    read.unknown_fields(problems, entry, {"conf", "partition", "account"}, path)
    if not (
        read.required(problems, entry, "conf", path)
        & read.required(problems, entry, "partition", path)
    ):
        return KEEP
    texts = [
        read.text(problems, entry.get(key) or "", child(path, key), required=key != "account")
        for key in ("conf", "partition", "account")
    ]
    if None in texts:
        return KEEP
    return dict(zip(("slurm_conf", "slurm_partition", "slurm_account"), texts, strict=True))


def _counts(problems: Problems, value, path: str) -> dict[str, int] | None:
    counts = read.mapping(problems, value, path)
    if counts is None:
        return None
    result = {}
    for type_name, count in counts.items():
        number = read.whole(problems, count, child(path, type_name), minimum=1)
        if number is None:
            return None
        result[type_name] = number
    return dict(sorted(result.items()))


def _share(problems: Problems, entry, path: str) -> ShareSpec | None:
    entry = read.mapping(problems, entry, path)
    if entry is None:
        return None
    read.unknown_fields(problems, entry, _SHARE_FIELDS, path)
    present = [
        read.required(problems, entry, key, path)
        for key in ("name", "team", "strategy", "capacity_limits")
    ]
    if not all(present):
        return None
    fields = {key: child(path, key) for key in _SHARE_FIELDS}
    fields["default_workload_class"] = fields["workload_class"]
    name = read.text(problems, entry["name"], fields["name"])
    team = read.text(problems, entry["team"], fields["team"])
    strategy = read.choice(
        problems, entry["strategy"], fields["strategy"], QuotaShare.Strategy.values
    )
    in_share = entry.get("in_share_preemption", False)
    if not isinstance(in_share, bool):
        problems.add(fields["in_share_preemption"], "must be true or false")
        in_share = None
    state = read.choice(
        problems, entry.get("state", "ENABLED"), fields["state"], QuotaShare.State.values
    )
    limits = _counts(problems, entry["capacity_limits"], fields["capacity_limits"])
    borrow_limit = BORROW_UNLIMITED
    if "borrow_limit" in entry:
        if strategy is not None and strategy != QuotaShare.Strategy.LEND_AND_BORROW:
            problems.add(fields["borrow_limit"], "only allowed with LEND_AND_BORROW")
        borrow_limit = read.whole(
            problems, entry["borrow_limit"], fields["borrow_limit"], minimum=BORROW_UNLIMITED
        )
    ceiling = DEFAULT_PRIORITY_CEILING
    if "priority_ceiling" in entry:
        ceiling = read.whole(
            problems, entry["priority_ceiling"], fields["priority_ceiling"], minimum=0
        )
        if ceiling is not None and ceiling > MAX_PRIORITY:
            problems.add(fields["priority_ceiling"], f"must be between 0 and {MAX_PRIORITY}")
            ceiling = None
    default_class = _class_name(problems, entry, fields["workload_class"])
    if None in (name, team, strategy, in_share, state, limits, borrow_limit, ceiling):
        return None
    doc = {
        "name": name.strip(),
        "team": team.strip(),
        "strategy": strategy,
        "in_share_preemption": in_share,
        "state": state,
        "capacity_limits": limits,
    }
    if strategy == QuotaShare.Strategy.LEND_AND_BORROW:
        doc["borrow_limit"] = borrow_limit
    if "priority_ceiling" in entry:
        doc["priority_ceiling"] = ceiling
    if default_class is not _NOT_GIVEN:
        doc["default_workload_class"] = default_class
    return ShareSpec(doc=doc, path=path, fields=fields)


_NOT_GIVEN = object()


def _class_name(problems: Problems, entry, path: str):
    """The share's `workload_class`: a name, None (null: no default class), or _NOT_GIVEN
    when absent or wrong (the share then keeps its own; a wrong one is a problem)."""
    if "workload_class" not in entry:
        return _NOT_GIVEN
    value = entry["workload_class"]
    if value is None:
        return None
    if isinstance(value, str) and value.strip():
        return value.strip()
    problems.add(path, "must be the name of a workload class, or null for none")
    return _NOT_GIVEN
