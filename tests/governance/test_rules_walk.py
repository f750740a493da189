"""Every URL pattern and every API operation, as every identity, against the rules table.

The walk collects the URL patterns from Django's resolver and the API operations from
the OpenAPI schema, so a page or an operation added without a line here fails
`test_every_url_and_operation_is_walked`. Each one is sent by eight identities (an
anonymous visitor, an admin, a lead of team A, a lead of another team, a lead of team
A who is also an exception owner of its queue, an exception owner, leadership, and a
signed-in user without a role) with an empty body, each request in a savepoint that is
rolled back. What the table (core.rules) says decides the expected class:

- allowed: 2xx, a redirect that is not to the login page, or a 4xx that judges the
  input (400, 405 is never expected, 409);
- refused: 401, 403, 404, or a redirect to the login page.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from datetime import timedelta

import pytest
from django.db import transaction
from django.test import Client, override_settings
from django.urls import URLPattern, URLResolver, get_resolver, reverse
from django.utils import timezone
from drf_spectacular.generators import SchemaGenerator
from rest_framework.test import APIClient

from core import rules
from fleet.models import InstanceType, Job, WorkloadClass
from fleet.selectors import share_document
from governance.dashboards.csv import DATASETS
from governance.directory.models import GroupMapping
from governance.exceptions import services as exception_services
from governance.knowledge.services import ArticleData, article_create
from governance.models import ExceptionOwner, ExceptionRequest, PolicyChange
from governance.policy.services import share_data_from_document, share_update
from governance.whatif import services as whatif_services
from scheduler.services.job_definitions import DefinitionData, definition_register
from tests.factories import (
    JobFactory,
    JobQueueFactory,
    QuotaShareFactory,
    TeamFactory,
    UrgencyDefinitionFactory,
    UserFactory,
)

IDENTITIES = (
    "anonymous",
    "admin",
    "lead_a",
    "lead_b",
    "lead_owner",
    "owner",
    "leader",
    "nobody",
)
PUBLIC = ()  # no rule: anyone, signed in or not
NO_IDENTITY = ("nothing",)  # refused to every identity


@dataclass
class World:
    users: dict
    objects: dict = field(default_factory=dict)


@pytest.fixture(autouse=True)
def fast_passwords(settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


PACK_MONTH = "2026-01"


@pytest.fixture
def stored_pack(settings, tmp_path):
    """A stored leadership pack (its CSV part) to download, in a storage of its own."""
    from django.core.files.base import ContentFile
    from django.core.files.storage import default_storage

    from governance.dashboards.pack import PACK_ROOT

    settings.MEDIA_ROOT = str(tmp_path)
    name = f"{PACK_ROOT}/{PACK_MONTH}/signals-{PACK_MONTH}-csv.zip"
    assert default_storage.save(name, ContentFile(b"zip")) == name


@pytest.fixture
def job_areas(settings, tmp_path):
    """The jobs' files (their output) in a directory of the walk's own."""
    settings.JOB_CHECKPOINT_ROOT = tmp_path / "checkpoints"
    return settings.JOB_CHECKPOINT_ROOT


def _job_with_output(qs1, g5, now) -> Job:
    """A running job of qs1's team on a queue whose executor runs programs, with the
    output its attempt wrote (the walk's aws-sample queue is simulated: no output)."""
    from scheduler.executors.run_area import RunArea

    share = QuotaShareFactory(queue=JobQueueFactory(name="walk-process"), team=qs1.team)
    share.queue.executor = "process"
    share.queue.save(update_fields=["executor"])
    job = JobFactory(
        share=share, instance_type=g5, state=Job.State.RUNNING, started_at=now, attempt=1
    )
    log = RunArea.of(job.pk, 1).log
    log.parent.mkdir(parents=True)
    log.write_text("step 1\n")
    return job


@pytest.fixture
def world(aws_queue, stored_pack, job_areas) -> World:
    now = timezone.now()
    users = {
        "admin": UserFactory(username="walk-admin", roles=["admins"]),
        "lead_a": UserFactory(username="walk-lead-a", roles=["team_leads"]),
        "lead_b": UserFactory(username="walk-lead-b", roles=["team_leads"]),
        "lead_owner": UserFactory(
            username="walk-lead-owner", roles=["team_leads", "exception_owners"]
        ),
        "owner": UserFactory(username="walk-owner", roles=["exception_owners"]),
        "leader": UserFactory(username="walk-leader", roles=["leadership"]),
        "nobody": UserFactory(username="walk-nobody"),
    }
    other_admin = UserFactory(username="walk-admin-2", roles=["admins"])
    qs1, qs2 = aws_queue.shares.get(name="qs1"), aws_queue.shares.get(name="qs2")
    qs1.team.leads.add(users["lead_a"], users["lead_owner"])
    qs2.team.leads.add(users["lead_b"])
    ExceptionOwner.objects.create(user=users["owner"], queue=aws_queue)
    ExceptionOwner.objects.create(user=users["lead_owner"], queue=aws_queue)
    g5 = InstanceType.objects.get(name="ml.g5.xlarge")
    urgency = UrgencyDefinitionFactory(name="walk-deadline")
    job = JobFactory(
        share=qs1,
        instance_type=g5,
        state=Job.State.RUNNING,
        started_at=now,
        start_seq=1,
    )

    def capacity(**extra):
        return exception_services.RequestData(
            kind=ExceptionRequest.Kind.TEMPORARY_CAPACITY,
            team=qs1.team,
            urgency=urgency,
            justification="Launch fine-tune",
            window_start=now + timedelta(hours=1),
            window_end=now + timedelta(hours=4),
            share=qs1,
            instance_type=g5,
            extra_instances=1,
            **extra,
        )

    lead = users["lead_a"]
    submitted = exception_services.exception_request_create(
        actor=lead, data=capacity(), submit=True
    )
    draft = exception_services.exception_request_create(actor=lead, data=capacity())
    decided = exception_services.exception_request_create(actor=lead, data=capacity(), submit=True)
    exception_services.exception_request_approve(
        actor=users["owner"], request=decided, note="Fine for a day."
    )
    record = decided.articles.get(kind="EXCEPTION")
    article = article_create(
        actor=lead, data=ArticleData(title="Walk article", body="Why qs1 borrows.")
    )
    doc = share_document(qs2)
    doc["in_share_preemption"] = True
    share_update(
        actor=users["admin"],
        share=qs2,
        data=share_data_from_document(doc),
        reason="walk",
        expected_version=qs2.version,
    )
    comparison = whatif_services.comparison_create(actor=other_admin, queue=aws_queue)
    with override_settings(POLICY_CHANGES_NEED_REVIEW=True):
        proposals = {}
        for name, author in (("proposal", other_admin), ("own_proposal", users["admin"])):
            doc = share_document(qs1)
            doc["capacity_limits"] = {"ml.g5.xlarge": 2 if name == "proposal" else 3}
            proposals[name] = share_update(
                actor=author,
                share=qs1,
                data=share_data_from_document(doc),
                reason=f"walk {name}",
                expected_version=qs1.version,
            ).proposal
    definition = definition_register(
        actor=users["admin"],
        name="walk-definition",
        data=DefinitionData(
            queues=[aws_queue],
            command=["python", "-m", "train", "--steps", "{steps}"],
            parameters=[{"name": "steps", "type": "integer", "min": 1, "max": 100}],
        ),
        reason="walk",
    )
    world = World(users=users)
    world.objects.update(
        queue=aws_queue,
        share=qs1,
        team=TeamFactory(name="walk-team"),
        instance_type=g5,
        urgency=urgency,
        workload_class=WorkloadClass.objects.create(name="walk-class", grace=60),
        job=job,
        job_with_output=_job_with_output(qs1, g5, now),
        submitted=submitted,
        draft=draft,
        decided=decided,
        record=record,
        article=article,
        change=PolicyChange.objects.filter(share=qs2).latest("id"),
        comparison=comparison,
        exception_owner=ExceptionOwner.objects.get(user=users["owner"]),
        definition=definition,
        mapping=GroupMapping.objects.create(group="walk-group", kind="role", role="leadership"),
        **proposals,
    )
    return world


# What each page asks: (url name, variant) -> (actions, kwargs, object, methods).
# Every action listed must be allowed, each asked about the world's object `obj`.


@dataclass(frozen=True)
class Entry:
    actions: tuple[str, ...]
    kwargs: dict = field(default_factory=dict)  # kwarg -> world object (its pk) or a value
    obj: str | None = None
    methods: tuple[str, ...] = ("GET",)


def _pk(name):
    return ("pk", name)


POLICY_VIEW, POLICY_EDIT = ("policy.view",), ("policy.edit",)
PAGES: dict[tuple[str, str], Entry] = {
    ("healthz", ""): Entry(PUBLIC),
    # No role reads /metrics: off (404) by default; when on, a scrape token or an allowed
    # address, never a session (tests/governance/test_metrics_endpoint.py).
    ("metrics", ""): Entry(NO_IDENTITY),
    ("login", ""): Entry(PUBLIC),
    # OpenID Connect: off (404) unless OIDC_CLIENT_ID is set; when on, the provider's
    # redirects (tests/governance/directory/test_oidc_login.py).
    ("oidc_authentication_init", ""): Entry(NO_IDENTITY),
    ("oidc_authentication_callback", ""): Entry(NO_IDENTITY),
    ("logout", ""): Entry(PUBLIC, methods=("POST",)),
    ("lockouts", ""): Entry(("lockout.manage",), methods=("GET", "POST")),
    ("directory", ""): Entry(("directory.manage",), methods=("GET", "POST")),
    ("directory-mapping-delete", ""): Entry(
        ("directory.manage",), {"pk": _pk("mapping")}, methods=("POST",)
    ),
    ("profile", ""): Entry(("account.use",), methods=("GET", "POST")),
    ("tokens", ""): Entry(("account.use",), methods=("GET", "POST")),
    # Each identity revokes a token of its own (the `tokens` fixture's).
    ("token-revoke", ""): Entry(("account.use",), kwargs={"pk": _pk("token")}, methods=("POST",)),
    ("outbox", ""): Entry(("outbox.view",)),
    ("runner-list", ""): Entry(("runner.view",)),
    ("time-zone-detect", ""): Entry(("account.use",), methods=("POST",)),
    ("api-schema", ""): Entry(("account.use",)),
    ("api-docs", ""): Entry(("account.use",)),
    ("home", ""): Entry(("account.use",)),
    ("queue-list", ""): Entry(POLICY_VIEW),
    ("queue-detail", ""): Entry(POLICY_VIEW, {"pk": _pk("queue")}),
    ("queue-capacity", ""): Entry(POLICY_EDIT, {"pk": _pk("queue")}, methods=("GET", "POST")),
    ("queue-capacity-impact", ""): Entry(POLICY_EDIT, {"pk": _pk("queue")}, methods=("POST",)),
    ("queue-binding", ""): Entry(POLICY_EDIT, {"pk": _pk("queue")}, methods=("GET", "POST")),
    ("queue-binding-impact", ""): Entry(POLICY_EDIT, {"pk": _pk("queue")}, methods=("POST",)),
    ("queue-binding-legacy", ""): Entry(POLICY_EDIT, {"pk": _pk("queue"), "executor": "slurm"}),
    ("instance-type-list", ""): Entry(POLICY_EDIT),
    ("instance-type-binding", ""): Entry(
        POLICY_EDIT, {"pk": _pk("instance_type")}, methods=("GET", "POST")
    ),
    ("instance-type-binding-legacy", ""): Entry(
        POLICY_EDIT, {"pk": _pk("instance_type"), "executor": "slurm"}
    ),
    ("instance-type-price", ""): Entry(
        POLICY_EDIT, {"pk": _pk("instance_type")}, methods=("GET", "POST")
    ),
    ("share-create", ""): Entry(POLICY_EDIT, {"queue_pk": _pk("queue")}, methods=("GET", "POST")),
    ("share-impact", ""): Entry(POLICY_EDIT, {"queue_pk": _pk("queue")}, methods=("POST",)),
    ("policy-list", ""): Entry(POLICY_EDIT),
    ("proposal-list", ""): Entry(("proposal.view",)),
    **{
        (f"proposal-{step}", name): Entry(
            ("proposal.view", action), {"pk": _pk(name)}, name, methods=("POST",)
        )
        for step, action in (
            ("approve", "proposal.review"),
            ("reject", "proposal.review"),
            ("withdraw", "proposal.withdraw"),
        )
        for name in ("proposal", "own_proposal")
    },
    ("share-edit", ""): Entry(POLICY_EDIT, {"pk": _pk("share")}, methods=("GET", "POST")),
    ("history", ""): Entry(("history.view",)),
    ("history-revert", ""): Entry(POLICY_EDIT, {"pk": _pk("change")}, methods=("GET", "POST")),
    ("team-list", ""): Entry(POLICY_VIEW),
    ("team-create", ""): Entry(POLICY_EDIT, methods=("GET", "POST")),
    ("team-edit", ""): Entry(POLICY_EDIT, {"pk": _pk("team")}, methods=("GET", "POST")),
    ("urgency-list", ""): Entry(POLICY_VIEW),
    ("urgency-create", ""): Entry(POLICY_EDIT, methods=("GET", "POST")),
    ("urgency-edit", ""): Entry(POLICY_EDIT, {"pk": _pk("urgency")}, methods=("GET", "POST")),
    ("workload-class-list", ""): Entry(POLICY_VIEW),
    ("workload-class-create", ""): Entry(POLICY_EDIT, methods=("GET", "POST")),
    ("workload-class-edit", ""): Entry(
        POLICY_EDIT, {"pk": _pk("workload_class")}, methods=("GET", "POST")
    ),
    ("workload-class-impact", ""): Entry(
        POLICY_EDIT, {"pk": _pk("workload_class")}, methods=("POST",)
    ),
    ("workload-class-delete", ""): Entry(
        POLICY_EDIT, {"pk": _pk("workload_class")}, methods=("GET", "POST")
    ),
    ("exception-list", ""): Entry(("exception.list",)),
    ("exception-create", ""): Entry(("exception.file",), methods=("GET", "POST")),
    ("exception-urgency-help", ""): Entry(("exception.file",)),
    ("decision-queue", ""): Entry(("exception.decision_queue",)),
    ("exception-counts", ""): Entry(("exception.counts",)),
    ("exception-owners", ""): Entry(("exception_owner.manage",), methods=("GET", "POST")),
    ("exception-owner-remove", ""): Entry(
        ("exception_owner.manage",), {"pk": _pk("exception_owner")}, methods=("POST",)
    ),
    ("exception-detail", ""): Entry(("exception.view",), {"pk": _pk("submitted")}, "submitted"),
    ("exception-edit", ""): Entry(
        ("exception.view", "exception.edit"), {"pk": _pk("draft")}, "draft", ("GET", "POST")
    ),
    ("exception-withdraw", ""): Entry(
        ("exception.view", "exception.withdraw"), {"pk": _pk("submitted")}, "submitted", ("POST",)
    ),
    ("exception-submit", ""): Entry(
        ("exception.view", "exception.submit"), {"pk": _pk("draft")}, "draft", ("POST",)
    ),
    ("exception-approve", ""): Entry(
        ("exception.view", "exception.decide"), {"pk": _pk("submitted")}, "submitted", ("POST",)
    ),
    ("exception-deny", ""): Entry(
        ("exception.view", "exception.decide"), {"pk": _pk("submitted")}, "submitted", ("POST",)
    ),
    ("exception-revoke", ""): Entry(
        ("exception.view", "exception.revoke"), {"pk": _pk("decided")}, "decided", ("POST",)
    ),
    ("knowledge-search", ""): Entry(("knowledge.view",)),
    ("knowledge-create", ""): Entry(("knowledge.write",), methods=("GET", "POST")),
    ("knowledge-article", "article"): Entry(
        ("knowledge.view", "article.view"), {"slug": ("slug", "article")}, "article"
    ),
    ("knowledge-article", "decision record"): Entry(
        ("knowledge.view", "article.view"), {"slug": ("slug", "record")}, "record"
    ),
    ("knowledge-edit", "article"): Entry(
        ("article.view", "article.edit"), {"slug": ("slug", "article")}, "article", ("GET", "POST")
    ),
    ("knowledge-edit", "decision record"): Entry(
        ("article.view", "article.edit"), {"slug": ("slug", "record")}, "record", ("GET", "POST")
    ),
    ("dashboard", ""): Entry(("dashboard.view",)),
    ("dashboard-csv", ""): Entry(("dashboard.view",), {"dataset": next(iter(DATASETS))}),
    ("dashboard-refresh", ""): Entry(("dashboard.refresh",), methods=("POST",)),
    ("dashboard-pack-make", ""): Entry(("dashboard.view",), methods=("POST",)),
    ("dashboard-pack", ""): Entry(("dashboard.view",), {"month": PACK_MONTH, "kind": "csv"}),
    ("queue-policy-code", ""): Entry(POLICY_VIEW, {"pk": _pk("queue")}),
    ("queue-policy-download", ""): Entry(POLICY_VIEW, {"pk": _pk("queue"), "format": "native"}),
    ("queue-policy-plan", ""): Entry(POLICY_EDIT, {"pk": _pk("queue")}, methods=("POST",)),
    ("queue-policy-apply", ""): Entry(POLICY_EDIT, {"pk": _pk("queue")}, methods=("POST",)),
    ("whatif-list", ""): Entry(("whatif.use",)),
    ("whatif-create", ""): Entry(("whatif.use",), methods=("POST",)),
    ("whatif-detail", ""): Entry(("whatif.use",), {"pk": _pk("comparison")}),
    ("whatif-progress", ""): Entry(("whatif.use",), {"pk": _pk("comparison")}),
    ("whatif-share-edit", ""): Entry(
        ("whatif.use",), {"pk": _pk("comparison"), "index": 0}, methods=("GET", "POST")
    ),
    **{
        (f"whatif-{step}", ""): Entry(("whatif.use",), {"pk": _pk("comparison")}, methods=("POST",))
        for step in (
            "reset",
            "workload",
            "mapping",
            "contracts",
            "run",
            "cancel",
            "save",
            "propose",
            "apply",
        )
    },
    ("whatif-review", ""): Entry(
        ("whatif.use", "whatif.review"), {"pk": _pk("comparison")}, "comparison", ("POST",)
    ),
    ("job-list", ""): Entry(("job.view",)),
    ("job-create", ""): Entry(("job.submit",), methods=("GET", "POST")),
    ("job-decisions", ""): Entry(("job.view",)),
    ("job-detail", ""): Entry(("job.view",), {"pk": _pk("job")}),
    ("job-log-download", ""): Entry(
        ("job.view", "job.logs.view"),
        {"pk": _pk("job_with_output"), "attempt": 1},
        "job_with_output",
    ),
    **{
        (f"job-{step}", ""): Entry(
            ("job.view", "job.manage"), {"pk": _pk("job")}, "job", methods=("POST",)
        )
        for step in ("priority", "terminate", "decision")
    },
    ("queue-live", ""): Entry(("job.view",), {"pk": _pk("queue")}),
    ("definition-list", ""): Entry(("job.submit",)),
    ("definition-detail", ""): Entry(("job.submit",), {"pk": _pk("definition")}),
    ("definition-create", ""): Entry(("job_definition.manage",), methods=("GET", "POST")),
    ("definition-revise", ""): Entry(
        ("job_definition.manage",), {"pk": _pk("definition")}, methods=("GET", "POST")
    ),
    ("definition-retire", ""): Entry(
        ("job_definition.manage",), {"pk": _pk("definition")}, methods=("POST",)
    ),
    # "View as JSON / YAML" (governance.as_data): what the API's detail operation asks.
    ("as-data", "queue"): Entry(POLICY_VIEW, {"kind": "queue", "pk": _pk("queue")}),
    ("as-data", "share"): Entry(POLICY_VIEW, {"kind": "share", "pk": _pk("share")}),
    ("as-data", "job"): Entry(("job.view",), {"kind": "job", "pk": _pk("job")}),
    ("as-data", "definition"): Entry(
        ("job.submit",), {"kind": "definition", "pk": _pk("definition")}
    ),
    ("as-data", "exception"): Entry(
        ("exception.list", "exception.view"),
        {"kind": "exception", "pk": _pk("submitted")},
        "submitted",
    ),
    ("as-data", "article"): Entry(
        ("knowledge.view", "article.view"), {"kind": "article", "pk": _pk("article")}, "article"
    ),
    ("as-data", "decision record"): Entry(
        ("knowledge.view", "article.view"), {"kind": "article", "pk": _pk("record")}, "record"
    ),
}

# API operations, by operationId: (actions, the object in the path, the object asked about).
_LIST, _VIEW = ("exception.list",), ("exception.list", "exception.view")
API: dict[str, tuple[tuple[str, ...], str | None, str | None]] = {
    "v1_exception_requests_list": (_LIST, None, None),
    "v1_exception_requests_create": (("exception.file",), None, None),
    "v1_exception_requests_retrieve": (_VIEW, "submitted", "submitted"),
    "v1_exception_requests_approve_create": (
        (*_VIEW, "exception.decide"),
        "submitted",
        "submitted",
    ),
    "v1_exception_requests_deny_create": ((*_VIEW, "exception.decide"), "submitted", "submitted"),
    "v1_exception_requests_revoke_create": ((*_VIEW, "exception.revoke"), "decided", "decided"),
    "v1_exception_requests_submit_create": ((*_VIEW, "exception.submit"), "draft", "draft"),
    "v1_exception_requests_withdraw_create": (
        (*_VIEW, "exception.withdraw"),
        "submitted",
        "submitted",
    ),
    "v1_exception_requests_counts_retrieve": (("exception.counts",), None, None),
    "v1_job_definitions_list": (("job.submit",), None, None),
    "v1_job_definitions_create": (("job_definition.manage",), None, None),
    "v1_job_definitions_retrieve": (("job.submit",), "definition", None),
    "v1_job_definitions_retire_create": (("job_definition.manage",), "definition", None),
    "v1_job_definitions_revisions_list": (("job.submit",), "definition", None),
    "v1_job_definitions_revisions_create": (("job_definition.manage",), "definition", None),
    "v1_jobs_list": (("job.view",), None, None),
    "v1_jobs_create": (("job.view", "job.submit"), None, None),
    "v1_jobs_bulk_create": (("job.view", "job.submit"), None, None),
    "v1_jobs_retrieve": (("job.view",), "job", None),
    "v1_jobs_events_list": (("job.view",), "job", None),
    "v1_jobs_priority_create": (("job.view", "job.manage"), "job", "job"),
    "v1_jobs_terminate_create": (("job.view", "job.manage"), "job", "job"),
    "v1_jobs_estimate_create": (("job.view", "job.estimate"), None, None),
    "v1_queues_pending_retrieve": (("job.pending.view",), "queue", None),
    "v1_knowledge_articles_list": (("knowledge.view",), None, None),
    "v1_knowledge_articles_create": (("knowledge.write",), None, None),
    "v1_policy_changes_list": (("history.view",), None, None),
    "v1_policy_changes_retrieve": (("history.view",), "change", None),
    "v1_policy_changes_revert_create": (POLICY_EDIT, "change", None),
    "v1_instance_types_price_create": (POLICY_EDIT, "instance_type", None),
    "v1_policy_proposals_list": (("proposal.view",), None, None),
    "v1_policy_plan_create": (POLICY_EDIT, None, None),
    "v1_policy_apply_create": (POLICY_EDIT, None, None),
    "v1_queues_export_retrieve": (POLICY_VIEW, "queue", None),
    "v1_tokens_list": (("account.use",), None, None),
    "v1_tokens_create": (("account.use",), None, None),
    "v1_tokens_destroy": (("account.use",), "token", None),
    "v1_signals_retrieve": (("dashboard.view",), None, None),
    "v1_what_if_create": (("whatif.use",), None, None),
    "v1_what_if_retrieve": (("whatif.use",), "comparison", None),
}
for _resource, _obj in (
    ("instance_types", "instance_type"),
    ("queues", "queue"),
    ("shares", "share"),
    ("teams", "team"),
    ("urgency_definitions", "urgency"),
    ("workload_classes", "workload_class"),
):
    API[f"v1_{_resource}_list"] = (POLICY_VIEW, None, None)
    API[f"v1_{_resource}_create"] = (POLICY_EDIT, None, None)
    API[f"v1_{_resource}_retrieve"] = (POLICY_VIEW, _obj, None)
    for _write in ("update", "partial_update", "destroy"):
        API[f"v1_{_resource}_{_write}"] = (POLICY_EDIT, _obj, None)
# Operations asked about two objects each: an article and a decision record (seen only
# by who may see its request); another admin's proposal and the admin's own.
_ARTICLES, _PROPOSALS = ("article", "record"), ("proposal", "own_proposal")
API_VARIANTS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "v1_knowledge_articles_retrieve": (("knowledge.view", "article.view"), _ARTICLES),
    "v1_knowledge_articles_partial_update": (
        ("knowledge.view", "article.view", "article.edit"),
        _ARTICLES,
    ),
    "v1_knowledge_articles_destroy": (
        ("knowledge.view", "article.view", "article.delete"),
        _ARTICLES,
    ),
    "v1_policy_proposals_retrieve": (("proposal.view",), _PROPOSALS),
    "v1_policy_proposals_approve_create": (("proposal.view", "proposal.review"), _PROPOSALS),
    "v1_policy_proposals_reject_create": (("proposal.view", "proposal.review"), _PROPOSALS),
    "v1_policy_proposals_withdraw_create": (("proposal.view", "proposal.withdraw"), _PROPOSALS),
}


