"""The Celery app. Periodic tasks are declared here, in one place, and so are the
queues every task goes to.

- `interactive`: work someone waits for on a page: scheduling passes (a submission
  starts within a second), what-if runs, exception activations and expiries. Nothing
  periodic or bulky goes there, and passes coalesce (at most one waiting per job
  queue), so it never holds a backlog.
- `celery` (the default): periodic and background work: the scheduler's tick and
  sweep, the exceptions sweep, start estimates of waiting jobs (scheduler.services.
  estimates: pages show the last forecast "as of" its instant until the next is
  stored), dashboard rollups and the monthly pack.
- `demo`: the demo's traffic generator, bounded (its beat messages coalesce).
- `instances.<type>`: runs of the executors that need a runner (scheduler.executors), one queue
  per instance type, for the runner workers.

Workers name the queues they consume (`--queues`); a worker started without names
consumes `interactive`, `celery` and `demo`.

Also declared here, once for every app: the retry policy of tasks (`retry_policy`) and
the beat schedule (`beat_schedule`), whose messages coalesce (`Task.before_start`).
"""

import os

from celery import Celery, Task
from celery.exceptions import Ignore
from celery.schedules import crontab
from django.db import OperationalError
from kombu import Queue

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

INTERACTIVE_QUEUE = "interactive"
BACKGROUND_QUEUE = "celery"
DEMO_QUEUE = "demo"

PERIODIC_HEADER = "periodic_seconds"


