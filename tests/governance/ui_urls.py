"""A test URLconf for the UI shell: login/logout as in governance/urls.py, and
stand-ins for the pages of the top bar.

It does not include config.urls, so the shell's tests neither depend on nor
change with the pages other work adds there. Every navigation URL name resolves here
except `whatif-list`, so tests can see both a shown entry and an omitted one. Each
stand-in renders one sample page that extends base.html and uses every shared
component, for the axe check and the screenshot.
Use with `override_settings(ROOT_URLCONF="tests.governance.ui_urls")`.
"""

from django import forms
from django.contrib import messages
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_not_required
from django.core.exceptions import PermissionDenied
from django.http import HttpResponse
from django.template import engines
from django.urls import path
from django.utils import timezone

SAMPLE = """{% extends "base.html" %}{% load ui %}
{% block title %}{{ heading }}{% endblock %}
{% block content %}
<h1>{{ heading }}</h1>
<p class="lead">A {% term "quota share" %} with strategy {% term "LEND_AND_BORROW" %} may borrow
up to its {% term "borrow limit" label="borrow limit" %}.</p>
{% include "components/legend.html" %}
<div class="table-wrap" tabindex="0" role="region" aria-label="Shares of queue training">
<table>
  <caption>Shares of queue training</caption>
  <thead><tr><th scope="col">Share</th><th scope="col">State</th><th scope="col">Usage</th>
  <th scope="col" class="num">GPU-hours</th><th scope="col">Updated</th></tr></thead>
  <tbody>
    <tr><td>vision</td><td>{% state_chip "RUNNING" borrowed=True %}</td>
      <td>{% include "components/usage_bar.html" with label="ml.g5.xlarge" used=3 borrowed=1 limit=4 borrow_cap=8 %}</td>
      <td class="num">{{ 44280|gpu_hours }}</td><td>{% localtime_tag updated %}</td></tr>
    <tr class="has-exception"><td>speech</td><td>{% state_chip "ACTIVE" "Exception active" %}</td>
      <td>{% include "components/usage_bar.html" with label="ml.g5.xlarge" used=2 idle_lendable=2 limit=4 borrow_cap=6 %}</td>
      <td class="num">{{ 7200|gpu_hours }}</td><td>{% localtime_tag updated %}</td></tr>
    <tr><td>research</td><td>{% state_chip "PREEMPTED" %}</td>
      <td>{% include "components/usage_bar.html" with label="ml.p4d.24xlarge" used=1 idle_reserved=1 limit=2 %}</td>
      <td class="num">{{ 0|gpu_hours }}</td><td>{% localtime_tag updated %}</td></tr>
  </tbody>
</table>
</div>
<div class="grid">
  <div class="card kpi"><p class="kpi__label">Median {% term "turnaround" %}</p>
    <p class="kpi__value">{{ 7500|duration }}</p>
    <p class="kpi__change kpi__change--good">▼ {{ 0.12|percent }} from last month</p>
    <p class="kpi__meaning">Jobs finished sooner than last month.</p></div>
  <div class="card kpi"><p class="kpi__label">{% term "goodput" label="Goodput" %}</p>
    <p class="kpi__value">{{ 0.934|percent }}</p>
    <p class="kpi__change kpi__change--bad">▲ {{ 0.004|percent }} lost work</p>
    <p class="kpi__meaning">Share of compute that moved jobs forward.</p></div>
</div>
<p>Borrow limit: <span class="diff-old">2</span> → <span class="diff-new">4</span></p>
<form method="post" class="card form" novalidate>{% csrf_token %}
  {% for field in form %}{% include "components/field.html" with field=field %}{% endfor %}
  <div class="actions"><button type="submit" class="btn">Save</button>
  <button type="button" class="btn btn--secondary">Preview</button>
  <button type="button" class="btn btn--danger">Revert</button></div>
</form>
{% include "components/empty.html" with title="No shares yet" message="Create the first share of this queue." action_url="#main" action_label="Create a share" %}
{% endblock %}
"""  # noqa: E501 - a template tag cannot span lines


