"""The exception owners page (admins appoint and remove owners) and editing a draft
request (its requester only, the same rules as filing, drafts only)."""

from datetime import timedelta

import pytest

from core.errors import InvalidInput, Refused
from governance.exceptions import services
from governance.models import ExceptionOwner, ExceptionRequest
from tests.factories import UserFactory

Kind = ExceptionRequest.Kind
State = ExceptionRequest.State
pytestmark = pytest.mark.django_db
FORMAT = "%Y-%m-%dT%H:%M"


@pytest.fixture
def users(scene, admin, leadership, outsider):
    return {
        "admin": admin,
        "team_lead": scene.lead,
        "exception_owner": scene.owner,
        "leadership": leadership,
        "outsider": outsider,
    }


# The owners page.


@pytest.mark.parametrize(
    ("role", "status"),
    [
        ("admin", 200),
        ("team_lead", 403),
        ("exception_owner", 403),
        ("leadership", 403),
        ("outsider", 403),
    ],
)
def test_only_admins_open_the_owners_page(scene, users, client_as, role, status):
    assert client_as(users[role]).get("/exceptions/owners/").status_code == status


@pytest.mark.parametrize("role", ["team_lead", "exception_owner", "leadership", "outsider"])
def test_only_admins_appoint_or_remove_owners(scene, users, client_as, role):
    owner = ExceptionOwner.objects.get(user=scene.owner)
    client = client_as(users[role])
    appoint = client.post(
        "/exceptions/owners/", {"user": scene.owner.pk, "share": scene.qs2.pk, "queue": ""}
    )
    remove = client.post(f"/exceptions/owners/{owner.pk}/remove/")
    assert (appoint.status_code, remove.status_code) == (403, 403)
    assert list(ExceptionOwner.objects.values_list("pk", flat=True)) == [owner.pk]


def test_anonymous_visitors_are_sent_to_log_in(scene, client_as):
    owner = ExceptionOwner.objects.get(user=scene.owner)
    for response in (
        client_as(None).get("/exceptions/owners/"),
        client_as(None).post(f"/exceptions/owners/{owner.pk}/remove/"),
    ):
        assert response.status_code == 302 and "/login" in response.url
    assert ExceptionOwner.objects.filter(pk=owner.pk).exists()


def test_the_page_lists_owners_with_their_scope(scene, client_as, admin):
    ExceptionOwner.objects.create(user=scene.owner, share=scene.qs2)
    response = client_as(admin).get("/exceptions/owners/")
    html = response.content.decode()
    rows = [(o.user, o.queue, o.share) for o in response.context["owners"]]
    assert (scene.owner, scene.queue, None) in rows and (scene.owner, None, scene.qs2) in rows
    assert "<h1>Exception owners</h1>" in html
    assert f"{scene.queue.name} / qs2" in html and "Remove" in html


def test_an_admin_appoints_an_owner_to_a_share(scene, client_as, admin):
    client = client_as(admin)
    response = client.post(
        "/exceptions/owners/", {"user": scene.owner.pk, "queue": "", "share": scene.qs2.pk}
    )
    assert response.status_code == 302 and response.url == "/exceptions/owners/"
    assert ExceptionOwner.objects.filter(user=scene.owner, share=scene.qs2, queue=None).exists()
    page = client.get(response.url).content.decode()
    assert "now decides for share" in page


def test_an_admin_appoints_an_owner_to_a_queue(scene, client_as, admin):
    from tests.factories import aws_sample_queue

    other = aws_sample_queue("second")
    response = client_as(admin).post(
        "/exceptions/owners/", {"user": scene.owner.pk, "queue": other.pk, "share": ""}
    )
    assert response.status_code == 302
    assert ExceptionOwner.objects.filter(user=scene.owner, queue=other).exists()


@pytest.mark.parametrize(
    ("scope", "field", "message"),
    [
        ("neither", "queue", "choose the queue or the share this owner decides for"),
        ("both", "share", "choose a queue or a share, not both: clear one of them"),
    ],
)
def test_appointing_needs_exactly_one_scope(scene, client_as, admin, scope, field, message):
    data = {"user": scene.owner.pk, "queue": "", "share": ""}
    if scope == "both":
        data.update(queue=scene.queue.pk, share=scene.qs2.pk)
    response = client_as(admin).post("/exceptions/owners/", data)
    assert response.status_code == 400
    assert response.context["form"].errors == {field: [message]}
    assert message in response.content.decode()
    assert ExceptionOwner.objects.count() == 1


