"""The UI shell: number formats, glossary, template tags, and navigation by role."""

import datetime as dt
import re
from dataclasses import replace
from zoneinfo import ZoneInfo

import pytest
from django.contrib.auth.models import AnonymousUser, Group, User
from django.template import Context, Template
from django.test import RequestFactory, override_settings
from django.utils import timezone

from core.formatting import duration, gpu_hours, percent
from core.permissions import ADMINS, EXCEPTION_OWNERS, LEADERSHIP, TEAM_LEADS
from governance import context_processors, glossary

UI_URLS = "tests.governance.ui_urls"


def render(source: str, **context) -> str:
    return Template("{% load ui %}" + source).render(Context(context))


# Durations


@pytest.mark.parametrize(
    ("seconds", "expected"),
    [
        (0, "0 s"),
        (45, "45 s"),
        (44.6, "45 s"),
        (60, "1 m 00 s"),
        (754, "12 m 34 s"),
        (7500, "2 h 05 m"),
        (3600, "1 h 00 m"),
        (86399, "23 h 59 m"),
        (3 * 86400 + 4 * 3600 + 59, "3 d 04 h"),
        (dt.timedelta(hours=2, minutes=5), "2 h 05 m"),
        (-90, "-1 m 30 s"),
        (None, "—"),
        ("", "—"),
    ],
)
def test_duration_shows_the_two_largest_units(seconds, expected):
    assert duration(seconds) == expected


# GPU-hours


@pytest.mark.parametrize(
    ("gpu_seconds", "expected"),
    [
        (44280, "12.3"),
        (0, "0.0"),
        (179, "0.0"),
        (180, "0.1"),
        (4_500_000, "1,250.0"),
        (None, "—"),
    ],
)
def test_gpu_hours_have_one_decimal(gpu_seconds, expected):
    assert gpu_hours(gpu_seconds) == expected


# Percentages


@pytest.mark.parametrize(
    ("fraction", "expected"),
    [
        (0.42, "42%"),
        (0.425, "43%"),
        (0, "0%"),
        (0.004, "<1%"),
        (0.0000001, "<1%"),
        (0.01, "1%"),
        (0.995, ">99%"),
        (1, "100%"),
        (1.5, "150%"),
        (-0.12, "-12%"),
        (-0.001, "-<1%"),
        (None, "—"),
    ],
)
def test_percent_has_no_false_precision(fraction, expected):
    assert percent(fraction) == expected


def test_filters_work_in_templates():
    assert render("{{ s|duration }} {{ g|gpu_hours }} {{ p|percent }}", s=45, g=44280, p=0.42) == (
        "45 s 12.3 42%"
    )


# Glossary


REQUIRED_TERMS = [
    "RESERVE",
    "LEND",
    "LEND_AND_BORROW",
    "borrow limit",
    "in-share preemption",
    "reclaim",
    "retry bound",
    "capacity limit",
    "quota share",
    "job queue",
    "lost work",
    "restart overhead",
    "goodput",
    "turnaround",
    "urgency definition",
    "exception request",
]


def test_glossary_explains_every_term_the_pages_use():
    assert set(REQUIRED_TERMS) <= set(glossary.GLOSSARY)
    for name, text in glossary.GLOSSARY.items():
        assert text.endswith("."), name
        assert 40 < len(text) < 300, f"{name}: keep explanations to a sentence or two"


@pytest.mark.parametrize("spelling", ["Borrow limit", "borrow_limit", " borrow  limit "])
def test_explain_matches_loosely(spelling):
    assert glossary.explain(spelling) == glossary.GLOSSARY["borrow limit"]


def test_the_borrow_limit_is_explained_as_a_percent_of_the_limit():
    # The engine's cap is floor(limit * borrow_limit / 100), -1 unlimited (engine/quota.py).
    text = glossary.GLOSSARY["borrow limit"]
    assert text.startswith("A percent of the share's own limit, not a number of instances")
    assert "-1: unlimited" in text


