"""The Celery app and what every app's tasks share: the task class (periodic messages
coalesce), the lookup of a task by name, and the one retry policy. The apps import these
from here; the app's wiring (its queues, routes, the feature packages it discovers and the
beat schedule) is the project's: config/celery.py, also the entry of the workers and beat
(`celery -A config`).
"""

import os

from celery import Celery, Task
from celery.exceptions import Ignore
from django.db import OperationalError

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

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
        from core.cache import liveness_cache

        try:
            first = liveness_cache().add(f"periodic:{self.name}", task_id, timeout=window)
        except Exception:  # noqa: BLE001 - no cache: run rather than drop
            return
        if not first:
            raise Ignore()


app = Celery("governance", task_cls=CoalescingTask)
app.config_from_object("django.conf:settings", namespace="CELERY")


def task(name: str):
    """The registered task called `name`. Code that enqueues a task (services, executors)
    looks it up here instead of importing its module, which imports services in turn.
    Every process imports the task modules at start (the apps' `ready()`; workers also
    autodiscover them), and an eager test run still runs the task in-process."""
    return app.tasks[name]


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
