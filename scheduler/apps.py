from django.apps import AppConfig


class SchedulerConfig(AppConfig):
    name = "scheduler"
    verbose_name = "Scheduler"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        from core.signals import policy_changed
        from scheduler import tasks  # noqa: F401  (the tasks and beat entries)
        from scheduler.executors import register
        from scheduler.executors.process import (
            ProcessExecutor,
            worker,  # noqa: F401  (a runner worker's signals)
        )
        from scheduler.executors.simulated import SimulatedExecutor
        from scheduler.executors.slurm import SlurmExecutor

        # The product's executors, in the order the queue form lists them.
        for executor in (SimulatedExecutor(), ProcessExecutor(), SlurmExecutor()):
            register(executor)

        from scheduler.metrics import measure_tasks

        measure_tasks()  # every process: a worker's tasks, and eager runs

        policy_changed.connect(_pass_after_policy_change, dispatch_uid="scheduler-policy-pass")


def _pass_after_policy_change(sender, queue_id, **kwargs):
    """A policy change (an edit, a revert, an exception taking effect) may start or
    preempt jobs: run a pass. The signal is sent after commit already."""
    from scheduler.services.passes import request_pass

    request_pass(queue_id)
