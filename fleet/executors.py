"""The names of the executors a queue may be bound to (JobQueue.executor), and the
causes they report that need a person's decision.

The scheduler's executors (scheduler.executors, the registry of what each can do)
register here when the scheduler app is ready; the column's choices are read from
here at run time, so adding an executor needs neither a migration nor an edit of the
fleet's models.
"""

from __future__ import annotations

from collections.abc import Iterable

# A new queue's executor: no process runs, the work follows the model.
DEFAULT_EXECUTOR = "simulated"

_LABELS: dict[str, str] = {}
_DECISION_CAUSES: dict[str, tuple[str, ...]] = {}


def register_executor_name(name: str, label: str, decision_causes: Iterable[str] = ()) -> None:
    _LABELS[name] = label
    _DECISION_CAUSES[name] = tuple(decision_causes)


def executor_choices() -> list[tuple[str, str]]:
    """(name, label) of every registered executor, in registration order."""
    return list(_LABELS.items())


def executor_decision_causes() -> tuple[str, ...]:
    """The causes registered executors report that need a person's decision."""
    return tuple(dict.fromkeys(code for codes in _DECISION_CAUSES.values() for code in codes))
