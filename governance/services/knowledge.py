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

from governance import rules
from governance.errors import InvalidInput
from governance.glossary import GLOSSARY
from governance.models import (
    ArticleRevision,
    ExceptionRequest,
    KnowledgeArticle,
    QuotaShare,
    Tag,
    UrgencyDefinition,
)
from governance.services.policy import VersionConflict

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
    (governance.rules refuses every change), seen only by who may see the request."""
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


# The demo's articles. Links name shares of the AWS sample queue and urgency names.

GLOSSARY_SLUG = "glossary"


def glossary_body() -> str:
    lines = [
        "The terms the product uses, with the same explanations its pages show in their "
        "tooltips. If an explanation is unclear or missing, tell a platform admin.\n"
    ]
    for name, explanation in GLOSSARY.items():
        lines.append(f"**{name}**\n: {explanation}\n")
    return "\n".join(lines)


SEED_ARTICLES: tuple[dict, ...] = (
    {
        "slug": "interruption-contract-qs1",
        "title": "Interruption contract: vision-research (qs1)",
        "kind": KnowledgeArticle.Kind.INTERRUPTION,
        "tags": ["interruption-contract", "aws-sample", "borrowing"],
        "shares": ["qs1"],
        "body": """Share **qs1** belongs to vision-research and uses LEND_AND_BORROW with a
borrow limit of 200%: besides its one ml.g5.xlarge it may borrow up to two idle instances
of the other shares.

## What the team accepts

- Jobs running on borrowed instances can be **reclaimed at any time** when qs2 or qs3
  submit work. Expect a preemption within a minute of their submission.
- Borrowed jobs must checkpoint at least every 10 minutes, so a reclaim costs at most
  10 minutes of lost work plus the restart overhead.
- In-share preemption is on: a higher-priority vision job stops a lower-priority one.

## Why

The vision team runs many short sweeps that finish well inside a checkpoint interval;
borrowing idle capacity more than doubles its throughput at night and over weekends.

Who may change it: the platform admins, after the quarterly capacity review.""",
    },
    {
        "slug": "interruption-contract-qs2",
        "title": "Interruption contract: nlp-platform (qs2)",
        "kind": KnowledgeArticle.Kind.INTERRUPTION,
        "tags": ["interruption-contract", "aws-sample", "lending"],
        "shares": ["qs2"],
        "body": """Share **qs2** belongs to nlp-platform and uses LEND: its idle instance is
lent to qs1, and it never borrows.

## What the team is promised

- When an nlp-platform job is submitted, borrowed work on its instance is reclaimed and
  the job starts within one scheduling pass (about a minute).
- The lender's wait for a reclaim is tracked on the leadership dashboard; if the
  median passes five minutes the lending arrangement is reviewed.

## Why

nlp-platform trains in bursts before releases and is idle in between. Lending keeps its
instance busy without delaying its own bursts.""",
    },
    {
        "slug": "interruption-contract-qs3",
        "title": "Interruption contract: speech-production (qs3)",
        "kind": KnowledgeArticle.Kind.INTERRUPTION,
        "tags": ["interruption-contract", "aws-sample", "reserve"],
        "shares": ["qs3"],
        "body": """Share **qs3** belongs to speech-production and uses RESERVE: its instance is
never lent, so a production retrain starts at once even when the queue is busy.

## The trade-off

The reserved instance sits idle most of the week. That idle capacity is the price of a
guaranteed start for customer-facing speech models, whose retrains follow incidents.

## Review

Speech production reviews the reservation each quarter with the utilisation figures;
switching to LEND is the default if the instance was idle more than 80% of the time.""",
    },
    {
        "slug": "reclaim-policy",
        "title": "Reclaim policy: how lent capacity is taken back",
        "kind": KnowledgeArticle.Kind.RECLAIM,
        "tags": ["reclaim", "preemption", "policy"],
        "shares": ["qs1", "qs2"],
        "body": """When a share that lent its idle instances submits work, the scheduler
**reclaims**: it preempts jobs running on borrowed capacity until the owner's job fits.

## Which jobs are chosen

1. Only jobs running beyond their own share's limit (borrowed) are candidates.
2. Among them, the lowest priority first, then the most recently started.
3. Jobs protected by an active preemption-protection exception are never chosen.

## Assumptions we rely on

- Borrowing teams checkpoint often enough that a reclaim loses little work.
- A preempted job is restarted automatically up to its retry bound.

Who may change it: platform admins; changes are announced a week ahead.""",
    },
    {
        "slug": "urgency-policy",
        "title": "Urgency policy: which urgency to invoke, and when",
        "kind": KnowledgeArticle.Kind.URGENCY,
        "tags": ["urgency", "exceptions", "policy"],
        "urgencies": [
            "Production incident",
            "Conference deadline",
            "Customer escalation",
            "Planned large run",
        ],
        "body": """Every exception request names one urgency definition from the shared
catalogue. The definition fixes the priority it grants, the longest window, and which kinds
of exception it allows.

| Urgency | Use it when | Longest window |
|---|---|---|
| Production incident | a serving model is broken and a fix must train now | 24 h |
| Conference deadline | a fixed external date needs final experiments | 72 h |
| Customer escalation | a customer commitment is at risk | 48 h |
| Planned large run | a long run agreed at the capacity review | 168 h |

