"""Who may see and change which jobs. Job object rules live here, on top of the roles
of governance.permissions: admins manage every job; a team lead submits into the
shares of the teams they lead and manages those teams' jobs. Team leads and admins
see every job (a queue is shared: who holds what, and why, is the point).
"""

from __future__ import annotations

from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import Http404

from governance.models import QuotaShare, Team
from governance.permissions import ADMINS, TEAM_LEADS, has_role, is_admin
from scheduler.models import Job


def can_view_jobs(user) -> bool:
    return has_role(user, ADMINS, TEAM_LEADS)


def can_submit_jobs(user) -> bool:
    return is_admin(user) or bool(led_team_ids(user))


def led_team_ids(user) -> frozenset[int]:
    """The teams the user leads (as a team lead), cached on the user for the request."""
    if not has_role(user, TEAM_LEADS):
        return frozenset()
    cached = getattr(user, "_scheduler_led_teams", None)
    if cached is None:
        cached = frozenset(Team.objects.filter(leads=user).values_list("pk", flat=True))
        user._scheduler_led_teams = cached
    return cached


def submittable_shares(user) -> QuerySet[QuotaShare]:
    shares = QuotaShare.objects.select_related("queue", "team").order_by(
        "queue__name", "position", "pk"
    )
    if is_admin(user):
        return shares
    return shares.filter(team_id__in=led_team_ids(user))


def can_submit_to_share(user, share: QuotaShare) -> bool:
    return is_admin(user) or share.team_id in led_team_ids(user)


def can_manage_job(user, job: Job) -> bool:
    """Change priority, terminate, decide on a failed job."""
    return is_admin(user) or job.share.team_id in led_team_ids(user)


def get_job_for_user(user, queryset: QuerySet[Job], pk: int, *, manage: bool = False) -> Job:
    """The job if the user may see it (404 otherwise) and, with `manage`, change it (403)."""
    if not can_view_jobs(user):
        raise PermissionDenied
    try:
        job = queryset.get(pk=pk)
    except Job.DoesNotExist:
        raise Http404("No such job") from None
    if manage and not can_manage_job(user, job):
        raise PermissionDenied
    return job
