"""Pickers that narrow each other (issue 28, point 9), on the server's side: each option
says which choice of the other picker it goes with (core/widgets.py; app.js hides the
rest), and a choice that does not fit is refused, naming its field, changing nothing.
The browser's side is tests/browser/test_narrowed_pickers.py."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from fleet.models import Job, JobQueue, QuotaShare, Team
from governance.models import ExceptionRequest
from tests.factories import JobFactory, aws_sample_queue

pytestmark = pytest.mark.django_db


def options(page: str, select_id: str) -> dict[str, str]:
    """value -> data-narrow of the options of <select id=select_id>."""
    select = re.search(rf'<select[^>]*id="{select_id}".*?</select>', page, re.S).group(0)
    return {
        value: narrow
        for value, narrow in re.findall(
            r'<option value="(\d+)"[^>]*data-narrow="([^"]*)"', select.replace("\n", " ")
        )
    }


@pytest.fixture
def two_queues(aws_queue):
    """aws_queue (qs1..qs3, a team each) and a second queue where only qs1's team has a
    share."""
    other = aws_sample_queue("other-queue", capacity=2)
    qs1 = aws_queue.shares.get(name="qs1")
    for share in other.shares.exclude(name="qs1"):
        share.delete()
    other.shares.filter(name="qs1").update(team=qs1.team)
    return aws_queue, other


def test_the_exception_form_narrows_share_jobs_and_type(client, admin, aws_queue):
    qs1, qs2 = (aws_queue.shares.get(name=name) for name in ("qs1", "qs2"))
    job = JobFactory(share=qs2, instance_type=aws_queue.capacities.get().instance_type)
    client.force_login(admin)
    page = client.get(reverse("exception-create")).content.decode()
    shares = options(page, "id_share")
    assert shares[str(qs1.pk)] == str(qs1.team_id)
    assert shares[str(qs2.pk)] == str(qs2.team_id)
    assert 'data-narrow-by="id_team"' in page
    types = options(page, "id_instance_type")
    g5 = str(aws_queue.capacities.get().instance_type_id)
    assert set(types[g5].split()) == {str(s.pk) for s in aws_queue.shares.all()}
    checkbox = re.search(rf'<input[^>]*value="{job.pk}"[^>]*>', page).group(0)
    assert f'data-narrow="{qs2.team_id}"' in checkbox
    assert 'data-narrow-by="id_team"' in checkbox


def test_the_exception_form_refuses_a_share_of_another_team(client, admin, aws_queue):
    qs1, qs2 = (aws_queue.shares.get(name=name) for name in ("qs1", "qs2"))
    urgency_id = _capacity_urgency()
    client.force_login(admin)
    response = client.post(
        reverse("exception-create"),
        {
            "kind": ExceptionRequest.Kind.TEMPORARY_CAPACITY,
            "team": qs1.team_id,
            "urgency": urgency_id,
            "justification": "Launch",
            "window_start": "2030-01-01T10:00",
            "window_end": "2030-01-01T12:00",
            "share": qs2.pk,
            "instance_type": aws_queue.capacities.get().instance_type_id,
            "extra_instances": 1,
            "draft": "1",
        },
    )
    assert response.status_code == 400
    errors = response.context["form"].errors
    assert "share" in errors
    assert f"belongs to team {qs2.team}" in errors["share"][0]
    assert not ExceptionRequest.objects.exists()


def _capacity_urgency() -> int:
    from tests.factories import UrgencyDefinitionFactory

    return UrgencyDefinitionFactory(name="Launch", priority=900, max_window_hours=24).pk


def test_the_dashboard_team_picker_follows_the_queue(client, leadership, two_queues):
    aws, other = two_queues
    client.force_login(leadership)
    page = client.get(reverse("dashboard")).content.decode()
    teams = options(page, "dashboard-team")
    qs1_team = aws.shares.get(name="qs1").team
    qs2_team = aws.shares.get(name="qs2").team
    assert set(teams[str(qs1_team.pk)].split()) == {str(aws.pk), str(other.pk)}
    assert teams[str(qs2_team.pk)] == str(aws.pk)
    assert 'data-narrow-by="dashboard-queue"' in page


def test_the_dashboard_refuses_a_team_outside_the_queue(client, leadership, two_queues):
    aws, other = two_queues
    qs2_team = aws.shares.get(name="qs2").team
    client.force_login(leadership)
    response = client.get(reverse("dashboard"), {"queue": other.pk, "team": qs2_team.pk})
    page = response.content.decode()
    assert f"team: team {qs2_team.name} has no share in queue {other.name}" in page
    assert f"· team {qs2_team.name}" not in page  # shown for every team of the queue
    fine = client.get(reverse("dashboard"), {"queue": aws.pk, "team": qs2_team.pk})
    assert "has no share in queue" not in fine.content.decode()


def test_the_jobs_page_pickers_follow_the_queue(client, admin, two_queues):
    aws, other = two_queues
    client.force_login(admin)
    page = client.get(reverse("job-list")).content.decode()
    shares = options(page, "id_share")
    for share in QuotaShare.objects.all():
        assert shares[str(share.pk)] == str(share.queue_id)
    teams = options(page, "id_team")
    qs2_team = aws.shares.get(name="qs2").team
    assert teams[str(qs2_team.pk)] == str(aws.pk)


def test_the_jobs_page_refuses_a_team_or_share_outside_the_queue(client, admin, two_queues):
    aws, other = two_queues
    qs2 = aws.shares.get(name="qs2")
    g5 = aws.capacities.get().instance_type
    JobFactory(share=qs2, instance_type=g5, name="in-aws")
    JobFactory(share=other.shares.get(), instance_type=g5, name="in-other")
    client.force_login(admin)
    response = client.get(reverse("job-list"), {"queue": other.pk, "team": qs2.team_id})
    page = response.content.decode()
    assert f"team {qs2.team.name} has no share in queue {other.name}" in page
    assert 'id="id_team_error"' in page  # next to its field
    assert "in-other" in page and "in-aws" not in page  # the queue still filters
    response = client.get(reverse("job-list"), {"queue": other.pk, "share": qs2.pk})
    assert f"share {qs2.name} is not in queue {other.name}" in response.content.decode()
    assert Job.objects.count() == 2 and JobQueue.objects.count() == 2 and Team.objects.count()
