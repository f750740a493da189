"""Load test of the web tier: `make bench-load` (python scripts/bench_load.py --help).

Starts the app under gunicorn (gunicorn.conf.py) on 127.0.0.1 against PostgreSQL and
Redis, with the demo organisation seeded plus one team lead per client, then runs each
phase of concurrent clients (default 200, then 400) for --duration seconds. Clients
arrive evenly over the first --ramp seconds (10), as users do, not all in one second.
A client loops: think (1 s), then one request with its own API token:
  - client 0 is an admin editing a share (read it, then PATCH its in-share preemption);
  - the others read (the queues, their share, their share's jobs, one of the jobs they
    submitted), and one request in eight (SUBMIT_SHARE) submits a job to their share.
Every request has a client timeout (--timeout, 10 s). Each phase prints throughput,
latency percentiles, responses by status, when the refusals (503/429) came, and
timeouts. Traffic goes to 127.0.0.1 only, and every phase ends after its duration.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parents[1]
READ, SUBMIT, EDIT = "read", "submit", "edit"
# Of a lead's requests: reads, with one in eight a job submission.
SUBMIT_SHARE = 1 / 8


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=180, help="seconds per phase")
    parser.add_argument(
        "--clients", default="200,400", help="comma-separated client counts, one phase each"
    )
    parser.add_argument("--think", type=float, default=1.0, help="seconds between requests")
    parser.add_argument(
        "--ramp", type=float, default=10.0, help="seconds over which the clients arrive"
    )
    parser.add_argument("--timeout", type=float, default=10.0, help="client timeout (s)")
    parser.add_argument("--port", type=int, default=0, help="default: a free port")
    parser.add_argument(
        "--database-url",
        default=os.environ.get("BENCH_DATABASE_URL")
        or "postgres://postgres@127.0.0.1:5432/quota_bench",
        help="PostgreSQL database for the run (created if missing; its rows are kept)",
    )
    parser.add_argument(
        "--redis-url",
        default=os.environ.get("BENCH_REDIS_URL") or "redis://127.0.0.1:6379/0",
    )
    parser.add_argument("--seed", type=int, default=1, help="random seed of the clients")
    parser.add_argument("--seed-only", type=int, help=argparse.SUPPRESS)
    return parser.parse_args()


# The server side: database, seed, gunicorn.


def server_env(args) -> dict[str, str]:
    env = {
        **os.environ,
        "DATABASE_URL": args.database_url,
        "REDIS_URL": args.redis_url,
        "DJANGO_SECURE": "0",
        "DJANGO_DEBUG": "0",
        "DJANGO_ALLOWED_HOSTS": "127.0.0.1",
        "GUNICORN_BIND": f"127.0.0.1:{args.port}",
        "DJANGO_LOG_LEVEL": "WARNING",
    }
    env.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
    return env


def create_database(url: str) -> None:
    import psycopg

    parts = urlsplit(url)
    name = parts.path.lstrip("/")
    admin_url = urlunsplit(parts._replace(path="/postgres"))
    with psycopg.connect(admin_url, autocommit=True) as connection:
        exists = connection.execute(
            "SELECT 1 FROM pg_database WHERE datname = %s", [name]
        ).fetchone()
        if not exists:
            connection.execute(f'CREATE DATABASE "{name}"')


def prepare(args) -> dict:
    """Migrate, seed the demo organisation and the clients' users; their tokens."""
    env = server_env(args)
    create_database(args.database_url)
    manage = [sys.executable, "manage.py"]
    subprocess.run([*manage, "migrate", "--noinput", "-v", "0"], cwd=ROOT, env=env, check=True)
    subprocess.run(
        [*manage, "seed_demo", "--months", "0"],
        cwd=ROOT,
        env=env,
        check=True,
        stdout=subprocess.DEVNULL,
    )
    clients = max(int(n) for n in args.clients.split(","))
    seeded = subprocess.run(
        [sys.executable, __file__, "--seed-only", str(clients)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    if seeded.returncode:
        raise SystemExit(f"seeding the clients failed:\n{seeded.stderr}")
    return json.loads(seeded.stdout.strip().splitlines()[-1])


def seed_clients(count: int) -> None:
    """(In a child process with the server's environment.) One admin and `count` team
    leads, each leading a team that has a share, each with a fresh API token."""
    import django

    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    django.setup()
    from django.contrib.auth.models import Group, User

    from accounts.tokens import token_issue
    from core.permissions import ADMINS, TEAM_LEADS
    from fleet.models import JobDefinition, QueueCapacity, QuotaShare
    from scheduler.executors import executor_names

    # Simulated queues only: a process queue would run real programs for the submissions.
    shares = list(
        QuotaShare.objects.select_related("team", "queue")
        .filter(queue__executor__in=executor_names(modelled_clock=True))
        .order_by("queue_id", "pk")
    )
    instance_type = {
        row.queue_id: row.instance_type.name
        for row in QueueCapacity.objects.select_related("instance_type").order_by("-pk")
    }
    # A registered job definition each queue allows (None: the API's own fields).
    definition = {}
    for row in JobDefinition.queues.through.objects.filter(
        jobdefinition__retired_at__isnull=True
    ).order_by("jobdefinition__name"):
        definition.setdefault(row.jobqueue_id, row.jobdefinition.name)
    leads = Group.objects.get_or_create(name=TEAM_LEADS)[0]
    admins = Group.objects.get_or_create(name=ADMINS)[0]
    admin, _ = User.objects.get_or_create(username="bench-admin")
    admin.groups.add(admins)
    tokens = []
    for index in range(count):
        user, created = User.objects.get_or_create(username=f"bench-lead-{index}")
        if created:
            user.set_unusable_password()
            user.save()
            user.groups.add(leads)
        share = shares[index % len(shares)]
        share.team.leads.add(user)
        tokens.append(
            {
                "token": token_issue(user=user, name="bench", days=1)[1],
                "share": share.pk,
                "instance_type": instance_type[share.queue_id],
                "definition": definition.get(share.queue_id),
            }
        )
    edit_share = next(s for s in shares if s.queue.name == "aws-sample")
    print(
        json.dumps(
            {
                "admin": token_issue(user=admin, name="bench", days=1)[1],
                "leads": tokens,
                "edit_share": edit_share.pk,
            }
        )
    )


def start_gunicorn(args) -> subprocess.Popen:
    server = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "-c", "gunicorn.conf.py", "config.wsgi"],
        cwd=ROOT,
        env=server_env(args),
        stdout=subprocess.DEVNULL,
        stderr=open(ROOT / "var" / "bench-load-gunicorn.log", "w"),  # noqa: SIM115
        start_new_session=True,
    )
    deadline = time.monotonic() + 60
    import urllib.request

    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{args.port}/healthz/", timeout=2):
                if server.poll() is None:
                    return server
        except OSError:
            if server.poll() is not None:
                raise SystemExit("gunicorn exited: see var/bench-load-gunicorn.log") from None
            time.sleep(0.5)
    stop(server)
    raise SystemExit("gunicorn did not answer /healthz/ within 60 s")


