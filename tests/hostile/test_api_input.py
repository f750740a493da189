"""The API refuses hostile input with a field error naming the field, and changes nothing:
integers beyond 64 bits (in query parameters, bodies, list items and map values), NUL
bytes, dates that overflow, over-long strings, and policy values no one can mean."""

from types import SimpleNamespace

import pytest

from fleet.models import QuotaShare
from governance.policy.services import BORROW_LIMIT_MAX
from tests.factories import JobFactory, UrgencyDefinitionFactory
from tests.hostile.conftest import HUGE


@pytest.fixture
def scene(aws_queue):
    qs1 = QuotaShare.objects.get(queue=aws_queue, name="qs1")
    urgency = UrgencyDefinitionFactory(name="Deadline")
    job = JobFactory(share=qs1)
    return SimpleNamespace(queue=aws_queue, qs1=qs1, urgency=urgency, job=job)


def _field_error(response, field: str) -> list[str]:
    assert response.status_code == 400, (response.status_code, response.content[:500])
    body = response.json()
    assert set(body) == {"detail", "errors"}
    assert field in body["errors"], body
    assert body["detail"].startswith(f"{field}: ")
    return body["errors"][field]


# Query parameters.

QUERY_CASES = [
    ("/api/v1/shares/", "queue", str(HUGE)),
    ("/api/v1/shares/", "queue", str(-HUGE)),
    ("/api/v1/shares/", "team", "vision\x00"),
    ("/api/v1/shares/", "state", "ENABLED\x00"),
    ("/api/v1/policy-changes/", "share", str(HUGE)),
    ("/api/v1/policy-changes/", "urgency", "1" * 40),
    ("/api/v1/policy-changes/", "actor", "\x00"),
    ("/api/v1/policy-changes/", "cause", "edit\x00"),
    ("/api/v1/exception-requests/", "team", str(HUGE)),
    ("/api/v1/exception-requests/", "queue", "0"),
    ("/api/v1/exception-requests/", "state", "\x00"),
    ("/api/v1/exception-requests/counts/", "queue", str(HUGE)),
    ("/api/v1/knowledge/articles/", "share", str(HUGE)),
    ("/api/v1/knowledge/articles/", "q", "reclaim\x00"),
    ("/api/v1/knowledge/articles/", "tag", "\x00"),
    ("/api/v1/knowledge/articles/", "q", "x" * 501),
    ("/api/v1/jobs/", "queue", str(HUGE)),
    ("/api/v1/jobs/", "team", "1\x00"),
    ("/api/v1/jobs/", "state", "RUNNING\x00"),
    ("/api/v1/job-definitions/", "queue", str(-HUGE)),
    ("/api/v1/job-definitions/", "state", "gone"),
]


@pytest.mark.parametrize(("url", "name", "value"), QUERY_CASES)
def test_bad_query_parameter_is_a_field_error(admin_api, aws_queue, url, name, value):
    assert _field_error(admin_api.get(url, {name: value}), name)


def test_largest_id_is_accepted_and_finds_nothing(admin_api, aws_queue):
    response = admin_api.get("/api/v1/shares/", {"queue": 2**63 - 1})
    assert response.status_code == 200
    assert response.json()["results"] == []


# Bodies: each case sends one hostile value in an otherwise valid request.


def _share_body(scene, **changes):
    body = {
        "queue": scene.queue.pk,
        "name": "new",
        "team": scene.qs1.team.name,
        "strategy": "LEND",
        "capacity_limits": {"ml.g5.xlarge": 1},
        "reason": "hostile test",
    }
    return {**body, **changes}


def _request_body(scene, **changes):
    body = {
        "kind": "TEMPORARY_CAPACITY",
        "team": scene.qs1.team.name,
        "urgency": scene.urgency.pk,
        "justification": "launch",
        "window_start": "2030-01-01T00:00:00Z",
        "window_end": "2030-01-01T04:00:00Z",
        "share": scene.qs1.pk,
        "instance_type": "ml.g5.xlarge",
        "extra_instances": 1,
    }
    return {**body, **changes}


