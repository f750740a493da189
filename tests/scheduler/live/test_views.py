"""The job pages: who may open them, what they say, and that lists stay O(1) in queries."""

import pytest
from django.urls import reverse
from django.utils import timezone

from fleet.models import Job
from scheduler.models import JobDecision
from scheduler.services.passes import scheduling_pass
from tests.factories import JobFactory, QuotaShareFactory, job_definition

pytestmark = pytest.mark.django_db


@pytest.fixture
def client_for(client):
    def login(user):
        client.force_login(user)
        return client

    return login


@pytest.mark.parametrize(
    ("role", "status"),
    [
        ("admin", 200),
        ("team_lead", 200),
        ("exception_owner", 403),
        ("leadership", 403),
        ("outsider", 403),
    ],
)
def test_job_pages_are_for_admins_and_team_leads(request, client_for, queue, role, status):
    client = client_for(request.getfixturevalue(role))
    for url in (
        reverse("job-list"),
        reverse("job-decisions"),
        reverse("queue-live", args=[queue.pk]),
    ):
        assert client.get(url).status_code == status, url


def test_anonymous_visitors_are_sent_to_login(client, queue):
    response = client.get(reverse("job-list"))
    assert response.status_code == 302 and "/accounts/login/" in response.url


@pytest.fixture
def train(queue):
    return job_definition(
        queue,
        name="train",
        command=["python", "-m", "train", "--steps", "{steps}"],
        parameters=[{"name": "steps", "type": "integer", "min": 1, "max": 1000, "default": 10}],
        expected_duration=600,
    )


def form_post(share, train, **fields):
    return {
        "definition": train.definition_id,
        "revision": train.revision,
        "share": share.pk,
        "name": "resnet",
        "instance_type": "ml.g5.xlarge",
        **fields,
    }


def test_a_lead_picks_a_definition_then_sees_its_parameters(client_for, lead, shares, train):
    client = client_for(lead)

    first = client.get(reverse("job-create")).content.decode()
    chosen = client.get(reverse("job-create"), {"definition": train.definition_id})
    swapped = client.get(
        reverse("job-create"),
        {"definition": train.definition_id},
        HTTP_HX_REQUEST="true",
        HTTP_HX_TARGET="definition-parameters",
    ).content.decode()

    assert "train (revision 1)" in first and "parameters.steps" not in first
    page = chosen.content.decode()
    assert 'name="parameters.steps"' in page and "integer 1–1000, default 10" in page
    assert "qs3" not in page  # not their team's share
    assert "command" not in chosen.context["form"].fields
    assert 'id="definition-parameters"' in swapped
    assert "<html" not in swapped and 'name="parameters.steps"' in swapped


def test_a_lead_submits_into_a_share_of_their_team(client_for, lead, shares, train):
    client = client_for(lead)
    response = client.post(
        reverse("job-create"), form_post(shares["qs1"], train, **{"parameters.steps": "42"})
    )

    job = Job.objects.get(name="resnet")
    assert response.status_code == 302 and response.url == reverse("job-detail", args=[job.pk])
    assert job.submitted_by == lead and job.share == shares["qs1"]
    assert (job.definition_revision, job.parameters) == (train, {"steps": 42})
    assert job.argv == ["python", "-m", "train", "--steps", "42"]
    assert job.expected_duration == 600  # the definition's default

    page = client.get(reverse("job-detail", args=[job.pk])).content.decode()
    assert ">train:1</a>" in page and "<code>steps</code> = <code>42</code>" in page
    assert "python -m train" not in page  # no command line on a job's page


def test_a_lead_cannot_submit_into_another_teams_share(client_for, lead, shares, train):
    response = client_for(lead).post(reverse("job-create"), form_post(shares["qs3"], train))
    assert response.status_code == 200
    assert "share" in response.context["form"].errors
    assert not Job.objects.exists()


def test_service_errors_show_next_to_their_field(client_for, admin, queue, shares, train):
    from tests.factories import InstanceTypeFactory

    InstanceTypeFactory(name="ml.p4d.24xlarge")
    response = client_for(admin).post(
        reverse("job-create"),
        form_post(
            shares["qs1"],
            train,
            instance_type="ml.p4d.24xlarge",
            **{"parameters.steps": "$(id)"},
        ),
    )
    assert response.status_code == 200
    errors = response.context["form"].errors
    assert "has no ml.p4d.24xlarge" in errors["instance_type"][0]
    assert errors["parameters.steps"] == ["must be an integer between 1 and 1000"]
    assert not Job.objects.exists()


