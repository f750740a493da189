"""An executor lives in its package: its name and its tools' names appear nowhere else
in the product, so adding or removing one is its package and one registration.

Allowed besides the package: migrations (history), the demo, the tests, and the
policy-code translators (governance/policy_code: a file format names the executor it
binds). `EXCEPTIONS` lists the files that still name one today, each with why; it may
only shrink: a file listed that no longer names the executor fails the test too, so the
list is kept exact."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
PRODUCT = ("accounts", "config", "core", "demo", "engine", "fleet", "governance", "scheduler")
ALLOWED = ("demo", "governance/policy_code")

# The executors' packages (an import of one names it), and the words that name one: its
# own name and its tools' (case-insensitive). The simulated executor's clock is the
# product's default and a concept of its own ("simulated clock"): only its package is
# checked.
PACKAGES = ("simulated", "process", "slurm")
WORDS = {
    "slurm": re.compile(r"slurm|sbatch|squeue|scancel|scontrol|\bsinfo\b", re.IGNORECASE),
    "process": re.compile(r"process executor", re.IGNORECASE),
}

EXCEPTIONS = {
    "slurm": {
        # The registration of the product's executors.
        "scheduler/apps.py": "the registration",
        # Kept for one release: the old task names and their routes, for queued messages.
        "scheduler/tasks.py": "the old task names",
        "config/celery.py": "the old task names' routes",
        # Settings are read from the environment in one place.
        "config/settings.py": "the executor's settings (SLURM_*)",
        # Django finds management commands only in an app's management/commands.
        "scheduler/management/commands/bench_slurm.py": "a command of the executor",
        "scheduler/management/commands/slurm_bind.py": "a command of the executor",
        # Wording of what the executor sees of its nodes, on queue and job pages.
        "fleet/selectors.py": "the nodes' wording",
        "scheduler/selectors.py": "the nodes' wording",
    },
    "process": {"scheduler/tasks.py": "its run task, routed to the runners' queues"},
}
# Where an executor's package may be imported from: the registration, the process
# executor's run task (routed to the runners' queues) and the executor's commands.
IMPORTERS = {
    "scheduler/apps.py",
    "scheduler/tasks.py",
    "scheduler/management/commands/bench_slurm.py",
    "scheduler/management/commands/slurm_bind.py",
}


def _product_files():
    for package in PRODUCT:
        for path in sorted((ROOT / package).rglob("*.py")):
            relative = path.relative_to(ROOT).as_posix()
            if "migrations" in path.parts or relative.startswith(ALLOWED):
                continue
            yield relative, path


def _named(executor: str) -> set[str]:
    package = f"scheduler/executors/{executor}/"
    return {
        relative
        for relative, path in _product_files()
        if not relative.startswith(package) and WORDS[executor].search(path.read_text())
    }


def test_each_executor_is_named_only_in_its_package_and_the_listed_exceptions():
    for executor in WORDS:
        assert _named(executor) == set(EXCEPTIONS[executor]), executor


def _imported_packages(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        modules = []
        if isinstance(node, ast.ImportFrom) and node.module:
            modules = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        for module in modules:
            parts = module.split(".")
            if parts[:2] == ["scheduler", "executors"] and len(parts) > 2 and parts[2] in PACKAGES:
                found.add(parts[2])
    return found


def test_no_executor_package_is_imported_outside_the_registration_and_the_executors():
    importers = {
        relative: packages
        for relative, path in _product_files()
        if not relative.startswith("scheduler/executors/")
        and (packages := _imported_packages(path))
    }
    assert set(importers) <= IMPORTERS, importers
    # Each package imports no other executor's.
    for executor in PACKAGES:
        for path in (ROOT / "scheduler/executors" / executor).rglob("*.py"):
            assert _imported_packages(path) <= {executor}, path
