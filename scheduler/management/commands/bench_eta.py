"""How good and how cheap are start estimates? (issues 16 and 26)

    python manage.py bench_eta [--start 2017-10-10 ...] [--days 2] [--scale 0.2] [--tune]
                               [--every 1] [--pending 10000] [--running 1000] [--repeat 20]

1. Accuracy. A window of the bundled Philly trace is replayed as the what-if and
   `simulate` do (one share per virtual cluster, limits scaled by `--scale`, all
   LEND_AND_BORROW, priorities from seed 1, checkpoints every 30 minutes). The trace
   has only true durations, so each job gets a declared one: its true duration times
   a bias of its share (drawn once, 0.5x to 3x) times a per-job noise (log-normal,
   sigma 0.5), from a fixed seed. At each submission the submitted jobs' starts are
   estimated from only what was known then (the snapshot, declared durations, the
   jobs finished so far: their true / declared ratios per share correct the
   declarations) and compared with the start the replay then gives, for the jobs that
   waited at least 10 minutes: median absolute error of the wait and the fraction
   within +/-25 % of the actual wait, beside a naive baseline (declared work ahead in
   the share, its running jobs' remainder included, divided by the share's throughput
   over the last 24 hours) and the same baseline counting only the queued work ahead.
   Coverage (issue 26): for the jobs the forecast has waiting (its p50-run wait above
   0), where the actual start fell against the range, before, inside or after: the
   forecast's own p50-p90 runs (before the calibration) and the calibrated p10-p90
   range (`estimates.calibration`, each estimate calibrated by the record of the
   replay's earlier estimates as known when it was made, as the live queue does),
   against the nominal 10 / 80 / 10 %; and both point estimates' errors. By default
   it evaluates on EVAL_WINDOWS, none of which the calibration was tuned on
   (TUNE_WINDOWS: `--tune` replays them and prints what they give; `--start` refuses
   them otherwise).
2. Cost. On the configured database (meant for PostgreSQL), a throwaway queue of 10
   shares with `--pending` waiting and 1,000 running jobs (deleted at the end): the
   time of the first estimate ever (nothing stored: computed in the request), of the
   background forecast after a change (`scheduler.estimate_queue`'s work: read the
   queue, explain it, two forward simulations of every waiting job, store), and of
   what pages and the API serve from the stored forecast: "if you submit this now"
   (`POST /api/v1/jobs/estimate/`), one page of the pending list, one job's entry;
   after a change (the stored forecast is no longer current: served "as of", a new
   one asked for) and once the new one is stored; each as the first read of a
   process (the forecast read from the shared cache) and as a later one.
"""

from __future__ import annotations

import datetime as dt
import math
import pickle
import random
import statistics
import time
import uuid

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from django.db import connection
from django.db.models import F
from django.utils import timezone

from engine.eta import replay_accuracy, score
from engine.stats import quantile
from engine.trace import TraceOptions, build_scenario, read_trace, read_vc_sizes
from engine.validation import load_scenario
from fleet.executors import DEFAULT_EXECUTOR
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
from scheduler.services.estimates import calibration, store
from scheduler.services.estimates.forecast import compute_forecast
from scheduler.services.estimates.reads import job_estimate, queue_estimates, submission_estimate
from scheduler.services.job_definitions import DefinitionData, definition_register
from scheduler.services.jobs import JobData

MIN_WAIT = 600
# The Philly windows the calibration was tuned on (calibration.DEFAULT and its
# parameters), and those it is evaluated on: two days each, none overlapping.
TUNE_WINDOWS = ("2017-10-04", "2017-10-20")
EVAL_WINDOWS = ("2017-10-10", "2017-10-22", "2017-10-24")
SEED = 7
SHARES = 10
RUNNING = 1000


def declared_durations(scenario, seed: int = SEED) -> dict[str, int]:
    rng = random.Random(seed)
    bias = {
        share.name: math.exp(rng.uniform(math.log(0.5), math.log(3))) for share in scenario.shares
    }
    return {
        job.id: max(1, round(job.duration * bias[job.share] * math.exp(rng.gauss(0, 0.5))))
        for job in scenario.jobs
    }


def _spread(times: list[float]) -> str:
    ordered = sorted(times)
    return (
        f"median {statistics.median(ordered):.1f} ms, p90 "
        f"{ordered[int(0.9 * (len(ordered) - 1))]:.1f} ms, max {ordered[-1]:.1f} ms"
    )


