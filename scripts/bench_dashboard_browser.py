"""The leadership dashboard's first load in Chromium: `python scripts/bench_dashboard_browser.py`.

Run `manage.py bench_dashboard` first: it fills its own PostgreSQL database
(--database-url, default quota_bench) with a year of job events and their rollups.
This script then serves that database as production does (gunicorn.conf.py, DEBUG off,
static files collected into a temporary directory: hashed names, compressed copies,
a year's caching), signs in a leadership user by a session cookie, and opens the
dashboard's busiest month (or, with --page whatif, a what-if's result page) --visits
times, each in a fresh browser context (an empty cache: a first visit), then as many
times again in one context (a returning visit).

It prints, per kind of visit, the median and the worst of:
  - content:  navigation start to the page's `load` event (figures and tables shown);
  - charts:   navigation start until the charts are drawn that a reader sees who
              scrolls to the first chart as the page loads (plotly.js fetched, compiled
              and run; app.js marks a drawn chart data-plotted);
  - scroll to drawn: then, scrolling to each chart in turn, the longest wait between
              reaching a chart and seeing it drawn (app.js draws charts as they near
              the viewport, so this is one chart's drawing, not the page's).
The browser's window is --width x --height (default 1280 x 720; 390 x 844 is a phone).
The target (issue 15) is a first load under 1.5 s; say the machine's load (`uptime`)
beside the figures, as Chromium's compile time depends on it.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking"]
SECRET = "bench-dashboard-browser-secret-key-0123456789-abcdefghijklmnop"


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--database-url",
        default=os.environ.get("BENCH_DATABASE_URL")
        or "postgres://postgres@127.0.0.1:5432/quota_bench",
    )
    parser.add_argument("--visits", type=int, default=7, help="visits of each kind")
    parser.add_argument(
        "--page",
        choices=("dashboard", "whatif"),
        default="dashboard",
        help="the dashboard's busiest month, or a what-if's result (one is run if none)",
    )
    parser.add_argument("--width", type=int, default=1280, help="viewport width, px")
    parser.add_argument("--height", type=int, default=720, help="viewport height, px")
    parser.add_argument(
        "--breakdown",
        action="store_true",
        help="also trace one more first visit in Chromium and print where its time went",
    )
    return parser.parse_args()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def server_env(args, var_dir: Path, port: int) -> dict[str, str]:
    env = {
        **os.environ,
        "DATABASE_URL": args.database_url,
        "DJANGO_SECRET_KEY": SECRET,
        "DJANGO_SECURE": "0",
        "DJANGO_DEBUG": "0",
        "DJANGO_ALLOWED_HOSTS": "127.0.0.1",
        "DJANGO_LOG_LEVEL": "WARNING",
        "VAR_DIR": str(var_dir),
        "GUNICORN_BIND": f"127.0.0.1:{port}",
    }
    env.pop("REDIS_URL", None)
    return env


def manage(env: dict[str, str], *argv: str) -> str:
    done = subprocess.run(
        [sys.executable, "manage.py", *argv], cwd=ROOT, env=env, capture_output=True, text=True
    )
    if done.returncode:
        raise SystemExit(f"manage.py {' '.join(argv)} failed:\n{done.stdout}{done.stderr}")
    return done.stdout


SESSION_CODE = """
import os
import django; django.setup()
from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY
from django.contrib.auth.models import Group, User
from django.contrib.sessions.backends.db import SessionStore
from governance.models import MonthlyRollup
user, _ = User.objects.get_or_create(username="bench-leader")
user.groups.add(Group.objects.get_or_create(name="leadership")[0])
months = MonthlyRollup.objects.filter(scope="all").values_list("data", "month")
if not months:
    raise SystemExit("no rollups: run manage.py bench_dashboard first")
busiest = max(months, key=lambda item: item[0]["jobs_ended"])[1]
comparison = 0
if os.environ.get("BENCH_PAGE") == "whatif":
    # A finished what-if of the first queue: its week after the busiest month begins.
    import datetime as dt
    from fleet.models import JobQueue
    from governance.whatif import services, tasks
    from governance.whatif.models import WhatIfComparison
    user.groups.add(Group.objects.get_or_create(name="admins")[0])
    done = WhatIfComparison.objects.filter(status="DONE", title="bench").first()
    if done is None:
        now = dt.datetime.combine(busiest, dt.time(), tzinfo=dt.UTC) + dt.timedelta(days=7)
        queue = JobQueue.objects.order_by("name").first()
        done = services.comparison_create(actor=user, queue=queue, title="bench", now=now)
        services.comparison_run(actor=user, comparison=done)
        if tasks.run_comparison(done.pk) != "DONE":
            raise SystemExit("the what-if did not finish")
    comparison = done.pk
