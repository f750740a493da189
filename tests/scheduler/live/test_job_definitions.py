"""Job definitions as a service: what a definition may say, how parameter values become
an argument vector (never a shell string), and the append-only history."""

import json
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.rules import Refused
from fleet.models import InstanceType, JobDefinition, JobDefinitionRevision, JobQueue
from scheduler.services.job_definitions import (
    DefinitionData,
    DefinitionError,
    RevisionConflict,
    definition_data_of,
    definition_register,
    definition_retire,
    definition_revise,
    parameters_resolve,
)
from tests.factories import job_definition

pytestmark = pytest.mark.django_db

STEPS = {"name": "steps", "type": "integer", "min": 1, "max": 1_000_000}
NOTE = {"name": "note", "type": "pattern", "pattern": "[^-].*"}


def content(queue, **fields) -> DefinitionData:
    return DefinitionData(
        queues=[queue],
        command=fields.pop("command", ["python", "-m", "train", "--steps", "{steps}"]),
        parameters=fields.pop("parameters", [STEPS]),
        **fields,
    )


def register(admin, queue, name="train", **fields):
    return definition_register(
        actor=admin, name=name, data=content(queue, **fields), reason="first version"
    )


def errors_of(admin, queue, **fields) -> dict:
    with pytest.raises(DefinitionError) as caught:
        register(admin, queue, **fields)
    assert not JobDefinition.objects.exists()
    return caught.value.errors


# What a definition may say.


def test_register_records_revision_one_with_its_queues(admin, queue):
    definition = register(admin, queue, environment={"HF_HOME": "/data/hf"})

    revision = definition.revisions.get()
    assert (revision.revision, revision.queue_names, revision.reason) == (
        1,
        ["aws-sample"],
        "first version",
    )
    assert revision.created_by == admin and revision.environment == {"HF_HOME": "/data/hf"}
    assert list(definition.queues.all()) == [queue]


@pytest.mark.parametrize(
    ("fields", "errors"),
    [
        (
            {"command": ["python", "train.py", "--steps", "{stpes}"]},
            {
                "command[3]": ["{stpes} is not a declared parameter"],
            },
        ),
        (
            {"command": ["{steps}", "--fast"]},
            {"command[0]": ["the program must be fixed: a name or path, not a parameter"]},
        ),
        (
            {"command": ["python", "--steps={steps!r}"]},
            {
                "command[1]": [
                    "{steps!r} is not a placeholder: write {name} of a declared parameter"
                ]
            },
        ),
        (
            {"command": ["python", "--steps={steps.real}"]},
            {
                "command[1]": [
                    "{steps.real} is not a placeholder: write {name} of a declared parameter"
                ]
            },
        ),
        (
            {"command": ["python", "--steps={steps"]},
            {"command[1]": ["unbalanced { or }: write {{ and }} for literal braces"]},
        ),
        (
            {"command": ["python", "a\x00b", "{steps}"]},
            {"command[1]": ["must not contain a NUL byte"]},
        ),
        (
            {"command": "python -m train --steps {steps}"},
            {"command": ["an argument vector: a list of strings, the program first"]},
        ),
        (
            {"command": ["python", "train.py"]},
            {"parameters[0].name": ["{steps} is not used in the command; use it or remove it"]},
        ),
        (
            {"parameters": [{**STEPS, "min": 10, "max": 1}]},
            {"parameters[0].max": ["must be at least the minimum (10)"]},
        ),
        (
            {"parameters": [{"name": "steps", "type": "integer"}]},
            {
                "parameters[0].min": [
                    "an integer parameter needs its minimum, a whole number between "
                    "-1000000000000 and 1000000000000"
                ],
                "parameters[0].max": [
                    "an integer parameter needs its maximum, a whole number between "
                    "-1000000000000 and 1000000000000"
                ],
            },
        ),
        (
            {"parameters": [{**STEPS, "default": 0}]},
            {"parameters[0].default": ["must be an integer between 1 and 1000000"]},
        ),
        (
            {"parameters": [{"name": "steps", "type": "pattern", "pattern": "(a)\\1"}]},
            {"parameters[0].pattern": ["not a valid RE2 pattern (invalid escape sequence: \\1)"]},
        ),
        (
            {"parameters": [{"name": "steps", "type": "shell"}]},
            {"parameters[0].type": ["one of integer, choice, pattern"]},
        ),
        (
            {"parameters": [STEPS, {**STEPS, "min": 2}]},
            {"parameters[1].name": ["steps is declared already (parameters[0])"]},
        ),
        (
            {"parameters": [{"name": "1x", "type": "choice", "choices": ["a"]}], "command": ["p"]},
            {
                "parameters[0].name": [
                    "letters, digits and _, not starting with a digit (at most 64 characters)"
                ]
            },
        ),
        (
            {"environment": {"PATH": "/tmp/evil"}},
            {
                "environment.PATH": [
                    "the runner sets PATH, HOME, LANG and the JOB_ variables itself; "
                    "choose another name"
                ]
            },
        ),
        (
            {"environment": {"JOB_ID": "7", "Lang": "C"}},
            {
                "environment.JOB_ID": [
                    "the runner sets PATH, HOME, LANG and the JOB_ variables itself; "
                    "choose another name"
                ],
                "environment.Lang": [
                    "the runner sets PATH, HOME, LANG and the JOB_ variables itself; "
                    "choose another name"
                ],
            },
        ),
        (
            {"environment": {"TOKEN": "a\x00b"}},
            {"environment.TOKEN": ["must not contain a NUL byte"]},
        ),
        (
            {"environment": {"BAD NAME": "x"}},
            {
                "environment": [
                    "'BAD NAME' is not a variable name: letters, digits and _, "
                    "not starting with a digit"
                ]
            },
        ),
        (
            {"instances": 0, "stop_grace_seconds": 7200},
            {
                "instances": ["must be a whole number between 1 and 10000"],
                "stop_grace_seconds": ["must be a whole number between 0 and 3600"],
            },
        ),
    ],
)
def test_a_definition_breaking_a_rule_is_refused_naming_the_field(admin, queue, fields, errors):
    assert errors_of(admin, queue, **fields) == errors


