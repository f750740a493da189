"""Workloads: recorded jobs of a period, a Philly window, an uploaded trace (checked)."""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone

from core.errors import InvalidInput
from fleet.bridge import engine_id
from governance.models import WhatIfComparison
from governance.whatif import services
from governance.whatif.workloads import (
    MATCHED_SHARE,
    MATCHED_TEAM,
    WorkloadError,
    default_share,
    read_upload,
)
from tests.factories import JobFactory
from tests.governance.whatif.conftest import AWS_PHILLY_MAPPING

pytestmark = pytest.mark.django_db

GOOD = (
    "timestamp,duration,num_gpus,gpu_time,cluster\n"
    "2017-10-09 07:01:55,66.0,1,66.0,qs2\n"
    "2017-10-09 06:13:03,2951.0,2,5902.0,6214e9\n"
    "2017-10-09 08:00:00,100,1,,b436b2\n"
)


def test_recorded_jobs_of_the_last_30_days_by_default(comparison, aws_queue):
    share = aws_queue.shares.get(name="qs3")
    JobFactory(share=share, submitted_at=timezone.now() - dt.timedelta(days=45))
    comparison = services.comparison_create(actor=comparison.author, queue=aws_queue)
    jobs = comparison.workload_jobs
    assert len(jobs) == 7  # the old job is outside the period
    assert jobs[0]["submit_at"] == 0
    assert {job["share"] for job in jobs} == {"qs1", "qs2", "qs3"}
    assert jobs[0]["checkpoint_interval"] == 600 and jobs[0]["restart_overhead"] == 60
    assert "7 jobs recorded on aws-sample" in comparison.workload_description


def test_the_default_period_ends_at_the_last_submission_of_a_quiet_queue(aws_queue, admin):
    """A queue whose jobs stopped coming 40 days ago (the demo's replayed months end at
    a month's start): the default is the 30 days up to its last job, not an empty
    period; a recent job moves it to the last 30 days again."""
    share = aws_queue.shares.get(name="qs1")
    now = timezone.now().replace(microsecond=0)
    last = now - dt.timedelta(days=40, seconds=30)
    older = [
        JobFactory(share=share, submitted_at=last - dt.timedelta(days=days)) for days in (1, 29)
    ]
    JobFactory(share=share, submitted_at=last - dt.timedelta(days=31))  # before the period
    JobFactory(share=share, submitted_at=last)
    comparison = services.comparison_create(actor=admin, queue=aws_queue, now=now)
    end = last.replace(second=0) + dt.timedelta(minutes=1)
    assert len(comparison.workload_jobs) == len(older) + 1
    assert comparison.workload_description == (
        f"3 jobs recorded on aws-sample from {end - dt.timedelta(days=30):%Y-%m-%d %H:%M} "
        f"to {end:%Y-%m-%d %H:%M} UTC"
    )

    # On a queue in use: the last 30 days, to the minute after its last job (a job
    # submitted since `now` is not counted).
    JobFactory(share=share, submitted_at=now - dt.timedelta(seconds=10))
    JobFactory(share=share, submitted_at=now + dt.timedelta(seconds=70))
    comparison = services.comparison_create(actor=admin, queue=aws_queue, now=now)
    end = min(now, (now - dt.timedelta(seconds=10)).replace(second=0) + dt.timedelta(minutes=1))
    assert comparison.workload_description == (
        f"1 jobs recorded on aws-sample from {end - dt.timedelta(days=30):%Y-%m-%d %H:%M} "
        f"to {end:%Y-%m-%d %H:%M} UTC"
    )


def test_recorded_jobs_keep_the_contract_they_copied(comparison, aws_queue):
    """The replay's baseline is what ran: a job that copied grace 60 and a 600 s
    protection from reclaim carries them; the others name no contract field."""
    share = aws_queue.shares.get(name="qs1")
    job = JobFactory(
        share=share,
        submitted_at=timezone.now() - dt.timedelta(hours=1),
        grace=60,
        min_runtime_reclaim=600,
    )
    comparison = services.comparison_create(actor=comparison.author, queue=aws_queue)
    by_id = {item["id"]: item for item in comparison.workload_jobs}
    mine = by_id[engine_id(job.pk)]
    assert (mine["grace"], mine["min_runtime_reclaim"]) == (60, 600)
    assert "min_runtime_preempt" not in mine and "checkpoint_on_notice" not in mine
    others = [item for item in comparison.workload_jobs if item is not mine]
    assert others and not any("grace" in item for item in others)


def test_recorded_jobs_of_a_chosen_period(comparison):
    start = timezone.now() - dt.timedelta(days=10)
    services.comparison_set_workload(
        actor=comparison.author,
        comparison=comparison,
        kind="RECORDED",
        start=start,
        end=start + dt.timedelta(days=1),
    )
    comparison.refresh_from_db()
    assert comparison.workload_jobs == []
    assert comparison.workload_params["start"] == start.isoformat()