def test_appointing_someone_outside_the_group_says_so(scene, client_as, admin, outsider):
    response = client_as(admin).post(
        "/exceptions/owners/", {"user": outsider.pk, "queue": "", "share": scene.qs2.pk}
    )
    assert response.status_code == 400
    assert response.context["form"].errors["user"] == [
        "outsider-user is not in the exception owners group; add them to the group "
        "(exception_owners) first, then appoint them"
    ]
    assert "not in the exception owners group" in response.content.decode()
    assert not ExceptionOwner.objects.filter(user=outsider).exists()
    assert not outsider.groups.exists()


def test_appointing_the_same_scope_twice_is_refused(scene, client_as, admin):
    response = client_as(admin).post(
        "/exceptions/owners/", {"user": scene.owner.pk, "queue": scene.queue.pk, "share": ""}
    )
    assert response.status_code == 400
    assert response.context["form"].errors["user"] == [
        f"owner-user already decides for queue {scene.queue.name}"
    ]


def test_an_admin_removes_an_owner(scene, client_as, admin):
    owner = ExceptionOwner.objects.get(user=scene.owner)
    response = client_as(admin).post(f"/exceptions/owners/{owner.pk}/remove/", follow=True)
    assert response.status_code == 200
    assert not ExceptionOwner.objects.filter(pk=owner.pk).exists()
    assert "no longer decides for queue" in response.content.decode()
    assert client_as(admin).get(f"/exceptions/owners/{owner.pk}/remove/").status_code == 405


def test_the_remove_service_is_for_admins_only(scene, admin):
    owner = ExceptionOwner.objects.get(user=scene.owner)
    with pytest.raises(Refused):
        services.exception_owner_remove(actor=scene.lead, owner=owner)
    services.exception_owner_remove(actor=admin, owner=owner)
    assert not ExceptionOwner.objects.exists()
    services.exception_owner_remove(actor=admin, owner=owner)  # already gone: nothing to do


def test_admins_find_the_owners_page_from_the_list_and_the_decision_queue(scene, client_as, admin):
    admin.groups.add(*scene.owner.groups.all())  # an admin who is also an owner
    assert "/exceptions/owners/" in client_as(admin).get("/exceptions/").content.decode()
    assert "/exceptions/owners/" in client_as(admin).get("/exceptions/decisions/").content.decode()
    assert "/exceptions/owners/" not in client_as(scene.lead).get("/exceptions/").content.decode()
    owner_queue = client_as(scene.owner).get("/exceptions/decisions/").content.decode()
    assert "/exceptions/owners/" not in owner_queue


# Editing a draft.


def edit_post(scene, **overrides):
    data = {
        "kind": Kind.TEMPORARY_CAPACITY,
        "team": str(scene.qs1.team.pk),
        "urgency": str(scene.urgency.pk),
        "justification": "Launch, now with a second instance",
        "window_start": (scene.now + timedelta(hours=1)).strftime(FORMAT),
        "window_end": (scene.now + timedelta(hours=6)).strftime(FORMAT),
        "share": str(scene.qs1.pk),
        "instance_type": str(scene.g5.pk),
        "extra_instances": "2",
        "draft": "1",
    }
    data.update(overrides)
    return data


def test_the_requester_sees_edit_draft_on_a_draft_only(scene, client_as, admin):
    draft = scene.file(submit=False)
    lead = client_as(scene.lead)
    assert f"/exceptions/{draft.pk}/edit/" in lead.get(f"/exceptions/{draft.pk}/").content.decode()
    admin_view = client_as(admin).get(f"/exceptions/{draft.pk}/").content.decode()
    assert "Edit draft" not in admin_view
    submitted = scene.file()
    assert "Edit draft" not in lead.get(f"/exceptions/{submitted.pk}/").content.decode()


def test_the_edit_page_shows_the_draft_in_the_filing_form(scene, client_as):
    draft = scene.file(submit=False)
    response = client_as(scene.lead).get(f"/exceptions/{draft.pk}/edit/")
    assert response.status_code == 200
    form = response.context["form"]
    assert form["justification"].value() == "Launch fine-tune"
    assert str(form["share"].value()) == str(scene.qs1.pk)
    assert f"Edit draft #{draft.pk}" in response.content.decode()


def test_the_requester_edits_a_draft_and_it_stays_a_draft(scene, client_as):
    draft = scene.file(submit=False)
    response = client_as(scene.lead).post(f"/exceptions/{draft.pk}/edit/", edit_post(scene))
    assert response.status_code == 302 and response.url == f"/exceptions/{draft.pk}/"
    draft.refresh_from_db()
    assert draft.state == State.DRAFT
    assert draft.extra_instances == 2
    assert draft.justification == "Launch, now with a second instance"


