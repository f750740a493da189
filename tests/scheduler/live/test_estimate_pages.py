"""Where a waiting job stands and when it should start, as pages and the API show it:
the pending list, the estimate endpoint, the job, jobs and live pages and the submit
form agree with the estimates service (and so with each other). The AWS sample queue:
three ml.g5.xlarge; qs1 LEND_AND_BORROW, qs2 LEND, qs3 RESERVE; one instance each."""

import datetime as dt
import re

import pytest
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from fleet.models import InstanceType, Job, JobEvent
from scheduler.services.estimates.reads import job_estimate, queue_estimates
from scheduler.services.passes import scheduling_pass
from tests.factories import job_definition

pytestmark = pytest.mark.django_db


@pytest.fixture
def train(queue):
    return job_definition(
        queue,
        name="train",
        command=["python", "-m", "train"],
        instance_type=InstanceType.objects.get(name="ml.g5.xlarge"),
        expected_duration=600,
    )


@pytest.fixture
def busy(queue, submit, train):
    """qs1 runs one job within its limit and borrows qs2's instance for another; two
    more qs1 jobs wait. Submitted and passed at the real current time."""
    first = submit("qs1", "first", at=None, revision=train, expected_duration=600)
    borrower = submit("qs1", "borrower", at=None, revision=train, expected_duration=900)
    scheduling_pass(queue_id=queue.pk)
    head = submit("qs1", "head", at=None, revision=train, expected_duration=100)
    behind = submit("qs1", "behind", at=None, revision=train, expected_duration=100)
    scheduling_pass(queue_id=queue.pk)
    return {"first": first, "borrower": borrower, "head": head, "behind": behind}


def api(user):
    client = APIClient()
    client.force_login(user)
    return client


def stored():
    return Job.objects.count(), JobEvent.objects.count()


def test_the_pending_list_is_in_dispatch_order_with_positions(queue, lead, busy):
    response = api(lead).get(reverse("api-queue-pending", args=[queue.pk]))
    assert response.status_code == 200
    body = response.json()
    assert body["count"] == 2 and body["clock"]["simulated"] is True
    rows = body["results"]
    assert [row["job"] for row in rows] == [busy["head"].pk, busy["behind"].pk]
    assert [(row["order"], row["position"], row["queue_length"]) for row in rows] == [
        (1, 1, 2),
        (2, 2, 2),
    ]
    assert rows[0]["reason"] == "WAITING_FOR_CAPACITY"
    assert "qs3 (RESERVE) holds 1 idle for its own jobs" in rows[0]["blocker"]
    assert rows[1]["reason"] == "BLOCKED_BEHIND_HEAD"
    # The same as the service says.
    entries = queue_estimates(queue).entries
    assert [row["estimate"]["wait_p50"] for row in rows] == [
        entry.estimate.wait_p50 for entry in entries
    ]
    assert rows[0]["estimate"]["basis"] == "declared"

    paged = api(lead).get(reverse("api-queue-pending", args=[queue.pk]), {"page": 2})
    assert paged.status_code == 404 or paged.json()["results"] == []
    missing = api(lead).get(reverse("api-queue-pending", args=[99999]))
    assert missing.status_code == 404


def test_the_pending_list_is_refused_to_who_may_not_see_jobs(queue, exception_owner):
    response = api(exception_owner).get(reverse("api-queue-pending", args=[queue.pk]))
    assert response.status_code == 403


def test_the_estimate_endpoint_stores_nothing_and_agrees_with_the_pending_list(
    queue, lead, shares, busy, train
):
    body = {
        "definition": "train",
        "share": shares["qs1"].pk,
        "name": "what-if",
        "expected_duration": 100,
    }
    before = stored()
    response = api(lead).post(reverse("api-job-estimate"), body, format="json")
    assert response.status_code == 200, response.json()
    answer = response.json()
    assert stored() == before
    assert answer["stored"] is False
    assert answer["position"] == 3 and answer["queue_length"] == 3
    assert answer["within_limit"] is False and answer["reclaimable_by"] == ["qs2"]
    assert "number 3 of 3 in share qs1's queue" in answer["blocker"]

    # Submitted for real, the job's estimate on the pending list is the one promised.
    created = api(lead).post(reverse("api-job-list"), body, format="json")
    assert created.status_code == 201
    rows = api(lead).get(reverse("api-queue-pending", args=[queue.pk])).json()["results"]
    row = next(row for row in rows if row["job"] == created.json()["id"])
    assert row["position"] == 3
    promised = dt.datetime.fromisoformat(answer["estimate"]["start_p50"])
    listed = dt.datetime.fromisoformat(row["estimate"]["start_p50"])
    assert abs((listed - promised).total_seconds()) <= 2  # the two requests' `now`s


def test_the_estimate_endpoint_refuses_as_a_submission_would(queue, lead, shares, busy):
    before = stored()
    refused = api(lead).post(
        reverse("api-job-estimate"),
        {"definition": "train", "share": shares["qs3"].pk, "name": "x"},
        format="json",
    )
    assert refused.status_code == 403  # the lead does not lead qs3's team
    bad = api(lead).post(
        reverse("api-job-estimate"),
        {"definition": "train", "share": shares["qs1"].pk, "name": "", "instances": 0},
        format="json",
    )
    assert bad.status_code == 400 and "instances" in bad.json()["errors"]
    assert stored() == before


