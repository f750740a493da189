"""Who may open which exception page and call which endpoint; what the pages show."""

import pytest

from governance.exceptions import services
from governance.models import ExceptionRequest

pytestmark = pytest.mark.django_db
ROLES = ["admin", "team_lead", "exception_owner", "leadership", "outsider"]


@pytest.fixture
def users(scene, admin, leadership, outsider):
    return {
        "admin": admin,
        "team_lead": scene.lead,
        "exception_owner": scene.owner,
        "leadership": leadership,
        "outsider": outsider,
    }


@pytest.mark.parametrize(
    ("url", "allowed"),
    [
        ("/exceptions/", {"admin", "team_lead", "exception_owner"}),
        ("/exceptions/new/", {"admin", "team_lead"}),
        ("/exceptions/decisions/", {"exception_owner"}),
        ("/exceptions/counts/", {"admin", "leadership"}),
        ("/exceptions/{pk}/", {"admin", "team_lead", "exception_owner"}),
        ("/knowledge/", set(ROLES)),
        ("/api/v1/exception-requests/", {"admin", "team_lead", "exception_owner"}),
        ("/api/v1/exception-requests/{pk}/", {"admin", "team_lead", "exception_owner"}),
        ("/api/v1/exception-requests/counts/", {"admin", "leadership"}),
        ("/api/v1/knowledge/articles/", set(ROLES)),
    ],
)
@pytest.mark.parametrize("role", ROLES)
def test_page_and_endpoint_matrix(scene, users, client_as, url, allowed, role):
    request = scene.file()
    response = client_as(users[role]).get(url.format(pk=request.pk))
    assert response.status_code == (200 if role in allowed else 403), response.content[:300]


def test_anonymous_visitors_are_sent_to_log_in_or_get_401(scene, client_as):
    assert client_as(None).get("/exceptions/").status_code == 302
    assert client_as(None).get("/api/v1/exception-requests/").status_code == 401


def test_a_lead_of_another_team_cannot_see_the_request(scene, client_as):
    from tests.factories import UserFactory

    other_lead = UserFactory(username="other-lead", roles=["team_leads"])
    scene.qs2.team.leads.add(other_lead)
    request = scene.file()
    assert client_as(other_lead).get(f"/exceptions/{request.pk}/").status_code == 403
    assert client_as(other_lead).get("/exceptions/").context["requests"] == []


def test_the_decider_sees_preview_history_and_buttons(scene, client_as):
    earlier = scene.file()
    services.exception_request_deny(actor=scene.owner, request=earlier, note="no", now=scene.now)
    request = scene.file()
    response = client_as(scene.owner).get(f"/exceptions/{request.pk}/")
    html = response.content.decode()
    assert "Impact preview" in html
    assert "limit would go from 1 to 2" in html
    assert "The requester's recent requests" in html and f"#{earlier.pk}" in html
    assert "Approve" in html and "Deny" in html
    lead_view = client_as(scene.lead).get(f"/exceptions/{request.pk}/").content.decode()
    assert "Impact preview" not in lead_view and "Approve</button>" not in lead_view


def test_approving_on_the_page_shows_the_timeline_and_the_policy_change(scene, client_as):
    request = scene.file()
    owner = client_as(scene.owner)
    response = owner.post(f"/exceptions/{request.pk}/approve/", {"note": "ok for launch"})
    assert response.status_code == 302
    html = owner.get(f"/exceptions/{request.pk}/").content.decode()
    for step in ("Filed", "Submitted for decision", "Approved", "Took effect"):
        assert step in html
    assert "has-exception" in html
    assert "Policy changes it made" in html and "Capacity limits" in html
    assert "capacity_limits" not in html and "{&#x27;" not in html  # read as people read it
    assert "Decision on exception" in html  # the automatic decision record


def test_denying_without_a_note_names_the_field_on_the_page(scene, client_as):
    request = scene.file()
    response = client_as(scene.owner).post(f"/exceptions/{request.pk}/deny/", {"note": ""})
    assert response.status_code == 400
    assert response.context["decision_form"].errors["note"] == [
        "say why the request is denied, so the team can act on it"
    ]


def test_an_owner_outside_the_scope_is_told_why_not(scene, client_as):
    from governance.models import ExceptionOwner
    from tests.factories import UserFactory

    stranger = UserFactory(username="stranger-owner", roles=["exception_owners"])
    ExceptionOwner.objects.create(user=stranger, share=scene.qs2)
    request = scene.file()
    assert client_as(stranger).get(f"/exceptions/{request.pk}/").status_code == 403
    response = client_as(stranger).post(f"/exceptions/{request.pk}/approve/", {"note": ""})
    assert response.status_code == 403


def test_self_decision_is_refused_on_the_page_with_the_reason(scene, client_as):
    scene.qs1.team.leads.add(scene.owner)
    scene.owner.groups.add(*scene.lead.groups.all())
    request = scene.file(actor=scene.owner)
    owner = client_as(scene.owner)
    html = owner.get(f"/exceptions/{request.pk}/").content.decode()
    assert "You filed this request: another exception owner must decide it." in html
    response = owner.post(f"/exceptions/{request.pk}/approve/")
    assert response.status_code == 403
    assert "You filed this request: another exception owner must decide it." in (
        response.content.decode()
    )
    request.refresh_from_db()
    assert request.state == ExceptionRequest.State.SUBMITTED


def test_counts_by_state_urgency_and_team(scene, client_as, leadership):
    approved = scene.file()
    services.exception_request_approve(actor=scene.owner, request=approved, now=scene.now)
    denied = scene.file()
    services.exception_request_deny(actor=scene.owner, request=denied, note="no", now=scene.now)
    scene.file(submit=False)  # a draft is not counted
    response = client_as(leadership).get("/exceptions/counts/")
    counts = response.context["counts"]
    assert counts.total == 2
    assert counts.by_state["ACTIVE"] == 1 and counts.by_state["DENIED"] == 1
    assert [(row.label, row.total) for row in counts.by_urgency] == [("Launch", 2)]
    assert [(row.label, row.counts) for row in counts.by_team] == [
        ("team-qs1", {"ACTIVE": 1, "DENIED": 1})
    ]
    api = client_as(leadership).get("/api/v1/exception-requests/counts/").json()
    assert api["by_state"]["ACTIVE"] == 1 and api["total"] == 2


def test_the_urgency_help_fragment_explains_the_chosen_urgency(scene, client_as):
    response = client_as(scene.lead).get(
        f"/exceptions/urgency-help/?urgency={scene.urgency.pk}", HTTP_HX_REQUEST="true"
    )
    html = response.content.decode()
    assert "Windows up to 24 h" in html and "Grants priority 900" in html


def test_the_list_filters_by_state(scene, client_as):
    active = scene.file()
    services.exception_request_approve(actor=scene.owner, request=active, now=scene.now)
    scene.file()
    response = client_as(scene.lead).get("/exceptions/?state=ACTIVE", HTTP_HX_REQUEST="true")
    assert [r.pk for r in response.context["requests"]] == [active.pk]
    assert "<html" not in response.content.decode()  # the htmx fragment