def _walk(patterns, prefix=""):
    for pattern in patterns:
        if isinstance(pattern, URLResolver):
            yield from _walk(pattern.url_patterns, prefix + str(pattern.pattern))
        elif isinstance(pattern, URLPattern):
            yield prefix + str(pattern.pattern), pattern.name


def url_patterns() -> list[tuple[str, str]]:
    return list(_walk(get_resolver().url_patterns))


@functools.cache
def api_operations() -> list[tuple[str, str, str]]:
    """(method, path, operationId) of every operation the OpenAPI schema documents."""
    schema = SchemaGenerator().get_schema(request=None, public=True)
    return [
        (method.upper(), path, operation["operationId"])
        for path, operations in schema["paths"].items()
        for method, operation in operations.items()
    ]


# Requests to send: (label, method, url, actions, object name, api?).


@dataclass(frozen=True)
class Probe:
    label: str
    method: str
    url: str
    actions: tuple[str, ...]
    obj: str | None
    api: bool


def _value(world: World, identity: str, spec):
    if spec == ("pk", "token"):
        return world.objects["tokens"][identity]
    if isinstance(spec, tuple):
        kind, name = spec
        obj = world.objects[name]
        return obj.slug if kind == "slug" else obj.pk
    return spec


def probes(world: World, identity: str) -> list[Probe]:
    out = []
    for (name, variant), entry in PAGES.items():
        kwargs = {key: _value(world, identity, spec) for key, spec in entry.kwargs.items()}
        url = reverse(name, kwargs=kwargs)
        for method in entry.methods:
            label = f"{method} {name}{f' ({variant})' if variant else ''}"
            out.append(Probe(label, method, url, entry.actions, entry.obj, api=False))
    out.append(Probe("GET api-not-found", "GET", "/api/v1/no-such-thing/", NO_IDENTITY, None, True))
    for method, path, operation in api_operations():
        variants = [(operation, *API[operation])] if operation in API else []
        if operation in API_VARIANTS:
            actions, names = API_VARIANTS[operation]
            variants = [(f"{operation} ({name})", actions, name, name) for name in names]
        for label, actions, path_obj, obj in variants:
            url = path
            if path_obj == "token":
                url = path.replace("{id}", str(world.objects["tokens"][identity]))
            elif path_obj:
                url = path.replace("{id}", str(world.objects[path_obj].pk))
            out.append(Probe(f"{method} {label}", method, url, actions, obj, api=True))
    return out


