"""Fencing on the real cluster (issue 34, point 3): a GPU is never held by two programs,
checked from outside the product by sampling every 0.1 s:

- each live process holding one of the cluster's fake GPU devices (their files, through
  /proc/<pid>/fd), and each program's own `CUDA_VISIBLE_DEVICES` and node (its
  /proc/<pid>/environ): at most one live program per device at every sample;
- Slurm's own view when it answers (`scontrol -d show job`: GRES IDX per node).

Faults: munged stopped 30 s under running programs that ignore SIGTERM (their launchers'
watchdogs kill them; Slurm may end the jobs NODE_FAIL; the product requeues only after
the programs are gone; one that exits 0 meanwhile SUCCEEDED and never runs again), and a
launcher frozen with SIGSTOP (its watchdog kills the program within the fence). The
daemons are this cluster's own (tests/scheduler/slurm/daemons.py); each is restored.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import re
import signal
import subprocess
import threading
import time
from collections import defaultdict
from pathlib import Path

import pytest
from django.utils import timezone

from fleet.models import CapacityLimit, Job, JobEvent, QueueCapacity
from scheduler.executors.run_area import RunArea
from scheduler.executors.slurm import services as service
from scheduler.executors.slurm.client import exit_record, run_name
from scheduler.services.passes import scheduling_pass
from tests.scheduler.slurm import daemons
from tests.scheduler.slurm.conftest import JOB_USER, fresh, settle, submitted

pytestmark = [pytest.mark.slurm, pytest.mark.django_db]


FENCE = 5


def holder(device_dir: Path, *, until: str | None = None) -> list[str]:
    """A program that ignores SIGTERM and holds its GPU's device file open (the one
    Slurm gave it: its node and CUDA_VISIBLE_DEVICES), until the file `until` exists,
    then exits 0."""
    text = (
        "import os, signal, sys, time\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "node = os.environ['SLURM_JOB_NODELIST']\n"
        "gpu = os.environ['CUDA_VISIBLE_DEVICES']\n"
        f"fd = os.open('{device_dir}/' + node + '-gpu' + gpu, os.O_RDONLY)\n"
        "print('holding', node, gpu, flush=True)\n"
        f"until = {until!r}\n"
        "while not (until and os.path.exists(until)):\n"
        "    time.sleep(0.05)\n"
        "print('done', flush=True)\n"
    )
    return ["python3", "-c", text]


def _read(path: str) -> bytes:
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except OSError:
        return b""


def programs(root: Path, device_dir: Path) -> list[dict]:
    """The live processes of this test's programs (their environment names a job area
    under `root`), with what they hold: the device files open, and the GPU their
    environment says."""
    uid = pwd.getpwnam(JOB_USER).pw_uid if JOB_USER else os.geteuid()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            if os.stat(f"/proc/{entry}").st_uid != uid:
                continue
        except OSError:
            continue
        stat = _read(f"/proc/{entry}/stat").rpartition(b")")[2].split()
        if not stat or stat[0] in (b"Z", b"X"):
            continue
        env = dict(
            item.partition(b"=")[::2] for item in _read(f"/proc/{entry}/environ").split(b"\0")
        )
        if not env.get(b"JOB_CHECKPOINT_DIR", b"").startswith(str(root).encode()):
            continue
        held = set()
        try:
            for fd in os.listdir(f"/proc/{entry}/fd"):
                with_link = os.readlink(f"/proc/{entry}/fd/{fd}")
                if with_link.startswith(str(device_dir)):
                    held.add(with_link)
        except OSError:
            pass
        found.append(
            {
                "pid": int(entry),
                "ppid": int(stat[1]),
                "run": (int(env[b"JOB_ID"]), int(env[b"JOB_ATTEMPT"])),
                "gpu": (
                    env.get(b"SLURM_JOB_NODELIST", b"").decode(),
                    env[b"CUDA_VISIBLE_DEVICES"].decode(),
                ),
                "held": held,
            }
        )
    return found


_GRES = re.compile(r"Nodes=(\S+) CPU_IDs=\S+ Mem=\S+ GRES=\S*?\(IDX:([\d,-]+)\)")


class Sampler:
    """Samples every 0.1 s who holds each GPU (processes; Slurm in a thread of its own,
    when it answers); any device with two live holders at one sample is an overlap."""

    def __init__(self, root: Path, device_dir: Path, slurm_cluster, prefix: str):
        self.root, self.device_dir = root, device_dir
        self.cluster, self.prefix = slurm_cluster, prefix
        self.stopped = threading.Event()
        self.overlaps: list = []
        self.slurm_overlaps: list = []
        self.last_alive: dict[tuple[int, int], float] = {}
        self.seen_runs: set[tuple[int, int]] = set()
        self.held_by: dict[tuple[int, int], set] = defaultdict(set)
        self.gaps: list[float] = []
        self.errors: list[Exception] = []
        self.samples = self.slurm_samples = 0
        self.threads = [threading.Thread(target=self._processes, daemon=True)]
        self.threads.append(threading.Thread(target=self._slurm, daemon=True))

    def __enter__(self) -> Sampler:
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stopped.set()
        for thread in self.threads:
            thread.join(timeout=10)
        assert not self.errors, self.errors

    def _processes(self) -> None:
        try:
            self._sample_processes()
        except Exception as error:  # the test fails on it (`errors`)
            self.errors.append(error)
            raise

    def _sample_processes(self) -> None:
        last = time.monotonic()
        while not self.stopped.is_set():
            at = time.time()
            found = programs(self.root, self.device_dir)
            per_device: dict[str, set] = defaultdict(set)
            for program in found:
                self.last_alive[program["run"]] = at
                self.seen_runs.add(program["run"])
                per_device["env:" + ":".join(program["gpu"])].add(program["pid"])
                for path in program["held"]:
                    per_device[path].add(program["pid"])
                    self.held_by[program["run"]].add(path)
            for device, pids in per_device.items():
                if len(pids) > 1:
                    self.overlaps.append((at, device, sorted(pids)))
            self.samples += 1
            now = time.monotonic()
            self.gaps.append(now - last)
            last = now
            time.sleep(max(0.0, 0.1 - (time.monotonic() - now)))

    def _slurm(self) -> None:
        while not self.stopped.is_set():
            try:
                out = subprocess.run(
                    ["scontrol", "-d", "--oneliner", "show", "job"],
                    env=self.cluster.env,
                    capture_output=True,
                    text=True,
                    timeout=2,
                    check=False,
                ).stdout
            except subprocess.TimeoutExpired:
                out = ""
            holders: dict[tuple[str, str], list[str]] = defaultdict(list)
            for line in out.splitlines():
                if "JobState=RUNNING" not in line or f"JobName={self.prefix}-" not in line:
                    continue
                job_id = line.split()[0].partition("=")[2]
                for nodes, indexes in _GRES.findall(line):
                    holders[(nodes, indexes)].append(job_id)
            if out:
                self.slurm_samples += 1
            for device, jobs in holders.items():
                if len(jobs) > 1:
                    self.slurm_overlaps.append((time.time(), device, jobs))
            time.sleep(0.2)


def device_dir(slurm_cluster) -> Path:
    return daemons.test_dir(slurm_cluster.conf) / "dev"


def drive(queue_id: int, until, *, timeout: float, every: float = 0.3):
    """What the workers would do: reconcile, pass, submit what a pass started."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        service.slurm_reconcile()
        scheduling_pass(queue_id=queue_id, now=timezone.now())
        for job in Job.objects.filter(queue_id=queue_id, state="RUNNING", worker=""):
            service.slurm_submit_run(job_id=job.pk, attempt=job.attempt)
        found = until()
        if found:
            return found
        time.sleep(every)
    raise AssertionError(f"not within {timeout:g} s")


