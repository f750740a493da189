"""Every error under /api/ is JSON in one shape, and the schema documents that shape on
every operation together with the bounds and enums of the input."""

import json

import pytest
from drf_spectacular.generators import SchemaGenerator

from core.api.errors import exception_handler, server_error
from core.api.schema import CONFLICT_SCHEMA, ERROR_SCHEMA
from core.bounds import MAX_ID
from governance.policy.services import BORROW_LIMIT_MAX
from tests.factories import InstanceTypeFactory, QueueCapacityFactory, UrgencyDefinitionFactory


def _shape(response, status: int) -> dict:
    assert response.status_code == status, response.content[:300]
    assert response["Content-Type"].startswith("application/json")
    body = response.json()
    assert isinstance(body["detail"], str) and body["detail"]
    assert isinstance(body["errors"], dict)
    return body


@pytest.mark.parametrize(
    "path",
    ["/api/v1/nothing-here/", "/api/v2/queues/", "/api/v1/queues/abc/", "/api/v1/shares/1/x/"],
)
def test_unknown_api_path_is_a_json_404(admin_api, api, path):
    body = _shape(admin_api.get(path), 404)
    assert body == {"detail": f"no API operation at {path}", "errors": {}}
    _shape(api.post(path, {}, format="json"), 404)  # anonymous, no CSRF token: still JSON


def test_a_missing_slash_is_named(admin_api, db):
    body = _shape(admin_api.get("/api/v1/queues"), 404)
    assert body["detail"] == "no API operation at /api/v1/queues; did you mean /api/v1/queues/ ?"


def test_405_415_and_parse_errors_have_the_shape(admin_api, aws_queue):
    assert _shape(admin_api.delete("/api/v1/queues/"), 405)["errors"] == {}
    body = _shape(
        admin_api.post("/api/v1/teams/", "name=x", content_type="text/plain"),
        415,
    )
    assert "text/plain" in body["detail"]
    body = _shape(
        admin_api.post("/api/v1/teams/", '{"name": ', content_type="application/json"), 400
    )
    assert body["detail"].startswith("JSON parse error")


def test_429_has_the_shape_and_retry_after(admin_api, db, settings):
    settings.REST_FRAMEWORK = {
        **settings.REST_FRAMEWORK,
        "DEFAULT_THROTTLE_RATES": {"read": "2/min", "write": "2/min", "anon": "2/min"},
    }
    for _ in range(2):
        assert admin_api.get("/api/v1/teams/").status_code == 200
    response = admin_api.get("/api/v1/teams/")
    body = _shape(response, 429)
    assert body["errors"] == {}
    assert int(response["Retry-After"]) > 0


def test_every_409_has_the_conflict_keys(admin_api, aws_queue):
    team = aws_queue.shares.get(name="qs1").team
    in_use = _shape(
        admin_api.delete(f"/api/v1/teams/{team.pk}/", {"reason": "x"}, format="json"), 409
    )
    share = aws_queue.shares.get(name="qs2")
    stale = {"name": "renamed", "version": share.version, "reason": "x"}
    admin_api.patch(f"/api/v1/shares/{share.pk}/", stale, format="json")
    conflict = _shape(admin_api.patch(f"/api/v1/shares/{share.pk}/", stale, format="json"), 409)
    for body in (in_use, conflict):
        assert set(body) == set(CONFLICT_SCHEMA["properties"])
    assert in_use["current"] is None and in_use["current_version"] is None
    assert conflict["current"]["name"] == "renamed"
    assert (conflict["current_version"], conflict["submitted_version"]) == (2, 1)


def test_a_conflict_names_the_objects_it_holds(admin_api, aws_queue):
    """An urgency's submitted invokers are teams; the 409 names them."""
    urgency = UrgencyDefinitionFactory(name="Deadline")
    body = {
        "name": "Deadline",
        "meaning": "m",
        "priority": 1,
        "max_window_hours": 4,
        "invokers": ["team-qs1"],
        "version": urgency.version + 5,
        "reason": "x",
    }
    conflict = _shape(admin_api.put(f"/api/v1/urgency-definitions/{urgency.pk}/", body), 409)
    assert conflict["submitted"]["invokers"] == ["team-qs1"]
    assert conflict["current"]["name"] == "Deadline"