def test_a_process_queue_needs_a_command_and_names_need_a_reason(admin, queue):
    queue.executor = "process"
    queue.save()
    with pytest.raises(DefinitionError) as caught:
        definition_register(
            actor=admin,
            name="Not A Name",
            data=content(queue, command=[], parameters=[]),
            reason=" ",
        )
    assert caught.value.errors == {
        "name": [
            "lower-case letters, digits, '.', '_' and '-', starting with a letter or digit "
            "(at most 128 characters)"
        ],
        "command": ["queue aws-sample runs real processes: give the program and its arguments"],
        "reason": ["say why (it is recorded in the definition's history)"],
    }


def test_a_default_instance_type_must_exist_in_every_allowed_queue(admin, queue):
    other = JobQueue.objects.create(name="cpu-only")
    g5 = InstanceType.objects.get(name="ml.g5.xlarge")
    with pytest.raises(DefinitionError) as caught:
        definition_register(
            actor=admin,
            name="train",
            data=DefinitionData(queues=[queue, other], command=["python"], instance_type=g5),
            reason="r",
        )
    assert caught.value.errors["instance_type"][0].startswith("queue cpu-only has no ml.g5.xlarge")


def test_only_admins_register_revise_and_retire(team_lead, admin, queue):
    with pytest.raises(Refused):
        register(team_lead, queue)
    definition = register(admin, queue)
    with pytest.raises(Refused):
        definition_retire(actor=team_lead, definition_id=definition.pk, reason="no")
    assert definition.revisions.count() == 1


# Revisions and retirement: the history.


def test_revise_appends_a_revision_and_refuses_stale_or_empty_changes(admin, queue):
    definition = register(admin, queue)
    base = definition_data_of(definition.revisions.get())
    wider = {**STEPS, "max": 5_000_000}

    revision = definition_revise(
        actor=admin,
        definition_id=definition.pk,
        base_revision=1,
        data=DefinitionData(**{**base.__dict__, "parameters": [wider]}),
        reason="longer runs",
    )
    with pytest.raises(RevisionConflict) as stale:
        definition_revise(
            actor=admin, definition_id=definition.pk, base_revision=1, data=base, reason="x"
        )
    with pytest.raises(DefinitionError) as same:
        definition_revise(
            actor=admin,
            definition_id=definition.pk,
            base_revision=2,
            data=definition_data_of(revision),
            reason="again",
        )

    assert revision.revision == 2 and revision.parameters == [wider]
    assert stale.value.current == 2
    assert same.value.errors == {
        "non_field_errors": ["nothing changed: this is revision 2 as it is"]
    }
    first = definition.revisions.get(revision=1)
    assert first.parameters == [STEPS], "a revision never changes"


def test_retire_records_who_and_why_and_then_refuses_revisions(admin, queue):
    definition = register(admin, queue)
    definition_retire(actor=admin, definition_id=definition.pk, reason="replaced by train-v2")
    definition.refresh_from_db()

    assert definition.retired_by == admin and definition.retire_reason == "replaced by train-v2"
    with pytest.raises(DefinitionError):
        definition_retire(actor=admin, definition_id=definition.pk, reason="again")
    with pytest.raises(DefinitionError) as revised:
        definition_revise(
            actor=admin,
            definition_id=definition.pk,
            base_revision=1,
            data=definition_data_of(definition.revisions.get()),
            reason="x",
        )
    assert "is retired" in revised.value.errors["non_field_errors"][0]