def test_explain_tells_lend_and_borrow_from_lend():
    assert glossary.explain("lend and borrow") == glossary.GLOSSARY["LEND_AND_BORROW"]
    assert glossary.explain("lend") == glossary.GLOSSARY["LEND"]
    assert glossary.explain("In-share preemption") == glossary.GLOSSARY["in-share preemption"]


def test_explain_refuses_unknown_terms():
    with pytest.raises(KeyError, match="not in the glossary"):
        glossary.explain("quota magic")


# {% term %}


def test_term_renders_a_focusable_label_described_by_its_tooltip():
    html = render('{% term "RESERVE" %}')
    label_id = re.search(r'aria-describedby="([^"]+)"', html).group(1)
    assert 'tabindex="0"' in html
    assert f'id="{label_id}"' in html
    assert 'role="tooltip"' in html
    assert ">RESERVE</span>" in html
    assert glossary.GLOSSARY["RESERVE"] in html


def test_term_takes_a_label_and_gives_each_use_its_own_id():
    html = render('{% term "borrow limit" label="Borrow limit" %} {% term "borrow limit" %}')
    ids = re.findall(r'role="tooltip" id="([^"]+)"', html)
    assert len(set(ids)) == 2
    assert ">Borrow limit</span>" in html


def test_term_fails_loudly_on_a_typo():
    with pytest.raises(KeyError):
        render('{% term "borow limit" %}')


# {% state_chip %}


@pytest.mark.parametrize(
    ("state", "css", "text"),
    [
        ("RUNNING", "chip--within", "Running"),
        ("PREEMPTED", "chip--failed", "Preempted"),
        ("FAILED", "chip--failed", "Failed"),
        ("ACTIVE", "chip--exception", "Active"),
        ("SUCCEEDED", "chip--done", "Succeeded"),
        ("APPROVED", "chip--done", "Approved"),
        ("DENIED", "chip--stopped", "Denied"),
        ("SUBMITTED", "chip--neutral", "Submitted"),
        ("PENDING_REVIEW", "chip--neutral", "Pending review"),
        ("running", "chip--within", "Running"),
    ],
)
def test_state_chip_colours_by_state(state, css, text):
    assert render("{% state_chip s %}", s=state) == f'<span class="chip {css}">{text}</span>'


def test_state_chip_marks_borrowed_running_jobs_in_words_too():
    html = render("{% state_chip 'RUNNING' borrowed=True %}")
    assert html == '<span class="chip chip--borrowed">Running (borrowed)</span>'


def test_state_chip_uses_a_given_label_or_a_choices_label():
    from django.db.models import TextChoices

    class State(TextChoices):
        ACTIVE = "ACTIVE", "In force"

    assert render("{% state_chip s %}", s=State.ACTIVE) == (
        '<span class="chip chip--exception">In force</span>'
    )
    assert render("{% state_chip 'FAILED' 'Failed, retries exhausted' %}") == (
        '<span class="chip chip--failed">Failed, retries exhausted</span>'
    )
    assert render("{% state_chip s %}", s=None) == "—"


def test_state_chip_escapes_its_label():
    assert "&lt;b&gt;" in render("{% state_chip 'X' label %}", label="<b>")


# {% localtime_tag %}


@override_settings(TIME_ZONE="Europe/Paris")
def test_localtime_tag_shows_the_active_zone_with_utc_on_hover():
    instant = dt.datetime(2025, 1, 2, 13, 5, 9, tzinfo=dt.UTC)
    html = render("{% localtime_tag t %}", t=instant)
    assert html == (
        '<time datetime="2025-01-02T13:05:09Z" title="2025-01-02 13:05 UTC">'
        "2 Jan 2025, 14:05 CET</time>"
    )


def test_localtime_tag_follows_the_activated_time_zone():
    instant = dt.datetime(2025, 7, 1, 23, 30, tzinfo=dt.UTC)
    with timezone.override(ZoneInfo("America/New_York")):
        html = render("{% localtime_tag t %}", t=instant)
    assert 'datetime="2025-07-01T23:30:00Z"' in html
    assert ">1 Jul 2025, 19:30 EDT</time>" in html


def test_localtime_tag_handles_missing_values():
    assert render("{% localtime_tag t %}", t=None) == "—"


