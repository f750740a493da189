"""Hostile input: clients signed in as an admin, the AWS sample queue, and a snapshot of
every row a rejected request must leave alone."""

from contextlib import contextmanager

import pytest
from django.test import Client
from rest_framework.test import APIClient

from fleet.models import (
    CapacityLimit,
    InstanceType,
    JobQueue,
    QueueCapacity,
    QuotaShare,
    Team,
    UrgencyDefinition,
)
from governance.models import ExceptionRequest, KnowledgeArticle, PolicyChange, WhatIfComparison

HUGE = 2**64  # beyond every 64-bit column
MODELS = [
    JobQueue,
    QueueCapacity,
    QuotaShare,
    CapacityLimit,
    Team,
    InstanceType,
    UrgencyDefinition,
    PolicyChange,
    ExceptionRequest,
    KnowledgeArticle,
    WhatIfComparison,
]


@pytest.fixture(autouse=True)
def fast_passwords(settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def admin_api(admin):
    client = APIClient()
    client.force_login(admin)
    return client


@pytest.fixture
def admin_page(admin):
    client = Client()
    client.force_login(admin)
    return client


def state() -> dict:
    return {model.__name__: list(model.objects.order_by("pk").values()) for model in MODELS}


@pytest.fixture
def unchanged(db):
    """`with unchanged():` around a request that must be refused without a trace."""

    @contextmanager
    def check():
        before = state()
        yield
        assert state() == before

    return check