session = SessionStore()
session[SESSION_KEY] = str(user.pk)
session[BACKEND_SESSION_KEY] = "accounts.backends.LocalPasswordBackend"
session[HASH_SESSION_KEY] = user.get_session_auth_hash()
session.create()
print(session.session_key, f"{busiest:%Y-%m}", len(months), comparison)
"""


def start_gunicorn(env: dict[str, str], port: int, log: Path) -> subprocess.Popen:
    server = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "-c", "gunicorn.conf.py", "config.wsgi"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=log.open("w"),
        start_new_session=True,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz/", timeout=2):
                return server
        except OSError:
            if server.poll() is not None:
                raise SystemExit(f"gunicorn exited: see {log}") from None
            time.sleep(0.5)
    os.killpg(server.pid, signal.SIGKILL)
    raise SystemExit("gunicorn did not answer /healthz/ within 60 s")


# A reader who goes to the charts at once: the first chart scrolled into view as the
# page loads.
TO_CHARTS = """() => {
  document.querySelector("[data-plotly-figure]").scrollIntoView({block: "start"});
}"""
# The charts on the screen now (drawn charts may have moved the others down).
IN_VIEW = """() => {
  return [...document.querySelectorAll("[data-plotly-figure]")].filter((element) => {
    const box = element.getBoundingClientRect();
    return box.bottom > 0 && box.top < window.innerHeight;
  }).map((element) => element.dataset.figureId);
}"""
# Scrolls to a chart and resolves, once it is drawn, with the wait in ms.
SCROLL_TO = """(element) => new Promise((resolve) => {
  const start = performance.now();
  element.scrollIntoView({block: "center"});
  const check = () => element.dataset.plotted !== undefined
    ? resolve(performance.now() - start) : requestAnimationFrame(check);
  check();
})"""


def visit(context, url: str) -> tuple[float, float, float]:
    page = context.new_page()
    try:
        page.goto(url, wait_until="load")
        charts = page.locator("[data-plotly-figure]")
        if not charts.count():
            raise SystemExit("the page shows no chart: is the month empty?")
        # (wait_for_function would need eval, which the page's CSP forbids.)
        page.evaluate(TO_CHARTS)
        page.wait_for_selector("[data-plotly-figure][data-plotted]", timeout=60_000)
        for figure_id in page.evaluate(IN_VIEW):
            page.wait_for_selector(
                f'[data-figure-id="{figure_id}"][data-plotted]', state="attached", timeout=60_000
            )
        # Both measured from the navigation's start by the browser's own clock.
        content, shown = page.evaluate(
            "[performance.getEntriesByType('navigation')[0].loadEventEnd, performance.now()]"
        )
        # Then scrolling down: each chart is drawn as it nears the viewport.
        later = max(charts.nth(index).evaluate(SCROLL_TO) for index in range(charts.count()))
        return content / 1000, shown / 1000, later / 1000
    finally:
        page.close()


# Injected before the page's own scripts (by the DevTools protocol, so the page's CSP
# does not apply): records long tasks, when plotly.js has run (its bundle assigns
# window.Plotly last) and each Plotly.newPlot's synchronous time and promise.
INSTRUMENT = """(() => {
  const marks = window.__bench = {draws: [], longtasks: [], scripts: {}};
  new PerformanceObserver((list) => {
    for (const e of list.getEntries()) marks.longtasks.push([e.startTime, e.duration]);
  }).observe({type: "longtask", buffered: true});
  let real;
  Object.defineProperty(window, "Plotly", {configurable: true, get() { return real; },
    set(value) {
      marks.plotlyRun = performance.now();
      const newPlot = value.newPlot;
      value.newPlot = function (element, ...rest) {
        const entry = {id: element.dataset.figureId, start: performance.now()};
        const result = newPlot.call(this, element, ...rest);
        entry.sync = performance.now() - entry.start;
        marks.draws.push(entry);
        Promise.resolve(result).then(() => { entry.done = performance.now(); });
        return result;
      };
      real = value;
    }});
  document.addEventListener("load", (event) => {
    if (event.target.tagName === "SCRIPT") {
      marks.scripts[event.target.src.split("/").pop()] = performance.now();
    }
  }, true);
})();"""

TIMELINE = """() => {
  const nav = performance.getEntriesByType("navigation")[0];
  const plotly = performance.getEntriesByType("resource").find(
    (e) => e.name.includes("/vendor/plotly"));
  return {nav: {responseStart: nav.responseStart, responseEnd: nav.responseEnd,
                dcl: nav.domContentLoadedEventEnd, load: nav.loadEventEnd},
          plotly: plotly && {name: plotly.name, start: plotly.startTime,
                             responseStart: plotly.responseStart, end: plotly.responseEnd,
                             transfer: plotly.transferSize, body: plotly.decodedBodySize},
          marks: window.__bench, now: performance.now()};
}"""

TRACE_CATEGORIES = [
    "devtools.timeline",
    "v8",
    "v8.execute",
    "disabled-by-default-v8.compile",
    "blink.user_timing",
]


def trace_totals(trace: bytes) -> dict[str, tuple[float, float]]:
    """Main-thread time (ms) of the renderer by kind: plotly.js's compile and its
    top-level run, each script's callbacks, style and layout, garbage collection."""
    import json

    events = json.loads(trace)
    events = events["traceEvents"] if isinstance(events, dict) else events
    main = {
        (e["pid"], e["tid"])
        for e in events
        if e.get("ph") == "M"
        and e.get("name") == "thread_name"
        and e["args"].get("name") == "CrRendererMain"
    }
    # The page's renderer: the one that ran our own scripts (not Chromium's own pages).
    ours = {
        e["pid"]
        for e in events
        if e.get("name") == "EvaluateScript"
        and "/static/" in ((e.get("args") or {}).get("data") or {}).get("url", "")
    }
    main = {(pid, tid) for pid, tid in main if pid in ours}
    totals: dict[str, tuple[float, float]] = {}
    event = {}

    def add(key: str, dur: float) -> None:
        # Wall time, and the thread's CPU time (tdur): the latter hardly depends on
        # what else the machine runs.
        wall, cpu = totals.get(key, (0.0, 0.0))
        totals[key] = (wall + dur / 1000, cpu + event.get("tdur", dur) / 1000)

    for e in events:
        if e.get("ph") != "X" or "dur" not in e:
            continue
        event = e
        name, data = e["name"], (e.get("args") or {}).get("data") or {}
        url = (data.get("url") or data.get("fileName") or "").rsplit("/", 1)[-1]
        on_main = (e["pid"], e["tid"]) in main
        if e["pid"] not in ours:
            continue
        if name in ("v8.compile", "v8.compileModule") and on_main:
            add(f"compile on main thread: {url or '?'}", e["dur"])
        elif name in ("v8.parseOnBackground", "v8.compileOnBackground") and not on_main:
            add(f"parse/compile off the main thread (streamed): {url or '?'}", e["dur"])
        elif not on_main:
            continue
        elif name == "EvaluateScript":
            add(f"evaluate script (compile + top-level run): {url or 'inline'}", e["dur"])
        elif name == "FunctionCall":
            add(f"callbacks of {url or '?'}", e["dur"])
        elif name in ("UpdateLayoutTree", "Layout"):
            add("style and layout", e["dur"])
        elif name in ("MajorGC", "MinorGC", "V8.GC_SCAVENGER", "BlinkGC.AtomicPhase"):
            add("garbage collection", e["dur"])
        elif name == "ParseHTML":
            add("parse HTML", e["dur"])
        elif name == "RunTask":
            add("all main-thread tasks", e["dur"])
    return totals


