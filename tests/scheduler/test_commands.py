"""The `simulate` and `trace_to_scenario` management commands."""

import json
import subprocess
import sys
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "scenarios"


def run(*args):
    stdout, stderr = StringIO(), StringIO()
    call_command(*args, stdout=stdout, stderr=stderr)
    return stdout.getvalue(), stderr.getvalue()


def test_simulate_prints_the_result_json(tmp_path):
    path = FIXTURES / "04-borrow-limit-percent.json"
    out, _ = run("simulate", str(path))
    result = json.loads(out)
    assert result["scenario"] == "borrow-limit-percent"
    assert result["jobs"]["a4"]["first_started_at"] == 1000
    pretty, _ = run("simulate", str(path), "--pretty")
    assert json.loads(pretty) == result and "\n  " in pretty


def test_simulate_reads_stdin(monkeypatch):
    text = (FIXTURES / "06-in-share-preemption-off.json").read_text()
    monkeypatch.setattr(sys, "stdin", StringIO(text))
    out, _ = run("simulate", "-")
    assert json.loads(out)["jobs"]["a2"]["finished_at"] == 3700


def test_simulate_summary():
    out, _ = run(
        "simulate", str(FIXTURES / "01-walkthrough-borrow-reclaim-priority.json"), "--summary"
    )
    assert "turnaround p90" in out and out.splitlines()[2].startswith("qs1")


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{", "not valid JSON"),
        ('{"name": "x"}', "queue: is required"),
        (None, "cannot read"),
    ],
)
def test_simulate_rejects_unusable_input_with_exit_2(tmp_path, content, message):
    path = tmp_path / "doc.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(CommandError) as raised:
        run("simulate", str(path))
    assert raised.value.returncode == 2
    assert message in str(raised.value)


def test_simulate_exit_status_and_stderr_from_the_shell():
    proc = subprocess.run(
        [
            sys.executable,
            "manage.py",
            "simulate",
            str(FIXTURES / "08-invalid-borrow-limit-on-reserve.json"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2
    assert "shares[0].borrow_limit: only allowed with LEND_AND_BORROW" in proc.stderr


def test_trace_to_scenario_writes_a_valid_window(tmp_path):
    target = tmp_path / "week.json"
    _, err = run(
        "trace_to_scenario",
        "--start",
        "2017-10-16",
        "--days",
        "1",
        "--scale",
        "0.2",
        "--seed",
        "3",
        "--checkpoint-interval",
        "1800",
        "--in-share-preemption",
        "--borrow-limit",
        "100",
        "-o",
        str(target),
    )
    document = json.loads(target.read_text())
    assert err.startswith(f"wrote {len(document['jobs'])} jobs")
    assert document["shares"][0]["borrow_limit"] == 100
    assert all(share["in_share_preemption"] for share in document["shares"])
    out, _ = run("simulate", str(target))
    assert len(json.loads(out)["jobs"]) == len(document["jobs"])


def test_trace_to_scenario_rejects_a_borrow_limit_without_borrowing():
    with pytest.raises(CommandError) as raised:
        run("trace_to_scenario", "--strategy", "LEND", "--borrow-limit", "5")
    assert raised.value.returncode == 2
