"""Celery conventions: every periodic task in one beat schedule (config/celery.py), one
retry policy (core/celery.py), and no other module declaring either."""

from __future__ import annotations

import ast
from pathlib import Path
from types import SimpleNamespace

from celery.schedules import crontab
from django.db import OperationalError

import demo.tasks
import governance.dashboards.tasks
import governance.exceptions.tasks
import scheduler.tasks
from config.celery import beat_schedule
from core.celery import app, retry_policy
from governance.policy.services import VersionConflict

ROOT = Path(__file__).resolve().parents[2]
SOURCES = ("accounts", "core", "demo", "fleet", "governance", "scheduler")
DECLARING = {ROOT / "config" / "celery.py", ROOT / "core" / "celery.py"}


def _settings(**changes):
    values = {
        "SCHEDULER_TICK_SECONDS": 2,
        "JOB_SWEEP_SECONDS": 15,
        "EXECUTOR_RECONCILE_SECONDS": 1,
        "DIRECTORY_SYNC_MINUTES": 15,
        "EXCEPTIONS_SWEEP_SECONDS": 60.0,
        "DEMO_TRAFFIC": False,
    }
    return SimpleNamespace(**{**values, **changes})


def test_every_periodic_task_names_a_registered_task_and_coalesces_within_its_period():
    app.loader.import_default_modules()
    for name, entry in beat_schedule(_settings(DEMO_TRAFFIC=True)).items():
        assert entry["task"] in app.tasks, name
        period = entry["schedule"]
        # No `expires`: an absolute time on beat's clock, compared on the worker's.
        assert "expires" not in entry.get("options", {}), name
        if not isinstance(period, crontab):
            assert entry["options"]["headers"] == {"periodic_seconds": period}, name


def test_the_settings_set_the_scheduler_periods_and_the_demo_traffic():
    quiet = beat_schedule(
        _settings(
            SCHEDULER_TICK_SECONDS=5,
            JOB_SWEEP_SECONDS=30,
            EXECUTOR_RECONCILE_SECONDS=3,
            DIRECTORY_SYNC_MINUTES=5,
            EXCEPTIONS_SWEEP_SECONDS=120,
        )
    )
    assert quiet["directory-sync"]["schedule"] == 300.0
    assert quiet["exceptions-sweep"]["schedule"] == 120.0
    assert quiet["scheduler-tick"]["schedule"] == 5.0
    assert quiet["scheduler-sweep"]["schedule"] == 30.0
    assert quiet["executor-reconcile"]["schedule"] == 3.0
    assert "demo-traffic" not in quiet
    assert beat_schedule(_settings(DEMO_TRAFFIC=True))["demo-traffic"]["task"] == (
        "scheduler.demo_traffic"
    )


def test_the_app_carries_the_declared_schedule(settings):
    assert app.conf.beat_schedule.keys() == beat_schedule(settings).keys()


def test_retrying_tasks_use_the_one_policy():
    fast, patient = retry_policy(), retry_policy(patient=True)
    tasks = {
        scheduler.tasks.run_pass: fast,
        scheduler.tasks.estimate_queue: fast,
        scheduler.tasks.sweep: fast,
        governance.exceptions.tasks.activate_exception: retry_policy(VersionConflict),
        governance.exceptions.tasks.expire_exception: retry_policy(VersionConflict),
        governance.exceptions.tasks.sweep_exceptions: retry_policy(VersionConflict),
        governance.dashboards.tasks.refresh_rollups: patient,
        governance.dashboards.tasks.monthly_pack: patient,
    }
    for task, policy in tasks.items():
        for option, value in policy.items():
            assert getattr(task, option) == value, (task.name, option)
        assert OperationalError in task.autoretry_for
    assert VersionConflict in governance.exceptions.tasks.activate_exception.autoretry_for
    assert demo.tasks.demo_traffic.name == "scheduler.demo_traffic"


def test_no_other_module_declares_periodic_tasks_or_retry_options():
    declared = {"beat_schedule", "add_periodic_task", "autoretry_for", "retry_backoff"}
    offenders = []
    for package in SOURCES:
        for path in (ROOT / package).rglob("*.py"):
            if path in DECLARING or "migrations" in path.parts:
                continue
            tree = ast.parse(path.read_text(), filename=str(path))
            for node in ast.walk(tree):
                name = getattr(node, "attr", None) or getattr(node, "arg", None)
                if isinstance(node, ast.Constant) and isinstance(node.value, str):
                    name = node.value
                if name in declared:
                    offenders.append(f"{path.relative_to(ROOT)}:{node.lineno} {name}")
    assert offenders == []
