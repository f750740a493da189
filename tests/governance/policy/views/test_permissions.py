"""The permission matrix of the policy pages: each role × each page × GET/POST.

Allowed: 200 (a page, or a form shown again with its errors) or 302 (saved).
Refused: 403. Anonymous visitors are sent to the login page.
"""

import pytest
from django.urls import reverse

from fleet.models import QuotaShare
from governance.models import PolicyChange
from tests.factories import UrgencyDefinitionFactory

ROLES = ["admin", "team_lead", "exception_owner", "leadership", "outsider"]
READERS = {"admin", "team_lead", "exception_owner", "leadership"}
HISTORY_READERS = {"admin", "exception_owner"}
ADMINS = {"admin"}


@pytest.fixture
def objects(aws_queue):
    share = QuotaShare.objects.get(queue=aws_queue, name="qs2")
    change = PolicyChange.objects.create(
        reason="seed",
        target=PolicyChange.Target.SHARE,
        queue=aws_queue,
        share=share,
        object_repr=str(share),
        before={"state": "DISABLED"},
        after={"state": "ENABLED"},
    )
    urgency = UrgencyDefinitionFactory(name="launch")
    return {"queue": aws_queue.pk, "share": share.pk, "change": change.pk, "urgency": urgency.pk}


# (url name, kwargs builder, who may GET, who may POST); None = the method is not offered.
PAGES = [
    ("queue-list", lambda o: {}, READERS, None),
    ("queue-detail", lambda o: {"pk": o["queue"]}, READERS, None),
    ("queue-capacity", lambda o: {"pk": o["queue"]}, ADMINS, ADMINS),
    ("queue-capacity-impact", lambda o: {"pk": o["queue"]}, None, ADMINS),
    ("policy-list", lambda o: {}, ADMINS, None),
    ("share-create", lambda o: {"queue_pk": o["queue"]}, ADMINS, ADMINS),
    ("share-edit", lambda o: {"pk": o["share"]}, ADMINS, ADMINS),
    ("share-impact", lambda o: {"queue_pk": o["queue"]}, None, ADMINS),
    ("history", lambda o: {}, HISTORY_READERS, None),
    ("history-revert", lambda o: {"pk": o["change"]}, ADMINS, ADMINS),
    ("urgency-list", lambda o: {}, READERS, None),
    ("urgency-create", lambda o: {}, ADMINS, ADMINS),
    ("urgency-edit", lambda o: {"pk": o["urgency"]}, ADMINS, ADMINS),
]

CASES = [
    pytest.param(name, kwargs, method, allowed, role, id=f"{name}-{method}-{role}")
    for name, kwargs, getters, posters in PAGES
    for method, allowed in (("GET", getters), ("POST", posters))
    if allowed is not None
    for role in ROLES
]


@pytest.mark.django_db
@pytest.mark.parametrize("name, kwargs, method, allowed, role", CASES)
def test_role_may_or_may_not(request, client_as, objects, name, kwargs, method, allowed, role):
    client = client_as(request.getfixturevalue(role))
    url = reverse(name, kwargs=kwargs(objects))
    changes = PolicyChange.objects.count()

    response = client.get(url) if method == "GET" else client.post(url, {})

    if role in allowed:
        assert response.status_code in (200, 302)
    else:
        assert response.status_code == 403
    # An empty form saves nothing, whoever sends it.
    assert PolicyChange.objects.count() == changes


@pytest.mark.django_db
@pytest.mark.parametrize(
    "name, kwargs, method",
    [
        pytest.param(name, kwargs, method, id=f"{name}-{method}")
        for name, kwargs, getters, posters in PAGES
        for method, allowed in (("GET", getters), ("POST", posters))
        if allowed is not None
    ],
)
def test_anonymous_visitors_are_sent_to_login(client, objects, name, kwargs, method):
    url = reverse(name, kwargs=kwargs(objects))

    response = client.get(url) if method == "GET" else client.post(url, {})

    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))


@pytest.mark.django_db
def test_root_redirects_to_the_queue_overview(client_as, leadership):
    response = client_as(leadership).get("/")

    assert response.status_code == 302
    assert response["Location"] == reverse("queue-list")


@pytest.mark.django_db
def test_non_admins_see_no_edit_links(client_as, team_lead, aws_queue):
    html = client_as(team_lead).get(reverse("queue-list")).content.decode()

    assert "Edit capacity" not in html
    assert reverse("share-create", args=[aws_queue.pk]) not in html
