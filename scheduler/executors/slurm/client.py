"""The `slurm` executor's side of a Slurm cluster: its commands, and a run's files.

The product decides; Slurm runs what was decided. A job is submitted to Slurm only when
a pass starts it (never before, to be held), for three reasons: Slurm's scheduler then
never decides who runs, since nothing waits in its queue that the product did not
start; a held job would sit in Slurm's queue with a priority and an eligible time that
Slurm's backfill and any other tool of the site read and act on; and a release is no
cheaper than a submission (both are one RPC to slurmctld), while a submission at start
carries the attempt's own environment and files, which a job held since submission
cannot know yet. The partition (and account) are the queue's, so Slurm only places the
job on nodes that have what the instance type asks for (its resources, `binding`,
once per node: a job of N instances asks for N nodes).

The program. The batch script is always the same fixed file, `launch.py` next to
this one; its only argument is the path of the run's spec, a JSON file the product
writes in the job's area (`run_area.RunArea`): the definition's argument vector, the job's
whole environment (the definition's variables, `PATH`, `HOME`, `LANG`, `JOB_ID`,
`JOB_ATTEMPT`, `JOB_CHECKPOINT_DIR`, `JOB_STATUS_FILE`) and its working directory. The
launcher starts the argument vector itself: no shell reads anything a user gave, and
`scontrol show job` shows no parameter or variable. It stays the program's parent and
ends the grace itself: the product writes what is left of the grace to the run's
notice file before it sends SIGTERM, and the launcher kills the program's group that
many seconds after SIGTERM arrived (and the job ends at once), rather than Slurm's
SIGKILL, after which Slurm reports the end only `KillWait` later. The first
reconciliation after the grace sends `scancel --batch --signal=USR2` (the same kill) as
the fallback, and Slurm's own kill a kill margin later (`services`). The launcher also
holds the job's lock (the area's `lock` file, scheduler.executors.run_area) while the
program runs, so two attempts never use the checkpoint at once. It fences itself: its
watchdog kills the program when Slurm has not confirmed the job running for
`SLURM_FENCE_SECONDS` (the spec's `fence_seconds`), and once the program's group is
gone it writes the run's exit record (`exit_record`), the product's proof that nothing
of the run is left, read before any requeue. A definition's
wall-clock limit is the job's `--time` (whole minutes, rounded up). The job area
(`JOB_CHECKPOINT_ROOT/job-<id>/`, the shared run area) must be on a
file system the nodes share with the product.

Reading. squeue lists every job (ours by name, the others' with their user);
`scontrol -d show job` says what a job holds per node (CPUs, memory, GPUs with their
indexes: `Allocation`), read for the jobs the product did not start and once for each
run of ours when it starts running; sinfo gives the partition's nodes and whether the
partition is up. Slurm prints times in its client's local time without a zone: every
command runs with `TZ=UTC`, so `slurm_time` reads them right whatever the host's zone.

Every command runs with an argument list, `SLURM_CONF` set to the queue's cluster and a
timeout (`SLURM_COMMAND_TIMEOUT`); a command that fails or times out raises
`SlurmError`, and the caller decides (a submit that timed out may have reached Slurm:
the run is found by its name before anything is submitted again, never submitted twice).

Names. A run is the Slurm job named `<SLURM_JOB_PREFIX>-<job id>-<attempt>` (its
comment repeats it): that name is how a run is found (adopted after a crash between the
submission and the database write), and how a Slurm job of ours that the product does
not run is recognised (and cancelled) by the reconciliation
(`scheduler.executors.slurm.services`). This module touches no database row.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import shutil
import stat
import subprocess
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings

from scheduler.executors.run_area import AccountRule, JobAccount, RunArea

# The executor's name: its queues' `executor`.
EXECUTOR_NAME = "slurm"

LAUNCHER = Path(__file__).with_name("launch.py")

# Slurm job states (squeue %T) after which nothing of the job runs.
ENDED_STATES = frozenset(
    {
        "BOOT_FAIL",
        "CANCELLED",
        "COMPLETED",
        "DEADLINE",
        "FAILED",
        "NODE_FAIL",
        "OUT_OF_MEMORY",
        "PREEMPTED",
        "REVOKED",
        "SPECIAL_EXIT",
        "TIMEOUT",
    }
)
# Ends that are the cluster's failure, not the program's: the run is lost, not failed.
LOST_STATES = frozenset({"BOOT_FAIL", "NODE_FAIL"})
RUNNING_STATES = frozenset({"RUNNING", "COMPLETING", "STOPPED", "SUSPENDED", "SIGNALING"})

# squeue's fields, in this order, separated by a character no field holds.
_SEP = "\x1f"
_SQUEUE_FORMAT = _SEP.join(["%i", "%j", "%T", "%N", "%S", "%r", "%u"])
_SINFO_FORMAT = _SEP.join(["%N", "%T", "%c", "%m", "%G", "%f", "%E", "%a"])


# What the client commands say when no slurmctld answered them.
UNANSWERED = (
    "Unable to contact slurm controller",
    "Socket timed out",
    "Zero Bytes were transmitted",
    "Connection refused",
    "Slurm backup controller in standby mode",
    # munged stopped (or its key differs): no command is authenticated, none refused.
    "Munge encode failed",
    "Munge decode failed",
    "Protocol authentication error",
)


class SlurmError(Exception):
    """A Slurm command failed (`refused`: Slurm answered no) or did not answer in time."""

    def __init__(self, message: str, *, refused: bool = False):
        super().__init__(message)
        self.refused = refused


def job_prefix() -> str:
    return str(getattr(settings, "SLURM_JOB_PREFIX", "gpuq"))


def run_name(job_id: int, attempt: int) -> str:
    """The Slurm job name of one run (attempt) of a job."""
    return f"{job_prefix()}-{job_id}-{attempt}"


_RUN_NAME = re.compile(r"^(?P<prefix>.+)-(?P<job>\d+)-(?P<attempt>\d+)$")


def parse_run_name(name: str) -> tuple[int, int] | None:
    """(job id, attempt) of a run's Slurm job name, None for a job that is not ours."""
    match = _RUN_NAME.match(name)
    if match is None or match["prefix"] != job_prefix():
        return None
    return int(match["job"]), int(match["attempt"])


