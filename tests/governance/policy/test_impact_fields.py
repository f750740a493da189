"""The share editor's preview says what each changed field does (governance.policy.impact):
switching a share to LEND and lowering its borrow limit are two different lines."""

import datetime as dt
from dataclasses import replace

import pytest
from django.urls import reverse
from django.utils import timezone

from fleet.models import QuotaShare
from governance.policy.impact import share_data_of, share_field_impact
from tests.factories import JobFactory
from tests.governance.policy.views.conftest import share_payload

pytestmark = pytest.mark.django_db


@pytest.fixture
def busy_queue(aws_queue):
    """qs1 (LEND_AND_BORROW, borrow limit 200%) runs three jobs: one its own, two borrowed."""
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


def _qs1(queue):
    return QuotaShare.objects.select_related("team", "queue").get(queue=queue, name="qs1")


def test_each_changed_field_has_its_own_line(busy_queue):
    qs1 = _qs1(busy_queue)
    stored = share_data_of(qs1)

    to_lend = share_field_impact(
        queue=busy_queue, data=replace(stored, strategy="LEND", borrow_limit=None), share=qs1
    )
    lower = share_field_impact(queue=busy_queue, data=replace(stored, borrow_limit=50), share=qs1)

    assert [field.change for field in to_lend] == [
        "Strategy: LEND_AND_BORROW → LEND (its borrow limit of 200% no longer applies)"
    ]
    assert [field.change for field in lower] == ["Borrow limit: 200% → 50%"]
    # Each says its own effect, in the engine's sentences.
    assert to_lend[0].lines and lower[0].lines
    both = share_field_impact(
        queue=busy_queue, data=replace(stored, borrow_limit=50, priority_ceiling=300), share=qs1
    )
    assert [field.field for field in both] == ["borrow_limit", "priority_ceiling"]
    assert both[0].text == lower[0].text


def test_unchanged_fields_have_no_line_and_governance_fields_say_theirs(busy_queue):
    qs1 = _qs1(busy_queue)
    stored = share_data_of(qs1)

    assert share_field_impact(queue=busy_queue, data=stored, share=qs1) == []

    [ceiling] = share_field_impact(
        queue=busy_queue, data=replace(stored, priority_ceiling=150), share=qs1
    )
    assert ceiling.change == "Priority ceiling: 100 → 150"
    assert ceiling.kind == "no_effect"
    # Empty keeps the stored ceiling: no line.
    assert (
        share_field_impact(queue=busy_queue, data=replace(stored, priority_ceiling=None), share=qs1)
        == []
    )


def test_the_fields_together_make_the_whole_change(busy_queue):
    qs1 = _qs1(busy_queue)
    stored = share_data_of(qs1)

    fields = share_field_impact(
        queue=busy_queue,
        data=replace(stored, borrow_limit=0, in_share_preemption=False, capacity_limits={}),
        share=qs1,
    )

    assert [field.field for field in fields] == [
        "borrow_limit",
        "capacity_limits",
        "in_share_preemption",
    ]
    assert all(field.lines for field in fields)


def test_the_page_preview_shows_one_line_per_field(admin_client, busy_queue):
    qs1 = _qs1(busy_queue)
    data = share_payload(qs1, borrow_limit=50, priority_ceiling=300)

    response = admin_client.post(
        reverse("share-impact", args=[busy_queue.pk]) + f"?share={qs1.pk}",
        data,
        HTTP_HX_REQUEST="true",
    )

    html = response.content.decode()
    assert html.count('class="impact__change"') == 2
    assert "Borrow limit: 200% → 50%" in html and "Priority ceiling: 100 → 300" in html


def test_the_preview_survives_a_failed_save(admin_client, busy_queue):
    qs1 = _qs1(busy_queue)
    data = share_payload(qs1, borrow_limit=50, reason="")

    response = admin_client.post(reverse("share-edit", args=[qs1.pk]), data)

    assert response.status_code == 200
    assert response.context["form"].errors["reason"]
    html = response.content.decode()
    assert "Borrow limit: 200% → 50%" in html
    assert "Change a field to see its effect" not in html
    qs1.refresh_from_db()
    assert qs1.borrow_limit == 200