def test_the_requester_edits_and_submits_a_draft(scene, client_as):
    draft = scene.file(submit=False)
    data = edit_post(scene, submit="1")
    del data["draft"]
    response = client_as(scene.lead).post(f"/exceptions/{draft.pk}/edit/", data)
    assert response.status_code == 302
    draft.refresh_from_db()
    assert draft.state == State.SUBMITTED and draft.extra_instances == 2


def test_a_draft_can_change_kind_to_named_jobs(scene):
    draft = scene.file(submit=False)
    services.exception_request_update(
        actor=scene.lead, request=draft, data=scene.jobs(), now=scene.now
    )
    draft.refresh_from_db()
    assert draft.kind == Kind.PRIORITY_RAISE
    assert (draft.instance_type, draft.extra_instances) == (None, None)
    assert list(draft.jobs.all()) == [scene.running]


@pytest.mark.parametrize("who", ["admin", "exception_owner", "other_lead"])
def test_only_the_requester_edits_a_draft(scene, users, client_as, who):
    if who == "other_lead":
        user = UserFactory(username="co-lead", roles=["team_leads"])
        scene.qs1.team.leads.add(user)  # may see and submit it, but did not file it
    else:
        user = users[who]
    draft = scene.file(submit=False)
    client = client_as(user)
    assert client.get(f"/exceptions/{draft.pk}/edit/").status_code == 403
    assert client.post(f"/exceptions/{draft.pk}/edit/", edit_post(scene)).status_code == 403
    with pytest.raises(Refused, match="only the requester may edit"):
        services.exception_request_update(actor=user, request=draft, data=scene.capacity())
    draft.refresh_from_db()
    assert draft.extra_instances == 1


def test_editing_is_refused_once_submitted(scene, client_as):
    request = scene.file()
    lead = client_as(scene.lead)
    response = lead.post(f"/exceptions/{request.pk}/edit/", edit_post(scene), follow=True)
    assert "is submitted, so it cannot be edited any more; only a draft can" in (
        response.content.decode()
    )
    assert lead.get(f"/exceptions/{request.pk}/edit/").status_code == 302
    request.refresh_from_db()
    assert request.extra_instances == 1 and request.state == State.SUBMITTED
    with pytest.raises(services.TransitionRefused) as refused:
        services.exception_request_update(
            actor=scene.lead, request=request, data=scene.capacity(extra_instances=2)
        )
    assert refused.value.errors == {
        "state": [
            "this request is submitted, so it cannot be edited any more; only a draft can. "
            "File a new request instead"
        ]
    }


def test_the_update_is_conditional_on_the_state(scene):
    """A stale copy that still says DRAFT does not change a request submitted meanwhile."""
    draft = scene.file(submit=False)
    stale = ExceptionRequest.objects.get(pk=draft.pk)
    services.exception_request_submit(actor=scene.lead, request=draft, now=scene.now)
    with pytest.raises(services.TransitionRefused, match="is submitted"):
        services.exception_request_update(
            actor=scene.lead, request=stale, data=scene.capacity(extra_instances=2), now=scene.now
        )
    draft.refresh_from_db()
    assert draft.extra_instances == 1


def test_an_edit_follows_the_filing_rules_on_the_page(scene, client_as):
    draft = scene.file(submit=False)
    too_long = (scene.now + timedelta(hours=30)).strftime(FORMAT)
    response = client_as(scene.lead).post(
        f"/exceptions/{draft.pk}/edit/", edit_post(scene, window_end=too_long)
    )
    assert response.status_code == 400
    assert response.context["form"].errors["window_end"] == [
        "the window is 29 h long; urgency 'Launch' allows at most 24 h"
    ]
    assert b"allows at most 24 h" in response.content
    draft.refresh_from_db()
    assert draft.window_end == scene.now + timedelta(hours=4)


def test_the_update_service_uses_the_same_rules_as_filing(scene):
    draft = scene.file(submit=False)
    data = scene.capacity(window_end=scene.now + timedelta(hours=30))
    expected = services.request_validate(actor=scene.lead, data=data, now=scene.now)
    with pytest.raises(InvalidInput) as error:
        services.exception_request_update(actor=scene.lead, request=draft, data=data, now=scene.now)
    assert error.value.errors == expected
    assert "allows at most 24 h" in error.value.errors["window_end"][0]
    draft.refresh_from_db()
    assert draft.window_end == scene.now + timedelta(hours=4)


def test_anonymous_visitors_cannot_edit_drafts(scene, client_as):
    draft = scene.file(submit=False)
    response = client_as(None).get(f"/exceptions/{draft.pk}/edit/")
    assert response.status_code == 302 and "/login" in response.url