def stop(server: subprocess.Popen) -> None:
    if server.poll() is None:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=40)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()


# The clients.


@dataclass
class Results:
    latencies: list[float] = field(default_factory=list)
    by_kind: Counter = field(default_factory=Counter)
    statuses: Counter = field(default_factory=Counter)
    slow_refusals: int = 0  # 503/429 answered after more than a second
    refused_at: list[float] = field(default_factory=list)  # when each 503/429 came
    started: float = 0.0
    timeouts: int = 0
    failures: Counter = field(default_factory=Counter)  # connection errors by kind
    elapsed: float = 0.0


class Client:
    def __init__(self, session, base: str, token: str, share: int, rng: random.Random):
        self.session = session
        self.base = base
        self.headers = {"Authorization": f"Token {token}"}
        self.share = share
        self.rng = rng
        self.job_ids: list[int] = []

    async def request(self, results: Results, kind: str, method: str, path: str, **kwargs):
        import aiohttp

        started = time.monotonic()
        try:
            async with self.session.request(
                method, self.base + path, headers=self.headers, **kwargs
            ) as response:
                body = await response.read()
                status = response.status
        except TimeoutError:
            results.timeouts += 1
            return None
        except aiohttp.ClientError as error:
            results.failures[type(error).__name__] += 1
            return None
        elapsed = time.monotonic() - started
        results.latencies.append(elapsed)
        results.by_kind[kind] += 1
        results.statuses[status] += 1
        if status in (429, 503):
            results.refused_at.append(time.monotonic())
            if elapsed > 1:
                results.slow_refusals += 1
        if status < 300 and body:
            return json.loads(body)
        return None


class Lead(Client):
    def __init__(self, *args, submission: dict, instance_type: str, **kwargs):
        super().__init__(*args, **kwargs)
        self.submission = submission
        self.instance_type = instance_type

    async def step(self, results: Results) -> None:
        if self.rng.random() < SUBMIT_SHARE:
            body = {
                **self.submission,
                "share": self.share,
                "instance_type": self.instance_type,
                "name": f"bench-{self.rng.random():.6f}",
            }
            job = await self.request(results, SUBMIT, "POST", "/api/v1/jobs/", json=body)
            if job and "id" in job:
                self.job_ids = [job["id"], *self.job_ids[:9]]
            return
        choice = self.rng.random()
        if choice < 0.3:
            await self.request(results, READ, "GET", "/api/v1/queues/")
        elif choice < 0.6:
            await self.request(results, READ, "GET", f"/api/v1/shares/{self.share}/")
        elif choice < 0.8 or not self.job_ids:
            await self.request(results, READ, "GET", f"/api/v1/jobs/?share={self.share}")
        else:
            job_id = self.rng.choice(self.job_ids)
            await self.request(results, READ, "GET", f"/api/v1/jobs/{job_id}/")


