"""Maximum-length text in every field of the main forms breaks no page (issue 28, point 1).

In real Chromium, the demo organisation loaded: an admin registers a job definition, a
team lead submits a job of it and files an exception request, an admin saves a share
with a reason and writes a knowledge article, each text field filled to its maxlength
(the form's bound) with one unbroken word, the free-text ones with a single 10,000-
character word. Then the pages that show that text (definition page and list, job page
and list, exception page, article, share history) are visited at 1440 and 390 px: none
is wider than its viewport (document.documentElement.scrollWidth <= innerWidth), and
axe finds no serious or critical problem on any.
"""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone

from core.bounds import MAX_TEXT
from demo.organisation import seed_demo
from fleet.models import Job, JobDefinition, QueueCapacity, QuotaShare
from governance.models import ExceptionRequest, KnowledgeArticle

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
PASSWORD = "bounded-text-pw-1"
WIDTHS = (1440, 390)
URGENCY_LABEL = "Production incident (up to 24 h)"

# Fill each visible text box of the form with one word as long as its maxlength (the
# form's bound); `given` holds the values of fields with a format of their own.
FILL = """([selector, given]) => {
  const form = document.querySelector(selector);
  const filled = {};
  for (const box of form.querySelectorAll("textarea, input[type=text], input:not([type])")) {
    if (box.offsetParent === null || box.readOnly || box.disabled) continue;
    const name = box.name;
    let value;
    if (name in given) value = given[name];
    else if (box.maxLength > 0) value = "W".repeat(box.maxLength);
    else continue;
    box.value = value;
    box.dispatchEvent(new Event("input", {bubbles: true}));
    filled[name] = value.length;
  }
  return filled;
}"""

OFFENDERS = """() => {
  const width = window.innerWidth;
  const found = [];
  for (const element of document.querySelectorAll("body *")) {
    const box = element.getBoundingClientRect();
    if (box.right > width + 1 && box.width > 0) {
      found.push(element.tagName.toLowerCase() + (element.className ? "." +
        String(element.className).split(" ").join(".") : "") + " in " +
        (element.parentElement ? element.parentElement.tagName.toLowerCase() + "." +
        String(element.parentElement.className).split(" ").join(".") : "") +
        " right=" + Math.round(box.right));
    }
  }
  return found.slice(0, 8);
}"""


def word(length: int) -> str:
    return "W" * length


def fill(page, selector: str, given: dict[str, str] | None = None) -> dict[str, int]:
    return page.evaluate(FILL, [selector, given or {}])


def submit(page, selector: str, button: str) -> None:
    with page.expect_navigation():
        page.locator(selector).get_by_role("button", name=button).first.click()


def no_errors(page) -> None:
    errors = page.locator(".field-error, .form-errors").all_inner_texts()
    assert not [e for e in errors if e.strip()], f"{page.url}: {errors}"


