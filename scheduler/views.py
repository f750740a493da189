"""The job pages: list, submission, a job's page with its actions, the live queue view,
the "needs a decision" list, and the job definition pages (list, detail with history;
register, revise and retire for admins).

Views are thin: access goes through scheduler.permissions, reads through
scheduler.selectors, writes through the forms and scheduler.services. One URL serves
a page or, for htmx, its fragment.
"""

from __future__ import annotations

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.http import Http404, HttpResponseBadRequest, StreamingHttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.http import content_disposition_header
from django.views.decorators.http import require_POST

from core import rules
from core.filters import page_query
from core.form_errors import apply_errors
from fleet.models import Job, JobDefinition, JobQueue
from scheduler import logs, permissions, selectors
from scheduler.filters import JobPageFilter
from scheduler.forms import (
    DecisionForm,
    DefinitionForm,
    JobForm,
    ParameterForm,
    ParameterFormSet,
    PriorityForm,
    RetireForm,
    apply_definition_errors,
)
from scheduler.models import JobDecision
from scheduler.services import job_definitions as definition_services
from scheduler.services.estimates.reads import (
    job_estimate,
    job_positions,
    queue_estimates,
    submission_estimate,
    too_big_warning,
)
from scheduler.services.jobs import JobError, job_decide, job_set_priority, job_submit
from scheduler.services.jobs import job_terminate as terminate_job

JOBS_PER_PAGE = 25
# Waiting jobs the live view lists, in dispatch order (the API pages through all).
LIVE_WAITING = 20


def _require(allowed: bool) -> None:
    if not allowed:
        raise PermissionDenied


def job_list(request):
    _require(permissions.can_view_jobs(request.user))
    filters = JobPageFilter(request.GET or None)
    jobs = selectors.job_list(filters=page_query(filters), user=request.user)
    page = Paginator(jobs, JOBS_PER_PAGE).get_page(request.GET.get("page"))
    # Where each waiting job of the page stands in its share's queue.
    places = job_positions(list(page.object_list))
    for job in page.object_list:
        job.place = places.get(job.pk)
        job.shown_state = selectors.job_shown_state(job)
    context = {
        "filter_form": filters.form,
        "page_obj": page,
        "can_submit": permissions.can_submit_jobs(request.user),
        "decision_count": _decision_count(request.user),
        "queues": JobQueue.objects.order_by("name"),
    }
    if request.htmx and request.htmx.target == "job-list":
        return render(request, "scheduler/_job_list.html", context)
    return render(request, "scheduler/list.html", context)


def _decision_count(user) -> int:
    return selectors.needs_decision_list(team_ids=permissions.decision_team_ids(user)).count()


def job_create(request):
    """The submit form. Its "Estimate the start" button asks "if you submit this now"
    (nothing is stored); submitting a job bigger than its whole queue asks first."""
    _require(permissions.can_submit_jobs(request.user))
    form = JobForm(request.POST or None, user=request.user, initial=_initial(request))
    estimate = None
    asking = request.method == "POST" and request.POST.get("action") == "estimate"
    if request.method == "POST" and form.is_valid():
        data = form.data_for_service()
        try:
            if asking:
                _require(rules.allowed(request.user, "job.estimate", data.share))
                estimate = submission_estimate(data=data)
            else:
                warning = too_big_warning(data=data)
                if warning and not form.cleaned_data.get("confirm_too_big"):
                    form.ask_to_confirm(warning)
                else:
                    job = job_submit(data=data, submitted_by=request.user)
                    if warning:
                        messages.warning(
                            request,
                            f"Job {job.name} submitted. It can never start as it is: it is "
                            "listed under the jobs that need a decision.",
                        )
                    else:
                        messages.success(request, f"Job {job.name} submitted.")
                    return redirect("job-detail", pk=job.pk)
        except JobError as error:
            apply_errors(form, error, labelled=True)
    if request.htmx and request.htmx.target == "definition-parameters":
        return render(request, "scheduler/_parameters.html", {"form": form})
    if asking and request.htmx and request.htmx.target == "job-estimate":
        return render(request, "scheduler/_estimate.html", {"form": form, "estimate": estimate})
    return render(request, "scheduler/submit.html", {"form": form, "estimate": estimate})


def _initial(request) -> dict:
    """A GET carries the form's choices so far (choosing a definition without
    JavaScript reloads the form with its parameters)."""
    return {key: value for key, value in request.GET.items() if value}