Invoking an urgency that does not fit is the most common reason for a denial. When in
doubt, ask an exception owner before filing.""",
    },
    {
        "slug": "allocation-aws-sample",
        "title": "Allocation decision: one instance per team in the AWS sample queue",
        "kind": KnowledgeArticle.Kind.ALLOCATION,
        "tags": ["allocation", "aws-sample"],
        "shares": ["qs1", "qs2", "qs3"],
        "body": """The aws-sample queue has three ml.g5.xlarge instances, split evenly: one
each for vision-research (qs1), nlp-platform (qs2) and speech-production (qs3).

## Why an even split

The three teams had comparable demand in the last two quarters, and the strategies
(LEND_AND_BORROW, LEND, RESERVE) already give each team the behaviour it needs. Uneven
limits were considered and rejected: borrowing covers vision's peaks without taking
guaranteed capacity from the others.""",
    },
    {
        "slug": "checkpointing-expectations",
        "title": "Checkpointing expectations for preemptible work",
        "kind": KnowledgeArticle.Kind.INTERRUPTION,
        "tags": ["checkpointing", "preemption", "lost-work"],
        "body": """Any job that may run on borrowed capacity can be preempted. Lost work is
the compute since its last checkpoint.

- Checkpoint at least every **10 minutes** on borrowed capacity.
- Keep the restart overhead (loading the checkpoint, warm-up) under 2 minutes.
- Jobs that cannot checkpoint should run within their share's own limit, or ask for a
  preemption-protection exception under the *Planned large run* urgency.""",
    },
    {
        "slug": "allocation-philly",
        "title": "Allocation decision: Philly queue shares sized from virtual clusters",
        "kind": KnowledgeArticle.Kind.ALLOCATION,
        "tags": ["allocation", "philly"],
        "body": """The philly queue replays the Microsoft Philly trace. Each virtual cluster
becomes a share whose limit is the cluster's GPU count; the four tiny clusters without a
recorded size share one small share, vc-other.

The sizes come from the trace's own metadata, so replayed waiting times can be compared
with the published analysis.""",
    },
    {
        "slug": "exception-process",
        "title": "How exception requests are filed and decided",
        "kind": KnowledgeArticle.Kind.EXCEPTION,
        "tags": ["exceptions", "process"],
        "body": """A team lead files a request for a team they lead: a priority raise for named
jobs, temporary extra capacity for a share, or protection from preemption for running jobs.

1. The request names an urgency definition, a justification and a window.
2. It goes to the exception owners of its queue or share. Nobody decides their own request.
3. The owner sees an impact preview computed by the scheduler, and approves or denies with
   a note.
4. An approved exception takes effect at the window's start and is taken back at its end,
   through the same policy services as an admin's edit. Every step is in the history.""",
    },
    {
        "slug": "retry-bounds",
        "title": "Retry bounds and repeated yielders",
        "kind": KnowledgeArticle.Kind.RECLAIM,
        "tags": ["retries", "preemption"],
        "body": """A preempted job restarts automatically until its retry bound is spent; then
it fails and needs a person to act. The queue's default bound applies to jobs without
their own.

Jobs preempted three or more times are *repeated yielders*. They appear on the leadership
dashboard: usually they are long jobs on borrowed capacity that should run within their
own share's limit instead.""",
    },
    {
        "slug": "in-share-preemption-qs1",
        "title": "Why in-share preemption is on for qs1",
        "kind": KnowledgeArticle.Kind.ALLOCATION,
        "tags": ["in-share-preemption", "aws-sample"],
        "shares": ["qs1"],
        "body": """vision-research asked for in-share preemption so that a high-priority
pre-training job never waits behind the team's own low-priority sweeps.

The team accepted that its sweeps are stopped by its own urgent work; the sweeps
checkpoint every few minutes, so the cost is small. Other teams are not affected: in-share
preemption only ever stops jobs of the same share.""",
    },
)


@transaction.atomic
def seed_knowledge(*, actor) -> list[KnowledgeArticle]:
    """The glossary and a dozen demo articles. Idempotent: existing articles stay as
    they are, except the glossary, which follows governance/glossary.py."""
    articles = [_seed_glossary(actor)]
    shares = {share.name: share for share in QuotaShare.objects.filter(queue__name="aws-sample")}
    urgencies = {urgency.name: urgency for urgency in UrgencyDefinition.objects.all()}
    for spec in SEED_ARTICLES:
        existing = KnowledgeArticle.objects.filter(slug=spec["slug"]).first()
        if existing is not None:
            articles.append(existing)
            continue
        data = ArticleData(
            title=spec["title"],
            body=spec["body"],
            kind=spec["kind"],
            tags=spec["tags"],
            shares=[shares[name] for name in spec.get("shares", []) if name in shares],
            urgencies=[urgencies[n] for n in spec.get("urgencies", []) if n in urgencies],
        )
        articles.append(article_create(actor=actor, data=data, reason="Seeded", slug=spec["slug"]))
    return articles


def _seed_glossary(actor) -> KnowledgeArticle:
    data = ArticleData(
        title="Glossary",
        body=glossary_body(),
        kind=KnowledgeArticle.Kind.REFERENCE,
        tags=["glossary", "reference"],
    )
    existing = KnowledgeArticle.objects.filter(slug=GLOSSARY_SLUG).first()
    if existing is None:
        return article_create(actor=actor, data=data, reason="Seeded", slug=GLOSSARY_SLUG)
    if existing.body == data.body:
        return existing
    return article_update(
        actor=actor,
        article=existing,
        data=data,
        expected_version=existing.version,
        reason="The glossary changed",
    )
