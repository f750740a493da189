"""`python -m engine simulate`: the bytes of `dump_result` (with or without orjson), the
messages of the stdlib reader for unusable input, exit status 2, and no Django."""

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from engine import ScenarioError, cli, dump_result, load_scenario, parse_json, simulate
from engine.results import dump_json, format_summary

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "scenarios"
SCENARIOS = sorted(FIXTURES.glob("*.json"))
VALID = [path for path in SCENARIOS if "exit" not in json.loads(path.read_text())["expect"]]
REJECTED = [path for path in SCENARIOS if path not in VALID]

# The orjson paths need orjson (a pinned dependency); the fallback runs everywhere.
READERS = [
    pytest.param(
        True,
        id="orjson",
        marks=pytest.mark.skipif(cli.orjson is None, reason="orjson is not installed"),
    ),
    pytest.param(False, id="stdlib"),
]


@pytest.fixture(params=READERS)
def fast(request, monkeypatch):
    if not request.param:
        monkeypatch.setattr(cli, "orjson", None)
    return request.param


def expected_output(data: bytes, *, pretty=False, summary=False) -> bytes:
    """What `manage.py simulate` printed before the command line: the stdlib's bytes."""
    result = simulate(load_scenario(parse_json(data)))
    text = format_summary(result) if summary else dump_result(result, pretty=pretty)
    return (text + "\n").encode()


def expected_message(data: bytes, path: str) -> str:
    """The message `manage.py simulate` gave for unusable input before the command line."""
    try:
        document = parse_json(data)
    except ScenarioError as exc:
        return f"{path}: {exc.problems[0].message}"
    try:
        load_scenario(document)
    except ScenarioError as exc:
        return "\n".join(str(problem) for problem in exc.problems)
    raise AssertionError("the document is valid")


def run_main(*args, stdin: bytes = b""):
    stdout, stderr = io.BytesIO(), io.StringIO()
    status = cli.main(list(args), stdin=io.BytesIO(stdin), stdout=stdout, stderr=stderr)
    return status, stdout.getvalue(), stderr.getvalue()


@pytest.mark.parametrize("path", VALID, ids=[path.stem for path in VALID])
def test_output_is_byte_identical_to_dump_result(path, fast):
    data = path.read_bytes()
    for flags, expected in [
        ((), expected_output(data)),
        (("--pretty",), expected_output(data, pretty=True)),
        (("--summary",), expected_output(data, summary=True)),
    ]:
        assert run_main("simulate", str(path), *flags) == (0, expected, ""), flags
    assert run_main("simulate", "-", stdin=data) == (0, expected_output(data), "")


def test_text_orjson_writes_otherwise_falls_back_to_json_dumps(fast):
    """Non-ASCII and DEL are escaped by json.dumps (ensure_ascii), not by orjson; quotes,
    backslashes and control characters are escaped alike."""
    names = [
        "caf\u00e9",
        "\u30b7\u30a7\u30a2",
        "del\x7f",
        'q"uo\\te',
        "ctl\x01\x1f\n\t",
        "\U0001f600",
    ]
    document = {
        "name": "s\u00e9nario",
        "queue": {"capacity": {"g\u00e9": 4}},
        "shares": [
            {"name": name, "capacity_limits": {"g\u00e9": 2}, "strategy": "LEND_AND_BORROW"}
            for name in names[:2]
        ],
        "jobs": [
            {"id": name, "share": names[index % 2], "instance_type": "g\u00e9", "instances": 1,
             "submit_at": index, "duration": 10}
            for index, name in enumerate(names)
        ],
    }  # fmt: skip
    data = json.dumps(document, ensure_ascii=False).encode()
    for flags, pretty in [((), False), (("--pretty",), True)]:
        status, out, err = run_main("simulate", "-", *flags, stdin=data)
        assert (status, err) == (0, "")
        assert out == expected_output(data, pretty=pretty) and out.isascii()
    status, out, _ = run_main("simulate", "-", "--summary", stdin=data)
    assert out == expected_output(data, summary=True) and "\u30b7" in out.decode()


@pytest.mark.parametrize(
    "document",
    [{"a": 2**64}, {"a": -(2**63) - 1}, {"a": [{"b": "x"}], "c": {}, "d": []}, {"e": "\x7f"}],
    ids=["beyond 64 bits", "below 64 bits", "nested", "DEL"],
)
def test_dump_bytes_is_dump_json(document, fast):
    for pretty in (False, True):
        assert cli.dump_bytes(document, pretty) == (dump_json(document, pretty) + "\n").encode()


HOSTILE_BASE = {
    "name": "hostile",
    "queue": {"capacity": {"g": 2}},
    "shares": [{"name": "a", "capacity_limits": {"g": 2}, "strategy": "LEND_AND_BORROW"}],
    "jobs": [{"id": "j1", "share": "a", "instance_type": "g", "instances": 1, "submit_at": 0,
              "duration": 50}],
}  # fmt: skip
BASE = json.dumps(HOSTILE_BASE)


def with_duration(literal: str) -> bytes:
    return BASE.replace('"duration": 50', f'"duration": {literal}').encode()


def with_annotation(literal: str) -> bytes:
    return BASE.replace('"name": "hostile"', f'"name": "hostile", "expect": {literal}').encode()