def test_job_pages_show_the_position_blocker_and_estimate(client, lead, queue, busy):
    client.force_login(lead)
    entry = job_estimate(Job.objects.get(pk=busy["behind"].pk))
    page = client.get(reverse("job-detail", args=[busy["behind"].pk])).content.decode()
    assert "Where it stands" in page
    assert "<dd data-position>2 of 2</dd>" in page
    assert "number 2 of 2 in share qs1&#x27;s queue" in page
    assert entry.position == 2
    listing = client.get(reverse("job-list")).content.decode()
    places = re.findall(r"<td data-place[^>]*>([^<]*)</td>", listing)
    assert "1 of 2" in places and "2 of 2" in places
    live = client.get(reverse("queue-live", args=[queue.pk])).content.decode()
    assert f'data-waiting-job="{busy["head"].pk}"' in live
    assert "Simulated clock." in live


def test_the_submit_form_estimates_without_submitting(client, lead, shares, busy, train):
    client.force_login(lead)
    before = stored()
    form = {
        "definition": train.definition_id,
        "revision": train.revision,
        "share": shares["qs1"].pk,
        "name": "what-if",
        "instance_type": "ml.g5.xlarge",
        "action": "estimate",
    }
    page = client.post(reverse("job-create"), form).content.decode()
    assert "If you submit this now" in page and "Nothing was submitted or stored." in page
    assert "borrowing beyond share qs1's limit: qs2 could reclaim it" in page
    assert "2 jobs must start first, the first being job" in page
    fragment = client.post(
        reverse("job-create"), form, HTTP_HX_REQUEST="true", HTTP_HX_TARGET="job-estimate"
    ).content.decode()
    assert fragment.lstrip().startswith("<section") and "If you submit this now" in fragment
    assert stored() == before


def test_a_job_bigger_than_its_queue_is_warned_then_goes_to_needs_a_decision(
    client, lead, shares, train
):
    client.force_login(lead)
    form = {
        "definition": train.definition_id,
        "revision": train.revision,
        "share": shares["qs1"].pk,
        "name": "huge",
        "instance_type": "ml.g5.xlarge",
        "instances": 4,
    }
    before = stored()
    warned = client.post(reverse("job-create"), form).content.decode()
    assert "queue aws-sample has only 3" in warned
    assert 'name="confirm_too_big"' in warned
    assert stored() == before

    response = client.post(reverse("job-create"), {**form, "confirm_too_big": "on"})
    job = Job.objects.get(name="huge")
    assert response.status_code == 302 and job.state == Job.State.RUNNABLE
    decisions = client.get(reverse("job-decisions")).content.decode()
    assert "huge" in decisions and "more than the queue has" in decisions
    detail = client.get(reverse("job-detail", args=[job.pk])).content.decode()
    assert "This job needs a decision" in detail
    # Terminating it is the decision; it leaves the list.
    client.post(reverse("job-terminate", args=[job.pk]))
    listed = client.get(reverse("job-decisions")).content.decode()
    assert reverse("job-detail", args=[job.pk]) not in listed


def test_a_simulated_queue_shows_its_clock_on_the_job_page(
    client, lead, queue, submit, train, settings
):
    settings.SIMULATED_SECONDS_PER_SECOND = 60
    assert queue.executor == "simulated"
    start = timezone.now() - dt.timedelta(seconds=70)
    job = submit(
        "qs1", "sim", at=None, revision=train, expected_duration=36_000, checkpoint_interval=3600
    )
    Job.objects.filter(pk=job.pk).update(submitted_at=start, runnable_since=start)
    JobEvent.objects.filter(job=job).update(at=start)
    scheduling_pass(queue_id=queue.pk, now=start + dt.timedelta(seconds=10))
    client.force_login(lead)
    page = client.get(reverse("job-detail", args=[job.pk])).content.decode()
    assert "Simulated clock." in page and "one real second is 60 simulated seconds" in page
    # Submitted at T+0, started 10 real seconds later: T+10 m of the queue's clock.
    assert 'data-clock-offset="0"' in page and 'data-clock-offset="600"' in page
    # 60 real seconds (and the test's own) running: at least 1 h of simulated work,
    # checkpoints every hour: the last at 1 h (for up to a minute of slowness).
    assert "last checkpoint at 1 h 00 m of work" in page
    # It waited 10 real seconds: 10 simulated minutes.
    assert "<dd data-waiting>10 m 00 s (simulated)</dd>" in page


def test_a_finished_simulated_job_reports_its_last_checkpoint(client, lead, submit, train):
    job = submit(
        "qs1", "done", at=None, revision=train, expected_duration=1800, checkpoint_interval=300
    )
    now = timezone.now()
    Job.objects.filter(pk=job.pk).update(
        state=Job.State.SUCCEEDED,
        progress=1800,
        checkpointed=0,
        attempt=1,
        started_at=now,
        first_started_at=now,
        finished_at=now,
        runnable_since=None,
    )
    client.force_login(lead)
    page = client.get(reverse("job-detail", args=[job.pk])).content.decode()
    # Not "0 s": checkpoints every 5 minutes of a 30-minute job, the last at its end.
    assert "last checkpoint at 30 m 00 s of work" in page
    assert "Where it stands" not in page
