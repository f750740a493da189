"""In real Chromium at 390 px (a phone): no main page scrolls sideways.

The demo organisation (seed_demo) is loaded and each demo role visits the product's
main pages: document.scrollingElement.scrollWidth stays within 390 px (wide tables
scroll inside their card, forms stack). axe finds no serious or critical problem.
"""

import pytest
from playwright.sync_api import expect

from demo.organisation import seed_demo
from fleet.models import Job, JobQueue, QuotaShare
from governance.models import ExceptionRequest, KnowledgeArticle

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
PASSWORD = "phone-layout-pw-1"
WIDTH = 390

# The element(s) that stick out, for a readable failure.
OFFENDERS = """() => {
  const width = document.documentElement.clientWidth;
  const found = [];
  for (const element of document.querySelectorAll("body *")) {
    const box = element.getBoundingClientRect();
    if (box.right > width + 1 && box.width > 0) {
      let inside = false;
      for (let up = element.parentElement; up; up = up.parentElement) {
        const style = getComputedStyle(up);
        if (["auto", "scroll", "hidden"].includes(style.overflowX) && up !== document.body
            && up !== document.documentElement) { inside = true; break; }
      }
      if (!inside) {
        found.push(element.tagName.toLowerCase() + (element.className ? "." +
          String(element.className).split(" ").join(".") : "") + " right=" + Math.round(box.right));
      }
    }
  }
  return found.slice(0, 12);
}"""


@pytest.fixture
def browser_context_args():
    return {"viewport": {"width": WIDTH, "height": 844}}


@pytest.fixture
def demo():
    return seed_demo(password=PASSWORD)


def assert_fits(page):
    width = page.evaluate("document.scrollingElement.scrollWidth")
    if width > WIDTH:
        offenders = page.evaluate(OFFENDERS)
        pytest.fail(f"{page.url} is {width} px wide at {WIDTH} px:\n" + "\n".join(offenders))


def main_pages():
    aws = JobQueue.objects.get(name__icontains="aws")
    share = QuotaShare.objects.filter(queue=aws).first()
    pages = [
        "/",
        "/queues/",
        f"/queues/{aws.pk}/",
        f"/shares/{share.pk}/edit/",
        "/policies/",
        "/history/",
        "/urgency/",
        "/exceptions/",
        "/exceptions/new/",
        "/knowledge/",
        "/what-if/",
        "/dashboard/",
        "/jobs/",
        "/jobs/new/",
        "/accounts/profile/",
    ]
    for queue in JobQueue.objects.exclude(pk=aws.pk):
        pages.append(f"/queues/{queue.pk}/")
    job = Job.objects.order_by("pk").first()
    if job:
        pages.append(f"/jobs/{job.pk}/")
    request = ExceptionRequest.objects.order_by("pk").first()
    if request:
        pages.append(f"/exceptions/{request.pk}/")
    article = KnowledgeArticle.objects.order_by("pk").first()
    if article:
        pages.append(f"/knowledge/{article.slug}/")
    return pages


@pytest.mark.slow
@pytest.mark.parametrize("username", ["admin", "lead", "owner", "leader"])
def test_no_main_page_scrolls_sideways_on_a_phone(
    page, live_server, login, assert_accessible, demo, username
):
    login(page, live_server, username, PASSWORD)
    problems = []
    for path in main_pages():
        response = page.goto(f"{live_server.url}{path}")
        if response.status in (403, 404):
            continue  # not this role's page
        expect(page.locator("main")).to_be_visible()
        width = page.evaluate("document.scrollingElement.scrollWidth")
        if width > WIDTH:
            problems.append(f"{path}: {width} px: " + ", ".join(page.evaluate(OFFENDERS)))
        if username == "admin":
            assert_accessible(page)
    assert not problems, "Pages wider than the phone:\n" + "\n".join(problems)
