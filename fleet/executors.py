"""The names of the executors a queue may be bound to (JobQueue.executor).

The scheduler's executors (scheduler.executors, the registry of what each can do)
register their names here when they are defined; the column's choices are read from
here at run time, so adding an executor needs neither a migration nor an edit of the
fleet's models.
"""

from __future__ import annotations

# A new queue's executor: no process runs, the work follows the model.
DEFAULT_EXECUTOR = "simulated"

_LABELS: dict[str, str] = {}


def register_executor_name(name: str, label: str) -> None:
    _LABELS[name] = label


def executor_choices() -> list[tuple[str, str]]:
    """(name, label) of every registered executor, in registration order."""
    return list(_LABELS.items())
