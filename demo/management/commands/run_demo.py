"""`make demo`: migrate, load the demo organisation, then run the web server, Celery
workers and beat together until Ctrl-C, which stops them all.

The console stays quiet: the logins banner is the last thing it prints (then only a
process that stops). Each process writes its log under var/log/demo/; the e-mails the
demo sends are files in var/outbox/, their links pointing at the real --host/--port.
The web server starts while the three months of history the dashboard shows are
replayed; the workers and beat start after that replay (one long SQLite write).
"""

import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand

from demo.jobs import seed_slurm_demo
from demo.organisation import DEMO_USERS, demo_password
from fleet.models import InstanceType
from scheduler.executors import instances_queue, worker_queues_in_use

# Addresses that mean "every interface": the server is then opened by some other name.
EVERY_INTERFACE = {"0.0.0.0", "::", ""}


def allowed_hosts(host: str) -> str:
    """DJANGO_ALLOWED_HOSTS for the web server: what the environment says, else the
    defaults and the host it listens on (a browser opens http://<host>:<port>/)."""
    if os.environ.get("DJANGO_ALLOWED_HOSTS"):
        return os.environ["DJANGO_ALLOWED_HOSTS"]
    hosts = ["127.0.0.1", "localhost"]
    if host not in EVERY_INTERFACE and host not in hosts:
        hosts.append(host)
    return ",".join(hosts)


