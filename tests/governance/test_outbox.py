"""The demo's outbox: with the file-based e-mail backend, the notification e-mails are
kept as files and admins read them on /outbox/; others may not."""

import datetime as dt

import pytest
from django.core import mail as django_mail
from django.urls import reverse

from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def file_outbox(settings, tmp_path):
    settings.EMAIL_BACKEND = "django.core.mail.backends.filebased.EmailBackend"
    settings.EMAIL_FILE_PATH = str(tmp_path)
    return tmp_path


def test_admins_read_the_sent_e_mails_newest_first(client, file_outbox):
    django_mail.send_mail("First", "Decide it here: http://127.0.0.1:8123/exceptions/1/",
                          None, ["owner@example.com"])  # fmt: skip
    connection = django_mail.get_connection()
    django_mail.send_mail("Second", "Body two", None, ["lead@example.com"], connection=connection)
    client.force_login(UserFactory(roles=["admins"]))
    page = client.get(reverse("outbox"))
    assert page.status_code == 200
    sent = page.context["messages_sent"]
    assert {m.subject for m in sent} == {"First", "Second"}
    first = next(m for m in sent if m.subject == "First")
    assert first.to == "owner@example.com"
    assert isinstance(first.sent_at, dt.datetime)
    assert 'href="http://127.0.0.1:8123/exceptions/1/"' in page.content.decode()


def test_only_admins_read_the_outbox(client, file_outbox):
    client.force_login(UserFactory(roles=["team_leads"]))
    assert client.get(reverse("outbox")).status_code == 403


def test_without_the_file_backend_the_page_says_where_mail_goes(client, settings):
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    client.force_login(UserFactory(roles=["admins"]))
    page = client.get(reverse("outbox"))
    assert page.context["messages_sent"] == []
    assert "no outbox to show here" in page.content.decode()
