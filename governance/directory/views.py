"""The directory page (admins): which directory groups give which roles and team
memberships, a form to add a mapping, and who signs in through the directory."""

from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from core import rules
from core.errors import InvalidInput
from core.form_errors import apply_errors
from governance.directory import selectors, services
from governance.directory.forms import MappingForm
from governance.directory.models import GroupMapping


@require_http_methods(["GET", "POST"])
def directory(request):
    rules.require(request.user, "directory.manage")
    form = MappingForm(request.POST or None)
    status = 200
    if request.method == "POST":
        if form.is_valid():
            try:
                mapping = services.mapping_create(actor=request.user, **form.cleaned_data)
            except InvalidInput as error:
                apply_errors(form, error)
            else:
                messages.success(
                    request,
                    f"Group {mapping.group} now gives {mapping.gives}, from each member's "
                    "next login or directory check.",
                )
                return redirect("directory")
        status = 400
    context = {
        "form": form,
        "mappings": selectors.mapping_list(),
        "accounts": selectors.account_list(),
        "ldap_on": bool(settings.LDAP_SERVER_URI),
        "sync_minutes": settings.DIRECTORY_SYNC_MINUTES,
        "local_login": settings.LOCAL_PASSWORD_LOGIN,
        "break_glass": settings.BREAK_GLASS_USERS,
    }
    return render(request, "governance/directory/mappings.html", context, status=status)


@require_POST
def mapping_delete(request, pk: int):
    rules.require(request.user, "directory.manage")
    mapping = get_object_or_404(GroupMapping.objects.select_related("team", "queue"), pk=pk)
    services.mapping_delete(actor=request.user, mapping=mapping)
    messages.success(
        request,
        f"Group {mapping.group} no longer gives {mapping.gives}, from each member's next "
        "login or directory check.",
    )
    return redirect("directory")
