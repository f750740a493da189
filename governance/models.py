from governance.dashboards.models import MonthlyRollup
from governance.exceptions.models import ExceptionEvent, ExceptionOwner, ExceptionRequest
from governance.knowledge.models import ArticleRevision, KnowledgeArticle, Tag
from governance.policy.models import PolicyChange
from governance.proposals.models import PolicyProposal
from governance.whatif.models import WhatIfComparison, WhatIfReview

__all__ = [
    "ArticleRevision",
    "ExceptionEvent",
    "ExceptionOwner",
    "ExceptionRequest",
    "KnowledgeArticle",
    "MonthlyRollup",
    "PolicyChange",
    "PolicyProposal",
    "Tag",
    "WhatIfComparison",
    "WhatIfReview",
]
