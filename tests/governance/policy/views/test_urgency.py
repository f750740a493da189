"""Urgency definitions: the list for everyone, the editor for admins."""

import pytest
from django.urls import reverse

from fleet.models import UrgencyDefinition
from governance.models import PolicyChange
from tests.factories import TeamFactory, UrgencyDefinitionFactory

pytestmark = pytest.mark.django_db


def _payload(**fields):
    data = {
        "name": "Launch deadline",
        "meaning": "A public launch date that cannot move.",
        "examples": "Keynote demo; customer go-live",
        "priority": "800",
        "max_window_hours": "72",
        "allowed_kinds": ["PRIORITY_RAISE", "TEMPORARY_CAPACITY"],
        "reason": "Agreed in the steering meeting",
    }
    data.update(fields)
    return data


def test_list_shows_each_definition(client_as, team_lead):
    team = TeamFactory(name="vision")
    urgency = UrgencyDefinitionFactory(name="Paper deadline", examples="NeurIPS")
    urgency.invokers.add(team)

    response = client_as(team_lead).get(reverse("urgency-list"))

    html = response.content.decode()
    assert "<title>Urgency definitions" in html
    assert "Paper deadline" in html and "NeurIPS" in html and "vision" in html
    assert "48 h" in html
    assert reverse("urgency-edit", args=[urgency.pk]) not in html


def test_empty_list_says_what_to_do(admin_client):
    html = admin_client.get(reverse("urgency-list")).content.decode()

    assert "No urgency definitions yet" in html
    assert reverse("urgency-create") in html


def test_creating_a_definition(admin_client):
    team = TeamFactory(name="vision")

    response = admin_client.post(reverse("urgency-create"), _payload(invokers=[team.pk]))

    assert response.status_code == 302
    urgency = UrgencyDefinition.objects.get(name="Launch deadline")
    assert urgency.priority == 800
    assert urgency.allowed_kinds == ["PRIORITY_RAISE", "TEMPORARY_CAPACITY"]
    assert list(urgency.invokers.all()) == [team]
    assert PolicyChange.objects.get(urgency=urgency).reason == "Agreed in the steering meeting"


@pytest.mark.parametrize(
    "fields, field",
    [
        pytest.param({"name": ""}, "name", id="name-required"),
        pytest.param({"name": "Existing"}, "name", id="name-unique"),
        pytest.param({"meaning": ""}, "meaning", id="meaning-required"),
        pytest.param({"priority": "10000"}, "priority", id="priority-at-most-9999"),
        pytest.param({"priority": ""}, "priority", id="priority-required"),
        pytest.param({"max_window_hours": "0"}, "max_window_hours", id="window-at-least-1"),
        pytest.param({"max_window_hours": "x"}, "max_window_hours", id="window-a-number"),
        pytest.param({"allowed_kinds": ["FREE_GPUS"]}, "allowed_kinds", id="known-kinds"),
        pytest.param({"reason": ""}, "reason", id="reason-required"),
    ],
)
def test_rule_is_shown_next_to_its_field(admin_client, fields, field):
    UrgencyDefinitionFactory(name="Existing")

    response = admin_client.post(reverse("urgency-create"), _payload(**fields))

    assert response.status_code == 200
    assert response.context["form"].errors[field]
    assert f'id="id_{field}_error"' in response.content.decode()
    assert UrgencyDefinition.objects.count() == 1
    assert not PolicyChange.objects.filter(target=PolicyChange.Target.URGENCY).exists()


def test_the_editor_shows_the_definition_as_it_is(admin_client):
    urgency = UrgencyDefinitionFactory(name="Paper deadline", allowed_kinds=["PRIORITY_RAISE"])

    html = admin_client.get(reverse("urgency-edit", args=[urgency.pk])).content.decode()

    assert "<title>Edit urgency Paper deadline" in html
    assert 'name="name" value="Paper deadline"' in html
    assert 'name="version" value="1"' in html
    assert 'value="PRIORITY_RAISE" id="id_allowed_kinds_0" checked' in html


def test_editing_a_definition(admin_client):
    urgency = UrgencyDefinitionFactory(name="Paper deadline")

    response = admin_client.post(
        reverse("urgency-edit", args=[urgency.pk]),
        _payload(name="Paper deadline", priority="900", version="1"),
    )

    urgency.refresh_from_db()
    assert response.status_code == 302
    assert (urgency.priority, urgency.version) == (900, 2)


def test_editing_a_changed_definition_shows_the_conflict(admin_client):
    urgency = UrgencyDefinitionFactory(name="Paper deadline")
    UrgencyDefinition.objects.filter(pk=urgency.pk).update(version=2, priority=100)

    response = admin_client.post(
        reverse("urgency-edit", args=[urgency.pk]),
        _payload(name="Paper deadline", priority="900", version="1"),
    )

    assert response.status_code == 200
    assert response.context["conflict"]["version"] == 2
    assert response.context["form"]["priority"].value() == "900"
    urgency.refresh_from_db()
    assert urgency.priority == 100
