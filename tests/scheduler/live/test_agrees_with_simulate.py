"""The live scheduler and `simulate` agree: the same scenario, the same outcome.

Each scenario is replayed through the live services (rows, the queue lock, the
simulated executor at one compute second per second, `now` driven by the test) and
compared with the engine's simulator: every lifecycle event and every job's figures.
"""

import json
from pathlib import Path

import pytest

from engine import result_to_json, simulate
from fleet.models import JobEvent
from tests.scheduler.live.driver import live_events, replay, seconds, simulated_events

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "scenarios"
# Every valid scenario (08, 31, 32 and 54 are documents the format rejects), the v2
# ones (41 to 53, interruption contracts) included.
SCENARIOS = sorted(
    path
    for path in FIXTURES.glob("*.json")
    if not path.name.startswith(("08-", "31-", "32-", "54-"))
)


@pytest.fixture(autouse=True)
def real_time_speed(settings):
    settings.SIMULATED_SECONDS_PER_SECOND = 1


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.stem)
def test_live_replay_matches_simulate(db, path):
    doc = json.loads(path.read_text())
    expected = result_to_json(simulate(doc))

    queue, jobs = replay(doc)

    assert live_events(queue) == simulated_events(expected)
    if "time_to_reclaim" in expected:  # a v2 document (spec V12)
        waits = sorted(
            event.detail["reclaim_wait"]
            for event in JobEvent.objects.filter(job__queue=queue, type="STARTED")
            if "reclaim_wait" in event.detail
        )
        assert {
            "count": len(waits),
            "max": waits[-1] if waits else None,
            "p50": waits[(len(waits) - 1) // 2] if waits else None,
        } == expected["time_to_reclaim"]
    # A job that never finishes waits until the last instant processed (spec v1.1).
    end = max([expected["makespan"], *(action["at"] for action in doc.get("actions", []))])
    for job_id, want in expected["jobs"].items():
        job = jobs[job_id]
        waiting = job.waiting_time
        if job.state == "RUNNABLE" and job.runnable_since is not None:
            waiting += end - seconds(job.runnable_since)
        got = {
            "state": job.state,
            "first_started_at": seconds(job.first_started_at),
            "finished_at": seconds(job.finished_at),
            "preemptions": job.preemptions,
            "ran_borrowed": job.ran_borrowed,
            "lost_work": job.lost_work,
            "restart_overhead": job.restart_overhead_spent,
            "waiting_time": waiting,
        }
        if "notice_time" in want:  # a v2 document (spec V12)
            got["notice_time"] = job.notice_time
        assert got == {key: want[key] for key in got}, job_id
        if "protected_blocks" in want:
            # V4: the live scheduler counts a job's blocks once per run (its passes also
            # run on a tick), the simulator once per instant: blocked in the same runs.
            blocks = job.protected_blocks
            assert (blocks > 0, blocks <= want["protected_blocks"]) == (
                want["protected_blocks"] > 0,
                True,
            ), job_id
        if want["state"] == "RUNNABLE":
            assert job.reason == want["reason"], job_id
