"""In real Chromium: a team lead files a temporary-capacity request, an exception owner
sees the engine's impact preview and approves it, the request page shows the exception
active with its timeline; after expiry the limit is back and both changes are listed.
axe finds no serious or critical problem on any page visited."""

import re
from datetime import timedelta

import pytest
from django.contrib.auth.models import Group, User
from django.utils import timezone
from playwright.sync_api import expect

from demo.knowledge import seed_knowledge
from fleet.models import InstanceType, Job
from governance.exceptions.services import exception_request_expire
from governance.models import ExceptionOwner, ExceptionRequest, PolicyChange
from tests.factories import JobFactory, UrgencyDefinitionFactory, aws_sample_queue

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
PASSWORD = "correct horse battery staple"


def user(username, full_name, role):
    first, last = full_name.split()
    person = User.objects.create_user(
        username, email=f"{username}@example.com", password=PASSWORD, first_name=first,
        last_name=last,
    )  # fmt: skip
    person.groups.add(Group.objects.get_or_create(name=role)[0])
    return person


@pytest.fixture
def scene():
    queue = aws_sample_queue()
    qs1 = queue.shares.get(name="qs1")
    lead = user("lee", "Lee Lead", "team_leads")
    qs1.team.leads.add(lead)
    owner = user("olu", "Olu Owner", "exception_owners")
    ExceptionOwner.objects.create(user=owner, queue=queue)
    admin = user("ada", "Ada Admin", "admins")
    urgency = UrgencyDefinitionFactory(
        name="Customer escalation",
        meaning="A customer commitment is at risk without extra capacity.",
        priority=700,
        max_window_hours=48,
        allowed_kinds=["PRIORITY_RAISE", "TEMPORARY_CAPACITY"],
    )
    g5 = InstanceType.objects.get(name="ml.g5.xlarge")
    now = timezone.now()
    JobFactory(
        share=qs1, instance_type=g5, name="vision-train", state=Job.State.RUNNING,
        started_at=now - timedelta(minutes=20), start_seq=1, priority=2,
    )  # fmt: skip
    JobFactory(
        share=qs1, instance_type=g5, name="vision-borrowed", state=Job.State.RUNNING,
        started_at=now - timedelta(minutes=10), start_seq=2, priority=1, borrowed=True,
    )  # fmt: skip
    seed_knowledge(actor=admin)
    return {"qs1": qs1, "urgency": urgency, "g5": g5}


def log_out(page):
    page.get_by_role("button", name="Log out").click()
    expect(page).to_have_url(re.compile(r"/accounts/login/"))