def command_timeout() -> float:
    return float(getattr(settings, "SLURM_COMMAND_TIMEOUT", 10))


@dataclass(frozen=True)
class SlurmJob:
    """One Slurm job as squeue lists it."""

    job_id: str
    name: str
    state: str
    nodes: str  # "node[1-2]"; "" while pending
    start_time: str  # ISO UTC time (`Cluster` asks for UTC) it started or may start; "N/A"
    reason: str
    user: str = ""

    @property
    def ended(self) -> bool:
        return self.state in ENDED_STATES

    @property
    def running(self) -> bool:
        return self.state in RUNNING_STATES


@dataclass(frozen=True)
class Ending:
    """How a Slurm job ended, from `scontrol show job` while Slurm still knows it."""

    state: str
    exit_code: int | None  # the program's exit status; -N when signal N killed it
    reason: str


# Node states (sinfo %T) in which a node takes new jobs; a draining node runs the jobs it
# has but takes none; any other state (down, drained, fail, maint, future, unknown, ...)
# and a node that does not respond (a `*` after its state) give nothing.
USABLE_NODE_STATES = frozenset({"idle", "mixed", "allocated", "completing", "planned"})
DRAINING_NODE_STATES = frozenset({"draining", "failing"})


@dataclass(frozen=True)
class SlurmNode:
    """One node of a partition as sinfo lists it."""

    name: str
    state: str  # sinfo's long state: idle, mixed, allocated, drained, down*, ...
    cpus: int
    memory_mb: int
    gres: dict[str, int]  # "gpu" and "gpu:<type>" -> count
    features: frozenset[str]
    reason: str  # why it is down or drained ("" if none)
    partition_state: str = "up"  # sinfo %a: up, down, drain, inact (the whole partition's)

    @property
    def base_state(self) -> str:
        return self.state.rstrip("*~#!%$@^-+")

    @property
    def responding(self) -> bool:
        return not self.state.endswith("*")

    @property
    def usable(self) -> bool:
        return self.responding and self.base_state in USABLE_NODE_STATES

    @property
    def draining(self) -> bool:
        return self.responding and self.base_state in DRAINING_NODE_STATES

    def describe(self) -> str:
        """'node2 drained (test)', 'node1 down, not responding'."""
        words = self.base_state or "unknown"
        if not self.responding:
            words += ", not responding"
        return f"{self.name} {words}" + (f" ({self.reason})" if self.reason else "")


