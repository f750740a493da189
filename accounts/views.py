"""Pages of accounts: the login page when a lockout refuses it, the admins' list of
current lockouts, the user's profile (their time zone) and their API tokens (issue,
list, revoke: accounts.tokens)."""

import math

from django import forms
from django.conf import settings
from django.contrib import messages
from django.contrib.auth.forms import AuthenticationForm
from django.core.exceptions import ValidationError
from django.http import Http404, JsonResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.http import require_POST

from accounts import tokens
from accounts.lockouts import lockout_clear, lockout_list
from accounts.timezones import SESSION_KEY, time_zone_of, time_zone_set, zone_names
from core import rules


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


class TimeZoneForm(forms.Form):
    time_zone = forms.ChoiceField(
        label="Time zone",
        help_text=(
            "Every page shows times in this zone, and the date-time fields you fill in "
            "are read in it."
        ),
    )

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["time_zone"].choices = [(name, name) for name in zone_names()]


def profile(request):
    """The signed-in user's own settings: their time zone."""
    rules.require(request.user, "account.use")
    current = request.time_zone
    if request.method == "POST":
        form = TimeZoneForm(request.POST)
        if form.is_valid():
            name = form.cleaned_data["time_zone"]
            time_zone_set(user=request.user, name=name)
            request.session[SESSION_KEY] = name
            messages.success(request, f"Times are now shown and read in {name}.")
            return redirect("profile")
    else:
        form = TimeZoneForm(initial={"time_zone": current})
    context = {
        "form": form,
        "stored": request.time_zone_stored,
        "now": timezone.now(),
    }
    return render(request, "accounts/profile.html", context)


@require_POST
def time_zone_detect(request):
    """app.js, on a signed-in user's first visit: store the browser's time zone unless
    the user already has one. Answers what is stored now."""
    rules.require(request.user, "account.use")
    name = request.POST.get("time_zone", "")
    try:
        stored = time_zone_set(user=request.user, name=name, only_if_unset=True)
    except ValidationError as error:
        return JsonResponse({"errors": error.message_dict}, status=400)
    request.session[SESSION_KEY] = time_zone_of(request.user)
    return JsonResponse({"time_zone": request.session[SESSION_KEY], "stored": stored})


class TokenForm(forms.Form):
    name = forms.CharField(
        label="Name",
        max_length=100,
        help_text="What the token is for, so you can tell it apart later (e.g. laptop, CI).",
    )
    days = forms.IntegerField(
        label="Days until it expires",
        min_value=1,
        max_value=settings.API_TOKEN_MAX_DAYS,
        help_text=f"From 1 to {settings.API_TOKEN_MAX_DAYS}.",
    )


def token_list(request):
    """The signed-in user's API tokens: issue one (shown once, on the page that answers
    the form, never stored), list them with their last use and expiry, revoke one."""
    rules.require(request.user, "account.use")
    issued = None
    if request.method == "POST":
        form = TokenForm(request.POST)
        if form.is_valid():
            token, key = tokens.token_issue(user=request.user, **form.cleaned_data)
            issued = {"token": token, "key": key}
            form = TokenForm(initial={"days": settings.API_TOKEN_DAYS})
    else:
        form = TokenForm(initial={"days": settings.API_TOKEN_DAYS})
    now = timezone.now()
    rows = [(token, token.state(now)) for token in tokens.token_list(user=request.user)]
    response = render(
        request, "accounts/tokens.html", {"form": form, "tokens": rows, "issued": issued}
    )
    if issued is not None:
        # The key is in this page only: no cache, no back-button copy, keeps it.
        response["Cache-Control"] = "no-store"
    return response


@require_POST
def token_revoke(request, pk: int):
    rules.require(request.user, "account.use")
    token = tokens.token_revoke(user=request.user, token_id=pk)
    if token is None:  # not one of theirs
        raise Http404("No such token")
    messages.success(request, f"Token {token.prefix}… is revoked: it no longer works.")
    return redirect("tokens")
