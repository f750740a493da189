"""The demo's job definitions, its queue for the `process` executor, and live traffic.

Every demo job runs a registered job definition, registered through the definition
service so its history is recorded:

- `train-example` runs the example training script (`scheduler/examples/train.py`)
  on `training-lab`, with typed `steps` and `checkpoint_every` parameters;
- `vision-train` and `nlp-finetune` model training on the simulated `aws-sample`
  queue (nothing runs there: the definition gives the work model's defaults);
- `philly-training` does the same on the `philly` queue.

`seed_process_demo(actor=..., lead=...)` creates (once) the queue `training-lab`: two
ml.g5.xlarge shared by a borrowing team and a lending team, through the policy
services, and submits two runs of `train-example`. A worker serving
`instances.ml.g5.xlarge` runs them; submitting a job into `lab-owner` reclaims the
borrowed instance: the borrower is STOPPING, its process gets SIGTERM at once, saves
the step it is at (`--checkpoint-on-sigterm`) and exits, the owner starts only then,
and the borrower's next attempt resumes from that checkpoint.

`seed_slurm_demo(actor=..., lead=..., conf=...)` creates (once) the queue `slurm-lab` on
the Slurm cluster of `conf` (`make demo` with SLURM_CONF set; the test cluster of
`scripts/slurm/cluster.sh`): eight ml.g5.xlarge, one GPU each (`--gres=gpu:1`) on
partition `gpu`, the same two teams' shares, and two runs of `train-example` there.
"""

from __future__ import annotations

from django.conf import settings

from fleet.models import (
    InstanceType,
    Job,
    JobDefinition,
    JobDefinitionRevision,
    JobQueue,
    QuotaShare,
    Team,
)
from governance.models import PolicyChange
from governance.policy.services import ShareData, queue_create, share_create
from governance.policy_code.slurm_binding import (
    instance_type_set_resources,
    queue_set_slurm_binding,
)
from scheduler.services.job_definitions import DefinitionData, definition_register
from scheduler.services.jobs import JobData, jobs_submit

QUEUE = "training-lab"
SLURM_QUEUE = "slurm-lab"
REASON = "Demo definitions loaded by seed_demo"

# name -> (description, revision content without its queues, instance type name)
DEFINITIONS = {
    "train-example": (
        "The example training script: fits a line step by step, checkpoints, and "
        "resumes from its checkpoint after a preemption.",
        {
            "command": [
                "python",
                "-m",
                "scheduler.examples.train",
                "--steps",
                "{steps}",
                "--step-seconds",
                "1",
                "--checkpoint-every",
                "{checkpoint_every}",
                # A victim gets notice (SIGTERM) and its grace: the script saves the
                # step it is at and exits, so its next attempt loses nothing.
                "--checkpoint-on-sigterm",
            ],
            "parameters": [
                {
                    "name": "steps",
                    "type": "integer",
                    "min": 1,
                    "max": 100_000,
                    "default": 120,
                    "description": "Training steps; one step is one second of work.",
                },
                {
                    "name": "checkpoint_every",
                    "type": "integer",
                    "min": 1,
                    "max": 1000,
                    "default": 10,
                    "description": "Steps between checkpoints.",
                },
            ],
            # The job runs in a working directory of its own with nothing of the
            # runner's environment: the example's package is found by this path.
            "environment": {"PYTHONUNBUFFERED": "1", "PYTHONPATH": str(settings.BASE_DIR)},
            "expected_duration": 120,
            "checkpoint_interval": 10,
            "restart_overhead": 2,
            "stop_grace_seconds": 10,
            "wall_clock_limit": 3600,
        },
        "ml.g5.xlarge",
    ),
    "vision-train": (
        "Image-model training of team vision-research (simulated: the queue models its work).",
        {
            "command": ["python", "train_vision.py", "--model", "{model}", "--epochs", "{epochs}"],
            "parameters": [
                {
                    "name": "model",
                    "type": "choice",
                    "choices": ["resnet50", "vit-b16", "convnext-t"],
                    "default": "resnet50",
                },
                {"name": "epochs", "type": "integer", "min": 1, "max": 1000, "default": 30},
            ],
            "expected_duration": 1800,
            "checkpoint_interval": 600,
            "restart_overhead": 60,
        },
        "ml.g5.xlarge",
    ),
    "nlp-finetune": (
        "Fine-tuning of team nlp-platform (simulated: the queue models its work).",
        {
            "command": ["python", "finetune.py", "--base", "{base}", "--dataset", "{dataset}"],
            "parameters": [
                {
                    "name": "base",
                    "type": "choice",
                    "choices": ["bert-base", "t5-small"],
                    "default": "bert-base",
                },
                {
                    "name": "dataset",
                    "type": "pattern",
                    "pattern": "[a-z0-9][a-z0-9_-]{0,63}",
                    "default": "squad",
                    "description": "A dataset name of the team's catalogue.",
                },
            ],
            "expected_duration": 1800,
            "checkpoint_interval": 600,
            "restart_overhead": 60,
        },
        "ml.g5.xlarge",
    ),
    "philly-training": (
        "A training job on Philly's virtual clusters (simulated).",
        {
            "command": ["python", "train.py", "--config", "{config}"],
            "parameters": [
                {
                    "name": "config",
                    "type": "pattern",
                    "pattern": "[a-z0-9][a-z0-9_.-]{0,63}",
                    "default": "baseline",
                }
            ],
            "expected_duration": 7200,
            "checkpoint_interval": 1800,
            "restart_overhead": 300,
        },
        None,
    ),
}

