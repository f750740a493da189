"""The permission matrix: each role × each endpoint × read/write.

Anyone with a role reads policies; only admins write; the history is read by
admins and exception owners; anonymous clients get 401, users without a role
403. A refused write changes nothing.
"""

import pytest

from fleet.models import QuotaShare
from fleet.selectors import share_document
from governance.models import PolicyChange
from governance.policy.services import share_data_from_document, share_update
from tests.factories import InstanceTypeFactory, TeamFactory, UrgencyDefinitionFactory

ROLES = ["admin", "team_lead", "exception_owner", "leadership", "outsider", "anonymous"]
POLICY_READERS = {"admin", "team_lead", "exception_owner", "leadership"}
HISTORY_READERS = {"admin", "exception_owner"}
WRITERS = {"admin"}


@pytest.fixture
def world(admin, aws_queue):
    """One object of each kind, and one recorded change to read and revert."""
    share = aws_queue.shares.get(name="qs2")
    doc = share_document(share)
    doc["capacity_limits"] = {"ml.g5.xlarge": 2}
    share_update(
        actor=admin,
        share=share,
        data=share_data_from_document(doc),
        reason="more for qs2",
        expected_version=share.version,
    )
    return {
        "queue": aws_queue,
        "share": share,
        "team": TeamFactory(name="vision"),
        "instance_type": InstanceTypeFactory(),
        "urgency": UrgencyDefinitionFactory(name="deadline"),
        "change": PolicyChange.objects.get(share=share),
    }


READ_ENDPOINTS = [
    "queues",
    "queue",
    "shares",
    "share",
    "teams",
    "team",
    "instance-types",
    "instance-type",
    "urgency-definitions",
    "urgency-definition",
]


def _read_url(endpoint, world):
    objects = {
        "queue": ("queues", world["queue"]),
        "share": ("shares", world["share"]),
        "team": ("teams", world["team"]),
        "instance-type": ("instance-types", world["instance_type"]),
        "urgency-definition": ("urgency-definitions", world["urgency"]),
        "policy-change": ("policy-changes", world["change"]),
    }
    if endpoint in objects:
        collection, obj = objects[endpoint]
        return f"/api/v1/{collection}/{obj.pk}/"
    return f"/api/v1/{endpoint}/"


def _write(endpoint, world):
    """(method, url, valid body for an admin, expected admin status)."""
    share = world["share"]
    return {
        "queues": (
            "post",
            "/api/v1/queues/",
            {"name": "q2", "capacity": {"ml.g5.xlarge": 1}, "reason": "r"},
            201,
        ),
        "queue": (
            "patch",
            f"/api/v1/queues/{world['queue'].pk}/",
            {"capacity": {"ml.g5.xlarge": 4}, "reason": "r", "version": 1},
            200,
        ),
        "shares": (
            "post",
            "/api/v1/shares/",
            {
                "queue": world["queue"].pk,
                "name": "qs4",
                "team": "vision",
                "strategy": "LEND",
                "capacity_limits": {"ml.g5.xlarge": 1},
                "reason": "r",
            },
            201,
        ),
        "share": (
            "patch",
            f"/api/v1/shares/{share.pk}/",
            {
                "state": "DISABLED",
                "reason": "r",
                "version": QuotaShare.objects.get(pk=share.pk).version,
            },
            200,
        ),
        "teams": ("post", "/api/v1/teams/", {"name": "speech", "reason": "new team"}, 201),
        "team": (
            "patch",
            f"/api/v1/teams/{world['team'].pk}/",
            {"description": "CV", "reason": "describe it"},
            200,
        ),
        "instance-types": (
            "post",
            "/api/v1/instance-types/",
            {"name": "ml.p5.48xlarge", "gpu_count": 8},
            201,
        ),
        "instance-type": (
            "patch",
            f"/api/v1/instance-types/{world['instance_type'].pk}/",
            {"gpu_model": "A10G"},
            200,
        ),
        "urgency-definitions": (
            "post",
            "/api/v1/urgency-definitions/",
            {
                "name": "outage",
                "meaning": "prod down",
                "priority": 900,
                "max_window_hours": 4,
                "reason": "r",
            },
            201,
        ),
        "urgency-definition": (
            "patch",
            f"/api/v1/urgency-definitions/{world['urgency'].pk}/",
            {"priority": 600, "reason": "r", "version": 1},
            200,
        ),
        "policy-change": (
            "post",
            f"/api/v1/policy-changes/{world['change'].pk}/revert/",
            {"reason": "too much"},
            201,
        ),
    }[endpoint]


def _client(request, api, role):
    if role != "anonymous":
        api.force_login(request.getfixturevalue(role))
    return api


def _refused(role):
    return 401 if role == "anonymous" else 403


@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize("endpoint", READ_ENDPOINTS)
def test_read_policies(request, api, world, role, endpoint):
    response = _client(request, api, role).get(_read_url(endpoint, world))
    assert response.status_code == (200 if role in POLICY_READERS else _refused(role))


@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize("endpoint", ["policy-changes", "policy-change"])
def test_read_history(request, api, world, role, endpoint):
    response = _client(request, api, role).get(_read_url(endpoint, world))
    assert response.status_code == (200 if role in HISTORY_READERS else _refused(role))


@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize("endpoint", [*READ_ENDPOINTS, "policy-change"])
def test_write(request, api, world, unchanged, role, endpoint):
    method, url, body, admin_status = _write(endpoint, world)
    client = _client(request, api, role)
    if role in WRITERS:
        response = getattr(client, method)(url, body, format="json")
        assert response.status_code == admin_status, response.json()
        return
    with unchanged():
        response = getattr(client, method)(url, body, format="json")
    assert response.status_code == _refused(role)
    assert set(response.json()) == {"detail", "errors"}


@pytest.mark.parametrize("role", ["admin", "team_lead", "outsider"])
def test_delete(request, api, world, role):
    client = _client(request, api, role)
    spare = InstanceTypeFactory(name="ml.spare")
    team = TeamFactory(name="spare-team")
    expected = 204 if role in WRITERS else 403
    assert client.delete(f"/api/v1/instance-types/{spare.pk}/").status_code == expected
    gone = client.delete(f"/api/v1/teams/{team.pk}/", {"reason": "unused"}, format="json")
    assert gone.status_code == expected
