"""The demo organisation: users per role, the AWS sample queue, and a queue built
from the Philly trace's virtual clusters. Idempotent: running it twice changes nothing."""

from __future__ import annotations

import csv
import os
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

from django.contrib.auth.models import Group, User
from django.db import transaction
from django.utils import timezone

from core import permissions
from demo.exceptions import seed_exceptions
from demo.history import history_class, seed_history, seed_workload_classes
from demo.jobs import SAMPLE_DEFINITIONS, seed_definitions, seed_process_demo
from demo.knowledge import seed_knowledge
from fleet.models import InstanceType, Job, JobQueue, QuotaShare, Team
from governance.models import PolicyChange
from governance.policy.membership import role_changes_by
from governance.policy.prices import instance_type_price_set
from governance.policy.services import (
    ShareData,
    queue_create,
    share_create,
    urgency_save,
)
from scheduler.services.job_definitions import parameters_resolve

TRACE_DIR = Path(__file__).resolve().parent.parent / "engine" / "data" / "traces"
DEFAULT_DEMO_PASSWORD = "quota-demo-2026"
GPUS_PER_NODE = 8
# The demo's Philly queue is sized to the bundled trace's demand, not to the VCs' node
# counts: the trace is an extract of Philly's jobs (82,247 of them), which on every
# node of philly_vc.csv (2,824 GPUs) would keep the queue 5-20 % busy, so no share
# would ever wait for capacity another holds. At this fraction (841 GPUs) its busy
# weeks contend, the replayed months show borrowing, reclaims and preemptions, and a
# what-if of a policy change shows what the change does.
PHILLY_SIZE_FRACTION = 0.3
# The four tiny Philly VCs have no size in philly_vc.csv; they share one small share.
OTHER_SHARE_GPUS = 8


def philly_share_gpus(gpus: int) -> int:
    """The demo's limit of a VC of `gpus` GPUs (at least 1)."""
    return max(1, int(gpus * PHILLY_SIZE_FRACTION))


SEED_REASON = "Demo organisation loaded by seed_demo"
# Prices per instance-hour (settings.COST_CURRENCY, USD by default), so the dashboard's
# cost table has figures on the first start: a Philly GPU at an illustrative cloud price of
# one GPU-hour, ml.g5.xlarge at its SageMaker on-demand price (us-east-1).
DEMO_PRICES = (
    ("philly.gpu", "2.20", "an illustrative cloud price of one GPU-hour"),
    ("ml.g5.xlarge", "1.408", "its SageMaker on-demand price in us-east-1"),
)


@dataclass(frozen=True)
class DemoUser:
    username: str
    role: str
    full_name: str


DEMO_USERS = (
    DemoUser("admin", permissions.ADMINS, "Ada Admin"),
    DemoUser("lead", permissions.TEAM_LEADS, "Lee Lead"),
    DemoUser("owner", permissions.EXCEPTION_OWNERS, "Olu Owner"),
    DemoUser("leader", permissions.LEADERSHIP, "Lin Leader"),
)

URGENCIES = (
    {
        "name": "Production incident",
        "meaning": "A model serving customers is broken or degraded and a retrain or fix "
        "must run now.",
        "examples": "Rollback retrain after a bad release; hotfix fine-tune for a safety issue.",
        "priority": 950,
        "max_window_hours": 24,
        "allowed_kinds": ["PRIORITY_RAISE", "TEMPORARY_CAPACITY", "PREEMPTION_PROTECTION"],
    },
    {
        "name": "Conference deadline",
        "meaning": "Experiments needed for a paper or external commitment with a fixed date.",
        "examples": "Final ablations the week before a submission deadline.",
        "priority": 800,
        "max_window_hours": 72,
        "allowed_kinds": ["PRIORITY_RAISE", "PREEMPTION_PROTECTION"],
    },
    {
        "name": "Customer escalation",
        "meaning": "A customer commitment is at risk without extra capacity for a short time.",
        "examples": "A custom model promised for a launch date.",
        "priority": 700,
        "max_window_hours": 48,
        "allowed_kinds": ["PRIORITY_RAISE", "TEMPORARY_CAPACITY"],
    },
    {
        "name": "Planned large run",
        "meaning": "A long run that was planned and announced, protected from reclaim "
        "while it checkpoints rarely.",
        "examples": "A multi-day pre-training run agreed at the capacity review.",
        "priority": 500,
        "max_window_hours": 168,
        "allowed_kinds": ["PREEMPTION_PROTECTION", "TEMPORARY_CAPACITY"],
    },
)

