"""Benchmark of the `slurm` executor against a real Slurm cluster (SLURM_CONF's).

    python manage.py bench_slurm [--starts 200] [--reclaims 20] [--held 1000]
                                 [--grace 2] [--partition gpu] [--capacity 8]

On a throwaway queue bound to the cluster (`queue_bind_slurm`, one GPU per instance:
`--gres=gpu:1`), with a Slurm job name prefix and a job area of its own, everything
cancelled and deleted at the end. No Celery worker: the command plays the tasks'
parts in one process, in the order they run (a pass; its starts submitted and its
notices sent after commit, as `scheduler.executor_start` / `executor_stop` would; the
reconciliation every SLURM_RECONCILE_SECONDS, as beat's `scheduler.executor_reconcile`).

1. Starts. `--starts` jobs of a 1 s program into a share that owns the whole queue,
   started as capacity frees. Decision to RUNNING in Slurm: from the start of the pass
   that started the run to the instant its program began on its node (the program
   writes it to its output: Slurm's own start time has 1 s resolution).
2. Reclaims. A borrowing share fills the queue with programs that ignore SIGTERM (the
   worst case: killed at the end of the grace); the lending share then asks for its
   capacity back, a few instances at a time, until `--reclaims` victims. Decision to
   capacity free: from the pass that chose the victim to the reconciliation that
   recorded its end as Slurm reported it (target: the grace + 2 s); and decision to the
   program killed (the launcher's own timer, at the end of the grace: its last line).
3. Reconciliation with `--held` Slurm jobs known: that many held Slurm jobs
   (`sbatch --hold`, never run), each the product's run of a STARTING job; one
   `slurm_reconcile` timed (target < 1 s).

Invariants, checked on what really ran: every program writes its node,
CUDA_VISIBLE_DEVICES and SLURM_JOB_GPUS; no GPU of a node ran two programs at once,
and no node more programs than its GPUs. And, at every tick, no Slurm job of ours
running that the product does not hold for longer than one tick.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import time
import uuid
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from django.test import override_settings
from django.utils import timezone

from engine.stats import percentile
from fleet.models import (
    CapacityLimit,
    InstanceType,
    Job,
    JobDefinition,
    JobEvent,
    JobQueue,
    QueueCapacity,
    QuotaShare,
    Team,
)
from scheduler.executors import executor_named
from scheduler.executors.run_area import RunArea
from scheduler.executors.slurm import binding as slurm_binding
from scheduler.executors.slurm import services as slurm_services
from scheduler.executors.slurm.client import (
    Cluster,
    SlurmError,
    job_account,
    parse_run_name,
    run_name,
)
from scheduler.services import passes
from scheduler.services.job_definitions import DefinitionData, definition_register
from scheduler.services.jobs import JobData, job_submit, job_terminate

MARK = "BENCH "
LAUNCHER_ENDED = "slurm_launch: the program ended at "  # slurm_launch.ENDED
# The program: its placement and start, then its work, then its end (all on one line
# each, JSON after MARK). With `--hold-term` it ignores SIGTERM (killed at the grace).
PROGRAM = """
import json, os, signal, sys, time
seconds, ignore_term = float(sys.argv[1]), sys.argv[2] == "1"
if ignore_term:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
def say(**fields):
    print("BENCH " + json.dumps(fields), flush=True)
say(event="start", at=time.time(), node=os.environ.get("SLURM_JOB_NODELIST", ""),
    gpus=os.environ.get("CUDA_VISIBLE_DEVICES", ""), job_gpus=os.environ.get("SLURM_JOB_GPUS", ""),
    slurm_job=os.environ.get("SLURM_JOB_ID", ""))