class Command(BaseCommand):
    help = "Run the demo: web server, Celery worker and beat, on embedded defaults."

    def add_arguments(self, parser):
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=8000)

    @staticmethod
    def _executor_workers(bin_dir: Path) -> dict[str, list[str]]:
        queues = worker_queues_in_use()
        if not queues:
            return {}
        worker = [str(bin_dir / "celery"), "-A", "config", "worker", "--hostname"]
        worker += ["executors@%h", "--loglevel", "INFO", "--pool", "threads"]
        return {"executors": [*worker, "--concurrency", "2", "--queues", ",".join(queues)]}

    def handle(self, *args, host, port, **options):
        started = time.monotonic()
        var = Path(settings.VAR_DIR)
        for folder in ("celery/queue", "celery/processed", "celery/control", "log/demo", "outbox"):
            (var / folder).mkdir(parents=True, exist_ok=True)
        logs, outbox = var / "log" / "demo", var / "outbox"
        url = f"http://{host}:{port}/"
        # E-mails go to files, with links to this server, in this process (the seed
        # files requests) and in every process started below.
        mail = {
            "DJANGO_EMAIL_BACKEND": "django.core.mail.backends.filebased.EmailBackend",
            "DJANGO_EMAIL_FILE_PATH": str(outbox),
            "SITE_URL": os.environ.get("SITE_URL") or url.rstrip("/"),
        }
        settings.EMAIL_BACKEND = mail["DJANGO_EMAIL_BACKEND"]
        settings.EMAIL_FILE_PATH = mail["DJANGO_EMAIL_FILE_PATH"]
        settings.SITE_URL = mail["SITE_URL"]

        # Static files collected as production does (hashed names, gzip copies, cached a
        # year: config.staticfiles), beside the migration: it needs no database. Until
        # then plotly.js went uncompressed, cached 60 s, on every first visit.
        collect = self._start(
            [
                sys.executable,
                str(Path(settings.BASE_DIR) / "manage.py"),
                "collectstatic",
                "--noinput",
                "--verbosity",
                "0",
            ],
            env={**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings"},
            log=logs / "collectstatic.log",
        )
        self.stdout.write("Preparing the database…")
        call_command("migrate", interactive=False, verbosity=0)
        self.stdout.write("Loading the demo organisation…")
        call_command("seed_demo", months=0, verbosity=0, stdout=open(os.devnull, "w"))  # noqa: SIM115
        if os.environ.get("SLURM_CONF"):
            # A queue on that Slurm cluster (scripts/slurm/cluster.sh start prints it).
            self.stdout.write(f"Adding the slurm-lab queue on {os.environ['SLURM_CONF']}…")
            seed_slurm_demo_queue(os.environ["SLURM_CONF"])

        env = {
            **os.environ,
            **mail,
            "DJANGO_SETTINGS_MODULE": "config.settings",
            # Beat keeps jobs flowing through aws-sample: borrowing, reclaim, recovery.
            "DEMO_TRAFFIC": os.environ.get("DEMO_TRAFFIC", "1"),
            "DJANGO_ALLOWED_HOSTS": allowed_hosts(host),
        }
        bin_dir = Path(sys.executable).parent
        commands = {
            "web": [
                str(bin_dir / "gunicorn"),
                "config.wsgi",
                "--bind",
                f"{host}:{port}",
                "--workers",
                "2",
                "--threads",
                "4",
                "--access-logfile",
                "-",
            ],
            # Work someone waits for (passes, what-if runs, exception activations) has
            # a worker of its own; periodic and demo work another (config.celery).
            "worker": [
                str(bin_dir / "celery"),
                "-A",
                "config",
                "worker",
                "--hostname",
                "scheduler@%h",
                "--loglevel",
                "INFO",
                "--concurrency",
                "2",
                "--queues",
                "interactive",
            ],
            "background": [
                str(bin_dir / "celery"),
                "-A",
                "config",
                "worker",
                "--hostname",
                "background@%h",
                "--loglevel",
                "INFO",
                "--concurrency",
                "1",
                "--queues",
                "celery,demo",
            ],
            # Jobs of the process executor hold a worker slot while their subprocess
            # runs, so they get workers of their own, one queue per instance type; a
            # threads pool, so a job's process is a child of the worker process itself.
            "runner": [
                str(bin_dir / "celery"),
                "-A",
                "config",
                "worker",
                "--hostname",
                "runner@%h",
                "--loglevel",
                "INFO",
                "--pool",
                "threads",
                "--concurrency",
                "4",
                "--queues",
                ",".join(instances_queue(t.name) for t in InstanceType.objects.all()),
            ],
            # The executors' own commands (Slurm's: submissions, notices, its
            # reconciliation) on a worker of their own when a queue needs one, so a
            # cluster that does not answer never holds up another queue's pass.
            **self._executor_workers(bin_dir),
            "beat": [
                str(bin_dir / "celery"),
                "-A",
                "config",
                "beat",
                "--loglevel",
                "INFO",
                "--schedule",
                str(Path(settings.VAR_DIR) / "celerybeat-schedule"),
            ],
        }
        # The local demo only: run as root (a container, a throwaway machine), the runner
        # may run the demo's jobs as root; a deployment sets RUNNER_USER instead. Jobs get
        # no network where the machine allows it; where it does not (no user namespaces
        # for an unprivileged account), they run on the machine's rather than not at all.
        # The same for the demo's Slurm queue (slurm-lab), whose submitter is a worker.
        env = {"SLURM_ALLOW_ROOT": "1", **env}
        runner_env = {**env, "RUNNER_ALLOW_ROOT": "1", "RUNNER_ALLOW_HOST_NETWORK": "1"}
        processes: dict[str, subprocess.Popen] = {}

        def stop(*_):
            self.stdout.write("\nStopping the web server, workers and beat…")
            # Each main process shuts its own children down; whatever is left after the
            # deadline is killed with its whole process group.
            for proc in processes.values():
                if proc.poll() is None:
                    proc.terminate()
            deadline = time.monotonic() + 15
            for proc in processes.values():
                try:
                    proc.wait(timeout=max(0.1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
            sys.exit(0)

        signal.signal(signal.SIGINT, stop)
        signal.signal(signal.SIGTERM, stop)

        self._wait_for_static(collect, logs / "collectstatic.log")
        self.stdout.write(f"Starting the web server (logs in {logs})…")
        processes["web"] = self._start(commands.pop("web"), env=env, log=logs / "web.log")
        # The dashboard's history, while the web server starts. Its one long write
        # transaction would hold SQLite's lock past the workers' timeout, so they start
        # after it.
        self.stdout.write("Replaying three months of Philly workload for the dashboard…")
        call_command("seed_demo", months=3, verbosity=0, stdout=open(os.devnull, "w"))  # noqa: SIM115
        self.stdout.write("Starting the workers and beat…")
        processes.update(
            {
                name: self._start(
                    cmd, env=runner_env if name == "runner" else env, log=logs / f"{name}.log"
                )
                for name, cmd in commands.items()
            }
        )

        if not self._wait_until_up(url + "healthz/", processes["web"]):
            self.stderr.write(f"The web server did not come up; see {logs / 'web.log'}.")
            stop()
        self._banner(url, seconds=time.monotonic() - started, logs=logs, outbox=outbox)
        while True:
            for name, proc in processes.items():
                if proc.poll() is not None:
                    self.stderr.write(
                        f"The {name} process exited ({proc.returncode}); see "
                        f"{logs / (name + '.log')}. Stopping."
                    )
                    stop()
            time.sleep(1)

    def _wait_for_static(self, collect: subprocess.Popen, log: Path) -> None:
        """The web server must start after the collection: a process that started
        before it names plain, uncompressed files for its whole life."""
        try:
            failed = collect.wait(timeout=120) != 0
        except subprocess.TimeoutExpired:
            collect.kill()
            failed = True
        if failed:
            self.stderr.write(
                f"Collecting the static files failed (see {log}); they are served "
                "uncompressed instead."
            )

    @staticmethod
    def _start(cmd, *, env, log: Path) -> subprocess.Popen:
        """A process of the demo, its output (stdout and stderr) appended to `log`."""
        with open(log, "ab") as out:
            return subprocess.Popen(
                cmd,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def _wait_until_up(self, url, web, timeout=60):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if web.poll() is not None:
                return False
            try:
                with urllib.request.urlopen(url, timeout=2) as response:
                    if response.status == 200:
                        return True
            except OSError:
                time.sleep(0.5)
        return False

    def _banner(self, url, *, seconds: float, logs: Path, outbox: Path):
        lines = [
            "",
            f"Quota governance demo is running (ready in {seconds:.0f} s).",
            f"  Open {url}",
            "  Log in as:",
        ]
        for user in DEMO_USERS:
            role = f"({user.role})"
            lines.append(f"    {user.username:<8} {role:<19} password: {demo_password()}")
        lines += [
            f"  E-mails the demo sends: {url}outbox/ (log in as admin), files in {outbox}/",
            f"  Logs: {logs}/",
            "  Press Ctrl-C to stop the web server, workers and beat.",
        ]
        self.stdout.write(self.style.SUCCESS("\n".join(lines)))


def seed_slurm_demo_queue(conf: str) -> None:
    from django.contrib.auth import get_user_model

    users = get_user_model().objects.in_bulk(["admin", "lead"], field_name="username")
    seed_slurm_demo(actor=users["admin"], lead=users.get("lead"), conf=conf)
