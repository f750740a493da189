"""API test helpers: a client per role, and a snapshot of the whole policy state."""

import pytest
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
from governance.models import PolicyChange


@pytest.fixture(autouse=True)
def fast_passwords(settings):
    """The role fixtures set passwords; a cheap hasher keeps the matrix fast."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def api():
    return APIClient()


@pytest.fixture
def admin_api(admin):
    client = APIClient()
    client.force_login(admin)
    return client


def policy_state() -> dict:
    """Every row a policy write may touch, to show that a rejected write changed nothing."""
    models = [
        JobQueue,
        QueueCapacity,
        QuotaShare,
        CapacityLimit,
        Team,
        InstanceType,
        UrgencyDefinition,
        PolicyChange,
    ]
    return {model.__name__: list(model.objects.order_by("pk").values()) for model in models}


@pytest.fixture
def unchanged(db):
    """Use as `with unchanged():` around a write that must be rejected."""
    from contextlib import contextmanager

    @contextmanager
    def check():
        before = policy_state()
        yield
        assert policy_state() == before

    return check
