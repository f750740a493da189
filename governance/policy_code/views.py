"""A queue's policy as code: download it in each format, upload a file to plan and apply,
and (with the AWS Batch sync on) the drift between AWS and the product.

Thin views over governance.policy_code: reading asks "policy.view", planning and
applying "policy.edit"; a file's problems are listed with their lines and fields.
"""

from __future__ import annotations

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from core import rules
from fleet.models import JobQueue
from governance.policy_code import FORMATS, aws_sync, policy_export, policy_file_read
from governance.policy_code.forms import ApplyForm, UploadForm
from governance.policy_code.plan import PlanOutdated, policy_apply, policy_plan
from governance.policy_code.report import change_title, value_text
from governance.policy_code.source import PolicyFileError, decode

FORMAT_NOTES = {
    "aws-batch": "The requests that create the queue on AWS Batch: its service environment, "
    "scheduling policy and job queue, and one CreateQuotaShare per share.",
    "cloudformation": "A template of the job queue, its service environment and scheduling "
    "policy, and one AWS::Batch::QuotaShare per share.",
    "kueue": "A Cohort, its ClusterQueues and ResourceFlavors for Kubernetes.",
    "native": "Everything this product holds about the queue, as versioned YAML.",
}


def _require(user, action: str) -> None:
    why = rules.refusal(user, action)
    if why is not None:
        raise PermissionDenied(why)


def _page(request, queue: JobQueue, **extra):
    exports = [
        (format, FORMAT_NOTES[format], policy_export(format=format, queue=queue))
        for format in FORMATS
    ]
    context = {
        "queue": queue,
        "exports": exports,
        "upload_form": extra.pop("upload_form", None) or UploadForm(),
        "can_edit": rules.allowed(request.user, "policy.edit"),
        "sync": aws_sync.sync_enabled() and aws_sync.queue_arn(queue) is not None,
        **extra,
    }
    return render(request, "governance/policy_code/queue.html", context)


@require_GET
def queue_policy_code(request, pk: int):
    _require(request.user, "policy.view")
    queue = get_object_or_404(JobQueue, pk=pk)
    extra = {}
    if request.GET.get("drift") and aws_sync.sync_enabled():
        try:
            extra["drift"] = aws_sync.drift(queue=queue)
        except aws_sync.SyncUnavailable as error:
            extra["drift_problem"] = str(error)
    return _page(request, queue, **extra)


@require_GET
def queue_policy_download(request, pk: int, format: str):
    _require(request.user, "policy.view")
    queue = get_object_or_404(JobQueue, pk=pk)
    if format not in FORMATS:
        raise Http404("No such format")
    export = policy_export(format=format, queue=queue)
    response = HttpResponse(export.content, content_type=f"{export.media_type}; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{export.filename}"'
    return response


def _problems(error: PolicyFileError) -> list[str]:
    return [str(problem) for problem in error.problems]


def _plan_page(request, queue, plan, apply_form, **extra):
    rows = [
        {
            "title": change_title(change),
            "action": change.action,
            "fields": [(name, value_text(b), value_text(a)) for name, b, a in change.fields],
        }
        for change in plan.changes
    ]
    return render(
        request,
        "governance/policy_code/plan.html",
        {
            "queue": queue,
            "plan": plan,
            "rows": rows,
            "impact": [line for queue_plan in plan.queues for line in queue_plan.impact]
            + plan.other_impact,
            "apply_form": apply_form,
            **extra,
        },
    )


@require_POST
def queue_policy_plan(request, pk: int):
    _require(request.user, "policy.edit")
    queue = get_object_or_404(JobQueue, pk=pk)
    form = UploadForm(request.POST, request.FILES)
    if not form.is_valid():
        return _page(request, queue, upload_form=form)
    upload = form.cleaned_data["file"]
    try:
        content = decode(upload.read())
        policy = policy_file_read(
            raw=content,
            source=upload.name,
            format=form.cleaned_data["format"] or None,
            target_queue=queue.name,
        )
        plan = policy_plan(policy=policy)
    except PolicyFileError as error:
        return _page(
            request, queue, upload_form=form, problems=_problems(error), source=upload.name
        )
    apply_form = ApplyForm(
        initial={
            "payload": ApplyForm.sign(
                content=content,
                filename=upload.name,
                format=policy.format,
                versions=plan.versions(),
            )
        }
    )
    return _plan_page(request, queue, plan, apply_form)


@require_POST
def queue_policy_apply(request, pk: int):
    _require(request.user, "policy.edit")
    queue = get_object_or_404(JobQueue, pk=pk)
    form = ApplyForm(request.POST)
    if not form.is_valid():
        if "payload" in form.errors:
            return _page(
                request, queue, problems=[e for errs in form.errors.values() for e in errs]
            )
        # The plan is good and only the reason is wanting: the same plan again, the
        # error next to the reason, nothing applied.
        payload = form.cleaned_data["payload"]
        try:
            policy = policy_file_read(
                raw=payload["content"],
                source=payload["filename"],
                format=payload["format"],
                target_queue=queue.name,
            )
            plan = policy_plan(policy=policy)
        except PolicyFileError as error:
            return _page(request, queue, problems=_problems(error), source=payload["filename"])
        return _plan_page(request, queue, plan, form)
    payload = form.cleaned_data["payload"]
    try:
        policy = policy_file_read(
            raw=payload["content"],
            source=payload["filename"],
            format=payload["format"],
            target_queue=queue.name,
        )
        result = policy_apply(
            actor=request.user,
            policy=policy,
            reason=form.cleaned_data["reason"],
            expected_versions=payload["versions"],
        )
    except PolicyFileError as error:
        return _page(request, queue, problems=_problems(error), source=payload["filename"])
    except PlanOutdated as error:
        plan = policy_plan(policy=policy)
        fresh = ApplyForm(
            initial={
                "payload": ApplyForm.sign(
                    content=payload["content"],
                    filename=payload["filename"],
                    format=payload["format"],
                    versions=plan.versions(),
                ),
                "reason": form.cleaned_data["reason"],
            }
        )
        return _plan_page(request, queue, plan, fresh, outdated=str(error))
    messages.success(request, f"Applied {payload['filename']}: {result.summary()}")
    for line in result.sync_lines():
        messages.info(request, line)
    return redirect(reverse("queue-detail", args=[queue.pk]))
