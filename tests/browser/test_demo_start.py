"""`manage.py run_demo` (what `make demo` runs), on a fresh directory and a free port:

- it answers (the time it took is printed: the 60 s target is a figure to read on an idle
  machine, not a timed test; the bound below only catches a start that hangs), and the
  logins banner is the last thing it prints: the console stays quiet afterwards (each
  process logs to var/log/demo/);
- the notification e-mails of the seeded requests are files in var/outbox/, not printed,
  and their links use the real --port; an admin reads them on the Outbox page;
- its static files are collected as in production: hashed names, gzip, cached a year;
- in Chromium, the login page it serves passes axe and a demo login works.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from django.conf import settings
from playwright.sync_api import expect

from demo.organisation import demo_password

pytestmark = [pytest.mark.browser]
# A hang, not the speed target: under pytest-xdist another worker shares the machine,
# and on this 2-core machine under load it took 59-60 s (main and this branch alike).
ANSWER_WITHIN = 180  # seconds
QUIET_FOR = 20  # seconds watched after the banner


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def demo(tmp_path):
    port = free_port()
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL", "SITE_URL")
    }
    env.update({"VAR_DIR": str(tmp_path), "DJANGO_SECURE": "0", "DEMO_TRAFFIC": "1"})
    out = open(tmp_path / "console.txt", "wb")  # noqa: SIM115
    started = time.monotonic()
    process = subprocess.Popen(
        [sys.executable, "manage.py", "run_demo", "--port", str(port)],
        cwd=settings.BASE_DIR,
        env=env,
        stdout=out,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        yield {"port": port, "var": tmp_path, "process": process, "started": started}
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
        out.close()


def wait_for_answer(port: int, process, deadline: float) -> None:
    while time.monotonic() < deadline:
        assert process.poll() is None, "run_demo stopped"
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz/", timeout=2) as answer:
                if answer.status == 200:
                    return
        except OSError:
            time.sleep(0.5)
    pytest.fail("the demo printed its logins but does not answer")


@pytest.mark.slow
def test_the_demo_answers_fast_and_its_console_stays_quiet(demo, page, login, assert_accessible):
    port, var = demo["port"], demo["var"]
    console = var / "console.txt"
    # The logins banner (the demo ready to use, its history loaded).
    deadline = demo["started"] + ANSWER_WITHIN
    while "Press Ctrl-C" not in console.read_text() and time.monotonic() < deadline:
        assert demo["process"].poll() is None, console.read_text()
        time.sleep(0.2)
    answered = time.monotonic() - demo["started"]
    print(f"run_demo printed its logins after {answered:.1f} s")
    wait_for_answer(port, demo["process"], time.monotonic() + 1)
    banner = console.read_text()
    assert banner.rstrip().endswith("Press Ctrl-C to stop the web server, workers and beat.")
    assert "Subject:" not in banner and "awaits your decision" not in banner
    assert f"Open http://127.0.0.1:{port}/" in banner

    time.sleep(QUIET_FOR)
    assert console.read_text() == banner, "the console kept printing after the banner"

    mails = [path.read_text() for path in Path(var / "outbox").iterdir()]
    assert mails, "the seeded requests sent no e-mail to the outbox"
    links = [line for mail in mails for line in mail.splitlines() if "/exceptions/" in line]
    assert links and all(f"http://127.0.0.1:{port}/exceptions/" in line for line in links)
    assert not any("8000" in line for line in links)

    # Static files as production serves them: a hashed name, gzip, cached a year.
    login_html = urllib.request.urlopen(f"http://127.0.0.1:{port}/accounts/login/").read()
    stylesheet = re.search(rb'href="(/static/css/app\.[0-9a-f]{12}\.css)"', login_html)
    assert stylesheet, "the login page names its stylesheet without a content hash"
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}{stylesheet[1].decode()}", headers={"Accept-Encoding": "gzip"}
    )
    with urllib.request.urlopen(request) as answer:
        assert answer.headers["Content-Encoding"] == "gzip"
        assert "immutable" in answer.headers["Cache-Control"], answer.headers["Cache-Control"]

    page.goto(f"http://127.0.0.1:{port}/accounts/login/")
    assert_accessible(page)
    page.get_by_label("Username").fill("admin")
    page.get_by_label("Password").fill(demo_password())
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("navigation", name="Main")).to_be_visible()
    assert_accessible(page)
    # Admins read the e-mails in the product too, their links to this server.
    page.goto(f"http://127.0.0.1:{port}/outbox/")
    first = page.locator(".outbox__mail").first
    expect(first).to_contain_text(f"http://127.0.0.1:{port}/exceptions/")
    assert_accessible(page)
