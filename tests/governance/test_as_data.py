"""One object as data (governance.as_data; issue 28, point 4): the JSON and the YAML of a
queue, share, job, job definition, exception request and knowledge article are what the
API answers at the object's detail URL for the same user, refused as the API refuses;
the pages only name the panel's URL and fetch nothing until it is opened."""

from __future__ import annotations

import html
import json
import re

import pytest
import yaml
from django.test import Client

from governance.exceptions import services as exception_services
from tests.as_data_objects import as_data_objects
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def fast_passwords(settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def world(aws_queue):
    admin = UserFactory(username="data-admin", roles=["admins"])
    lead_a = UserFactory(username="data-lead-a", roles=["team_leads"])
    lead_b = UserFactory(username="data-lead-b", roles=["team_leads"])
    owner = UserFactory(username="data-owner", roles=["exception_owners"])
    made = as_data_objects(
        aws_queue,
        admin=admin,
        lead_a=lead_a,
        lead_b=lead_b,
        owner=owner,
        name="data",
        justification="Launch “fine-tune”: ünïcode, and a colon: here",
        environment={"WANDB_API_KEY": "secret-value"},
        article_body="*Because.*",
    )
    qs1, job, definition = made.share, made.job, made.definition
    request, article = made.request, made.article
    exception_services.exception_request_approve(actor=owner, request=request, note="Fine.")
    return {
        "users": {"admin": admin, "lead_a": lead_a, "lead_b": lead_b, "owner": owner},
        "objects": {
            "queue": (aws_queue.pk, f"/api/v1/queues/{aws_queue.pk}/"),
            "share": (qs1.pk, f"/api/v1/shares/{qs1.pk}/"),
            "job": (job.pk, f"/api/v1/jobs/{job.pk}/"),
            "definition": (definition.pk, f"/api/v1/job-definitions/{definition.pk}/"),
            "exception": (request.pk, f"/api/v1/exception-requests/{request.pk}/"),
            "article": (article.pk, f"/api/v1/knowledge/articles/{article.pk}/"),
            "record": (
                (record := request.articles.get(kind="EXCEPTION")).pk,
                f"/api/v1/knowledge/articles/{record.pk}/",
            ),
        },
    }


def client_of(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


KINDS = ("queue", "share", "job", "definition", "exception", "article")


@pytest.mark.parametrize("kind", KINDS)
def test_json_and_yaml_equal_what_the_api_answers(world, kind):
    client = client_of(world["users"]["admin"])
    pk, api_path = world["objects"][kind]
    api = client.get(api_path, HTTP_ACCEPT="application/json")
    assert api.status_code == 200
    expected = api.json()

    as_json = client.get(f"/data/{kind}/{pk}/?format=json")
    assert as_json.status_code == 200
    assert as_json["Content-Type"] == "application/json"
    assert json.loads(as_json.content) == expected

    as_yaml = client.get(f"/data/{kind}/{pk}/?format=yaml")
    assert as_yaml.status_code == 200
    assert as_yaml["Content-Type"].startswith("application/yaml")
    assert as_yaml["Content-Disposition"] == f'attachment; filename="{kind}-{pk}.yaml"'
    assert yaml.safe_load(as_yaml.content.decode()) == expected

    # The panel (what htmx fetches when it is opened): the same two texts, selectable.
    panel = client.get(f"/data/{kind}/{pk}/", HTTP_HX_REQUEST="true")
    assert panel.status_code == 200
    blocks = dict(
        re.findall(
            r'<pre class="as-data__code"[^>]*data-format="(\w+)"><code>(.*?)</code></pre>',
            panel.content.decode(),
            re.S,
        )
    )
    assert json.loads(html.unescape(blocks["json"])) == expected
    assert yaml.safe_load(html.unescape(blocks["yaml"])) == expected
    assert f"GET {api_path}" in panel.content.decode()
    assert "<html" not in panel.content.decode()  # a fragment, not a page

    # Without htmx: a page of its own with the same panel.
    page = client.get(f"/data/{kind}/{pk}/")
    assert page.status_code == 200
    assert "<html" in page.content.decode()
    assert "as data</h1>" in page.content.decode()


def test_each_user_sees_what_the_api_shows_them(world):
    """A lead sees a definition's environment names without their values, as the API
    shows it to them; the admin sees the values."""
    pk, api_path = world["objects"]["definition"]
    for name, value in (("lead_a", None), ("admin", "secret-value")):
        client = client_of(world["users"][name])
        data = json.loads(client.get(f"/data/definition/{pk}/?format=json").content)
        assert data == client.get(api_path, HTTP_ACCEPT="application/json").json()
        assert data["latest"]["environment"] == {"WANDB_API_KEY": value}


@pytest.mark.parametrize("kind", ["exception", "record"])
def test_a_lead_cannot_see_another_teams_private_object_as_data(world, kind):
    """Lead B may not see team A's exception request, nor its decision record, in the API:
    nor as data, in any format, nor in the panel (which says why and shows nothing)."""
    client = client_of(world["users"]["lead_b"])
    pk, api_path = world["objects"][kind]
    url_kind = "article" if kind == "record" else kind
    api = client.get(api_path, HTTP_ACCEPT="application/json")
    assert api.status_code in (403, 404)
    for query in ("", "?format=json", "?format=yaml"):
        response = client.get(f"/data/{url_kind}/{pk}/{query}")
        assert response.status_code == api.status_code, query
        assert b"Launch" not in response.content
    panel = client.get(f"/data/{url_kind}/{pk}/", HTTP_HX_REQUEST="true")
    text = panel.content.decode()
    assert "as-data__refused" in text
    assert api.json()["detail"].capitalize() in text
    assert "<pre" not in text and "Launch" not in text
    # Lead A (who filed it) sees both.
    owner_client = client_of(world["users"]["lead_a"])
    assert owner_client.get(f"/data/{url_kind}/{pk}/?format=json").status_code == 200


def test_refused_and_bad_input(world):
    pk, _ = world["objects"]["queue"]
    anonymous = Client()
    response = anonymous.get(f"/data/queue/{pk}/?format=json")
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/")
    nobody = client_of(UserFactory(username="data-nobody"))
    assert nobody.get(f"/data/queue/{pk}/?format=json").status_code == 403

    admin = client_of(world["users"]["admin"])
    bad = admin.get(f"/data/queue/{pk}/?format=xml")
    assert bad.status_code == 400
    assert bad.content.decode().startswith("format: must be one of json, yaml")
    assert admin.get(f"/data/planet/{pk}/").status_code == 404
    assert admin.get("/data/queue/999999/?format=json").status_code == 404


@pytest.mark.parametrize(
    "kind,page",
    [
        ("queue", "/queues/{queue}/"),
        ("share", "/shares/{share}/edit/"),
        ("job", "/jobs/{job}/"),
        ("definition", "/jobs/definitions/{definition}/"),
        ("exception", "/exceptions/{exception}/"),
    ],
)
def test_pages_name_the_panel_and_fetch_nothing(world, kind, page):
    """Each page has the closed panel with its URL and the fallback links; the data
    itself is not on the page (fetched only when opened)."""
    client = client_of(world["users"]["admin"])
    ids = {name: pk for name, (pk, _path) in world["objects"].items()}
    text = client.get(page.format(**ids)).content.decode()
    pk = ids[kind]
    assert f'hx-get="/data/{kind}/{pk}/" hx-trigger="toggle once"' in text
    assert f'href="/data/{kind}/{pk}/?format=json"' in text
    assert f'href="/data/{kind}/{pk}/?format=yaml" download' in text
    assert "<details" in text and "as-data__code" not in text


def test_the_article_page_names_its_panel(world):
    from governance.models import KnowledgeArticle

    client = client_of(world["users"]["lead_a"])
    pk, _ = world["objects"]["article"]
    slug = KnowledgeArticle.objects.get(pk=pk).slug
    text = client.get(f"/knowledge/{slug}/").content.decode()
    assert f'hx-get="/data/article/{pk}/"' in text