@pytest.mark.slow
def test_file_approve_and_expire_a_temporary_capacity_exception(
    page, live_server, login, assert_accessible, scene
):
    qs1, urgency = scene["qs1"], scene["urgency"]

    # The team lead files the request.
    login(page, live_server, "lee", PASSWORD, next="/exceptions/")
    expect(page).to_have_title("Exception requests · Quota governance")
    assert_accessible(page)
    page.get_by_role("link", name="File a request").first.click()
    expect(page.get_by_role("heading", level=1)).to_have_text("File an exception request")
    assert_accessible(page)

    page.get_by_role("radio", name="Temporary capacity").check()
    page.locator("#id_urgency").select_option(str(urgency.pk))
    expect(page.locator("#urgency-help")).to_contain_text("Windows up to 48 h")
    page.locator("#id_justification").fill("The launch model needs a second instance today.")
    start = timezone.localtime() - timedelta(minutes=1)
    page.locator("#id_window_start").fill(start.strftime("%Y-%m-%dT%H:%M"))
    page.locator("#id_window_end").fill((start + timedelta(hours=60)).strftime("%Y-%m-%dT%H:%M"))
    page.locator("#id_share").select_option(str(qs1.pk))
    page.locator("#id_instance_type").select_option(str(scene["g5"].pk))
    page.locator("#id_extra_instances").fill("1")
    page.get_by_role("button", name="Submit for decision").click()

    # Too long for the urgency: refused, the field named.
    expect(page.locator("#id_window_end_error")).to_contain_text("allows at most 48 h")
    assert_accessible(page)
    page.locator("#id_window_end").fill((start + timedelta(hours=6)).strftime("%Y-%m-%dT%H:%M"))
    page.get_by_role("button", name="Submit for decision").click()

    expect(page).to_have_url(re.compile(r"/exceptions/\d+/$"))
    request = ExceptionRequest.objects.get()
    expect(page.get_by_role("main")).to_contain_text("submitted for decision")
    expect(page.locator(".exc-title .chip")).to_have_text("Submitted")
    assert_accessible(page)
    log_out(page)

    # The owner finds it in the decision queue and sees the engine's preview.
    login(page, live_server, "olu", PASSWORD, next="/exceptions/")
    nav = page.get_by_role("navigation", name="Main")
    expect(nav.get_by_role("link", name=re.compile("Decisions"))).to_contain_text("1")
    nav.get_by_role("link", name=re.compile("Decisions")).click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Decision queue")
    assert_accessible(page)
    page.get_by_role("link", name=f"#{request.pk} Temporary capacity").click()

    preview = page.get_by_role("complementary").filter(has_text="Impact preview")
    expect(preview).to_contain_text("share qs1's ml.g5.xlarge limit would go from 1 to 2")
    expect(preview).to_contain_text("can no longer be reclaimed")
    expect(preview).to_contain_text("vision-borrowed")
    assert_accessible(page)
    page.get_by_label("Note to the requester").fill("Approved for the launch; one day only.")
    page.get_by_role("button", name="Approve").click()

    # Active now: purple outline, the timeline, the policy change it made.
    expect(page.get_by_role("main")).to_contain_text("It is in effect now.")
    expect(page.locator(".exc-title .chip")).to_have_text("Active")
    expect(page.locator(".has-exception")).to_contain_text("In effect now")
    timeline = page.locator(".exc-timeline")
    for step in ("Filed", "Submitted for decision", "Approved", "Took effect"):
        expect(timeline).to_contain_text(step)
    expect(page.locator(".exc-changes")).to_contain_text("Exception #")
    assert_accessible(page)
    assert qs1.limits.get().max_instances == 2

    # The share's queue page shows the exception in effect, outlined in purple.
    request_url = page.url
    page.goto(f"{live_server.url}/queues/{qs1.queue_id}/")
    why = page.locator(f"#why-share-{qs1.pk}")
    expect(why).to_have_class(re.compile("has-exception"))
    expect(why).to_contain_text(f"Exception #{request.pk}")
    assert_accessible(page)
    page.goto(request_url)

    # The window ends (beat would run the expiry; here the service runs it directly).
    request.refresh_from_db()
    assert exception_request_expire(request_id=request.pk, now=request.window_end)
    page.reload()
    expect(page.locator(".exc-title .chip")).to_have_text("Expired")
    expect(timeline).to_contain_text("Expired")
    expect(page.locator(".exc-changes > li")).to_have_count(2)
    assert qs1.limits.get().max_instances == 1
    assert PolicyChange.objects.filter(exception_request=request).count() == 2

    # The policy history shows both changes, each linked to the exception.
    page.goto(f"{live_server.url}/history/?cause=exception")
    changes = page.locator("article.change")
    expect(changes).to_have_count(2)
    for index in range(2):
        expect(changes.nth(index)).to_contain_text(f"caused by exception #{request.pk}")
    assert_accessible(page)

    # The decision record is in the knowledge base, found by search.
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Knowledge").click()
    page.get_by_label("Search the knowledge base").fill("launch")
    page.get_by_role("button", name="Search").click()
    result = page.locator(".kb-result").filter(has_text=f"Decision on exception #{request.pk}")
    expect(result.locator("mark").first).to_be_visible()
    assert_accessible(page)
    result.get_by_role("link").click()
    expect(page.get_by_role("heading", level=1)).to_contain_text(f"exception #{request.pk}")
    assert_accessible(page)