def breakdown(browser, viewport, cookie, url: str) -> None:
    """One first visit, traced: where the time to drawn charts goes."""
    context = browser.new_context(viewport=viewport)
    context.add_cookies([cookie])
    context.add_init_script(INSTRUMENT)
    page = context.new_page()
    browser.start_tracing(page=page, categories=TRACE_CATEGORIES)
    try:
        page.goto(url, wait_until="load")
        page.evaluate(TO_CHARTS)
        page.wait_for_selector("[data-plotly-figure][data-plotted]", timeout=60_000)
        for figure_id in page.evaluate(IN_VIEW):
            page.wait_for_selector(
                f'[data-figure-id="{figure_id}"][data-plotted]', state="attached", timeout=60_000
            )
        shown = page.evaluate("performance.now()")
        page.wait_for_timeout(300)  # lets the last newPlot promises settle
        timeline = page.evaluate(TIMELINE)
    finally:
        trace = browser.stop_tracing()
        context.close()
    if os.environ.get("BENCH_TRACE_FILE"):  # for chrome://tracing or Perfetto
        Path(os.environ["BENCH_TRACE_FILE"]).write_bytes(trace)
    nav, plotly, marks = timeline["nav"], timeline["plotly"], timeline["marks"]
    print("breakdown of one traced first visit (ms from navigation start):")
    print(
        f"  HTML received        {nav['responseEnd']:8.0f}  (first byte {nav['responseStart']:.0f})"
    )
    print(f"  DOMContentLoaded     {nav['dcl']:8.0f}")
    print(f"  load event           {nav['load']:8.0f}")
    if plotly:
        print(
            f"  plotly.js requested  {plotly['start']:8.0f}  {plotly['name'].rsplit('/', 1)[-1]}"
            f" ({plotly['body'] / 1e6:.2f} MB, {plotly['transfer'] / 1e6:.2f} MB on the wire)"
        )
        print(
            f"  plotly.js received   {plotly['end']:8.0f}"
            f"  (download {plotly['end'] - plotly['start']:.0f})"
        )
    if marks.get("plotlyRun"):
        print(
            f"  plotly.js has run    {marks['plotlyRun']:8.0f}  (compile + run after download "
            f"{marks['plotlyRun'] - (plotly or {}).get('end', 0):.0f})"
        )
    for draw in marks["draws"]:
        done = draw.get("done")
        print(
            f"  newPlot {draw['id']:<28} {draw['start']:8.0f}  sync {draw['sync']:5.0f}"
            + (f", resolved {done:.0f}" if done else "")
        )
    print(f"  charts drawn (bench) {shown:8.0f}")
    tasks = sorted(marks["longtasks"], key=lambda item: -item[1])[:8]
    print("  longest tasks: " + ", ".join(f"{d:.0f} at {s:.0f}" for s, d in tasks))
    print("  renderer totals (trace): wall ms, CPU ms")
    for key, (wall, cpu) in sorted(trace_totals(trace).items(), key=lambda item: -item[1][0]):
        if wall >= 5:
            print(f"    {wall:7.0f} {cpu:7.0f}  {key}")