def test_a_failure_while_rendering_is_json_under_api_only(rf):
    api = server_error(rf.get("/api/v1/queues/"))
    assert api.status_code == 500
    assert json.loads(api.content) == {
        "detail": "server error: the problem is logged; try again later",
        "errors": {},
    }
    page = server_error(rf.get("/queues/"))
    assert page.status_code == 500
    assert page["Content-Type"].startswith("text/html")


def test_an_unexpected_failure_is_a_logged_json_500(rf, caplog):
    request = rf.get("/api/v1/queues/")
    response = exception_handler(RuntimeError("boom"), {"request": request})
    assert response.status_code == 500
    assert set(response.data) == {"detail", "errors"}
    assert "boom" not in response.data["detail"]  # the cause goes to the log, not the client
    assert any(record.exc_info and "boom" in str(record.exc_info[1]) for record in caplog.records)


# The schema.


@pytest.fixture(scope="module")
def schema():
    return SchemaGenerator().get_schema(request=None, public=True)


def test_every_operation_documents_the_error_responses(schema):
    assert schema["components"]["schemas"]["Error"] == ERROR_SCHEMA
    operations = 0
    for path, methods in schema["paths"].items():
        for method, operation in methods.items():
            operations += 1
            responses = operation["responses"]
            for code in ("400", "401", "403", "404", "429"):
                assert code in responses, (method, path, code)
            if method in {"post", "put", "patch", "delete"}:
                assert "409" in responses, (method, path)
    assert operations > 40
    throttled = schema["components"]["responses"]["TooManyRequests"]
    assert "Retry-After" in throttled["headers"]


def _component(schema, name):
    return schema["components"]["schemas"][name]["properties"]


def _parameter(schema, path, name):
    parameters = schema["paths"][path]["get"]["parameters"]
    return next(p for p in parameters if p["name"] == name)["schema"]


def test_bounds_and_enums_are_in_the_schema(schema):
    share = _component(schema, "ShareCreateRequest")
    assert (share["borrow_limit"]["minimum"], share["borrow_limit"]["maximum"]) == (
        -1,
        BORROW_LIMIT_MAX,
    )
    assert share["name"]["maxLength"] == 100
    assert share["queue"]["maximum"] == MAX_ID
    assert share["capacity_limits"]["additionalProperties"]["maximum"] == 2**31 - 1
    assert share["capacity_limits"]["maxProperties"] == 5
    strategy = schema["components"]["schemas"]["StrategyEnum"]["enum"]
    assert strategy == ["RESERVE", "LEND", "LEND_AND_BORROW"]
    urgency = _component(schema, "UrgencyCreateRequest")
    assert (urgency["priority"]["minimum"], urgency["priority"]["maximum"]) == (0, 9999)
    request = _component(schema, "ExceptionRequestInputRequest")
    assert request["justification"]["maxLength"] == 10_000
    assert request["jobs"]["maxItems"] == 100
    assert request["jobs"]["items"]["maximum"] == MAX_ID
    queue = _parameter(schema, "/api/v1/shares/", "queue")
    assert (queue["minimum"], queue["maximum"]) == (1, MAX_ID)
    assert _parameter(schema, "/api/v1/shares/", "state")["enum"] == ["DISABLED", "ENABLED"]
    assert _parameter(schema, "/api/v1/policy-changes/", "actor")["maxLength"] == 150
    assert _parameter(schema, "/api/v1/knowledge/articles/", "q")["maxLength"] == 500


def test_schema_serves_with_the_bounds(admin_api, db):
    InstanceTypeFactory()
    QueueCapacityFactory()
    response = admin_api.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert response.status_code == 200
    assert b"9223372036854775807" in response.content
