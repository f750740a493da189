"""Polish, in real Chromium (axe on every page visited):

- the API docs page (Swagger UI) has no serious or critical axe violation and fits a phone;
- the phone-size dashboard, with two months of figures and its charts drawn, neither;
- an exception's policy changes read as people read them (no raw Python dict);
- switching a share to LEND empties and disables its borrow limit, and saving works;
- knowledge snippets keep a heading apart from the text after it, and the glossary
  does not send readers to a source file.
"""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from demo.knowledge import seed_knowledge
from fleet.models import InstanceType, QuotaShare
from governance.exceptions import services as exception_services
from governance.knowledge.services import ArticleData, article_create
from governance.models import ExceptionOwner, KnowledgeArticle
from tests.browser.test_dashboard_journey import CHARTS, two_months  # noqa: F401
from tests.factories import UrgencyDefinitionFactory, UserFactory, aws_sample_queue

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
PASSWORD = "pw-for-tests-1"
PHONE = {"width": 390, "height": 844}


def fits(page):
    width = page.evaluate("document.scrollingElement.scrollWidth")
    assert width <= page.viewport_size["width"], f"{page.url} is {width} px wide"


@pytest.mark.parametrize("size", [{"width": 1280, "height": 800}, PHONE], ids=["desktop", "phone"])
def test_the_api_docs_page_passes_axe(page, live_server, login, assert_accessible, size):
    page.set_viewport_size(size)
    UserFactory(username="platform", password=PASSWORD, roles=["admins"])
    login(page, live_server, "platform", PASSWORD, next="/api/docs/")
    expect(page.locator(".opblock").first).to_be_visible(timeout=20_000)
    assert page.evaluate("document.documentElement.lang") == "en"
    assert_accessible(page)
    if size == PHONE:
        fits(page)


def test_the_phone_size_dashboard_passes_axe(
    page,
    live_server,
    login,
    assert_accessible,
    two_months,  # noqa: F811
):
    page.set_viewport_size(PHONE)
    UserFactory(username="leader", password=PASSWORD, roles=["leadership"])
    login(page, live_server, "leader", PASSWORD, next="/dashboard/")
    for dataset in CHARTS:
        chart = page.locator(f'[data-figure-id="figure-{dataset}"]')
        chart.scroll_into_view_if_needed()  # drawn as it nears the viewport
        expect(chart).to_have_attribute("data-plotted", "", timeout=30_000)
    assert_accessible(page)
    fits(page)


def test_exception_changes_are_human_readable(page, live_server, login, assert_accessible):
    queue = aws_sample_queue()
    qs1 = queue.shares.get(name="qs1")
    lead = UserFactory(username="lee", password=PASSWORD, roles=["team_leads"])
    qs1.team.leads.add(lead)
    owner = UserFactory(username="olu", password=PASSWORD, roles=["exception_owners"])
    ExceptionOwner.objects.create(user=owner, queue=queue)
    urgency = UrgencyDefinitionFactory(max_window_hours=24, allowed_kinds=["TEMPORARY_CAPACITY"])
    now = timezone.now()
    request = exception_services.exception_request_create(
        actor=lead,
        data=exception_services.RequestData(
            kind="TEMPORARY_CAPACITY",
            team=qs1.team,
            urgency=urgency,
            justification="Launch",
            window_start=now - dt.timedelta(minutes=1),
            window_end=now + dt.timedelta(hours=4),
            share=qs1,
            instance_type=InstanceType.objects.get(name="ml.g5.xlarge"),
            extra_instances=1,
        ),  # fmt: skip
        submit=True,
    )
    exception_services.exception_request_approve(actor=owner, request=request)
    login(page, live_server, "lee", PASSWORD, next=f"/exceptions/{request.pk}/")
    changes = page.locator(".exc-changes")
    expect(changes).to_contain_text("ml.g5.xlarge × 1")
    expect(changes).to_contain_text("ml.g5.xlarge × 2")
    assert "{" not in changes.inner_text() and "capacity_limits" not in changes.inner_text()
    assert_accessible(page)


@pytest.mark.parametrize("size", [{"width": 1280, "height": 800}, PHONE], ids=["desktop", "phone"])
def test_switching_a_share_to_lend_clears_its_borrow_limit(
    page, live_server, login, assert_accessible, size
):
    page.set_viewport_size(size)
    queue = aws_sample_queue()
    qs1 = queue.shares.get(name="qs1")
    UserFactory(username="platform", password=PASSWORD, roles=["admins"])
    login(page, live_server, "platform", PASSWORD, next=f"/shares/{qs1.pk}/edit/")
    limit = page.locator('input[name="borrow_limit"]')
    expect(limit).to_have_value("200")

    def switch(strategy: str) -> None:
        # Each switch asks for an impact preview, and a newer one replaces (aborts) one
        # still in flight (hx-sync), which htmx logs as an error: let each answer, as a
        # person reading it would, and wait for this switch's own (waiting for
        # "networkidle" is no wait at all once the page has been idle before).
        def its_preview(response) -> bool:
            body = (response.request.post_data or "") + "&"
            return "/impact/" in response.url and f"strategy={strategy}&" in body

        with page.expect_response(its_preview):
            page.get_by_role("radio", name=strategy, exact=True).check()

    switch("LEND")
    expect(limit).to_be_disabled()
    expect(limit).to_have_value("")
    assert_accessible(page)
    switch("LEND_AND_BORROW")
    expect(limit).to_be_enabled()
    expect(limit).to_have_value("200")
    switch("LEND")
    page.get_by_label("Reason").fill("qs1 lends only from now on.")
    page.get_by_role("button", name="Save").first.click()
    expect(page.get_by_role("status")).to_contain_text("qs1")
    qs1 = QuotaShare.objects.get(pk=qs1.pk)
    assert qs1.strategy == "LEND" and qs1.borrow_limit is None
    fits(page)


def test_knowledge_snippets_and_the_glossary(page, live_server, login, assert_accessible):
    admin = UserFactory(username="platform", password=PASSWORD, roles=["admins"])
    seed_knowledge(actor=admin)
    article_create(
        actor=admin,
        data=ArticleData(
            title="Reserve for speech",
            body="## Why speech reserves\nSpeech production serves customers at night.",
        ),
    )
    login(page, live_server, "platform", PASSWORD, next="/knowledge/?q=speech+production")
    result = page.locator(".kb-result", has_text="Reserve for speech")
    expect(result.locator(".kb-result__snippet")).to_contain_text("reserves — Speech")
    assert_accessible(page)
    glossary = KnowledgeArticle.objects.get(slug="glossary")
    page.goto(f"{live_server.url}/knowledge/{glossary.slug}/")
    main = page.locator("main")
    expect(main).to_contain_text("tell a platform admin")
    assert ".py" not in main.inner_text()
    assert_accessible(page)