def test_a_philly_window(comparison):
    services.comparison_set_workload(
        actor=comparison.author,
        comparison=comparison,
        kind="PHILLY",
        start=dt.date(2017, 10, 2),
        days=2,
        scale=0.1,
        mapping=AWS_PHILLY_MAPPING,
    )
    comparison.refresh_from_db()
    jobs = comparison.workload_jobs
    assert comparison.workload_kind == WhatIfComparison.Workload.PHILLY
    assert jobs and all(0 <= job["submit_at"] < 2 * 86400 for job in jobs)
    assert {job["share"] for job in jobs} == {"qs1", "qs2", "qs3"}
    teams = {entry["team"]: entry for entry in comparison.share_mapping["teams"]}
    assert {team: teams[team]["share"] for team in AWS_PHILLY_MAPPING} == AWS_PHILLY_MAPPING
    assert sum(entry["jobs"] for entry in teams.values() if entry["share"]) == len(jobs)
    left = sum(entry["jobs"] for entry in teams.values() if not entry["share"])
    assert left > 0 and f"; {left:,} jobs of " in comparison.workload_description
    assert all(job["instance_type"] == "ml.g5.xlarge" for job in jobs)
    assert "Philly trace from 2017-10-02 for 2 days" in comparison.workload_description


def test_an_empty_philly_window_is_refused(comparison):
    with pytest.raises(WorkloadError, match="no job in that window"):
        services.comparison_set_workload(
            actor=comparison.author,
            comparison=comparison,
            kind="PHILLY",
            start=dt.date(2020, 1, 1),
            days=2,
        )


def test_an_upload_maps_a_cluster_named_like_a_share_and_leaves_the_others_out(comparison):
    """No hand-out in turn: qs2's row goes to qs2; 6214e9 and b436b2 match no share, so
    their jobs are left out, listed with their counts, until a share is named."""
    services.comparison_set_workload(
        actor=comparison.author,
        comparison=comparison,
        kind="UPLOAD",
        upload=GOOD.encode(),
        filename="mine.csv",
    )
    comparison.refresh_from_db()
    assert [(job["id"], job["share"]) for job in comparison.workload_jobs] == [("j00001", "qs2")]
    assert mapped(comparison) == {"qs2": "qs2", "6214e9": None, "b436b2": None}
    assert comparison.workload_description == (
        "1 jobs from the uploaded trace mine.csv, GPU demand x 1; 2 jobs of 2 teams mapped "
        "to no share are left out"
    )

    # Mapped again from the rows it kept: no new upload needed; ids stay put.
    services.comparison_set_mapping(
        actor=comparison.author, comparison=comparison, mapping={"6214e9": "qs1", "b436b2": "qs2"}
    )
    comparison.refresh_from_db()
    jobs = comparison.workload_jobs
    assert [(job["id"], job["share"]) for job in jobs] == [
        ("j00000", "qs1"),  # by time: 6214e9 first
        ("j00001", "qs2"),
        ("j00002", "qs2"),
    ]
    assert [job["instances"] for job in jobs] == [2, 1, 1]
    assert [job["submit_at"] for job in jobs] == [0, 2932, 6417]
    assert "3 jobs from the uploaded trace mine.csv" in comparison.workload_description

    # Sending qs2's own jobs elsewhere and leaving 6214e9 out again.
    services.comparison_set_mapping(
        actor=comparison.author, comparison=comparison, mapping={"qs2": "qs3", "6214e9": ""}
    )
    comparison.refresh_from_db()
    assert mapped(comparison) == {"qs2": "qs3", "6214e9": None, "b436b2": "qs2"}
    assert [job["share"] for job in comparison.workload_jobs] == ["qs3", "qs2"]


def mapped(comparison) -> dict:
    return {entry["team"]: entry["share"] for entry in comparison.share_mapping["teams"]}


def test_the_default_mapping_prefers_the_exact_name_then_the_team_then_the_prefix():
    shares = [
        {"name": "vc-6c71a0", "team": "vc-6c71a0"},
        {"name": "6c71a0", "team": "x"},
        {"name": "gpu", "team": "11cb48"},
        {"name": "a-7f04ca", "team": "t1"},
        {"name": "b-7f04ca", "team": "t2"},
        {"name": "solo", "team": "lab-e13805"},
    ]
    assert default_share("6c71a0", shares) == ("6c71a0", MATCHED_SHARE)
    assert default_share("11cb48", shares) == ("gpu", MATCHED_TEAM)
    assert default_share("e13805", shares) == ("solo", "share of the team named …-e13805")
    assert default_share("7f04ca", shares) == (None, "")  # two candidates: the admin chooses
    assert default_share("23dbec", shares) == (None, "")
    assert default_share("6c71a0", shares[:1]) == ("vc-6c71a0", "share named …-6c71a0")