BODY_CASES = [
    # integers beyond 64 bits
    ("post", "/api/v1/shares/", lambda s: _share_body(s, queue=HUGE), "queue"),
    ("post", "/api/v1/shares/", lambda s: _share_body(s, borrow_limit=HUGE), "borrow_limit"),
    (
        "post",
        "/api/v1/shares/",
        lambda s: _share_body(s, capacity_limits={"ml.g5.xlarge": HUGE}),
        "capacity_limits.ml.g5.xlarge",
    ),
    (
        "patch",
        "/api/v1/shares/{qs1}/",
        lambda s: {"version": HUGE, "reason": "x"},
        "version",
    ),
    (
        "post",
        "/api/v1/queues/",
        lambda s: {"name": "q", "capacity": {"ml.g5.xlarge": HUGE}, "reason": "x"},
        "capacity.ml.g5.xlarge",
    ),
    (
        "post",
        "/api/v1/queues/",
        lambda s: {
            "name": "q",
            "capacity": {"ml.g5.xlarge": 1},
            "default_preemption_retries": HUGE,
            "reason": "x",
        },
        "default_preemption_retries",
    ),
    (
        "post",
        "/api/v1/instance-types/",
        lambda s: {"name": "ml.huge", "gpu_count": HUGE},
        "gpu_count",
    ),
    (
        "post",
        "/api/v1/urgency-definitions/",
        lambda s: {"name": "u", "meaning": "m", "priority": 1, "max_window_hours": HUGE},
        "max_window_hours",
    ),
    (
        "post",
        "/api/v1/exception-requests/",
        lambda s: _request_body(s, extra_instances=HUGE),
        "extra_instances",
    ),
    ("post", "/api/v1/exception-requests/", lambda s: _request_body(s, urgency=HUGE), "urgency"),
    (
        "post",
        "/api/v1/exception-requests/",
        lambda s: _request_body(s, kind="PRIORITY_RAISE", jobs=[s.job.pk, HUGE]),
        "jobs[1]",
    ),
    (
        "post",
        "/api/v1/knowledge/articles/",
        lambda s: {"title": "t", "body": "b", "shares": [HUGE]},
        "shares[0]",
    ),
    ("post", "/api/v1/what-if/", lambda s: {"queue": HUGE, "run": False}, "queue"),
    # NUL bytes, also in list items and map keys
    ("post", "/api/v1/shares/", lambda s: _share_body(s, name="a\x00b"), "name"),
    ("post", "/api/v1/shares/", lambda s: _share_body(s, team="team-qs1\x00"), "team"),
    (
        "post",
        "/api/v1/queues/",
        lambda s: {"name": "q", "capacity": {"ml.g5\x00": 1}, "reason": "x"},
        "capacity.ml.g5\x00",
    ),
    ("post", "/api/v1/teams/", lambda s: {"name": "t", "members": ["ana\x00"]}, "members"),
    (
        "post",
        "/api/v1/knowledge/articles/",
        lambda s: {"title": "t", "body": "b", "tags": ["ok", "bad\x00"]},
        "tags[1]",
    ),
    (
        "post",
        "/api/v1/knowledge/articles/",
        lambda s: {"title": "t", "body": "b", "editors": ["\x00"]},
        "editors[0]",
    ),
    (
        "post",
        "/api/v1/urgency-definitions/",
        lambda s: {
            "name": "u",
            "meaning": "m",
            "priority": 1,
            "max_window_hours": 1,
            "invokers": ["team-qs1", "x\x00"],
        },
        "invokers",
    ),
    (
        "post",
        "/api/v1/exception-requests/",
        lambda s: _request_body(s, justification="why\x00"),
        "justification",
    ),
    (
        "post",
        "/api/v1/what-if/",
        lambda s: {"queue": s.queue.pk, "run": False, "shares": [{"name": "qs1\x00"}]},
        "shares[0].name",
    ),
    # dates that overflow when converted to UTC, or when a workload's days are added
    (
        "post",
        "/api/v1/exception-requests/",
        lambda s: _request_body(s, window_end="9999-12-31T23:00:00-05:00"),
        "window_end",
    ),
    (
        "post",
        "/api/v1/what-if/",
        lambda s: {
            "queue": s.queue.pk,
            "run": False,
            "workload": {"kind": "RECORDED", "start": "9999-12-31", "days": 30},
        },
        "workload.start",
    ),
]


