"""The job output's fast representation gives exactly what DRF's generic one gives,
for jobs in every state, with and without a definition, an urgency or a finish."""

import datetime as dt

import pytest
from rest_framework import serializers

from fleet.models import Job, QuotaShare
from scheduler.selectors import job_list
from scheduler.serializers import JobOutputSerializer
from tests.factories import JobFactory, UrgencyDefinitionFactory, aws_sample_queue, job_definition

pytestmark = pytest.mark.django_db


def test_the_fast_representation_equals_the_generic_one(settings):
    settings.TIME_ZONE = "Asia/Tokyo"  # date-times keep the API's own time zone handling
    queue = aws_sample_queue()
    itype = queue.capacities.get().instance_type
    revision = job_definition(queue, name="train", instance_type=itype)
    share = QuotaShare.objects.get(queue=queue, name="qs1")
    urgency = UrgencyDefinitionFactory(name="incident")
    now = dt.datetime(2026, 3, 4, 5, 6, 7, 891011, tzinfo=dt.UTC)
    for index, state in enumerate(Job.State.values):
        JobFactory(
            share=share,
            queue=queue,
            instance_type=itype,
            state=state,
            name=f"job {index} ✓",
            definition_revision=revision if index % 2 else None,
            parameters={"lr": 0.01, "layers": [1, 2], "note": None} if index % 2 else {},
            urgency=urgency if index % 3 == 0 else None,
            client_token="" if index % 2 else f"token-{index}",
            submitted_at=now,
            started_at=now + dt.timedelta(seconds=index)
            if index % 2 or state in Job.HOLDING_STATES
            else None,
            # A STOPPING job has a stop instant and a grace (the database holds to it).
            stop_at=now + dt.timedelta(minutes=2) if state == Job.State.STOPPING else None,
            grace_until=now + dt.timedelta(minutes=2) if state == Job.State.STOPPING else None,
            finished_at=now + dt.timedelta(hours=index) if index % 4 == 1 else None,
            exit_code=-9 if index == 3 else None,
            checkpoint_interval=600 if index % 2 else None,
            borrowed=bool(index % 2),
            progress=index * 100,
        )
    jobs = list(job_list(filters={"queue": queue.pk}))
    assert len(jobs) == len(Job.State.values)
    fast = JobOutputSerializer(jobs, many=True).data
    generic = [
        serializers.ModelSerializer.to_representation(JobOutputSerializer(), job) for job in jobs
    ]
    assert [dict(row) for row in fast] == [dict(row) for row in generic]
    rows = job_list(filters={"queue": queue.pk}).values(*JobOutputSerializer.columns())
    assert [dict(row) for row in JobOutputSerializer(rows, many=True).data] == generic
    assert list(fast[0]) == JobOutputSerializer.Meta.fields
