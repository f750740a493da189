"""Benchmark of the leadership dashboard on a year of events in PostgreSQL.

    python manage.py bench_dashboard [--database-url postgres://postgres@127.0.0.1:5432/quota_bench]
                                     [--regenerate]

Runs against its own database (created when missing; never `test` or `postgres`): the
command re-runs itself with DATABASE_URL pointing there. On a database without the
year of events it generates them: the Philly trace (three months, limits scaled to 0.2
and 0.3 of the VC sizes on two queues, checkpoints, restart overhead, priorities)
simulated by the engine and bulk-inserted by the history replay's loader four times
over, one quarter after another, and the year's rollups computed. It then prints the
dashboard's server time for one month (view + template, from rollups; median of 7
after one warm-up) and the time of one month's rollup refresh.
"""

from __future__ import annotations

import datetime as dt
import os
import statistics
import subprocess
import sys
import time
from urllib.parse import urlparse

from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError
from django.db import connection

DEFAULT_URL = "postgres://postgres@127.0.0.1:5432/quota_bench"
PROTECTED = {"postgres", "test", "template0", "template1"}
YEAR_START = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)
QUARTERS = 4
QUEUES = (("bench-a", 0.2), ("bench-b", 0.3))
TARGET_EVENTS = 1_000_000


class Command(BaseCommand):
    help = "Time the monthly dashboard and a rollup refresh on a year of events (PostgreSQL)."

    def add_arguments(self, parser):
        parser.add_argument("--database-url", default=DEFAULT_URL)
        parser.add_argument("--regenerate", action="store_true")

    def handle(self, *args, database_url: str, regenerate: bool, **options):
        name = urlparse(database_url).path.lstrip("/")
        if not database_url.startswith(("postgres://", "postgresql://")) or not name:
            raise CommandError("--database-url must name a PostgreSQL database")
        if name in PROTECTED:
            raise CommandError(f"refusing to use the {name!r} database: give the bench its own")
        if os.environ.get("BENCH_DASHBOARD_CHILD") != "1":
            self._ensure_database(database_url, name)
            env = {**os.environ, "DATABASE_URL": database_url, "BENCH_DASHBOARD_CHILD": "1"}
            argv = [sys.executable, sys.argv[0], "bench_dashboard", "--database-url", database_url]
            if regenerate:
                argv.append("--regenerate")
            raise SystemExit(subprocess.call(argv, env=env))
        if connection.vendor != "postgresql" or connection.settings_dict["NAME"] != name:
            raise CommandError("the child run is not connected to the bench database")
        self._run(regenerate)

    def _ensure_database(self, url: str, name: str) -> None:
        import psycopg

        parts = urlparse(url)
        admin = parts._replace(path="/postgres").geturl()
        with psycopg.connect(admin, autocommit=True) as conn:
            exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone()
            if not exists:
                conn.execute(f'CREATE DATABASE "{name}"')
                self.stdout.write(f"created database {name}")

    def _run(self, regenerate: bool) -> None:
        from fleet.models import JobEvent

        call_command("migrate", verbosity=0)
        events = JobEvent.objects.count()
        if regenerate or events < TARGET_EVENTS:
            self._generate()
            events = JobEvent.objects.count()
        self._measure(events)

    def _generate(self) -> None:
        from django.db import transaction

        from demo.history import queue_for_scenario, result_load
        from engine import load_scenario, simulate
        from engine.trace import TraceOptions, build_scenario, read_trace, read_vc_sizes
        from fleet.models import Job, JobQueue, Team
        from governance.dashboards.rollups import rollups_refresh
        from governance.dashboards.selectors.calendar import next_month
        from governance.models import MonthlyRollup

        started = time.perf_counter()
        with transaction.atomic():
            MonthlyRollup.objects.all().delete()
            Job.objects.filter(queue__name__startswith="bench-").delete()
            JobQueue.objects.filter(name__startswith="bench-").delete()
            Team.objects.filter(name__startswith="bench-").delete()
        rows = read_trace()
        sizes = read_vc_sizes()
        inserted = 0
        for queue_name, scale in QUEUES:
            options = TraceOptions(
                scale=scale,
                seed=1,
                in_share_preemption=True,
                checkpoint_interval=1800,
                restart_overhead=120,
                start=dt.datetime(2017, 10, 2),
                days=91,
                name=queue_name,
            )
            scenario = load_scenario(build_scenario(rows, sizes, options))
            result = simulate(scenario)
            queue, shares, types = queue_for_scenario(scenario=scenario, name=queue_name)
            for quarter in range(QUARTERS):
                origin = YEAR_START + dt.timedelta(days=91 * quarter)
                summary = result_load(
                    scenario=scenario,
                    result=result,
                    queue=queue,
                    shares=shares,
                    instance_types=types,
                    origin=origin,
                    name_prefix=f"q{quarter}-",
                )
                inserted += summary.events
                self.stdout.write(
                    f"  {queue_name} quarter {quarter + 1}: {summary.jobs:,} jobs, "
                    f"{summary.events:,} events in {summary.seconds:.1f} s"
                )
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")
        month = YEAR_START.date()
        while month < (YEAR_START + dt.timedelta(days=91 * QUARTERS)).date():
            rollups_refresh(month=month)
            month = next_month(month)
        self.stdout.write(
            f"generated {inserted:,} job events in {time.perf_counter() - started:.0f} s"
        )

    def _measure(self, events: int) -> None:
        from django.contrib.auth.models import Group, User
        from django.contrib.messages.storage.fallback import FallbackStorage
        from django.contrib.sessions.backends.base import SessionBase
        from django.test import RequestFactory

        from governance.dashboards.rollups import rollups_refresh
        from governance.dashboards.views import dashboard
        from governance.models import MonthlyRollup

        months = list(
            MonthlyRollup.objects.filter(scope="all").order_by("month").values_list("data", "month")
        )
        busiest = max(months, key=lambda item: item[0]["jobs_ended"])[1]
        user, _ = User.objects.get_or_create(username="bench-leader")
        user.groups.add(Group.objects.get_or_create(name="leadership")[0])
        factory = RequestFactory()

        def render_once() -> float:
            request = factory.get("/dashboard/", {"month": f"{busiest:%Y-%m}"})
            request.user = User.objects.get(pk=user.pk)
            request.session = SessionBase()
            request._messages = FallbackStorage(request)
            request.htmx = False
            begin = time.perf_counter()
            response = dashboard(request)
            elapsed = time.perf_counter() - begin
            assert response.status_code == 200 and b"data-plotly-figure" in response.content
            return elapsed

        render_once()
        timings = [render_once() for _ in range(7)]
        begin = time.perf_counter()
        rollups_refresh(month=busiest)
        refresh = time.perf_counter() - begin
        month_events = _month_events(busiest)
        self.stdout.write(f"database            {connection.settings_dict['NAME']} (PostgreSQL)")
        self.stdout.write(f"job events          {events:,} over {len(months)} months")
        self.stdout.write(f"month measured      {busiest:%Y-%m} ({month_events:,} job events)")
        self.stdout.write(
            f"dashboard server    median {statistics.median(timings) * 1000:.0f} ms, "
            f"max {max(timings) * 1000:.0f} ms over {len(timings)} renders (target < 300 ms)"
        )
        self.stdout.write(f"rollup refresh      {refresh:.1f} s for one month (target < 30 s)")


def _month_events(month: dt.date) -> int:
    from fleet.models import JobEvent
    from governance.dashboards.selectors.calendar import month_bounds

    start, end = month_bounds(month)
    return JobEvent.objects.filter(at__gte=start, at__lt=end).count()
