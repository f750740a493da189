"""The Celery app's wiring. Periodic tasks are declared here, in one place, and so are
the queues every task goes to.

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
- `executor.slurm`: the Slurm executor's commands (its `worker_queue`): submissions,
  notices and its reconciliation (`scheduler.executor_start`, `executor_stop` and
  `executor_reconcile_one`, sent there by the executor and the periodic
  `scheduler.executor_reconcile`). Each Slurm command is bounded by
  SLURM_COMMAND_TIMEOUT, but a cluster that does not answer holds a worker slot that
  long per command: on a queue of their own, those waits hold only that queue's
  workers, and a pass of any other queue starts its jobs as fast as without the outage.
  A deployment with Slurm queues runs a worker for it (docker-compose.yml `slurm`);
  `make demo` starts one when a queue runs on Slurm (the executors' worker queues in
  use, scheduler.executors.worker_queues_in_use).

Workers name the queues they consume (`--queues`); a worker started without names
consumes `interactive`, `celery`, `demo` and `executor.slurm`.

Also declared here: the beat schedule (`beat_schedule`), whose messages coalesce
(core.celery.CoalescingTask). The app itself, the lookup of a task by name and the retry
policy are core.celery's, below the apps that use them; this module is the entry of the
workers and beat (`celery -A config`), and it imports no app: it names the apps' tasks
and packages only as strings.
"""

from celery.schedules import crontab
from kombu import Queue

from core.celery import app, periodic

INTERACTIVE_QUEUE = "interactive"
BACKGROUND_QUEUE = "celery"
DEMO_QUEUE = "demo"
SLURM_QUEUE = "executor.slurm"  # scheduler.executors.slurm's worker_queue

app.autodiscover_tasks()
# The governance app keeps its tasks in its feature packages.
app.autodiscover_tasks(
    ["governance.exceptions", "governance.dashboards", "governance.whatif", "governance.directory"]
)

app.conf.task_default_queue = BACKGROUND_QUEUE
app.conf.task_queues = (
    Queue(INTERACTIVE_QUEUE),
    Queue(BACKGROUND_QUEUE),
    Queue(DEMO_QUEUE),
    Queue(SLURM_QUEUE),
)
app.conf.task_routes = {
    "scheduler.run_pass": {"queue": INTERACTIVE_QUEUE},
    # A start decided is waited for: handed to its executor at once, as a pass is. An
    # executor with a worker queue of its own (Slurm) sends them there instead.
    "scheduler.executor_start": {"queue": INTERACTIVE_QUEUE},
    "scheduler.executor_stop": {"queue": INTERACTIVE_QUEUE},
    # The names of the two before them, for the messages queued under them (one release).
    "scheduler.slurm_submit": {"queue": SLURM_QUEUE},
    "scheduler.slurm_notice": {"queue": SLURM_QUEUE},
    # Start estimates of a big queue take a second or more: background work, so they
    # never hold up a pass; pages show the last forecast "as of" its instant meanwhile.
    "scheduler.estimate_queue": {"queue": BACKGROUND_QUEUE},
    "governance.whatif.run": {"queue": INTERACTIVE_QUEUE},
    "governance.exceptions.activate": {"queue": INTERACTIVE_QUEUE},
    "governance.exceptions.expire": {"queue": INTERACTIVE_QUEUE},
    "scheduler.demo_traffic": {"queue": DEMO_QUEUE},
}


def beat_schedule(settings) -> dict:
    """Every periodic task. Messages of a task closer than half its period to the last
    one that ran are dropped by the worker, so a busy or stopped worker never works
    through a backlog of them, whatever its clock says."""
    tick = float(settings.SCHEDULER_TICK_SECONDS)
    sweep = float(settings.JOB_SWEEP_SECONDS)
    exceptions = float(settings.EXCEPTIONS_SWEEP_SECONDS)
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
        # the database: one task per executor, on its own worker queue.
        "executor-reconcile": {
            "task": "scheduler.executor_reconcile",
            "schedule": float(settings.EXECUTOR_RECONCILE_SECONDS),
            "options": periodic(float(settings.EXECUTOR_RECONCILE_SECONDS)),
        },
        # Every minute: an exception's window starts or ends at most a minute late.
        "exceptions-sweep": {
            "task": "governance.exceptions.sweep",
            "schedule": exceptions,
            "options": periodic(exceptions),
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
