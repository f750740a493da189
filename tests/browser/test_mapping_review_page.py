"""In real Chromium at 1440 and 390 px, without a directory server: the directory
mapping page asks for a reason (a missing one is said next to its field and adds
nothing), a mapping's removal asks for one too, and under POLICY_CHANGES_NEED_REVIEW
the page says an edit waits for review and the addition becomes a proposal. axe finds
no serious or critical problem in each state, and nothing scrolls sideways."""

import pytest
from playwright.sync_api import expect

from governance.directory.models import GroupMapping
from governance.models import PolicyChange, PolicyProposal
from tests.factories import TeamFactory, UserFactory

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
PASSWORD = "mapping-review-pw-1"
WIDTHS = [1440, 390]


@pytest.fixture(params=WIDTHS, ids=[f"{w}px" for w in WIDTHS])
def width(request):
    return request.param


@pytest.fixture
def browser_context_args(width):
    return {"viewport": {"width": width, "height": 900}}


def fits(page, width):
    assert page.evaluate("document.scrollingElement.scrollWidth") <= width


@pytest.mark.slow
def test_mapping_edits_ask_for_a_reason_and_wait_for_review(
    page, live_server, login, assert_accessible, width, settings
):
    UserFactory(username="ada", password=PASSWORD, roles=["admins"])
    TeamFactory(name="vision")
    login(page, live_server, "ada", PASSWORD, next="/directory/")

    page.get_by_role("textbox", name="Directory group").fill("vision-leads")
    page.get_by_role("radio", name="Team lead").check()
    page.get_by_label("Which team").select_option(label="vision")
    page.get_by_role("button", name="Add mapping").click()
    expect(page.locator("#id_reason_error")).to_contain_text("say why this change is made")
    expect(page.locator("#id_reason")).to_have_attribute("aria-invalid", "true")
    assert_accessible(page)
    fits(page, width)
    assert not GroupMapping.objects.exists()

    page.locator("#id_reason").fill("vision's leads come from the directory")
    page.get_by_role("button", name="Add mapping").click()
    expect(page.get_by_role("row", name="vision-leads")).to_contain_text("team lead of vision")
    assert PolicyChange.objects.get(target="group_mapping").reason == (
        "vision's leads come from the directory"
    )

    # The removal, with no reason: said in its row, and the mapping stays.
    mapping = GroupMapping.objects.get()
    row = page.get_by_role("row", name="vision-leads")
    row.locator("summary").click()
    row.locator("form").get_by_role("button", name="Remove the mapping").click()
    expect(page.locator(f"#id_remove-{mapping.pk}-reason_error")).to_contain_text("say why")
    assert_accessible(page)
    fits(page, width)
    assert GroupMapping.objects.exists()

    settings.POLICY_CHANGES_NEED_REVIEW = True
    page.goto(f"{live_server.url}/directory/")
    expect(page.locator("#review-note")).to_contain_text("waits for another admin's review")
    page.get_by_role("textbox", name="Directory group").fill("ml-leads")
    page.get_by_label("Which role").select_option("team_leads")
    page.locator("#id_reason").fill("ml leads lead teams")
    page.get_by_role("button", name="Propose mapping").click()
    expect(page.get_by_text("Proposed, waiting for another admin's review")).to_be_visible()
    assert_accessible(page)
    fits(page, width)
    assert PolicyProposal.objects.get().kind == PolicyProposal.Kind.MAPPING_CREATE
    assert GroupMapping.objects.count() == 1
