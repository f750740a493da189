"""Policies built through the policy services (so they hold exactly what an admin can
make), and helpers to empty the database between an export and its import."""

import pytest

from fleet.models import (
    InstanceType,
    Job,
    JobDefinition,
    JobQueue,
    QuotaShare,
    Team,
    UrgencyDefinition,
    WorkloadClass,
)
from governance.models import PolicyChange
from governance.policy.services import (
    ShareData,
    queue_create,
    share_create,
    share_data_from_document,
    share_update,
    urgency_save,
)
from governance.policy_code.live import history_document

REASON = "Built for a policy-as-code test"

# share name, team, strategy, borrow limit, in-share preemption, state, limits
VARIED_SHARES = (
    (
        "vision/a",
        "vision",
        "LEND_AND_BORROW",
        -1,
        True,
        "ENABLED",
        {"ml.g5.xlarge": 2, "ml.p4d.24xlarge": 1},
    ),
    ("nlp", "nlp", "LEND_AND_BORROW", 0, False, "ENABLED", {"ml.g5.xlarge": 1}),
    (
        "speech",
        "speech",
        "LEND_AND_BORROW",
        1000,
        True,
        "ENABLED",
        {"ml.p4d.24xlarge": 2, "ml.trn1.32xlarge": 1},
    ),
    ("held", "speech", "RESERVE", None, False, "ENABLED", {"ml.trn1.32xlarge": 1}),
    ("spare", "nlp", "LEND", None, True, "DISABLED", {"ml.g5.xlarge": 3}),
    (
        "x" * 100,
        "vision",
        "LEND_AND_BORROW",
        150,
        False,
        "ENABLED",
        {"ml.g5.xlarge": 3, "ml.p4d.24xlarge": 3},
    ),
)


def instance_types() -> dict[str, InstanceType]:
    specs = (
        ("ml.g5.xlarge", 1, "NVIDIA A10G"),
        ("ml.p4d.24xlarge", 8, "NVIDIA A100"),
        ("ml.trn1.32xlarge", 16, "AWS Trainium"),
    )
    return {
        name: InstanceType.objects.get_or_create(
            name=name, defaults={"gpu_count": gpus, "gpu_model": model}
        )[0]
        for name, gpus, model in specs
    }


def build_queue(actor, name: str, capacity: dict, shares=VARIED_SHARES, **queue_fields) -> JobQueue:
    instance_types()
    queue = queue_create(
        actor=actor, name=name, capacity=capacity, reason=REASON, **queue_fields
    ).applied
    for share_name, team, strategy, borrow, in_share, state, limits in shares:
        share_create(
            actor=actor,
            queue=queue,
            data=ShareData(
                name=share_name,
                team=Team.objects.get_or_create(name=team)[0],
                strategy=strategy,
                borrow_limit=borrow,
                in_share_preemption=in_share,
                state=state,
                capacity_limits=limits,
            ),
            reason=REASON,
        )
    return queue


@pytest.fixture
def varied_queue(admin):
    """Every strategy, borrow limits -1, 0 and large, three instance types (1, 8 and 16
    GPUs), a disabled share, a name AWS refuses and one of 100 characters."""
    Team.objects.get_or_create(name="vision", defaults={"description": "Vision research"})
    urgency_save(
        actor=admin,
        data={
            "name": "Deadline",
            "meaning": "A date that cannot move.",
            "examples": "A paper submission.",
            "priority": 800,
            "max_window_hours": 48,
            "allowed_kinds": ["PRIORITY_RAISE", "PREEMPTION_PROTECTION"],
            "invokers": ["vision"],
        },
        reason=REASON,
    )
    queue = build_queue(
        admin,
        "research fleet",
        {"ml.g5.xlarge": 6, "ml.p4d.24xlarge": 4, "ml.trn1.32xlarge": 2},
        description="Shared by research teams.",
        default_preemption_retries=3,
        runnable_time_limit=3600,
    )
    speech = queue.shares.get(name="speech")
    share_update(
        actor=admin,
        share=speech,
        data=share_data_from_document({**history_document(speech), "priority_ceiling": 500}),
        reason=REASON,
        expected_version=speech.version,
    )
    return queue


def empty_database() -> None:
    """Everything a policy file can describe goes, so an import starts from nothing."""
    Job.objects.all().delete()
    PolicyChange.objects.all().delete()
    QuotaShare.objects.all().delete()
    JobDefinition.objects.all().delete()
    WorkloadClass.objects.all().delete()
    JobQueue.objects.all().delete()
    UrgencyDefinition.objects.all().delete()
    Team.objects.all().delete()
    InstanceType.objects.all().delete()