@pytest.fixture
def programs_killed(settings, slurm_cluster):
    """At the end, this test's programs are killed: they ignore the SIGTERM of the
    fixtures' scancel, and Slurm would keep their jobs COMPLETING for KillWait (30 s),
    during which it schedules nothing on the cluster."""
    yield
    root, devices = Path(settings.JOB_CHECKPOINT_ROOT), device_dir(slurm_cluster)
    for program in programs(root, devices):
        with contextlib.suppress(ProcessLookupError):
            os.kill(program["pid"], signal.SIGKILL)


def test_munge_stopped_30_s_under_stubborn_programs_never_two_on_a_gpu(
    start, slurm_cluster, slurm_queue, settings, programs_killed
):
    settings.SLURM_FENCE_SECONDS = FENCE
    root = Path(settings.JOB_CHECKPOINT_ROOT)
    devices = device_dir(slurm_cluster)
    # The cluster's 8 GPUs, all the queue's: 6 for qs1, one each for qs2 and qs3.
    QueueCapacity.objects.filter(queue=slurm_queue).update(instances=8)
    CapacityLimit.objects.filter(share__queue=slurm_queue, share__name="qs1").update(
        max_instances=6
    )
    trigger = root.parent / "finish-now"
    finisher, _ = start("qs2", "exits-0-in-the-outage", holder(devices, until=str(trigger)))
    stubborn = [start("qs1", f"stubborn-{n}", holder(devices))[0] for n in range(6)]
    stubborn.append(start("qs3", "stubborn-6", holder(devices))[0])
    everyone = [finisher, *stubborn]
    assert all(fresh(job).state == "RUNNING" for job in everyone)
    for job in everyone:
        submitted(job)
    with Sampler(root, devices, slurm_cluster, settings.SLURM_JOB_PREFIX) as sampler:
        settle(
            lambda: {(job.pk, 1) for job in everyone} <= set(sampler.held_by)
            and all(sampler.held_by[(job.pk, 1)] for job in everyone),
            what="every program holds its GPU",
        )
        stopped = time.time()
        os.kill(daemons.pid(slurm_cluster.conf, "munged"), signal.SIGTERM)
        try:
            time.sleep(1)
            trigger.touch()  # the finisher exits 0 while munged is down
            # Other jobs wait for GPUs meanwhile: they, not only the requeued jobs
            # (which the checkpoint lock keeps from their own old program), get the
            # GPUs Slurm frees.
            newcomers = [start("qs1", f"newcomer-{n}", holder(devices))[0] for n in range(7)]
            assert all(fresh(job).state == "RUNNABLE" for job in newcomers)
            drive(slurm_queue.pk, lambda: time.time() - stopped >= 30, timeout=40)
        finally:
            daemons.cluster_start(slurm_cluster.conf)  # munged back, nodes idle again
        back = time.time()

        def recovered():
            done = fresh(finisher).state == "SUCCEEDED"
            again = set(sampler.held_by) - {(job.pk, 1) for job in everyone}
            return done and len(again) >= 7

        drive(slurm_queue.pk, recovered, timeout=60)
        time.sleep(1)  # a last stretch of samples with the second attempts running
    recovered_in = time.time() - back
    taken = sum((job.pk, 1) in sampler.held_by for job in newcomers)
    gaps = sorted(sampler.gaps)
    print(
        f"\nslurm: munge 30 s: {sampler.samples} process samples (median gap "
        f"{gaps[len(gaps) // 2]:.3f} s, max {gaps[-1]:.3f} s), {sampler.slurm_samples} "
        f"Slurm samples; 7 GPUs held by new runs ({taken} of newcomers) "
        f"{recovered_in:.1f} s after munged came back"
    )
    assert not sampler.overlaps, sampler.overlaps[:5]
    assert not sampler.slurm_overlaps, sampler.slurm_overlaps[:5]
    assert gaps[len(gaps) // 2] <= 0.2  # the sampling was as fine as the invariant needs

    # Every stubborn program was killed by its own watchdog within the fence (munged
    # stopped: no confirmation), long before Slurm's 20 s SlurmdTimeout.
    for job in stubborn:
        gone = sampler.last_alive[(job.pk, 1)] - stopped
        assert gone <= FENCE + 1.5, (job.pk, gone)
        record = exit_record(RunArea.of(job.pk, 1).launcher)
        assert record is not None and record.fenced and record.exit_code == -9
        event = JobEvent.objects.get(job=job, type=JobEvent.Type.REQUEUED)
        assert event.cause in {service.NODE_FAIL, service.SLURM_FENCED}, event.cause
        # Requeued (its GPU given back) only once its program was gone.
        assert event.at.timestamp() > sampler.last_alive[(job.pk, 1)]
    # The finisher's exit 0 stands: SUCCEEDED once, at its real end, never a second run.
    done = fresh(finisher)
    record = exit_record(RunArea.of(finisher.pk, 1).launcher)
    assert (done.state, done.exit_code, done.attempt) == ("SUCCEEDED", 0, 1)
    assert record is not None and record.exit_code == 0 and not record.fenced
    assert abs(done.finished_at.timestamp() - record.ended_at) < 0.002
    assert stopped < record.ended_at < stopped + FENCE
    assert not JobEvent.objects.filter(job=finisher, type=JobEvent.Type.REQUEUED).exists()
    listed = slurm_cluster.run("squeue", "--noheader", "--states=all", "--format=%j").split()
    assert run_name(finisher.pk, 2) not in listed
    assert (finisher.pk, 2) not in sampler.seen_runs


def test_a_frozen_launcher_has_its_program_killed_by_the_watchdog(
    start, slurm_cluster, settings, programs_killed
):
    settings.SLURM_FENCE_SECONDS = FENCE
    root = Path(settings.JOB_CHECKPOINT_ROOT)
    devices = device_dir(slurm_cluster)
    job, _ = start("qs2", "frozen-launcher", holder(devices))
    submitted(job)
    found = settle(
        lambda: [p for p in programs(root, devices) if p["run"] == (job.pk, 1) and p["held"]],
        what="the program holds its GPU",
    )
    program, launcher = found[0]["pid"], found[0]["ppid"]
    os.kill(launcher, signal.SIGSTOP)
    frozen = time.monotonic()
    try:
        while any(p["pid"] == program for p in programs(root, devices)):
            assert time.monotonic() - frozen < FENCE + 10, "the program outlived its fence"
            time.sleep(0.05)
        killed_after = time.monotonic() - frozen
        # The launcher is still frozen: its watchdog writes the exit record itself, once
        # the group is gone (so a moment after the program left /proc: at most 2 s).
        written_by = time.monotonic() + 2
        record = exit_record(RunArea.of(job.pk, 1).launcher)
        while record is None and time.monotonic() < written_by:
            time.sleep(0.05)
            record = exit_record(RunArea.of(job.pk, 1).launcher)
        assert record is not None and record.fenced
        assert Path(f"/proc/{launcher}").exists()
        assert fresh(job).state == "RUNNING"  # Slurm still runs the job
    finally:
        os.kill(launcher, signal.SIGCONT)
    print(
        f"\nslurm: launcher frozen: its program killed after {killed_after:.2f} s (fence {FENCE})"
    )
    # The keepalive stopped at most 1 s before the freeze: killed within the fence, and
    # certainly within the fence and the kill margin the product waits for.
    assert killed_after <= FENCE + settings.JOB_KILL_MARGIN_SECONDS
    requeued = settle(lambda: fresh(job).state == "RUNNABLE" and fresh(job), what="requeued")
    assert requeued.attempt == 1
    event = JobEvent.objects.get(job=job, type=JobEvent.Type.REQUEUED)
    assert event.cause == service.SLURM_FENCED
    assert "; fenced" in RunArea.of(job.pk, 1).log.read_text()
