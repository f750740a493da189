"""Celery tasks of the live scheduler: thin, named, taking ids, idempotent.

- `scheduler.run_pass(queue_id)`: one scheduling pass. Running it twice changes
  nothing the second time (the engine reaches a fixed point and the pass holds the
  queue's lock), so it is safe to deliver twice and `acks_late`.
- `scheduler.tick()`: periodic; asks for a pass of every queue with live jobs
  (simulated jobs finish there, and a lost message is repaired there).

Passes (like what-if runs and exception activations) go to the `interactive` Celery
queue, which nothing periodic or bulky shares (routes in config/celery.py), and
requests for a pass coalesce (`scheduler.services.passes.request_pass`): at most one
pass message per queue waits, however many submissions arrive.
- `scheduler.estimate_queue(queue_id)`: the queue's start estimates, forecast again
  after a pass (if the queue changed) or a read of an old forecast; stored in the
  shared cache for pages and the API (`scheduler.services.estimates`). Coalesced too.
- `scheduler.sweep()`: periodic; requeues runs of process queues whose lease expired
  (their runner stopped renewing it) or that no runner claimed in time, and stops the
  runs with notice whose runner never reported the exit by their grace plus the kill
  margin.
- `scheduler.notify_runs(job_ids)`: nothing but a nudge. The runs named got notice
  (STOPPING); a runner that runs one renews its lease at once and so learns it.
- `scheduler.run_job(job_id, attempt)`: the process executor's run, routed to the
  Celery queue of the job's instance type; the run is claimed once, under a lease.
- `scheduler.executor_start(executor, runs)`, `scheduler.executor_stop(executor,
  job_ids)`: an executor's launch of the runs a pass started and its notice, nudges
  after commit, sent to the executor's own worker queue when it has one (`worker_queue`,
  Slurm's `executor.slurm`: a cluster that does not answer holds only those workers);
  `scheduler.executor_reconcile()`: periodic; fans out one
  `scheduler.executor_reconcile_one(executor)` per reconciling executor a queue uses, to
  that executor's worker queue (the background queue for one without), at most one
  waiting per executor, so one executor's failure or slowness neither skips nor delays
  another's.

Retries: the project's policy (core.celery.retry_policy: only transient database
errors, with backoff). Periodic tasks are declared with every other in config/celery.py.
"""

from __future__ import annotations

import logging

from celery import shared_task
from django.conf import settings

from core.celery import retry_policy
from fleet.models import Job, JobQueue

logger = logging.getLogger(__name__)
RETRY = retry_policy()


@shared_task(name="scheduler.run_pass", acks_late=True, **RETRY)
def run_pass(queue_id: int) -> dict:
    from scheduler.services.estimates.store import request_estimates
    from scheduler.services.passes import pass_request_taken, scheduling_pass

    # Before reading anything: a request from now on needs a pass after this one.
    pass_request_taken(queue_id)
    try:
        outcome = scheduling_pass(queue_id=queue_id)
    except JobQueue.DoesNotExist:
        return {"queue": queue_id, "skipped": "no such queue"}
    request_estimates(queue_id)  # coalesced; recomputed only if the queue changed
    return {
        "queue": queue_id,
        "finished": len(outcome.finished),
        "started": len(outcome.started),
        "preempted": len(outcome.preempted),
        "failed": len(outcome.failed),
    }


@shared_task(name="scheduler.estimate_queue", acks_late=True, ignore_result=True, **RETRY)
def estimate_queue(queue_id: int) -> str:
    from scheduler.services.estimates.store import refresh_estimates

    return refresh_estimates(queue_id)


@shared_task(name="scheduler.tick", acks_late=True, ignore_result=True)
def tick() -> None:
    from scheduler.services.passes import send_pass
    from scheduler.services.runners import scheduler_ticked

    # /healthz/ reads the scheduler's liveness from the last tick.
    scheduler_ticked()
    queue_ids = (
        Job.objects.filter(state__in=Job.LIVE_STATES)
        .order_by("queue_id")
        .values_list("queue_id", flat=True)
        .distinct()
    )
    for queue_id in queue_ids:
        send_pass(queue_id)  # coalesced: no second message while one waits


