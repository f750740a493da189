"""The history page: timeline, filters (query string, htmx fragment), diff, revert."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from fleet.models import QuotaShare
from fleet.selectors import share_document
from governance.models import PolicyChange
from governance.policy.services import share_data_from_document, share_update
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


def _edit(share, *, actor, reason="Quarterly rebalance", **changes):
    doc = {**share_document(share), **changes}
    return share_update(
        actor=actor,
        share=share,
        data=share_data_from_document(doc),
        reason=reason,
        expected_version=QuotaShare.objects.get(pk=share.pk).version,
    )


@pytest.fixture
def qs2(aws_queue):
    return QuotaShare.objects.get(queue=aws_queue, name="qs2")


def test_history_shows_who_why_and_a_field_level_diff(admin_client, admin, qs2):
    _edit(qs2, actor=admin, reason="qs2 needs two", capacity_limits={"ml.g5.xlarge": 2})

    response = admin_client.get(reverse("history"))

    html = response.content.decode()
    assert "<title>Policy history" in html
    assert "qs2 needs two" in html
    assert "admin-user" in html
    entry = response.context["entries"][0]
    assert [(row.field, row.old, row.new) for row in entry.diff] == [
        ("capacity_limits", "ml.g5.xlarge × 1", "ml.g5.xlarge × 2")
    ]
    assert 'class="diff-old"' in html and 'class="diff-new"' in html
    assert "<time datetime=" in html


def test_newest_first(admin_client, admin, qs2):
    _edit(qs2, actor=admin, reason="first", in_share_preemption=True)
    _edit(qs2, actor=admin, reason="second", in_share_preemption=False)

    # The share's changes (the admin fixture's role grant is in the history too).
    entries = admin_client.get(reverse("history"), {"share": qs2.pk}).context["entries"]

    assert [entry.change.reason for entry in entries] == ["second", "first"]


def test_filters_live_in_the_query_string(admin_client, admin, aws_queue, qs2):
    qs3 = QuotaShare.objects.get(queue=aws_queue, name="qs3")
    other_admin = UserFactory(username="other-admin", roles=["admins"])
    _edit(qs2, actor=admin, reason="about qs2", state="DISABLED")
    _edit(qs3, actor=other_admin, reason="about qs3", state="DISABLED")

    by_share = admin_client.get(reverse("history"), {"share": qs3.pk}).context["entries"]
    by_actor = admin_client.get(reverse("history"), {"actor": admin.pk}).context["entries"]
    by_cause = admin_client.get(reverse("history"), {"cause": "revert"})

    assert [e.change.reason for e in by_share] == ["about qs3"]
    assert [e.change.reason for e in by_actor] == ["about qs2"]
    assert "No changes match these filters" in by_cause.content.decode()


def test_htmx_gets_only_the_list_fragment(admin_client, admin, qs2):
    _edit(qs2, actor=admin, reason="fragment", state="DISABLED")

    response = admin_client.get(reverse("history"), {"share": qs2.pk}, HTTP_HX_REQUEST="true")

    html = response.content.decode()
    assert "<html" not in html
    assert "fragment" in html
    assert "HX-Request" in response["Vary"]


def test_history_is_paginated(admin_client, admin, qs2):
    for index in range(23):
        _edit(qs2, actor=admin, reason=f"edit {index}", in_share_preemption=index % 2 == 0)

    first = admin_client.get(reverse("history"), {"share": qs2.pk})
    second = admin_client.get(reverse("history"), {"share": qs2.pk, "page": 2})

    assert len(first.context["entries"]) == 20
    assert len(second.context["entries"]) == 3
    assert "Page 1 of 2" in first.content.decode()


def test_the_list_costs_the_same_queries_for_few_or_many_changes(
    admin_client, admin, qs2, django_assert_num_queries
):
    _edit(qs2, actor=admin, reason="one", in_share_preemption=True)
    admin_client.get(reverse("history"))  # warm the session
    with CaptureQueriesContext(connection) as few:
        admin_client.get(reverse("history"))
    for index in range(12):
        _edit(qs2, actor=admin, reason=f"more {index}", in_share_preemption=index % 2 == 0)

    with django_assert_num_queries(len(few.captured_queries)):
        admin_client.get(reverse("history"))


def test_admins_get_a_revert_button_owners_do_not(client_as, admin, exception_owner, qs2):
    _edit(qs2, actor=admin, state="DISABLED")

    admin_html = client_as(admin).get(reverse("history")).content.decode()
    owner_html = client_as(exception_owner).get(reverse("history")).content.decode()

    assert "Revert this change" in admin_html
    assert "Revert this change" not in owner_html


def test_revert_creates_a_new_change_and_restores_the_fields(admin_client, admin, qs2):
    _edit(qs2, actor=admin, reason="grow", capacity_limits={"ml.g5.xlarge": 2})
    change = PolicyChange.objects.get(share=qs2)

    response = admin_client.post(
        reverse("history-revert", args=[change.pk]), {"reason": "Growth was premature"}
    )

    assert response.status_code == 302
    revert = PolicyChange.objects.latest("id")
    assert revert.pk != change.pk
    assert revert.cause == PolicyChange.Cause.REVERT
    assert revert.reverts == change
    assert revert.reason == "Growth was premature"
    assert qs2.limits.get().max_instances == 1
    html = admin_client.get(reverse("history")).content.decode()
    assert "reverts <a href=" in html and f"change #{change.pk}</a>" in html


def test_revert_needs_a_reason(admin_client, admin, qs2):
    _edit(qs2, actor=admin, capacity_limits={"ml.g5.xlarge": 2})
    change = PolicyChange.objects.get(share=qs2)

    response = admin_client.post(reverse("history-revert", args=[change.pk]), {"reason": ""})

    assert response.status_code == 200
    assert response.context["form"].errors["reason"]
    assert 'id="id_reason_error"' in response.content.decode()
    assert PolicyChange.objects.filter(share=qs2).count() == 1
    assert qs2.limits.get().max_instances == 2


def test_empty_history_says_what_will_appear(client):
    # A superuser: an admin without a role group, whose grant would be in the history.
    client.force_login(UserFactory(username="root", is_superuser=True))
    html = client.get(reverse("history")).content.decode()

    assert "No policy changes yet" in html