def _gres_counts(text: str) -> dict[str, int]:
    """sinfo's %G ("gpu:4", "gpu:a100:4(S:0-1),mps:100") as name (and name:type) -> count."""
    counts: dict[str, int] = {}
    for entry in text.split(","):
        parts = entry.split("(")[0].strip().split(":")
        if len(parts) < 2 or not parts[-1].isdigit():
            continue
        count = int(parts[-1])
        counts[parts[0]] = counts.get(parts[0], 0) + count
        if len(parts) == 3:
            counts[f"{parts[0]}:{parts[1]}"] = count
    return counts


_MEMORY_UNITS = {"K": 1 / 1024, "M": 1, "G": 1024, "T": 1024 * 1024}


def _megabytes(value: str) -> float:
    unit = value[-1:].upper()
    if unit in _MEMORY_UNITS:
        return float(value[:-1]) * _MEMORY_UNITS[unit]
    return float(value)


def _has_features(constraint: str, features: frozenset[str]) -> bool:
    if not constraint:
        return True
    if "|" in constraint:
        return any(feature in features for feature in constraint.split("|"))
    return all(feature in features for feature in constraint.split("&"))


def _memory_asked(options: dict[str, str], *, cpus: int, gpus: int) -> float:
    """Megabytes one instance asks for (0: none said; --mem=0 is the whole node's)."""
    if options.get("mem"):
        return _megabytes(options["mem"])
    if options.get("mem-per-cpu"):
        return _megabytes(options["mem-per-cpu"]) * cpus
    if options.get("mem-per-gpu") and gpus:
        return _megabytes(options["mem-per-gpu"]) * gpus
    return 0.0