@pytest.mark.slow
def test_maximum_length_text_breaks_no_page(page, live_server, login, assert_accessible):
    seed_demo(password=PASSWORD)
    share = QuotaShare.objects.select_related("queue").filter(queue__name__icontains="aws").first()
    login(page, live_server, "admin", PASSWORD)

    # A job definition: every text at its bound, the description one 10,000-char word.
    page.goto(f"{live_server.url}/jobs/definitions/new/")
    name = "a" + "b" * 127
    filled = fill(
        page,
        "main form",
        {
            "name": name,
            "command": "python\n-c\npass\n{" + "p" * 64 + "}",
            "environment": "LONG=" + word(4000),
            "parameters-0-name": "p" * 64,
            "parameters-0-pattern": "[a-zA-Z]+",
            "parameters-0-default": word(256),
            "parameters-0-choices": "",
            "parameters-1-name": "",
            "parameters-2-name": "",
        },
    )
    assert filled["description"] == MAX_TEXT and filled["reason"] == MAX_TEXT
    page.locator("[name=parameters-0-type]").select_option("pattern")
    page.get_by_label(share.queue.name, exact=True).check()
    submit(page, "main form", "Register")
    no_errors(page)
    definition = JobDefinition.objects.get(name=name)
    assert len(definition.description) == MAX_TEXT

    # A knowledge article: a 200-character title, a body with a 10,000-character word
    # and a long URL, at most the body's bound.
    page.goto(f"{live_server.url}/knowledge/new/")
    body = f"## {word(300)}\n\n{word(MAX_TEXT)}\n\nhttps://example.org/{word(2000)}\n\n"
    body += "    " + word(3000) + "\n\n| a | b |\n|---|---|\n| " + word(3000) + " | x |\n"
    filled = fill(page, "main form", {"title": word(200), "body": body, "tags": "long"})
    submit(page, "main form", "Publish")
    no_errors(page)
    article = KnowledgeArticle.objects.get(title=word(200))

    # A share saved with a 10,000-character reason (the history shows it).
    page.goto(f"{live_server.url}/shares/{share.pk}/edit/")
    page.locator("main form [name=reason]").fill(word(MAX_TEXT))
    submit(page, "main form", "Save changes")
    no_errors(page)

    # A team lead submits a job of it (every text at its bound) and files an exception
    # request for it with a 10,000-character justification.
    page.context.clear_cookies()
    login(page, live_server, "lead", PASSWORD)
    page.goto(f"{live_server.url}/jobs/new/?definition={definition.pk}&share={share.pk}")
    fill(page, "main form", {"name": word(200)})
    page.locator("main form [name=expected_duration]").fill("600")
    itype = QueueCapacity.objects.filter(queue=share.queue).first().instance_type
    page.locator("main form [name=instance_type]").select_option(itype.name)
    submit(page, "main form", "Submit job")
    no_errors(page)
    job = Job.objects.get(name=word(200))
    assert job.parameters == {"p" * 64: word(256)}

    page.goto(f"{live_server.url}/exceptions/new/")
    page.get_by_label("Priority raise").check()
    page.locator("[name=team]").select_option(str(share.team_id))
    page.locator("[name=urgency]").select_option(label=URGENCY_LABEL)
    start = timezone.localtime() + dt.timedelta(hours=1)
    page.locator("[name=window_start]").fill(start.strftime("%Y-%m-%dT%H:%M"))
    end = start + dt.timedelta(hours=2)
    page.locator("[name=window_end]").fill(end.strftime("%Y-%m-%dT%H:%M"))
    fill(page, "main form", {"justification": word(MAX_TEXT)})
    page.get_by_label(job.name, exact=False).check()
    submit(page, "main form", "Save as draft")
    no_errors(page)
    request = ExceptionRequest.objects.get(justification=word(MAX_TEXT))

    page.context.clear_cookies()
    login(page, live_server, "admin", PASSWORD)
    pages = [
        f"/jobs/definitions/{definition.pk}/",
        "/jobs/definitions/",
        f"/jobs/{job.pk}/",
        "/jobs/",
        f"/exceptions/{request.pk}/",
        "/exceptions/",
        f"/knowledge/{article.slug}/",
        "/knowledge/",
        "/history/",
    ]
    problems = []
    for path in pages:
        problems += visit_at_every_width(page, live_server, path, assert_accessible)
    assert not problems, "Pages wider than their viewport:\n" + "\n".join(problems)


def visit_at_every_width(page, live_server, path: str, assert_accessible) -> list[str]:
    """The page at each width: its width, and axe's findings."""
    problems = []
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 900})
        response = page.goto(f"{live_server.url}{path}")
        assert response.status == 200, path
        wide = page.evaluate("document.documentElement.scrollWidth")
        inner = page.evaluate("window.innerWidth")
        if wide > inner:
            problems.append(f"{path} at {width} px: {wide} px wide: {page.evaluate(OFFENDERS)}")
        assert_accessible(page)
    return problems
