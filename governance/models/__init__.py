from governance.models.exceptions import ExceptionEvent, ExceptionOwner, ExceptionRequest
from governance.models.knowledge import ArticleRevision, KnowledgeArticle, Tag
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
from governance.models.proposals import PolicyProposal
from governance.models.rollups import MonthlyRollup
from governance.models.whatif import WhatIfComparison, WhatIfReview

__all__ = [
    "ArticleRevision",
    "CapacityLimit",
    "ExceptionEvent",
    "ExceptionOwner",
    "ExceptionRequest",
    "InstanceType",
    "JobQueue",
    "KnowledgeArticle",
    "MonthlyRollup",
    "PolicyChange",
    "PolicyProposal",
    "QueueCapacity",
    "QuotaShare",
    "Tag",
    "Team",
    "UrgencyDefinition",
    "WhatIfComparison",
    "WhatIfReview",
]
