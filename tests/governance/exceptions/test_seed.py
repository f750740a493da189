"""The demo's exceptions: an owner for the sample queue, one request waiting, one denied."""

import pytest
from django.core.management import call_command

from demo.exceptions import seed_exceptions
from governance.exceptions.selectors import decision_queue
from governance.models import ExceptionRequest, KnowledgeArticle

pytestmark = pytest.mark.django_db


def test_seed_exceptions_is_idempotent(scene, admin):
    seed_exceptions(admin=admin, lead=scene.lead, owner=scene.owner, queue=scene.queue)
    seed_exceptions(admin=admin, lead=scene.lead, owner=scene.owner, queue=scene.queue)
    states = sorted(ExceptionRequest.objects.values_list("state", flat=True))
    assert states == ["DENIED", "SUBMITTED"]
    assert len(decision_queue(user=scene.owner)) == 1
    assert KnowledgeArticle.objects.filter(kind="EXCEPTION").count() == 1


def test_the_seed_knowledge_command(admin, capsys):
    call_command("seed_knowledge", owner=admin.username)
    assert "13 knowledge articles are published." in capsys.readouterr().out
