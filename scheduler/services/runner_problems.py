"""What a runner found at start it cannot do for its jobs, on its Runner row (the
check itself is `scheduler.executors.process.sandbox_check`; `/healthz/` reads it)."""

from __future__ import annotations

from scheduler.models import Runner


def runner_problems_record(*, name: str, pid: int, problems: list[str]) -> None:
    """Replace the runner's problems (an empty list: it can run everything it serves)."""
    Runner.objects.filter(name=name, pid=pid).update(problems=list(problems))
