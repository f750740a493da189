"""In real Chromium, at desktop and phone size: the queue page's bars and banner tell the
truth when share limits add up to more than the queue holds.

qs2's limit is 1000 in a queue of 3 ml.g5.xlarge, and qs1 runs 2 jobs: 1 instance is
free. No idle figure exceeds it, the banner lends 1 (not 1001), the page says the queue
is over-subscribed with the figures, and the borrow-cap marker stays inside its bar
(not over the Edit link). axe finds no serious or critical problem.
"""

import datetime as dt
import re

import pytest
from django.contrib.auth.models import Group, User
from django.utils import timezone
from playwright.sync_api import expect

from fleet.models import CapacityLimit
from tests.factories import JobFactory, aws_sample_queue

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
PASSWORD = "correct horse battery staple"


@pytest.fixture(params=[{"width": 1280, "height": 800}, {"width": 390, "height": 844}],
                ids=["desktop", "phone"])  # fmt: skip
def browser_context_args(request):
    return {"viewport": request.param}


@pytest.fixture
def queue():
    queue = aws_sample_queue()
    qs1 = queue.shares.get(name="qs1")
    for seq in (1, 2):
        JobFactory(
            share=qs1, state="RUNNING", start_seq=seq, borrowed=seq == 2,
            started_at=timezone.now() - dt.timedelta(minutes=5),
        )  # fmt: skip
    CapacityLimit.objects.filter(share__queue=queue, share__name="qs2").update(max_instances=1000)
    admin = User.objects.create_user("ada", password=PASSWORD)
    admin.groups.add(Group.objects.get_or_create(name="admins")[0])
    return queue


def test_idle_figures_and_banner_of_an_oversubscribed_queue(
    page, live_server, login, assert_accessible, queue
):
    login(page, live_server, "ada", PASSWORD, next=f"/queues/{queue.pk}/")
    card = page.locator(f"#queue-{queue.pk}")
    expect(card.locator(".queue__summary")).to_have_text(
        "1 share borrows 1 ml.g5.xlarge, 1 of them lent out by 1 share"
    )
    expect(card.locator(".queue__oversubscribed")).to_contain_text(
        "share limits add up to 1002, 999 more than the queue's 3"
    )
    expect(card.locator(".queue__oversubscribed")).to_contain_text("1 free now")
    qs2 = card.locator("tr", has_text="qs2")
    expect(qs2.locator(".usage .visually-hidden")).to_contain_text(
        "1 lent out, 0 idle (lendable) of limit 1000, 999 of the limit not lendable now"
    )
    # Every idle figure on the page is at most the one free instance.
    for sentence in card.locator(".usage .visually-hidden").all_inner_texts():
        idle = int(re.search(r"(\d+) idle \(lendable\)", sentence).group(1))
        assert idle <= 1, sentence
    # qs1's borrow-cap marker (limit 1 + 200 % = 3) stays inside the bar.
    bar = card.locator("tr", has_text="qs1").locator(".usage-bar")
    cap = bar.locator(".usage-bar__cap")
    bar_box, cap_box = bar.bounding_box(), cap.bounding_box()
    assert cap_box["x"] + cap_box["width"] <= bar_box["x"] + bar_box["width"] + 0.5
    assert_accessible(page)
    width = page.evaluate("document.scrollingElement.scrollWidth")
    assert width <= page.viewport_size["width"], f"the queue page is {width} px wide"
