"""Headers and hygiene: CSV exports in declared UTF-8 with formulas neutralised, the
browsable API only when debugging, 403s logged without a traceback, .dockerignore."""

import csv
import io
import logging
from pathlib import Path

import pytest
from rest_framework.test import APIClient

from governance.dashboards.csv import csv_response, table_csv

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("value", "written"),
    [
        ('=HYPERLINK("http://x")', '\'=HYPERLINK("http://x")'),
        ("+1+1", "'+1+1"),
        ("-2+3", "'-2+3"),
        ("@SUM(A1)", "'@SUM(A1)"),
        ("\tTAB", "'\tTAB"),
        ("\rCR", "'\rCR"),
        ("team a=b", "team a=b"),
        ("Zoë’s team", "Zoë’s team"),
        (-3, "-3"),
        (2.5, "2.5"),
        (None, ""),
    ],
)
def test_cells_that_look_like_formulas_are_neutralised(value, written):
    text = table_csv({"header": ["cell"], "units": ["text"], "rows": [[value]]})
    assert list(csv.reader(io.StringIO(text)))[-1] == [written]


def test_header_cells_are_neutralised_too():
    text = table_csv({"header": ["=cmd", "ok"], "units": ["", ""], "rows": []})
    assert next(csv.reader(io.StringIO(text))) == ["'=cmd", "ok"]


def test_csv_response_is_utf8_with_bom_and_charset():
    response = csv_response({"header": ["team"], "units": ["name"], "rows": [["Zoë"]]}, "x.csv")
    assert response["Content-Type"] == "text/csv; charset=utf-8"
    assert response["Content-Disposition"] == 'attachment; filename="x.csv"'
    assert response.content.startswith(b"\xef\xbb\xbf")
    text = response.content.decode("utf-8-sig")
    assert text.startswith("team\r\n") and text.endswith("\r\nZoë\r\n")


def test_the_api_answers_json_only(db, team_lead, settings):
    assert settings.DEBUG is False
    client = APIClient()
    client.force_login(team_lead)
    response = client.get("/api/v1/queues/", HTTP_ACCEPT="text/html")
    assert response.status_code in (200, 406)
    assert "text/html" not in response["Content-Type"]
    assert client.get("/api/v1/queues/?format=api").status_code == 404


def test_the_browsable_api_is_on_when_debugging(tmp_path):
    import os
    import subprocess
    import sys

    code = (
        "import django; django.setup(); from django.conf import settings; "
        "print(settings.REST_FRAMEWORK['DEFAULT_RENDERER_CLASSES'])"
    )
    env = {**os.environ, "DJANGO_DEBUG": "1", "DJANGO_SETTINGS_MODULE": "config.settings"}
    env.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert "BrowsableAPIRenderer" in out.stdout, out.stderr


@pytest.mark.django_db
def test_a_403_is_logged_as_one_line_without_a_traceback(client, outsider):
    console = next(h for h in logging.getLogger().handlers if h.get_name() == "console")
    stream = io.StringIO()
    previous = console.setStream(stream)
    try:
        client.force_login(outsider)
        assert client.get("/accounts/lockouts/").status_code == 403
    finally:
        console.setStream(previous)
    logged = stream.getvalue()
    assert "Forbidden (Permission denied): /accounts/lockouts/" in logged
    assert "Traceback" not in logged


def test_a_500_keeps_its_traceback():
    from config.logfilters import ClientErrorWithoutTraceback

    try:
        raise RuntimeError("boom")
    except RuntimeError:
        import sys

        exc_info = sys.exc_info()
    record = logging.LogRecord("django.request", logging.ERROR, "", 0, "x", (), exc_info)
    record.status_code = 500
    assert ClientErrorWithoutTraceback().filter(record) and record.exc_info is exc_info


def test_dockerignore_keeps_secrets_and_local_state_out_of_the_image():
    lines = [line.rstrip("/") for line in (ROOT / ".dockerignore").read_text().splitlines()]
    for entry in (".env", ".env.*", ".git", ".venv", "var"):
        assert entry in lines
    assert "!.env.example" in lines
