"""The executor binding's pages: a queue's settings for its executor (with the live
check and the impact preview), and an instance type's for each executor with settings.
Thin, like the capacity editor: the forms are built from the executor's binding schema
and call governance.policy.executor_binding, whose checks are the executor's.
The instance types page also shows and sets each type's price per hour (the form calls
governance.policy.prices).
"""

from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.http import Http404, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.html import format_html
from django.views.decorators.http import require_http_methods, require_POST

from core import rules
from fleet.models import InstanceType
from fleet.selectors import queue_list
from governance.models import PolicyChange
from governance.policy import executor_binding, prices
from governance.policy.forms import InstanceTypeBindingForm, InstanceTypePriceForm, QueueBindingForm
from governance.policy.history_views import history_url_for
from governance.policy.impact import ImpactLine
from governance.policy.services import PolicyError, PolicyWrite
from governance.policy.views import _problem, queue_editor
from governance.proposals.messages import after_policy_write


@require_http_methods(["GET", "POST"])
def queue_binding(request, pk: int):
    rules.require(request.user, "policy.edit")
    queue = get_object_or_404(queue_list(), pk=pk)
    if not executor_binding.has_binding(queue.executor):
        return _no_settings(request, queue=queue)
    return queue_editor(
        request,
        queue,
        form_class=QueueBindingForm,
        target=PolicyChange.Target.EXECUTOR_BINDING,
        template="governance/queues/binding.html",
        label="the executor binding of",
        preview=_binding_preview,
    )


def _no_settings(request, *, status: int = 200, **context) -> HttpResponse:
    """A queue whose executor has no settings: the page says so (its links are shown for
    every queue); an instance-type page of an executor that has none is not found."""
    return render(request, "governance/binding_none.html", context, status=status)


@require_POST
def queue_binding_impact(request, pk: int):
    """The preview: the binding's problems (the executor's live check included), or what
    saving it would do."""
    rules.require(request.user, "policy.edit")
    queue = get_object_or_404(queue_list(), pk=pk)
    if not executor_binding.has_binding(queue.executor):
        return _no_settings(request, queue=queue)
    form = QueueBindingForm(request.POST, queue=queue)
    return render(request, "governance/shares/_impact.html", _binding_preview(form))


def legacy_binding(request, pk: int, executor: str, holder: str):
    """An executor's own binding address from before the generic page (bookmarks)."""
    rules.require(request.user, "policy.edit")
    if not executor_binding.has_binding(executor):
        raise Http404("no such page")
    if holder == "queue":
        return redirect("queue-binding", pk=pk)
    return redirect(f"{reverse('instance-type-binding', kwargs={'pk': pk})}?executor={executor}")


def _binding_preview(form: QueueBindingForm) -> dict:
    context = {"ready": False, "problems": [], "lines": []}
    if not form.is_valid():
        context["problems"] = _parse_problems_plain(form)
        return context
    errors = executor_binding.binding_validate(queue=form.queue, binding=form.binding())
    if errors:
        context["problems"] = [
            _problem(key, message) for key, messages_ in errors.items() for message in messages_
        ]
    else:
        context["ready"] = True
        context["lines"] = [
            ImpactLine(kind="binding", text=text, jobs=())
            for text in executor_binding.binding_impact(queue=form.queue, binding=form.binding())
        ]
    return context


def _parse_problems_plain(form) -> list[str]:
    return [
        f"{form.fields[name].label if name in form.fields else 'Form'}: {error}"
        for name, errors in form.errors.items()
        for error in errors
    ]


def instance_types(request):
    rules.require(request.user, "policy.edit")
    executors = executor_binding.binding_executors()
    return render(
        request,
        "governance/instance_types/list.html",
        {
            "types": [
                (
                    itype,
                    [
                        (
                            executor,
                            executor_binding.instance_type_binding_shown(itype, executor),
                            executor_binding.instance_type_queues(itype, executor),
                        )
                        for executor in executors
                    ],
                    None
                    if itype.price_per_hour is None
                    else prices.price_short(itype.price_per_hour),
                )
                for itype in InstanceType.objects.order_by("name")
            ],
            "currency": settings.COST_CURRENCY,
        },
    )


def _saved_or_none(request, form, saved) -> HttpResponse | None:
    """A posted instance-type form saved (or proposed): where to go next; None when the
    page is shown again (nothing posted, or the form's errors, the service's included)."""
    if request.method != "POST" or not form.is_valid():
        return None
    try:
        write = form.save(actor=request.user)
    except PolicyError:
        return None
    return after_policy_write(request, write, applied=lambda done: saved(request, done))


@require_http_methods(["GET", "POST"])
def instance_type_price(request, pk: int):
    rules.require(request.user, "policy.edit")
    itype = get_object_or_404(InstanceType, pk=pk)
    currency = settings.COST_CURRENCY
    form = InstanceTypePriceForm(request.POST or None, instance_type=itype, currency=currency)
    if done := _saved_or_none(request, form, _price_saved):
        return done
    return render(
        request,
        "governance/instance_types/price.html",
        {"form": form, "instance_type": itype, "currency": currency},
    )


def _price_saved(request, write: PolicyWrite) -> str:
    itype = write.applied
    if write.entry is None:
        messages.info(request, f"Nothing changed in {itype.name}: its price is as it was.")
    else:
        price = itype.price_per_hour
        told = (
            "no price"
            if price is None
            else f"{prices.price_short(price)} {settings.COST_CURRENCY} per instance-hour"
        )
        messages.success(
            request,
            format_html(
                'Saved the price of {}: {}. <a href="{}">See this change in the history</a>.',
                itype.name,
                told,
                history_url_for(write.entry),
            ),
        )
    return reverse("instance-type-list")


@require_http_methods(["GET", "POST"])
def instance_type_binding(request, pk: int):
    """What one instance of the type asks an executor for (`?executor=`: the first
    executor with settings when none is named)."""
    rules.require(request.user, "policy.edit")
    itype = get_object_or_404(InstanceType, pk=pk)
    executors = executor_binding.binding_executors()
    executor = request.GET.get("executor") or (executors[0] if executors else "")
    if executor not in executors:
        return _no_settings(request, instance_type=itype, executor=executor, status=404)
    form = InstanceTypeBindingForm(request.POST or None, instance_type=itype, executor=executor)
    if done := _saved_or_none(request, form, _type_binding_saved):
        return done
    return render(
        request,
        "governance/instance_types/binding.html",
        {
            "form": form,
            "instance_type": itype,
            "executor": executor,
            "executors": executors,
            "queues": executor_binding.instance_type_queues(itype, executor),
        },
    )


def _type_binding_saved(request, write: PolicyWrite) -> str:
    if write.entry is None:
        messages.info(request, f"Nothing changed in {write.applied.name}: it is still as it was.")
    else:
        messages.success(
            request,
            format_html(
                'Saved the executor binding of {}. <a href="{}">See this change in the '
                "history</a>.",
                write.applied.name,
                history_url_for(write.entry),
            ),
        )
    return reverse("instance-type-list")