def job_detail(request, pk: int):
    job = permissions.get_job_for_user(request.user, selectors.job_detail_queryset(), pk)
    can_manage = permissions.can_manage_job(request.user, job)
    decision = JobDecision.objects.filter(job=job).select_related("decided_by", "new_job").first()
    needs_decision = selectors.job_needs_decision(job=job, decision=decision)
    too_big = selectors.is_too_big(job)
    log, log_error = _job_log(request, job)
    if request.htmx and request.htmx.target == "job-log":
        if log is None:
            raise PermissionDenied
        return render(request, "scheduler/_job_log.html", {"job": job, "log": log})
    progress = selectors.job_progress(job)
    return render(
        request,
        "scheduler/detail.html",
        {
            "log": log,
            "log_error": log_error,
            "job": job,
            "reason": selectors.current_reason(job),
            "shown_state": selectors.job_shown_state(job),
            "progress": progress,
            "last_checkpoint": selectors.job_last_checkpoint(job, progress),
            "clock": selectors.queue_clock(job.queue),
            "too_big": too_big,
            "wait": job_estimate(job) if not too_big else None,
            "waiting": selectors.job_waiting(job),
            "timeline": selectors.job_timeline(job),
            "contract": selectors.job_contract(job),
            "can_manage": can_manage,
            "priority_form": PriorityForm(initial={"priority": job.priority}),
            "decision": decision,
            "needs_decision": needs_decision,
            "decision_form": DecisionForm(user=request.user, job=job) if needs_decision else None,
            "exception_create_url": reverse("exception-create"),
        },
    )


def _job_log(request, job) -> tuple[logs.LogTail | None, str]:
    """The tail of the output of the attempt asked for (the current one by default),
    for who may read it; and what was wrong with the attempt asked for."""
    if not logs.log_attempts(job) or not permissions.can_read_job_logs(request.user, job):
        return None, ""
    error = ""
    try:
        attempt = logs.attempt_of(job, request.GET.get("attempt"))
    except ValueError as refused:
        attempt, error = job.attempt, str(refused)
    return logs.job_log_tail(job, attempt), error


def job_log_download(request, pk: int, attempt: int):
    """The whole output of one attempt, streamed from the file as it is now."""
    job = permissions.get_job_for_user(request.user, Job.objects.select_related("share"), pk)
    _require(permissions.can_read_job_logs(request.user, job))
    try:
        attempt = logs.attempt_of(job, attempt)
        fd, info = logs.open_log(job, attempt)
    except ValueError as error:
        return HttpResponseBadRequest(str(error), content_type="text/plain; charset=utf-8")
    except logs.LogUnavailable as error:
        raise Http404(str(error)) from None
    # What the file holds now: a running job's later lines are not sent (the length
    # said is the length sent).
    response = StreamingHttpResponse(
        logs.read_blocks(fd, info.st_size), content_type="text/plain; charset=utf-8"
    )
    response["Content-Disposition"] = content_disposition_header(
        True, logs.log_filename(job, attempt)
    )
    response["Content-Length"] = str(info.st_size)
    response["Cache-Control"] = "private, no-store"
    return response


@require_POST
def job_priority(request, pk: int):
    job = permissions.get_job_for_user(
        request.user, Job.objects.select_related("share"), pk, manage=True
    )
    form = PriorityForm(request.POST)
    if form.is_valid():
        try:
            job_set_priority(
                job_id=job.pk, priority=form.cleaned_data["priority"], actor=request.user
            )
        except JobError as error:
            messages.error(request, error.sentence())
        else:
            messages.success(
                request, f"Priority of {job.name} is now {form.cleaned_data['priority']}."
            )
    else:
        messages.error(request, "Priority: enter a whole number from 0 to 9999.")
    return redirect("job-detail", pk=job.pk)


@require_POST
def job_terminate(request, pk: int):
    job = permissions.get_job_for_user(
        request.user, Job.objects.select_related("share"), pk, manage=True
    )
    try:
        terminate_job(job_id=job.pk, actor=request.user)
    except JobError as error:
        messages.error(request, error.sentence())
    else:
        messages.success(request, f"Job {job.name} terminated.")
    return redirect("job-detail", pk=job.pk)


@require_POST
def job_decision(request, pk: int):
    job = permissions.get_job_for_user(
        request.user, Job.objects.select_related("share"), pk, manage=True
    )
    form = DecisionForm(request.POST, user=request.user, job=job)
    if not form.is_valid():
        messages.error(request, "Choose a decision.")
        return redirect("job-detail", pk=job.pk)
    kind = form.cleaned_data["kind"]
    changes = form.resubmit_changes() if kind == JobDecision.Kind.RESUBMITTED else {}
    if "share" in changes:
        _require(permissions.can_submit_to_share(request.user, changes["share"]))
    try:
        decision = job_decide(
            job_id=job.pk,
            kind=kind,
            actor=request.user,
            note=form.cleaned_data["note"],
            resubmit=changes,
        )
    except JobError as error:
        messages.error(request, error.sentence())
        return redirect("job-detail", pk=job.pk)
    if decision.kind == JobDecision.Kind.EXCEPTION_FILED:
        # A job that keeps being preempted asks for protection from preemption.
        url = reverse("exception-create")
        return redirect(f"{url}?kind=PREEMPTION_PROTECTION&jobs={job.pk}")
    if decision.new_job is not None:
        messages.success(request, "Resubmitted as a new job.")
        return redirect("job-detail", pk=decision.new_job.pk)
    messages.success(request, f"Decision recorded: {decision.get_kind_display()}.")
    return redirect("job-detail", pk=job.pk)