def test_job_page_explains_a_reclaim_in_plain_language(client_for, lead, queue, submit, clock):
    submit("qs1", "own", priority=5)
    borrower = submit("qs1", "borrower", priority=1)
    scheduling_pass(queue_id=queue.pk, now=clock(0))
    submit("qs2", "owner", at=10)
    scheduling_pass(queue_id=queue.pk, now=clock(10))

    page = client_for(lead).get(reverse("job-detail", args=[borrower.pk])).content.decode()

    assert "Started on borrowed capacity" in page
    assert "Preempted: team team-qs2 reclaimed its capacity for job owner" in page
    assert "waiting: its share is at its limit and no lender has idle ml.g5.xlarge" in page.lower()


def test_lead_changes_priority_and_terminates_their_job(client_for, lead, submit):
    job = submit("qs1", "mine")
    client = client_for(lead)

    client.post(reverse("job-priority", args=[job.pk]), {"priority": 7})
    client.post(reverse("job-terminate", args=[job.pk]))

    job.refresh_from_db()
    assert (job.priority, job.state, job.reason) == (7, "FAILED", "terminated")


def test_lead_cannot_change_another_teams_job(client_for, lead, submit):
    job = submit("qs3", "theirs")
    client = client_for(lead)

    assert client.post(reverse("job-priority", args=[job.pk]), {"priority": 7}).status_code == 403
    assert client.post(reverse("job-terminate", args=[job.pk])).status_code == 403
    job.refresh_from_db()
    assert job.is_live and job.priority == 0


def test_a_lead_decides_on_their_teams_failed_jobs_and_an_admin_on_every_one(
    client_for, lead, admin, shares
):
    for share in ("qs1", "qs3"):  # the lead leads qs1's team, not qs3's
        JobFactory(
            share=shares[share],
            name=f"failed-in-{share}",
            state=Job.State.FAILED,
            reason="exit_code",
            finished_at=timezone.now(),
        )

    listed = client_for(lead).get(reverse("job-decisions")).content.decode()
    assert "failed-in-qs1" in listed and "failed-in-qs3" not in listed
    assert client_for(lead).get(reverse("job-list")).context["decision_count"] == 1
    listed = client_for(admin).get(reverse("job-decisions")).content.decode()
    assert "failed-in-qs1" in listed and "failed-in-qs3" in listed
    assert client_for(admin).get(reverse("job-list")).context["decision_count"] == 2


def test_failed_job_needs_a_decision_then_leaves_the_list(client_for, lead, queue, submit, clock):
    fragile = submit("qs1", "fragile", priority=1, preemption_retries=0)
    submit("qs1", "own", priority=5)
    scheduling_pass(queue_id=queue.pk, now=clock(0))
    submit("qs2", "owner", at=5)
    scheduling_pass(queue_id=queue.pk, now=clock(5))
    client = client_for(lead)
    assert "fragile" in client.get(reverse("job-decisions")).content.decode()
    assert (
        "This job needs a decision"
        in client.get(reverse("job-detail", args=[fragile.pk])).content.decode()
    )

    response = client.post(
        reverse("job-decision", args=[fragile.pk]),
        {"kind": "RESUBMITTED", "preemption_retries": 3},
    )

    decision = JobDecision.objects.get(job=fragile)
    assert response.url == reverse("job-detail", args=[decision.new_job.pk])
    assert decision.new_job.preemption_retries == 3
    assert decision.new_job.resubmitted_from == fragile
    new, old = decision.new_job, Job.objects.get(pk=fragile.pk)
    assert (new.definition_revision, new.parameters, new.argv) == (
        old.definition_revision,
        old.parameters,
        old.argv,
    )
    assert "fragile" not in client.get(reverse("job-decisions")).content.decode()


def test_a_job_without_a_definition_cannot_be_resubmitted(client_for, lead, queue, shares):
    """Jobs recorded from a trace run no definition: close them or file an exception."""
    recorded = JobFactory(share=shares["qs1"], state=Job.State.FAILED, reason="retries_exhausted")
    client = client_for(lead)

    page = client.get(reverse("job-detail", args=[recorded.pk]))
    response = client.post(reverse("job-decision", args=[recorded.pk]), {"kind": "RESUBMITTED"})

    choices = [value for value, _label in page.context["decision_form"].fields["kind"].choices]
    assert choices == ["EXCEPTION_FILED", "CLOSED"]
    assert response.status_code == 302 and not JobDecision.objects.exists()
    assert Job.objects.count() == 1


