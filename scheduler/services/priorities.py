"""Who may give a job which priority: a share's ceiling, and what lifts it.

A team lead sets priorities up to their share's `priority_ceiling` (admins set it per
share). Above it, a job needs either an active priority-raise exception naming it (an
owner decided it; the job gets at most the priority its urgency grants), or an urgency
definition that names the job's team among those who may invoke it, up to the priority
that urgency grants. An urgency that names no team may be invoked by every team only
through an exception request: otherwise the owner's decision would be pointless.
"""

from __future__ import annotations

from collections.abc import Callable

from fleet.models import QuotaShare, UrgencyDefinition

# What lifts a job's ceiling besides its urgency: each grant takes a saved job and gives
# the highest priority it allows the job (None: none). Governance's exceptions register
# theirs (governance.exceptions.scopes), so the scheduler asks without importing them.
PRIORITY_GRANTS: list[Callable[[object], int | None]] = []


def register_priority_grant(grant: Callable[[object], int | None]) -> None:
    if grant not in PRIORITY_GRANTS:
        PRIORITY_GRANTS.append(grant)


def job_priority_refusal(
    *,
    share: QuotaShare,
    priority: int | None,
    urgency: UrgencyDefinition | None = None,
    job=None,
) -> str | None:
    """None when a job of `share` (a new one, or `job`) may have `priority`; otherwise
    the sentence why not (the job forms, the API and the services all show it)."""
    if priority is None or priority <= share.priority_ceiling:
        return None
    if (
        urgency is not None
        and priority <= urgency.priority
        and urgency.invokers.filter(pk=share.team_id).exists()
    ):
        return None
    if job is not None and job.pk is not None:
        for grant in PRIORITY_GRANTS:
            granted = grant(job)
            if granted is not None and priority <= granted:
                return None
    return (
        f"priority {priority} is above the ceiling of share {share.name} ({share.priority_ceiling})"
        ": file a priority-raise exception request for the job, or use an urgency definition "
        f"that names team {share.team.name}"
    )