def job_decisions(request):
    _require(permissions.can_view_jobs(request.user))
    jobs = selectors.needs_decision_list(team_ids=permissions.decision_team_ids(request.user))
    page = Paginator(jobs, JOBS_PER_PAGE).get_page(request.GET.get("page"))
    return render(request, "scheduler/decisions.html", {"page_obj": page})


def queue_live(request, pk: int):
    _require(permissions.can_view_jobs(request.user))
    queue = get_object_or_404(selectors.live_queue_get_queryset(), pk=pk)
    context = {
        "live": selectors.live_queue(queue),
        "queue": queue,
        "clock": selectors.queue_clock(queue),
        "waiting": queue_estimates(queue).entries[:LIVE_WAITING],
    }
    if request.htmx:
        return render(request, "scheduler/_live.html", context)
    return render(request, "scheduler/live.html", context)


# Job definitions.


def _can_manage_definitions(user) -> bool:
    return rules.allowed(user, "job_definition.manage")


def definition_list(request):
    _require(permissions.can_submit_jobs(request.user))
    return render(
        request,
        "scheduler/definitions/list.html",
        {
            "definitions": selectors.with_latest(selectors.definition_list()),
            "can_manage": _can_manage_definitions(request.user),
        },
    )


def _definition_or_404(pk: int) -> JobDefinition:
    try:
        return selectors.definition_get(pk=pk)
    except JobDefinition.DoesNotExist:
        raise Http404("No such job definition") from None


def definition_detail(request, pk: int):
    _require(permissions.can_submit_jobs(request.user))
    definition = _definition_or_404(pk)
    can_manage = _can_manage_definitions(request.user)
    revisions = selectors.definition_revisions(definition)
    return render(
        request,
        "scheduler/definitions/detail.html",
        {
            "definition": definition,
            "latest": definition.latest,
            "facts": selectors.revision_facts(definition.latest, show_values=can_manage),
            "history": selectors.definition_history(revisions, show_values=can_manage),
            "can_manage": can_manage,
        },
    )


def _definition_form_page(request, form, formset, **context):
    return render(
        request,
        "scheduler/definitions/form.html",
        {"form": form, "formset": formset, **context},
    )


def definition_create(request):
    _require(_can_manage_definitions(request.user))
    form = DefinitionForm(request.POST or None)
    formset = ParameterFormSet(request.POST or None, prefix="parameters")
    checked = form.check_all(formset) if request.method == "POST" else None
    if checked is not None:
        data, rows = checked
        try:
            definition = definition_services.definition_register(
                actor=request.user,
                name=form.cleaned_data["name"],
                description=form.cleaned_data["description"],
                data=data,
                reason=form.cleaned_data["reason"],
            )
        except definition_services.DefinitionError as error:
            apply_definition_errors(form, formset, error, rows)
        else:
            messages.success(request, f"Job definition {definition.name} registered.")
            return redirect("definition-detail", pk=definition.pk)
    return _definition_form_page(request, form, formset, definition=None)


def definition_revise(request, pk: int):
    _require(_can_manage_definitions(request.user))
    definition = _definition_or_404(pk)
    latest = definition.latest
    if definition.retired_at is not None:
        messages.error(request, f"{definition.name} is retired: it takes no new revisions.")
        return redirect("definition-detail", pk=definition.pk)
    if request.method == "POST":
        form = DefinitionForm(request.POST, revise=True)
        formset = ParameterFormSet(request.POST, prefix="parameters")
        base = request.POST.get("base_revision", "")
    else:
        form = DefinitionForm(initial=DefinitionForm.initial_of(latest), revise=True)
        formset = ParameterFormSet(
            initial=[ParameterForm.initial_of(spec) for spec in latest.parameters],
            prefix="parameters",
        )
        base = str(latest.revision)
    checked = form.check_all(formset) if request.method == "POST" else None
    if checked is not None:
        data, rows = checked
        try:
            revision = definition_services.definition_revise(
                actor=request.user,
                definition_id=definition.pk,
                base_revision=int(base) if base.isdigit() else None,
                data=data,
                reason=form.cleaned_data["reason"],
                description=form.cleaned_data["description"],
            )
        except definition_services.DefinitionError as error:
            apply_definition_errors(form, formset, error, rows)
        except definition_services.RevisionConflict as conflict:
            form.add_error(
                None,
                f"Revision {conflict.current} was saved since you opened this form. "
                "Open the form again to start from it; your changes are below to copy.",
            )
        else:
            messages.success(request, f"Revision {revision.revision} of {definition.name} saved.")
            return redirect("definition-detail", pk=definition.pk)
    return _definition_form_page(request, form, formset, definition=definition, base_revision=base)


def definition_retire(request, pk: int):
    _require(_can_manage_definitions(request.user))
    definition = _definition_or_404(pk)
    form = RetireForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            definition_services.definition_retire(
                actor=request.user, definition_id=definition.pk, reason=form.cleaned_data["reason"]
            )
        except definition_services.DefinitionError as error:
            apply_errors(form, error, labelled=True)
        else:
            messages.success(request, f"Job definition {definition.name} retired.")
            return redirect("definition-detail", pk=definition.pk)
    return render(
        request, "scheduler/definitions/retire.html", {"definition": definition, "form": form}
    )
