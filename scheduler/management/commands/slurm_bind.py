"""`manage.py slurm_bind`: bind a queue to a Slurm cluster, or say what one instance of
an instance type asks Slurm for.

    manage.py slurm_bind queue QUEUE --conf /etc/slurm/slurm.conf --partition gpu [--account ml]
    manage.py slurm_bind instance-type TYPE -- --gres=gpu:a100:1 [--mem=64G ...]
    manage.py slurm_bind show

A thin wrapper over `scheduler.executors.slurm.binding` (`queue_bind_slurm`,
`instance_type_set_slurm_resources`), whose checks the policy editor and the API use
too: the partition is asked of the cluster (within SLURM_BIND_TIMEOUT), and a cluster
that does not answer refuses the binding. An error names the field and changes nothing
(exit status 2). A change made here is recorded in the policy history as a direct
change (no reason, no review: the policy editor and the API are the reviewed way). The
queue runs on Slurm once its executor is `slurm` (chosen when the queue is created).
"""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from fleet.models import InstanceType, JobQueue
from scheduler.executors.slurm.binding import (
    SlurmBinding,
    instance_type_resources,
    instance_type_set_slurm_resources,
    queue_bind_slurm,
)


def _problems(error: ValidationError) -> str:
    return "; ".join(
        f"{field}: {' '.join(str(m) for m in messages)}"
        for field, messages in error.message_dict.items()
    )


class Command(BaseCommand):
    help = (
        "Bind a queue to a Slurm cluster and partition, or set an instance type's sbatch options."
    )

    def add_arguments(self, parser):
        what = parser.add_subparsers(dest="what", required=True)
        queue = what.add_parser("queue", help="bind a queue to a cluster and partition")
        queue.add_argument("name", help="the queue's name")
        queue.add_argument("--conf", required=True, help="the cluster's slurm.conf (absolute)")
        queue.add_argument("--partition", required=True)
        queue.add_argument("--account", default="")
        itype = what.add_parser(
            "instance-type", help="the sbatch options of one instance of a type"
        )
        itype.add_argument("name", help="the instance type's name")
        itype.add_argument("resources", nargs="*", help="sbatch options, after --")
        what.add_parser("show", help="the queues bound to Slurm and the types' options")

    def handle(self, *args, **options):
        try:
            if options["what"] == "queue":
                queue = JobQueue.objects.filter(name=options["name"]).first()
                if queue is None:
                    raise CommandError(f"queue: no queue named '{options['name']}'", returncode=2)
                queue_bind_slurm(
                    queue=queue,
                    conf=options["conf"],
                    partition=options["partition"],
                    account=options["account"],
                )
                self.stdout.write(f"{queue.name}: {self._binding(queue)}")
            elif options["what"] == "instance-type":
                itype = InstanceType.objects.filter(name=options["name"]).first()
                if itype is None:
                    raise CommandError(
                        f"instance_type: no instance type named '{options['name']}'",
                        returncode=2,
                    )
                instance_type_set_slurm_resources(
                    instance_type=itype, resources=list(options["resources"])
                )
                resources = instance_type_resources(itype)
                self.stdout.write(f"{itype.name}: {' '.join(resources) or '(none)'}")
            else:
                self._show()
        except ValidationError as error:
            raise CommandError(_problems(error), returncode=2) from error

    @staticmethod
    def _binding(queue: JobQueue) -> str:
        binding = SlurmBinding.of(queue)
        if not binding.bound:
            return "not bound"
        account = f", account {binding.account}" if binding.account else ""
        return f"{binding.conf}, partition {binding.partition}{account} (executor {queue.executor})"

    def _show(self) -> None:
        for queue in JobQueue.objects.order_by("name"):
            if SlurmBinding.of(queue).bound:
                self.stdout.write(f"queue {queue.name}: {self._binding(queue)}")
        for itype in InstanceType.objects.order_by("name"):
            resources = instance_type_resources(itype)
            if resources:
                self.stdout.write(f"instance type {itype.name}: {' '.join(resources)}")
