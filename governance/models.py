from governance.dashboards.models import MonthlyRollup
from governance.directory.models import DirectoryAccount, GroupMapping
from governance.exceptions.models import ExceptionEvent, ExceptionOwner, ExceptionRequest
from governance.knowledge.models import ArticleRevision, KnowledgeArticle, Tag
from governance.policy.models import PolicyChange
from governance.proposals.models import PolicyProposal
from governance.whatif.models import WhatIfComparison, WhatIfReview

__all__ = [
    "DirectoryAccount",
    "ArticleRevision",
    "ExceptionEvent",
    "ExceptionOwner",
    "ExceptionRequest",
    "GroupMapping",
    "KnowledgeArticle",
    "MonthlyRollup",
    "PolicyChange",
    "PolicyProposal",
    "Tag",
    "WhatIfComparison",
    "WhatIfReview",
]
