"""Hostile policy files (issue 23) are refused while they are read, before any Python
object is built from them and before a plan, with the file's usual errors: a few
hundred bytes of aliases that expand to billions of values, nesting deep enough to
exhaust the stack, and control characters (NUL among them) in names."""

import html
import io
import json
import tracemalloc

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command
from django.urls import reverse
from rest_framework.test import APIClient

from governance.models import PolicyChange
from governance.policy_code import policy_export, policy_file_read
from governance.policy_code.source import (
    MAX_NODES,
    PolicyFileError,
    load_documents,
    load_json_document,
)
from tests.governance.policy_code.test_errors import line_of, problems_of, snapshot

pytestmark = pytest.mark.django_db

# The classic "billion laughs": nine levels of ten aliases each, 10^9 strings.
LAUGHS = "\n".join(
    [
        'version: 1\nqueues:\n- name: lol\n  shares:\n  - &a0 ["lol"]',
        *(f"  - &a{n} [{', '.join([f'*a{n - 1}'] * 10)}]" for n in range(1, 10)),
        "",
    ]
)
DEEP = 100_000


def only_problem(raw: str, format: str | None = None):
    with pytest.raises(PolicyFileError) as error:
        policy_file_read(raw=raw, source="hostile", format=format)
    (problem,) = error.value.problems
    return problem


@pytest.fixture
def native_text(varied_queue):
    return policy_export(format="native", queue=varied_queue).content


def client_for(user) -> APIClient:
    client = APIClient()
    client.force_login(user)
    return client


# Aliases.


def test_a_billion_laughs_is_refused_before_it_expands():
    assert len(LAUGHS) < 1000
    tracemalloc.start()
    try:
        problem = only_problem(LAUGHS)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert problem.field == "file"
    assert problem.message == (
        f"holds more than {MAX_NODES} values (counting what its aliases repeat)"
    )
    assert problem.line in range(6, 15)
    assert peak < 20_000_000  # the expanded document would be gigabytes


def test_a_few_aliases_are_still_read():
    (document,) = load_documents("a: &limits {ml.g5.xlarge: 2}\nb: *limits\n")
    assert document.data == {"a": {"ml.g5.xlarge": 2}, "b": {"ml.g5.xlarge": 2}}


def test_an_alias_inside_the_node_it_names_is_refused():
    with pytest.raises(PolicyFileError) as error:
        load_documents("a: &loop\n  - *loop\n")
    (problem,) = error.value.problems
    assert (problem.line, problem.field) == (2, "file")
    assert problem.message == "the alias *loop is inside the node it names"


# Nesting.


@pytest.mark.parametrize(
    ("text", "format"),
    [
        ("version: 1\nqueues: " + "[" * DEEP, "native"),  # YAML flow
        ("version: 1\nqueues:\n" + "- " * DEEP + "x\n", "native"),  # YAML blocks
        ("[" * DEEP, "native"),
        ('{"quotaShares": ' + "[" * DEEP, None),  # JSON, its format recognised
        ('{"quotaShares": ' + "[" * DEEP + "]" * DEEP + "}", "aws-batch"),
    ],
)
def test_nesting_too_deep_is_refused_with_its_line(text, format):
    problem = only_problem(text, format)
    assert problem.field == "file"
    assert problem.message == "is nested deeper than 64 levels"
    assert problem.line in (1, 2, 3)


def test_nesting_up_to_the_bound_is_read():
    (document,) = load_documents("a: " + "[" * 63 + "]" * 63)
    value, depth = document.data["a"], 1
    while value:
        (value,), depth = value, depth + 1
    assert depth == 63  # and the document's mapping: 64 levels
    with pytest.raises(PolicyFileError):
        load_documents("a: " + "[" * 64 + "]" * 64)
    assert load_json_document('{"a": ' + "[" * 63 + "]" * 63 + "}").data["a"]


def test_a_deep_kueue_capacity_annotation_is_a_field_error(admin, varied_queue):
    content = policy_export(format="kueue", queue=varied_queue).content
    start = content.index("quota-governance.io/capacity: '") + len("quota-governance.io/capacity: ")
    end = content.index("\n", start)
    deep = "'" + '{"a": ' * DEEP + "1" + "}" * DEEP + "'"
    problems = problems_of(admin, content[:start] + deep + content[end:], "kueue")
    (problem,) = problems
    assert problem.field.endswith("metadata.annotations.quota-governance.io/capacity")
    assert problem.message.startswith("must be a JSON object")


# Control characters.


@pytest.mark.parametrize("character", ["\\0", "\\x07", "\\e", "\\x7f", "\\x9b"])
def test_a_control_character_in_a_name_is_refused_at_its_field(admin, native_text, character):
    bad = native_text.replace("  - name: speech\n", f'  - name: "spe{character}ech"\n')
    problems = problems_of(admin, bad)  # and nothing changed
    (problem,) = [problem for problem in problems if "control" in problem.message]
    assert problem.field.startswith("queues[0].shares[") and problem.field.endswith("].name")
    assert problem.line == line_of(bad, 'name: "spe')
    assert problem.message.startswith("must not contain control characters (\\x")
    assert problem.message.endswith(" at character 4)")


