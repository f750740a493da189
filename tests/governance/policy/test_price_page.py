"""An instance type's price on the instance types page (issue 26 point 7): admins set or
clear it in a form that calls governance.policy.prices (reason, history, review), bad
input is named next to its field and changes nothing, and the list shows each price."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.test import Client
from django.urls import reverse

from fleet.models import InstanceType
from governance.models import PolicyChange, PolicyProposal
from governance.policy.prices import instance_type_price_set
from governance.policy.services import policy_change_revert
from governance.proposals.services import proposal_approve
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def a10g(db):
    return InstanceType.objects.create(name="ml.g5.xlarge", gpu_count=1, gpu_model="NVIDIA A10G")


def page_client(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def price_changes():
    return PolicyChange.objects.filter(target=PolicyChange.Target.PRICE)


def test_the_page_sets_a_price_through_the_service_into_the_history(admin, a10g):
    client = page_client(admin)
    listed = client.get(reverse("instance-type-list")).content.decode()
    assert "no price" in listed
    assert f'href="{reverse("instance-type-price", args=[a10g.pk])}"' in listed
    form = client.get(reverse("instance-type-price", args=[a10g.pk])).content.decode()
    assert "Price of one instance per hour (USD)" in form

    saved = client.post(
        reverse("instance-type-price", args=[a10g.pk]),
        {"price_per_hour": " 1.408 ", "reason": "SageMaker on-demand, us-east-1"},
        follow=True,
    )

    assert saved.redirect_chain == [(reverse("instance-type-list"), 302)]
    a10g.refresh_from_db()
    assert a10g.price_per_hour == Decimal("1.408")
    change = price_changes().get()
    assert (change.actor, change.reason, change.cause, change.object_repr) == (
        admin,
        "SageMaker on-demand, us-east-1",
        PolicyChange.Cause.EDIT,
        "ml.g5.xlarge price per hour",
    )
    assert change.before == {
        "instance_type": "ml.g5.xlarge",
        "price_per_hour": None,
        "currency": "USD",
    }
    assert change.after["price_per_hour"] == "1.4080"
    page = saved.content.decode()
    assert "Saved the price of ml.g5.xlarge: 1.408 USD per instance-hour." in page
    assert "1.408 USD" in page and "Change<span" in page
    history = client.get(reverse("history")).content.decode()
    assert "Price per instance-hour" in history and "1.4080" in history
    # The form shows the price it has, and the same price again changes nothing.
    again = client.get(reverse("instance-type-price", args=[a10g.pk]))
    assert again.context["form"]["price_per_hour"].value() == "1.408"
    same = client.post(
        reverse("instance-type-price", args=[a10g.pk]),
        {"price_per_hour": "1.4080", "reason": "again"},
        follow=True,
    )
    assert "its price is as it was" in same.content.decode()
    assert price_changes().count() == 1

    # Cleared: no price (never 0), recorded, and a revert brings it back.
    client.post(
        reverse("instance-type-price", args=[a10g.pk]),
        {"price_per_hour": "", "reason": "the contract ended"},
    )
    a10g.refresh_from_db()
    assert a10g.price_per_hour is None
    cleared = price_changes().order_by("-pk").first()
    assert cleared.after["price_per_hour"] is None
    policy_change_revert(actor=admin, change=cleared, reason="it did not")
    a10g.refresh_from_db()
    assert a10g.price_per_hour == Decimal("1.408")


@pytest.mark.parametrize(
    ("posted", "field", "words"),
    [
        ({"price_per_hour": "0"}, "price_per_hour", "must be more than 0"),
        ({"price_per_hour": "-2.20"}, "price_per_hour", "must be more than 0"),
        ({"price_per_hour": "2,20"}, "price_per_hour", "expected a number"),
        ({"price_per_hour": "two"}, "price_per_hour", "expected a number"),
        ({"price_per_hour": "NaN"}, "price_per_hour", "expected a number"),
        ({"price_per_hour": "1.23456"}, "price_per_hour", "at most 4 digits after"),
        ({"price_per_hour": "123456789"}, "price_per_hour", "at most 99999999.9999"),
        ({"price_per_hour": "1" * 41}, "price_per_hour", "at most 40 characters"),
        ({"price_per_hour": "3.10", "reason": " "}, "reason", "say why this change is made"),
    ],
)
def test_bad_input_is_named_next_to_its_field_and_changes_nothing(
    admin, a10g, posted, field, words
):
    instance_type_price_set(actor=admin, instance_type=a10g, price="1.408", reason="list price")
    before = price_changes().count()

    answer = page_client(admin).post(
        reverse("instance-type-price", args=[a10g.pk]), {"reason": "new contract", **posted}
    )

    assert answer.status_code == 200
    errors = answer.context["form"].errors
    assert list(errors) == [field]
    assert words in errors[field][0]
    html = answer.content.decode()
    # Next to the field: the error list the widget points at, the widget marked invalid.
    assert f'id="id_{field}_error"' in html and words in html
    assert 'aria-invalid="true"' in html
    a10g.refresh_from_db()
    assert a10g.price_per_hour == Decimal("1.408")
    assert price_changes().count() == before
    assert not PolicyProposal.objects.exists()


def test_only_admins_reach_the_price(a10g, team_lead):
    client = page_client(team_lead)
    assert client.get(reverse("instance-type-price", args=[a10g.pk])).status_code == 403
    refused = client.post(
        reverse("instance-type-price", args=[a10g.pk]), {"price_per_hour": "9", "reason": "x"}
    )
    assert refused.status_code == 403
    a10g.refresh_from_db()
    assert a10g.price_per_hour is None and not price_changes().exists()


def test_with_review_the_price_waits_for_another_admin(settings, admin, a10g):
    settings.POLICY_CHANGES_NEED_REVIEW = True

    answer = page_client(admin).post(
        reverse("instance-type-price", args=[a10g.pk]),
        {"price_per_hour": "2.20", "reason": "list price"},
    )

    assert answer.status_code == 302 and answer.url == reverse("proposal-list")
    proposal = PolicyProposal.objects.get()
    assert (proposal.kind, proposal.author, proposal.state) == ("price", admin, "PENDING")
    a10g.refresh_from_db()
    assert a10g.price_per_hour is None and not price_changes().exists()
    listed = page_client(admin).get(reverse("proposal-list")).content.decode()
    assert "Change of an instance type&#x27;s price" in listed

    proposal_approve(
        actor=UserFactory(username="second-admin", roles=["admins"]), proposal=proposal
    )

    a10g.refresh_from_db()
    assert a10g.price_per_hour == Decimal("2.2")
    change = price_changes().get()
    assert (change.actor, change.after["price_per_hour"]) == (admin, "2.2000")
