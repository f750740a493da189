"""Workload class pages: the list for policy readers, the editor for admins (errors next
to the field, the reason, a proposal under review, the trade-off and its preview), the
delete page refusing a class in use; the share editor's default class and its figure."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from fleet.models import QuotaShare, WorkloadClass
from governance.models import PolicyChange, PolicyProposal
from tests.governance.policy.views.conftest import share_payload

pytestmark = pytest.mark.django_db


def _payload(**fields):
    data = {
        "name": "batch",
        "description": "Long training runs",
        "min_runtime_reclaim": "1800",
        "min_runtime_preempt": "0",
        "grace": "120",
        "checkpoint_on_notice": "30",
        "reason": "Agreed with the vision team",
    }
    data.update(fields)
    return data


def test_the_list_shows_each_contract_in_words(client_as, team_lead):
    WorkloadClass.objects.create(
        name="batch", min_runtime_reclaim=1800, grace=120, checkpoint_on_notice=30
    )

    html = client_as(team_lead).get(reverse("workload-class-list")).content.decode()

    assert "Protected from reclaim for 30 min after each start" in html
    assert "120 s notice, checkpoints in 30 s" in html
    assert "Not protected from in-share preemption" in html
    assert reverse("workload-class-create") not in html  # leads read, admins edit


def test_an_admin_creates_a_class_with_a_reason(admin_client):
    response = admin_client.post(reverse("workload-class-create"), _payload())

    assert response.status_code == 302
    batch = WorkloadClass.objects.get()
    assert (batch.min_runtime_reclaim, batch.grace, batch.checkpoint_on_notice) == (1800, 120, 30)
    change = PolicyChange.objects.get(target=PolicyChange.Target.WORKLOAD_CLASS)
    assert change.reason == "Agreed with the vision team"


@pytest.mark.parametrize(
    "fields, field, message",
    [
        ({"grace": "-1"}, "grace", "must be a whole number of seconds from 0"),
        ({"checkpoint_on_notice": "0"}, "checkpoint_on_notice", "from 1 to"),
        ({"grace": "0"}, "checkpoint_on_notice", "needs a grace"),
        ({"reason": ""}, "reason", "say why this change is made"),
    ],
)
def test_bad_values_are_shown_next_to_their_field(admin_client, fields, field, message):
    response = admin_client.post(reverse("workload-class-create"), _payload(**fields))

    assert response.status_code == 200
    form = response.context["form"]
    assert any(message in error for error in form.errors[field]), form.errors
    assert not WorkloadClass.objects.exists()


def test_a_name_clash_is_shown_on_the_name(admin_client):
    WorkloadClass.objects.create(name="batch")

    response = admin_client.post(reverse("workload-class-create"), _payload())

    assert response.context["form"].errors["name"] == [
        "a workload class named 'batch' already exists"
    ]
    assert WorkloadClass.objects.count() == 1


def test_under_review_the_page_says_it_was_proposed(settings, admin_client):
    settings.POLICY_CHANGES_NEED_REVIEW = True

    response = admin_client.post(reverse("workload-class-create"), _payload(), follow=True)

    assert "Proposed, waiting for another admin" in response.content.decode()
    assert PolicyProposal.objects.get().kind == PolicyProposal.Kind.CLASS_CREATE
    assert not WorkloadClass.objects.exists()


def test_the_editor_shows_the_trade_off_and_previews_a_change(admin_client, aws_queue):
    batch = WorkloadClass.objects.create(name="batch", min_runtime_reclaim=600, grace=60)
    QuotaShare.objects.filter(name="qs1").update(default_workload_class=batch)

    html = admin_client.get(reverse("workload-class-edit", args=[batch.pk])).content.decode()
    assert "within 11 m 00 s (660 s) at worst" in html  # qs2 and qs3 lend to qs1

    preview = admin_client.post(
        reverse("workload-class-impact", args=[batch.pk]),
        _payload(min_runtime_reclaim="1200", grace="60", checkpoint_on_notice=""),
    ).content.decode()
    assert "11 m 00 s (660 s) → 21 m 00 s (1260 s)" in preview


def test_a_class_in_use_is_not_deleted_and_the_page_names_its_use(admin_client, aws_queue):
    batch = WorkloadClass.objects.create(name="batch")
    QuotaShare.objects.filter(name="qs1").update(default_workload_class=batch)

    response = admin_client.post(
        reverse("workload-class-delete", args=[batch.pk]), {"reason": "unused"}
    )

    assert response.status_code == 200
    assert "batch is in use" in response.content.decode()
    assert WorkloadClass.objects.exists()


def test_the_share_editor_sets_the_default_class_and_shows_the_figure(admin_client, aws_queue):
    WorkloadClass.objects.create(name="batch", min_runtime_reclaim=600, grace=60)
    qs1 = aws_queue.shares.get(name="qs1")

    html = admin_client.get(reverse("share-edit", args=[qs1.pk])).content.decode()
    assert "Default workload class" in html and "How long a lender may wait" in html

    preview = admin_client.post(
        reverse("share-impact", args=[aws_queue.pk]) + f"?share={qs1.pk}",
        share_payload(qs1, default_workload_class="batch"),
    ).content.decode()
    assert "qs2&#x27;s worst-case time to get its" in preview and "(660 s)" in preview

    response = admin_client.post(
        reverse("share-edit", args=[qs1.pk]), share_payload(qs1, default_workload_class="batch")
    )
    assert response.status_code == 302
    qs1.refresh_from_db()
    assert qs1.default_workload_class.name == "batch"
    change = PolicyChange.objects.filter(share=qs1).latest("id")
    assert change.after["default_workload_class"] == "batch"


def _list_queries(client) -> int:
    with CaptureQueriesContext(connection) as queries:
        assert client.get(reverse("workload-class-list")).status_code == 200
    return len(queries)


def test_the_list_costs_the_same_queries_for_one_class_or_many(admin_client):
    WorkloadClass.objects.create(name="class-0")
    one = _list_queries(admin_client)
    for n in range(1, 8):
        WorkloadClass.objects.create(name=f"class-{n}", grace=60, checkpoint_on_notice=30)

    assert _list_queries(admin_client) == one
