"""`manage.py policy export | plan | apply`."""

import io
import json

import pytest
from django.core.management import CommandError, call_command

from governance.models import PolicyChange
from governance.policy_code import policy_export

pytestmark = pytest.mark.django_db


def run(*args) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    call_command("policy", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def test_export_writes_the_file_to_stdout_and_warnings_to_stderr(varied_queue):
    out, err = run("export", "--queue", "research fleet", "--format", "aws-batch")
    assert out == policy_export(format="aws-batch", queue=varied_queue).content
    assert "warning: share 'vision/a' is named 'vision-a' for AWS" in err


def test_export_to_a_file(varied_queue, tmp_path):
    target = tmp_path / "fleet.yaml"
    out, _err = run("export", "--format", "kueue", "-o", str(target))
    assert out == ""
    assert target.read_text() == policy_export(format="kueue").content


def test_export_names_a_missing_queue(varied_queue):
    with pytest.raises(CommandError, match="--queue: no queue named 'nope'"):
        run("export", "--queue", "nope", "--format", "native")
    with pytest.raises(CommandError, match="describes one queue"):
        run("export", "--format", "cloudformation")


def test_plan_prints_the_diff_and_changes_nothing(varied_queue, tmp_path):
    body = json.loads(policy_export(format="aws-batch", queue=varied_queue).content)
    body["quotaShares"][1]["resourceSharingConfiguration"]["borrowLimit"] = 25
    path = tmp_path / "nlp.json"
    path.write_text(json.dumps(body))
    count = PolicyChange.objects.count()
    out, _err = run("plan", str(path))
    assert "Plan for nlp.json (aws-batch format)" in out
    assert "share nlp: changed\n      borrow_limit: 0 -> 25" in out
    assert out.rstrip().endswith("1 change.")
    assert PolicyChange.objects.count() == count


def test_apply_records_the_history_as_the_user_with_the_files_name(admin, varied_queue, tmp_path):
    body = json.loads(policy_export(format="aws-batch", queue=varied_queue).content)
    body["quotaShares"][1]["state"] = "DISABLED"
    path = tmp_path / "pause-nlp.json"
    path.write_text(json.dumps(body))
    out, _err = run("apply", str(path), "--user", "admin-user", "--reason", "Pause nlp")
    assert "Applied: 1 change recorded in the history." in out
    change = PolicyChange.objects.latest("id")
    assert change.reason == "Pause nlp (applied from policy file pause-nlp.json)"
    assert change.actor == admin


def test_a_bad_file_lists_its_problems_by_line_and_exits_non_zero(admin, varied_queue, tmp_path):
    content = policy_export(format="native", queue=varied_queue).content
    path = tmp_path / "bad.yaml"
    path.write_text(content.replace("strategy: RESERVE", "strategy: HOARD"))
    err = io.StringIO()
    count = PolicyChange.objects.count()
    with pytest.raises(CommandError, match="1 problem in .*bad.yaml; nothing was changed"):
        call_command(
            "policy", "apply", str(path), "--user", "admin-user", "--reason", "x", stderr=err
        )
    line = content.splitlines().index("    strategy: RESERVE") + 1
    assert f"line {line}: queues[0].shares[3].strategy: must be one of RESERVE" in err.getvalue()
    assert PolicyChange.objects.count() == count


def test_apply_refuses_a_user_who_may_not_edit(team_lead, varied_queue, tmp_path):
    path = tmp_path / "same.yaml"
    path.write_text(policy_export(format="native", queue=varied_queue).content)
    with pytest.raises(CommandError, match="only platform admins change the policy"):
        run("apply", str(path), "--user", "lead-user", "--reason", "x")
    with pytest.raises(CommandError, match="--user: no user named 'ghost'"):
        run("apply", str(path), "--user", "ghost", "--reason", "x")
