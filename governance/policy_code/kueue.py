"""The `kueue` format: a queue as Kueue objects (kueue.x-k8s.io/v1beta2), in YAML.

One `Cohort` per queue, one `ResourceFlavor` per instance type and one `ClusterQueue`
per share, in entitlement order. The mapping:

    queue                        Cohort (name: the queue's name as a DNS subdomain)
    instance type                ResourceFlavor with nodeLabels
                                 node.kubernetes.io/instance-type: <type>
    share                        ClusterQueue "<queue>-<share>" with spec.cohortName: <queue>,
                                 namespaceSelector: {} (every namespace may submit) and
                                 queueingStrategy: StrictFIFO (the nearest to
                                 head-of-line order)
    capacity limit               resourceGroups[0].flavors[]: one flavor per instance type,
                                 resource nvidia.com/gpu, nominalQuota = instances x GPUs
                                 per instance (quantities are GPUs; the instance type says
                                 how many it has, at least 1)
    RESERVE                      lendingLimit: 0 and borrowingLimit: 0 (it neither lends
                                 nor borrows)
    LEND                         borrowingLimit: 0
    LEND_AND_BORROW, borrow %    borrowingLimit = floor(instances x % / 100) x GPUs per
                                 instance, per instance type; none for -1 (unlimited)
    in-share preemption          preemption.withinClusterQueue: LowerPriority (else Never)
    reclaim of lent capacity     preemption.reclaimWithinCohort: Any (whatever the
                                 priorities, as here)
    DISABLED                     stopPolicy: Hold

Kubernetes names cannot hold everything ours can, and Kueue has no field for some of
what we hold, so annotations under `quota-governance.io/` carry it: the original
names (`queue`, `share`, `instance-type`), the share's `team`, `strategy`,
`borrow-limit` and `priority-ceiling`, the queue's `capacity` (JSON), `description`,
`default-preemption-retries` and `runnable-time-limit`, and a type's
`gpus-per-instance` and `gpu-model`. On import Kueue's own fields decide what Kueue
expresses (limits, preemption, stop policy); annotations only fill in what it cannot,
and one that contradicts a field is an error at its line. A file without annotations
(written for Kueue by hand) is read from its fields alone: a share's strategy then
follows from its limits, its borrow limit is the smallest percent that gives the
borrowingLimit of every instance type, and its team must already own it.
Export writes kueue.x-k8s.io/v1beta2, the version current Kueue serves (v1beta1 is
marked deprecated). Import reads both: what changed between them for the objects read
here is the ClusterQueue's cohort, `spec.cohort` in v1beta1 and `spec.cohortName` in
v1beta2 (each version's key only: the other one is an error naming it), and v1beta2's
Cohort always has a `spec` (exported as `{}`; a v1beta1 Cohort may leave it out).
ResourceFlavor's nodeLabels, the quotas (nominalQuota, borrowingLimit, lendingLimit),
preemption, queueingStrategy, namespaceSelector and stopPolicy are spelt alike in both.
LocalQueues (namespaced, spec.clusterQueue alike in both) and other kinds are skipped.

What Kueue cannot express is reported as warnings: first-in first-out borrowing
across shares, head-of-line order (StrictFIFO orders one ClusterQueue only and does not
skip a job that can never start), retry bounds (Kueue's requeuing limits are cluster
wide), the runnable time limit, the entitlement order of shares, a disabled share's
pending jobs (Hold holds them too), a capacity below the sum of the limits, and the
shares' default workload classes (interruption contracts: not exported, kept on import).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

import yaml

from core.nesting import deeper_than
from engine.quota import borrow_cap
from fleet.models import InstanceType, JobQueue, QuotaShare
from governance.policy_code import source as read
from governance.policy_code.live import LiveQueue, live_queue
from governance.policy_code.model import (
    KEEP,
    Export,
    InstanceTypeSpec,
    PolicyFile,
    QueueSpec,
    ShareSpec,
)
from governance.policy_code.source import Lines, Problems, child

FORMAT = "kueue"
V1BETA1 = "kueue.x-k8s.io/v1beta1"
V1BETA2 = "kueue.x-k8s.io/v1beta2"
API_VERSION = V1BETA2
API_VERSIONS = (V1BETA1, V1BETA2)
# The ClusterQueue's field naming its cohort, per API version.
COHORT_KEY = {V1BETA1: "cohort", V1BETA2: "cohortName"}
GPU = "nvidia.com/gpu"
NODE_LABEL = "node.kubernetes.io/instance-type"
PREFIX = "quota-governance.io/"
HEADER = (
    "# Kueue objects exported by quota-governance. Quantities are GPUs (nvidia.com/gpu):\n"
    "# instances x the instance type's GPUs per instance. Annotations under\n"
    "# quota-governance.io/ carry what Kueue has no field for.\n"
)
_MAX_NAME = 253


def dns_name(name: str) -> str:
    """`name` as a Kubernetes object name (an RFC 1123 DNS subdomain)."""
    labels = []
    for label in re.sub(r"[^a-z0-9.-]", "-", name.lower()).split("."):
        label = re.sub(r"-{2,}", "-", label).strip("-")
        if label:
            labels.append(label)
    return ".".join(labels)[:_MAX_NAME].strip(".-") or "unnamed"


def _unique(name: str, taken: set[str]) -> str:
    candidate, number = name, 1
    while candidate in taken:
        number += 1
        suffix = f"-{number}"
        candidate = name[: _MAX_NAME - len(suffix)] + suffix
    taken.add(candidate)
    return candidate


# Export.


def borrowing_instances(instances: int, borrow_limit: int) -> int:
    """The borrowingLimit, in instances, of a nominal quota of `instances` under a borrow
    limit of `borrow_limit` percent (not -1: unlimited has no borrowingLimit)."""
    return borrow_cap(instances, borrow_limit)


def _resource(doc: dict, instances: int, gpus: int) -> dict:
    quota = {"name": GPU, "nominalQuota": instances * gpus}
    strategy = doc["strategy"]
    if strategy == QuotaShare.Strategy.RESERVE:
        quota["borrowingLimit"] = 0
        quota["lendingLimit"] = 0
    elif strategy == QuotaShare.Strategy.LEND:
        quota["borrowingLimit"] = 0
    elif doc["borrow_limit"] != -1:
        quota["borrowingLimit"] = borrowing_instances(instances, doc["borrow_limit"]) * gpus
    return quota


def _warnings(live: LiveQueue) -> list[str]:
    queue = live.queue
    docs = live.share_docs
    warnings = [
        f"{queue.name}: head-of-line order is exported as queueingStrategy StrictFIFO, the "
        "nearest Kueue has; it orders one ClusterQueue only and does not skip a job that can "
        "never start",
        f"{queue.name}: retry bounds (how often a job may be preempted before it fails) have "
        "no ClusterQueue field; Kueue's requeuing limits are cluster wide "
        "(waitForPodsReady.requeuingStrategy)"
        + (
            f"; this queue's default is {queue.default_preemption_retries}"
            if queue.default_preemption_retries is not None
            else ""
        ),
    ]
    if any(doc["strategy"] == QuotaShare.Strategy.LEND_AND_BORROW for doc in docs):
        warnings.append(
            f"{queue.name}: first-in first-out borrowing across shares cannot be expressed; "
            "Kueue hands idle quota out in its own admission order"
        )
    if len(docs) > 1:
        warnings.append(
            f"{queue.name}: the entitlement order of shares (the order they are listed) has "
            "no Kueue equivalent"
        )
    if queue.runnable_time_limit is not None:
        warnings.append(
            f"{queue.name}: the runnable time limit ({queue.runnable_time_limit} s) has no "
            "Kueue field; it is kept in an annotation"
        )
    for doc in docs:
        if doc["state"] == QuotaShare.State.DISABLED:
            warnings.append(
                f"{queue.name}/{doc['name']}: DISABLED is exported as stopPolicy Hold, which "
                "also holds the jobs submitted before; here they still run"
            )
    classes = [
        f"{doc['name']} → {doc['default_workload_class']}"
        for doc in docs
        if doc["default_workload_class"]
    ]
    if classes:
        warnings.append(
            f"{queue.name}: the shares' default workload classes ({', '.join(classes)}) and "
            "their interruption contracts have no Kueue field and are not exported; applying "
            "this file keeps them"
        )
    for type_name, instances in live.capacity.items():
        total = sum(doc["capacity_limits"].get(type_name, 0) for doc in docs)
        if total > instances:
            warnings.append(
                f"{queue.name}: the limits on {type_name} add up to {total} instances, more "
                f"than its capacity of {instances}; Kueue takes the nominal quotas as there"
            )
    return warnings


def _annotations(**values) -> dict:
    return {
        PREFIX + key.replace("_", "-"): str(value)
        for key, value in values.items()
        if value is not None and value != ""
    }


def objects(queues: list[JobQueue]) -> tuple[list[dict], list[str]]:
    lives = [live_queue(queue=queue) for queue in sorted(queues, key=lambda q: q.name)]
    warnings: list[str] = []
    docs: list[dict] = []
    flavors: dict[str, str] = {}
    flavor_taken: set[str] = set()
    types = {itype.name: itype for live in lives for itype in live.instance_types}
    flavor_docs = []
    for type_name in sorted(types):
        itype = types[type_name]
        flavors[type_name] = _unique(dns_name(type_name), flavor_taken)
        flavor_docs.append(
            {
                "apiVersion": API_VERSION,
                "kind": "ResourceFlavor",
                "metadata": {
                    "name": flavors[type_name],
                    "annotations": _annotations(
                        instance_type=type_name,
                        gpus_per_instance=itype.gpu_count,
                        gpu_model=itype.gpu_model,
                    ),
                },
                "spec": {"nodeLabels": {NODE_LABEL: type_name}},
            }
        )
    cohort_taken: set[str] = set()
    queue_taken: set[str] = set()
    for live in lives:
        queue = live.queue
        cohort = _unique(dns_name(queue.name), cohort_taken)
        docs.append(
            {
                "apiVersion": API_VERSION,
                "kind": "Cohort",
                "metadata": {
                    "name": cohort,
                    "annotations": _annotations(
                        queue=queue.name,
                        capacity=json.dumps(live.capacity, ensure_ascii=False),
                        description=queue.description,
                        default_preemption_retries=queue.default_preemption_retries,
                        runnable_time_limit=queue.runnable_time_limit,
                    ),
                },
                "spec": {},
            }
        )
        for doc in live.share_docs:
            docs.append(_cluster_queue(doc, cohort, queue.name, flavors, types, queue_taken))
        warnings += _warnings(live)
    return [*flavor_docs, *docs], warnings


def _cluster_queue(doc, cohort, queue_name, flavors, types, taken) -> dict:
    name = _unique(dns_name(f"{cohort}-{doc['name']}"), taken)
    spec = {
        COHORT_KEY[API_VERSION]: cohort,
        "namespaceSelector": {},
        "queueingStrategy": "StrictFIFO",
        "resourceGroups": [
            {
                "coveredResources": [GPU],
                "flavors": [
                    {
                        "name": flavors[type_name],
                        "resources": [_resource(doc, instances, types[type_name].gpu_count)],
                    }
                    for type_name, instances in doc["capacity_limits"].items()
                ],
            }
        ],
        "preemption": {
            "reclaimWithinCohort": "Any",
            "withinClusterQueue": "LowerPriority" if doc["in_share_preemption"] else "Never",
        },
    }
    if doc["state"] == QuotaShare.State.DISABLED:
        spec["stopPolicy"] = "Hold"
    return {
        "apiVersion": API_VERSION,
        "kind": "ClusterQueue",
        "metadata": {
            "name": name,
            "annotations": _annotations(
                queue=queue_name,
                share=doc["name"],
                team=doc["team"],
                strategy=doc["strategy"],
                borrow_limit=doc.get("borrow_limit"),
                priority_ceiling=doc["priority_ceiling"],
            ),
        },
        "spec": spec,
    }


def export(*, queue: JobQueue | None = None) -> Export:
    queues = [queue] if queue is not None else list(JobQueue.objects.order_by("name"))
    docs, warnings = objects(queues)
    notes = "".join(f"# warning: {warning}\n" for warning in warnings)
    body = yaml.safe_dump_all(
        docs, sort_keys=False, allow_unicode=True, default_flow_style=False, width=100
    )
    return Export(
        content=HEADER + notes + body,
        filename=f"{dns_name(queue.name) if queue else 'policy'}.kueue.yaml",
        media_type="application/yaml",
        warnings=tuple(warnings),
    )


# Import.


@dataclass
class _Cohort:
    queue: QueueSpec
    order: int


@dataclass
class _Flavor:
    type_name: str
    spec: InstanceTypeSpec | None


@dataclass
class _Reader:
    problems: Problems
    warnings: list[str] = field(default_factory=list)
    cohorts: dict[str, _Cohort] = field(default_factory=dict)
    flavors: dict[str, _Flavor] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)  # document prefix -> "Kind name"

    def add(self, path: str, message: str) -> None:
        """A problem labelled by its object ("ClusterQueue aws-sample-qs1: spec.cohort")."""
        prefix = path.split("]", 1)[0] + "]" if path.startswith("documents[") else ""
        rest = path[len(prefix) + 1 :]
        label = self.labels.get(prefix, prefix or "file")
        self.problems.add(path, message, label=f"{label}: {rest}" if rest else label)


def parse(text: str, *, source: str, target_queue: str | None = None) -> PolicyFile:  # noqa: C901
    documents = read.load_documents(text)
    lines = Lines()
    objects_: list[tuple[str, dict]] = []
    reader = _Reader(Problems(lines))
    for index, document in enumerate(documents):
        prefix = f"documents[{index}]"
        for path, line in document.lines.by_path.items():
            lines.by_path[child(prefix, path) if path else prefix] = line
        if document.data is None:
            continue
        obj = read.mapping(reader.problems, document.data, prefix)
        if obj is None:
            continue
        kind = obj.get("kind")
        name = (
            (obj.get("metadata") or {}).get("name")
            if isinstance(obj.get("metadata"), dict)
            else None
        )
        reader.labels[prefix] = f"{kind} {name}" if kind else prefix
        if kind not in ("Cohort", "ResourceFlavor", "ClusterQueue"):
            reader.warnings.append(
                f"{reader.labels[prefix]} is not a Cohort, ClusterQueue or ResourceFlavor: skipped"
            )
            continue
        if obj.get("apiVersion") not in API_VERSIONS:
            reader.add(child(prefix, "apiVersion"), f"must be one of {', '.join(API_VERSIONS)}")
            continue
        if not isinstance(name, str) or not name:
            reader.add(
                child(prefix, "metadata.name") if "metadata" in obj else prefix,
                "must name the object",
            )
            continue
        objects_.append((prefix, obj))
    for prefix, obj in objects_:
        if obj["kind"] == "ResourceFlavor":
            _read_flavor(reader, prefix, obj)
    for prefix, obj in objects_:
        if obj["kind"] == "Cohort":
            _read_cohort(reader, prefix, obj)
    for prefix, obj in objects_:
        if obj["kind"] == "ClusterQueue":
            _read_cluster_queue(reader, prefix, obj)
    queues = [entry.queue for entry in sorted(reader.cohorts.values(), key=lambda c: c.order)]
    if not queues:
        reader.problems.add("", "holds no Cohort or ClusterQueue", label="file")
    if target_queue is not None:
        if len(queues) > 1:
            reader.problems.add(
                "", "must describe one cohort to be applied to a chosen queue", label="file"
            )
        for queue in queues:
            queue.name = target_queue
    for queue in queues:
        seen: set[str] = set()
        for share in queue.shares:
            if share.name in seen:
                reader.add(share.field_path("name"), f"share '{share.name}' is listed twice")
            seen.add(share.name)
    reader.problems.raise_if_any()
    return PolicyFile(
        format=FORMAT,
        source=source,
        lines=lines,
        queues=queues,
        instance_types=[flavor.spec for flavor in reader.flavors.values() if flavor.spec],
        warnings=reader.warnings,
    )


def _annotation(obj: dict) -> dict:
    metadata = obj.get("metadata") or {}
    annotations = metadata.get("annotations") if isinstance(metadata, dict) else None
    return annotations if isinstance(annotations, dict) else {}


def _annotation_path(prefix: str, key: str) -> str:
    return f"{prefix}.metadata.annotations.{PREFIX}{key}"


def _whole_text(reader: _Reader, value, path: str, *, minimum: int) -> int | None:
    if read.is_int(value):
        number = value
    elif isinstance(value, str) and re.fullmatch(r"-?\d+", value.strip()):
        number = int(value)
    else:
        reader.add(path, "must be a whole number")
        return None
    if number < minimum:
        reader.add(path, f"must be at least {minimum}")
        return None
    return number


def _read_flavor(reader: _Reader, prefix: str, obj: dict) -> None:
    name = obj["metadata"]["name"]
    notes = _annotation(obj)
    spec = obj.get("spec") if isinstance(obj.get("spec"), dict) else {}
    node_labels = spec.get("nodeLabels") if isinstance(spec.get("nodeLabels"), dict) else {}
    type_name = notes.get(PREFIX + "instance-type") or node_labels.get(NODE_LABEL) or name
    gpus_key = PREFIX + "gpus-per-instance"
    gpus = None
    if gpus_key in notes:
        gpus = _whole_text(
            reader, notes[gpus_key], _annotation_path(prefix, "gpus-per-instance"), minimum=1
        )
    known = InstanceType.objects.filter(name=type_name).first()
    if gpus is None and known is not None:
        reader.flavors[name] = _Flavor(type_name, None)
        return
    itype = InstanceTypeSpec(
        name=str(type_name),
        gpu_count=gpus or 1,
        gpu_model=str(notes.get(PREFIX + "gpu-model", "")),
        gpus_known=gpus is not None,
        path=prefix,
    )
    reader.flavors[name] = _Flavor(type_name, itype)


def _gpus_per_instance(reader: _Reader, flavor: str) -> int:
    entry = reader.flavors.get(flavor)
    type_name = entry.type_name if entry else flavor
    if entry and entry.spec:
        return entry.spec.gpu_count
    known = InstanceType.objects.filter(name=type_name).first()
    return known.gpu_count if known else 1


def _read_cohort(reader: _Reader, prefix: str, obj: dict) -> None:
    name = obj["metadata"]["name"]
    notes = _annotation(obj)
    queue = QueueSpec(
        name=str(notes.get(PREFIX + "queue") or name),
        path=prefix,
        shares=[],
        fields={
            "capacity": _annotation_path(prefix, "capacity"),
            "description": _annotation_path(prefix, "description"),
            "default_preemption_retries": _annotation_path(prefix, "default-preemption-retries"),
            "runnable_time_limit": _annotation_path(prefix, "runnable-time-limit"),
        },
    )
    if PREFIX + "capacity" in notes:
        queue.capacity = _capacity(reader, notes[PREFIX + "capacity"], queue.fields["capacity"])
    if PREFIX + "description" in notes:
        queue.description = str(notes[PREFIX + "description"])
    for key, minimum in (("default-preemption-retries", 0), ("runnable-time-limit", 1)):
        if PREFIX + key in notes:
            value = _whole_text(
                reader, notes[PREFIX + key], _annotation_path(prefix, key), minimum=minimum
            )
            setattr(queue, key.replace("-", "_"), KEEP if value is None else value)
    if name in reader.cohorts:
        reader.add(child(prefix, "metadata.name"), f"cohort '{name}' is defined twice")
        return
    reader.cohorts[name] = _Cohort(queue, len(reader.cohorts))


def _capacity(reader: _Reader, value, path: str) -> dict[str, int] | None:
    try:
        # A flat object: anything nested is refused before json.loads recurses into it.
        flat = isinstance(value, str) and deeper_than(value, 1) is None
        capacity = json.loads(value) if flat else None
    except ValueError:  # not JSON, or a number longer than Python reads (4300 digits)
        capacity = None
    if not isinstance(capacity, dict) or not all(
        isinstance(k, str) and read.is_int(v) and v >= 1 for k, v in capacity.items()
    ):
        reader.add(
            path, 'must be a JSON object of instance type to instances, e.g. {"ml.g5.xlarge": 3}'
        )
        return None
    return dict(sorted(capacity.items()))


def _quantity(reader: _Reader, value, path: str, gpus: int, *, minimum: int) -> int | None:
    """A GPU quantity as instances of a type with `gpus` GPUs each."""
    number = _whole_text(reader, value, path, minimum=minimum)
    if number is None:
        return None
    if number % gpus:
        reader.add(path, f"{number} GPUs is not a whole number of instances of {gpus} GPUs")
        return None
    return number // gpus


def _read_cluster_queue(reader: _Reader, prefix: str, obj: dict) -> None:
    name = obj["metadata"]["name"]
    notes = _annotation(obj)
    spec_path = child(prefix, "spec")
    spec = read.mapping(reader.problems, obj.get("spec"), spec_path) if "spec" in obj else None
    if spec is None:
        reader.add(spec_path, "is required")
        return
    cohort_key = COHORT_KEY[obj["apiVersion"]]
    for version, other in COHORT_KEY.items():
        if other != cohort_key and other in spec:
            reader.add(
                child(spec_path, other),
                f"is {version}'s field; {obj['apiVersion']} names the cohort in spec.{cohort_key}",
            )
            return
    cohort = spec.get(cohort_key)
    if not isinstance(cohort, str) or not cohort:
        reader.add(
            child(spec_path, cohort_key), "is required: a share belongs to a queue (its cohort)"
        )
        return
    if cohort not in reader.cohorts:
        reader.cohorts[cohort] = _Cohort(
            QueueSpec(name=cohort, path=child(spec_path, cohort_key), shares=[]),
            len(reader.cohorts),
        )
    queue = reader.cohorts[cohort].queue
    share_name = notes.get(PREFIX + "share") or (
        name[len(cohort) + 1 :]
        if name.startswith(f"{cohort}-") and len(name) > len(cohort) + 1
        else name
    )
    fields = {
        "name": _annotation_path(prefix, "share")
        if PREFIX + "share" in notes
        else child(prefix, "metadata.name"),
        "team": _annotation_path(prefix, "team"),
        "strategy": child(spec_path, "resourceGroups"),
        "borrow_limit": child(spec_path, "resourceGroups"),
        "capacity_limits": child(spec_path, "resourceGroups"),
        "in_share_preemption": child(spec_path, "preemption.withinClusterQueue"),
        "state": child(spec_path, "stopPolicy"),
        "priority_ceiling": _annotation_path(prefix, "priority-ceiling"),
    }
    quotas = _gpu_quotas(reader, spec, spec_path)
    if quotas is None:
        return
    limits = {type_name: quota[0] for type_name, quota in quotas.items()}
    sharing = _sharing(reader, quotas, notes, prefix, spec_path)
    preemption = spec.get("preemption") if isinstance(spec.get("preemption"), dict) else {}
    within = preemption.get("withinClusterQueue", "Never")
    if within not in ("Never", "LowerPriority"):
        reader.add(
            fields["in_share_preemption"],
            "must be Never or LowerPriority (in-share preemption off or on)",
        )
        return
    reclaim = preemption.get("reclaimWithinCohort", "Never")
    if reclaim != "Any":
        reader.warnings.append(
            f"ClusterQueue {name}: reclaimWithinCohort {reclaim} is read as Any: a share here "
            "always reclaims its lent capacity, whatever the priorities"
        )
    stop = spec.get("stopPolicy", "None")
    if stop not in ("None", "Hold", "HoldAndDrain"):
        reader.add(fields["state"], "must be None, Hold or HoldAndDrain")
        return
    if sharing is None:
        return
    strategy, borrow_limit = sharing
    doc = {
        "name": str(share_name),
        "team": str(notes[PREFIX + "team"]) if notes.get(PREFIX + "team") else None,
        "strategy": strategy,
        "in_share_preemption": within == "LowerPriority",
        "state": QuotaShare.State.ENABLED if stop == "None" else QuotaShare.State.DISABLED,
        "capacity_limits": dict(sorted(limits.items())),
    }
    if strategy == QuotaShare.Strategy.LEND_AND_BORROW:
        doc["borrow_limit"] = borrow_limit
    if PREFIX + "priority-ceiling" in notes:
        ceiling = _whole_text(
            reader, notes[PREFIX + "priority-ceiling"], fields["priority_ceiling"], minimum=0
        )
        if ceiling is None:
            return
        doc["priority_ceiling"] = ceiling
    queue.shares.append(ShareSpec(doc=doc, path=prefix, fields=fields))


def _gpu_quotas(reader: _Reader, spec: dict, spec_path: str):
    """Instance type -> (instances, borrowing and lending instances (None: no limit), the
    quota's path)."""
    groups_path = child(spec_path, "resourceGroups")
    groups = read.sequence(reader.problems, spec.get("resourceGroups", []), groups_path)
    if groups is None:
        return None
    quotas: dict[str, tuple[int, int | None, int | None, str]] = {}
    ok = True
    for group_index, group in enumerate(groups):
        group_path = child(groups_path, group_index)
        if not isinstance(group, dict) or GPU not in (group.get("coveredResources") or []):
            reader.warnings.append(f"{group_path}: covers no {GPU}; its quotas are not read")
            continue
        for flavor_index, flavor in enumerate(group.get("flavors") or []):
            flavor_path = child(child(group_path, "flavors"), flavor_index)
            if not isinstance(flavor, dict) or not isinstance(flavor.get("name"), str):
                reader.add(flavor_path, "must name its ResourceFlavor")
                ok = False
                continue
            entry = reader.flavors.get(flavor["name"])
            type_name = entry.type_name if entry else flavor["name"]
            gpus = _gpus_per_instance(reader, flavor["name"])
            resources = flavor.get("resources") or []
            index, quota = next(
                (
                    (i, r)
                    for i, r in enumerate(resources)
                    if isinstance(r, dict) and r.get("name") == GPU
                ),
                (None, None),
            )
            if quota is None:
                reader.add(flavor_path, f"has no {GPU} quota")
                ok = False
                continue
            path = child(child(flavor_path, "resources"), index)
            if "nominalQuota" not in quota:
                reader.add(child(path, "nominalQuota"), "is required")
                ok = False
                continue
            nominal = _quantity(
                reader, quota["nominalQuota"], child(path, "nominalQuota"), gpus, minimum=1
            )
            borrowing = lending = None
            if "borrowingLimit" in quota:
                borrowing = _quantity(
                    reader, quota["borrowingLimit"], child(path, "borrowingLimit"), gpus, minimum=0
                )
                ok = ok and borrowing is not None
            if "lendingLimit" in quota:
                lending = _quantity(
                    reader, quota["lendingLimit"], child(path, "lendingLimit"), gpus, minimum=0
                )
                ok = ok and lending is not None
            if nominal is None:
                ok = False
                continue
            if type_name in quotas:
                reader.add(flavor_path, f"instance type '{type_name}' is listed twice")
                ok = False
                continue
            quotas[type_name] = (nominal, borrowing, lending, path)
    if ok and not quotas:
        reader.add(groups_path, f"must give a {GPU} quota for at least one flavor")
        return None
    return quotas if ok else None


def _sharing(reader: _Reader, quotas, notes, prefix: str, spec_path: str):
    """(strategy, borrow limit) from the limits, checked against the annotations."""
    strategy_note = notes.get(PREFIX + "strategy")
    strategy_path = _annotation_path(prefix, "strategy")
    borrow_path = _annotation_path(prefix, "borrow-limit")
    lends = {lending is None for _n, _b, lending, _p in quotas.values()}
    borrows = {borrowing for _n, borrowing, _l, _p in quotas.values()}
    first_path = next(iter(quotas.values()))[3]
    if len(lends) > 1:
        reader.add(
            child(first_path, "lendingLimit"),
            "must be 0 on every flavor or on none (a share reserves or lends all it has)",
        )
        return None
    for nominal, _borrowing, lending, path in quotas.values():
        if lending not in (None, 0):
            reader.add(
                child(path, "lendingLimit"),
                f"must be 0 (RESERVE) or absent (lends all): partial lending ({lending} of "
                f"{nominal} instances) cannot be expressed",
            )
            return None
    if lends == {False}:
        if borrows != {0}:
            reader.add(
                child(first_path, "borrowingLimit"),
                "must be 0: a share that lends nothing (RESERVE) borrows nothing",
            )
            return None
        derived = (QuotaShare.Strategy.RESERVE, None)
    elif borrows == {0} and strategy_note != QuotaShare.Strategy.LEND_AND_BORROW:
        derived = (QuotaShare.Strategy.LEND, None)
    elif borrows == {None}:
        derived = (QuotaShare.Strategy.LEND_AND_BORROW, -1)
    elif None in borrows:
        reader.add(
            child(first_path, "borrowingLimit"),
            "must be set on every flavor or on none (a share has one borrow limit)",
        )
        return None
    else:
        percent = _borrow_percent(reader, quotas, notes.get(PREFIX + "borrow-limit"), borrow_path)
        if percent is None:
            return None
        derived = (QuotaShare.Strategy.LEND_AND_BORROW, percent)
    if strategy_note is not None and strategy_note != derived[0]:
        reader.add(strategy_path, f"says {strategy_note} but the limits say {derived[0]}")
        return None
    if derived[0] == QuotaShare.Strategy.LEND_AND_BORROW and PREFIX + "borrow-limit" in notes:
        noted = _whole_text(reader, notes[PREFIX + "borrow-limit"], borrow_path, minimum=-1)
        if noted is None:
            return None
        if noted != derived[1]:
            reader.add(borrow_path, f"says {noted} but the borrowingLimits give {derived[1]}")
            return None
    return derived


def _borrow_percent(reader: _Reader, quotas, noted, path: str) -> int | None:
    """The percent that gives every flavor's borrowingLimit: the annotated one when it
    does, else the smallest that does."""

    def fits(percent: int) -> bool:
        return all(
            borrowing_instances(nominal, percent) == borrowing
            for nominal, borrowing, _l, _p in quotas.values()
        )

    if noted is not None:
        value = _whole_text(reader, noted, path, minimum=-1)
        if value is not None and value >= 0 and fits(value):
            return value
    candidates = [-(-borrowing * 100 // nominal) for nominal, borrowing, _l, _p in quotas.values()]
    percent = max(candidates)
    if fits(percent):
        return percent
    first_path = next(iter(quotas.values()))[3]
    reader.add(
        child(first_path, "borrowingLimit"),
        "the borrowingLimits are not one percent of the nominal quotas (a share has one "
        "borrow limit for every instance type)",
    )
    return None
