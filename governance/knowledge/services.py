"""Writes to the knowledge base: articles, their history, decision records, the seed.

An article's Markdown body is rendered and sanitised here, once per save: nh3 keeps
an allow-list of tags and attributes, so no script, event handler or javascript: URL
reaches a page. The plain text beside it is what search indexes and quotes.
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

import markdown
import nh3
from django.db import transaction
from django.db.models import F
from django.utils.text import slugify

from core import rules
from core.bounds import MAX_ARTICLE_BODY, MAX_TEXT, check_lengths
from core.errors import InvalidInput
from fleet.models import QuotaShare, UrgencyDefinition
from governance.models import ArticleRevision, ExceptionRequest, KnowledgeArticle, Tag
from governance.policy.services import VersionConflict

ALLOWED_TAGS = {
    "a", "abbr", "blockquote", "br", "code", "dd", "del", "div", "dl", "dt", "em",
    "h2", "h3", "h4", "h5", "h6", "hr", "li", "ol", "p", "pre", "span", "strong",
    "sub", "sup", "table", "tbody", "td", "th", "thead", "tr", "ul",
}  # fmt: skip
ALLOWED_ATTRIBUTES = {"a": {"href", "title"}, "abbr": {"title"}, "th": {"align"}, "td": {"align"}}
MAX_TAGS = 10


def render_markdown(body: str) -> tuple[str, str]:
    """(sanitised HTML, plain text) of a Markdown body. Headings start at h2: the
    article's title is the page's h1."""
    raw = markdown.markdown(body or "", extensions=["extra", "sane_lists"], output_format="html")
    raw = re.sub(r"<(/?)h1\b", r"<\1h2", raw)
    safe = nh3.clean(
        raw,
        tags=ALLOWED_TAGS,
        attributes=ALLOWED_ATTRIBUTES,
        url_schemes={"http", "https", "mailto"},
        link_rel="noopener noreferrer",
        strip_comments=True,
    )
    # Headings and terms stay apart from the text after them in snippets and previews:
    # "Why qs3 reserves — Speech production serves…", not "Why qs3 reserves Speech…".
    marked = re.sub(r"</h[2-6]>", " — ", safe)
    marked = re.sub(r"</dt>", ": ", marked)
    marked = re.sub(r"</(li|dd)>", "; ", marked)
    text = html.unescape(re.sub(r"<[^>]+>", " ", marked))
    text = " ".join(text.split())
    text = re.sub(r" ([:;])", r"\1", text)
    return safe, re.sub(r"[;:—] *$", "", text).strip()


@dataclass(frozen=True)
class ArticleData:
    title: str
    body: str
    kind: str = KnowledgeArticle.Kind.REFERENCE
    tags: Sequence[str] = ()
    shares: Sequence[QuotaShare] = ()
    urgencies: Sequence[UrgencyDefinition] = ()
    exception_requests: Sequence[ExceptionRequest] = ()
    editors: Sequence = field(default_factory=tuple)


def _tag_names(values) -> list[str]:
    names = []
    for value in values:
        name = slugify(str(value))[:50]
        if name and name not in names:
            names.append(name)
    return names


# The bounds of an article's free text (the model's), checked before anything is written.
_LENGTHS = {"body": MAX_ARTICLE_BODY, "reason": MAX_TEXT}


def article_validate(data: ArticleData) -> dict[str, list[str]]:
    errors: dict[str, list[str]] = {}
    if not (data.title or "").strip():
        errors["title"] = ["give the article a title"]
    elif len(data.title.strip()) > 200:
        errors["title"] = ["keep the title under 200 characters"]
    if not (data.body or "").strip():
        errors["body"] = ["write the article's body"]
    if data.kind not in KnowledgeArticle.Kind.values:
        errors["kind"] = ["choose what kind of article this is"]
    if len(_tag_names(data.tags)) > MAX_TAGS:
        errors["tags"] = [f"use at most {MAX_TAGS} tags"]
    return errors


def _unique_slug(title: str, *, exclude: int | None = None) -> str:
    base = slugify(title)[:180] or "article"
    slug, number = base, 2
    while KnowledgeArticle.objects.filter(slug=slug).exclude(pk=exclude).exists():
        slug, number = f"{base}-{number}", number + 1
    return slug


def article_document(article: KnowledgeArticle) -> dict:
    return {
        "title": article.title,
        "body": article.body,
        "kind": article.kind,
        "tags": sorted(tag.name for tag in article.tags.all()),
    }


def _write(article: KnowledgeArticle, data: ArticleData) -> None:
    article.title = data.title.strip()
    article.body = data.body
    article.kind = data.kind
    article.body_html, article.body_text = render_markdown(data.body)


def _set_relations(article: KnowledgeArticle, data: ArticleData) -> None:
    names = _tag_names(data.tags)
    article.tags.set([Tag.objects.get_or_create(name=name)[0] for name in names])
    article.shares.set(data.shares)
    article.urgencies.set(data.urgencies)
    article.exception_requests.set(data.exception_requests)
    article.editors.set(data.editors)


def _revision(article: KnowledgeArticle, *, editor, reason: str) -> None:
    ArticleRevision.objects.create(
        article=article,
        version=article.version,
        title=article.title,
        body=article.body,
        tags=sorted(tag.name for tag in article.tags.all()),
        editor=editor,
        reason=reason,
    )


def _people_errors(*, actor, data: ArticleData, article: KnowledgeArticle | None) -> dict:
    """Editors must hold a role that writes knowledge; a link to an exception request the
    actor may not see is refused with the same words as an unknown id, so a guessed id
    tells nothing. Links already on the article stay as they are."""
    errors: dict[str, list[str]] = {}
    for editor in data.editors:
        if not rules.allowed(editor, "knowledge.write"):
            name = editor.get_full_name() or editor.get_username()
            errors.setdefault("editors", []).append(
                f"{name} may not write in the knowledge base (leadership and people without "
                "a role read it): choose an admin, a team lead or an exception owner"
            )
    linked = set(article.exception_requests.values_list("pk", flat=True)) if article else set()
    for request in data.exception_requests:
        if request.pk not in linked and not rules.allowed(actor, "exception.view", request):
            errors.setdefault("exception_requests", []).append(unknown_request(request.pk))
    return errors


def unknown_request(pk) -> str:
    """What an unknown exception request id gets (the API's words for a missing id)."""
    return f'Invalid pk "{pk}" - object does not exist.'


@transaction.atomic
def article_create(
    *,
    actor,
    data: ArticleData,
    reason: str = "",
    slug: str = "",
    check: bool = True,
    decision_for: ExceptionRequest | None = None,
) -> KnowledgeArticle:
    """A new article owned by `actor`. `check=False` is for system records (decisions)."""
    check_lengths({"body": data.body, "reason": reason}, _LENGTHS)
    if check:
        rules.require(actor, "knowledge.write")
    errors = article_validate(data)
    if check:
        errors.update(_people_errors(actor=actor, data=data, article=None))
    if errors:
        raise InvalidInput(errors)
    article = KnowledgeArticle(
        owner=actor, slug=slug or _unique_slug(data.title), decision_for=decision_for
    )
    _write(article, data)
    article.save()
    _set_relations(article, data)
    _revision(article, editor=actor, reason=reason or "Created")
    return article


@transaction.atomic
def article_update(
    *, actor, article: KnowledgeArticle, data: ArticleData, expected_version: int, reason: str = ""
) -> KnowledgeArticle:
    rules.require(actor, "article.edit", article)
    check_lengths({"body": data.body, "reason": reason}, _LENGTHS)
    if {editor.pk for editor in data.editors} != set(article.editors.values_list("pk", flat=True)):
        rules.require(actor, "article.editors", article)
    current = KnowledgeArticle.objects.select_for_update().get(pk=article.pk)
    if current.version != expected_version:
        raise VersionConflict(
            current=article_document(current),
            current_version=current.version,
            submitted={
                "title": data.title,
                "body": data.body,
                "kind": data.kind,
                "tags": _tag_names(data.tags),
            },
        )
    errors = article_validate(data)
    errors.update(_people_errors(actor=actor, data=data, article=current))
    if errors:
        raise InvalidInput(errors)
    _write(current, data)
    current.version = F("version") + 1
    current.save()
    current.refresh_from_db()
    _set_relations(current, data)
    _revision(current, editor=actor, reason=(reason or "").strip() or "Edited")
    return current


@transaction.atomic
def article_delete(*, actor, article: KnowledgeArticle) -> None:
    rules.require(actor, "article.delete", article)
    article.delete()


def article_record_decision(*, request: ExceptionRequest) -> KnowledgeArticle:
    """The decision record of a decided exception request (one per request): append-only
    (core.rules refuses every change), seen only by who may see the request."""
    slug = f"exception-{request.pk}-decision"
    existing = KnowledgeArticle.objects.filter(decision_for=request).first()
    if existing is not None:
        return existing
    verdict = "approved" if request.state != ExceptionRequest.State.DENIED else "denied"
    decider = request.decided_by
    who = (decider.get_full_name() or decider.get_username()) if decider else "the system"
    if request.kind == ExceptionRequest.Kind.TEMPORARY_CAPACITY:
        what = (
            f"{request.extra_instances} more {request.instance_type} for share "
            f"{request.share.name} of queue {request.queue}"
        )
    else:
        what = f"{request.get_kind_display().lower()} for jobs " + ", ".join(
            job.name for job in request.jobs.all()
        )
    body = (
        f"Exception request #{request.pk} from team **{request.team}** was **{verdict}** "
        f"by {who}.\n\n"
        f"- What: {what}\n"
        f"- Urgency: {request.urgency} (grants priority {request.urgency.priority}, "
        f"windows up to {request.urgency.max_window_hours} h)\n"
        f"- Window: {request.window_start:%Y-%m-%d %H:%M} to "
        f"{request.window_end:%Y-%m-%d %H:%M} UTC\n\n"
        f"## Justification\n\n{request.justification}\n\n"
        f"## Decision\n\n{request.decision_note or 'No note was given.'}\n"
    )
    data = ArticleData(
        title=f"Decision on exception #{request.pk}: {request.get_kind_display().lower()} for "
        f"{request.team} ({verdict})",
        body=body,
        kind=KnowledgeArticle.Kind.EXCEPTION,
        tags=["exception", "decision", verdict],
        shares=[request.share] if request.share_id else [],
        urgencies=[request.urgency],
        exception_requests=[request],
    )
    return article_create(
        actor=decider, data=data, reason="Recorded when the request was decided", slug=slug,
        check=False, decision_for=request,
    )  # fmt: skip
