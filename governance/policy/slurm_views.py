"""The executor binding's pages: a queue's Slurm cluster, partition and account (with
its impact preview), and each instance type's Slurm resources. Thin, like the capacity
editor: the forms call governance.policy.slurm_binding, whose checks are the scheduler's.
The instance types page also shows and sets each type's price per hour (the form calls
governance.policy.prices).
"""

from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.utils.html import format_html
from django.views.decorators.http import require_http_methods, require_POST

from core import rules
from fleet.models import InstanceType
from fleet.selectors import queue_list
from governance.models import PolicyChange
from governance.policy import prices, slurm_binding
from governance.policy.forms import InstanceTypePriceForm, SlurmBindingForm, SlurmResourcesForm
from governance.policy.history_views import history_url_for
from governance.policy.impact import ImpactLine
from governance.policy.services import PolicyError, PolicyWrite
from governance.policy.views import _problem, queue_editor
from governance.proposals.messages import after_policy_write


@require_http_methods(["GET", "POST"])
def queue_slurm(request, pk: int):
    rules.require(request.user, "policy.edit")
    queue = get_object_or_404(queue_list(), pk=pk)
    return queue_editor(
        request,
        queue,
        form_class=SlurmBindingForm,
        target=PolicyChange.Target.QUEUE_SLURM,
        template="governance/queues/slurm.html",
        label="the Slurm binding of",
        preview=_binding_preview,
    )


@require_POST
def queue_slurm_impact(request, pk: int):
    """The preview: the binding's problems (the cluster asked, within its timeout), or
    where the queue's next jobs go and what the partition fits of its capacity."""
    rules.require(request.user, "policy.edit")
    queue = get_object_or_404(queue_list(), pk=pk)
    form = SlurmBindingForm(request.POST, queue=queue)
    return render(request, "governance/shares/_impact.html", _binding_preview(form))


def _binding_preview(form: SlurmBindingForm) -> dict:
    context = {"ready": False, "problems": [], "lines": []}
    if not form.is_valid():
        context["problems"] = _parse_problems_plain(form)
        return context
    errors = slurm_binding.binding_validate(queue=form.queue, binding=form.binding())
    if errors:
        context["problems"] = [
            _problem(key, message) for key, messages_ in errors.items() for message in messages_
        ]
    else:
        context["ready"] = True
        context["lines"] = [
            ImpactLine(kind="binding", text=text, jobs=())
            for text in slurm_binding.binding_impact(queue=form.queue, binding=form.binding())
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
    return render(
        request,
        "governance/instance_types/list.html",
        {
            "types": [
                (
                    itype,
                    slurm_binding.instance_type_slurm_queues(itype),
                    None
                    if itype.price_per_hour is None
                    else prices.price_short(itype.price_per_hour),
                )
                for itype in InstanceType.objects.order_by("name")
            ],
            "currency": settings.COST_CURRENCY,
        },
    )


@require_http_methods(["GET", "POST"])
def instance_type_price(request, pk: int):
    rules.require(request.user, "policy.edit")
    itype = get_object_or_404(InstanceType, pk=pk)
    currency = settings.COST_CURRENCY
    form = InstanceTypePriceForm(request.POST or None, instance_type=itype, currency=currency)
    if request.method == "POST" and form.is_valid():
        try:
            saved = form.save(actor=request.user)
        except PolicyError:
            pass
        else:
            return after_policy_write(
                request, saved, applied=lambda write: _price_saved(request, write)
            )
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
def instance_type_slurm(request, pk: int):
    rules.require(request.user, "policy.edit")
    itype = get_object_or_404(InstanceType, pk=pk)
    form = SlurmResourcesForm(request.POST or None, instance_type=itype)
    if request.method == "POST" and form.is_valid():
        try:
            saved = form.save(actor=request.user)
        except PolicyError:
            pass
        else:
            return after_policy_write(
                request, saved, applied=lambda write: _resources_saved(request, write)
            )
    return render(
        request,
        "governance/instance_types/slurm.html",
        {
            "form": form,
            "instance_type": itype,
            "queues": slurm_binding.instance_type_slurm_queues(itype),
        },
    )


def _resources_saved(request, write: PolicyWrite) -> str:
    _saved_message_type(request, write)
    return reverse("instance-type-list")


def _saved_message_type(request, write: PolicyWrite) -> None:
    if write.entry is None:
        messages.info(request, f"Nothing changed in {write.applied.name}: it is still as it was.")
        return
    messages.success(
        request,
        format_html(
            'Saved the Slurm resources of {}. <a href="{}">See this change in the history</a>.',
            write.applied.name,
            history_url_for(write.entry),
        ),
    )
