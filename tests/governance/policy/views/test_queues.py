"""The queue overview and a queue's page: bars, summary, legend, terms, empty state."""

import datetime as dt

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from fleet.models import CapacityLimit, QuotaShare
from tests.factories import (
    InstanceTypeFactory,
    JobFactory,
    QuotaShareFactory,
    UserFactory,
    aws_sample_queue,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def borrowing(aws_queue):
    qs1 = QuotaShare.objects.get(queue=aws_queue, name="qs1")
    for index in range(3):
        JobFactory(
            share=qs1,
            state="RUNNING",
            started_at=timezone.now() - dt.timedelta(minutes=5),
            start_seq=index,
            borrowed=index > 0,
        )
    return aws_queue


def test_overview_shows_each_share_with_bars_summary_and_legend(client_as, team_lead, borrowing):
    response = client_as(team_lead).get(reverse("queue-list"))

    html = response.content.decode()
    assert response.status_code == 200
    assert "<title>Queues" in html
    assert html.count("<main") == 1
    usage = response.context["usages"][0]
    assert usage.summary in html
    for name in ("qs1", "qs2", "qs3", "team-qs1"):
        assert name in html
    assert html.count('class="usage-bar"') == 3
    assert "Colours of the usage bars" in html
    assert "ml.g5.xlarge × 3" in html
    # Terms explain themselves.
    assert 'role="tooltip"' in html
    assert "Borrow limit" in html and "In-share preemption" in html
    assert "200%" in html


def test_the_summary_line_counts_lenders_and_borrowers(client_as, leadership, borrowing):
    usage = client_as(leadership).get(reverse("queue-list")).context["usages"][0]

    # qs1 runs 3 of the queue's 3, 2 beyond its limit: qs2's idle instance is one of
    # them (lent out, the engine's `_lending`); nothing is left to lend.
    assert usage.summary == (
        "1 share borrows 2 ml.g5.xlarge, 1 of them lent out by 1 share; no ml.g5.xlarge free"
    )
    idle = {row.share.name: row.bars[0].idle for row in usage.shares}
    assert idle == {"qs1": 0, "qs2": 0, "qs3": 0}
    assert [row.bars[0].unavailable for row in usage.shares] == [0, 1, 1]


def test_idle_figures_never_exceed_what_is_free(client_as, leadership, aws_queue):
    """One job of qs1 runs: 2 of 3 free; qs2 and qs3 each have 1 idle of their limit."""
    qs1 = QuotaShare.objects.get(queue=aws_queue, name="qs1")
    JobFactory(share=qs1, state="RUNNING", started_at=timezone.now(), start_seq=1)
    CapacityLimit.objects.filter(share__name="qs2").update(max_instances=1000)
    usage = client_as(leadership).get(reverse("queue-list")).context["usages"][0]
    bars = {row.share.name: row.bars[0] for row in usage.shares}
    assert usage.free == {"ml.g5.xlarge": 2}
    assert bars["qs2"].idle == 2 and bars["qs2"].unavailable == 998
    assert all(bar.idle <= 2 for bar in bars.values())
    # Of the 2 free, qs3 (RESERVE) holds 1 for itself: a borrower could take 1 (the
    # engine's pool and avail), the figure the summary gives.
    assert usage.summary == "1 share lends 1 idle ml.g5.xlarge"
    assert (bars["qs2"].lendable, bars["qs2"].lent, bars["qs2"].not_lendable) == (1, 0, 999)


def test_an_oversubscribed_queue_says_so_with_the_figures(client_as, leadership, aws_queue):
    CapacityLimit.objects.filter(share__name="qs2").update(max_instances=1000)
    page = client_as(leadership).get(reverse("queue-detail", args=[aws_queue.pk]))
    usage = page.context["usage"]
    assert [(o.instance_type, o.limits, o.capacity, o.excess) for o in usage.oversubscribed] == [
        ("ml.g5.xlarge", 1002, 3, 999)
    ]
    # Nothing runs: 3 free, lent once however large the limits, less the one qs3
    # (RESERVE) holds; shared out by idle limit, it is all qs2's (1 of qs1's 1001).
    assert usage.summary == "1 share lends 2 idle ml.g5.xlarge"
    html = page.content.decode()
    assert "Over-subscribed:" in html
    assert "share limits add up to 1002, 999 more than the queue's 3" in html
    assert "1001" not in usage.summary


def test_empty_overview_says_what_to_do(client_as, leadership):
    html = client_as(leadership).get(reverse("queue-list")).content.decode()

    assert "No queues yet" in html
    # Leadership has no way to make a queue: it is told who does, not given commands.
    assert "Queues appear here when a platform admin creates them" in html
    assert "seed_demo" not in html


def test_a_queue_without_shares_invites_admins_to_create_one(admin_client):
    from tests.factories import JobQueueFactory

    queue = JobQueueFactory(name="empty-queue")

    html = admin_client.get(reverse("queue-detail", args=[queue.pk])).content.decode()

    assert "No shares yet" in html
    assert reverse("share-create", args=[queue.pk]) in html


def test_queue_detail(client_as, exception_owner, aws_queue):
    response = client_as(exception_owner).get(reverse("queue-detail", args=[aws_queue.pk]))

    html = response.content.decode()
    assert "<title>aws-sample" in html
    assert f"{reverse('history')}?queue={aws_queue.pk}" in html


def test_unknown_queue_is_404(admin_client):
    assert admin_client.get(reverse("queue-detail", args=[999])).status_code == 404


def test_the_overview_costs_the_same_queries_for_few_or_many_shares(
    client_as, leadership, borrowing, django_assert_num_queries
):
    client = client_as(leadership)
    client.get(reverse("queue-list"))
    with CaptureQueriesContext(connection) as few:
        client.get(reverse("queue-list"))
    itype = InstanceTypeFactory()
    for _ in range(10):
        share = QuotaShareFactory(queue=borrowing)
        CapacityLimit.objects.create(share=share, instance_type=itype, max_instances=1)
        JobFactory(share=share, state="RUNNING", started_at=timezone.now())

    with django_assert_num_queries(len(few.captured_queries)):
        client.get(reverse("queue-list"))


def test_the_overview_costs_one_more_query_per_queue_at_most(
    client_as, leadership, aws_queue, django_assert_max_num_queries
):
    client = client_as(leadership)
    client.get(reverse("queue-list"))
    with CaptureQueriesContext(connection) as one:
        client.get(reverse("queue-list"))
    aws_sample_queue("second", capacity=3)

    with django_assert_max_num_queries(len(one.captured_queries) + 1):
        client.get(reverse("queue-list"))


def test_policy_index_lists_every_share_with_its_editor(admin_client, aws_queue):
    html = admin_client.get(reverse("policy-list")).content.decode()

    for share in aws_queue.shares.all():
        assert reverse("share-edit", args=[share.pk]) in html
    assert reverse("queue-capacity", args=[aws_queue.pk]) in html


def test_the_queue_page_shows_the_articles_that_explain_each_share(
    client_as, team_lead, aws_queue, django_assert_max_num_queries
):
    from demo.knowledge import seed_knowledge

    seed_knowledge(actor=UserFactory(username="kb-admin", roles=["admins"]))
    qs1 = QuotaShare.objects.get(queue=aws_queue, name="qs1")
    client = client_as(team_lead)
    response = client.get(reverse("queue-detail", args=[aws_queue.pk]))

    html = response.content.decode()
    assert "Why each share's policy exists" in html
    explained = {share.name: articles for share, articles, _active in response.context["explained"]}
    assert explained["qs1"], "the seeded interruption contract of qs1 explains it"
    assert all(qs1 in article.shares.all() for article in explained["qs1"])
    assert explained["qs1"][0].title in html