@pytest.mark.parametrize(("method", "url", "body", "field"), BODY_CASES)
def test_hostile_body_value_is_a_field_error(admin_api, scene, unchanged, method, url, body, field):
    with unchanged():
        response = getattr(admin_api, method)(
            url.format(qs1=scene.qs1.pk), body(scene), format="json"
        )
    assert _field_error(response, field)


# Impossible policy values, each once stored without a word.

IMPOSSIBLE = [
    (
        "borrow limit of 1,000,000 %",
        "post",
        "/api/v1/shares/",
        lambda s: _share_body(s, strategy="LEND_AND_BORROW", borrow_limit=1_000_000),
        "borrow_limit",
    ),
    (
        "borrow limit of 1,000,000 % on an existing share",
        "patch",
        "/api/v1/shares/{qs1}/",
        lambda s: {"borrow_limit": 1_000_000, "version": s.qs1.version, "reason": "x"},
        "borrow_limit",
    ),
    (
        "share limit of 1000 in a queue of 3",
        "post",
        "/api/v1/shares/",
        lambda s: _share_body(s, capacity_limits={"ml.g5.xlarge": 1000}),
        "capacity_limits.ml.g5.xlarge",
    ),
    (
        "existing share raised to 4 in a queue of 3",
        "patch",
        "/api/v1/shares/{qs1}/",
        lambda s: {
            "capacity_limits": {"ml.g5.xlarge": 4},
            "version": s.qs1.version,
            "reason": "x",
        },
        "capacity_limits.ml.g5.xlarge",
    ),
    (
        "what-if draft share limit of 1000 in a queue of 3",
        "post",
        "/api/v1/what-if/",
        lambda s: {
            "queue": s.queue.pk,
            "run": False,
            "shares": [{"name": "qs1", "capacity_limits": {"ml.g5.xlarge": 1000}}],
        },
        "shares[0].capacity_limits.ml.g5.xlarge",
    ),
    (
        "10,000-character article title",
        "post",
        "/api/v1/knowledge/articles/",
        lambda s: {"title": "x" * 10_000, "body": "b"},
        "title",
    ),
    (
        "10,000-character share name",
        "post",
        "/api/v1/shares/",
        lambda s: _share_body(s, name="x" * 10_000),
        "name",
    ),
    (
        "10,000-character team name",
        "post",
        "/api/v1/teams/",
        lambda s: {"name": "x" * 10_000},
        "name",
    ),
    (
        "10,000-character what-if title",
        "post",
        "/api/v1/what-if/",
        lambda s: {"queue": s.queue.pk, "run": False, "title": "x" * 10_000},
        "title",
    ),
    (
        "priority 10,000 for an urgency",
        "post",
        "/api/v1/urgency-definitions/",
        lambda s: {"name": "u", "meaning": "m", "priority": 10_000, "max_window_hours": 1},
        "priority",
    ),
]


@pytest.mark.parametrize(
    ("method", "url", "body", "field"),
    [case[1:] for case in IMPOSSIBLE],
    ids=[case[0] for case in IMPOSSIBLE],
)
def test_impossible_policy_value_is_a_field_error(
    admin_api, scene, unchanged, method, url, body, field
):
    with unchanged():
        response = getattr(admin_api, method)(
            url.format(qs1=scene.qs1.pk), body(scene), format="json"
        )
    assert _field_error(response, field)