def instances_per_node(resources: list[str], node: SlurmNode) -> int:
    """How many instances of these sbatch resources (one task each) fit on an empty node:
    its GPUs (`--gres=gpu[:type]:N`, `--gpus-per-node`), CPUs (`--cpus-per-task`,
    `--cpus-per-gpu`, one by default) and memory (`--mem`, `--mem-per-cpu`,
    `--mem-per-gpu`) divided by what one asks, at most one with `--exclusive`, none on a
    node without the `--constraint` features (`a&b` all of them, `a|b` one of them).
    Options that name no amount (qos, reservation, tmp) do not count."""
    options = dict(option.removeprefix("--").partition("=")[::2] for option in resources)
    if not _has_features(options.get("constraint", ""), node.features):
        return 0
    fits: list[int] = []
    gpus = 0
    for key in ("gres", "gpus-per-node"):
        for entry in filter(None, options.get(key, "").split(",")):
            parts = entry.split(":")
            if key == "gpus-per-node":
                parts = ["gpu", *parts]
            count = int(parts[-1]) if parts[-1].isdigit() else 1
            name = ":".join(parts[:-1]) if parts[-1].isdigit() else ":".join(parts)
            if name.startswith("gpu"):
                gpus += count
            if count:
                fits.append(node.gres.get(name, 0) // count)
    cpus = int(options.get("cpus-per-task") or 1)
    if options.get("cpus-per-gpu") and gpus:
        cpus = max(cpus, gpus * int(options["cpus-per-gpu"]))
    fits.append(node.cpus // cpus if cpus else 0)
    memory = _memory_asked(options, cpus=cpus, gpus=gpus)
    if memory > 0:
        fits.append(int(node.memory_mb // memory))
    if "exclusive" in options:
        fits.append(1)
    return max(0, min(fits))


def slurm_time(text: str) -> dt.datetime | None:
    """A time Slurm printed ("2026-12-07T23:27:16", in UTC: `Cluster` sets TZ=UTC for
    its commands) as an aware datetime; None for "N/A", "Unknown", "None" or garbage."""
    try:
        return dt.datetime.fromisoformat(text).replace(tzinfo=dt.UTC)
    except ValueError:
        return None


@dataclass(frozen=True)
class NodeAllocation:
    """What one job holds on one node: CPUs, memory and GRES (name and name:type ->
    count), and the GPU indexes when Slurm says them ("0-2", "" when not)."""

    cpus: int
    memory_mb: int
    gres: dict[str, int]
    gpu_indexes: str


@dataclass(frozen=True)
class Allocation:
    """A job as `scontrol -d --oneliner show job` describes it: who, since when, and
    what it holds per node (empty while it does not run)."""

    job_id: str
    name: str
    user: str
    state: str
    start_time: str
    per_node: dict[str, NodeAllocation]

    @property
    def gpus(self) -> int:
        return sum(held.gres.get("gpu", 0) for held in self.per_node.values())


def _id_count(text: str) -> int:
    """How many ids a Slurm id list names ("0-2,5" -> 4)."""
    count = 0
    for part in filter(None, text.split(",")):
        low, _, high = part.partition("-")
        if low.isdigit():
            count += int(high) - int(low) + 1 if high.isdigit() else 1
    return count


def _held_gres(text: str) -> tuple[dict[str, int], str]:
    """A node's GRES of `scontrol -d` ("gpu:a100:3(IDX:0-2),mps:0") as name (and
    name:type) -> count, and the GPU indexes ("0-2")."""
    counts: dict[str, int] = {}
    indexes = ""
    for entry in re.split(r",(?![^(]*\))", text):
        head, _, extra = entry.partition("(")
        parts = head.strip().split(":")
        if len(parts) < 2 or not parts[-1].isdigit():
            continue
        count = int(parts[-1])
        counts[parts[0]] = counts.get(parts[0], 0) + count
        if len(parts) == 3:
            counts[f"{parts[0]}:{parts[1]}"] = counts.get(f"{parts[0]}:{parts[1]}", 0) + count
        if parts[0] == "gpu" and extra.startswith("IDX:"):
            indexes = ",".join(filter(None, [indexes, extra[4:].rstrip(")")]))
    return counts, indexes


def parse_allocation(line: str) -> Allocation | None:
    """One line of `scontrol -d --oneliner show job`; None if it names no job. Each
    `Nodes=` word opens one node group (CPU_IDs, Mem, GRES) that holds on each of its
    nodes; `NumNodes=` and the like are other words."""
    words = [word.partition("=")[::2] for word in line.split()]
    fields = {key: value for key, value in words}
    if not fields.get("JobId"):
        return None
    per_node: dict[str, NodeAllocation] = {}
    group: dict[str, str] | None = None
    groups: list[dict[str, str]] = []
    for key, value in words:
        if key == "Nodes":
            group = {"Nodes": value}
            groups.append(group)
        elif group is not None and key in {"CPU_IDs", "Mem", "GRES"}:
            group[key] = value
    for group in groups:
        gres, indexes = _held_gres(group.get("GRES", ""))
        memory = group.get("Mem", "0")
        held = NodeAllocation(
            cpus=_id_count(group.get("CPU_IDs", "")),
            memory_mb=int(memory) if memory.isdigit() else 0,
            gres=gres,
            gpu_indexes=indexes,
        )
        for node in expand_hostlist(group["Nodes"]):
            per_node[node] = held
    return Allocation(
        job_id=fields["JobId"],
        name=fields.get("JobName", ""),
        user=fields.get("UserId", "").split("(")[0],
        state=fields.get("JobState", ""),
        start_time=fields.get("StartTime", ""),
        per_node=per_node,
    )


_HOSTLIST = re.compile(r"([^,\[]+)(?:\[([^\]]+)\])?,?")


def expand_hostlist(text: str) -> list[str]:
    """Slurm's compressed host list ("node[1-2,5],gpu7") as names, in order."""
    names: list[str] = []
    for prefix, ranges in _HOSTLIST.findall(text or ""):
        if not ranges:
            names.append(prefix)
            continue
        for part in ranges.split(","):
            low, _, high = part.partition("-")
            width = len(low)
            for number in range(int(low), int(high or low) + 1):
                names.append(f"{prefix}{number:0{width}d}")
    return names


class Cluster:
    """The Slurm cluster of one slurm.conf, driven through its client commands."""

    def __init__(self, conf: str, *, timeout: float | None = None):
        self.conf = conf
        self.timeout = command_timeout() if timeout is None else timeout

    def _env(self) -> dict[str, str]:
        # The client commands need only where the cluster is, and a PATH for themselves.
        # Slurm prints times in its client's local time, without a zone: asked in UTC,
        # they read the same whatever the host's or Django's time zone (`slurm_time`).
        return {
            "SLURM_CONF": self.conf,
            "PATH": os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"),
            "LANG": "C.UTF-8",
            "TZ": "UTC",
        }

    def run(self, *argv: str) -> str:
        try:
            done = subprocess.run(
                list(argv),
                capture_output=True,
                text=True,
                timeout=self.timeout,
                env=self._env(),
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise SlurmError(f"{argv[0]} did not answer within {self.timeout:g} s") from None
        except OSError as error:
            raise SlurmError(f"{argv[0]} cannot run: {error}") from None
        if done.returncode != 0:
            message = done.stderr.strip() or f"{argv[0]} exited {done.returncode}"
            # No controller to answer (restarting, down, unreachable) is no refusal.
            unanswered = any(marker in message for marker in UNANSWERED)
            raise SlurmError(message, refused=not unanswered)
        return done.stdout

    # Reading.

    def jobs(self, *, name: str | None = None) -> list[SlurmJob]:
        """The jobs Slurm knows (pending, running, and ended ones for `MinJobAge`)."""
        argv = ["squeue", "--noheader", "--states=all", f"--format={_SQUEUE_FORMAT}"]
        if name is not None:
            argv.append(f"--name={name}")
        jobs = []
        for line in self.run(*argv).splitlines():
            fields = line.split(_SEP)
            if len(fields) != 7:
                continue
            job_id, job_name, state, nodes, start, reason, user = (f.strip() for f in fields)
            nodes = "" if nodes in {"", "(null)"} else nodes
            jobs.append(SlurmJob(job_id, job_name, state, nodes, start, reason, user))
        return jobs

    def find(self, name: str) -> list[SlurmJob]:
        """The jobs of that name, oldest first (Slurm's ids grow)."""
        return sorted(self.jobs(name=name), key=lambda job: int(job.job_id.split("_")[0]))

    def ending(self, job_id: str) -> Ending | None:
        """How the job ended; None when Slurm no longer knows it (accounting is not
        needed, so an end older than `MinJobAge` is forgotten)."""
        try:
            text = self.run("scontrol", "--oneliner", "show", "job", job_id)
        except SlurmError as error:
            if error.refused and "Invalid job id" in str(error):
                return None
            raise
        fields = dict(word.partition("=")[::2] for word in text.split())
        state = fields.get("JobState", "")
        code, _, signal = fields.get("ExitCode", "").partition(":")
        exit_code: int | None = None
        if code.isdigit() and signal.isdigit():
            exit_code = -int(signal) if int(signal) else int(code)
        return Ending(state=state, exit_code=exit_code, reason=fields.get("Reason", ""))

    def nodes(self, partition: str) -> list[SlurmNode]:
        """The partition's nodes, by name: state, size and why Slurm took one out."""
        out = self.run(
            "sinfo", "--noheader", "--Node", f"--partition={partition}", f"--format={_SINFO_FORMAT}"
        )
        nodes = {}
        for line in out.splitlines():
            fields = [f.strip() for f in line.split(_SEP)]
            if len(fields) != 8 or not fields[0]:
                continue
            name, state, cpus, memory, gres, features, reason, available = fields
            nodes[name] = SlurmNode(
                name=name,
                state=state,
                cpus=int(cpus) if cpus.isdigit() else 0,
                memory_mb=int(memory) if memory.isdigit() else 0,
                gres=_gres_counts(gres),
                features=frozenset(
                    f for f in features.split(",") if f and f not in {"(null)", "none"}
                ),
                reason="" if reason in {"none", "(null)"} else reason,
                partition_state=available.lower(),
            )
        return [nodes[name] for name in sorted(nodes)]

    def allocations(self, job_id: str | None = None) -> dict[str, Allocation]:
        """What jobs hold on each node (`scontrol -d --oneliner show job`: per node its
        CPUs, memory and GRES with the device indexes), by Slurm job id; one job's with
        `job_id`. One command for every job: the reconciliation asks only when jobs the
        product did not start run on its partitions' nodes."""
        argv = ["scontrol", "-d", "--oneliner", "show", "job"]
        try:
            text = self.run(*argv, *([job_id] if job_id else []))
        except SlurmError as error:
            if job_id and error.refused and "Invalid job id" in str(error):
                return {}
            raise
        found = (parse_allocation(line) for line in text.splitlines())
        return {allocation.job_id: allocation for allocation in found if allocation}

    # Writing.

    def submit(self, argv: list[str]) -> str:
        """sbatch with `argv` (options, the launcher and its argument); the job id."""
        out = self.run("sbatch", "--parsable", *argv).strip()
        job_id = out.split(";")[0]
        if not job_id.isdigit():
            raise SlurmError(f"sbatch answered {out!r}, not a job id", refused=True)
        return job_id

    def signal(self, job_id: str, name: str) -> None:
        """Send signal `name` (TERM, KILL) to every process of the job: `--full` reaches
        the batch script itself, which a plain `scancel --signal` does not."""
        self.run("scancel", "--full", f"--signal={name}", job_id)

    def kill(self, job_id: str) -> None:
        """The end of the grace: the launcher (the batch script) sends SIGKILL to the
        program's group and ends the same way, so the job ends at once
        (`launch`)."""
        self.run("scancel", "--batch", "--signal=USR2", job_id)

    def cancel(self, job_id: str) -> None:
        self.run("scancel", job_id)


# Who runs the job, and where: the shared rule and area (scheduler.executors.run_area).


SUBMITTER_ACCOUNT = AccountRule(
    "SLURM_JOB_USER", "SLURM_ALLOW_ROOT", "the submitter", "submit as it"
)


def job_account() -> JobAccount:
    """The account Slurm jobs run as, or SlurmError (refused) when none is safe: the
    shared rule (run_area.AccountRule) for sbatch: a root submitter runs jobs as
    `SLURM_JOB_USER` (sbatch --uid/--gid, root's right), as root only with
    `SLURM_ALLOW_ROOT=1`; a submitter that is not root runs them as itself."""
    return SUBMITTER_ACCOUNT.account(error=_refused)


def _refused(why: str) -> SlurmError:
    return SlurmError(why, refused=True)


def prepare_area(files: RunArea, account: JobAccount | None = None) -> None:
    """The run's directories, and its output file belonging to its account (Slurm opens
    the output as the job's user), and the lock the launcher flocks through a read-only
    open (the submitter's, readable)."""
    account = account or JobAccount()
    files.prepare(account)
    fd = os.open(files.log, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o600)
    try:
        if account.uid is not None:
            os.fchown(fd, account.uid, account.gid)
    finally:
        os.close(fd)
    os.close(os.open(files.lock, os.O_RDONLY | os.O_CREAT | os.O_NOFOLLOW, 0o644))


def write_spec(
    files: RunArea,
    *,
    job_id: int,
    attempt: int,
    argv: list[str],
    environment: dict,
    account: JobAccount | None = None,
    lock_wait: float = 0,
    fence_seconds: float = 0,
    conf: str = "",
) -> None:
    """The launcher's instructions: what to exec, with which environment, where; the
    job's lock and how long to wait for it, where the notice and its own word go; how
    long its watchdog lets the program run without Slurm confirming the job
    (`fence_seconds`, 0: no watchdog), and the cluster's conf and scontrol to ask."""
    env = files.environment(environment=environment, job_id=job_id, attempt=attempt)
    spec = {
        "argv": [str(arg) for arg in argv],
        "environment": env,
        "workdir": str(files.workdir),
        "lock": str(files.lock),
        "lock_wait": float(lock_wait),
        "notice": str(files.notice),
        "launcher": str(files.launcher),
        "fence_seconds": float(fence_seconds),
        "slurm_conf": str(conf),
        "scontrol": shutil.which("scontrol") or "scontrol",
    }
    tmp = files.spec.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o400)
    with os.fdopen(fd, "w") as handle:
        json.dump(spec, handle)
        # The launcher reads it as the job's user; nobody else may (its environment).
        if account is not None and account.uid is not None:
            os.fchown(handle.fileno(), account.uid, account.gid)
    os.replace(tmp, files.spec)


def sbatch_arguments(
    *,
    name: str,
    partition: str,
    account: str,
    instances: int,
    resources: list[str],
    files: RunArea,
    user: JobAccount | None = None,
    time_limit: int | None = None,
) -> list[str]:
    """sbatch's arguments for one run: where, how much, for how long (`time_limit`
    seconds as `--time`, rounded up to Slurm's whole minutes), the files, then the
    launcher and its one argument (the spec's path)."""
    argv = [
        f"--job-name={name}",
        f"--comment={name}",
        f"--partition={partition}",
        f"--nodes={instances}",
        "--ntasks-per-node=1",
        *resources,
        # The product restarts a run as a new attempt; Slurm never requeues one.
        "--no-requeue",
        # The launcher builds the job's environment from the spec alone.
        "--export=NONE",
        f"--chdir={files.workdir}",
        f"--output={files.log}",
        "--open-mode=append",
    ]
    if time_limit:
        argv.append(f"--time={time_minutes(time_limit)}")
    if account:
        argv.append(f"--account={account}")
    if user is not None and user.uid is not None:
        argv += [f"--uid={user.uid}", f"--gid={user.gid}"]
    return [*argv, str(LAUNCHER), str(files.spec)]


def time_minutes(seconds: int) -> int:
    """A wall-clock limit in seconds as Slurm's `--time` (whole minutes), rounded up: a
    run is never cut before its definition's limit (at most 59 s after it)."""
    return max(1, -(-int(seconds) // 60))


def launcher_said(path: Path) -> dict:
    """What the launcher wrote of itself ({"checkpoint_busy": at}, or its exit record:
    `exit_record`), {} if nothing."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return {}
    try:
        said = json.loads(os.read(fd, 4096))
        return said if isinstance(said, dict) else {}
    except (OSError, ValueError):
        return {}
    finally:
        os.close(fd)


@dataclass(frozen=True)
class ExitRecord:
    """How the program ended, as its launcher (or the launcher's watchdog) wrote it
    once the program's whole group was gone (`launch`): proof nothing of it runs."""

    ended_at: float  # epoch seconds, the node's clock
    exit_code: int | None  # its exit status; -N when signal N killed it; None: unknown
    fenced: bool  # killed by the launcher's watchdog (the job unconfirmed by Slurm)


def _number(value) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if value == value else None  # not NaN


def exit_record(path: Path) -> ExitRecord | None:
    """The run's exit record, None when there is none (the program may run, or the
    launcher never wrote: a node gone) or it is not one ({"checkpoint_busy": ...})."""
    said = launcher_said(path)
    ended_at = _number(said.get("ended_at"))
    if ended_at is None:
        return None
    status, killed = _number(said.get("exit_status")), _number(said.get("signal"))
    if killed:
        exit_code: int | None = -int(killed)
    elif status is not None:
        exit_code = int(status)
    else:
        exit_code = None
    return ExitRecord(ended_at=ended_at, exit_code=exit_code, fenced=said.get("fenced") is True)


# What slurmstepd writes on the job's output when jobacct_gather's OverMemoryKill ends a
# step (no cgroups: Slurm 22.05 then reports FAILED, signal 9, not OUT_OF_MEMORY).
_MEMORY_KILL = re.compile(
    rb"^slurmstepd(?:-[^:\s]*)?: error: \S+ exceeded memory limit \((\d+) > (\d+)\), "
    rb"being killed",
    re.MULTILINE,
)
MEMORY_KILL_WINDOW = 64 * 1024


def memory_kill(log: Path) -> tuple[int, int] | None:
    """(bytes used, bytes allowed) if slurmstepd says, in the last 64 KiB of the run's
    output, that it killed the job for its memory; None otherwise. The file is opened
    without following a symlink, and only a regular file is read."""
    try:
        fd = os.open(log, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return None
        start = max(0, info.st_size - MEMORY_KILL_WINDOW)
        found = _MEMORY_KILL.findall(os.pread(fd, info.st_size - start, start))
    except OSError:
        return None
    finally:
        os.close(fd)
    if not found:
        return None
    used, allowed = found[-1]
    return int(used), int(allowed)