def _minutes(seconds: float) -> str:
    if seconds == float("inf"):
        return "never"
    return f"{seconds / 60:,.1f} min"


# -- coverage of the ranges (issue 26) ----------------------------------------------------------


class Ranges:
    """A replay's estimates of the jobs its forecast had waiting, each with the
    calibration the record of the replay's earlier estimates gave it."""

    def __init__(self, samples, made, calibrations) -> None:
        self.samples, self.made, self.calibrations = samples, made, calibrations
        self.by_job = {s.job: i for i, s in enumerate(samples)}

    def before(self) -> calibration.Coverage:
        """The forecast's own p50-p90 runs."""
        return calibration.coverage_of(
            (s.actual_wait, s.estimate_wait, s.estimate_p90_wait) for s in self.samples
        )

    def after(self) -> calibration.Coverage:
        """The calibrated p10-p90 range."""
        return calibration.coverage_of(
            (m.actual, *c.waits(m.forecast)[::2])
            for m, c in zip(self.made, self.calibrations, strict=True)
        )

    def point(self, sample) -> float | None:
        """The calibrated p50 wait of a sample (its forecast's when it was not waiting)."""
        index = self.by_job.get(sample.job)
        if index is None:
            return sample.estimate_wait
        return self.calibrations[index].waits(self.made[index].forecast)[1]

    def bases(self) -> str:
        counts: dict[str, int] = {}
        for c in self.calibrations:
            counts[c.basis] = counts.get(c.basis, 0) + 1
        return ", ".join(f"{basis} {n}" for basis, n in sorted(counts.items()))

    def write(self, write, scored) -> None:
        write(
            f"ranges of the {len(self.samples)} jobs the forecast had waiting (calibrated by: "
            f"{self.bases()}):"
        )
        _coverage_table(write, self.before(), self.after())
        _errors(write, scored, self)


def _coverage_table(write, before: calibration.Coverage, after: calibration.Coverage) -> None:
    write(f"  {'':44}{'before':>8}{'inside':>8}{'after':>8}{'n':>7}")
    for label, c in (
        ("before: p50-p90 runs of the forecast", before),
        (f"after: {calibration.RANGE_LABEL} calibrated by the record", after),
    ):
        if not c.n:
            write(f"  {label:44}{'-':>8}{'-':>8}{'-':>8}{0:>7}")
            continue
        write(
            f"  {label:44}{c.share('before'):>8.1%}{c.share('inside'):>8.1%}"
            f"{c.share('after'):>8.1%}{c.n:>7}"
        )
    write(f"  {'nominal ' + calibration.RANGE_LABEL:44}{'10.0%':>8}{'80.0%':>8}{'10.0%':>8}")


def _errors(write, scored, ranges: Ranges) -> None:
    before = score(scored, lambda s: s.estimate_wait)
    after = score(scored, ranges.point)
    naive = score(scored, lambda s: s.baseline_wait)
    write(f"  point estimates, jobs that waited >= {MIN_WAIT // 60} min (n = {len(scored)}):")
    write(f"  {'':44}{'median abs error':>18}{'within +/-25 %':>16}")
    for label, (error, within) in (
        ("before: p50 run of the forecast", before),
        ("after: calibrated p50", after),
        ("naive baseline (work / throughput)", naive),
    ):
        write(f"  {label:44}{_minutes(error):>18}{within:>16.1%}")
    if naive[0] and naive[0] == naive[0]:
        write(
            f"  after / naive median abs error: {after[0] / naive[0]:.2f} "
            f"(before: {before[0] / naive[0]:.2f}; at most 0.50 wanted)"
        )


def ranges_of(accuracy, scenario) -> Ranges:
    jobs = {job.id: job for job in scenario.jobs}
    samples, made = [], []
    for s in accuracy.samples:
        if s.estimate_wait is not None and s.estimate_wait <= 0:
            continue  # the forecast starts it at once: no range to state
        job = jobs[s.job]
        samples.append(s)
        made.append(
            calibration.Made(
                at=job.submit_at,
                group=job.share,
                forecast=None if s.estimate_wait is None else int(s.estimate_wait),
                forecast_high=None if s.estimate_p90_wait is None else int(s.estimate_p90_wait),
                actual=s.actual_wait,
            )
        )
    return Ranges(samples, made, calibration.replayed(made))