CHART = """{% extends "base.html" %}{% load static %}
{% block title %}Chart sample{% endblock %}
{% block content %}
<h1>Chart sample</h1>
<figure class="card">
  <div data-plotly-figure data-figure-id="figure-usage" style="height: 260px"></div>
  {{ figure|json_script:"figure-usage" }}
  <figcaption>Instances in use by share.</figcaption>
</figure>
<button type="button" class="btn" hx-post="{% url 'ui-chart-fragment' %}" hx-target="#more">
  Load another chart</button>
<div id="more"></div>
{% endblock %}
{% block extra_head %}{% include "components/plotly_style.html" %}{% endblock %}
{% block extra_js %}<script src="{% static 'vendor/plotly.min.js' %}"></script>{% endblock %}
"""

CHART_FRAGMENT = """{% load ui %}
<figure class="card">
  <div data-plotly-figure data-figure-id="figure-more" style="height: 260px"></div>
  {{ figure|json_script:"figure-more" }}
  <figcaption>Borrowed instances by share, as of {% localtime_tag now %}.</figcaption>
</figure>
"""


def _figure(values: list[int], colour: str) -> dict:
    return {
        "data": [
            {
                "type": "bar",
                "x": ["vision", "speech", "research"],
                "y": values,
                "marker": {"color": colour},
            }
        ],
        "layout": {"margin": {"t": 10, "r": 10, "b": 40, "l": 40}},
    }


def chart_page(request):
    context = {"figure": _figure([3, 2, 1], "#2f6db5")}
    return HttpResponse(engines["django"].from_string(CHART).render(context, request))


def chart_fragment(request):
    """POST, so the swap also proves htmx sends the CSRF token from base.html's hx-headers."""
    if request.method != "POST":
        return HttpResponse(status=405)
    context = {"figure": _figure([1, 0, 0], "#e39b1b"), "now": timezone.now()}
    return HttpResponse(engines["django"].from_string(CHART_FRAGMENT).render(context, request))


class SampleForm(forms.Form):
    reason = forms.CharField(
        label="Reason for this change", help_text="Shown in the history entry.", max_length=200
    )
    strategy = forms.ChoiceField(
        choices=[("RESERVE", "RESERVE"), ("LEND", "LEND"), ("LEND_AND_BORROW", "LEND_AND_BORROW")],
        widget=forms.RadioSelect,
        help_text="What happens to idle instances.",
    )
    borrow_limit = forms.IntegerField(label="Borrow limit", min_value=0)
    notify = forms.BooleanField(
        label="Tell the team", required=False, help_text="Emails the team's lead."
    )


def sample_page(request, heading: str):
    if request.GET.get("message"):
        messages.success(request, request.GET["message"])
    form = SampleForm(data={"reason": "", "strategy": "LEND", "borrow_limit": "-1"})
    form.is_valid()
    context = {"heading": heading, "form": form, "updated": timezone.now()}
    return HttpResponse(engines["django"].from_string(SAMPLE).render(context, request))


def forbidden(request):
    raise PermissionDenied("admins only")


def decision_queue_count(*, user) -> int:
    """Stand-in for the decision badge's selector (patched into the nav table by tests)."""
    return 3


def _page(route: str, name: str, heading: str):
    return path(route, sample_page, {"heading": heading}, name=name)


urlpatterns = [
    path("accounts/login/", login_not_required(auth_views.LoginView.as_view()), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    _page("queues/", "queue-list", "Queues"),
    _page("policies/", "policy-list", "Policies"),
    _page("history/", "history", "History"),
    _page("exceptions/", "exception-list", "Exceptions"),
    _page("decisions/", "decision-queue", "Decisions"),
    _page("knowledge/", "knowledge-search", "Knowledge"),
    _page("jobs/", "job-list", "Jobs"),
    _page("dashboard/", "dashboard", "Dashboard"),
    path("forbidden/", forbidden, name="ui-forbidden"),
    path("chart/", chart_page, name="ui-chart"),
    path("chart/more/", chart_fragment, name="ui-chart-fragment"),
]
