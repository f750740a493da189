"""The executors' registry: what each executor can do is declared once, and the rest of
the product asks that, never an executor's name."""

import ast
from pathlib import Path

import pytest
from django.core.exceptions import ValidationError

from fleet.executors import executor_choices
from fleet.models import JobQueue
from scheduler import executors
from scheduler.executors import Capabilities, executor_named, executor_names
from scheduler.executors.base import BaseExecutor, Executor

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("accounts", "config", "core", "demo", "engine", "fleet", "governance", "scheduler")


def test_the_queues_choices_are_the_registry():
    assert [name for name, _label in executor_choices()] == executor_names()
    assert set(executor_names()) >= {"simulated", "process", "slurm"}


def test_capabilities_select_executors():
    assert executor_names(runs_programs=True) == ["process", "slurm"]
    assert executor_names(modelled_clock=True) == ["simulated"]
    assert executor_names(needs_runner=True, reconciles=True) == ["process"]
    # Only the end Slurm reports frees capacity.
    assert executor_names(confirms_stops=True) == ["slurm"]
    assert executor_named("simulated").capabilities.stops_with_notice is False
    with pytest.raises(TypeError, match="no such capability: flies"):
        executor_names(flies=True)


class _Elsewhere(BaseExecutor):
    name = "elsewhere"
    label = "Elsewhere (a test's executor)"
    capabilities = Capabilities(runs_programs=True, stops_with_notice=True, reconciles=True)


@pytest.fixture
def elsewhere():
    executor = executors.register(_Elsewhere())
    yield executor
    executors._EXECUTORS.pop(executor.name)
    from fleet import executors as names

    names._LABELS.pop(executor.name)
    names._DECISION_CAUSES.pop(executor.name)


@pytest.mark.django_db
def test_a_new_executor_is_a_registration_away(elsewhere):
    """No migration, no edit of the models: the column accepts the new name at once, and
    queries by capability find it."""
    assert isinstance(elsewhere, Executor)  # the protocol's every member
    queue = JobQueue(name="elsewhere-queue", executor="elsewhere")
    queue.full_clean()
    assert "elsewhere" in executor_names(runs_programs=True)
    assert "elsewhere" not in executor_names(needs_runner=True)
    with pytest.raises(ValidationError, match="executor"):
        JobQueue(name="nowhere-queue", executor="nowhere").full_clean()


def _compares_an_executor_name(node: ast.Compare) -> bool:
    """`x.executor == ...`, `... != x.executor`, `x.executor in (...)`, `.name == "process"`."""
    if not all(isinstance(op, (ast.Eq, ast.NotEq, ast.In, ast.NotIn)) for op in node.ops):
        return False
    operands = [node.left, *node.comparators]
    for operand in operands:
        if isinstance(operand, ast.Attribute) and operand.attr == "executor":
            return True
    names = {"simulated", "process", "slurm"}
    return any(isinstance(o, ast.Constant) and o.value in names for o in operands) and any(
        isinstance(o, ast.Attribute) and o.attr in {"name", "executor"} for o in operands
    )


def test_every_executor_keeps_the_protocol_and_reconciles_when_asked():
    """The reconciliation tick asks every executor; only those that reconcile on it (not
    through runners' leases or a model) answer with a report."""
    assert all(isinstance(executor, Executor) for executor in executors.registered())
    assert executor_named("simulated").reconcile(now=None) is None
    assert executor_named("process").reconcile(now=None) is None


def test_no_executor_name_is_compared_outside_the_executors():
    found = []
    for package in PRODUCT:
        for path in (ROOT / package).rglob("*.py"):
            # The registry, and each executor's package, which knows its own name.
            if "migrations" in path.parts or path.is_relative_to(ROOT / "scheduler/executors"):
                continue
            tree = ast.parse(path.read_text(), filename=str(path))
            for node in ast.walk(tree):
                if isinstance(node, ast.Compare) and _compares_an_executor_name(node):
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
                if isinstance(node, ast.keyword) and node.arg == "queue__executor":
                    found.append(f"{path.relative_to(ROOT)}:{node.value.lineno} (a query)")
    assert found == []
