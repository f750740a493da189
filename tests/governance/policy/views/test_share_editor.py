"""The share editor: every rule through the page, saving, conflicts and the impact preview."""

import datetime as dt

import pytest
from django.urls import reverse
from django.utils import timezone
from django.utils.html import escape

from fleet.models import CapacityLimit, QuotaShare
from fleet.selectors import share_document
from governance.models import PolicyChange
from governance.policy.impact import share_change_impact
from tests.factories import (
    InstanceTypeFactory,
    JobFactory,
    QueueCapacityFactory,
    QuotaShareFactory,
    TeamFactory,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def qs2(aws_queue):
    return QuotaShare.objects.get(queue=aws_queue, name="qs2")


def _snapshot(queue):
    return [share_document(share) for share in queue.shares.order_by("pk")]


def _field_error(response, field):
    return response.context["form"].errors.get(field, [])


def _row_errors(response, index, field="max_instances"):
    return response.context["form"].limit_rows[index].errors.get(field, [])


# Every validation rule through the page: the message sits next to its field, and
# nothing changes: not the share, not its limits, not the history.

RULES = [
    pytest.param({"name": ""}, "name", id="name-required"),
    pytest.param({"name": "qs1"}, "name", id="name-unique-in-queue"),
    pytest.param({"team": ""}, "team", id="team-required"),
    pytest.param({"strategy": "GREEDY"}, "strategy", id="strategy-choice"),
    pytest.param({"borrow_limit": 50}, "borrow_limit", id="borrow-limit-only-lend-and-borrow"),
    pytest.param(
        {"strategy": "LEND_AND_BORROW", "borrow_limit": -2},
        "borrow_limit",
        id="borrow-limit-at-least-minus-one",
    ),
    pytest.param({"borrow_limit": "lots"}, "borrow_limit", id="borrow-limit-number"),
    pytest.param({"state": "PAUSED"}, "state", id="state-choice"),
    pytest.param({"reason": "  "}, "reason", id="reason-required"),
]


@pytest.mark.parametrize("fields, field", RULES)
def test_rule_is_shown_next_to_its_field_and_nothing_changes(
    admin_client, share_post, qs2, fields, field
):
    before, changes = _snapshot(qs2.queue), PolicyChange.objects.count()

    response = admin_client.post(reverse("share-edit", args=[qs2.pk]), share_post(qs2, **fields))

    assert response.status_code == 200
    errors = _field_error(response, field)
    assert errors, response.context["form"].errors
    html = response.content.decode()
    assert f'id="id_{field}_error"' in html
    assert escape(errors[0]) in html
    assert _snapshot(qs2.queue) == before
    assert PolicyChange.objects.count() == changes


LIMIT_RULES = [
    pytest.param({"ml.g5.xlarge": 0}, 0, "max_instances", id="limit-at-least-one"),
    pytest.param({"ml.g5.xlarge": -3}, 0, "max_instances", id="limit-not-negative"),
    pytest.param({"ml.p4d.24xlarge": 1}, 0, "instance_type", id="type-of-the-queue-only"),
]


@pytest.mark.parametrize("limits, row, field", LIMIT_RULES)
def test_limit_rule_is_shown_on_its_row(admin_client, share_post, qs2, limits, row, field):
    InstanceTypeFactory(name="ml.p4d.24xlarge")
    before, changes = _snapshot(qs2.queue), PolicyChange.objects.count()

    response = admin_client.post(
        reverse("share-edit", args=[qs2.pk]), share_post(qs2, limits=limits)
    )

    assert response.status_code == 200
    assert _row_errors(response, row, field)
    assert _snapshot(qs2.queue) == before
    assert PolicyChange.objects.count() == changes


def test_a_share_needs_at_least_one_limit(admin_client, share_post, qs2):
    changes = PolicyChange.objects.count()

    response = admin_client.post(reverse("share-edit", args=[qs2.pk]), share_post(qs2, limits={}))

    assert response.status_code == 200
    assert response.context["form"].limit_errors
    assert 'id="limit-errors"' in response.content.decode()
    assert CapacityLimit.objects.filter(share=qs2).count() == 1
    assert PolicyChange.objects.count() == changes


def test_a_type_named_twice_is_refused_on_the_second_row(admin_client, share_post):
    queue = QueueCapacityFactory(instance_type=InstanceTypeFactory(name="ml.g5.xlarge")).queue
    QueueCapacityFactory(queue=queue, instance_type=InstanceTypeFactory(name="ml.g5.2xlarge"))
    share = QuotaShareFactory(queue=queue)
    CapacityLimit.objects.create(
        share=share, instance_type=InstanceTypeFactory(name="ml.g5.xlarge"), max_instances=1
    )
    data = share_post(share)
    data.update({"limit-1-instance_type": "ml.g5.xlarge", "limit-1-max_instances": "2"})

    response = admin_client.post(reverse("share-edit", args=[share.pk]), data)

    assert response.status_code == 200
    assert _row_errors(response, 1, "instance_type")


def test_a_queue_holds_at_most_twenty_shares(admin_client, share_post, aws_queue):
    itype = InstanceTypeFactory()
    for _ in range(17):
        CapacityLimit.objects.create(
            share=QuotaShareFactory(queue=aws_queue), instance_type=itype, max_instances=1
        )
    assert aws_queue.shares.count() == 20
    data = share_post(QuotaShare.objects.get(queue=aws_queue, name="qs2"), name="one-too-many")
    data.pop("version")

    response = admin_client.post(reverse("share-create", args=[aws_queue.pk]), data)

    assert response.status_code == 200
    assert response.context["form"].non_field_errors()
    assert aws_queue.shares.count() == 20


def test_all_problems_are_reported_at_once(admin_client, share_post, qs2):
    response = admin_client.post(
        reverse("share-edit", args=[qs2.pk]),
        share_post(qs2, name="", borrow_limit=10, reason="", limits={"ml.g5.xlarge": 0}),
    )

    form = response.context["form"]
    assert {"name", "borrow_limit", "reason"} <= set(form.errors)
    assert _row_errors(response, 0)


# Saving.


def test_saving_applies_the_change_records_it_and_links_to_it(admin_client, share_post, qs2):
    response = admin_client.post(
        reverse("share-edit", args=[qs2.pk]),
        share_post(qs2, limits={"ml.g5.xlarge": 2}, reason="Team qs2 grows"),
        follow=True,
    )

    qs2.refresh_from_db()
    change = PolicyChange.objects.get(share=qs2)
    assert qs2.version == 2
    assert qs2.limits.get().max_instances == 2
    assert change.actor.username == "admin-user"
    assert change.reason == "Team qs2 grows"
    assert response.redirect_chain[-1][0] == reverse("queue-detail", args=[qs2.queue_id]) + (
        f"#share-{qs2.pk}"
    )
    html = response.content.decode()
    assert "now version 2" in html
    assert f"#change-{change.pk}" in html


def test_creating_a_share(admin_client, share_post, aws_queue, qs2):
    team = TeamFactory(name="vision")
    data = share_post(qs2, name="vision-share", team=team.pk, reason="New team")
    data.pop("version")

    response = admin_client.post(reverse("share-create", args=[aws_queue.pk]), data)

    share = QuotaShare.objects.get(queue=aws_queue, name="vision-share")
    assert response.status_code == 302
    assert share.team == team
    assert share.limits.get().max_instances == 1
    assert PolicyChange.objects.get(share=share).before is None


def test_disabling_a_share(admin_client, share_post, qs2):
    admin_client.post(
        reverse("share-edit", args=[qs2.pk]), share_post(qs2, state="DISABLED", reason="Retired")
    )

    qs2.refresh_from_db()
    assert qs2.state == QuotaShare.State.DISABLED


def test_the_editor_shows_the_share_as_it_is(admin_client, qs2):
    response = admin_client.get(reverse("share-edit", args=[qs2.pk]))

    html = response.content.decode()
    assert "<title>Edit share qs2" in html
    assert 'name="version" value="1"' in html
    assert 'name="name" value="qs2"' in html
    assert 'hx-post="' + reverse("share-impact", args=[qs2.queue_id]) in html
    assert 'hx-trigger="change, keyup changed delay:400ms"' in html
    assert "csrfmiddlewaretoken" in html
    assert "Reason for this change" in html
    # The instance type select offers the queue's types only.
    assert response.context["form"].limit_rows[0].fields["instance_type"].choices == [
        ("", "—"),
        ("ml.g5.xlarge", "ml.g5.xlarge"),
    ]


# Optimistic locking: two admins load version 1; the second save shows the conflict.


def test_the_second_save_shows_both_versions_and_loses_nothing(client_as, admin, share_post, qs2):
    from tests.factories import UserFactory

    other = UserFactory(username="other-admin", roles=["admins"])
    first, second = client_as(other), client_as(admin)
    url = reverse("share-edit", args=[qs2.pk])
    first.get(url)
    second.get(url)
    loaded = share_post(qs2)
    first.post(url, {**loaded, "in_share_preemption": "on", "reason": "Theirs"})

    response = second.post(
        url, {**loaded, "limit-0-max_instances": "2", "reason": "Mine: more for qs2"}
    )

    assert response.status_code == 200
    conflict = response.context["conflict"]
    assert conflict["version"] == 2
    rows = {row.label: row for row in conflict["rows"]}
    assert rows["In-share preemption"].theirs == "on"
    assert rows["In-share preemption"].yours == "off"
    assert rows["Capacity limits"].theirs == "ml.g5.xlarge × 1"
    assert rows["Capacity limits"].yours == "ml.g5.xlarge × 2"
    html = response.content.decode()
    assert "Someone else saved this while you were editing" in html
    assert "Theirs" in html and "Yours" in html
    # Nothing lost: the admin's input is still in the form, now based on version 2.
    form = response.context["form"]
    assert form["reason"].value() == "Mine: more for qs2"
    assert form.limit_rows[0]["max_instances"].value() == "2"
    assert form["version"].value() == "2"
    qs2.refresh_from_db()
    assert qs2.version == 2
    assert qs2.limits.get().max_instances == 1
    assert PolicyChange.objects.filter(share=qs2).count() == 1

    # Saving again applies the change on top of theirs.
    again = second.post(url, {**loaded, "limit-0-max_instances": "2", "version": "2"})

    assert again.status_code == 302
    qs2.refresh_from_db()
    assert qs2.version == 3
    assert qs2.limits.get().max_instances == 2


# The impact preview (htmx fragment).


@pytest.fixture
def busy_queue(aws_queue):
    """qs1 runs three one-instance jobs: one within its limit, two borrowed."""
    qs1 = QuotaShare.objects.get(queue=aws_queue, name="qs1")
    started = timezone.now() - dt.timedelta(minutes=30)
    for index in range(3):
        JobFactory(
            share=qs1,
            name=f"train-{index}",
            state="RUNNING",
            started_at=started,
            start_seq=index,
            borrowed=index > 0,
        )
    return aws_queue


def test_the_preview_is_the_engines_sentences(admin_client, share_post, busy_queue):
    qs1 = QuotaShare.objects.get(queue=busy_queue, name="qs1")
    data = share_post(qs1, borrow_limit=0)

    response = admin_client.post(
        reverse("share-impact", args=[busy_queue.pk]) + f"?share={qs1.pk}",
        data,
        HTTP_HX_REQUEST="true",
    )

    assert response.status_code == 200
    html = response.content.decode()
    assert "<html" not in html
    from governance.policy.forms import ShareForm

    form = ShareForm(data, queue=busy_queue, share=qs1)
    assert form.is_valid()
    lines = share_change_impact(queue=busy_queue, data=form.share_data(), share=qs1)
    assert lines
    for line in lines:
        assert line.text in html
        for job in line.jobs:
            assert job in html


def test_the_preview_changes_nothing(admin_client, share_post, busy_queue):
    qs2 = QuotaShare.objects.get(queue=busy_queue, name="qs2")
    before, changes = _snapshot(busy_queue), PolicyChange.objects.count()

    admin_client.post(
        reverse("share-impact", args=[busy_queue.pk]) + f"?share={qs2.pk}",
        share_post(qs2, state="DISABLED", reason=""),
        HTTP_HX_REQUEST="true",
    )

    assert _snapshot(busy_queue) == before
    assert PolicyChange.objects.count() == changes


def test_the_preview_names_what_blocks_saving(admin_client, share_post, qs2):
    response = admin_client.post(
        reverse("share-impact", args=[qs2.queue_id]) + f"?share={qs2.pk}",
        share_post(qs2, borrow_limit=30),
        HTTP_HX_REQUEST="true",
    )

    html = response.content.decode()
    assert "cannot be saved yet" in html
    assert "Borrow limit" in html
