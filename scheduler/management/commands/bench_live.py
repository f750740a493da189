"""Benchmark of the live scheduler on the configured database (meant for PostgreSQL).

    python manage.py bench_live [--pending 1000,10000,100000] [--running 1000]
                                [--passes 20] [--rates 10,100] [--seconds 10]

Two parts, on throwaway queues of 10 shares, everything deleted at the end:

1. Pass times. `--running` jobs run; pending jobs are submitted through the bulk API in
   batches of 1,000 (in-process: the DRF view, its serializers and the submission
   service, minus the HTTP socket and minus enqueueing the pass message), alternating
   batches without and with a `client_token` per job, up to each `--pending` size in
   turn. At each size: one pass that takes in the new submissions (not timed), then
   passes that change nothing, then passes after 10 running jobs finished (10 starts),
   each timed whole: lock the queue, read what it needs, run the engine, write the
   decisions.
2. Submission to start. Real Celery worker processes (`--workers`, on the broker of
   REDIS_URL) run the passes the submissions ask for; a queue with `--running` jobs
   running, `--waiting` jobs waiting that cannot start (their share, which does not
   borrow, is at its limit) and free capacity for the other shares gets single
   submissions (the submission service, one transaction each) at each `--rates` per
   second for `--seconds`; a watcher polls the
   database every 10 ms for the jobs' STARTED events. Latency is from the submission's
   commit to the moment its STARTED event was seen (an upper bound by up to 10 ms).
"""

from __future__ import annotations

import os
import socket
import statistics
import subprocess
import sys
import threading
import time
import uuid

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from django.db import connection, transaction
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
from scheduler.services import jobs as job_services
from scheduler.services.job_definitions import DefinitionData, definition_register
from scheduler.services.passes import scheduling_pass

SHARES = 10
BATCH = 1000
HOST = "localhost"  # any allowed host: the request never leaves the process


def _sizes(text: str) -> list[int]:
    try:
        values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError as error:
        raise CommandError(f"not a comma-separated list of integers: {text!r}") from error
    if not values or any(value < 0 for value in values):
        raise CommandError(f"expected non-negative integers: {text!r}")
    return values


