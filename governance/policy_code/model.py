"""What a parsed policy file says, whatever its format.

Shares, urgency definitions and workload classes are held in the documents the
history records (governance.policy.selectors.share_document, governance.policy.services.
urgency_document, governance.policy.workload_classes.workload_class_document), so a
plan's diff is computed exactly as the history computes it.
Each part remembers where it came from in the file (`path`, and `fields`: document
field -> file field path), so a rule broken by the whole policy is reported at the
file's own line and field.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from governance.policy_code.source import Lines


@dataclass
class TeamSpec:
    name: str
    description: str = ""
    path: str = ""  # where the file defines it; "": named by a share only


@dataclass
class InstanceTypeSpec:
    name: str
    gpu_count: int
    gpu_model: str = ""
    # False when the format cannot say how many GPUs it has (1 is then assumed).
    gpus_known: bool = True
    path: str = ""
    # The sbatch options of one instance on Slurm; None: the file does not say.
    slurm_resources: list[str] | None = None


@dataclass
class ShareSpec:
    doc: dict
    path: str
    fields: dict[str, str] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.doc["name"]

    def field_path(self, name: str) -> str:
        return self.fields.get(name, self.path)


# Queue settings a file may leave out: KEEP means "as the live queue has it".
KEEP = object()


@dataclass
class QueueSpec:
    name: str
    path: str
    shares: list[ShareSpec]
    # None: keep the live capacity; a new queue then gets the sum of its shares' limits.
    capacity: dict[str, int] | None = None
    description: object = KEEP
    default_preemption_retries: object = KEEP
    runnable_time_limit: object = KEEP
    executor: object = KEEP
    # The Slurm binding as the history records it (slurm_conf, slurm_partition,
    # slurm_account; all "" unbinds), or KEEP.
    slurm: object = KEEP
    fields: dict[str, str] = field(default_factory=dict)

    def field_path(self, name: str) -> str:
        return self.fields.get(name, self.path)


@dataclass
class UrgencySpec:
    doc: dict
    path: str
    fields: dict[str, str] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.doc["name"]


@dataclass
class WorkloadClassSpec:
    """A workload class as the history records it (workload_class_document); its
    contract fields as the file gives them, for workload_class_validate to check."""

    doc: dict
    path: str
    fields: dict[str, str] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.doc["name"]

    def field_path(self, name: str) -> str:
        return self.fields.get(name, self.path)


@dataclass
class PolicyFile:
    format: str
    source: str
    lines: Lines
    queues: list[QueueSpec]
    teams: list[TeamSpec] = field(default_factory=list)
    instance_types: list[InstanceTypeSpec] = field(default_factory=list)
    urgencies: list[UrgencySpec] | None = None
    # None: the file says nothing of workload classes (they stay as they are); a list:
    # every class there is, so a live class it leaves out is deleted.
    workload_classes: list[WorkloadClassSpec] | None = None
    # The format has a workload_classes section (native): its absence is worth a note.
    has_class_section: bool = False
    # Teams named by shares but not defined in the file are created (aws-batch, kueue);
    # the native format defines its teams and refers to nothing else.
    creates_named_teams: bool = True
    warnings: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Export:
    """One exported file and what a person should know about it."""

    content: str
    filename: str
    media_type: str
    warnings: tuple[str, ...] = ()