def expected_allowed(world: World, identity: str, probe: Probe) -> bool:
    if probe.actions == NO_IDENTITY:
        return False
    if probe.actions == PUBLIC:
        return True
    user = world.users.get(identity)
    if user is None:
        return False
    obj = world.objects[probe.obj] if probe.obj else None
    return all(rules.allowed(user, action, obj) for action in probe.actions)


LOGIN = re.compile(r"^/accounts/login/")


def outcome(response, *, public: bool = False) -> str:
    status = response.status_code
    if public:
        return "allowed" if status < 400 else "refused"
    if status >= 500:
        return "error"
    if status in (401, 403, 404):
        return "refused"
    if 300 <= status < 400:
        return "refused" if LOGIN.match(response.get("Location", "")) else "allowed"
    if status in (405, 429):
        return "error"
    return "allowed"


def _client(world: World, identity: str, *, api: bool):
    client = APIClient() if api else Client()
    user = world.users.get(identity)
    if user is not None:
        client.force_login(user)
    return client


def send(client, probe: Probe):
    method = probe.method.lower()
    if probe.api:
        if method in ("get", "delete"):
            return getattr(client, method)(probe.url)
        return getattr(client, method)(probe.url, {}, format="json")
    return client.get(probe.url) if method == "get" else client.post(probe.url, {})


