"""Session and token authentication, and the OpenAPI schema and docs served locally."""

import re

from accounts.tokens import token_issue


def test_anonymous_gets_401_with_a_token_challenge(api, db):
    response = api.get("/api/v1/queues/")
    assert response.status_code == 401
    assert response["WWW-Authenticate"] == "Token"
    assert response.json() == {
        "detail": "Authentication credentials were not provided.",
        "errors": {},
    }


def test_token_reads_and_writes(api, admin, aws_queue):
    _, key = token_issue(user=admin, name="ci")
    api.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    assert api.get("/api/v1/shares/").status_code == 200
    response = api.patch(
        f"/api/v1/queues/{aws_queue.pk}/",
        {"capacity": {"ml.g5.xlarge": 4}, "reason": "via token", "version": 1},
        format="json",
    )
    assert response.status_code == 200, response.json()


def test_token_of_a_user_without_role_is_403(api, outsider):
    _, key = token_issue(user=outsider, name="ci")
    api.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    assert api.get("/api/v1/queues/").status_code == 403


def test_bad_token_is_401(api, db):
    api.credentials(HTTP_AUTHORIZATION="Token not-a-token")
    assert api.get("/api/v1/queues/").status_code == 401


def test_schema_needs_authentication(client, team_lead):
    assert client.get("/api/schema/").status_code in (401, 403)
    client.force_login(team_lead)
    response = client.get("/api/schema/")
    assert response.status_code == 200
    assert b"/api/v1/shares/{id}/" in response.content


def test_docs_serve_swagger_ui_from_local_assets(client, team_lead):
    response = client.get("/api/docs/")
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/")
    client.force_login(team_lead)
    response = client.get("/api/docs/")
    assert response.status_code == 200
    html = response.content.decode()
    # Hashed once collectstatic has run (the deploy-recipe test runs it), plain before.
    assert re.search(
        r"/static/drf_spectacular_sidecar/swagger-ui-dist/swagger-ui-bundle(\.[0-9a-f]+)?\.js", html
    )
    assert "cdn" not in html.lower()