AWS_SAMPLE = (
    # share, team, strategy, borrow limit, in-share preemption
    ("qs1", "vision-research", QuotaShare.Strategy.LEND_AND_BORROW, 200, True),
    ("qs2", "nlp-platform", QuotaShare.Strategy.LEND, None, False),
    ("qs3", "speech-production", QuotaShare.Strategy.RESERVE, None, False),
)


def demo_password() -> str:
    return os.environ.get("DEMO_PASSWORD") or DEFAULT_DEMO_PASSWORD


def _users(password: str) -> dict[str, User]:
    users = {}
    for demo in DEMO_USERS:
        first, last = demo.full_name.split(" ", 1)
        user, created = User.objects.get_or_create(
            username=demo.username,
            defaults={
                "first_name": first,
                "last_name": last,
                "email": f"{demo.username}@example.com",
            },
        )
        if created:
            user.set_password(password)
            user.save()
        # Recorded in the history as the seeding's own change, not as a direct one.
        with role_changes_by(actor=None, reason=SEED_REASON, cause=PolicyChange.Cause.IMPORT):
            user.groups.add(Group.objects.get_or_create(name=demo.role)[0])
        users[demo.username] = user
    return users


def _queue(*, actor, name: str, description: str, capacity: dict[str, int]) -> JobQueue:
    queue = JobQueue.objects.filter(name=name).first()
    if queue is None:
        queue = queue_create(
            actor=actor,
            name=name,
            description=description,
            capacity=capacity,
            reason=SEED_REASON,
            cause=PolicyChange.Cause.IMPORT,
        ).applied
    return queue


def _share(*, actor, queue: JobQueue, data: ShareData) -> QuotaShare:
    existing = queue.shares.filter(name=data.name).first()
    if existing:
        return existing
    return share_create(
        actor=actor, queue=queue, data=data, reason=SEED_REASON, cause=PolicyChange.Cause.IMPORT
    ).applied


def seed_aws_sample(actor, lead: User) -> JobQueue:
    g5, _ = InstanceType.objects.get_or_create(
        name="ml.g5.xlarge", defaults={"gpu_count": 1, "gpu_model": "NVIDIA A10G"}
    )
    queue = _queue(
        actor=actor,
        name="aws-sample",
        description="The AWS Batch quota-management sample: three shares of one ml.g5.xlarge.",
        capacity={g5.name: 3},
    )
    for share_name, team_name, strategy, borrow, in_share in AWS_SAMPLE:
        team, _ = Team.objects.get_or_create(name=team_name)
        if team_name == "vision-research":
            team.leads.add(lead)
            team.members.add(lead)
        _share(
            actor=actor,
            queue=queue,
            data=ShareData(
                name=share_name,
                team=team,
                strategy=strategy,
                borrow_limit=borrow,
                in_share_preemption=in_share,
                capacity_limits={g5.name: 1},
            ),
        )
    revisions = seed_definitions(actor=actor, queue=queue, names=SAMPLE_DEFINITIONS)
    _aws_sample_jobs(queue, lead, revisions["vision-train"])
    return queue


def _aws_sample_jobs(queue: JobQueue, lead: User, revision) -> None:
    """The walkthrough's state after its first pass: qs1 runs one job within its limit and
    borrows qs2's idle instance for a second; a third waits. They run `vision-train`."""
    if queue.jobs.exists():
        return
    qs1 = queue.shares.get(name="qs1")
    g5 = InstanceType.objects.get(name="ml.g5.xlarge")
    now = timezone.now()
    started = now - timedelta(minutes=20)
    parameters, argv, _errors = parameters_resolve(revision=revision, values={})
    common = {
        "definition_revision": revision,
        "parameters": parameters,
        "argv": argv,
        "queue": queue,
        "share": qs1,
        "instance_type": g5,
        "instances": 1,
        "expected_duration": 3600,
        "checkpoint_interval": 600,
        "restart_overhead": 60,
        "submitted_by": lead,
        "submitted_at": started,
    }
    Job.objects.create(
        name="vision-pretrain-high",
        priority=3,
        state=Job.State.RUNNING,
        started_at=started,
        start_seq=1,
        progress=1200,
        checkpointed=1200,
        **common,
    )
    Job.objects.create(
        name="vision-ablation-med",
        priority=2,
        state=Job.State.RUNNING,
        started_at=started,
        start_seq=2,
        borrowed=True,
        ran_borrowed=True,
        progress=1200,
        checkpointed=1200,
        **common,
    )
    Job.objects.create(name="vision-sweep-low", priority=1, **common)


