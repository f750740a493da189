"""Pages of accounts: the login page when a lockout refuses it, and the admins' list of
current lockouts."""

import math

from django import forms
from django.conf import settings
from django.contrib import messages
from django.contrib.auth.forms import AuthenticationForm
from django.shortcuts import redirect, render

from accounts.lockouts import lockout_clear, lockout_list
from governance import rules


def locked_out(request, original_response=None, credentials=None):
    """AXES_LOCKOUT_CALLABLE: the login page again, saying the account is locked from
    this address and for how long (429, with Retry-After in seconds)."""
    cool_off = settings.AXES_COOLOFF_TIME
    username = (credentials or {}).get("username") or request.POST.get("username", "")
    found = lockout_list(username=username, ip_address=getattr(request, "axes_ip_address", None))
    lockout = found[0] if found else None
    # No record found: the lock was just taken, so all of the cool-off is left.
    minutes = lockout.minutes_left if lockout else math.ceil(cool_off.total_seconds() / 60)
    response = render(
        request,
        "registration/login.html",
        {
            "form": AuthenticationForm(request, initial={"username": username}),
            "next": request.POST.get("next", ""),
            "locked": {"username": username, "minutes": minutes},
        },
        status=429,
    )
    response["Retry-After"] = str(minutes * 60)
    return response


class UnlockForm(forms.Form):
    username = forms.CharField(max_length=255)
    ip_address = forms.GenericIPAddressField()


def lockouts(request):
    """Admins: the username and address pairs locked out of logging in now; unlock one."""
    rules.require(request.user, "lockout.manage")
    if request.method == "POST":
        form = UnlockForm(request.POST)
        if form.is_valid():
            lockout_clear(actor=request.user, **form.cleaned_data)
            messages.success(
                request,
                f"{form.cleaned_data['username']} may log in from "
                f"{form.cleaned_data['ip_address']} again.",
            )
        else:
            messages.error(request, "Nothing unlocked: that lockout was not found.")
        return redirect("lockouts")
    context = {
        "lockouts": lockout_list(),
        "failure_limit": settings.AXES_FAILURE_LIMIT,
        "cool_off_minutes": math.ceil(settings.AXES_COOLOFF_TIME.total_seconds() / 60),
    }
    return render(request, "accounts/lockouts.html", context)
