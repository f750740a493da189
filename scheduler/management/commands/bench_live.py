"""Benchmark of the live scheduler on the configured database (meant for PostgreSQL).

    python manage.py bench_live [--pending 10000] [--running 1000] [--passes 20]

Builds a throwaway queue (10 shares) and a job definition with two parameters, starts
`--running` jobs, submits `--pending` jobs through the bulk API in batches of 1,000
(in-process: the DRF view, its serializers and the submission service, minus the HTTP
socket and minus enqueueing the pass message), alternating batches without and with
a `client_token` per job so both rates are measured in one run on the same database,
then times full scheduling passes: lock the queue, load the snapshot, run the engine,
write the decisions. Everything it created is deleted at the end.
"""

from __future__ import annotations

import statistics
import time
import uuid

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand
from django.db import connection, transaction
from django.utils import timezone

from governance.models import CapacityLimit, InstanceType, JobQueue, QueueCapacity, QuotaShare, Team
from scheduler.models import Job, JobDefinition, JobEvent
from scheduler.services import jobs as job_services
from scheduler.services.job_definitions import DefinitionData, definition_register
from scheduler.services.passes import scheduling_pass

SHARES = 10
BATCH = 1000
HOST = "localhost"  # any allowed host: the request never leaves the process


class Command(BaseCommand):
    help = "Time scheduling passes and bulk submissions of the live scheduler."

    def add_arguments(self, parser):
        parser.add_argument("--pending", type=int, default=10_000)
        parser.add_argument("--running", type=int, default=1_000)
        parser.add_argument("--passes", type=int, default=20)

    def handle(self, *args, pending, running, passes, **options):
        if connection.vendor != "postgresql":
            self.stderr.write(f"note: running on {connection.vendor}, not PostgreSQL")
        tag = uuid.uuid4().hex[:8]
        queue, shares, itype, admin, team = self._fleet(tag, running)
        original = job_services.request_pass
        job_services.request_pass = lambda queue_id: None
        try:
            self._start_running(queue, shares, itype, running)
            rates = self._bulk_submit(admin, shares, itype, pending, tag)
            counts = {
                state: Job.objects.filter(queue=queue, state=state).count()
                for state in (Job.State.RUNNING, Job.State.RUNNABLE)
            }
            idle = self._time_passes(queue, passes)
            busy = self._time_busy_passes(queue, passes)
        finally:
            job_services.request_pass = original
            self._clean(queue, itype, admin, team)
        self.stdout.write(
            f"database: {connection.vendor}; queue: {counts['RUNNING']} running, "
            f"{counts['RUNNABLE']} pending, {SHARES} shares"
        )
        plain, tokens = rates[False], rates[True]
        cost = (plain - tokens) / plain * 100
        self.stdout.write(
            f"bulk submissions: {pending} jobs in batches of {BATCH}, alternating: "
            f"{plain:,.0f} jobs/s without client_token, {tokens:,.0f} jobs/s with "
            f"(cost {cost:.1f}%)"
        )
        self._report("pass, nothing to change", idle)
        self._report("pass, 10 finished -> 10 starts", busy)
        target = statistics.median(idle) < 200 and statistics.median(busy) < 200
        fast = min(plain, tokens) > 1000
        self.stdout.write(
            f"targets: pass < 200 ms {'met' if target else 'MISSED'}; "
            f"submissions > 1,000/s {'met' if fast else 'MISSED'}; "
            f"client_token cost <= 10% {'met' if cost <= 10 else 'MISSED'}"
        )

    def _report(self, label: str, timings: list[float]) -> None:
        timings = sorted(timings)
        p95 = timings[min(len(timings) - 1, int(len(timings) * 0.95))]
        self.stdout.write(
            f"{label}: median {statistics.median(timings):.1f} ms, p95 {p95:.1f} ms, "
            f"max {timings[-1]:.1f} ms ({len(timings)} passes)"
        )

    def _fleet(self, tag: str, running: int):
        itype = InstanceType.objects.create(name=f"bench.{tag}")
        queue = JobQueue.objects.create(name=f"bench-live-{tag}")
        QueueCapacity.objects.create(queue=queue, instance_type=itype, instances=running)
        team = Team.objects.create(name=f"bench-{tag}")
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
                share=share, instance_type=itype, max_instances=running // SHARES
            )
            shares.append(share)
        admin = get_user_model().objects.create_superuser(f"bench-{tag}", password=None)
        definition_register(
            actor=admin,
            name=f"bench-{tag}",
            reason="benchmark",
            data=DefinitionData(
                queues=[queue],
                command=["python", "train.py", "--steps", "{steps}", "--model", "{model}"],
                parameters=[
                    {"name": "steps", "type": "integer", "min": 1, "max": 10**6},
                    {"name": "model", "type": "choice", "choices": ["resnet50", "bert-base"]},
                ],
                instance_type=itype,
                expected_duration=3600,
            ),
        )
        return queue, shares, itype, admin, team

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

    def _bulk_submit(self, admin, shares, itype, pending: int, tag: str) -> dict[bool, float]:
        """Jobs per second without and with client tokens, after one unmeasured warm-up
        batch of each. The measured batches alternate A B B A, so neither kind is always
        the one that follows the other (which alone skews a plain A B A B)."""
        from rest_framework.test import APIClient

        client = APIClient()
        client.force_authenticate(admin)
        elapsed = {False: 0.0, True: 0.0}
        count = {False: 0, True: 0}
        batches = [(start, min(pending, start + BATCH)) for start in range(0, pending, BATCH)]
        warm_up = [(-2 * BATCH, -2 * BATCH + 100), (-BATCH, -BATCH + 100)]
        order = [False, True] + [(n % 4) in (1, 2) for n in range(len(batches))]
        for number, ((start, end), tokens) in enumerate(zip(warm_up + batches, order, strict=True)):
            body = {
                "jobs": [
                    {
                        "definition": f"bench-{tag}",
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
            if number >= len(warm_up):
                elapsed[tokens] += took
                count[tokens] += end - start
        return {tokens: count[tokens] / elapsed[tokens] for tokens in (False, True)}

    def _time_passes(self, queue, passes: int) -> list[float]:
        scheduling_pass(queue_id=queue.pk)  # first pass records every job's reason
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

    def _clean(self, queue, itype, admin, team) -> None:
        JobEvent.objects.filter(job__queue=queue).delete()
        Job.objects.filter(queue=queue).delete()
        JobDefinition.objects.filter(queues=queue).delete()
        queue.delete()
        team.delete()
        itype.delete()
        admin.delete()
