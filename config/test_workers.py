"""Each pytest-xdist worker (PYTEST_XDIST_WORKER: gw0, gw1, ...) gets a Redis database
and a var/ folder of its own: the workers run side by side on one machine, and one's
Celery queues, throttle counters and liveness marks must never reach another's tests.

The settings call `own_services` first, before they read the environment: pytest-django
reads the settings before any conftest runs. The values are written back into the
environment, with TEST_WORKER_SERVICES set, so the processes a test starts inherit them
as they are (a test that gives a process another REDIS_URL or VAR_DIR keeps it). Outside
pytest-xdist it does nothing.
"""

from __future__ import annotations

from collections.abc import MutableMapping
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit


def own_services(environ: MutableMapping[str, str], base_dir: Path) -> None:
    worker = environ.get("PYTEST_XDIST_WORKER", "")
    if not worker or environ.get("TEST_WORKER_SERVICES"):
        return
    number = int(worker.removeprefix("gw"))
    url = environ.get("REDIS_URL", "").strip()
    if url:
        parts = urlsplit(url)
        database = int(parts.path.strip("/") or 0)
        environ["REDIS_URL"] = urlunsplit(parts._replace(path=f"/{database + 1 + number}"))
    if not environ.get("VAR_DIR", "").strip():
        environ["VAR_DIR"] = str(base_dir / "var" / worker)
    environ["TEST_WORKER_SERVICES"] = worker
