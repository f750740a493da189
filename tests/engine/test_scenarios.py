"""Every scenario fixture replays to its `expect` block.

The checks are those of the shared `check_scenarios.py` (probes `at` a time of running /
not running / borrowed jobs, `preempted`, `not_preempted`, per-job fields, `exit`),
plus, for our own fixtures, `events`: the exact event trace, `time_to_reclaim` (spec
v2, V12), and `stderr`: the message of a rejected document. Rejected documents go
through the `simulate` command.
"""

import json
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from engine import load_scenario, result_to_json, simulate

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "scenarios"
SCENARIOS = sorted(FIXTURES.glob("*.json"))


def running_at(events: list[dict], t: int) -> dict[str, bool]:
    """Jobs running at time t (after every event at t), with their `borrowed` flag.

    A STOPPING job (PREEMPTED with `grace_until`) keeps its capacity until its STOPPED,
    SUCCEEDED or FAILED event, as the shared `check_scenarios.py` reads it (spec V12)."""
    running: dict[str, bool] = {}
    for event in events:
        if event["t"] > t:
            break
        if event["type"] == "STARTED":
            running[event["job"]] = event["borrowed"]
        elif event["type"] == "PREEMPTED" and event.get("grace_until") is not None:
            continue
        elif event["type"] in ("PREEMPTED", "STOPPED", "SUCCEEDED", "FAILED"):
            running.pop(event["job"], None)
    return running


def expectation_problems(expect: dict, result: dict) -> list[str]:
    problems = []
    events, jobs = result["events"], result["jobs"]
    for probe in expect.get("at", []):
        t = probe["t"]
        now = running_at(events, t)
        problems += [f"t={t}: {j} should run" for j in probe.get("running", []) if j not in now]
        problems += [f"t={t}: {j} should not run" for j in probe.get("not_running", []) if j in now]
        problems += [
            f"t={t}: {j} should borrow" for j in probe.get("borrowed", []) if not now.get(j, True)
        ]
        problems += [
            f"t={t}: {j} should not borrow" for j in probe.get("not_borrowed", []) if now.get(j)
        ]
    preempted = {event["job"] for event in events if event["type"] == "PREEMPTED"}
    problems += [
        f"{j} should be preempted" for j in expect.get("preempted", []) if j not in preempted
    ]
    problems += [
        f"{j} should not be preempted" for j in expect.get("not_preempted", []) if j in preempted
    ]
    for job_id, fields in expect.get("jobs", {}).items():
        for key, want in fields.items():
            got = jobs[job_id][key]
            if got != want:
                problems.append(f"{job_id}.{key} = {got!r}, want {want!r}")
    if "time_to_reclaim" in expect and expect["time_to_reclaim"] != result.get("time_to_reclaim"):
        problems.append(f"time_to_reclaim = {result.get('time_to_reclaim')!r}")
    if "events" in expect and expect["events"] != events:
        problems.append("events differ:\n" + "\n".join(json.dumps(e) for e in events))
    return problems


@pytest.mark.parametrize("path", SCENARIOS, ids=[path.stem for path in SCENARIOS])
def test_scenario_holds(path):
    document = json.loads(path.read_text())
    expect = document.pop("expect")
    if expect.get("exit", 0) != 0:
        stderr = StringIO()
        with pytest.raises(CommandError) as raised:
            call_command("simulate", str(path), stdout=StringIO(), stderr=stderr)
        assert raised.value.returncode == expect["exit"]
        assert expect.get("stderr", "") in str(raised.value)
        return
    result = result_to_json(simulate(load_scenario(document)))
    assert expectation_problems(expect, result) == []


def test_every_shared_scenario_is_a_fixture():
    names = {path.name for path in SCENARIOS}
    for number in range(1, 9):
        assert any(name.startswith(f"{number:02d}-") for name in names)


def test_v1_documents_have_no_v2_field_and_v2_documents_all_of_them():
    """Spec V2/V12: the v2 fields appear exactly in documents that name a contract field."""
    for path in SCENARIOS:
        document = json.loads(path.read_text())
        if document.pop("expect").get("exit", 0):
            continue
        v2 = any(
            key in job
            for job in document["jobs"]
            for key in (
                "min_runtime_reclaim",
                "min_runtime_preempt",
                "grace",
                "checkpoint_on_notice",
            )
        )
        result = result_to_json(simulate(load_scenario(document)))
        assert ("time_to_reclaim" in result) == v2, path.name
        for job in result["jobs"].values():
            assert ("notice_time" in job) == ("protected_blocks" in job) == v2, path.name
        if not v2:
            assert all(e["type"] != "STOPPED" and "grace_until" not in e for e in result["events"])
