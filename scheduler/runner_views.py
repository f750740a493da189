"""The runners page (admins): every runner worker, whether it is live, its clock and
what it cannot run; what `/healthz/` says without names, with them."""

from __future__ import annotations

from django.shortcuts import render

from core import rules
from scheduler import selectors


def runner_list(request):
    rules.require(request.user, "runner.view")
    return render(request, "scheduler/runners.html", selectors.runner_overview())
