"""Pickers narrow each other in real Chromium (issue 28, point 9): on the exception
request form the share follows the chosen team (a share chosen before is let go when
the team changes) and the instance type the share; on the jobs page the share and team
pickers follow the queue, and the list htmx swaps in never carries a share of another
queue; on the dashboard the team picker follows the queue. axe at 1440 and 390 px."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.factories import UserFactory, aws_sample_queue

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PASSWORD = "pw-for-tests-1"
SIZES = {"desktop": {"width": 1440, "height": 900}, "phone": {"width": 390, "height": 844}}

VISIBLE = """(id) => [...document.getElementById(id).options]
  .filter((option) => !option.hidden && option.value).map((option) => option.textContent.trim())"""


@pytest.fixture(params=sorted(SIZES))
def browser_context_args(request):
    return {"viewport": SIZES[request.param]}


@pytest.fixture
def queues():
    """aws-sample (qs1..qs3, a team each) and lab, where only qs1's team has a share."""
    aws = aws_sample_queue()
    lab = aws_sample_queue("lab", capacity=2)
    team = aws.shares.get(name="qs1").team
    lab.shares.exclude(name="qs1").delete()
    lab.shares.update(team=team)
    UserFactory(username="ada", password=PASSWORD, roles=["admins"])
    return aws, lab


def visible(page, select_id: str) -> list[str]:
    return page.evaluate(VISIBLE, select_id)


def test_pickers_follow_each_other(page, live_server, login, assert_accessible, queues):
    aws, lab = queues
    qs1, qs2 = (aws.shares.get(name=name) for name in ("qs1", "qs2"))
    login(page, live_server, "ada", PASSWORD, next="/exceptions/new/")
    assert len(visible(page, "id_share")) == 4  # nothing chosen: every share
    page.get_by_label("Share").select_option(label=f"aws-sample / qs2 ({qs2.team.name})")
    page.get_by_label("Team").select_option(label=qs1.team.name)
    assert visible(page, "id_share") == [
        f"aws-sample / qs1 ({qs1.team.name})",
        f"lab / qs1 ({qs1.team.name})",
    ]
    expect(page.get_by_label("Share")).to_have_value("")  # qs2 was another team's: let go
    page.get_by_label("Share").select_option(label=f"lab / qs1 ({qs1.team.name})")
    assert visible(page, "id_instance_type") == [lab.capacities.get().instance_type.name]
    assert_accessible(page)

    page.goto("/jobs/")
    page.get_by_label("Share").select_option(label=f"aws-sample / qs2 ({qs2.team.name})")
    page.wait_for_url(lambda url: "share=" in url)
    page.get_by_label("Queue", exact=True).select_option(label="lab")
    page.wait_for_url(lambda url: f"queue={lab.pk}" in url)
    assert not re.search(rf"share={qs2.pk}(&|$)", page.url)
    assert visible(page, "id_share") == [f"lab / qs1 ({qs1.team.name})"]
    assert visible(page, "id_team") == [qs1.team.name]
    expect(page.locator(".field-error")).to_have_count(0)  # no stale share was sent
    assert_accessible(page)

    page.goto("/dashboard/")
    assert len(visible(page, "dashboard-team")) == 3
    page.get_by_label("Queue", exact=True).select_option(label="lab")
    assert visible(page, "dashboard-team") == [qs1.team.name]
    page.get_by_label("Queue", exact=True).select_option(label="All queues")
    assert len(visible(page, "dashboard-team")) == 3
    assert_accessible(page)
