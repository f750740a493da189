"""Applying a policy file needs a reason, as every policy write does (issue 28, point 7):
from the service, the API and the command line, an empty one changes nothing and the
error names the reason."""

import io

import pytest
from django.core.management import CommandError, call_command
from rest_framework.test import APIClient

from governance.models import PolicyChange
from governance.policy.services import PolicyError
from governance.policy_code import policy_export, policy_file_read
from governance.policy_code.plan import policy_apply
from tests.governance.policy_code.test_views import edited

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("reason", ["", "  \n "])
def test_the_service_refuses_an_empty_reason(admin, varied_queue, reason):
    policy = policy_file_read(raw=edited(varied_queue), source="nlp.yaml")
    count = PolicyChange.objects.count()
    with pytest.raises(PolicyError) as error:
        policy_apply(actor=admin, policy=policy, reason=reason)
    assert error.value.errors == {"reason": ["say why this change is made"]}
    assert PolicyChange.objects.count() == count


def test_the_api_refuses_a_missing_or_blank_reason_naming_it(admin, varied_queue):
    api = APIClient()
    api.force_login(admin)
    body = {"content": edited(varied_queue), "filename": "nlp.yaml"}
    count = PolicyChange.objects.count()
    for extra in ({}, {"reason": ""}, {"reason": "   "}):
        response = api.post("/api/v1/policy/apply/", {**body, **extra}, format="json")
        assert response.status_code == 400, response.json()
        assert response.json()["errors"] == {"reason": ["say why this change is made"]}
    assert PolicyChange.objects.count() == count
    schema = api.get("/api/schema/", HTTP_ACCEPT="application/json").json()
    apply_body = schema["components"]["schemas"]["ApplyRequest"]
    assert "reason" in apply_body["required"]


def test_the_command_refuses_a_missing_or_blank_reason(admin, varied_queue, tmp_path):
    path = tmp_path / "nlp.yaml"
    path.write_text(edited(varied_queue))
    count = PolicyChange.objects.count()
    with pytest.raises(CommandError, match="--reason"):
        call_command("policy", "apply", str(path), "--user", "admin-user", stderr=io.StringIO())
    with pytest.raises(CommandError, match="--reason: say why this change is made"):
        call_command("policy", "apply", str(path), "--user", "admin-user", "--reason", " ")
    assert PolicyChange.objects.count() == count
    assert policy_export(format="native", queue=varied_queue).content != edited(varied_queue)