def test_closing_needs_a_reason(client_for, lead, queue, submit, clock):
    queue.runnable_time_limit = 10
    queue.save()
    job = submit("qs1", "huge", instances=9)
    scheduling_pass(queue_id=queue.pk, now=clock(0))
    scheduling_pass(queue_id=queue.pk, now=clock(10))
    client = client_for(lead)

    client.post(reverse("job-decision", args=[job.pk]), {"kind": "CLOSED"})
    assert not JobDecision.objects.exists()
    client.post(reverse("job-decision", args=[job.pk]), {"kind": "CLOSED", "note": "too big"})
    assert JobDecision.objects.get(job=job).note == "too big"


def test_live_view_shows_usage_heads_and_preemptions(client_for, admin, queue, submit, clock):
    submit("qs1", "own", priority=5)
    submit("qs1", "borrower", priority=1)
    scheduling_pass(queue_id=queue.pk, now=clock(0))
    submit("qs2", "owner", at=10)
    submit("qs2", "owner-2", at=10)
    scheduling_pass(queue_id=queue.pk, now=clock(10))
    client = client_for(admin)

    page = client.get(reverse("queue-live", args=[queue.pk])).content.decode()
    fragment = client.get(reverse("queue-live", args=[queue.pk]), HTTP_HX_REQUEST="true")

    assert 'hx-trigger="every 2s"' in page
    assert "team team-qs2 reclaimed its capacity" in page
    assert "<html" not in fragment.content.decode()
    assert "owner-2" in fragment.content.decode()  # head of qs2


def test_job_list_filters_by_state_and_team(client_for, admin, shares, submit):
    submit("qs1", "a")
    submit("qs2", "b")
    client = client_for(admin)

    page = client.get(reverse("job-list"), {"team": shares["qs2"].team_id}).content.decode()

    assert ">b</a>" in page and ">a</a>" not in page


def test_job_list_queries_are_constant(client_for, admin, queue, django_assert_num_queries):
    share = QuotaShareFactory(queue=queue)
    JobFactory.create_batch(30, share=share)
    client = client_for(admin)
    client.get(reverse("job-list"))  # warm caches (content types, sessions)

    # session, user, roles, filter choices (queues, shares, teams, and the teams' queues
    # that narrow the team picker), decision count, live-view queues, page count, rows;
    # and per queue of the page's waiting jobs the six that tell whether its kept
    # estimates still hold (scheduler.services.estimates)
    with django_assert_num_queries(17):
        response = client.get(reverse("job-list"))
    assert len(response.context["page_obj"].object_list) == 25


def test_live_view_queries_are_constant(
    client_for, admin, queue, submit, clock, django_assert_num_queries
):
    for n in range(20):
        submit("qs1", f"job-{n}", priority=n % 3)
    scheduling_pass(queue_id=queue.pk, now=clock(0))
    client = client_for(admin)
    client.get(reverse("queue-live", args=[queue.pk]), HTTP_HX_REQUEST="true")

    # The waiting jobs in dispatch order: six queries tell that the kept estimates
    # still hold (scheduler.services.estimates), whatever the number of jobs.
    with django_assert_num_queries(18):
        client.get(reverse("queue-live", args=[queue.pk]), HTTP_HX_REQUEST="true")


def test_filing_an_exception_is_recorded_and_opens_the_request_form(
    client_for, lead, queue, submit, clock
):
    fragile = submit("qs1", "fragile", priority=1, preemption_retries=0)
    submit("qs1", "own", priority=5)
    scheduling_pass(queue_id=queue.pk, now=clock(0))
    submit("qs2", "owner", at=5)
    scheduling_pass(queue_id=queue.pk, now=clock(5))

    response = client_for(lead).post(
        reverse("job-decision", args=[fragile.pk]), {"kind": "EXCEPTION_FILED"}
    )

    assert JobDecision.objects.get(job=fragile).kind == "EXCEPTION_FILED"
    assert response.url == (
        f"{reverse('exception-create')}?kind=PREEMPTION_PROTECTION&jobs={fragile.pk}"
    )


def test_a_running_simulated_job_needs_no_runner(client_for, lead, queue, submit, clock):
    """Only process jobs wait for a runner to take them; a simulated one runs at once."""
    job = submit("qs1", "simulated")
    scheduling_pass(queue_id=queue.pk, now=clock(0))

    page = client_for(lead).get(reverse("job-detail", args=[job.pk])).content.decode()

    assert "Running within its share&#x27;s limit." in page
    assert "waiting for a runner" not in page
