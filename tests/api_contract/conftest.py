"""Driving the whole API in-process: Django's WSGI application on the test database, a
signed-in identity, and a small fleet so that ids in paths resolve to real objects."""

from collections import Counter
from dataclasses import dataclass, field
from datetime import timedelta

import pytest
from django.conf import settings as django_settings
from django.core.handlers.wsgi import WSGIHandler
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from django.middleware.csrf import _get_new_csrf_string
from django.test import Client
from django.utils import timezone
from drf_spectacular.generators import SchemaGenerator

from fleet.models import QuotaShare, Team, WorkloadClass
from fleet.selectors import share_document
from governance.models import ExceptionRequest, KnowledgeArticle
from governance.policy.services import share_data_from_document, share_update
from tests.api_contract.summary import RESPONSES
from tests.factories import JobFactory, UrgencyDefinitionFactory, UserFactory, aws_sample_queue


def pytest_terminal_summary(terminalreporter):
    if not RESPONSES:
        return
    for identity in sorted({identity for identity, _ in RESPONSES}):
        rows = {op: counts for (who, op), counts in RESPONSES.items() if who == identity}
        statuses = sum(rows.values(), Counter())
        terminalreporter.write_line(
            f"schemathesis as {identity}: {len(rows)} operations, "
            f"{sum(statuses.values())} requests, by status "
            + ", ".join(f"{code}: {n}" for code, n in sorted(statuses.items()))
        )


@pytest.fixture(scope="session")
def openapi_document():
    return SchemaGenerator().get_schema(request=None, public=True)


@pytest.fixture
def wsgi_app(db, settings):
    """Django's WSGI handler, without the per-request connection recycling that would
    close the test's transaction (django.test.Client leaves it out too), and without
    throttles: thousands of generated requests are not a client misbehaving."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    settings.REST_FRAMEWORK = {
        **django_settings.REST_FRAMEWORK,
        "DEFAULT_THROTTLE_RATES": {"read": None, "write": None, "anon": None},
    }
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield WSGIHandler()
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


@dataclass
class Fleet:
    admin: object
    lead: object
    queue: object
    share: object
    urgency: object
    job: object
    sessions: dict = field(default_factory=dict)

    def references(self) -> dict:
        """Body field -> a value naming an object that exists (the type must match the
        generated value's for it to be used)."""
        return {
            "queue": self.queue.pk,
            "share": self.share.pk,
            "urgency": self.urgency.pk,
            "team": self.share.team.name,
            "instance_type": "ml.g5.xlarge",
            "capacity": {"ml.g5.xlarge": 2},
            "capacity_limits": {"ml.g5.xlarge": 1},
            "members": [self.lead.username],
            "leads": [self.lead.username],
            "editors": [self.lead.username],
            "invokers": [self.share.team.name],
            "jobs": [self.job.pk],
            "shares": [self.share.pk],
            "workload_class": "batch",
            "default_workload_class": "batch",
        }

    def session(self, user) -> tuple[dict[str, str], dict[str, str]]:
        """Cookies and headers of a browser session of `user`, with the CSRF token DRF
        asks sessions for on writes."""
        if user.pk not in self.sessions:
            client = Client()
            client.force_login(user)
            csrf = _get_new_csrf_string()
            cookies = {
                django_settings.SESSION_COOKIE_NAME: client.cookies[
                    django_settings.SESSION_COOKIE_NAME
                ].value,
                django_settings.CSRF_COOKIE_NAME: csrf,
            }
            self.sessions[user.pk] = (cookies, {"X-CSRFToken": csrf})
        return self.sessions[user.pk]


@pytest.fixture
def fleet(db) -> Fleet:
    """The AWS sample queue, its teams (one led by `lead`), an urgency, a job, a policy
    change, an exception request and an article: one of each thing a path can name."""
    admin = UserFactory(username="contract-admin", roles=["admins"])
    lead = UserFactory(username="contract-lead", roles=["team_leads"])
    queue = aws_sample_queue()
    qs1 = QuotaShare.objects.get(queue=queue, name="qs1")
    Team.objects.get(name="team-qs1").leads.add(lead)
    urgency = UrgencyDefinitionFactory(name="Deadline")
    WorkloadClass.objects.create(name="batch", min_runtime_reclaim=600, grace=60)
    job = JobFactory(share=qs1, name="contract-job")
    doc = share_document(qs1)
    share_update(
        actor=admin,
        share=qs1,
        data=share_data_from_document({**doc, "borrow_limit": 100}, team=qs1.team),
        reason="seed a change",
        expected_version=qs1.version,
    )
    now = timezone.now()
    ExceptionRequest.objects.create(
        kind=ExceptionRequest.Kind.TEMPORARY_CAPACITY,
        team=qs1.team,
        queue=queue,
        share=qs1,
        instance_type=qs1.limits.get().instance_type,
        extra_instances=1,
        urgency=urgency,
        justification="launch",
        window_start=now,
        window_end=now + timedelta(hours=2),
        requested_by=lead,
        state=ExceptionRequest.State.SUBMITTED,
        submitted_at=now,
    )
    KnowledgeArticle.objects.create(
        title="Why qs1 borrows", slug="why-qs1-borrows", body="Because.", owner=admin
    )
    return Fleet(admin=admin, lead=lead, queue=queue, share=qs1, urgency=urgency, job=job)
