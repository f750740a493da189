"""Philly trace -> scenario conversion."""

from datetime import datetime

from engine import load_scenario
from engine.trace import TraceOptions, TraceRow, build_scenario, read_trace, read_vc_sizes

T0 = datetime(2017, 10, 1, 12, 0, 0)
SIZES = {"aaa": 2, "bbb": 1}


def row(seconds, vc, gpus=1, duration=10.2, position=0):
    from datetime import timedelta

    return TraceRow(T0 + timedelta(seconds=seconds), duration, gpus, vc, position)


def test_rows_are_sorted_and_mapped():
    rows = [
        row(50, "bbb", position=0),
        row(0, "aaa", gpus=8, position=1),
        row(50, "aaa", position=2),
    ]
    doc = build_scenario(rows, SIZES, TraceOptions(scale=0.5, checkpoint_interval=60))
    assert [(j["id"], j["share"], j["submit_at"]) for j in doc["jobs"]] == [
        ("j00000", "aaa", 0),
        ("j00001", "bbb", 50),  # same time: file position breaks the tie
        ("j00002", "aaa", 50),
    ]
    assert doc["jobs"][0]["duration"] == 11 and doc["jobs"][0]["instances"] == 8
    assert [s["capacity_limits"]["gpu"] for s in doc["shares"]] == [8, 4]
    assert doc["queue"]["capacity"] == {"gpu": 12}
    assert doc["jobs"][0]["checkpoint_interval"] == 60
    load_scenario(doc)


def test_unknown_vcs_fold_into_other_with_a_positive_limit():
    doc = build_scenario([row(0, "zzz")], SIZES, TraceOptions(scale=0.01))
    other = doc["shares"][-1]
    assert other["name"] == "other" and other["capacity_limits"]["gpu"] == 1
    assert doc["jobs"][0]["share"] == "other"


def test_priorities_are_seeded_and_gpus_per_instance_round_up():
    rows = [row(i, "aaa", gpus=12, position=i) for i in range(30)]
    options = TraceOptions(seed=7, gpus_per_instance=8)
    first = build_scenario(rows, SIZES, options)
    assert first == build_scenario(rows, SIZES, options)
    assert {j["priority"] for j in first["jobs"]} <= {0, 1, 2}
    assert len({j["priority"] for j in first["jobs"]}) > 1
    assert first["jobs"][0]["instances"] == 2 and first["jobs"][0]["instance_type"] == "gpu-x8"


def test_window_by_start_and_days():
    rows = [
        row(0, "aaa", position=0),
        row(86400, "aaa", position=1),
        row(200000, "aaa", position=2),
    ]
    doc = build_scenario(rows, SIZES, TraceOptions(start=datetime(2017, 10, 2), days=1))
    assert [j["submit_at"] for j in doc["jobs"]] == [43200]


def test_the_bundled_trace_reads_whole():
    rows = read_trace()
    assert len(rows) == 82_247
    sizes = read_vc_sizes()
    assert len(sizes) == 11 and sum(sizes.values()) == 352
