"""Each pytest-xdist worker (PYTEST_XDIST_WORKER: gw0, gw1, ...) gets a Redis database
and a var/ folder of its own, set before Django reads its settings: the workers run side
by side on one machine, and one's Celery queues, throttle counters and liveness marks
must never reach another's tests. The processes a test starts inherit both. Loaded
before anything else (pyproject's addopts: -p tests.xdist_env); without xdist it does
nothing.
"""

import os
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit


def own_services(worker: str) -> None:
    number = int(worker.removeprefix("gw"))
    url = os.environ.get("REDIS_URL", "")
    if url:
        parts = urlsplit(url)
        base = int(parts.path.strip("/") or 0)
        os.environ["REDIS_URL"] = urlunsplit(parts._replace(path=f"/{base + 1 + number}"))
    if not os.environ.get("VAR_DIR"):
        os.environ["VAR_DIR"] = str(Path(__file__).resolve().parent.parent / "var" / worker)


if os.environ.get("PYTEST_XDIST_WORKER"):
    own_services(os.environ["PYTEST_XDIST_WORKER"])
