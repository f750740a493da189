"""Each pytest-xdist worker's own Redis database and var/ folder (config/test_workers.py),
so that workers running side by side never share queues, counters or files."""

from pathlib import Path

from config.test_workers import own_services

BASE = Path("/srv/product")


def test_each_worker_gets_a_redis_database_and_a_var_folder_of_its_own():
    first = {"PYTEST_XDIST_WORKER": "gw0", "REDIS_URL": "redis://127.0.0.1:6379/0"}
    second = {"PYTEST_XDIST_WORKER": "gw1", "REDIS_URL": "redis://127.0.0.1:6379/0"}
    own_services(first, BASE)
    own_services(second, BASE)
    assert first["REDIS_URL"] == "redis://127.0.0.1:6379/1"
    assert second["REDIS_URL"] == "redis://127.0.0.1:6379/2"
    assert first["VAR_DIR"] == str(BASE / "var" / "gw0") != second["VAR_DIR"]


def test_a_process_started_by_a_test_keeps_what_it_was_given():
    environ = {"PYTEST_XDIST_WORKER": "gw1", "REDIS_URL": "redis://h:1/3", "VAR_DIR": "/tmp/x"}
    own_services(environ, BASE)
    assert (environ["REDIS_URL"], environ["VAR_DIR"]) == ("redis://h:1/5", "/tmp/x")
    # Its child inherits the result and the mark: nothing moves again.
    child = dict(environ, REDIS_URL="redis://other:2/0")
    own_services(child, BASE)
    assert child["REDIS_URL"] == "redis://other:2/0"


def test_without_xdist_nothing_changes():
    environ = {"REDIS_URL": "redis://127.0.0.1:6379/0"}
    own_services(environ, BASE)
    assert environ == {"REDIS_URL": "redis://127.0.0.1:6379/0"}
