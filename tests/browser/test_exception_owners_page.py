"""In real Chromium: an admin appoints an exception owner; axe passes on the page."""

import pytest
from django.contrib.auth.models import Group, User
from playwright.sync_api import expect

from governance.models import ExceptionOwner
from tests.factories import aws_sample_queue

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
PASSWORD = "correct horse battery staple"


def test_admin_appoints_an_exception_owner(page, live_server, login, assert_accessible):
    queue = aws_sample_queue()
    admin = User.objects.create_user("ada", password=PASSWORD, first_name="Ada")
    admin.groups.add(Group.objects.get_or_create(name="admins")[0])
    owner = User.objects.create_user("olu", password=PASSWORD, first_name="Olu")
    owner.groups.add(Group.objects.get_or_create(name="exception_owners")[0])

    login(page, live_server, "ada", PASSWORD, next="/exceptions/owners/")
    expect(page.get_by_role("heading", level=1)).to_be_visible()
    assert_accessible(page)

    page.locator("#id_user").select_option(str(owner.pk))
    page.locator("#id_queue").select_option(str(queue.pk))
    page.locator("form").filter(has=page.locator("#id_user")).locator("button[type=submit]").click()

    expect(page.get_by_role("main")).to_contain_text(queue.name)
    assert ExceptionOwner.objects.filter(user=owner, queue=queue).exists()
    assert_accessible(page)
