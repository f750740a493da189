"""Calibrated start ranges (issue 26): the p10–p90 range from the queue's record of past
estimates against actual starts, the record kept by the forecast, and its coverage on the
queue page and in the API."""

from __future__ import annotations

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from scheduler.models import EstimateRecord
from scheduler.services.estimates import calibration as c
from scheduler.services.estimates import store
from scheduler.services.estimates.reads import queue_estimates
from scheduler.services.estimates.record import queue_coverage
from scheduler.services.passes import scheduling_pass

# -- the calibration (plain figures) ---------------------------------------------------------


def test_without_a_record_the_default_factors_widen_the_forecast():
    low, mid, high = c.NO_RECORD.waits(1000)
    scale = 1000 + c.OFFSET
    assert c.NO_RECORD.basis == "default"
    assert (low, mid, high) == tuple(round(scale * f - c.OFFSET) for f in c.DEFAULT)
    assert low < mid < high
    assert c.NO_RECORD.waits(None) == (None, None, None)
    assert c.RANGE_LABEL == "p10–p90"


def test_the_record_quantiles_of_actual_against_forecast_are_the_factors():
    # 100 outcomes whose actual waits were 1x ... 100/50 x the forecast (plus the offset).
    outcomes = [
        c.Outcome("qs1", 1000, round((1000 + c.OFFSET) * (k / 50) - c.OFFSET))
        for k in range(1, 101)
    ]
    found = c.calibrations(outcomes).of("qs1")
    assert found.basis == "queue" and found.samples == 100
    low, mid, high = found.factors
    # The low end at the record's LEVELS[0] quantile (ratio ~ 2 x the quantile here).
    assert low == pytest.approx(2 * c.LEVELS[0], abs=0.03)
    assert mid == pytest.approx(1.0, abs=0.03)
    assert high == pytest.approx(1.8, abs=0.03)
    # Too few outcomes: the default.
    assert c.calibrations(outcomes[: c.MIN_RECORDS - 1]).of("qs1") == c.NO_RECORD


def test_an_open_estimate_counts_once_it_waited_past_its_forecast():
    waiting = c.Outcome("qs1", 100, 150, open=True, forecast_high=200)
    overdue = c.Outcome("qs1", 100, 500, open=True, forecast_high=200)
    assert c.counted(waiting) is None
    assert c.counted(overdue) == c.ratio(100, 500)
    assert c.counted(c.Outcome("qs1", None, 10)) is None  # "never": no scale


def test_coverage_says_where_starts_fell():
    found = c.coverage_of([(5, 10, 20), (10, 10, 20), (20, 10, 20), (25, 10, 20), (3, None, None)])
    assert (found.before, found.inside, found.after) == (2, 2, 1)
    assert found.share("inside") == pytest.approx(0.4)


def test_a_replayed_estimate_sees_only_the_outcomes_known_when_it_was_made():
    # 40 jobs estimated at t=0..39 waited 3x their forecast (1,020 s) and started by
    # t=1,059; one estimated at t=500 knows none of them yet (still waiting, and within
    # their forecast's p90 run), one at t=2000 knows them all.
    forecast = 300
    actual = round((forecast + c.OFFSET) * 3 - c.OFFSET)
    made = [c.Made(t, "qs1", forecast, 2000, actual) for t in range(40)]
    made += [c.Made(500, "qs1", forecast, forecast, 0), c.Made(2000, "qs1", forecast, forecast, 0)]
    found = c.replayed(made)
    assert found[40] == c.NO_RECORD
    assert found[41].basis == "queue" and found[41].samples == 41  # the one at 500 too
    assert found[41].factors[1] == pytest.approx(3.0)


# -- the record in the live queue -----------------------------------------------------------------


@pytest.fixture
def queue(queue):
    """The AWS sample queue with nothing stored of it (ids and fingerprints repeat from run
    to run, and a stored forecast that is current is served without a new one)."""
    store.forget(queue)
    return queue