# Components


def test_usage_bar_has_a_text_alternative_and_the_numbers_for_css():
    html = render(
        '{% include "components/usage_bar.html" with label="ml.g5.xlarge" used=3 borrowed=1 '
        "idle_lendable=2 limit=4 borrow_cap=8 %}"
    )
    assert (
        '<span class="visually-hidden">ml.g5.xlarge: 3 used within limit, 1 borrowed, '
        "2 idle (lendable) of limit 4, borrow cap 8</span>"
    ) in html
    assert "--used: 3; --borrowed: 1; --idle: 2; --reserved: 0; --limit: 4; --cap: 8;" in html
    assert "usage-bar__cap" in html
    assert "--scale" not in html


def test_usage_bar_without_borrowing_has_no_cap_mark():
    html = render(
        '{% include "components/usage_bar.html" with used=1 idle_reserved=1 limit=2 scale=10 %}'
    )
    assert "usage-bar__cap" not in html
    assert "1 used within limit, 0 borrowed, 0 idle (lendable), 1 idle (reserved) of limit 2<" in (
        html
    )
    assert "--scale: 10;" in html


def test_field_wires_help_and_errors_to_the_widget():
    from django import forms

    class ReasonForm(forms.Form):
        reason = forms.CharField(label="Reason for this change", help_text="Shown in history.")

    form = ReasonForm(data={"reason": ""})
    html = render('{% include "components/field.html" with field=form.reason %}', form=form)
    assert '<label class="field__label" for="id_reason">Reason for this change' in html
    assert 'id="id_reason_helptext"' in html
    assert 'id="id_reason_error"' in html
    assert 'aria-describedby="id_reason_helptext id_reason_error"' in html
    assert 'aria-invalid="true"' in html


def test_field_puts_a_checkbox_before_its_label_and_groups_radios_in_a_fieldset():
    from django import forms

    class ShareForm(forms.Form):
        enabled = forms.BooleanField(label="Enabled", required=False)
        strategy = forms.ChoiceField(
            choices=[("RESERVE", "RESERVE"), ("LEND", "LEND")],
            widget=forms.RadioSelect,
            help_text="What happens to idle instances.",
        )

    form = ShareForm(data={})
    checkbox = render('{% include "components/field.html" with field=form.enabled %}', form=form)
    assert checkbox.index('<input type="checkbox"') < checkbox.index('<label class="field__label"')
    radios = render('{% include "components/field.html" with field=form.strategy %}', form=form)
    assert '<fieldset aria-describedby="id_strategy_helptext id_strategy_error">' in radios
    assert '<legend class="field__label">Strategy' in radios


def test_empty_state_says_what_to_do():
    html = render(
        '{% include "components/empty.html" with title="No shares yet" '
        'message="Create the first one." action_url="/shares/new/" action_label="New share" %}'
    )
    assert "No shares yet" in html
    assert '<a class="btn" href="/shares/new/">New share</a>' in html


def test_legend_names_every_colour():
    html = render('{% include "components/legend.html" %}')
    for words in ["Used within limit", "Borrowed", "Idle, lendable", "Idle, reserved"]:
        assert words in html
    assert "Preempted or failed" in html
    assert "Preempted or failed" not in render(
        '{% include "components/legend.html" with compact=True %}'
    )


def test_the_500_page_renders_without_a_request():
    from django.template import loader

    html = loader.get_template("500.html").render()
    assert '<html lang="en">' in html
    assert "Something went wrong on our side" in html
    assert "/static/css/app.css" in html


# Navigation by role


def make_user(username: str, *roles: str, **extra) -> User:
    user = User.objects.create_user(username, password="pw", **extra)
    for role in roles:
        user.groups.add(Group.objects.get_or_create(name=role)[0])
    return user


def nav(user, path="/"):
    request = RequestFactory().get(path)
    request.user = user
    context = context_processors.navigation(request)
    return [(item.label, item.url, item.current) for item in context["nav_items"]], str(
        context["user_role_label"]
    )


@pytest.fixture
def ui_urls(settings):
    settings.ROOT_URLCONF = UI_URLS


