"""The pages refuse hostile input next to the field, keep what the user typed, and change
nothing; hostile query strings are ignored, never a server error."""

import pytest
from django.urls import reverse

from fleet.models import QuotaShare
from tests.factories import JobFactory, UrgencyDefinitionFactory
from tests.hostile.conftest import HUGE


@pytest.fixture
def qs1(aws_queue):
    return QuotaShare.objects.get(queue=aws_queue, name="qs1")


def _share_post(share, **fields) -> dict:
    data = {
        "name": share.name,
        "team": str(share.team_id),
        "strategy": share.strategy,
        "borrow_limit": "" if share.borrow_limit is None else str(share.borrow_limit),
        "state": share.state,
        "version": str(share.version),
        "reason": "hostile test",
        "limit-0-instance_type": "ml.g5.xlarge",
        "limit-0-max_instances": "1",
    }
    return {**data, **{key: str(value) for key, value in fields.items()}}


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"limit-0-max_instances": HUGE}, "must be at most 2147483647"),
        ({"limit-0-max_instances": 1000}, "at most 3: the queue has 3 ml.g5.xlarge"),
        ({"borrow_limit": HUGE}, "must be at most 10000"),
        ({"borrow_limit": 1_000_000}, "must be at most 10000"),
        ({"name": "x" * 10_000}, "at most 100 characters"),
        ({"name": "qs1\x00"}, "Null characters are not allowed."),
    ],
)
def test_share_editor_keeps_the_input_and_names_the_field(
    admin_page, qs1, unchanged, fields, message
):
    with unchanged():
        response = admin_page.post(reverse("share-edit", args=[qs1.pk]), _share_post(qs1, **fields))
    assert response.status_code == 200
    html = response.content.decode()
    assert message in html
    for value in fields.values():
        if "\x00" not in str(value):
            assert f'value="{value}"' in html  # the form comes back filled in


def test_share_impact_preview_names_a_huge_limit(admin_page, qs1, unchanged):
    with unchanged():
        response = admin_page.post(
            reverse("share-impact", args=[qs1.queue_id]) + f"?share={qs1.pk}",
            _share_post(qs1, **{"limit-0-max_instances": HUGE}),
        )
    assert response.status_code == 200
    assert "must be at most 2147483647" in response.content.decode()


def test_capacity_editor_refuses_a_huge_capacity(admin_page, aws_queue, unchanged):
    data = {
        "version": str(aws_queue.version),
        "reason": "grow",
        "capacity-0-instance_type": "ml.g5.xlarge",
        "capacity-0-max_instances": str(HUGE),
    }
    with unchanged():
        response = admin_page.post(reverse("queue-capacity", args=[aws_queue.pk]), data)
    assert response.status_code == 200
    html = response.content.decode()
    assert "must be at most 2147483647" in html
    assert f'value="{HUGE}"' in html


@pytest.mark.parametrize(
    ("url_name", "data", "field"),
    [
        ("urgency-create", {"invokers": [str(HUGE)]}, "invokers"),
        ("urgency-create", {"max_window_hours": str(HUGE)}, "max_window_hours"),
        ("knowledge-create", {"shares": [str(HUGE)]}, "shares"),
        ("knowledge-create", {"editors": ["\x00"]}, "editors"),
        ("knowledge-create", {"urgencies": [str(-HUGE)]}, "urgencies"),
        ("exception-create", {"jobs": [str(HUGE)]}, "jobs"),
        ("exception-create", {"extra_instances": str(HUGE)}, "extra_instances"),
    ],
)
def test_page_forms_refuse_huge_ids_and_nul_in_list_items(
    admin_page, aws_queue, unchanged, url_name, data, field
):
    UrgencyDefinitionFactory(name="Deadline")
    with unchanged():
        response = admin_page.post(reverse(url_name), data)
    assert response.status_code in (200, 400)
    assert response.context["form"].errors.get(field), response.context["form"].errors


def test_what_if_workload_refuses_a_date_that_overflows(admin_page, admin, aws_queue, unchanged):
    from governance.whatif.services import comparison_create

    comparison = comparison_create(actor=admin, queue=aws_queue, title="overflow")
    with unchanged():
        response = admin_page.post(
            reverse("whatif-workload", args=[comparison.pk]),
            {"kind": "RECORDED", "start": "9999-12-31", "days": "30", "scale": "1"},
        )
    assert response.status_code == 400
    assert response.context["workload_form"].errors["start"] == [
        "too late: the workload would end after the year 9999"
    ]


QUERY_PAGES = [
    ("job-list", "queue"),
    ("job-list", "state"),
    ("exception-urgency-help", "urgency"),
    ("history", "queue"),
    ("history", "actor"),
    ("exception-list", "team"),
    ("knowledge-search", "q"),
    ("knowledge-search", "share"),
    ("whatif-list", "queue"),
    ("dashboard", "queue"),
    ("dashboard", "month"),
]


@pytest.mark.parametrize("value", [str(HUGE), "\x00", "a\x00b", "9999-99", "x" * 600])
@pytest.mark.parametrize(("url_name", "name"), QUERY_PAGES)
def test_hostile_query_string_is_not_a_server_error(admin_page, aws_queue, url_name, name, value):
    JobFactory(share=QuotaShare.objects.get(queue=aws_queue, name="qs1"))
    response = admin_page.get(reverse(url_name), {name: value})
    assert response.status_code in (200, 400), response.status_code


@pytest.mark.parametrize(
    ("url_name", "form", "bad", "good", "kept"),
    [
        ("job-list", "filter_form", {"queue": str(HUGE)}, {"state": "RUNNING"}, "RUNNING"),
        (
            "exception-list",
            "filter_form",
            {"team": "\x00"},
            {"kind": "PRIORITY_RAISE"},
            "PRIORITY_RAISE",
        ),
        ("history", "filter_form", {"actor": str(-HUGE)}, {"cause": "revert"}, "revert"),
        ("knowledge-search", "form", {"share": str(HUGE)}, {"q": "reclaim"}, "reclaim"),
    ],
)
def test_a_bad_page_filter_is_named_next_to_its_field_and_only_it_is_dropped(
    admin_page, aws_queue, url_name, form, bad, good, kept
):
    response = admin_page.get(reverse(url_name), {**bad, **good})
    assert response.status_code == 200
    filters = response.context[form]
    [name] = bad
    assert filters.errors[name]
    assert f'id="id_{name}_error"' in response.content.decode()
    [other] = good
    assert filters.cleaned_data[other] == kept


def test_a_window_end_past_the_year_9999_in_utc_is_a_field_error(
    admin_page, aws_queue, unchanged, settings
):
    settings.TIME_ZONE = "America/New_York"
    urgency = UrgencyDefinitionFactory(name="Deadline")
    qs1 = QuotaShare.objects.get(queue=aws_queue, name="qs1")
    data = {
        "kind": "TEMPORARY_CAPACITY",
        "team": str(qs1.team_id),
        "urgency": str(urgency.pk),
        "justification": "launch",
        "window_start": "2030-01-01T00:00",
        "window_end": "9999-12-31T23:59",
        "share": str(qs1.pk),
        "instance_type": str(qs1.limits.get().instance_type_id),
        "extra_instances": "1",
    }
    with unchanged():
        response = admin_page.post(reverse("exception-create"), data)
    assert response.context["form"].errors["window_end"] == [
        "out of range: choose a moment before the year 9999"
    ]