@pytest.fixture
def tokens(world):
    from accounts.tokens import token_issue

    world.objects["tokens"] = {
        identity: token_issue(user=user, name="walk")[0].pk
        for identity, user in world.users.items()
    }
    world.objects["tokens"]["anonymous"] = max(world.objects["tokens"].values()) + 1
    return world


NOT_IN_SCHEMA = {"api-schema", "api-docs", "api-not-found"}


def _template(route: str) -> str:
    """A URL pattern as the schema spells its path: `api/v1/jobs/{id}/`."""
    route = route.replace("^", "").replace("$", "")
    return re.sub(r"\(\?P<\w+>[^)]*\)|<[^>]+>", "{id}", route)


def test_every_url_and_operation_is_walked():
    """A new page or operation must say here what it asks of the table."""
    operations = api_operations()
    documented = {path.lstrip("/") for _, path, _ in operations}
    walked_pages = {name for name, _variant in PAGES}
    missing_pages, undocumented = [], []
    for route, name in url_patterns():
        if _template(route).startswith("api/") and name not in NOT_IN_SCHEMA:
            if _template(route) not in documented:
                undocumented.append(f"{name} ({route})")
        elif name not in walked_pages and name != "api-not-found":
            missing_pages.append(f"{name} ({route})")
    assert missing_pages == [], f"pages without a line in PAGES: {missing_pages}"
    assert undocumented == [], f"API routes the schema does not document: {undocumented}"
    unknown = sorted({op for _, _, op in operations} - set(API) - set(API_VARIANTS))
    assert unknown == [], f"API operations without a line in API: {unknown}"


@pytest.mark.slow
@pytest.mark.django_db
@pytest.mark.parametrize("identity", IDENTITIES)
def test_each_identity_gets_what_the_table_says(world, tokens, identity):
    mismatches = []
    sent = 0
    for probe in probes(world, identity):
        expected = "allowed" if expected_allowed(world, identity, probe) else "refused"
        client = _client(world, identity, api=probe.api)
        with transaction.atomic():
            try:
                response = send(client, probe)
                got = outcome(response, public=probe.actions == PUBLIC)
                status = response.status_code
            except Exception as error:  # noqa: BLE001 - a crash is a finding, reported below
                got, status = "error", repr(error)[:120]
            transaction.set_rollback(True)
        sent += 1
        if got != expected:
            mismatches.append(f"{probe.label}: expected {expected}, got {status}")
    assert sent >= 100
    assert mismatches == [], f"{identity}: " + "\n".join(mismatches)
