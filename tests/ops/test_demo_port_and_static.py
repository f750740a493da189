"""Issue 28, point 11: `make demo PORT=8123 HOST=...`, and static files under
`manage.py runserver --insecure` with DJANGO_DEBUG=0 (a 500, TypeError, before)."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from django.contrib.staticfiles import finders
from django.contrib.staticfiles.views import serve
from django.http import Http404
from django.test import RequestFactory

from demo.management.commands.run_demo import allowed_hosts

pytestmark = pytest.mark.spawns

ROOT = Path(__file__).resolve().parents[2]


def test_make_demo_takes_a_port_and_a_host():
    dry = subprocess.run(
        ["make", "-n", "demo", "PORT=8123", "HOST=demo.example"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "manage.py run_demo --host demo.example --port 8123" in dry
    assert "DJANGO_SECURE=0" in dry
    default = subprocess.run(
        ["make", "-n", "demo"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    assert "run_demo --host 127.0.0.1 --port 8000" in default


def test_the_demo_web_server_accepts_the_host_it_listens_on(monkeypatch):
    monkeypatch.delenv("DJANGO_ALLOWED_HOSTS", raising=False)
    assert allowed_hosts("127.0.0.1") == "127.0.0.1,localhost"
    assert allowed_hosts("demo.example") == "127.0.0.1,localhost,demo.example"
    assert allowed_hosts("0.0.0.0") == "127.0.0.1,localhost"  # opened by another name
    monkeypatch.setenv("DJANGO_ALLOWED_HOSTS", "quota.lab")
    assert allowed_hosts("0.0.0.0") == "quota.lab"


def test_a_missing_static_file_is_not_found_not_a_server_error(settings):
    settings.DEBUG = False
    assert finders.find("css/no-such-file.css") is None
    assert finders.find("vendor/plotly.min.js").endswith(".min.js")  # partial or full bundle
    with pytest.raises(Http404):
        serve(
            RequestFactory().get("/static/css/no-such-file.css"),
            "css/no-such-file.css",
            insecure=True,
        )


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status
    except urllib.error.HTTPError as error:
        return error.code


@pytest.mark.slow
@pytest.mark.parametrize("collected", [False, True], ids=["finders", "collected"])
def test_runserver_insecure_serves_static_files_with_debug_off(tmp_path, collected):
    env = {
        **os.environ,
        "DJANGO_DEBUG": "0",
        "DJANGO_SECURE": "0",
        "VAR_DIR": str(tmp_path),
        "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
    }
    manage = [sys.executable, str(ROOT / "manage.py")]
    subprocess.run([*manage, "migrate", "-v0"], env=env, check=True, capture_output=True)
    if collected:
        # A collection (hashed names) as the image has; plotly and the API docs' assets
        # left out to keep it quick.
        ignore = ["-i", "vendor", "-i", "drf_spectacular_sidecar", "-i", "rest_framework"]
        subprocess.run(
            [*manage, "collectstatic", "--noinput", "-v0", *ignore],
            env=env,
            check=True,
            capture_output=True,
        )
    port = _free_port()
    server = subprocess.Popen(
        [*manage, "runserver", "--insecure", "--noreload", f"127.0.0.1:{port}"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                page = urllib.request.urlopen(f"{base}/accounts/login/", timeout=5).read()
                break
            except OSError:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise
                time.sleep(0.3)
        assets = re.findall(r'(?:href|src)="(/static/[^"]+)"', page.decode())
        assert any(asset.endswith(".css") for asset in assets), assets
        if collected:
            assert any(re.search(r"\.[0-9a-f]{12}\.css$", asset) for asset in assets), assets
        for asset in [*assets, "/static/vendor/plotly.min.js"]:
            assert _status(base + asset) == 200, asset
        assert _status(f"{base}/static/css/no-such-file.css") == 404
    finally:
        server.terminate()
        _, errors = server.communicate(timeout=20)
    assert "Traceback" not in errors, errors