class CoalescingTask(Task):
    """Every task of the app. A periodic message (beat sends it with the
    `periodic_seconds` header) runs only if no message of the same task ran in the last
    half period (in whole seconds): a worker that was stopped or busy works through a
    backlog of beat messages as no-ops instead of running each. This replaces Celery's
    `expires`, an absolute time computed on the sender's clock and compared on the
    worker's, which made a worker whose clock is ahead drop every beat message. The
    half period is measured by the liveness cache (Redis: its own clock, one for every
    process; the demo's files: its one machine). If the cache cannot answer, the task
    runs."""

    def before_start(self, task_id, args, kwargs):
        # A worker's request carries message headers as attributes; `apply` (eager) in
        # `headers`.
        headers = self.request.headers or {}
        period = getattr(self.request, PERIODIC_HEADER, None) or headers.get(PERIODIC_HEADER)
        # Whole seconds (Redis's expiry): a task due more often than every 2 s does not
        # coalesce, and its backlog is worked through (the sweep: cheap, idempotent).
        window = int(float(period or 0) // 2)
        if window < 1:
            return
        from scheduler.liveness import tick_cache

        try:
            first = tick_cache().add(f"periodic:{self.name}", task_id, timeout=window)
        except Exception:  # noqa: BLE001 - no cache: run rather than drop
            return
        if not first:
            raise Ignore()


app = Celery("governance", task_cls=CoalescingTask)
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
# The governance app keeps its tasks in its feature packages.
app.autodiscover_tasks(
    ["governance.exceptions", "governance.dashboards", "governance.whatif", "governance.directory"]
)


def task(name: str):
    """The registered task called `name`. Code that enqueues a task (services, executors)
    looks it up here instead of importing its module, which imports services in turn.
    Every process imports the task modules at start (the apps' `ready()`; workers also
    autodiscover them), and an eager test run still runs the task in-process."""
    return app.tasks[name]


app.conf.task_default_queue = BACKGROUND_QUEUE
app.conf.task_queues = (Queue(INTERACTIVE_QUEUE), Queue(BACKGROUND_QUEUE), Queue(DEMO_QUEUE))
app.conf.task_routes = {
    "scheduler.run_pass": {"queue": INTERACTIVE_QUEUE},
    # A start decided is waited for: handed to its executor at once, as a pass is.
    "scheduler.executor_start": {"queue": INTERACTIVE_QUEUE},
    "scheduler.executor_stop": {"queue": INTERACTIVE_QUEUE},
    # The names of the two before them, for the messages queued under them (one release).
    "scheduler.slurm_submit": {"queue": INTERACTIVE_QUEUE},
    "scheduler.slurm_notice": {"queue": INTERACTIVE_QUEUE},
    # Start estimates of a big queue take a second or more: background work, so they
    # never hold up a pass; pages show the last forecast "as of" its instant meanwhile.
    "scheduler.estimate_queue": {"queue": BACKGROUND_QUEUE},
    "governance.whatif.run": {"queue": INTERACTIVE_QUEUE},
    "governance.exceptions.activate": {"queue": INTERACTIVE_QUEUE},
    "governance.exceptions.expire": {"queue": INTERACTIVE_QUEUE},
    "scheduler.demo_traffic": {"queue": DEMO_QUEUE},
}

# The exceptions sweep's period: a window starts or ends at most this late.
EXCEPTIONS_SWEEP_SECONDS = 60.0


def retry_policy(*transient: type[Exception], patient: bool = False) -> dict:
    """The task options of the project's one retry policy: retry only transient errors
    (the database was busy or dropped the connection, and whatever else the task names,
    such as a version conflict), with exponential backoff and jitter, at most five times.
    Anything else is a bug or a rule, and retrying would not help. Work someone waits for
    retries within seconds; `patient` background work (rollups, the pack) waits minutes.
    """
    return {
        "autoretry_for": (OperationalError, *transient),
        "retry_backoff": 30 if patient else 2,
        "retry_backoff_max": 600 if patient else 60,
        "max_retries": 5,
    }


def periodic(seconds: float) -> dict:
    """The options of a periodic message: it coalesces (`CoalescingTask`)."""
    return {"headers": {PERIODIC_HEADER: seconds}}


def beat_schedule(settings) -> dict:
    """Every periodic task. Messages of a task closer than half its period to the last
    one that ran are dropped by the worker, so a busy or stopped worker never works
    through a backlog of them, whatever its clock says."""
    tick = float(settings.SCHEDULER_TICK_SECONDS)
    sweep = float(settings.JOB_SWEEP_SECONDS)
    schedule = {
        # The scheduler: passes of queues with live jobs, and runs whose runner is gone
        # (often: a dead runner's runs are requeued within seconds).
        "scheduler-tick": {
            "task": "scheduler.tick",
            "schedule": tick,
            "options": periodic(tick),
        },
        "scheduler-sweep": {
            "task": "scheduler.sweep",
            "schedule": sweep,
            "options": periodic(sweep),
        },
        # What each executor that reconciles on the tick really runs, compared with
        # the database.
        "executor-reconcile": {
            "task": "scheduler.executor_reconcile",
            "schedule": float(settings.EXECUTOR_RECONCILE_SECONDS),
            "options": periodic(float(settings.EXECUTOR_RECONCILE_SECONDS)),
        },
        # Every minute: an exception's window starts or ends at most a minute late.
        "exceptions-sweep": {
            "task": "governance.exceptions.sweep",
            "schedule": EXCEPTIONS_SWEEP_SECONDS,
            "options": periodic(EXCEPTIONS_SWEEP_SECONDS),
        },
        # Every 15 minutes: the dashboard's figures are at most a quarter of an hour old.
        "dashboard-rollups": {
            "task": "governance.dashboard.refresh_rollups",
            "schedule": 15 * 60.0,
            "options": periodic(15 * 60.0),
        },
        # Directory users: roles, teams and API tokens follow the directory (LDAP, and
        # OIDC through refresh tokens) at most DIRECTORY_SYNC_MINUTES after it changed,
        # logins or not.
        "directory-sync": {
            "task": "governance.directory.sync",
            "schedule": settings.DIRECTORY_SYNC_MINUTES * 60.0,
            "options": periodic(settings.DIRECTORY_SYNC_MINUTES * 60.0),
        },
        # The first of each month, 06:00 UTC: last month, with its late events counted.
        "dashboard-monthly-pack": {
            "task": "governance.dashboard.monthly_pack",
            "schedule": crontab(minute=0, hour=6, day_of_month=1),
        },
    }
    if settings.DEMO_TRAFFIC:
        # The demo keeps jobs flowing through its sample queue (make demo turns it on).
        schedule["demo-traffic"] = {
            "task": "scheduler.demo_traffic",
            "schedule": 10.0,
            "options": periodic(10.0),
        }
    return schedule


@app.on_after_configure.connect
def _declare_beat_schedule(sender, **kwargs):
    from django.conf import settings

    sender.conf.beat_schedule = beat_schedule(settings)
