"""A definition's `network`: off unless an admin allows it, changed by a revision like
every other field (API and page), shown on its page, and refused when it is not a
boolean, naming the field."""

from __future__ import annotations

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from fleet.models import JobDefinition

pytestmark = pytest.mark.django_db

URL = "/api/v1/job-definitions/"


def body(**fields):
    return {
        "name": "fetch",
        "queues": ["aws-sample"],
        "command": ["python", "-m", "fetch"],
        "reason": "downloads its dataset",
        **fields,
    }


@pytest.fixture
def api(admin):
    client = APIClient()
    client.force_login(admin)
    return client


def test_a_definition_has_no_network_unless_it_asks(api, aws_queue):
    response = api.post(URL, body(), format="json")

    assert response.status_code == 201, response.json()
    assert response.json()["latest"]["network"] is False


def test_network_is_changed_by_a_revision_with_its_diff(api, client, admin, aws_queue):
    registered = api.post(URL, body(), format="json").json()

    revised = api.post(
        f"{URL}{registered['id']}/revisions/",
        {"base_revision": 1, "network": True, "reason": "it downloads from the hub"},
        format="json",
    )

    assert revised.status_code == 201, revised.json()
    assert revised.json()["latest"]["network"] is True
    client.force_login(admin)
    page = client.get(reverse("definition-detail", args=[registered["id"]])).content.decode()
    assert "yes (the runner&#x27;s)" in page and "none" in page  # the diff: none -> yes


def test_a_network_that_is_not_a_boolean_is_refused_naming_the_field(api, aws_queue):
    response = api.post(URL, body(network="sometimes"), format="json")

    assert response.status_code == 400
    assert "network" in response.json()["errors"]
    assert not JobDefinition.objects.exists()


def test_the_page_form_sets_network(client, admin, aws_queue):
    client.force_login(admin)
    response = client.post(
        reverse("definition-create"),
        {
            "name": "fetch",
            "queues": [aws_queue.pk],
            "command": "python\n-m\nfetch",
            "instances": 1,
            "restart_overhead": 0,
            "stop_grace_seconds": 10,
            "network": "on",
            "reason": "downloads its dataset",
            "parameters-TOTAL_FORMS": 0,
            "parameters-INITIAL_FORMS": 0,
        },
    )

    assert response.status_code == 302, response.content.decode()[:2000]
    assert JobDefinition.objects.get(name="fetch").revisions.get().network is True
