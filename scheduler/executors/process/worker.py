"""A Celery worker as a runner: the worker signals that make it one.

A worker is a runner when it consumes `instances.<type>` queues. Such a worker
- refuses to start when jobs would run as root (`job_account` says why) and makes
  itself non-dumpable, so a job under the same account cannot read its environment
  through /proc (`worker_init`);
- checks that its job account can execute the interpreter and every registered
  program of its instance types and that it can isolate jobs' network
  (`sandbox_check`), logs what it cannot do and records it on its Runner row, where
  `/healthz/` reports it;
- registers with the instance types it serves and beats from a thread of its own every
  `RUNNER_BEAT_SECONDS`, retrying after database errors, each beat with its clock's
  offset from the database's (`worker_ready`, kept in `process.clock` for the exit
  records) and retrying the exit reports its runs could not make (`report_pending`);
- probes at each beat that it can write its checkpoint root (a small file written,
  synced, removed: `run_area.checkpoint_write_problem`); while it cannot (full,
  read-only) it records the problem on its row (`/healthz/` says "degraded") and stops
  consuming its instance types' queues (Celery's `cancel_consumer`, sent to itself), so
  no job starts on it and it serves no instance type; once it can write again it
  consumes them again and the problem is cleared;
- on PostgreSQL, holds its liveness lock from another thread, on a connection of its
  own, for its whole life, and confirms it every `RUNNER_LIVENESS_CHECK_SECONDS`
  (`process.liveness`): when the process dies the lock is free at once, and the sweep
  requeues its runs within seconds (scheduler.services.runs). A lost connection is
  replaced at once (retried every 0.1 s), so a database restart of a few seconds stops
  nothing (see `process.run`, "Liveness");
- on shutdown (warm: SIGTERM or Ctrl-C) tells its runs to stop their processes and
  give the jobs back, and marks itself stopped (`worker_shutting_down`,
  `worker_shutdown`).

Runners must use the `threads` (or `solo`) pool: a run's process is a child of the
worker process itself, so the worker's death reaches it (see `process`).
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
import time

from celery import signals
from celery.worker.control import control_command

from scheduler.executors.process import run as process
from scheduler.executors.process import sandbox_check
from scheduler.executors.run_area import JobAccount, checkpoint_write_problem
from scheduler.liveness import (
    database_clock_offset,
    liveness_check_seconds,
    runner_beat_seconds,
    uses_liveness_lock,
)
from scheduler.services import runners
from scheduler.services.runner_problems import runner_problems_record

logger = logging.getLogger(__name__)

RETAKE_SECONDS = 0.1


class _Registration:
    def __init__(self, name: str, instance_types: list[str], consumer):
        self.name = name
        self.hostname = socket.gethostname()
        self.pid = os.getpid()
        self.instance_types = instance_types
        self.consumer = consumer
        self.stop = threading.Event()
        # Set once the runs are over (worker_shutdown): the lock is held until then.
        self.release = threading.Event()
        self.thread = threading.Thread(target=self.loop, name="runner-beat", daemon=True)
        self.liveness_thread = threading.Thread(
            target=self.hold_liveness_lock, name="runner-liveness", daemon=True
        )
        # The checkpoint root's problem (None: writable) and the queues it stopped.
        self.disk_problem: str | None = None
        self.paused_queues: list[str] = []

    def current_types(self) -> list[str]:
        # Queues added or cancelled at run time (celery control add_consumer) count.
        with contextlib.suppress(Exception):
            queues = self.consumer.task_consumer.queues
            return runners.instance_types_of_queues(q.name for q in queues)
        return self.instance_types

    def loop(self) -> None:
        from django.db import connection

        interval = runner_beat_seconds()
        first = True
        while True:
            try:
                self.check_checkpoint_root(first)
                fields = {
                    "name": self.name,
                    "hostname": self.hostname,
                    "pid": self.pid,
                    "instance_types": self.current_types(),
                    "clock_offset": database_clock_offset(),
                }
                process.clock.offset = fields["clock_offset"]
                if first:
                    runners.runner_register(**fields)
                    self.record_problems()
                    first = False
                    if uses_liveness_lock():
                        self.liveness_thread.start()
                else:
                    runners.runner_beat(**fields)
                process.report_pending()
            except Exception as error:  # noqa: BLE001 - a beat that fails is retried
                logger.warning("runner %s: beat failed (%s); retrying", self.name, error)
                with contextlib.suppress(Exception):
                    connection.close()
                if self.stop.wait(min(1.0, interval)):
                    break
                continue
            if self.stop.wait(interval):
                break
        with contextlib.suppress(Exception):
            runners.runner_stopped(name=self.name, pid=self.pid)
        with contextlib.suppress(Exception):
            connection.close()

    def record_problems(self) -> None:
        problems = [*_problems, *([self.disk_problem] if self.disk_problem else [])]
        runner_problems_record(name=self.name, pid=self.pid, problems=problems)

    def check_checkpoint_root(self, first: bool) -> None:
        """Probe the checkpoint root; stop or resume serving when its state changed."""
        problem = checkpoint_write_problem()
        if problem == self.disk_problem:
            return
        if problem is not None:
            logger.error("runner %s: %s; it stops taking jobs", self.name, problem)
            self.paused_queues = [
                f"{runners.INSTANCES_PREFIX}{itype}" for itype in self.current_types()
            ]
            for queue in self.paused_queues:
                self.consumer.app.control.cancel_consumer(queue, destination=[self.name])
        else:
            logger.info("runner %s: the checkpoint root is writable; it takes jobs", self.name)
            for queue in self.paused_queues:
                self.consumer.app.control.add_consumer(queue, destination=[self.name])
            self.paused_queues = []
        self.disk_problem = problem  # after the broker took it: a failure is retried
        if not first:
            self.record_problems()

    def hold_liveness_lock(self) -> None:
        """Take the liveness lock and confirm, every check, that this thread's
        connection (which holds it) still works; after an error, a new connection takes
        it again. Each confirmation counts from when its query was sent."""
        from django.db import connection

        interval = liveness_check_seconds()
        held = False
        while not self.release.is_set():
            sent = time.monotonic()
            try:
                if not held:
                    held = runners.runner_take_liveness_lock(
                        name=self.name, hostname=self.hostname, pid=self.pid
                    )
                    if held:
                        logger.info("runner %s: holds its liveness lock", self.name)
                else:
                    held = runners.runner_liveness_confirmed()
                if held:
                    process.liveness.confirm(sent)
            except Exception as error:  # noqa: BLE001 - the lock is taken again
                logger.warning("runner %s: liveness lock lost (%s)", self.name, error)
                held = False
                with contextlib.suppress(Exception):
                    connection.close()
            # Not held: take it again at once, on a new connection.
            self.release.wait(interval if held else min(interval, RETAKE_SECONDS))
        with contextlib.suppress(Exception):
            connection.close()  # releases the lock


_registration: _Registration | None = None
# What the start-up check found this runner cannot do (`check_sandbox`).
_problems: list[str] = []


def _served(app) -> list[str]:
    return runners.instance_types_of_queues(app.amqp.queues.consume_from)


@signals.worker_init.connect
def refuse_unsafe_runner(sender=None, **kwargs) -> None:
    if not _served(sender.app):
        return
    try:
        account = process.job_account()
    except process.RunnerRefused as refusal:
        logger.critical("runner refuses to start: %s", refusal)
        raise SystemExit(f"runner refuses to start: {refusal}") from None
    process.protect_runner_memory()
    logger.info(
        "runner: jobs run as %s", account.name or f"the runner's own account (uid {os.geteuid()})"
    )
    check_sandbox(account, _served(sender.app))


def check_sandbox(account: JobAccount, instance_types: list[str]) -> None:
    """What this runner cannot do for its jobs, logged now and recorded on its row
    when it registers; a failing check is itself a problem, never a crash."""
    try:
        found = sandbox_check.runner_problems(account=account, instance_types=instance_types)
    except Exception as error:  # noqa: BLE001 - the runner still starts and says so
        logger.exception("runner: the sandbox check failed")
        found = [f"the runner's sandbox check failed: {type(error).__name__}: {error}"]
    _problems[:] = found
    for problem in found:
        logger.error("runner: %s", problem)


@signals.worker_ready.connect
def register_runner(sender=None, **kwargs) -> None:
    global _registration
    types = _served(sender.app)
    if not types:
        return
    _registration = _Registration(sender.hostname, types, sender)
    _registration.thread.start()


@signals.worker_shutting_down.connect
def stop_runs(sender=None, **kwargs) -> None:
    # Only flags here (this runs in a signal handler): each run's own thread stops its
    # process and gives the job back; the beat thread marks the runner stopped.
    process.shutting_down.set()
    if _registration is not None:
        _registration.stop.set()


@signals.worker_shutdown.connect
def wait_for_stopped_mark(sender=None, **kwargs) -> None:
    if _registration is not None:
        _registration.stop.set()
        _registration.thread.join(timeout=10)
        _registration.release.set()
        if _registration.liveness_thread.is_alive():
            _registration.liveness_thread.join(timeout=5)


@control_command(args=[("job_ids", list)], signature="<job_ids>")
def job_notice(state, job_ids=()):
    """A broadcast after a pass or a terminate gave runs notice (`ProcessExecutor.notify`):
    wake the runs of these jobs in this worker, which renew their lease at once and so
    learn their notice. Only a nudge: without it the next heartbeat learns it."""
    return {"woken": process.wake_runs(job_ids or ())}
