"""`make demo` with SLURM_CONF set adds `slurm-lab`: its two example runs start on the
cluster and succeed."""

import pytest
from django.utils import timezone

from demo.jobs import SLURM_QUEUE, seed_slurm_demo
from fleet.models import Job
from scheduler.executors.slurm import services as service
from scheduler.executors.slurm.binding import SlurmBinding
from scheduler.services.passes import scheduling_pass
from tests.scheduler.slurm.test_executor import settle

pytestmark = [pytest.mark.slurm, pytest.mark.django_db]


def test_the_demo_queue_runs_its_example_jobs_on_the_cluster(admin, slurm_cluster, slurm_settings):
    # As `make demo` runs it (run_demo sets SLURM_ALLOW_ROOT): the demo's definition
    # runs the project's own Python, which an unprivileged account may not reach here.
    slurm_settings.SLURM_JOB_USER, slurm_settings.SLURM_ALLOW_ROOT = "", True
    queue = seed_slurm_demo(actor=admin, conf=slurm_cluster.conf)
    assert seed_slurm_demo(actor=admin, conf=slurm_cluster.conf) == queue  # once
    assert (queue.name, queue.executor, SlurmBinding.of(queue).partition) == (
        SLURM_QUEUE,
        "slurm",
        "gpu",
    )
    jobs = Job.objects.filter(queue=queue)
    for job in jobs:  # the demo's runs are long: shorter ones, the same definition
        job.argv = [*job.argv, "--steps", "3", "--step-seconds", "0.1"]
        job.save(update_fields=["argv"])
    outcome = scheduling_pass(queue_id=queue.pk, now=timezone.now())
    assert sorted(outcome.started) == sorted(job.pk for job in jobs)
    for job in jobs:
        assert service.slurm_submit_run(job_id=job.pk, attempt=1).startswith("submitted")
    settle(
        lambda: set(jobs.values_list("state", flat=True)) == {"SUCCEEDED"},
        what="both demo runs succeed",
    )
