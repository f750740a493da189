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
- `demo`: the demo's traffic generator, bounded (its beat messages expire).
- `instances.<type>`: runs of the process executor (scheduler.executors), one queue
  per instance type, for the runner workers.

Workers name the queues they consume (`--queues`); a worker started without names
consumes `interactive`, `celery` and `demo`.
"""

import os

from celery import Celery
from kombu import Queue

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "governance.settings")

INTERACTIVE_QUEUE = "interactive"
BACKGROUND_QUEUE = "celery"
DEMO_QUEUE = "demo"

app = Celery("governance")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()

app.conf.task_default_queue = BACKGROUND_QUEUE
app.conf.task_queues = (Queue(INTERACTIVE_QUEUE), Queue(BACKGROUND_QUEUE), Queue(DEMO_QUEUE))
app.conf.task_routes = {
    "scheduler.run_pass": {"queue": INTERACTIVE_QUEUE},
    # Start estimates of a big queue take a second or more: background work, so they
    # never hold up a pass; pages show the last forecast "as of" its instant meanwhile.
    "scheduler.estimate_queue": {"queue": BACKGROUND_QUEUE},
    "governance.whatif.run": {"queue": INTERACTIVE_QUEUE},
    "governance.exceptions.activate": {"queue": INTERACTIVE_QUEUE},
    "governance.exceptions.expire": {"queue": INTERACTIVE_QUEUE},
    "scheduler.demo_traffic": {"queue": DEMO_QUEUE},
}

app.conf.beat_schedule = {}