time.sleep(seconds)
say(event="end", at=time.time())
"""
HOLDING = tuple(Job.HOLDING_STATES)


class Command(BaseCommand):
    help = "Time the slurm executor on a real cluster: starts, reclaims, a big reconciliation."

    def add_arguments(self, parser):
        parser.add_argument("--conf", default=os.environ.get("SLURM_CONF", ""))
        parser.add_argument("--partition", default="gpu")
        parser.add_argument("--capacity", type=int, default=8, help="GPUs of the partition")
        parser.add_argument("--gpus-per-node", type=int, default=4)
        parser.add_argument("--starts", type=int, default=200)
        parser.add_argument("--reclaims", type=int, default=20)
        parser.add_argument("--held", type=int, default=1000)
        parser.add_argument("--grace", type=int, default=2)
        parser.add_argument("--seconds", type=float, default=1.0, help="each short job's run")
        parser.add_argument(
            "--tick", type=float, default=None, help="SLURM_RECONCILE_SECONDS (its setting)"
        )

    def handle(self, *args, **options):
        conf = options["conf"]
        if not conf or not Path(conf).is_file():
            raise CommandError("--conf: give the cluster's slurm.conf (or set SLURM_CONF)")
        for name in ("starts", "reclaims", "held", "grace", "capacity", "gpus_per_node"):
            if options[name] < 0 or (name in {"capacity", "gpus_per_node"} and not options[name]):
                raise CommandError(f"--{name.replace('_', '-')}: give a positive number")
        self.options = options
        self.cluster = Cluster(conf)
        try:
            self.cluster.nodes(options["partition"])
        except SlurmError as error:
            raise CommandError(f"the Slurm cluster of {conf} does not answer: {error}") from None
        try:
            job_account()  # who the jobs run as: a root submitter needs SLURM_JOB_USER
        except SlurmError as error:
            raise CommandError(str(error)) from None
        tag = uuid.uuid4().hex[:8]
        self.tick = float(options["tick"] or settings.SLURM_RECONCILE_SECONDS)
        # The services log every submission and signal; the figures are the output.
        logging.getLogger("scheduler.executors.slurm.services").setLevel(logging.WARNING)
        area = Path(settings.JOB_CHECKPOINT_ROOT) / f"bench-slurm-{tag}"
        with override_settings(SLURM_JOB_PREFIX=f"gpuqbench{tag}", JOB_CHECKPOINT_ROOT=area):
            self._patch()
            try:
                self._setup(tag)
                self._run()
            finally:
                self._unpatch()
                self._clean(area)

    # -- the tasks' parts, in process ---------------------------------------------------

    def _patch(self) -> None:
        slurm = executor_named("slurm")
        self._originals = (passes.send_pass, slurm.started, slurm.notify)
        passes.send_pass = lambda queue_id: None  # every loop runs a pass anyway
        self.submitted: dict[tuple[int, int], float] = {}

        def started(jobs):
            for job_id, attempt, _type in jobs:
                slurm_services.slurm_submit_run(job_id=job_id, attempt=attempt)
                self.submitted[(job_id, attempt)] = time.time()

        slurm.started = started
        slurm.notify = lambda job_ids: slurm_services.slurm_notice(job_ids=list(job_ids))

    def _unpatch(self) -> None:
        slurm = executor_named("slurm")
        passes.send_pass, slurm.started, slurm.notify = self._originals

    # -- the fleet ----------------------------------------------------------------------

    def _setup(self, tag: str) -> None:
        capacity, grace = self.options["capacity"], self.options["grace"]
        self.admin = get_user_model().objects.create_superuser(f"bench-{tag}", password=None)
        self.teams = [Team.objects.create(name=f"bench-{tag}-{n}") for n in ("own", "borrow")]
        self.itype = InstanceType.objects.create(name=f"bench.{tag}")
        slurm_binding.instance_type_set_slurm_resources(
            instance_type=self.itype, resources=["--gres=gpu:1"]
        )
        self.queue = JobQueue.objects.create(name=f"bench-slurm-{tag}", executor="slurm")
        slurm_binding.queue_bind_slurm(
            queue=self.queue, conf=self.cluster.conf, partition=self.options["partition"]
        )
        QueueCapacity.objects.create(queue=self.queue, instance_type=self.itype, instances=capacity)
        # Both borrow: the owner all of the queue for the starts, the borrower all of it
        # until the owner reclaims (a limit is at least 1).
        both = QuotaShare.Strategy.LEND_AND_BORROW
        self.owner = self._share("owner", self.teams[0], both, capacity - 1, 0)
        self.borrower = self._share("borrower", self.teams[1], both, 1, 1)
        self.short = self._definition(f"bench-short-{tag}", self.options["seconds"], grace, 0)
        self.long = self._definition(f"bench-victim-{tag}", 3600, grace, 1)
        self.held_queue = None

    def _share(self, name, team, strategy, limit, position) -> QuotaShare:
        share = QuotaShare.objects.create(
            queue=self.queue,
            team=team,
            name=name,
            strategy=strategy,
            borrow_limit=-1 if strategy == QuotaShare.Strategy.LEND_AND_BORROW else None,
            position=position,
        )
        CapacityLimit.objects.create(share=share, instance_type=self.itype, max_instances=limit)
        return share

    def _definition(self, name: str, seconds: float, grace: int, ignore_term: int):
        definition = definition_register(
            actor=self.admin,
            name=name,
            reason="benchmark",
            data=DefinitionData(
                queues=[self.queue],
                command=["python3", "-c", PROGRAM.replace("{", "{{").replace("}", "}}")]
                + [str(seconds), str(ignore_term)],
                instance_type=self.itype,
                expected_duration=max(1, int(seconds)),
                stop_grace_seconds=grace,
                network=True,  # Slurm runs jobs on its nodes' network
            ),
        )
        return definition.revisions.order_by("-revision").first()

    def _submit(self, share, revision, name: str) -> Job:
        return job_submit(
            data=JobData(share=share, name=name, revision=revision, preemption_retries=None),
            submitted_by=self.admin,
        )

    # -- the loop: a pass, then a reconciliation every tick -----------------------------

    def _step(self) -> float:
        """One pass (its starts submitted, its notices sent after commit) and, when a
        tick is due, one reconciliation; records what it saw. The pass's start time."""
        began = time.time()
        outcome = passes.scheduling_pass(queue_id=self.queue.pk, now=timezone.now())
        for job_id in outcome.started:
            self.decided.setdefault(self._run_of(job_id), began)
        for job_id in outcome.noticed:
            self.noticed.setdefault(self._run_of(job_id), began)
        if time.monotonic() >= self.next_tick:
            self.next_tick = time.monotonic() + self.tick
            self._reconcile()
        return began

    def _run_of(self, job_id: int) -> tuple[int, int]:
        return job_id, Job.objects.values_list("attempt", flat=True).get(pk=job_id)

    def _reconcile(self) -> None:
        report = slurm_services.slurm_reconcile()
        now = time.time()
        for job_id in report.ended + report.lost:
            run = self._run_of(job_id)  # the attempt that ended (a restart is a later pass)
            if run in self.noticed:
                self.freed.setdefault(run, now)
        self._watch_strays(now)

    def _watch_strays(self, now: float) -> None:
        """A Slurm job of ours running whose run the product does not hold: since when."""
        held = set(
            Job.objects.filter(queue=self.queue, state__in=HOLDING).values_list("pk", "attempt")
        )
        running = set()
        for slurm in self.cluster.jobs():
            run = parse_run_name(slurm.name)
            if run is not None and slurm.running and run not in held:
                running.add(run)
                self.stray_since.setdefault(run, now)
        for run in list(self.stray_since):
            if run not in running:
                self.longest_stray = max(self.longest_stray, now - self.stray_since.pop(run))

    def _run(self) -> None:
        self.decided: dict[tuple[int, int], float] = {}
        self.noticed: dict[tuple[int, int], float] = {}
        self.freed: dict[tuple[int, int], float] = {}
        self.stray_since: dict[tuple[int, int], float] = {}
        self.longest_stray = 0.0
        self.next_tick = 0.0
        opt = self.options
        self.stdout.write(
            f"bench_slurm: cluster {self.cluster.conf}, partition {opt['partition']}, "
            f"{opt['capacity']} instances of --gres=gpu:1, reconciliation every {self.tick:g} s, "
            f"Slurm jobs named {settings.SLURM_JOB_PREFIX}-*"
        )
        if opt["starts"]:
            self._starts(opt["starts"])
        if opt["reclaims"]:
            self._reclaims(opt["reclaims"])
        self._invariants()
        if opt["held"]:
            self._held(opt["held"])

    def _live(self, share=None) -> int:
        jobs = Job.objects.filter(queue=self.queue, state__in=Job.LIVE_STATES)
        return (jobs.filter(share=share) if share else jobs).count()

    def _until(self, done, *, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not done():
            if time.monotonic() > deadline:
                jobs = Job.objects.filter(queue=self.queue)
                states = jobs.values_list("name", "state", "attempt")
                raise CommandError(
                    f"not within {timeout:g} s: {what} (jobs: {sorted(states)}; noticed "
                    f"{sorted(self.noticed)}, freed {sorted(self.freed)})"
                )
            self._step()
            time.sleep(0.05)

    def _starts(self, count: int) -> None:
        began = time.monotonic()
        for n in range(count):
            self._submit(self.owner, self.short, f"start-{n}")
        runs = count * (self.options["seconds"] + 1.5) / self.options["capacity"]
        self._until(lambda: not self._live(), timeout=120 + 3 * runs, what=f"{count} starts")
        latencies, to_sbatch, in_slurm = [], [], []
        for (job_id, attempt), decided in self.decided.items():
            start = self._program(job_id, attempt).get("start")
            if start is not None:
                latencies.append(start["at"] - decided)
                submitted = self.submitted.get((job_id, attempt), decided)
                to_sbatch.append(submitted - decided)
                in_slurm.append(start["at"] - submitted)
        failed = Job.objects.filter(queue=self.queue, share=self.owner).exclude(state="SUCCEEDED")
        self.stdout.write(
            f"starts: {len(latencies)} of {count} ran in {time.monotonic() - began:.1f} s "
            f"({failed.count()} did not succeed); decision -> RUNNING in Slurm (the program "
            f"began): {self._figures(latencies)} (target p99 < 3 s); of which decision -> "
            f"sbatch answered {self._figures(to_sbatch)}, sbatch -> program began "
            f"{self._figures(in_slurm)}"
        )

    def _reclaims(self, count: int) -> None:
        capacity = self.options["capacity"]
        borrowers = [
            self._submit(self.borrower, self.long, f"borrower-{n}") for n in range(capacity)
        ]
        borrower_ids = {job.pk for job in borrowers}

        def all_running_in_slurm() -> bool:
            """Every borrower runs in Slurm and its program ignores SIGTERM already (it
            wrote its start after that): each victim is the worst case."""
            rows = Job.objects.filter(pk__in=borrower_ids, state=Job.State.RUNNING)
            runs = list(rows.values_list("pk", "attempt", "placement"))
            return len(runs) == capacity and all(
                (placement or {}).get("state") == "RUNNING"
                and "start" in self._program(job_id, attempt)
                for job_id, attempt, placement in runs
            )

        self._until(all_running_in_slurm, timeout=60, what="the borrowers run")
        self.noticed.clear()
        round_ = 0
        while len(self.noticed) < count:
            # The owner asks for some of its capacity back; how many victims that makes
            # is the pass's (an owner job may also take the place of one that ended).
            size = min(count - len(self.noticed), max(1, capacity // 2))
            asked = [
                self._submit(self.owner, self.short, f"reclaim-{round_}-{n}").pk
                for n in range(size)
            ]

            def over(asked=asked) -> bool:
                ended = not Job.objects.filter(pk__in=asked, state__in=Job.LIVE_STATES).exists()
                return ended and self.noticed.keys() <= self.freed.keys()

            self._until(over, timeout=60 + 10 * self.options["grace"], what=f"round {round_}")
            round_ += 1
            self._until(all_running_in_slurm, timeout=120, what="the borrowers run again")
        delays = [self.freed[run] - at for run, at in self.noticed.items() if run in self.freed]
        grace = self.options["grace"]
        # When the program was killed (the launcher's last line), from the decision.
        killed = [
            ended["at"] - at
            for run, at in self.noticed.items()
            if (ended := self._program(*run).get("ended")) is not None
        ]
        self.stdout.write(
            f"reclaims: {len(delays)} victims (SIGTERM ignored, killed at the end of a "
            f"{grace} s grace); decision -> capacity free (Slurm reported the end): "
            f"{self._figures(delays)} (target p99 <= {grace + 2} s); of which decision -> "
            f"program killed {self._figures(killed)}"
        )
        live = Job.objects.filter(queue=self.queue, state__in=Job.LIVE_STATES)
        for job_id in live.exclude(state=Job.State.STOPPING).values_list("pk", flat=True):
            job_terminate(job_id=job_id, actor=self.admin)
        self._until(
            lambda: not Job.objects.filter(queue=self.queue, state__in=HOLDING).exists(),
            timeout=60 + 10 * grace,
            what="the borrowers stop",
        )

    def _program(self, job_id: int, attempt: int) -> dict:
        """What the run's program wrote of itself: {"start": {...}, "end": {...}}."""
        found = {}
        try:
            text = RunArea.of(job_id, attempt).log.read_text(errors="replace")
        except OSError:
            return found
        for line in text.splitlines():
            if line.startswith(MARK):
                with_fields = json.loads(line[len(MARK) :])
                found[with_fields["event"]] = with_fields
            elif line.startswith(LAUNCHER_ENDED):
                # The program's real end, also when it was killed at its grace (it
                # printed no end of its own): not when the product saw it.
                found["ended"] = {"at": float(line[len(LAUNCHER_ENDED) :].split()[0])}
        return found

    def _invariants(self) -> None:
        intervals = defaultdict(list)  # (node, gpu) -> [(start, end, run)]
        per_node = defaultdict(list)
        missing = 0
        events = JobEvent.objects.filter(job__queue=self.queue)
        last_event = max((e.at.timestamp() for e in events), default=time.time())
        for job in Job.objects.filter(queue=self.queue):
            for attempt in range(1, job.attempt + 1):
                ran = self._program(job.pk, attempt)
                start = ran.get("start")
                if start is None:
                    continue
                if not start["gpus"] or not start["node"]:
                    missing += 1
                end = (
                    (ran.get("end") or {}).get("at")
                    or (ran.get("ended") or {}).get("at")
                    or self.freed.get((job.pk, attempt))
                )
                end = end or last_event
                for gpu in start["gpus"].split(","):
                    intervals[(start["node"], gpu)].append((start["at"], end, (job.pk, attempt)))
                per_node[start["node"]].append((start["at"], end))
        overlaps = []
        for (node, gpu), runs in intervals.items():
            runs.sort()
            overlaps += [
                f"{node} GPU {gpu}: run {a[2]} until {a[1]:.2f}, run {b[2]} from {b[0]:.2f}"
                for a, b in zip(runs, runs[1:], strict=False)
                if b[0] < a[1]
            ]
        crowded = 0
        for node_runs in per_node.values():
            edges = sorted([(s, 1) for s, _ in node_runs] + [(e, -1) for _, e in node_runs])
            level = 0
            for _, change in edges:
                level += change
                crowded += level > self.options["gpus_per_node"]
        runs = sum(len(v) for v in per_node.values())
        self.stdout.write(
            f"invariants: {runs} programs on {len(per_node)} nodes, {len(intervals)} GPUs "
            f"used; runs without node or CUDA_VISIBLE_DEVICES: {missing}; two runs on one "
            f"GPU at once: {len(overlaps)}; a node over its {self.options['gpus_per_node']} GPUs: "
            f"{crowded}; longest a Slurm job of ours ran that the product had stopped: "
            f"{self.longest_stray:.2f} s (one tick: {self.tick:g} s)"
        )
        for overlap in overlaps[:5]:
            self.stdout.write(f"  overlap: {overlap}")

    def _held(self, count: int) -> None:
        capacity = count
        self.held_queue = JobQueue.objects.create(name=f"{self.queue.name}-held", executor="slurm")
        slurm_binding.queue_bind_slurm(
            queue=self.held_queue, conf=self.cluster.conf, partition=self.options["partition"]
        )
        QueueCapacity.objects.create(
            queue=self.held_queue, instance_type=self.itype, instances=capacity
        )
        share = QuotaShare.objects.create(
            queue=self.held_queue,
            team=self.teams[0],
            name="held",
            position=0,
            strategy=QuotaShare.Strategy.RESERVE,
        )
        CapacityLimit.objects.create(share=share, instance_type=self.itype, max_instances=count)
        now = timezone.now()
        jobs = Job.objects.bulk_create(
            Job(
                queue=self.held_queue,
                share=share,
                name=f"held-{n}",
                instance_type=self.itype,
                expected_duration=3600,
                state=Job.State.RUNNING,
                submitted_at=now,
                started_at=now,
                first_started_at=now,
                start_seq=n,
                attempt=1,
                lease_token=uuid.uuid4().hex,
            )
            for n in range(count)
        )
        began = time.monotonic()

        def hold(job: Job) -> tuple[int, str]:
            return job.pk, self.cluster.submit(
                [
                    f"--job-name={run_name(job.pk, 1)}",
                    f"--partition={self.options['partition']}",
                    "--hold",
                    "--output=/dev/null",
                    "--wrap=true",
                ]
            )

        with ThreadPoolExecutor(max_workers=8) as pool:
            held = list(pool.map(hold, jobs))
        submitted = time.monotonic() - began
        for job_id, slurm_id in held:
            Job.objects.filter(pk=job_id).update(
                worker=f"slurm:{slurm_id}",
                placement={"cluster": self.cluster.conf, "job_id": slurm_id, "state": "PENDING"},
            )
        timings = []
        for _ in range(3):
            began = time.monotonic()
            report = slurm_services.slurm_reconcile()
            timings.append(time.monotonic() - began)
        squeue = time.monotonic()
        known = len(self.cluster.jobs())
        squeue = time.monotonic() - squeue
        changed = len(report.submitted + report.ended + report.lost + report.cancelled)
        self.stdout.write(
            f"reconciliation: {count} held Slurm jobs known ({known} in squeue, sbatch --hold "
            f"of all in {submitted:.1f} s); one reconciliation {timings[0]:.3f} s, then "
            f"{timings[1]:.3f} s, {timings[2]:.3f} s (squeue alone {squeue:.3f} s; it changed "
            f"{changed}) (target < 1 s)"
        )

    @staticmethod
    def _figures(values: list[float]) -> str:
        if not values:
            return "no samples"
        return (
            f"p50 {percentile(values, 50):.2f} s, p99 {percentile(values, 99):.2f} s, "
            f"max {max(values):.2f} s (n={len(values)})"
        )

    # -- cleaning up ----------------------------------------------------------------------

    def _clean(self, area: Path) -> None:
        prefix = settings.SLURM_JOB_PREFIX + "-"
        try:
            ours = [slurm.job_id for slurm in self.cluster.jobs() if slurm.name.startswith(prefix)]
            for start in range(0, len(ours), 200):
                self.cluster.run("scancel", *ours[start : start + 200])
        except SlurmError as error:
            self.stderr.write(f"could not cancel the benchmark's Slurm jobs: {error}")
        queues = [q for q in (getattr(self, "queue", None), getattr(self, "held_queue", None)) if q]
        for queue in queues:
            JobEvent.objects.filter(job__queue=queue).delete()
            Job.objects.filter(queue=queue).delete()
            JobDefinition.objects.filter(queues=queue).delete()
            queue.delete()
        for team in getattr(self, "teams", []):
            team.delete()
        if getattr(self, "itype", None):
            self.itype.delete()
        if getattr(self, "admin", None):
            self.admin.delete()
        shutil.rmtree(area, ignore_errors=True)