# The same script for the Slurm queue, with the network it really has there: Slurm runs
# it on its nodes' network and applies no address-space limit, so a definition that
# promised otherwise would be refused for that queue (scheduler.services.job_definitions).
DEFINITIONS["train-example-slurm"] = (
    DEFINITIONS["train-example"][0] + " Runs on the Slurm nodes' network.",
    {**DEFINITIONS["train-example"][1], "network": True},
    DEFINITIONS["train-example"][2],
)


def seed_definitions(*, actor, queue: JobQueue, names) -> dict[str, JobDefinitionRevision]:
    """Register the named demo definitions for `queue` (once each; an existing one
    gains the queue). Returns their latest revisions by name."""
    revisions = {}
    for name in names:
        description, content, type_name = DEFINITIONS[name]
        definition = JobDefinition.objects.filter(name=name).first()
        if definition is None:
            definition = definition_register(
                actor=actor,
                name=name,
                description=description,
                reason=REASON,
                data=DefinitionData(
                    queues=[queue],
                    instance_type=InstanceType.objects.filter(name=type_name).first()
                    if type_name
                    else None,
                    **content,
                ),
            )
        else:
            definition.queues.add(queue)
        revisions[name] = definition.revisions.order_by("-revision").first()
    return revisions


def seed_process_demo(*, actor, lead=None) -> JobQueue:
    existing = JobQueue.objects.filter(name=QUEUE).first()
    if existing is not None:
        return existing
    InstanceType.objects.get_or_create(
        name="ml.g5.xlarge", defaults={"gpu_count": 1, "gpu_model": "NVIDIA A10G"}
    )
    reason = "Demo of the process executor: real subprocesses, checkpoints and SIGTERM."
    queue = _lab_queue(
        actor=actor,
        lead=lead,
        name=QUEUE,
        executor="process",
        description="Runs the example training script as real processes.",
        reason=reason,
        instances=2,
        shares=("lab-borrower", "lab-owner"),
        job_prefix="train",
    )
    return queue


def seed_slurm_demo(*, actor, lead=None, conf: str) -> JobQueue:
    existing = JobQueue.objects.filter(name=SLURM_QUEUE).first()
    if existing is not None:
        return existing
    itype, _ = InstanceType.objects.get_or_create(
        name="ml.g5.xlarge", defaults={"gpu_count": 1, "gpu_model": "NVIDIA A10G"}
    )
    reason = "Demo of the Slurm executor: the product decides, the test cluster runs."
    seeded = PolicyChange.Cause.IMPORT  # loaded data, as in _lab_queue
    instance_type_set_resources(
        actor=actor, instance_type=itype, resources=["--gres=gpu:1"], reason=reason, cause=seeded
    )
    return _lab_queue(
        actor=actor,
        lead=lead,
        name=SLURM_QUEUE,
        executor="slurm",
        description="Runs the example training script on a Slurm cluster (partition gpu).",
        reason=reason,
        instances=8,
        shares=("slurm-borrower", "slurm-owner"),
        job_prefix="slurm-train",
        definition="train-example-slurm",
        bind=lambda queue: queue_set_slurm_binding(
            actor=actor,
            queue=queue,
            binding={"slurm_conf": conf, "slurm_partition": "gpu"},
            reason=reason,
            expected_version=queue.version,
            cause=seeded,
        ),
    )