# Parameter values -> the argument vector.


@pytest.fixture
def revision(queue) -> JobDefinitionRevision:
    return job_definition(
        queue,
        name="echo-args",
        command=[
            sys.executable,
            "-c",
            "import json, sys; print(json.dumps(sys.argv[1:]))",
            "--note={note}",
            "{note}",
            "{{literal}}",
            "--steps",
            "{steps}",
        ],
        parameters=[{**STEPS, "default": 5}, NOTE],
    )


def test_values_are_substituted_element_by_element(revision):
    parameters, argv, errors = parameters_resolve(
        revision=revision, values={"note": "hello world", "steps": "12"}
    )

    assert errors == {}
    assert parameters == {"steps": 12, "note": "hello world"}
    assert argv[3:] == ["--note=hello world", "hello world", "{literal}", "--steps", "12"]


INJECTIONS = ["; rm -rf /", "$(id)", "`id`", "a && touch /tmp/pwned", "' \" \\ | > <", "${HOME}"]


@pytest.mark.parametrize("value", INJECTIONS)
def test_shell_syntax_reaches_the_program_as_one_inert_argument(revision, value, tmp_path):
    _parameters, argv, errors = parameters_resolve(revision=revision, values={"note": value})
    assert errors == {}

    # Run it as the runner does: an argument vector, no shell.
    result = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, check=True)

    received = json.loads(result.stdout)
    assert received == [f"--note={value}", value, "{literal}", "--steps", "5"]
    assert list(tmp_path.iterdir()) == []  # nothing ran that could write a file


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"note": "a\nrm -rf /"}, "must be one line (no line breaks)"),
        ({"note": "a\rb"}, "must be one line (no line breaks)"),
        ({"note": "a\x00b"}, "must not contain a NUL byte"),
        ({"note": "a\x1b[2Jb"}, "must not contain control characters"),
        ({"note": "x" * 257}, "must be at most 256 characters"),
        (
            {"note": "--output=/etc/passwd"},
            "must not start with '-' (the program would read it as an option)",
        ),
        ({"note": 12}, "must be text"),
    ],
)
def test_unsafe_text_is_refused_whatever_the_pattern_allows(revision, values, message):
    parameters, argv, errors = parameters_resolve(revision=revision, values=values)
    assert (parameters, argv, errors) == ({}, [], {"parameters.note": [message]})


@pytest.mark.parametrize("raw", [0, 1_000_001, "1e3", "0x10", "5; id", 2.5, True, None, [], {}])
def test_integers_outside_their_bounds_or_not_integers_are_refused(revision, raw):
    _parameters, _argv, errors = parameters_resolve(
        revision=revision, values={"note": "n", "steps": raw}
    )
    if raw is None:  # no value: the default
        assert errors == {}
    else:
        assert errors == {"parameters.steps": ["must be an integer between 1 and 1000000"]}


def test_a_pathological_pattern_is_checked_in_linear_time(queue):
    """RE2 has no backtracking: `(a+)+$` on a long non-match is quick, not exponential."""
    revision = job_definition(
        queue,
        name="nested",
        command=["prog", "{word}"],
        parameters=[{"name": "word", "type": "pattern", "pattern": "(a+)+"}],
    )
    _parameters, _argv, errors = parameters_resolve(
        revision=revision, values={"word": "a" * 255 + "b"}
    )
    assert errors == {"parameters.word": ["must match the pattern (a+)+"]}


def test_unknown_and_missing_parameters_are_named(revision):
    _parameters, _argv, errors = parameters_resolve(
        revision=revision, values={"script": "x.py", "STEPS": 3}
    )
    assert errors == {
        "parameters.script": ["echo-args:1 has no parameter script (its parameters: steps, note)"],
        "parameters.STEPS": ["echo-args:1 has no parameter STEPS (its parameters: steps, note)"],
        "parameters.note": ["required: give a value"],
    }


@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(value=st.text(max_size=300))
def test_any_accepted_value_is_exactly_one_argument(revision, value):
    parameters, argv, errors = parameters_resolve(revision=revision, values={"note": value})
    if errors:
        assert set(errors) == {"parameters.note"}
        return
    assert len(argv) == 8
    assert argv[3] == f"--note={value}" and argv[4] == value
    assert "\x00" not in value and "\n" not in value and len(value) <= 256
