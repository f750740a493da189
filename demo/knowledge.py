"""The demo's knowledge base: the glossary (following governance/glossary.py) and
twelve articles. Links name shares of the AWS sample queue and urgency names."""

from __future__ import annotations

from django.db import transaction

from fleet.models import QuotaShare, UrgencyDefinition
from governance.glossary import GLOSSARY
from governance.knowledge.services import ArticleData, article_create, article_update
from governance.models import KnowledgeArticle

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
        "slug": "workload-classes-philly",
        "title": "Workload classes: how long a run is protected, and how much notice it gets",
        "kind": KnowledgeArticle.Kind.INTERRUPTION,
        "tags": ["interruption-contract", "workload-class", "philly", "checkpointing"],
        "body": """Every job carries the interruption contract of its **workload class**,
copied when it is submitted: its definition's class, else its share's default class.

- **Minimum runtime (reclaim / in-share preemption):** for that long after each start
  the job is not chosen as a victim. A lender may wait that long for its capacity.
- **Grace:** a victim gets this much notice (SIGTERM) before its capacity is taken; it
  keeps the capacity meanwhile, so a lender also waits the grace.
- **Checkpoint on notice:** the seconds the job needs to save and exit after notice. A
  job that checkpoints on notice loses no work when it is stopped.

On the philly queue most teams use **standard-training** (60 s of notice, a checkpoint
within 30 s). vc-6214e9 uses *checkpointing-training*, vc-b436b2 *long-training*,
vc-ee9e8c *graceful-batch* and vc-7f04ca *protected-finetune*: see the workload classes
page for their figures, and each share's worst-case time to reclaim on its editor.

The dashboard's reclaim card shows what these contracts cost lenders (time to reclaim)
and what they saved borrowers (work checkpointed on notice, preemptions avoided).""",
    },
    {
        "slug": "allocation-philly",
        "title": "Allocation decision: Philly queue shares sized from virtual clusters",
        "kind": KnowledgeArticle.Kind.ALLOCATION,
        "tags": ["allocation", "philly"],
        "body": """The philly queue replays the Microsoft Philly trace. Each virtual cluster
becomes a share whose limit is 30 % of the cluster's GPU count (8 GPUs per node); the four
tiny clusters without a recorded size share one small share, vc-other.

The node counts come from the trace's published metadata. The bundled trace is an
extract of Philly's jobs: on every node it would keep the queue 5 to 20 % busy and no
share would ever wait for another's capacity, so the queue is sized to the trace's
demand. Its busy weeks contend: borrowing, reclaims and what a policy change does show.""",
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
    """The glossary and twelve demo articles. Idempotent: existing articles stay as
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