@shared_task(name="scheduler.sweep", acks_late=True, **RETRY)
def sweep() -> list[int]:
    from scheduler.services.runs import jobs_requeue_lost, jobs_stop_overdue

    timeout = float(getattr(settings, "JOB_HEARTBEAT_TIMEOUT", 30))
    return jobs_requeue_lost(claim_timeout=timeout) + jobs_stop_overdue()


# Not acks_late: a run is claimed in the database, and a run whose runner died is
# requeued by the sweep once its lease expired, so a redelivery would only find it
# claimed.
@shared_task(name="scheduler.run_job")
def run_job(job_id: int, attempt: int) -> str:
    from scheduler.executors.process.run import run_job as run

    return run(job_id, attempt)


# The executors' own work, one task each, by executor name (scheduler.executors): a start
# and a notice are nudges after commit; the reconciliation, on its own beat entry,
# repairs a lost one and brings what really runs into the database.
@shared_task(name="scheduler.executor_start", ignore_result=True)
def executor_start(executor: str, runs: list) -> list[str]:
    from scheduler.executors import executor_named

    return executor_named(executor).start([(int(job), int(attempt)) for job, attempt in runs])


@shared_task(name="scheduler.executor_stop", ignore_result=True)
def executor_stop(executor: str, job_ids: list) -> int:
    from scheduler.executors import executor_named

    return executor_named(executor).stop([int(pk) for pk in job_ids])


# How long a reconciliation asked of an executor is taken to wait in its queue: past it
# (the message was lost, or its workers are away) the next tick asks again.
RECONCILE_WAIT_STALE = 30


def _reconcile_key(executor: str) -> str:
    return f"executor-reconcile-waits:{executor}"


@shared_task(name="scheduler.executor_reconcile", ignore_result=True)
def executor_reconcile() -> list[str]:
    """Periodic: ask each reconciling executor that a queue uses for one reconciliation,
    on its own worker queue (`worker_queue`), so that one executor's failure or
    slowness (a cluster that does not answer) neither skips nor delays another's. At
    most one request per executor waits (the liveness cache; without it, ask anyway):
    an executor whose workers are slow or away gets no backlog of them."""
    from core.cache import liveness_cache
    from scheduler.executors import executor_named, executor_names

    in_use = set(
        JobQueue.objects.filter(executor__in=executor_names(reconciles=True))
        .values_list("executor", flat=True)
        .distinct()
    )
    asked = []
    for name in sorted(in_use):
        executor = executor_named(name)
        try:
            waiting = not liveness_cache().add(_reconcile_key(name), 1, RECONCILE_WAIT_STALE)
        except Exception:  # noqa: BLE001 - no cache: ask rather than skip
            waiting = False
        if waiting:
            continue
        options = {"queue": executor.worker_queue} if executor.worker_queue else {}
        try:
            executor_reconcile_one.apply_async((name,), ignore_result=True, retry=False, **options)
        except Exception:  # noqa: BLE001 - any broker failure: the next tick asks again
            _reconcile_taken(name)
            logger.warning("could not ask executor %s to reconcile", name, exc_info=True)
            continue
        asked.append(name)
    return asked


def _reconcile_taken(name: str) -> None:
    from core.cache import liveness_cache

    try:
        liveness_cache().delete(_reconcile_key(name))
    except Exception:  # noqa: BLE001 - the mark expires by itself
        logger.debug("could not clear the reconcile mark of %s", name, exc_info=True)


@shared_task(name="scheduler.executor_reconcile_one", acks_late=True, ignore_result=True, **RETRY)
def executor_reconcile_one(executor: str) -> dict | None:
    """One executor's reconciliation, on its worker queue: what really runs, brought
    into the database."""
    from django.utils import timezone

    from scheduler.executors import executor_named

    _reconcile_taken(executor)  # a tick from now on asks for the next one
    return executor_named(executor).reconcile(timezone.now())


# The names these tasks had when one executor had them: kept registered for one release
# so that messages already queued under them are not lost (remove in the next one).
@shared_task(name="scheduler.slurm_submit", ignore_result=True)
def slurm_submit(runs: list) -> list[str]:
    return executor_start("slurm", runs)


@shared_task(name="scheduler.slurm_notice", ignore_result=True)
def slurm_notice(job_ids: list) -> int:
    return executor_stop("slurm", job_ids)


@shared_task(name="scheduler.slurm_reconcile", acks_late=True, ignore_result=True, **RETRY)
def slurm_reconcile() -> list[str]:
    return executor_reconcile()