def philly_vc_sizes(path: Path | None = None) -> list[tuple[str, int]]:
    """(vc, nodes) from philly_vc.csv, in file order."""
    path = path or TRACE_DIR / "philly_vc.csv"
    with path.open(newline="") as handle:
        return [(row["vc"], int(row["node num"])) for row in csv.DictReader(handle)]


def seed_philly(actor) -> JobQueue:
    seed_workload_classes(actor)  # its shares' default classes
    gpu, _ = InstanceType.objects.get_or_create(
        name="philly.gpu", defaults={"gpu_count": 1, "gpu_model": "Philly GPU (1 per instance)"}
    )
    sizes = [(vc, philly_share_gpus(nodes * GPUS_PER_NODE)) for vc, nodes in philly_vc_sizes()]
    other = philly_share_gpus(OTHER_SHARE_GPUS)
    total = sum(gpus for _vc, gpus in sizes) + other
    queue = _queue(
        actor=actor,
        name="philly",
        description="Microsoft Philly's virtual clusters as teams (one instance = one GPU), "
        f"each sized at {PHILLY_SIZE_FRACTION:.0%} of its nodes (8 GPUs each) to the "
        "bundled trace's demand. Contains data derived from the Microsoft Philly trace, "
        "CC BY 4.0.",
        capacity={gpu.name: total},
    )
    for vc, gpus in sizes:
        team, _ = Team.objects.get_or_create(name=f"vc-{vc}")
        _share(
            actor=actor,
            queue=queue,
            data=ShareData(
                name=f"vc-{vc}",
                team=team,
                strategy=QuotaShare.Strategy.LEND_AND_BORROW,
                borrow_limit=100,
                in_share_preemption=True,
                capacity_limits={gpu.name: gpus},
                default_workload_class=history_class(f"vc-{vc}"),
            ),
        )
    team, _ = Team.objects.get_or_create(
        name="vc-other", defaults={"description": "The four tiny Philly VCs without a size."}
    )
    _share(
        actor=actor,
        queue=queue,
        data=ShareData(
            name="vc-other",
            team=team,
            strategy=QuotaShare.Strategy.LEND,
            capacity_limits={gpu.name: other},
            default_workload_class=history_class("vc-other"),
        ),
    )
    seed_definitions(actor=actor, queue=queue, names=["philly-training"])
    return queue


def seed_prices(actor) -> None:
    """The demo's prices, through the price service (a recorded import, so it applies at
    once under review too); a type that has a price already keeps it."""
    for name, price, why in DEMO_PRICES:
        itype = InstanceType.objects.filter(name=name, price_per_hour__isnull=True).first()
        if itype is not None:
            instance_type_price_set(
                actor=actor,
                instance_type=itype,
                price=price,
                reason=f"demo seed: {why}",
                cause=PolicyChange.Cause.IMPORT,
            )


@transaction.atomic
def seed_demo(*, password: str | None = None) -> dict[str, User]:
    users = _users(password or demo_password())
    admin = users["admin"]
    for data in URGENCIES:
        if not urgency_exists(data["name"]):
            urgency_save(
                actor=admin, data=data, reason=SEED_REASON, cause=PolicyChange.Cause.IMPORT
            )
    aws = seed_aws_sample(admin, users["lead"])
    seed_philly(admin)
    seed_prices(admin)
    seed_knowledge(actor=admin)
    seed_exceptions(admin=admin, lead=users["lead"], owner=users["owner"], queue=aws)
    seed_process_demo(actor=admin, lead=users["lead"])
    return users


def seed_demo_with_history(*, months: int = 3) -> dict[str, User]:
    """The demo organisation plus `months` of real workload replayed from the Philly trace
    (jobs, events, policy edits and exceptions), so the dashboard has history to show."""
    users = seed_demo()
    if months > 0:
        seed_history(months=months)
    return users


def urgency_exists(name: str) -> bool:
    from fleet.models import UrgencyDefinition

    return UrgencyDefinition.objects.filter(name=name).exists()