def test_borrow_limit_bounds_are_inclusive(admin_api, scene):
    for value in (-1, 0, BORROW_LIMIT_MAX):
        body = _share_body(scene, name=f"b{value}", strategy="LEND_AND_BORROW", borrow_limit=value)
        response = admin_api.post("/api/v1/shares/", body, format="json")
        assert response.status_code == 201, response.json()


def test_a_limit_the_queue_already_exceeds_may_stay(admin_api, scene):
    """Shrinking the queue leaves a larger limit in place; the share's other edits (and an
    exception's expiry) still save."""
    qs1 = scene.qs1
    response = admin_api.patch(
        f"/api/v1/shares/{qs1.pk}/",
        {"capacity_limits": {"ml.g5.xlarge": 3}, "version": qs1.version, "reason": "grow"},
        format="json",
    )
    assert response.status_code == 200, response.json()
    version = scene.queue.version
    response = admin_api.patch(
        f"/api/v1/queues/{scene.queue.pk}/",
        {"capacity": {"ml.g5.xlarge": 2}, "version": version, "reason": "shrink"},
        format="json",
    )
    assert response.status_code == 200, response.json()
    qs1.refresh_from_db()
    response = admin_api.patch(
        f"/api/v1/shares/{qs1.pk}/",
        {"in_share_preemption": False, "version": qs1.version, "reason": "unrelated"},
        format="json",
    )
    assert response.status_code == 200, response.json()
    assert response.json()["capacity_limits"] == {"ml.g5.xlarge": 3}


# Nesting: json.loads recurses once per level, so a deep body was a RecursionError (500).

DEEP = 100_000


@pytest.mark.parametrize(
    ("url", "body"),
    [
        ("/api/v1/jobs/", "[" * DEEP),
        (
            "/api/v1/jobs/",
            '{"name": "x", "parameters": ' + '{"a": ' * DEEP + "1" + "}" * DEEP + "}",
        ),
        ("/api/v1/jobs/bulk/", '{"jobs": ' + "[" * DEEP + "]" * DEEP + "}"),
        ("/api/v1/shares/", '{"capacity_limits": ' + "[" * DEEP),
        ("/api/v1/policy/plan/", "[" * DEEP),
    ],
)
def test_a_body_nested_too_deep_is_a_400(admin_api, scene, unchanged, url, body):
    with unchanged():
        response = admin_api.post(url, body, content_type="application/json")
    assert response.status_code == 400, (response.status_code, response.content[:500])
    assert response.json() == {
        "detail": "JSON parse error - nested deeper than 64 levels (line 1)",
        "errors": {},
    }


def test_brackets_inside_strings_do_not_count_as_nesting(admin_api, scene, unchanged):
    body = '{"name": "' + "[{" * 200 + '\\"]"}'
    with unchanged():
        response = admin_api.post("/api/v1/jobs/", body, content_type="application/json")
    assert response.status_code == 400
    assert "nested" not in response.json()["detail"]  # an ordinary field error


def test_nesting_up_to_the_bound_is_parsed(admin_api, scene, unchanged):
    parameters = '{"a": ' * 63 + "1" + "}" * 63  # 64 levels with the body's own object
    with unchanged():
        response = admin_api.post(
            "/api/v1/jobs/", '{"parameters": ' + parameters + "}", content_type="application/json"
        )
    assert response.status_code == 400, response.content[:500]
    assert "nested" not in response.json()["detail"]


def test_a_body_over_the_upload_limit_is_refused_before_it_is_parsed(
    admin_api, scene, unchanged, settings
):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    body = '{"name": "' + "x" * 1000 + '"}'
    with unchanged():
        response = admin_api.post("/api/v1/jobs/", body, content_type="application/json")
    assert response.status_code == 400
    assert response.json() == {
        "detail": "request refused: Request body exceeded settings.DATA_UPLOAD_MAX_MEMORY_SIZE.",
        "errors": {},
    }
