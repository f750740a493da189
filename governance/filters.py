"""The governance API's list filters (django-filter), built from core.filters; the pages'
FilterSets of each feature extend them where they take the same parameters."""

from __future__ import annotations

from core.bounds import MAX_QUERY
from core.filters import FilterSet, choice_filter, id_filter, name_filter
from fleet.models import QuotaShare
from governance.models import ExceptionRequest, KnowledgeArticle, PolicyChange


class ShareFilter(FilterSet):
    queue = id_filter("queue_id", "Only this queue's shares (id).")
    team = name_filter("team__name", "Only this team's shares (name).", max_length=100)
    state = choice_filter("state", QuotaShare.State.choices, "Only shares in this state.")

    class Meta:
        model = QuotaShare
        fields = ["queue", "team", "state"]


class PolicyChangeFilter(FilterSet):
    queue = id_filter("queue_id", "Changes of this queue (id).")
    share = id_filter("share_id", "Changes of this share (id).")
    urgency = id_filter("urgency_id", "Changes of this urgency definition (id).")
    actor = name_filter("actor__username", "Changes made by this username.", max_length=150)
    cause = choice_filter("cause", PolicyChange.Cause.choices, "Why it happened.")
    target = choice_filter("target", PolicyChange.Target.choices, "What changed.")
    team = id_filter("team_id", "Changes of this team's membership (id).")
    subject = name_filter("subject__username", "Changes of this username's roles.", max_length=150)

    class Meta:
        model = PolicyChange
        fields = ["queue", "share", "urgency", "actor", "cause", "target", "team", "subject"]


class ExceptionRequestFilter(FilterSet):
    """Parsed only: the selector applies them, with what the user may see."""

    state = choice_filter("state", ExceptionRequest.State.choices, "Only requests in this state.")
    kind = choice_filter("kind", ExceptionRequest.Kind.choices, "Only requests of this kind.")
    team = id_filter("team_id", "Only this team's requests (id).")
    urgency = id_filter("urgency_id", "Only requests under this urgency definition (id).")
    queue = id_filter("queue_id", "Only requests for this queue (id).")

    class Meta:
        model = ExceptionRequest
        fields = ["state", "kind", "team", "urgency", "queue"]


class ExceptionCountsFilter(FilterSet):
    queue = id_filter("queue_id", "Count only this queue's requests (id).")

    class Meta:
        model = ExceptionRequest
        fields = ["queue"]


class ArticleFilter(FilterSet):
    """Parsed only: the search ranks and filters (governance.knowledge.selectors)."""

    q = name_filter(
        None, 'Web-search syntax: words, "phrases", or, -word. Ranked.', max_length=MAX_QUERY
    )
    tag = name_filter(None, "Only articles with this tag.", max_length=50)
    share = id_filter(None, "Only articles linked to this share (id).")

    class Meta:
        model = KnowledgeArticle
        fields = ["q", "tag", "share"]