@pytest.mark.django_db
def test_the_first_estimate_is_recorded_and_closed_when_the_job_starts(
    queue, submit, clock, client, lead
):
    submit("qs1", "first", expected_duration=600)
    submit("qs1", "borrower", expected_duration=900)
    scheduling_pass(queue_id=queue.pk, now=clock(0))
    head = submit("qs1", "head", at=10, expected_duration=100)
    scheduling_pass(queue_id=queue.pk, now=clock(20))

    entry = queue_estimates(queue, now=clock(30)).by_job()[head.pk]
    assert entry.estimate.quantiles == "p10–p90"
    assert entry.estimate.range_basis == "default"
    low, mid, high = c.NO_RECORD.waits(570)
    assert (entry.estimate.wait_p10, entry.estimate.wait_p50, entry.estimate.wait_p90) == (
        low,
        mid,
        high,
    )
    record = EstimateRecord.objects.get(job=head)
    assert (record.made_at, record.forecast_wait, record.quantiles) == (clock(30), 570, "p10–p90")
    assert (record.low_wait, record.point_wait, record.high_wait) == (low, mid, high)
    assert record.started_at is None
    # A later forecast does not record it again.
    queue_estimates(queue, now=clock(40))
    assert EstimateRecord.objects.filter(job=head).count() == 1
    assert queue_coverage(queue, now=clock(40)).coverage.n == 0

    scheduling_pass(queue_id=queue.pk, now=clock(600))
    scheduling_pass(queue_id=queue.pk, now=clock(700))
    head.refresh_from_db()
    assert head.first_started_at is not None
    queue_estimates(queue, now=clock(710))
    record.refresh_from_db()
    assert record.started_at == head.first_started_at
    assert record.actual_wait == round((head.first_started_at - clock(30)).total_seconds())
    coverage = queue_coverage(queue, now=clock(710))
    assert coverage.coverage.n == 1
    side = c.where(record.actual_wait, low, high)
    assert coverage.coverage.share(side) == 1.0


@pytest.mark.django_db
def test_the_queue_page_and_the_api_state_the_quantiles_and_the_coverage(
    queue, submit, clock, client, lead
):
    submit("qs1", "first", expected_duration=600)
    submit("qs1", "borrower", expected_duration=900)
    scheduling_pass(queue_id=queue.pk, now=None)
    head = submit("qs1", "head", at=None, expected_duration=100)
    scheduling_pass(queue_id=queue.pk, now=None)

    api = APIClient()
    api.force_login(lead)
    rows = api.get(reverse("api-queue-pending", args=[queue.pk])).json()["results"]
    estimate = next(row["estimate"] for row in rows if row["job"] == head.pk)
    assert estimate["quantiles"] == "p10–p90"
    assert estimate["range_basis"] == "default"
    assert estimate["start_p10"] <= estimate["start_p50"] <= estimate["start_p90"]
    assert estimate["wait_p10"] <= estimate["wait_p50"] <= estimate["wait_p90"]

    client.force_login(lead)
    page = client.get(reverse("job-detail", args=[head.pk])).content.decode()
    assert "Estimated start (p10–p90)" in page
    assert "data-estimate-range" in page
    queue_page = client.get(reverse("queue-detail", args=[queue.pk])).content.decode()
    assert "data-estimate-coverage" in queue_page
    assert "no recorded estimate&#x27;s job started" in queue_page or (
        "no recorded estimate's job started" in queue_page
    )

    record = EstimateRecord.objects.get(job=head)
    EstimateRecord.objects.filter(pk=record.pk).update(
        started_at=record.made_at, actual_wait=(record.high_wait or 0) + 1
    )
    queue_page = client.get(reverse("queue-detail", args=[queue.pk])).content.decode()
    assert "of the 1 recorded estimates whose jobs started in the last 30 days" in queue_page
    assert "0 % started inside their range, 0 % before it, 100 % after it" in queue_page