def _lab_queue(
    *,
    actor,
    lead,
    name: str,
    executor: str,
    description: str,
    reason: str,
    instances: int,
    shares: tuple[str, str],
    job_prefix: str,
    bind=None,
    definition: str = "train-example",
) -> JobQueue:
    """A queue of `instances` ml.g5.xlarge running the example training script: a
    borrower share and an owner (LEND) share, half each, teams `team-<share>` that
    `lead` leads, and two runs of `train-example` in the borrower's share. Loaded
    data, as the rest of seed_demo: an import applies at once, also when policy changes
    need review (an edit would only be proposed, and there would be no queue)."""
    seeded = PolicyChange.Cause.IMPORT
    queue = queue_create(
        actor=actor,
        name=name,
        capacity={"ml.g5.xlarge": instances},
        reason=reason,
        description=description,
        executor=executor,
        cause=seeded,
    ).applied
    if bind is not None:
        bind(queue)
        queue.refresh_from_db()
    borrower, owner = shares
    created = {}
    for share, strategy, borrow in (
        (borrower, QuotaShare.Strategy.LEND_AND_BORROW, -1),
        (owner, QuotaShare.Strategy.LEND, None),
    ):
        team, _ = Team.objects.get_or_create(name=f"team-{share}")
        if lead is not None:
            team.leads.add(lead)
        created[share] = share_create(
            actor=actor,
            queue=queue,
            data=ShareData(
                name=share,
                team=team,
                strategy=strategy,
                borrow_limit=borrow,
                capacity_limits={"ml.g5.xlarge": instances // 2},
            ),
            reason=reason,
            cause=seeded,
        ).applied
    revision = seed_definitions(actor=actor, queue=queue, names=[definition])[definition]
    if lead is not None:
        # A fresh copy: the teams a user leads are cached on the object, and the lead
        # has just become a lead of these two.
        lead = type(lead).objects.get(pk=lead.pk)
    jobs_submit(
        items=[
            JobData(share=created[borrower], name=f"{job_prefix}-{n}", revision=revision)
            for n in (1, 2)
        ],
        submitted_by=lead,
    )
    return queue


# Live traffic for the demo's AWS sample queue: a visitor keeps seeing borrowing,
# reclaim and recovery. Beat calls `demo_traffic` only when settings.DEMO_TRAFFIC is on
# (`make demo` turns it on); each call does at most one step of the cycle below.
SAMPLE_QUEUE = "aws-sample"
SAMPLE_DEFINITIONS = ("vision-train", "nlp-finetune")


def demo_traffic(*, now=None) -> list[Job]:
    """One step of the walkthrough cycle on `aws-sample`:

    1. when the queue is quiet, team qs1 submits three `vision-train` jobs: two start
       (one on qs2's idle instance, borrowed) and one waits;
    2. while qs1 borrows and qs2 has nothing, qs2's owner submits an `nlp-finetune`
       job, which reclaims its instance: the borrowed job is preempted, loses the work
       since its last checkpoint, and resumes later with its restart overhead.
    Returns the jobs it submitted (none when the cycle is under way, or when the queue
    or its definitions are missing).
    """
    queue = JobQueue.objects.filter(name=SAMPLE_QUEUE).first()
    if queue is None:
        return []
    shares = {share.name: share for share in queue.shares.select_related("queue", "team")}
    revisions = {
        definition.name: definition.revisions.order_by("-revision").first()
        for definition in queue.job_definitions.filter(
            name__in=SAMPLE_DEFINITIONS, retired_at__isnull=True
        )
    }
    if not {"qs1", "qs2"} <= set(shares) or set(revisions) != set(SAMPLE_DEFINITIONS):
        return []
    live = Job.objects.filter(queue=queue, state__in=[Job.State.RUNNABLE, Job.State.RUNNING])

    def job(share, name, definition, priority, **parameters):
        return JobData(
            share=shares[share],
            name=name,
            revision=revisions[definition],
            parameters=parameters,
            priority=priority,
        )

    if not live.exists():
        cycle = Job.objects.filter(share=shares["qs1"]).count() // 3 + 1
        items = [
            job("qs1", f"vision-train-{cycle}", "vision-train", 3, model="vit-b16"),
            job("qs1", f"vision-ablation-{cycle}", "vision-train", 2, epochs=10),
            job("qs1", f"vision-sweep-{cycle}", "vision-train", 1, model="convnext-t"),
        ]
        return jobs_submit(items=items, now=now)
    qs1_borrows = live.filter(share=shares["qs1"], state=Job.State.RUNNING, borrowed=True)
    if qs1_borrows.exists() and not live.filter(share=shares["qs2"]).exists():
        number = Job.objects.filter(share=shares["qs2"]).count() + 1
        item = job("qs2", f"nlp-finetune-{number}", "nlp-finetune", 1, dataset="squad-v2")
        return jobs_submit(items=[item], now=now)
    return []
