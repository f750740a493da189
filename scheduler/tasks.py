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
  after commit; `scheduler.executor_reconcile()`: periodic; every executor that
  reconciles on the tick brings what really runs into the database.

Retries: the project's policy (core.celery.retry_policy: only transient database
errors, with backoff). Periodic tasks are declared with every other in config/celery.py.
"""

from __future__ import annotations

from celery import shared_task
from django.conf import settings

from core.celery import retry_policy
from fleet.models import Job, JobQueue

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


@shared_task(name="scheduler.executor_reconcile", acks_late=True, ignore_result=True, **RETRY)
def executor_reconcile() -> dict:
    from django.utils import timezone

    from scheduler.executors import registered

    now = timezone.now()
    reports = {executor.name: executor.reconcile(now) for executor in registered()}
    return {name: report for name, report in reports.items() if report is not None}


# The names these tasks had when one executor had them: kept registered for one release
# so that messages already queued under them are not lost (remove in the next one).
@shared_task(name="scheduler.slurm_submit", ignore_result=True)
def slurm_submit(runs: list) -> list[str]:
    return executor_start("slurm", runs)


@shared_task(name="scheduler.slurm_notice", ignore_result=True)
def slurm_notice(job_ids: list) -> int:
    return executor_stop("slurm", job_ids)


@shared_task(name="scheduler.slurm_reconcile", acks_late=True, ignore_result=True, **RETRY)
def slurm_reconcile() -> dict:
    return executor_reconcile()
