from governance.models.policy import (
    CapacityLimit,
    InstanceType,
    JobQueue,
    PolicyChange,
    QueueCapacity,
    QuotaShare,
    Team,
    UrgencyDefinition,
)

__all__ = [
    "CapacityLimit",
    "InstanceType",
    "JobQueue",
    "PolicyChange",
    "QueueCapacity",
    "QuotaShare",
    "Team",
    "UrgencyDefinition",
]