@pytest.fixture
def decision_badge(monkeypatch):
    """Point the decision badge at the test URLconf's count, as the real selector will be."""
    table = tuple(
        replace(entry, badge=f"{UI_URLS}.decision_queue_count")
        if entry.url_name == "decision-queue"
        else entry
        for entry in context_processors.NAV
    )
    monkeypatch.setattr(context_processors, "NAV", table)


def labels(items):
    return [label for label, _, _ in items]


@pytest.mark.django_db
def test_admins_see_every_page_that_exists_and_nothing_that_does_not(ui_urls):
    items, role = nav(make_user("ada", ADMINS))
    # What-if is not in the test URLconf: it is left out rather than linked to a 404.
    assert labels(items) == [
        "Queues",
        "Policies",
        "History",
        "Exceptions",
        "Knowledge",
        "Jobs",
        "Dashboard",
    ]
    assert role == "Platform admin"


@pytest.mark.django_db
def test_superusers_count_as_admins(ui_urls):
    items, role = nav(User.objects.create_superuser("root", password="pw"))
    assert "Policies" in labels(items)
    assert role == "Platform admin"


@pytest.mark.django_db
def test_team_leads_see_queues_jobs_exceptions_knowledge(ui_urls):
    items, role = nav(make_user("tl", TEAM_LEADS))
    assert labels(items) == ["Queues", "Exceptions", "Knowledge", "Jobs"]
    assert role == "Team lead"


@pytest.mark.django_db
def test_leadership_sees_queues_knowledge_dashboard(ui_urls):
    items, _ = nav(make_user("boss", LEADERSHIP))
    assert labels(items) == ["Queues", "Knowledge", "Dashboard"]


@pytest.mark.django_db
def test_exception_owners_get_the_decision_queue_with_a_count(ui_urls, decision_badge):
    user = make_user("owner", EXCEPTION_OWNERS, TEAM_LEADS)
    request = RequestFactory().get("/")
    request.user = user
    items = list(context_processors.navigation(request)["nav_items"])
    decisions = next(item for item in items if item.label == "Decisions")
    assert decisions.badge == 3
    assert decisions.url == "/decisions/"
    assert all(item.badge is None for item in items if item.label != "Decisions")


@pytest.mark.django_db
def test_users_without_a_role_only_get_knowledge(ui_urls):
    items, role = nav(make_user("nobody"))
    assert labels(items) == ["Knowledge"]
    assert role == "No role"


@pytest.fixture
def no_pages(settings):
    """A URLconf with login and logout but none of the top bar's pages."""
    settings.ROOT_URLCONF = "django.contrib.auth.urls"


@pytest.mark.django_db
def test_nothing_is_linked_while_no_page_exists(no_pages):
    # Before the pages land, the admin's top bar stays empty rather than full of 404s.
    items, _ = nav(make_user("ada", ADMINS))
    assert items == []


@pytest.mark.django_db
def test_no_badge_query_when_the_decision_queue_does_not_exist(no_pages, django_assert_num_queries):
    user = make_user("owner", EXCEPTION_OWNERS)
    # The badge's selector does not exist yet; importing it would fail. It is not touched.
    with django_assert_num_queries(1):  # the user's groups, once
        items, _ = nav(user)
    assert "Decisions" not in labels(items)


@pytest.mark.django_db
def test_the_current_page_is_marked(ui_urls):
    items, _ = nav(make_user("ada", ADMINS), path="/jobs/42/")
    assert [label for label, _, current in items if current] == ["Jobs"]
    items, _ = nav(make_user("ada2", ADMINS), path="/elsewhere/")
    assert not any(current for _, _, current in items)


def test_anonymous_users_get_no_navigation():
    request = RequestFactory().get("/")
    request.user = AnonymousUser()
    assert context_processors.navigation(request) == {"nav_items": [], "user_role_label": ""}


@pytest.mark.django_db
def test_navigation_is_not_computed_unless_a_template_reads_it(django_assert_num_queries):
    request = RequestFactory().get("/")
    request.user = make_user("ada", ADMINS)
    with django_assert_num_queries(0):
        context_processors.navigation(request)