def test_a_mapping_naming_an_unknown_share_or_team_stores_nothing(comparison):
    services.comparison_set_workload(
        actor=comparison.author, comparison=comparison, kind="UPLOAD", upload=GOOD.encode()
    )
    comparison.refresh_from_db()
    before = WhatIfComparison.objects.values().get(pk=comparison.pk)
    with pytest.raises(InvalidInput) as raised:
        services.comparison_set_mapping(
            actor=comparison.author,
            comparison=comparison,
            mapping={"6214e9": "qs9", "nosuch": "qs1"},
        )
    assert raised.value.errors == {
        "mapping.6214e9": [
            "no share named 'qs9' in the cloned policy (one of qs1, qs2, qs3, or empty to "
            "leave it out)"
        ],
        "mapping.nosuch": ["no team 'nosuch' in this workload"],
    }
    assert WhatIfComparison.objects.values().get(pk=comparison.pk) == before


def test_a_run_with_every_team_left_out_says_which_to_map(comparison):
    services.comparison_set_workload(
        actor=comparison.author,
        comparison=comparison,
        kind="PHILLY",
        start=dt.date(2017, 10, 2),
        days=1,
    )
    comparison.refresh_from_db()
    with pytest.raises(InvalidInput) as raised:
        services.comparison_run(actor=comparison.author, comparison=comparison)
    assert raised.value.errors == {
        "mapping": [
            "no job of this workload goes to a share: name a share for 6214e9, 11cb48, "
            "2869ce, ee9e8c, 6c71a0 and 4 more teams"
        ]
    }


def test_recorded_jobs_map_to_their_share_and_can_be_sent_to_another(comparison):
    assert mapped(comparison) == {"qs1": "qs1", "qs2": "qs2", "qs3": "qs3"}
    services.comparison_set_mapping(
        actor=comparison.author, comparison=comparison, mapping={"qs3": "qs1", "qs2": ""}
    )
    comparison.refresh_from_db()
    assert [job["share"] for job in comparison.workload_jobs] == ["qs1", "qs1", "qs1"]
    assert "3 jobs recorded on aws-sample" in comparison.workload_description
    assert "4 jobs of 1 team mapped to no share are left out" in comparison.workload_description


@pytest.mark.parametrize(
    ("content", "problems"),
    [
        (
            "timestamp,duration,num_gpus,gpu_time,cluster\n"
            "2017-10-09 07:01:55,66.0,1,66.0,a\n"
            "yesterday,66.0,1,66.0,a\n"
            "2017-10-09 07:01:55,-3,0,x,\n",
            [
                "line 3: timestamp must look like 2017-10-09 07:01:55",
                "line 4: duration must be a number of seconds above 0",
                "line 4: num_gpus must be a whole number, at least 1",
                "line 4: gpu_time must be a number (or empty)",
                "line 4: cluster is empty; name a share or a virtual cluster",
            ],
        ),
        (
            "when,duration,gpus\n2017-10-09 07:01:55,66.0,1\n",
            [
                "line 1: the header must name the columns timestamp, duration, num_gpus, "
                "gpu_time, cluster; missing timestamp, num_gpus, gpu_time, cluster"
            ],
        ),
        ("timestamp,duration,num_gpus,gpu_time,cluster\n", ["the file has a header but no jobs"]),
        (
            "timestamp,duration,num_gpus,gpu_time,cluster\n2017-10-09 07:01:55,1,1,1,a,extra\n",
            ["line 2: more values than the 5 columns"],
        ),
    ],
)
def test_bad_uploads_say_which_line_and_why(content, problems):
    with pytest.raises(WorkloadError) as raised:
        read_upload(content.encode())
    assert raised.value.problems == problems


def test_a_bad_upload_stores_nothing(comparison):
    before = WhatIfComparison.objects.values().get(pk=comparison.pk)
    bad = GOOD + "2017-10-09 09:00:00,abc,1,1,qs1\n"
    with pytest.raises(WorkloadError) as raised:
        services.comparison_set_workload(
            actor=comparison.author, comparison=comparison, kind="UPLOAD", upload=bad.encode()
        )
    assert raised.value.problems == ["line 5: duration must be a number of seconds above 0"]
    assert WhatIfComparison.objects.values().get(pk=comparison.pk) == before


def test_a_binary_upload_is_refused():
    with pytest.raises(WorkloadError, match="not UTF-8"):
        read_upload(b"\xff\xfe\x00garbage")
