"""Result documents: exact shape, determinism, and the human summary."""

import json
from pathlib import Path

from engine import dump_result, load_scenario, result_to_json, simulate
from engine.results import format_seconds, format_summary

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "scenarios"


def scenario(name):
    document = json.loads((FIXTURES / name).read_text())
    document.pop("expect")
    return load_scenario(document)


def test_result_document_fields():
    result = result_to_json(simulate(scenario("02-checkpoint-recovery.json")))
    assert result["scenario"] == "checkpoint-recovery"
    assert result["makespan"] == 5000
    assert result["jobs"]["a2"] == {
        "state": "SUCCEEDED",
        "reason": None,
        "share": "a",
        "submitted_at": 0,
        "first_started_at": 0,
        "finished_at": 1650,
        "preemptions": 1,
        "ran_borrowed": True,
        "lost_work": 100,
        "restart_overhead": 50,
        "waiting_time": 500,
    }
    assert result["events"][5] == {
        "t": 700,
        "type": "PREEMPTED",
        "job": "a2",
        "share": "a",
        "cause": "reclaim",
        "by": "b1",
    }


def test_dump_is_byte_identical_and_sorted():
    first = dump_result(simulate(scenario("01-walkthrough-borrow-reclaim-priority.json")))
    second = dump_result(simulate(scenario("01-walkthrough-borrow-reclaim-priority.json")))
    assert first == second
    assert first.startswith('{"events":[{"job":"high","share":"qs1","t":0,"type":"SUBMITTED"}')
    pretty = dump_result(simulate(scenario("01-walkthrough-borrow-reclaim-priority.json")), True)
    assert json.loads(pretty) == json.loads(first)


def test_summary_table_per_share():
    text = format_summary(simulate(scenario("01-walkthrough-borrow-reclaim-priority.json")))
    lines = text.splitlines()
    assert lines[0] == "scenario walkthrough-borrow-reclaim-priority: makespan 2h 03m"
    assert lines[1].split()[:4] == ["share", "jobs", "finished", "failed"]
    assert lines[2].split()[:3] == ["qs1", "3", "3"]
    assert lines[3].split()[:3] == ["qs2", "1", "1"]


def test_format_seconds():
    assert [format_seconds(s) for s in (None, 45, 725, 12000, 190000)] == [
        "-",
        "45s",
        "12m 05s",
        "3h 20m",
        "2d 04h",
    ]


def test_simulate_accepts_a_document_and_reports_progress():
    calls = []
    document = json.loads((FIXTURES / "04-borrow-limit-percent.json").read_text())
    document.pop("expect")
    simulate(document, progress=lambda *args: calls.append(args))
    assert calls == [(2000, 4, 4)]
