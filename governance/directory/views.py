"""The directory page (admins): which directory groups give which roles and team
memberships, a form to add a mapping (with its reason), each mapping's removal (with
its reason), and who signs in through the directory. Under POLICY_CHANGES_NEED_REVIEW
an addition or a removal becomes a proposal another admin approves."""

from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_http_methods, require_POST

from core import rules
from core.errors import InvalidInput
from core.form_errors import apply_errors
from governance.directory import selectors, services
from governance.directory.forms import MappingDeleteForm, MappingForm
from governance.directory.models import GroupMapping
from governance.policy.reviewable import changes_need_review, reason_problems
from governance.proposals.messages import after_policy_write


def _delete_prefix(mapping: GroupMapping) -> str:
    return f"remove-{mapping.pk}"


def _page(request, form, *, status=200, failed_delete=None):
    mappings = list(selectors.mapping_list())
    for mapping in mappings:
        if failed_delete is not None and failed_delete.prefix == _delete_prefix(mapping):
            mapping.delete_form = failed_delete
        else:
            mapping.delete_form = MappingDeleteForm(prefix=_delete_prefix(mapping))
    context = {
        "form": form,
        "mappings": mappings,
        "accounts": selectors.account_list(),
        "need_review": changes_need_review(),
        "ldap_on": bool(settings.LDAP_SERVER_URI),
        "sync_minutes": settings.DIRECTORY_SYNC_MINUTES,
        "local_login": settings.LOCAL_PASSWORD_LOGIN,
        "break_glass": settings.BREAK_GLASS_USERS,
    }
    return render(request, "governance/directory/mappings.html", context, status=status)


@require_http_methods(["GET", "POST"])
def directory(request):
    rules.require(request.user, "directory.manage")
    # Bound on every POST, an empty one too (its errors are then the required fields).
    form = MappingForm(request.POST if request.method == "POST" else None)
    if request.method != "POST":
        return _page(request, form)
    if form.is_valid():
        try:
            write = services.mapping_create(actor=request.user, **form.cleaned_data)
        except InvalidInput as error:
            apply_errors(form, error)
        else:

            def applied(write):
                mapping = write.applied
                messages.success(
                    request,
                    f"Group {mapping.group} now gives {mapping.gives}, from each member's "
                    "next login or directory check.",
                )
                return "directory"

            return after_policy_write(request, write, applied=applied)
    elif "reason" not in form.errors:
        # Said in the same pass as the form's own problems.
        apply_errors(form, reason_problems(form.data.get("reason") or ""))
    return _page(request, form, status=400)


@require_POST
def mapping_delete(request, pk: int):
    rules.require(request.user, "directory.manage")
    mapping = get_object_or_404(GroupMapping.objects.select_related("team", "queue"), pk=pk)
    form = MappingDeleteForm(request.POST, prefix=_delete_prefix(mapping))
    if form.is_valid():
        try:
            write = services.mapping_delete(
                actor=request.user, mapping=mapping, reason=form.cleaned_data["reason"]
            )
        except InvalidInput as error:
            apply_errors(form, error)
        else:

            def applied(write):
                messages.success(
                    request,
                    f"Group {mapping.group} no longer gives {mapping.gives}, from each "
                    "member's next login or directory check.",
                )
                return "directory"

            return after_policy_write(request, write, applied=applied)
    return _page(request, MappingForm(), status=400, failed_delete=form)