def test_a_nul_in_a_json_name_or_key_is_refused(admin, varied_queue):
    body = json.loads(policy_export(format="aws-batch", queue=varied_queue).content)
    body["quotaShares"][1]["quotaShareName"] = "nlp\x00"
    body["quotaShares"][2]["tags"] = {"owner\x00": "x"}
    problems = {p.field: p.message for p in problems_of(admin, json.dumps(body, indent=2))}
    nul = "must not contain control characters (\\x00 at character {})"
    assert problems == {
        "quotaShares[1].quotaShareName": nul.format(4),
        "quotaShares[2].tags": "a key " + nul.format(6),
    }


def test_tabs_and_line_breaks_in_text_are_kept(admin, native_text):
    text = native_text.replace(
        "description: Shared by research teams.", 'description: "Shared\\tby\\nresearch."'
    )
    policy = policy_file_read(raw=text, source="ok", format="native")
    assert policy is not None


# Over the API and on the command line: the file's usual 400 and exit, nothing applied.

HOSTILE = {
    "laughs": (LAUGHS, "file", "holds more than"),
    "deep": ("version: 1\nqueues: " + "[" * DEEP, "file", "is nested deeper than 64 levels"),
    "nul": (None, "name", "must not contain control characters (\\x00"),
}


def _hostile(native_text, case):
    content, field, message = HOSTILE[case]
    if content is None:
        content = native_text.replace("  - name: speech\n", '  - name: "spe\\0ech"\n')
    return content, field, message


@pytest.mark.parametrize("case", list(HOSTILE))
@pytest.mark.parametrize("step", ["plan", "apply"])
def test_the_api_answers_a_hostile_file_with_a_400(admin, native_text, case, step):
    content, field, message = _hostile(native_text, case)
    before = snapshot()
    response = client_for(admin).post(
        f"/api/v1/policy/{step}/",
        {"content": content, "format": "native", **({"reason": "x"} if step == "apply" else {})},
        format="json",
    )
    assert response.status_code == 400, response.content[:500]
    errors = response.json()["errors"]
    ((name, (text,)),) = errors.items()
    assert name.endswith(field)
    assert text.startswith("line ") and message in text
    assert snapshot() == before


@pytest.mark.parametrize("case", list(HOSTILE))
def test_the_command_reports_a_hostile_file_like_any_bad_file(admin, native_text, tmp_path, case):
    content, field, message = _hostile(native_text, case)
    path = tmp_path / "hostile.yaml"
    path.write_text(content)
    err = io.StringIO()
    count = PolicyChange.objects.count()
    for step in (["plan"], ["apply", "--user", "admin-user", "--reason", "x"]):
        with pytest.raises(CommandError, match="1 problem in .*hostile.yaml; nothing was changed"):
            call_command("policy", *step, str(path), stderr=err)
    (first, second) = err.getvalue().splitlines()
    assert first == second and first.startswith(f"{path}: line ") and message in first
    assert PolicyChange.objects.count() == count


@pytest.mark.parametrize("case", list(HOSTILE))
def test_the_upload_page_lists_a_hostile_files_problem(
    admin_client, native_text, varied_queue, case
):
    content, field, message = _hostile(native_text, case)
    before = snapshot()
    page = admin_client.post(
        reverse("queue-policy-plan", args=[varied_queue.pk]),
        {"file": SimpleUploadedFile("hostile.yaml", content.encode())},
    )
    text = html.unescape(page.content.decode())
    assert page.status_code == 200
    assert message in text and "hostile.yaml was not applied." in text
    assert snapshot() == before


LONG = "9" * 5000  # longer than Python reads (sys.get_int_max_str_digits(): 4300)
TOO_LONG = "holds a number longer than 4300 digits"


@pytest.mark.parametrize(
    ("text", "format", "field", "message"),
    [
        (
            f"version: 1\nqueues: []\nworkload_classes:\n- name: a\n  grace: {LONG}\n",
            "native",
            "workload_classes[0].grace",
            TOO_LONG,
        ),
        (f"version: 1\nqueues: []\n? {LONG}\n: 1\n", "native", "file", "keys must be text"),
        ('{"quotaShares": [], "n": ' + LONG + "}", None, "file", TOO_LONG),
        ('{"quotaShares": [], "n": ' + LONG + "}", "aws-batch", "file", TOO_LONG),
        (
            f"version: 1\nqueues: [{{name: q, capacity: {{a: {LONG}}}}}]\n",
            "native",
            "queues[0].capacity.a",
            TOO_LONG,
        ),
    ],
)
def test_a_number_longer_than_python_reads_is_a_problem_not_a_crash(text, format, field, message):
    problem = only_problem(text, format)
    assert (problem.field, problem.message) == (field, message)