class Pooled:
    """The windows' figures together."""

    def __init__(self) -> None:
        self.ranges: list[Ranges] = []
        self.scored: list = []

    def add(self, ranges: Ranges, scored) -> None:
        self.ranges.append(ranges)
        self.scored.append((ranges, scored))

    def write(self, write, windows: int, tune: bool) -> None:
        def pool(parts):
            before = sum(c.before for c in parts)
            inside = sum(c.inside for c in parts)
            return calibration.Coverage(before, inside, sum(c.after for c in parts))

        kind = "tuning" if tune else "held-out"
        write(f"all {windows} {kind} windows together:")
        _coverage_table(
            write, pool([r.before() for r in self.ranges]), pool([r.after() for r in self.ranges])
        )
        scored = [s for _, part in self.scored for s in part]
        by_job = {}
        for ranges, part in self.scored:
            for s in part:
                by_job[id(s)] = ranges
        pooled = _PooledPoint(by_job)
        _errors(write, scored, pooled)  # type: ignore[arg-type]
        if tune:
            ratios = sorted(
                calibration.ratio(m.forecast, m.actual)
                for r in self.ranges
                for m in r.made
                if m.forecast is not None
            )
            if ratios:
                factors = ", ".join(f"{quantile(ratios, q):.2f}" for q in calibration.LEVELS)
                write(
                    f"ratios (actual + {calibration.OFFSET} s) / (forecast + "
                    f"{calibration.OFFSET} s) at {calibration.LEVELS}: {factors} "
                    f"(calibration.DEFAULT: {calibration.DEFAULT})"
                )


class _PooledPoint:
    def __init__(self, by_sample) -> None:
        self.by_sample = by_sample

    def point(self, sample):
        return self.by_sample[id(sample)].point(sample)


