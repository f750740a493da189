"""The queue page's lending figures are the engine's: after a real pass that borrows, each
share's borrowed, lent out and idle lendable instances as the page prints them equal
`/metrics` (fleet.metrics) and add up to the engine's own ledger of that state (what is
borrowed, and what a borrower could still take: the pool within what is free and not
held by a RESERVE share)."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from engine.quota import Ledger, Policy
from fleet.bridge import queue_state
from fleet.models import CapacityLimit, QueueCapacity, QuotaShare
from scheduler.services.passes import scheduling_pass
from tests.factories import CapacityLimitFactory, QuotaShareFactory, TeamFactory
from tests.fleet.test_metrics import (  # noqa: F401
    G5,
    at,
    real_time_speed,
    samples,
    share_key,
    submit,
)

pytestmark = pytest.mark.django_db

SENTENCE = re.compile(
    r"ml\.g5\.xlarge: (\d+) used within limit, (\d+) borrowed, (?:(\d+) lent out, )?"
    r"(\d+) idle \(lendable\)"
)


@pytest.fixture
def two_lenders(aws_queue, submit):  # noqa: F811 (the fixture imported above)
    """6 instances: qs1 (LEND_AND_BORROW, limit 1, 200 %), qs2 and qs4 (LEND, 2 each),
    qs3 (RESERVE, 1). qs1 runs 3 jobs of one instance: 1 within, 2 borrowed. 3 are
    free, of which qs3 holds 1: a borrower could take 2 more. The page used to call each
    lender's whole idle limit (2 and 2, as far as free) lendable: 4 of the 2 there are."""
    QueueCapacity.objects.filter(queue=aws_queue).update(instances=6)
    CapacityLimit.objects.filter(share__queue=aws_queue, share__name="qs2").update(max_instances=2)
    qs4 = QuotaShareFactory(
        queue=aws_queue,
        team=TeamFactory(name="team-qs4"),
        name="qs4",
        strategy=QuotaShare.Strategy.LEND,
        position=3,
    )
    CapacityLimitFactory(
        share=qs4,
        instance_type=CapacityLimit.objects.filter(share__queue=aws_queue).first().instance_type,
        max_instances=2,
    )
    for index in range(3):
        submit("qs1", f"run-{index}", priority=5 - index)
    scheduling_pass(queue_id=aws_queue.pk, now=at(0))
    return aws_queue


def page_figures(html: str) -> dict[str, dict[str, int]]:
    """Each share's figures as its row's text alternative says them."""
    out = {}
    for chunk in html.split("<tr")[1:]:
        name = re.search(r'class="share__name">([^<]+)<', chunk)
        sentence = SENTENCE.search(chunk)
        if name and sentence:
            within, borrowed, lent, lendable = sentence.groups()
            out[name.group(1)] = {
                "within": int(within),
                "borrowed": int(borrowed),
                "lent": int(lent or 0),
                "lendable": int(lendable),
            }
    return out


def test_the_page_says_what_the_engine_and_metrics_say(client_as, leadership, two_lenders):
    html = client_as(leadership).get(reverse("queue-detail", args=[two_lenders.pk])).content
    page = page_figures(html.decode())
    assert set(page) == {"qs1", "qs2", "qs3", "qs4"}
    assert page["qs1"] == {"within": 1, "borrowed": 2, "lent": 0, "lendable": 0}
    assert page["qs2"] == page["qs4"] == {"within": 0, "borrowed": 0, "lent": 1, "lendable": 1}
    assert page["qs3"]["lendable"] == 0 and page["qs3"]["lent"] == 0

    # /metrics says the same, share by share.
    got = samples(now=at(1))
    metric = {
        "within": "quota_share_in_use_within_limit_instances",
        "borrowed": "quota_share_borrowed_instances",
        "lent": "quota_share_lent_out_instances",
        "lendable": "quota_share_lendable_instances",
    }
    for share, figures in page.items():
        for field, name in metric.items():
            assert got[name][share_key("aws-sample", share)] == figures[field], (share, field)

    # The engine's ledger of the same state: everything borrowed is lent out by the
    # lenders, and what they lend now is what a borrower could take (pool and avail).
    state = queue_state(two_lenders, now=at(1))
    policy = Policy(state.snapshot.queue, state.snapshot.shares)
    ledger = Ledger(policy)
    for job in state.snapshot.running:
        ledger.add(policy.by_name[job.share], job.instance_type, job.instances)
    borrower = policy.by_name["qs1"]
    assert sum(f["borrowed"] for f in page.values()) == ledger.over[G5] == 2
    assert sum(f["lent"] for f in page.values()) == ledger.over[G5]
    lendable = min(ledger.pool(G5), ledger.avail(borrower, G5))
    assert sum(f["lendable"] for f in page.values()) == lendable == 2
    # The summary line says those totals.
    usage = client_as(leadership).get(reverse("queue-detail", args=[two_lenders.pk]))
    assert usage.context["usage"].summary == (
        "2 shares lend 2 idle ml.g5.xlarge; "
        "1 share borrows 2 ml.g5.xlarge, 2 of them lent out by 2 shares"
    )