# Edges where orjson and the standard library read differently: each must end as the
# standard library's reading (the same scenario, or the same message).
READINGS = {
    "BOM": b"\xef\xbb\xbf" + BASE.encode(),
    "bad UTF-8": BASE.encode().replace(b"hostile", b"host\xffile", 1),
    "UTF-8 of a surrogate": BASE.encode().replace(b"hostile", b"host\xed\xa0\x80ile", 1),
    "overlong UTF-8": BASE.encode().replace(b"hostile", b"host\xc0\xafile", 1),
    "bad JSON": BASE[:-1].encode(),
    "not an object": b"[1, 2]",
    "empty": b"",
    "format error": BASE.replace('"g": 2}}', '"g": 0}}', 1).encode(),
    "NaN": with_duration("NaN"),
    "Infinity": with_duration("1e400"),
    "fraction": with_duration("0.5"),
    "18 digits": with_duration("9" * 18),
    "30 digits": with_duration("9" * 30),
    "5000 digits": with_duration("9" * 5000),
    "negative 30 digits": with_duration("-" + "9" * 30),
    "lone surrogate": BASE.replace("hostile", "host\\ud800ile", 1).encode(),
    "surrogate pair": BASE.replace("hostile", "host\\ud83d\\ude00ile", 1).encode(),
    "duplicate key": BASE.replace('"duration": 50', '"duration": 50, "duration": 7').encode(),
    "deep in jobs": with_duration("[" * 1000 + "]" * 1000),
    "deep in expect": with_annotation("[" * 1000 + "]" * 1000),
    "2000 deep in expect": with_annotation("[" * 2000 + "]" * 2000),
    "100 deep in expect": with_annotation("[" * 100 + "]" * 100),
    "big integer in expect": with_annotation("9" * 30),
    "NaN in expect": with_annotation("NaN"),
}


@pytest.mark.parametrize("data", READINGS.values(), ids=READINGS.keys())
def test_reading_is_the_standard_librarys(data, monkeypatch):
    def reading():
        try:
            return cli.read_scenario(data, "doc.json")
        except cli.InputError as exc:
            return f"error: {exc}"

    fast = reading()
    monkeypatch.setattr(cli, "orjson", None)
    assert fast == reading()


@pytest.mark.parametrize("path", REJECTED, ids=[path.stem for path in REJECTED])
def test_a_rejected_fixture_exits_2_with_its_message(path, fast):
    status, out, err = run_main("simulate", str(path))
    assert (status, out) == (2, b"")
    assert err == f"error: {expected_message(path.read_bytes(), str(path))}\n"


@pytest.mark.parametrize("data", READINGS.values(), ids=READINGS.keys())
def test_stdin_gives_the_messages_of_manage_py_simulate(data, fast):
    status, out, err = run_main("simulate", "-", stdin=data)
    if status == 0:
        assert (out, err) == (expected_output(data), "")
    else:
        assert (status, out) == (2, b"")
        assert err == f"error: {expected_message(data, '-')}\n"


def test_a_missing_file_and_an_unwritable_output(tmp_path):
    missing = tmp_path / "missing.json"
    assert run_main("simulate", str(missing)) == (
        2,
        b"",
        f"error: {missing}: cannot read: No such file or directory\n",
    )
    source = FIXTURES / "04-borrow-limit-percent.json"
    target = tmp_path / "no-such-folder" / "out.json"
    status, out, err = run_main("simulate", str(source), "-o", str(target))
    assert (status, out) == (2, b"")
    assert err == f"error: {target}: cannot write: No such file or directory\n"
    target = tmp_path / "out.json"
    assert run_main("simulate", str(source), "-o", str(target)) == (0, b"", "")
    assert target.read_bytes() == expected_output(source.read_bytes())


def command(*args, data: bytes | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "engine", *args],
        cwd=ROOT,
        input=data,
        capture_output=True,
        timeout=120,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": ""},
    )


def test_python_m_engine_from_the_shell(tmp_path):
    path = FIXTURES / "01-walkthrough-borrow-reclaim-priority.json"
    proc = command("simulate", str(path))
    assert (proc.returncode, proc.stderr) == (0, b"")
    assert proc.stdout == expected_output(path.read_bytes())

    proc = command("simulate", "-", "--pretty", data=path.read_bytes())
    assert (proc.returncode, proc.stderr) == (0, b"")
    assert proc.stdout == expected_output(path.read_bytes(), pretty=True)

    proc = command("simulate", "-", data=READINGS["bad UTF-8"])
    assert (proc.returncode, proc.stdout) == (2, b"")
    assert proc.stderr.decode() == f"error: {expected_message(READINGS['bad UTF-8'], '-')}\n"

    rejected = FIXTURES / "08-invalid-borrow-limit-on-reserve.json"
    proc = command("simulate", str(rejected))
    assert (proc.returncode, proc.stdout) == (2, b"")
    assert b"shares[0].borrow_limit: only allowed with LEND_AND_BORROW" in proc.stderr
    assert b"Traceback" not in proc.stderr

    proc = command("simulate", str(tmp_path / "missing.json"))
    assert (proc.returncode, proc.stdout) == (2, b"")
    assert proc.stderr.endswith(b"missing.json: cannot read: No such file or directory\n")

    proc = command("simulate")  # argparse: a usage error is status 2 too
    assert proc.returncode == 2 and b"usage:" in proc.stderr


def test_the_command_line_never_imports_django():
    path = FIXTURES / "01-walkthrough-borrow-reclaim-priority.json"
    code = (
        "import sys; from engine.cli import main; status = main(['simulate', sys.argv[1]]);"
        "assert not [m for m in sys.modules if m.split('.')[0] in ('django', 'scheduler')];"
        "sys.exit(status)"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, str(path)], cwd=ROOT, capture_output=True, timeout=120
    )
    assert (proc.returncode, proc.stderr) == (0, b"")
