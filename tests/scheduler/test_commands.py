"""The `simulate` and `trace_to_scenario` management commands."""

import copy
import io
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


# -- hostile input: exit 2 with a message naming the field, never a traceback -------------

HOSTILE_BASE = {
    "name": "hostile",
    "queue": {"capacity": {"g": 2}},
    "shares": [{"name": "a", "capacity_limits": {"g": 2}, "strategy": "LEND_AND_BORROW"}],
    "jobs": [
        {"id": "j1", "share": "a", "instance_type": "g", "instances": 1, "submit_at": 0,
         "duration": 50},
        {"id": "j2", "share": "a", "instance_type": "g", "instances": 2, "submit_at": 5,
         "duration": 20, "checkpoint_interval": 10},
    ],
    "actions": [
        {"at": 10, "type": "set_priority", "job": "j2", "priority": 3},
        {"at": 20, "type": "update_share", "share": "a", "capacity_limits": {"g": 1}},
        {"at": 30, "type": "set_capacity", "capacity": {"g": 3}},
        {"at": 40, "type": "terminate", "job": "j1"},
    ],
}  # fmt: skip


def replaced(path: tuple, value) -> dict:
    document = copy.deepcopy(HOSTILE_BASE)
    target = document
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return document


def rejection(tmp_path, data: bytes) -> str:
    """The message of `simulate` on a file holding `data`, which it must reject (exit 2)."""
    path = tmp_path / "doc.json"
    path.write_bytes(data)
    with pytest.raises(CommandError) as raised:
        run("simulate", str(path))
    assert raised.value.returncode == 2
    return str(raised.value)


def test_the_hostile_base_document_is_valid(tmp_path):
    path = tmp_path / "doc.json"
    path.write_text(json.dumps(HOSTILE_BASE))
    out, _ = run("simulate", str(path))
    assert json.loads(out)["jobs"]["j1"]["reason"] == "terminated"


@pytest.mark.parametrize("value", [[], ["a"], {}, {"name": "a"}], ids=repr)
@pytest.mark.parametrize(
    ("path", "message"),
    [
        (("name",), "name: must be a non-empty name"),
        (("shares", 0, "name"), "shares[0].name: must be a non-empty name"),
        (("jobs", 0, "id"), "jobs[0].id: must be a non-empty id"),
        (("jobs", 0, "share"), "jobs[0].share: must be the name of a share"),
        (("jobs", 1, "instance_type"), "jobs[1].instance_type: must be the name of an"),
        (("actions", 0, "job"), "actions[0].job: must be the id of a job"),
        (("actions", 3, "job"), "actions[3].job: must be the id of a job"),
        (("actions", 1, "share"), "actions[1].share: must be the name of a share"),
        (("actions", 2, "type"), "actions[2].type: must be set_priority, update_share,"),
    ],
)  # fmt: skip
def test_a_list_or_object_where_a_name_or_reference_belongs(tmp_path, path, message, value):
    assert message in rejection(tmp_path, json.dumps(replaced(path, value)).encode())


def test_arrays_nested_1000_deep(tmp_path):
    deep = "[" * 1000 + "]" * 1000
    text = json.dumps(replaced(("jobs", 0, "share"), "@")).replace('"@"', deep)
    message = rejection(tmp_path, text.encode())
    assert "not valid JSON: arrays or objects nested too deeply, past 100 levels at line 1" in (
        message
    )


@pytest.mark.parametrize(
    ("path", "literal", "message"),
    [
        (("jobs", 0, "duration"), "9" * 5000, "jobs[0].duration: must be at most 9007199254740991"),
        (("jobs", 1, "submit_at"), "-" + "1" * 5000, "jobs[1].submit_at: must be at least 0"),
        (("queue", "capacity", "g"), "2" * 5000, "queue.capacity.g: must be at most"),
        (("actions", 2, "capacity", "g"), "2" * 17, "actions[2].capacity.g: must be at most"),
        (("name",), "7" * 5000, "name: must be a non-empty name"),
    ],
    ids=["duration", "negative submit_at", "capacity", "17 digits", "name"],
)  # fmt: skip
def test_integers_too_long_to_read(tmp_path, path, literal, message):
    text = json.dumps(replaced(path, "@")).replace('"@"', literal)
    assert message in rejection(tmp_path, text.encode())


