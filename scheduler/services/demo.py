"""A demo queue for the `process` executor: recovery that is real, not modelled.

`seed_process_demo(actor=..., lead=...)` creates (once) the queue `training-lab`: two
ml.g5.xlarge shared by a borrowing team and a lending team, through the policy
services so its history is recorded, and submits two runs of the example training
script (`scheduler/examples/train.py`). A worker serving `instances.ml.g5.xlarge`
runs them; submitting a job into `lab-owner` reclaims the borrowed instance, the
borrower's process gets SIGTERM, and its next attempt resumes from its checkpoint.
"""

from __future__ import annotations

from governance.models import InstanceType, JobQueue, QuotaShare, Team
from governance.services.policy import ShareData, queue_create, share_create
from scheduler.services.jobs import JobData, jobs_submit

QUEUE = "training-lab"
TRAIN = "python -m scheduler.examples.train --steps {steps} --step-seconds 1 --checkpoint-every 10"


def seed_process_demo(*, actor, lead=None) -> JobQueue:
    existing = JobQueue.objects.filter(name=QUEUE).first()
    if existing is not None:
        return existing
    InstanceType.objects.get_or_create(
        name="ml.g5.xlarge", defaults={"gpu_count": 1, "gpu_model": "NVIDIA A10G"}
    )
    reason = "Demo of the process executor: real subprocesses, checkpoints and SIGTERM."
    queue = queue_create(
        actor=actor,
        name=QUEUE,
        capacity={"ml.g5.xlarge": 2},
        reason=reason,
        description="Runs the example training script as real processes.",
        executor=JobQueue.Executor.PROCESS,
    )
    shares = {}
    for name, strategy, borrow in (
        ("lab-borrower", QuotaShare.Strategy.LEND_AND_BORROW, -1),
        ("lab-owner", QuotaShare.Strategy.LEND, None),
    ):
        team, _ = Team.objects.get_or_create(name=f"team-{name}")
        if lead is not None:
            team.leads.add(lead)
        shares[name] = share_create(
            actor=actor,
            queue=queue,
            data=ShareData(
                name=name,
                team=team,
                strategy=strategy,
                borrow_limit=borrow,
                capacity_limits={"ml.g5.xlarge": 1},
            ),
            reason=reason,
        )
    itype = InstanceType.objects.get(name="ml.g5.xlarge")
    jobs_submit(
        items=[
            JobData(
                share=shares["lab-borrower"],
                name=f"train-{n}",
                instance_type=itype,
                expected_duration=120,
                checkpoint_interval=10,
                restart_overhead=2,
                command=TRAIN.format(steps=120),
            )
            for n in (1, 2)
        ],
        submitted_by=lead,
    )
    return queue
