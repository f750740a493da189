"""Who may see and change which jobs, as core.rules (the one table) says, under
the names the job pages and the jobs API use: admins manage every job; a team lead
submits into the shares of the teams they lead and manages those teams' jobs. Team
leads and admins see every job (a queue is shared: who holds what, and why, is the
point).
"""

from __future__ import annotations

from django.db.models import QuerySet
from django.http import Http404

from core import rules
from fleet.models import Job, QuotaShare, Team


def can_view_jobs(user) -> bool:
    return rules.allowed(user, "job.view")


def can_submit_jobs(user) -> bool:
    return rules.allowed(user, "job.submit")


def submittable_shares(user) -> QuerySet[QuotaShare]:
    shares = QuotaShare.objects.select_related("queue", "team").order_by(
        "queue__name", "position", "pk"
    )
    return rules.visible(user, "job.submit", shares)


def can_submit_to_share(user, share: QuotaShare) -> bool:
    return rules.allowed(user, "job.submit", share)


def can_manage_job(user, job: Job) -> bool:
    """Change priority, terminate, decide on a failed job."""
    return rules.allowed(user, "job.manage", job)


def can_read_job_logs(user, job: Job) -> bool:
    """Read the job's output (its page's tail and the download)."""
    return rules.allowed(user, "job.logs.view", job)


def decision_team_ids(user) -> QuerySet[Team]:
    """The ids of the teams whose failed jobs `user` decides on (the job.manage rule: an
    admin every team, a lead the teams they lead), as a subquery: filtering by it costs
    no query of its own."""
    return rules.visible(user, "job.manage", Team.objects.all()).values("pk")


def get_job_for_user(user, queryset: QuerySet[Job], pk: int, *, manage: bool = False) -> Job:
    """The job if the user may see it (404 otherwise) and, with `manage`, change it (403).
    From a `values()` queryset, the job's row (not with `manage`, whose rule reads the
    job)."""
    rules.require(user, "job.view")
    try:
        job = queryset.get(pk=pk)
    except Job.DoesNotExist:
        raise Http404("No such job") from None
    if manage:
        rules.require(user, "job.manage", job)
    return job
