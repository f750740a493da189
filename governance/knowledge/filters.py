"""The knowledge search page's filters (django-filter)."""

from __future__ import annotations

import django_filters
from django import forms

from core.bounds import MAX_QUERY
from core.filters import ModelChoiceFilter
from fleet.models import QuotaShare
from governance.filters import ArticleFilter


class KnowledgeSearchFilter(ArticleFilter):
    """ArticleFilter's parameters as the page asks for them: the tags in use (`tags`, with
    how many articles the user may read carry each) and the shares in lists. The search
    gets the same values as from the API (governance.filters.page_query)."""

    q = django_filters.CharFilter(
        label="Search the knowledge base",
        max_length=MAX_QUERY,
        widget=forms.TextInput(
            attrs={"type": "search", "placeholder": 'e.g. reclaim "borrow limit"'}
        ),
        help_text='All words must match; use "quotes" for a phrase, or between alternatives, '
        "and -word to leave out.",
    )
    tag = django_filters.ChoiceFilter(label="Tag", empty_label="Any tag")
    share = ModelChoiceFilter(
        label="Linked share",
        queryset=QuotaShare.objects.select_related("queue").order_by("queue__name", "name"),
        empty_label="Any share",
        label_from_instance=lambda share: f"{share.queue.name} / {share.name}",
    )

    shared_form = False  # the tag choices are the user's

    def __init__(self, data=None, *args, tags: list[tuple[str, int]], **kwargs):
        super().__init__(data, *args, **kwargs)
        self.filters["tag"].extra["choices"] = [(name, f"{name} ({count})") for name, count in tags]