class Command(BaseCommand):
    help = "Accuracy of start estimates on a Philly replay, and their cost at 10k pending."

    def add_arguments(self, parser):
        parser.add_argument(
            "--start",
            action="append",
            help=f"a window's first day (repeatable; default {', '.join(EVAL_WINDOWS)})",
        )
        parser.add_argument(
            "--tune",
            action="store_true",
            help="replay the tuning windows instead and print what they give",
        )
        parser.add_argument("--days", type=float, default=2.0)
        parser.add_argument("--scale", type=float, default=0.2)
        parser.add_argument("--every", type=int, default=1)
        parser.add_argument("--pending", type=int, default=10_000)
        parser.add_argument("--running", type=int, default=RUNNING)
        parser.add_argument("--repeat", type=int, default=20)
        parser.add_argument("--skip-accuracy", action="store_true")
        parser.add_argument("--skip-cost", action="store_true")
        parser.add_argument("--profile", action="store_true", help="profile one estimate")

    def handle(self, *args, **options):
        self.profile = options["profile"]
        if options["tune"] and options["start"]:
            raise CommandError("--start: not with --tune (it replays the tuning windows)")
        starts = options["start"] or list(TUNE_WINDOWS if options["tune"] else EVAL_WINDOWS)
        windows = []
        for given in starts:
            try:
                windows.append(dt.datetime.fromisoformat(given))
            except ValueError as error:
                raise CommandError(f"--start: not a date: {given!r}") from error
            if not options["tune"] and given in TUNE_WINDOWS:
                raise CommandError(
                    f"--start: {given} is a window the calibration was tuned on "
                    f"({', '.join(TUNE_WINDOWS)}); evaluate on another"
                )
        if not 0 < options["days"] <= 30:
            raise CommandError("--days: must be more than 0 and at most 30")
        if not 0 < options["scale"] <= 10:
            raise CommandError("--scale: must be more than 0 and at most 10")
        if options["every"] < 1 or options["repeat"] < 1 or options["pending"] < 1:
            raise CommandError("--every, --repeat and --pending must be at least 1")
        if not options["skip_accuracy"]:
            pooled = Pooled()
            for start in windows:
                self._accuracy(start, options["days"], options["scale"], options["every"], pooled)
            if len(windows) > 1:
                pooled.write(self.stdout.write, len(windows), options["tune"])
        if not options["skip_cost"]:
            self._cost(options["pending"], options["repeat"], options["running"])

    # -- part 1 ---------------------------------------------------------------------------

    def _accuracy(self, start, days, scale, every, pooled: Pooled) -> None:
        document = build_scenario(
            read_trace(),
            read_vc_sizes(),
            TraceOptions(scale=scale, days=days, start=start, seed=1, checkpoint_interval=1800),
        )
        scenario = load_scenario(document)
        declared = declared_durations(scenario)
        began = time.perf_counter()
        accuracy = replay_accuracy(scenario, declared, every=every)
        spent = time.perf_counter() - began
        scored = accuracy.scored(MIN_WAIT)
        ours = score(scored, lambda s: s.estimate_wait)
        naive = score(scored, lambda s: s.baseline_wait)
        queued = score(scored, lambda s: s.queue_baseline_wait)
        write = self.stdout.write
        write(
            f"Philly trace from {start:%Y-%m-%d} for {days:g} days, limits x {scale:g}: "
            f"{len(scenario.jobs)} jobs, {len(scenario.shares)} shares; declared durations = "
            f"true x share bias (0.5-3x) x log-normal noise (sigma 0.5), seed {SEED}"
        )
        write(
            f"estimated {accuracy.estimated} submissions (every {every}. instant) in "
            f"{spent:.1f} s; {len(scored)} waited >= {MIN_WAIT // 60} min"
        )
        write(f"{'':34}{'median abs error':>18}{'within +/-25 %':>16}")
        write(f"{'estimate (p50, history-corrected)':34}{_minutes(ours[0]):>18}{ours[1]:>16.1%}")
        write(f"{'naive baseline (work / throughput)':34}{_minutes(naive[0]):>18}{naive[1]:>16.1%}")
        write(f"{'  same, queued work only':34}{_minutes(queued[0]):>18}{queued[1]:>16.1%}")
        covered = sum(
            1
            for s in scored
            if s.estimate_wait is not None
            and s.estimate_p90_wait is not None
            and min(s.estimate_wait, s.estimate_p90_wait) * 0.75
            <= s.actual_wait
            <= max(s.estimate_wait, s.estimate_p90_wait) * 1.25
        )
        if scored:
            write(f"actual wait inside the p50-p90 range (+/-25 %): {covered / len(scored):.1%}")
        measured = ranges_of(accuracy, scenario)
        measured.write(write, scored)
        pooled.add(measured, scored)
        costs = [s.seconds * 1000 for s in accuracy.samples]
        if costs:
            write(
                f"engine time per estimate in the replay: median "
                f"{statistics.median(costs):.1f} ms, max {max(costs):.1f} ms at up to "
                f"{max(s.pending for s in accuracy.samples)} pending"
            )

    # -- part 2 ---------------------------------------------------------------------------

    def _cost(self, pending: int, repeat: int, running: int = RUNNING) -> None:
        write = self.stdout.write
        if connection.vendor != "postgresql":
            self.stderr.write(f"note: running on {connection.vendor}, not PostgreSQL")
        tag = uuid.uuid4().hex[:8]
        admin = get_user_model().objects.create_superuser(f"bench-eta-{tag}", password=None)
        team = Team.objects.create(name=f"bench-eta-{tag}")
        itype = InstanceType.objects.create(name=f"bench.eta.{tag}")
        queue = JobQueue.objects.create(name=f"bench-eta-{tag}", executor=DEFAULT_EXECUTOR)
        try:
            QueueCapacity.objects.create(queue=queue, instance_type=itype, instances=running)
            shares = []
            for number in range(SHARES):
                share = QuotaShare.objects.create(
                    queue=queue,
                    team=team,
                    name=f"s{number}",
                    strategy=QuotaShare.Strategy.LEND_AND_BORROW,
                    borrow_limit=None,
                    position=number,
                )
                CapacityLimit.objects.create(
                    share=share, instance_type=itype, max_instances=max(1, running // SHARES)
                )
                shares.append(share)
            definition = definition_register(
                actor=admin,
                name=f"bench-eta-{tag}",
                reason="benchmark",
                data=DefinitionData(
                    queues=[queue],
                    command=["python", "train.py"],
                    parameters=[],
                    instance_type=itype,
                    expected_duration=3600,
                ),
            )
            revision = definition.revisions.get()
            now = timezone.now()
            rng = random.Random(SEED)
            rows = [
                Job(
                    queue=queue,
                    share=shares[n % SHARES],
                    name=f"running-{n}",
                    priority=n % 3,
                    instance_type=itype,
                    expected_duration=rng.randrange(600, 20_000),
                    state=Job.State.RUNNING,
                    submitted_at=now - dt.timedelta(seconds=60),
                    started_at=now - dt.timedelta(seconds=rng.randrange(0, 60)),
                    first_started_at=now - dt.timedelta(seconds=60),
                    start_seq=n,
                    attempt=1,
                )
                for n in range(running)
            ]
            rows += [
                Job(
                    queue=queue,
                    share=shares[n % SHARES],
                    name=f"waiting-{n}",
                    priority=n % 3,
                    instance_type=itype,
                    instances=1 + n % 4,
                    expected_duration=rng.randrange(600, 20_000),
                    definition_revision=revision,
                    state=Job.State.RUNNABLE,
                    reason="WAITING_FOR_CAPACITY",
                    submitted_at=now - dt.timedelta(seconds=pending - n),
                    runnable_since=now - dt.timedelta(seconds=pending - n),
                )
                for n in range(pending)
            ]
            Job.objects.bulk_create(rows, batch_size=2000)
            data = JobData(
                share=shares[3], name="what-if", revision=revision, expected_duration=3600
            )
            waiting = list(
                Job.objects.filter(queue=queue, state=Job.State.RUNNABLE)
                .order_by("pk")
                .values_list("pk", flat=True)
            )
            store.forget(queue)
            began = time.perf_counter()
            submission_estimate(data=data)  # nothing stored: computed here
            first = (time.perf_counter() - began) * 1000
            if self.profile:
                import cProfile
                import pstats
                import sys

                profiler = cProfile.Profile()
                profiler.enable()
                compute_forecast(queue)
                profiler.disable()
                pstats.Stats(profiler, stream=sys.stdout).sort_stats("cumtime").print_stats(40)

            def change() -> None:
                """What any change does to the queue's fingerprint (a priority changed)."""
                Job.objects.filter(pk=rng.choice(waiting)).update(priority=F("priority") + 1)

            reads = {
                "'if you submit this now'": lambda: submission_estimate(data=data),
                "pending list, one page": lambda: queue_estimates(queue).entries[:50],
                "job page (its entry)": lambda: job_estimate(Job.objects.get(pk=waiting[-1])),
            }

            def serve(label: str, *, stale: bool, cold: bool) -> None:
                for name, read in reads.items():
                    times = []
                    for _ in range(repeat):
                        if stale:
                            change()
                        if cold:
                            store.forget_local()  # as a process that never read it
                        began = time.perf_counter()
                        read()
                        times.append((time.perf_counter() - began) * 1000)
                    write(f"  {name:28} {label:36} {_spread(times)}")

            write(
                f"cost on {connection.vendor}: {pending:,} pending, {running:,} running, "
                f"{SHARES} shares; {repeat} runs each"
            )
            write(f"first estimate ever (nothing stored, computed in the request): {first:.0f} ms")
            computed = []
            for _ in range(max(1, repeat // 4)):
                change()
                began = time.perf_counter()
                store.refresh_estimates(queue.pk)  # the background task's work
                computed.append((time.perf_counter() - began) * 1000)
            write(
                "background forecast after a change (scheduler.estimate_queue: read, explain, "
                f"two forward runs, store): {_spread(computed)}"
            )
            write("serving after a change, the stored forecast no longer current ('as of'):")
            serve("stale, first read in the process", stale=True, cold=True)
            serve("stale, read before in the process", stale=True, cold=False)
            store.refresh_estimates(queue.pk)
            write("serving once the background forecast is stored (current):")
            serve("current, first read in the process", stale=False, cold=True)
            serve("current, read before in the process", stale=False, cold=False)
            answer = submission_estimate(data=data)
            write(
                f"  (the what-if job: position {answer.position} of {answer.queue_length} in "
                f"its share, estimated wait {answer.estimate.wait_p50} s; current: "
                f"{answer.current})"
            )
            stored = store.load(queue.pk)
            size = len(pickle.dumps(stored, pickle.HIGHEST_PROTOCOL))
            write(f"stored forecast: {size / 1e6:.1f} MB pickled, {len(stored.rows):,} entries")
            store.forget(queue)
        finally:
            JobEvent.objects.filter(job__queue=queue).delete()
            Job.objects.filter(queue=queue).delete()
            JobDefinition.objects.filter(queues=queue).delete()
            queue.delete()
            team.delete()
            itype.delete()
            admin.delete()
