"""The scene of the exception tests: the AWS sample queue, its team leads, an owner
scoped to the queue, an urgency, running and waiting jobs, and logged-in clients."""

from dataclasses import dataclass
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from fleet.models import InstanceType, Job
from governance.exceptions.services import RequestData, exception_request_create
from governance.models import ExceptionOwner, ExceptionRequest
from tests.factories import JobFactory, UrgencyDefinitionFactory, UserFactory


@pytest.fixture(autouse=True)
def fast_passwords(settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@dataclass
class Scene:
    queue: object
    qs1: object
    qs2: object
    g5: object
    lead: object
    owner: object
    urgency: object
    running: object
    waiting: object
    now: object

    def capacity(self, **overrides) -> RequestData:
        values = {
            "kind": ExceptionRequest.Kind.TEMPORARY_CAPACITY,
            "team": self.qs1.team,
            "urgency": self.urgency,
            "justification": "Launch fine-tune",
            "window_start": self.now - timedelta(minutes=1),
            "window_end": self.now + timedelta(hours=4),
            "share": self.qs1,
            "instance_type": self.g5,
            "extra_instances": 1,
        }
        values.update(overrides)
        return RequestData(**values)

    def jobs(self, kind=ExceptionRequest.Kind.PRIORITY_RAISE, **overrides) -> RequestData:
        values = {
            "kind": kind,
            "team": self.qs1.team,
            "urgency": self.urgency,
            "justification": "Deadline",
            "window_start": self.now - timedelta(minutes=1),
            "window_end": self.now + timedelta(hours=4),
            "jobs": [self.running],
        }
        values.update(overrides)
        return RequestData(**values)

    def file(self, data=None, *, submit=True, actor=None) -> ExceptionRequest:
        return exception_request_create(
            actor=actor or self.lead, data=data or self.capacity(), submit=submit, now=self.now
        )


@pytest.fixture
def scene(aws_queue, team_lead, exception_owner) -> Scene:
    qs1 = aws_queue.shares.get(name="qs1")
    qs2 = aws_queue.shares.get(name="qs2")
    qs1.team.leads.add(team_lead)
    ExceptionOwner.objects.create(user=exception_owner, queue=aws_queue)
    g5 = InstanceType.objects.get(name="ml.g5.xlarge")
    now = timezone.now()
    running = JobFactory(
        share=qs1,
        instance_type=g5,
        name="vision-train",
        priority=1,
        state=Job.State.RUNNING,
        started_at=now - timedelta(minutes=30),
        submitted_at=now - timedelta(minutes=31),
        start_seq=1,
    )
    waiting = JobFactory(
        share=qs1,
        instance_type=g5,
        name="vision-sweep",
        priority=1,
        submitted_at=now - timedelta(minutes=5),
    )
    urgency = UrgencyDefinitionFactory(name="Launch", priority=900, max_window_hours=24)
    return Scene(
        queue=aws_queue,
        qs1=qs1,
        qs2=qs2,
        g5=g5,
        lead=team_lead,
        owner=exception_owner,
        urgency=urgency,
        running=running,
        waiting=waiting,
        now=now,
    )


@pytest.fixture
def client_as():
    def make(user):
        client = Client()
        if user is not None:
            client.force_login(user)
        return client

    return make


@pytest.fixture
def api_as():
    def make(user):
        client = APIClient()
        if user is not None:
            client.force_login(user)
        return client

    return make


@pytest.fixture
def second_owner(db, aws_queue):
    user = UserFactory(username="owner-two", roles=["exception_owners"])
    ExceptionOwner.objects.create(user=user, queue=aws_queue)
    return user
