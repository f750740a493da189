"""Reads of the knowledge base: search, one article, the articles of a share or request."""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Count, Prefetch, Q, QuerySet
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

from core import rules
from fleet.models import QuotaShare
from governance.knowledge import search
from governance.models import ArticleRevision, KnowledgeArticle, Tag

MAX_RESULTS = 50
PREVIEW_CHARS = 220


@dataclass(frozen=True)
class ArticleHit:
    """One search result: the article, its rank (higher is better; 0 without a query)
    and a snippet whose matched words are wrapped in <mark>."""

    article: KnowledgeArticle
    rank: float
    snippet: SafeString


def _articles() -> QuerySet[KnowledgeArticle]:
    return KnowledgeArticle.objects.select_related("owner").prefetch_related(
        "tags", Prefetch("shares", queryset=QuotaShare.objects.select_related("queue"))
    )


def _highlight(snippet: str) -> SafeString:
    """Escape the backend's plain-text snippet, then turn its markers into <mark>."""
    text = escape(snippet)
    text = text.replace(search.MARK_START, "<mark>").replace(search.MARK_END, "</mark>")
    return mark_safe(text)  # noqa: S308 - escaped above; only our markers became tags


def _preview(article: KnowledgeArticle) -> SafeString:
    text = article.body_text
    if len(text) > PREVIEW_CHARS:
        text = text[:PREVIEW_CHARS].rsplit(" ", 1)[0] + " …"
    return _highlight(text)


def visible_articles(user, articles: QuerySet[KnowledgeArticle]) -> QuerySet[KnowledgeArticle]:
    """The articles `user` may read: decision records only of requests they may see."""
    return rules.visible(user, "article.view", articles)


def article_search(
    *,
    user,
    query: str = "",
    tag: str | None = None,
    share_id: int | None = None,
    limit: int = MAX_RESULTS,
) -> list[ArticleHit]:
    """Ranked articles `user` may read for `query` (web-search syntax), filtered by tag
    and linked share. Without a query: every such article (filtered), most recently
    updated first. The same result kind on PostgreSQL and SQLite (see
    governance.knowledge.search)."""
    articles = visible_articles(user, _articles())
    if tag:
        articles = articles.filter(tags__name=tag)
    if share_id:
        articles = articles.filter(shares__id=share_id)
    query = (query or "").strip()
    if not query:
        return [
            ArticleHit(article=article, rank=0.0, snippet=_preview(article))
            for article in articles.distinct().order_by("-updated_at", "id")[:limit]
        ]
    hidden = KnowledgeArticle.objects.exclude(pk__in=articles.values("pk"))
    filtered = bool(tag or share_id) or hidden.exists()
    ids = list(articles.values_list("id", flat=True).distinct()) if filtered else None
    found = search.matches(query, article_ids=ids)[:limit]
    by_id = _articles().in_bulk([match.article_id for match in found])
    return [
        ArticleHit(article=by_id[m.article_id], rank=m.rank, snippet=_highlight(m.snippet))
        for m in found
        if m.article_id in by_id
    ]


def article_get(*, slug: str) -> KnowledgeArticle:
    return (
        _articles()
        .prefetch_related("editors", "urgencies", "exception_requests__team")
        .get(slug=slug)
    )


def article_history(*, article: KnowledgeArticle) -> list[ArticleRevision]:
    return list(article.revisions.select_related("editor").order_by("-version"))


def articles_for_share(*, user, share: QuotaShare) -> list[KnowledgeArticle]:
    """The articles that explain `share`: why its policy exists, who may change it."""
    return list(
        visible_articles(user, KnowledgeArticle.objects.filter(shares=share))
        .select_related("owner")
        .prefetch_related("tags")
        .order_by("kind", "title", "id")
    )


def articles_for_request(*, user, request) -> list[KnowledgeArticle]:
    """Articles linked to the request, then those of its share and urgency (those `user`
    may read)."""
    readable = visible_articles(user, KnowledgeArticle.objects.all())
    linked = list(readable.filter(exception_requests=request).order_by("title", "id"))
    related = readable.exclude(pk__in=[a.pk for a in linked])
    by_share = related.filter(shares=request.share_id) if request.share_id else related.none()
    by_urgency = related.filter(urgencies=request.urgency_id)
    others = list((by_share | by_urgency).distinct().order_by("title", "id")[:5])
    return linked + others


def tag_choices(*, user) -> list[tuple[str, int]]:
    """Tags in use, with how many of the articles `user` may read carry each."""
    readable = visible_articles(user, KnowledgeArticle.objects.all())
    return list(
        Tag.objects.annotate(n=Count("articles", filter=Q(articles__in=readable.values("pk"))))
        .filter(n__gt=0)
        .order_by("name")
        .values_list("name", "n")
    )


def articles_by_share(*, user, queue) -> dict[int, list[KnowledgeArticle]]:
    """The articles explaining each share of `queue` that `user` may read, in two queries
    whatever its size."""
    articles = (
        visible_articles(user, KnowledgeArticle.objects.filter(shares__queue=queue))
        .distinct()
        .prefetch_related("shares")
        .order_by("kind", "title", "id")
    )
    by_share: dict[int, list[KnowledgeArticle]] = {}
    for article in articles:
        for share in article.shares.all():
            if share.queue_id == queue.pk:
                by_share.setdefault(share.pk, []).append(article)
    return by_share