def test_integers_at_the_bound_simulate(tmp_path):
    document = replaced(("jobs", 0, "duration"), 2**53 - 1)
    document["queue"]["capacity"]["g"] = 2**53 - 1
    path = tmp_path / "doc.json"
    path.write_text(json.dumps(document))
    out, _ = run("simulate", str(path))
    assert json.loads(out)["jobs"]["j1"]["state"] == "FAILED"  # terminated at t=40


def test_invalid_utf8_in_a_file(tmp_path):
    text = json.dumps(HOSTILE_BASE, indent=1).replace('"hostile"', '"host@ile"')
    data = text.encode().replace(b"@", b"\xff")
    message = rejection(tmp_path, data)
    assert message.endswith("not valid UTF-8: byte 0xff at line 2 column 15")


def test_invalid_utf8_on_stdin_from_the_shell():
    data = json.dumps(HOSTILE_BASE).replace('"j2"', '"j@2"', 1).encode().replace(b"@", b"\xc3")
    proc = subprocess.run(
        [sys.executable, "manage.py", "simulate", "-"],
        cwd=ROOT,
        input=data,
        capture_output=True,
        timeout=120,
    )
    stderr = proc.stderr.decode()
    assert proc.returncode == 2, stderr
    assert "-: not valid UTF-8: byte 0xc3 at line 1 column" in stderr
    assert "Traceback" not in stderr and proc.stdout == b""


def test_invalid_utf8_on_stdin_in_process(monkeypatch):
    stdin = io.TextIOWrapper(io.BytesIO(b'{"name": "\xe9t\xe9"}'), encoding="utf-8")
    monkeypatch.setattr(sys, "stdin", stdin)
    with pytest.raises(CommandError) as raised:
        run("simulate", "-")
    assert raised.value.returncode == 2
    assert str(raised.value) == "-: not valid UTF-8: byte 0xe9 at line 1 column 11"


def test_a_lone_surrogate_in_a_name_is_rejected_before_it_reaches_stdout(tmp_path):
    document = replaced(("shares", 0, "name"), "a\ud800")
    message = rejection(tmp_path, json.dumps(document).encode())
    assert "shares[0].name: must be text without lone surrogates" in message


HOSTILE_VALUES = {
    "list": [],
    "object": {"a": []},
    "null": None,
    "true": True,
    "fraction": 0.5,
    "negative": -1,
    "beyond the bound": 2**53,
    "surrogate": "\udfff",
    "nested": json.loads("[" * 300 + "]" * 300),
}


def _paths(value, prefix=()):
    if isinstance(value, dict):
        items = value.items()
    elif isinstance(value, list):
        items = enumerate(value)
    else:
        return
    for key, child in items:
        yield (*prefix, key)
        yield from _paths(child, (*prefix, key))


def test_every_field_replaced_by_hostile_values_exits_0_or_2(monkeypatch):
    """Each value of the base document in turn becomes each hostile value; `simulate`
    either accepts the document or exits 2 with a message, on a strict UTF-8 stdout."""
    outcomes = {0: 0, 2: 0}
    for path in _paths(HOSTILE_BASE):
        for value in HOSTILE_VALUES.values():
            data = json.dumps(replaced(path, value)).encode()
            for extra in ((), ("--summary",)):
                monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))
                stdout = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="strict")
                try:
                    call_command("simulate", "-", *extra, stdout=stdout, stderr=StringIO())
                    outcomes[0] += 1
                except CommandError as error:
                    assert error.returncode == 2, (path, value)
                    assert str(error), (path, value)
                    outcomes[2] += 1
    assert outcomes[0] and outcomes[2] > outcomes[0]


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


def test_bench_eta_refuses_to_evaluate_on_a_tuning_window():
    from scheduler.management.commands.bench_eta import TUNE_WINDOWS

    with pytest.raises(CommandError, match="--start: 2017-10-04 is a window the calibration"):
        call_command("bench_eta", "--start", TUNE_WINDOWS[0], "--skip-cost")
    with pytest.raises(CommandError, match="--start: not with --tune"):
        call_command("bench_eta", "--tune", "--start", "2017-10-10")