class Command(BaseCommand):
    help = "Time scheduling passes, bulk submissions and submission-to-start latency."

    def add_arguments(self, parser):
        parser.add_argument("--pending", default="1000,10000,100000")
        parser.add_argument("--running", type=int, default=1_000)
        parser.add_argument("--passes", type=int, default=20)
        parser.add_argument("--rates", default="10,100")
        parser.add_argument("--seconds", type=float, default=10.0)
        parser.add_argument("--workers", type=int, default=2)
        parser.add_argument("--waiting", type=int, default=10_000)

    def handle(self, *args, pending, running, passes, rates, seconds, workers, waiting, **options):
        sizes = sorted(_sizes(pending)) if pending else []
        rates = _sizes(rates)
        if connection.vendor != "postgresql":
            self.stderr.write(f"note: running on {connection.vendor}, not PostgreSQL")
        tag = uuid.uuid4().hex[:8]
        admin = get_user_model().objects.create_superuser(f"bench-{tag}", password=None)
        team = Team.objects.create(name=f"bench-{tag}")
        itype = InstanceType.objects.create(name=f"bench.{tag}")
        queues = []
        try:
            queue, shares = self._fleet(tag, "passes", itype, team, admin, capacity=running)
            queues.append(queue)
            self._start_running(queue, shares, itype, running)
            if sizes:
                self._pass_times(queue, shares, itype, admin, tag, sizes, passes)
            if rates and seconds > 0:
                lat_capacity = running + int(max(rates) * seconds * 1.5) + 100
                lat_queue, lat_shares = self._fleet(
                    tag, "latency", itype, team, admin, capacity=lat_capacity
                )
                queues.append(lat_queue)
                self._start_running(lat_queue, lat_shares, itype, running)
                self._waiting(lat_queue, lat_shares, itype, running, waiting)
                self._latency(lat_queue, lat_shares[1:], itype, admin, rates, seconds, workers)
        finally:
            self._clean(queues, itype, admin, team)

    # -- part 1: pass times -----------------------------------------------------------

    def _pass_times(self, queue, shares, itype, admin, tag, sizes, passes) -> None:
        original = job_services.request_pass
        job_services.request_pass = lambda queue_id: None
        submitted = 0
        elapsed = {False: 0.0, True: 0.0}
        count = {False: 0, True: 0}
        rows = []
        try:
            self._bulk_submit(admin, shares, -2 * BATCH, -2 * BATCH + 100, False, tag)
            self._bulk_submit(admin, shares, -BATCH, -BATCH + 100, True, tag)
            scheduling_pass(queue_id=queue.pk)
            for size in sizes:
                # Top the queue up to `size` pending (the busy passes of the last size
                # started some).
                waiting = Job.objects.filter(queue=queue, state=Job.State.RUNNABLE).count()
                number = 0
                while waiting < size:
                    end = submitted + min(BATCH, size - waiting)
                    tokens = (number % 4) in (1, 2)  # A B B A: neither kind always follows
                    elapsed[tokens] += self._bulk_submit(admin, shares, submitted, end, tokens, tag)
                    count[tokens] += end - submitted
                    waiting += end - submitted
                    submitted = end
                    number += 1
                counts = {
                    state: Job.objects.filter(queue=queue, state=state).count()
                    for state in (Job.State.RUNNING, Job.State.RUNNABLE)
                }
                scheduling_pass(queue_id=queue.pk)  # takes in the new submissions
                idle = self._time_passes(queue, passes)
                busy = self._time_busy_passes(queue, passes)
                rows.append((counts, idle, busy))
        finally:
            job_services.request_pass = original
        self.stdout.write(f"database: {connection.vendor}; {SHARES} shares")
        rate = {k: count[k] / elapsed[k] for k in (False, True) if elapsed[k]}
        if len(rate) == 2:
            plain, with_tokens = rate[False], rate[True]
            cost = (plain - with_tokens) / plain * 100
            self.stdout.write(
                f"bulk submissions: {sum(count.values())} jobs in batches of up to {BATCH}, "
                f"alternating: {plain:,.0f} jobs/s without client_token, {with_tokens:,.0f} "
                f"jobs/s with (cost {cost:.1f}%)"
            )
        for counts, idle, busy in rows:
            head = f"{counts['RUNNABLE']:>7,} pending, {counts['RUNNING']:,} running"
            self._report(f"{head}: pass, nothing to change", idle)
            self._report(f"{head}: pass, 10 finished -> 10 starts", busy)
        if len(rows) >= 2:
            first, last = rows[0], rows[-1]
            worst = max(statistics.median(r[1]) for r in rows) or 1e-9
            ratio = statistics.median(last[1]) / (statistics.median(first[1]) or 1e-9)
            ratio_busy = statistics.median(last[2]) / (statistics.median(first[2]) or 1e-9)
            under = all(
                statistics.median(r[1]) < 100 and statistics.median(r[2]) < 100 for r in rows
            )
            flat = ratio <= 2 and ratio_busy <= 2
            self.stdout.write(
                f"targets: largest/smallest pass {ratio:.2f}x idle, {ratio_busy:.2f}x busy "
                f"(<= 2x {'met' if flat else 'MISSED'}); every median < 100 ms "
                f"{'met' if under else 'MISSED'} (slowest idle median {worst:.1f} ms)"
            )

    def _report(self, label: str, timings: list[float]) -> None:
        self.stdout.write(
            f"{label}: median {statistics.median(timings):.1f} ms, "
            f"p95 {percentile(timings, 95):.1f} ms, max {max(timings):.1f} ms "
            f"({len(timings)} passes)"
        )

    def _fleet(self, tag: str, kind: str, itype, team, admin, *, capacity: int):
        queue = JobQueue.objects.create(name=f"bench-{kind}-{tag}")
        QueueCapacity.objects.create(queue=queue, instance_type=itype, instances=capacity)
        shares = []
        for index in range(SHARES):
            share = QuotaShare.objects.create(
                queue=queue,
                team=team,
                name=f"share-{index}",
                strategy=QuotaShare.Strategy.LEND_AND_BORROW,
                borrow_limit=-1,
                position=index,
            )
            CapacityLimit.objects.create(
                share=share, instance_type=itype, max_instances=capacity // SHARES
            )
            shares.append(share)
        definition_register(
            actor=admin,
            name=f"bench-{kind}-{tag}",
            reason="benchmark",
            data=DefinitionData(
                queues=[queue],
                command=["python", "train.py", "--steps", "{steps}", "--model", "{model}"],
                parameters=[
                    {"name": "steps", "type": "integer", "min": 1, "max": 10**6},
                    {"name": "model", "type": "choice", "choices": ["resnet50", "bert-base"]},
                ],
                instance_type=itype,
                expected_duration=10**7,
            ),
        )
        return queue, shares

    def _start_running(self, queue, shares, itype, running: int) -> None:
        now = timezone.now()
        jobs = [
            Job(
                queue=queue,
                share=shares[n % SHARES],
                name=f"running-{n}",
                priority=n % 7,
                instance_type=itype,
                expected_duration=10**8,
                state=Job.State.RUNNING,
                submitted_at=now,
                started_at=now,
                first_started_at=now,
                start_seq=n,
                attempt=1,
            )
            for n in range(running)
        ]
        Job.objects.bulk_create(jobs, batch_size=BATCH)

    def _bulk_submit(self, admin, shares, start: int, end: int, tokens: bool, tag: str) -> float:
        """Submit jobs `start`..`end` in one bulk request; the seconds it took."""
        from rest_framework.test import APIClient

        client = APIClient()
        client.force_authenticate(admin)
        body = {
            "jobs": [
                {
                    "definition": f"bench-passes-{tag}",
                    "share": shares[n % SHARES].pk,
                    "name": f"pending-{n}",
                    "parameters": {"steps": n % 1000 + 1, "model": "resnet50"},
                    "priority": n % 5,
                    **({"client_token": f"{tag}-{n}"} if tokens else {}),
                }
                for n in range(start, end)
            ]
        }
        began = time.perf_counter()
        response = client.post(
            "/api/v1/jobs/bulk/", body, format="json", HTTP_HOST=HOST, secure=True
        )
        took = time.perf_counter() - began
        if response.status_code != 201:
            raise RuntimeError(
                f"bulk submission failed: {response.status_code} {response.content[:500]!r}"
            )
        return took

    def _time_passes(self, queue, passes: int) -> list[float]:
        timings = []
        for _ in range(passes):
            began = time.perf_counter()
            scheduling_pass(queue_id=queue.pk)
            timings.append((time.perf_counter() - began) * 1000)
        return timings

    def _time_busy_passes(self, queue, passes: int) -> list[float]:
        timings = []
        for _ in range(passes):
            with transaction.atomic():
                done = list(
                    Job.objects.filter(queue=queue, state=Job.State.RUNNING).values_list(
                        "pk", flat=True
                    )[:10]
                )
                Job.objects.filter(pk__in=done).update(
                    state=Job.State.SUCCEEDED, finished_at=timezone.now()
                )
            began = time.perf_counter()
            outcome = scheduling_pass(queue_id=queue.pk)
            timings.append((time.perf_counter() - began) * 1000)
            if len(outcome.started) != 10:
                raise RuntimeError(f"expected 10 starts, got {len(outcome.started)}")
        return timings

    # -- part 2: submission to start ----------------------------------------------------

    def _waiting(self, queue, shares, itype, running: int, waiting: int) -> None:
        """`waiting` jobs in the first share, made a lender at its limit: they wait
        whatever the others do, and every pass has them in the queue."""
        holder = shares[0]
        holder.strategy = QuotaShare.Strategy.LEND
        holder.borrow_limit = None
        holder.save(update_fields=["strategy", "borrow_limit"])
        CapacityLimit.objects.filter(share=holder).update(max_instances=running // SHARES)
        now = timezone.now()
        Job.objects.bulk_create(
            [
                Job(
                    queue=queue,
                    share=holder,
                    name=f"waiting-{n}",
                    priority=n % 5,
                    instance_type=itype,
                    expected_duration=3600,
                    submitted_at=now,
                )
                for n in range(waiting)
            ],
            batch_size=BATCH,
        )
        scheduling_pass(queue_id=queue.pk)  # judges them, as their submission's pass would
        self.stdout.write(
            f"submission to start: a queue of {running:,} running and {waiting:,} waiting "
            "jobs (a lending share at its limit), free capacity for the other shares"
        )

    def _latency(self, queue, shares, itype, admin, rates, seconds, workers) -> None:
        if not getattr(settings, "REDIS_URL", ""):
            self.stdout.write("submission to start: skipped (needs REDIS_URL: real workers)")
            return
        from core.celery import app

        app.control.purge()
        revision = JobDefinition.objects.get(queues=queue).revisions.order_by("-revision").first()
        procs = self._start_workers(workers)
        try:
            for rate in rates:
                latencies, missing = self._submit_at(queue, shares, revision, admin, rate, seconds)
                if not latencies:
                    self.stdout.write(f"submission to start at {rate}/s: no job started")
                    continue
                p50, p99 = percentile(latencies, 50), percentile(latencies, 99)
                met = "met" if not missing and p99 < 1 else "MISSED"
                late = f"; {missing} not started within 30 s" if missing else ""
                self.stdout.write(
                    f"submission to start at {rate} submissions/s ({len(latencies)} jobs, "
                    f"{workers} worker processes): p50 {p50 * 1000:.0f} ms, "
                    f"p99 {p99 * 1000:.0f} ms, max {max(latencies) * 1000:.0f} ms{late}; "
                    f"target p99 < 1 s {met}"
                )
        finally:
            for proc in procs:
                os.killpg(proc.pid, 15)
            for proc in procs:
                try:
                    proc.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, 9)
                    proc.wait()

    def _start_workers(self, count: int) -> list[subprocess.Popen]:
        from core.celery import app

        env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings"}
        procs, names = [], []
        for number in range(count):
            name = f"bench{number}-{uuid.uuid4().hex[:6]}"
            names.append(f"{name}@{socket.gethostname()}")
            procs.append(
                subprocess.Popen(
                    [
                        sys.executable,
                        "-m",
                        "celery",
                        "-A",
                        "config",
                        "worker",
                        "--loglevel=WARNING",
                        "--concurrency=1",
                        f"--hostname={name}@%h",
                        "--without-gossip",
                        "--without-mingle",
                    ],
                    env=env,
                    cwd=settings.BASE_DIR,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    start_new_session=True,
                )
            )
        deadline = time.monotonic() + 60
        while True:
            replies = app.control.ping(destination=names, timeout=0.5)
            if len(replies) == len(names):
                return procs
            if time.monotonic() > deadline:
                raise CommandError("the Celery workers did not start within 60 s")

    def _submit_at(self, queue, shares, revision, admin, rate, seconds):
        """Submit at `rate` per second for `seconds`; (latencies in s, jobs not started)."""
        committed: dict[int, float] = {}
        seen: dict[int, float] = {}
        done = threading.Event()

        def watch():
            try:
                while True:
                    finished = done.is_set()
                    waiting = [pk for pk in list(committed) if pk not in seen]
                    if waiting:
                        started = JobEvent.objects.filter(
                            job_id__in=waiting, type=JobEvent.Type.STARTED
                        ).values_list("job_id", flat=True)
                        now = time.time()
                        for pk in started:
                            seen[pk] = now
                    if finished and all(pk in seen for pk in committed):
                        return
                    time.sleep(0.01)
            finally:
                connection.close()

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        total = int(rate * seconds)
        began = time.monotonic()
        for number in range(total):
            delay = began + number / rate - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            data = job_services.JobData(
                share=shares[number % len(shares)],
                name=f"latency-{rate}-{number}",
                revision=revision,
                parameters={"steps": number % 1000 + 1, "model": "resnet50"},
                priority=number % 5,
            )
            job = job_services.job_submit(data=data, submitted_by=admin)
            committed[job.pk] = time.time()
        done.set()
        watcher.join(timeout=30)
        latencies = [seen[pk] - at for pk, at in committed.items() if pk in seen]
        return latencies, sum(1 for pk in committed if pk not in seen)

    def _clean(self, queues, itype, admin, team) -> None:
        for queue in queues:
            JobEvent.objects.filter(job__queue=queue).delete()
            Job.objects.filter(queue=queue).delete()
            JobDefinition.objects.filter(queues=queue).delete()
            queue.delete()
        team.delete()
        itype.delete()
        admin.delete()
