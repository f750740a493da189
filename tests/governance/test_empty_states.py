"""Empty states that are true (issue 28, point 9): on an empty organisation every role's
empty pages name an action that user has. A button in an empty state opens for that
user (no 403), and the words never send someone to a button or command they lack."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

pytestmark = pytest.mark.django_db

PAGES = ["/queues/", "/policies/", "/teams/", "/jobs/", "/knowledge/", "/exceptions/"]
EMPTY = re.compile(r'<div class="empty">(.*?)</div>', re.S)


def empty_states(client, path: str) -> list[str]:
    response = client.get(path)
    if response.status_code in (403, 404):
        return []
    assert response.status_code == 200, path
    return EMPTY.findall(response.content.decode())


@pytest.mark.parametrize("role", ["admin", "team_lead", "exception_owner", "leadership"])
def test_every_empty_state_button_opens_for_its_reader(client, request, role):
    client.force_login(request.getfixturevalue(role))
    seen = 0
    for path in PAGES:
        for block in empty_states(client, path):
            seen += 1
            for href in re.findall(r'href="([^"]+)"', block):
                assert client.get(href).status_code == 200, (role, path, href)
    assert seen


def test_no_queues_names_what_each_reader_can_do(client, admin, leadership):
    client.force_login(admin)
    text = " ".join(empty_states(client, "/queues/"))
    assert "python manage.py seed_demo" in text and "policy apply FILE" in text
    client.force_login(leadership)
    text = " ".join(empty_states(client, "/queues/"))
    assert "seed_demo" not in text and "a platform admin creates them" in text


def test_no_jobs_offers_submitting_only_to_who_may(client, admin, team_lead, aws_queue):
    client.force_login(team_lead)  # leads no team with a share yet
    text = " ".join(empty_states(client, reverse("job-list")))
    assert "Submit a job" not in text and "team leads submit them" in text
    aws_queue.shares.get(name="qs1").team.leads.add(team_lead)
    text = " ".join(empty_states(client, reverse("job-list")))
    assert "Submit a job" in text


def test_no_shares_offers_creating_one_only_to_admins(client, admin, leadership):
    from tests.factories import JobQueueFactory

    queue = JobQueueFactory(name="empty-queue")
    client.force_login(admin)
    assert "Create a share" in " ".join(empty_states(client, f"/queues/{queue.pk}/"))
    client.force_login(leadership)
    text = " ".join(empty_states(client, f"/queues/{queue.pk}/"))
    assert "Create" not in text and "a platform admin gives a team its share" in text


def test_no_articles_offers_writing_only_to_writers(client, team_lead, leadership):
    client.force_login(team_lead)
    assert "Write an article" in " ".join(empty_states(client, "/knowledge/"))
    client.force_login(leadership)
    text = " ".join(empty_states(client, "/knowledge/"))
    assert "Write" not in text and "Articles appear here" in text
