"""Every second a job holds capacity is progress, lost work or restart overhead.

Checked on a contended window of the real trace, where jobs are often preempted and
restarted at the same instant (a regression once measured such a run from its restart).
"""

import datetime as dt

from engine import result_to_json, simulate
from engine.trace import TraceOptions, build_scenario, read_trace, read_vc_sizes


def test_run_time_is_duration_plus_lost_work_plus_overhead():
    options = TraceOptions(
        scale=0.05,
        seed=7,
        in_share_preemption=True,
        checkpoint_interval=1200,
        restart_overhead=120,
        start=dt.datetime(2017, 10, 16),
        days=2,
        name="accounting",
    )
    document = build_scenario(read_trace(), read_vc_sizes(), options)
    result = result_to_json(simulate(document))

    run: dict[str, int] = {}
    started: dict[str, int] = {}
    for event in result["events"]:
        job, t = event["job"], event["t"]
        if event["type"] == "STARTED":
            started[job] = t
        elif event["type"] in ("PREEMPTED", "SUCCEEDED", "FAILED") and job in started:
            run[job] = run.get(job, 0) + t - started.pop(job)
    durations = {job["id"]: job["duration"] for job in document["jobs"]}
    succeeded = {j: o for j, o in result["jobs"].items() if o["state"] == "SUCCEEDED"}
    assert result["events"] and sum(o["preemptions"] for o in succeeded.values()) > 0
    for job_id, outcome in succeeded.items():
        assert run.get(job_id, 0) == (
            durations[job_id] + outcome["lost_work"] + outcome["restart_overhead"]
        ), job_id
