from governance.dashboards.models import MonthlyRollup
from governance.exceptions.models import ExceptionEvent, ExceptionOwner, ExceptionRequest
from governance.knowledge.models import ArticleRevision, KnowledgeArticle, Tag
from governance.policy.models import (
    CapacityLimit,
    InstanceType,
    JobQueue,
    PolicyChange,
    QueueCapacity,
    QuotaShare,
    Team,
    UrgencyDefinition,
)
from governance.proposals.models import PolicyProposal
from governance.whatif.models import WhatIfComparison, WhatIfReview

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
