"""The what-if run as one Celery task, `governance.whatif.run` (every process
registers it: GovernanceConfig.ready; comparison_run enqueues it by that name).

Thin and idempotent: it takes the comparison's id and claims the run with a
conditional UPDATE (QUEUED -> RUNNING), so a second delivery does nothing. A replay
is deterministic, but not free, so it is not retried: a failure is written on the row.
"""

from __future__ import annotations

from celery import shared_task

from governance.whatif.services import comparison_execute


@shared_task(name="governance.whatif.run", acks_late=True)
def run_comparison(comparison_id: int) -> str:
    return comparison_execute(comparison_id=comparison_id)