class Admin(Client):
    async def step(self, results: Results) -> None:
        share = await self.request(results, EDIT, "GET", f"/api/v1/shares/{self.share}/")
        if not share:
            return
        change = {
            "in_share_preemption": not share["in_share_preemption"],
            "version": share["version"],
            "reason": "load test: toggle in-share preemption",
        }
        await self.request(results, EDIT, "PATCH", f"/api/v1/shares/{self.share}/", json=change)


def submission_fields(lead: dict) -> dict:
    """What a lead's job submission names: a registered job definition its queue allows
    (seed_clients picks one), otherwise the job's own fields."""
    if lead.get("definition"):
        return {"definition": lead["definition"]}
    return {"instances": 1, "expected_duration": 3600}


async def run_phase(args, seeded: dict, clients: int) -> Results:
    import aiohttp

    base = f"http://127.0.0.1:{args.port}"
    results = Results()
    rng = random.Random(args.seed)
    timeout = aiohttp.ClientTimeout(total=args.timeout)
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(timeout=timeout, connector=connector) as session:
        population: list[Client] = [
            Admin(session, base, seeded["admin"], seeded["edit_share"], random.Random(rng.random()))
        ]
        for lead in seeded["leads"][: clients - 1]:
            population.append(
                Lead(
                    session,
                    base,
                    lead["token"],
                    lead["share"],
                    random.Random(rng.random()),
                    submission=submission_fields(lead),
                    instance_type=lead["instance_type"],
                )
            )
        deadline = time.monotonic() + args.duration

        async def loop(client: Client) -> None:
            # Clients arrive evenly over the ramp (at least one think time).
            await asyncio.sleep(client.rng.random() * max(args.ramp, args.think))
            while time.monotonic() < deadline:
                await client.step(results)
                await asyncio.sleep(args.think)

        started = results.started = time.monotonic()
        await asyncio.gather(*(loop(client) for client in population))
        results.elapsed = time.monotonic() - started
    return results


def report(clients: int, args, results: Results) -> None:
    answered = len(results.latencies)
    server_errors = sum(n for status, n in results.statuses.items() if status >= 500)
    refused = results.statuses.get(503, 0) + results.statuses.get(429, 0)
    print(
        f"\n== {clients} clients arriving over {max(args.ramp, args.think):g} s, "
        f"{args.think:g} s think time, {args.duration:g} s =="
    )
    print(
        f"requests answered: {answered} in {results.elapsed:.1f} s = "
        f"{answered / results.elapsed:.1f} req/s "
        f"(reads {results.by_kind[READ]}, submissions {results.by_kind[SUBMIT]}, "
        f"admin share edits {results.by_kind[EDIT]})"
    )
    if answered:
        sys.path.insert(0, str(ROOT))
        from engine.stats import percentile  # the project's one percentile

        lat = results.latencies
        print(
            f"latency: p50 {percentile(lat, 50):.3f} s, p95 {percentile(lat, 95):.3f} s, "
            f"p99 {percentile(lat, 99):.3f} s, max {max(lat):.3f} s, "
            f"mean {statistics.fmean(lat):.3f} s"
        )
    statuses = ", ".join(f"{status}: {n}" for status, n in sorted(results.statuses.items()))
    print(f"responses by status: {statuses}")
    print(
        f"server errors (5xx): {server_errors}; refused fast (503/429): {refused}, "
        f"of which slower than 1 s: {results.slow_refusals}"
    )
    if results.refused_at:
        step = 30 if args.duration > 60 else 10 if args.duration > 20 else 1
        spans = Counter(int((at - results.started) // step) for at in results.refused_at)
        print(
            f"503/429 by {step} s of the phase: "
            + ", ".join(
                f"{n * step}-{(n + 1) * step} s: {spans.get(n, 0)}" for n in range(max(spans) + 1)
            )
        )
    failures = ", ".join(f"{name}: {n}" for name, n in results.failures.items()) or "none"
    print(f"timeouts (> {args.timeout:g} s): {results.timeouts}; connection failures: {failures}")


def run(coroutine):
    """The clients' event loop: uvloop's when installed (the bench extra), so that the
    load generator takes less of the CPUs it shares with the server it measures."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(coroutine)
    return uvloop.run(coroutine)


def free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def main() -> None:
    args = parse_args()
    # A port of its own, so that another server on this machine is never measured.
    args.port = args.port or free_port()
    if args.seed_only is not None:
        seed_clients(args.seed_only)
        return
    try:
        import aiohttp  # noqa: F401
    except ImportError:
        raise SystemExit("the load client needs aiohttp: pip install -e '.[bench]'") from None
    phases = [int(n) for n in args.clients.split(",")]
    print(f"Preparing {args.database_url} and {args.redis_url}…", flush=True)
    seeded = prepare(args)
    server = start_gunicorn(args)
    try:
        print(f"gunicorn (gunicorn.conf.py) up on 127.0.0.1:{args.port}; {os.cpu_count()} CPUs")
        for clients in phases:
            results = run(run_phase(args, seeded, clients))
            report(clients, args, results)
    finally:
        stop(server)


if __name__ == "__main__":
    main()
