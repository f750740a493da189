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
from scheduler.models import Job
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


# Live traffic for the demo's AWS sample queue: a visitor keeps seeing borrowing,
# reclaim and recovery. Beat calls `demo_traffic` only when settings.DEMO_TRAFFIC is on
# (`make demo` turns it on); each call does at most one step of the cycle below.
SAMPLE_QUEUE = "aws-sample"
SAMPLE_JOB_SECONDS = 1800  # compute seconds: 30 s of real time at 60x
SAMPLE_CHECKPOINT = 600
SAMPLE_OVERHEAD = 60


def demo_traffic(*, now=None) -> list[Job]:
    """One step of the walkthrough cycle on `aws-sample`:

    1. when the queue is quiet, team qs1 submits three jobs: two start (one on qs2's
       idle instance, borrowed) and one waits;
    2. while qs1 borrows and qs2 has nothing, qs2's owner submits a job, which reclaims
       its instance: the borrowed job is preempted, loses the work since its last
       checkpoint, and resumes later with its restart overhead.
    Returns the jobs it submitted (none when the cycle is under way).
    """
    queue = JobQueue.objects.filter(name=SAMPLE_QUEUE).first()
    if queue is None:
        return []
    shares = {share.name: share for share in queue.shares.select_related("team")}
    if not {"qs1", "qs2"} <= set(shares):
        return []
    live = Job.objects.filter(queue=queue, state__in=[Job.State.RUNNABLE, Job.State.RUNNING])
    itype = queue.capacities.select_related("instance_type").first().instance_type

    def job(share, name, priority):
        return JobData(
            share=shares[share],
            name=name,
            instance_type=itype,
            expected_duration=SAMPLE_JOB_SECONDS,
            priority=priority,
            checkpoint_interval=SAMPLE_CHECKPOINT,
            restart_overhead=SAMPLE_OVERHEAD,
        )

    if not live.exists():
        cycle = Job.objects.filter(share=shares["qs1"]).count() // 3 + 1
        items = [
            job("qs1", f"vision-train-{cycle}", 3),
            job("qs1", f"vision-ablation-{cycle}", 2),
            job("qs1", f"vision-sweep-{cycle}", 1),
        ]
        return jobs_submit(items=items, now=now)
    qs1_borrows = live.filter(share=shares["qs1"], state=Job.State.RUNNING, borrowed=True)
    if qs1_borrows.exists() and not live.filter(share=shares["qs2"]).exists():
        number = Job.objects.filter(share=shares["qs2"]).count() + 1
        return jobs_submit(items=[job("qs2", f"nlp-finetune-{number}", 1)], now=now)
    return []