def summary(label: str, timings: list[tuple[float, float, float]]) -> str:
    def part(name: str, values: list[float]) -> str:
        return f"{name} median {statistics.median(values):.2f} s, worst {max(values):.2f} s"

    names = ("content", "charts", "scroll to drawn")
    return (
        f"{label:<15} "
        + " | ".join(part(name, [t[i] for t in timings]) for i, name in enumerate(names))
        + f"  ({len(timings)} visits)"
    )


def main() -> None:
    from playwright.sync_api import sync_playwright

    args = parse_args()
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="bench-dashboard-") as tmp:
        var_dir = Path(tmp)
        env = server_env(args, var_dir, port)
        manage(env, "collectstatic", "--noinput", "-v", "0")
        key, month, months, comparison = subprocess.run(
            [sys.executable, "-c", SESSION_CODE],
            cwd=ROOT,
            env={**env, "DJANGO_SETTINGS_MODULE": "config.settings", "BENCH_PAGE": args.page},
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
        server = start_gunicorn(env, port, var_dir / "gunicorn.log")
        url = f"http://127.0.0.1:{port}/dashboard/?month={month}"
        if args.page == "whatif":
            url = f"http://127.0.0.1:{port}/what-if/{comparison}/"
        viewport = {"width": args.width, "height": args.height}
        cookie = {"name": "sessionid", "value": key, "url": f"http://127.0.0.1:{port}/"}
        try:
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(
                    executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS
                )
                first = []
                for _ in range(args.visits):
                    context = browser.new_context(viewport=viewport)
                    context.add_cookies([cookie])
                    first.append(visit(context, url))
                    context.close()
                context = browser.new_context(viewport=viewport)
                context.add_cookies([cookie])
                visit(context, url)  # fills the cache
                returning = [visit(context, url) for _ in range(args.visits)]
                context.close()
                if args.breakdown:
                    breakdown(browser, viewport, cookie, url)
                browser.close()
        finally:
            os.killpg(server.pid, signal.SIGTERM)
            server.wait(timeout=40)
    load = os.getloadavg()
    shown = f"what-if {comparison}" if args.page == "whatif" else f"dashboard {month}"
    print(
        f"{shown} ({months} months of rollups), served by gunicorn (DEBUG off), "
        f"window {args.width} x {args.height}"
    )
    print(summary("first visit", first))
    print(summary("returning visit", returning))
    print(f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {os.cpu_count()} CPUs")
    print("target: first load (content and charts) under 1.5 s")


if __name__ == "__main__":
    main()
