"""Job definitions: register, revise and retire them, and turn a submission's parameter
values into the argument vector a runner executes.

A definition is what admins allow to run; a team lead picks one and gives values for
its typed parameters. Values never reach a shell: the command is an argument vector
and each `{name}` placeholder is replaced inside its own element, so a value stays
one argument whatever it contains. Values are checked first: an integer within its
bounds, one of a list, or a full match of an RE2 pattern (linear time: no pattern
can make a check slow), and always at most 256 characters on one line without
control characters. The program (the first element) is never a parameter.

A definition's processes have no network unless it says `network`: a runner runs them
in an empty network namespace (scheduler.executors.process.run). Its `network: false`
and `max_address_space_mb` are promises only an executor that enforces them can keep
(`Capabilities.isolates_network`, `limits_address_space`): a definition that makes
either for a queue whose executor runs programs without enforcing it (a cluster's:
its launcher runs as the job's user on nodes the product cannot inspect) is refused, on
that field, when registered or revised (`isolation_problems`), and a job of such a
revision is refused at submission (scheduler.services.jobs).

Revisions are append-only: a change is a new revision with a reason, so the history
says who allowed what, when and why, like the policy history.
"""

from __future__ import annotations

import datetime as dt
import functools
import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from string import Formatter

import re2
from django.db import IntegrityError, transaction
from django.utils import timezone

from core import rules
from core.bounds import too_long
from core.errors import Conflict, InvalidInput
from fleet.models import (
    InstanceType,
    JobDefinition,
    JobDefinitionRevision,
    JobQueue,
    QueueCapacity,
    WorkloadClass,
)
from scheduler.executors import executor_for

NON_FIELD = "non_field_errors"
NAME_RE = re.compile(r"[a-z0-9][a-z0-9._-]{0,127}")
PARAMETER_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")
ENVIRONMENT_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
INTEGER_RE = re.compile(r"[+-]?[0-9]{1,19}")
PARAMETER_TYPES = ("integer", "choice", "pattern")
# The runner sets these itself; a definition may not override them.
RESERVED_ENVIRONMENT = ("PATH", "HOME", "LANG")
RESERVED_ENVIRONMENT_PREFIX = "JOB_"

MAX_VALUE_LENGTH = 256
MAX_PATTERN_LENGTH = 256
MAX_CHOICES = 100
MAX_PARAMETERS = 32
MAX_ARGUMENTS = 64
MAX_ARGUMENT_LENGTH = 1024
MAX_ENVIRONMENT = 64
MAX_ENVIRONMENT_VALUE = 4096
MAX_DESCRIPTION = 500
INTEGER_LIMIT = 10**12

# (minimum, maximum) of a revision's numbers; the API schema documents the same bounds.
BOUNDS = {
    "instances": (1, 10_000),
    "expected_duration": (1, 10**9),
    "checkpoint_interval": (1, 10**9),
    "restart_overhead": (0, 10**7),
    "stop_grace_seconds": (0, 3600),
    "wall_clock_limit": (1, 366 * 86_400),
    "max_address_space_mb": (64, 16 * 1024 * 1024),
    "max_cpu_seconds": (1, 10**9),
}
OPTIONAL_NUMBERS = (
    "expected_duration",
    "checkpoint_interval",
    "wall_clock_limit",
    "max_address_space_mb",
    "max_cpu_seconds",
)


class DefinitionError(InvalidInput):
    """A request about definitions breaks a rule. `errors` maps a field to its messages."""


class RevisionConflict(Conflict):
    """Someone revised the definition since the client read it (`current` and
    `submitted` are revision numbers)."""

    def __init__(self, *, current: int, submitted: int | None):
        message = (
            f"revision {current} was saved since you read revision {submitted}; "
            "read it and apply your change to it"
        )
        super().__init__({"base_revision": [message]}, current=current, submitted=submitted)

    def details(self) -> dict:
        return {"current_revision": self.current, "submitted_revision": self.submitted}


@dataclass(frozen=True)
class DefinitionData:
    """The content of a revision as a form or the API gives it (not yet checked)."""

    queues: Sequence[JobQueue]
    command: Sequence = ()
    parameters: Sequence = ()
    environment: Mapping = field(default_factory=dict)
    instance_type: InstanceType | None = None
    instances: int = 1
    expected_duration: int | None = None
    checkpoint_interval: int | None = None
    restart_overhead: int = 0
    stop_grace_seconds: int = 10
    wall_clock_limit: int | None = None
    max_address_space_mb: int | None = None
    max_cpu_seconds: int | None = None
    network: bool = False
    # The interruption contract of its jobs; None: the share's default class.
    workload_class: WorkloadClass | None = None


REVISION_FIELDS = (
    "command",
    "parameters",
    "environment",
    "instance_type",
    "instances",
    "expected_duration",
    "checkpoint_interval",
    "restart_overhead",
    "stop_grace_seconds",
    "wall_clock_limit",
    "max_address_space_mb",
    "max_cpu_seconds",
    "network",
    "workload_class",
)


def definition_data_of(revision: JobDefinitionRevision) -> DefinitionData:
    """A revision's content, to change some of it in a new revision."""
    return DefinitionData(
        queues=list(revision.definition.queues.order_by("name")),
        **{name: getattr(revision, name) for name in REVISION_FIELDS},
    )


# Checking values.


def text_problem(value: str, *, limit: int = MAX_VALUE_LENGTH) -> str | None:
    """Why a text value is refused, or None. Checked before any type rule."""
    if "\x00" in value:
        return "must not contain a NUL byte"
    if "\n" in value or "\r" in value:
        return "must be one line (no line breaks)"
    if any(unicodedata.category(char) == "Cc" for char in value):
        return "must not contain control characters"
    if len(value) > limit:
        return f"must be at most {limit} characters"
    return None


@functools.lru_cache(maxsize=512)
def _compiled_pattern(pattern: str):
    options = re2.Options()
    options.log_errors = False
    return re2.compile(pattern, options)


def _pattern_problem(pattern: str) -> str | None:
    try:
        _compiled_pattern(pattern)
    except re2.error as error:
        reason = error.args[0] if error.args else error
        if isinstance(reason, bytes):
            reason = reason.decode(errors="replace")
        return f"not a valid RE2 pattern ({reason})"
    return None


def _integer_message(spec: Mapping) -> str:
    return f"must be an integer between {spec['min']} and {spec['max']}"


def parameter_value(spec: Mapping, raw) -> tuple[int | str | None, str | None]:
    """(value, None) when `raw` is a valid value of the parameter, else (None, why)."""
    kind = spec["type"]
    if isinstance(raw, str):
        problem = text_problem(raw)
        if problem:
            return None, problem
    if kind == "integer":
        message = _integer_message(spec)
        if isinstance(raw, bool):
            return None, message
        if isinstance(raw, int):
            number = raw
        elif isinstance(raw, str) and INTEGER_RE.fullmatch(raw.strip()):
            number = int(raw.strip())
        else:
            return None, message
        if not spec["min"] <= number <= spec["max"]:
            return None, message
        return number, None
    if kind == "choice":
        if not isinstance(raw, str) or raw not in spec["choices"]:
            return None, f"must be one of: {', '.join(spec['choices'])}"
        return raw, None
    if not isinstance(raw, str):
        return None, "must be text"
    if raw.startswith("-"):
        return None, "must not start with '-' (the program would read it as an option)"
    if _compiled_pattern(spec["pattern"]).fullmatch(raw) is None:
        return None, f"must match the pattern {spec['pattern']}"
    return raw, None


# Checking a revision's content.


class _Errors(dict):
    def add(self, key: str, message: str) -> None:
        self.setdefault(key, []).append(message)


def _whole(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _clean_parameter(index: int, raw, errors: _Errors) -> dict | None:  # noqa: C901
    key = f"parameters[{index}]"
    if not isinstance(raw, Mapping):
        errors.add(key, "must be an object with a name and a type")
        return None
    name, kind = raw.get("name"), raw.get("type")
    spec: dict = {"name": name, "type": kind}
    before = len(errors)
    if not isinstance(name, str) or not PARAMETER_NAME_RE.fullmatch(name):
        errors.add(
            f"{key}.name",
            "letters, digits and _, not starting with a digit (at most 64 characters)",
        )
    if kind not in PARAMETER_TYPES:
        errors.add(f"{key}.type", f"one of {', '.join(PARAMETER_TYPES)}")
        return None
    description = raw.get("description") or ""
    if not isinstance(description, str) or len(description) > MAX_DESCRIPTION:
        errors.add(f"{key}.description", f"text of at most {MAX_DESCRIPTION} characters")
    elif description.strip():
        spec["description"] = description.strip()
    if kind == "integer":
        for bound in ("min", "max"):
            value = raw.get(bound)
            if not _whole(value) or not -INTEGER_LIMIT <= value <= INTEGER_LIMIT:
                errors.add(
                    f"{key}.{bound}",
                    f"an integer parameter needs its {bound}imum, "
                    f"a whole number between {-INTEGER_LIMIT} and {INTEGER_LIMIT}",
                )
            spec[bound] = value
        if _whole(spec["min"]) and _whole(spec["max"]) and spec["min"] > spec["max"]:
            errors.add(f"{key}.max", f"must be at least the minimum ({spec['min']})")
    elif kind == "choice":
        choices = raw.get("choices")
        if not isinstance(choices, Sequence) or isinstance(choices, str) or not choices:
            errors.add(f"{key}.choices", "a choice parameter needs a list of values")
        elif len(choices) > MAX_CHOICES:
            errors.add(f"{key}.choices", f"at most {MAX_CHOICES} values")
        else:
            for choice in choices:
                problem = (text_problem(choice) if isinstance(choice, str) else "must be text") or (
                    "must not be empty" if not choice else None
                )
                if problem:
                    errors.add(f"{key}.choices", f"{choice!r} {problem}")
                    break
            else:
                if len(set(choices)) != len(choices):
                    errors.add(f"{key}.choices", "each value only once")
            spec["choices"] = list(choices)
    else:
        pattern = raw.get("pattern")
        if not isinstance(pattern, str) or not pattern:
            errors.add(f"{key}.pattern", "a pattern parameter needs a pattern (RE2 syntax)")
        else:
            problem = text_problem(pattern, limit=MAX_PATTERN_LENGTH) or _pattern_problem(pattern)
            if problem:
                errors.add(f"{key}.pattern", problem)
            spec["pattern"] = pattern
    if len(errors) > before:
        return None
    default = raw.get("default")
    if default is not None and default != "":
        value, problem = parameter_value(spec, default)
        if problem:
            errors.add(f"{key}.default", problem)
            return None
        spec["default"] = value
    return spec


def _placeholders(element: str) -> list[str]:
    """The `{name}` placeholders of one element; ValueError for anything else in braces."""
    try:
        parsed = list(Formatter().parse(element))
    except ValueError:
        raise ValueError("unbalanced { or }: write {{ and }} for literal braces") from None
    names = []
    for _literal, name, spec, conversion in parsed:
        if name is None:
            continue
        if not PARAMETER_NAME_RE.fullmatch(name) or spec or conversion:
            raise ValueError(
                f"{{{name}{'!' + conversion if conversion else ''}{':' + spec if spec else ''}}}"
                " is not a placeholder: write {name} of a declared parameter"
            )
        names.append(name)
    return names


def _clean_command(raw, declared: set[str], errors: _Errors) -> tuple[list[str], set[str]]:
    used: set[str] = set()
    if isinstance(raw, str) or not isinstance(raw, Sequence):
        errors.add("command", "an argument vector: a list of strings, the program first")
        return [], used
    if len(raw) > MAX_ARGUMENTS:
        errors.add("command", f"at most {MAX_ARGUMENTS} arguments")
        return [], used
    command = []
    for index, element in enumerate(raw):
        key = f"command[{index}]"
        if not isinstance(element, str):
            errors.add(key, "must be text")
            continue
        if "\x00" in element:
            errors.add(key, "must not contain a NUL byte")
            continue
        if len(element) > MAX_ARGUMENT_LENGTH:
            errors.add(key, f"must be at most {MAX_ARGUMENT_LENGTH} characters")
            continue
        try:
            names = _placeholders(element)
        except ValueError as error:
            errors.add(key, str(error))
            continue
        if index == 0 and (names or not element.strip()):
            errors.add(key, "the program must be fixed: a name or path, not a parameter")
            continue
        for name in names:
            if name not in declared:
                errors.add(key, f"{{{name}}} is not a declared parameter")
        used.update(names)
        command.append(element)
    return command, used


def _clean_environment(raw, errors: _Errors) -> dict[str, str]:
    if not isinstance(raw, Mapping):
        errors.add("environment", "an object of variable name -> value")
        return {}
    if len(raw) > MAX_ENVIRONMENT:
        errors.add("environment", f"at most {MAX_ENVIRONMENT} variables")
        return {}
    environment = {}
    for name, value in raw.items():
        if not isinstance(name, str) or not ENVIRONMENT_NAME_RE.fullmatch(name):
            errors.add(
                "environment",
                f"{name!r} is not a variable name: letters, digits and _, "
                "not starting with a digit",
            )
            continue
        key = f"environment.{name}"
        upper = name.upper()
        if upper in RESERVED_ENVIRONMENT or upper.startswith(RESERVED_ENVIRONMENT_PREFIX):
            errors.add(
                key,
                "the runner sets PATH, HOME, LANG and the JOB_ variables itself; "
                "choose another name",
            )
            continue
        if not isinstance(value, str):
            errors.add(key, "must be text (a literal value)")
            continue
        if "\x00" in value:
            errors.add(key, "must not contain a NUL byte")
            continue
        if len(value) > MAX_ENVIRONMENT_VALUE:
            errors.add(key, f"must be at most {MAX_ENVIRONMENT_VALUE} characters")
            continue
        environment[name] = value
    return environment


def _clean_numbers(data: DefinitionData, errors: _Errors) -> dict:
    numbers = {}
    for name, (low, high) in BOUNDS.items():
        value = getattr(data, name)
        if value is None and name in OPTIONAL_NUMBERS:
            numbers[name] = None
            continue
        if not _whole(value) or not low <= value <= high:
            empty = " (or empty)" if name in OPTIONAL_NUMBERS else ""
            errors.add(name, f"must be a whole number between {low} and {high}{empty}")
        numbers[name] = value
    return numbers


def _queue_types(queues: Iterable[JobQueue]) -> dict[int, set[int]]:
    types: dict[int, set[int]] = {queue.pk: set() for queue in queues}
    for queue_id, type_id in QueueCapacity.objects.filter(queue_id__in=types).values_list(
        "queue_id", "instance_type_id"
    ):
        types[queue_id].add(type_id)
    return types


def isolation_problems(
    *, queues: Iterable[JobQueue], network: bool, max_address_space_mb: int | None
) -> list[tuple[str, str]]:
    """(field, message) for each isolation a definition asks for that a queue's executor
    runs programs without enforcing: the first such queue per field. A definition that
    says `network: true` and no address-space limit runs anywhere."""
    problems: list[tuple[str, str]] = []
    for queue in queues:
        capabilities = executor_for(queue).capabilities
        if not capabilities.runs_programs:
            continue  # it runs no program: nothing to isolate
        label = executor_for(queue).label
        if network is False and not capabilities.isolates_network:
            problems.append(
                (
                    "network",
                    f"false (no network) cannot be enforced on queue {queue.name}: its "
                    f"executor ({label}) runs jobs on the nodes' network; allow the network "
                    "(true) or leave that queue out",
                )
            )
        if max_address_space_mb is not None and not capabilities.limits_address_space:
            problems.append(
                (
                    "max_address_space_mb",
                    f"cannot be enforced on queue {queue.name}: its executor ({label}) "
                    "applies no address-space limit; leave it empty or leave that queue out",
                )
            )
    first: dict[str, str] = {}
    for key, message in problems:
        first.setdefault(key, message)
    return list(first.items())


def definition_clean(*, data: DefinitionData) -> tuple[dict, dict[str, list[str]]]:  # noqa: C901
    """(the revision's field values, errors): every rule of a definition's content."""
    errors = _Errors()
    queues = list(data.queues)
    if not queues:
        errors.add("queues", "allow at least one queue")
    raw_parameters = data.parameters
    specs: list[dict] = []
    declared: set[str] = set()
    positions: dict[str, int] = {}
    if isinstance(raw_parameters, str) or not isinstance(raw_parameters, Sequence):
        errors.add("parameters", "a list of parameters (name, type and their rules)")
    elif len(raw_parameters) > MAX_PARAMETERS:
        errors.add("parameters", f"at most {MAX_PARAMETERS} parameters")
    else:
        for index, raw in enumerate(raw_parameters):
            if isinstance(raw, Mapping) and isinstance(raw.get("name"), str):
                # Declared even when its rules are wrong: the command's use of it is fine.
                declared.add(raw["name"])
            spec = _clean_parameter(index, raw, errors)
            if spec is None:
                continue
            if spec["name"] in positions:
                errors.add(
                    f"parameters[{index}].name",
                    f"{spec['name']} is declared already (parameters[{positions[spec['name']]}])",
                )
                continue
            positions[spec["name"]] = index
            specs.append(spec)
    command, used = _clean_command(data.command, declared, errors)
    if not any(key.startswith("command") for key in errors):
        for spec in specs:
            if spec["name"] not in used:
                errors.add(
                    f"parameters[{positions[spec['name']]}].name",
                    f"{{{spec['name']}}} is not used in the command; use it or remove it",
                )
    process_queues = [q.name for q in queues if executor_for(q).capabilities.runs_programs]
    if process_queues and not command and "command" not in errors:
        errors.add(
            "command",
            f"queue {process_queues[0]} runs real processes: give the program and its arguments",
        )
    environment = _clean_environment(data.environment, errors)
    numbers = _clean_numbers(data, errors)
    itype = data.instance_type
    if itype is not None and queues:
        types = _queue_types(queues)
        for queue in queues:
            if itype.pk not in types[queue.pk]:
                errors.add(
                    "instance_type",
                    f"queue {queue.name} has no {itype.name}; leave it empty "
                    "(each submission chooses) or allow only queues that have it",
                )
                break
    if not isinstance(data.network, bool):
        errors.add("network", "true (the job may use the network) or false (it runs without)")
    else:
        # A limit refused by its bounds already has its message.
        limit = None if "max_address_space_mb" in errors else data.max_address_space_mb
        for key, message in isolation_problems(
            queues=queues, network=data.network, max_address_space_mb=limit
        ):
            errors.add(key, message)
    if data.workload_class is not None and not isinstance(data.workload_class, WorkloadClass):
        errors.add("workload_class", "a workload class, or empty for the share's default")
    fields = {
        "command": command,
        "parameters": specs,
        "environment": environment,
        "instance_type": itype,
        "network": data.network is True,
        "workload_class": data.workload_class,
        **numbers,
    }
    return fields, dict(errors)


def _check_reason(reason: str, errors: dict) -> None:
    if not reason.strip():
        errors.setdefault("reason", []).append(
            "say why (it is recorded in the definition's history)"
        )
    elif problem := too_long(reason.strip()):
        errors.setdefault("reason", []).append(problem)


def _check_description(description: str, errors: dict) -> None:
    if problem := too_long(description):
        errors.setdefault("description", []).append(problem)


def _new_revision(
    definition: JobDefinition, number: int, fields: dict, queues, *, actor, reason, now
) -> JobDefinitionRevision:
    return JobDefinitionRevision.objects.create(
        definition=definition,
        revision=number,
        queue_names=sorted(queue.name for queue in queues),
        reason=reason.strip(),
        created_by=_user(actor),
        created_at=now,
        **fields,
    )


def _user(actor):
    return actor if getattr(actor, "pk", None) else None


# Writes.


def definition_register(
    *,
    actor,
    name: str,
    data: DefinitionData,
    reason: str,
    description: str = "",
    now: dt.datetime | None = None,
) -> JobDefinition:
    """Register a definition with its first revision."""
    rules.require(actor, "job_definition.manage")
    now = now or timezone.now()
    name = (name or "").strip()
    fields, errors = definition_clean(data=data)
    errors = {**_name_errors(name), **errors}
    _check_reason(reason, errors)
    _check_description((description or "").strip(), errors)
    if errors:
        raise DefinitionError(errors)
    try:
        with transaction.atomic():
            definition = JobDefinition.objects.create(
                name=name,
                description=(description or "").strip(),
                created_by=_user(actor),
                created_at=now,
            )
            definition.queues.set(data.queues)
            _new_revision(definition, 1, fields, data.queues, actor=actor, reason=reason, now=now)
    except IntegrityError:
        # Two admins registered the same name at once: the unique name decides.
        raise DefinitionError({"name": [_name_taken(name)]}) from None
    return definition


def definition_problems(
    *, data: DefinitionData, reason: str, name: str | None = None, description: str = ""
) -> dict[str, list[str]]:
    """Every error registering (`name` given) or revising with this content would
    raise, all at once; changes nothing. A form whose own fields failed to parse asks
    this with the rest, so one submit reports every problem (issue 28, point 7)."""
    _, errors = definition_clean(data=data)
    if name is not None:
        errors = {**_name_errors(name.strip()), **errors}
    _check_reason(reason or "", errors)
    _check_description((description or "").strip(), errors)
    return errors


def _name_taken(name: str) -> str:
    return f"a job definition named {name} exists already; revise it instead"


def _name_errors(name: str) -> dict[str, list[str]]:
    if not NAME_RE.fullmatch(name):
        return {
            "name": [
                "lower-case letters, digits, '.', '_' and '-', starting with a letter "
                "or digit (at most 128 characters)"
            ]
        }
    if JobDefinition.objects.filter(name=name).exists():
        return {"name": [_name_taken(name)]}
    return {}


def definition_revise(
    *,
    actor,
    definition_id: int,
    base_revision: int | None,
    data: DefinitionData,
    reason: str,
    description: str | None = None,
    now: dt.datetime | None = None,
) -> JobDefinitionRevision:
    """Save a new revision on top of `base_revision`, the one the client read.

    Raises RevisionConflict when a newer revision exists, and DefinitionError when
    the content breaks a rule, changes nothing, or the definition is retired.
    """
    rules.require(actor, "job_definition.manage")
    now = now or timezone.now()
    with transaction.atomic():
        definition = JobDefinition.objects.select_for_update().get(pk=definition_id)
        if definition.retired_at is not None:
            raise DefinitionError(
                {
                    NON_FIELD: [
                        f"{definition.name} is retired: it takes no new revisions; "
                        "register a new definition"
                    ]
                }
            )
        latest = definition.revisions.order_by("-revision").first()
        if base_revision != latest.revision:
            raise RevisionConflict(current=latest.revision, submitted=base_revision)
        fields, errors = definition_clean(data=data)
        _check_reason(reason, errors)
        description = definition.description if description is None else description.strip()
        if description != definition.description:
            # A description stored before the bound stays; only a new one is checked.
            _check_description(description, errors)
        if errors:
            raise DefinitionError(errors)
        queue_names = sorted(queue.name for queue in data.queues)
        unchanged = (
            all(getattr(latest, name) == value for name, value in fields.items())
            and queue_names == sorted(latest.queue_names)
            and description == definition.description
        )
        if unchanged:
            raise DefinitionError(
                {NON_FIELD: [f"nothing changed: this is revision {latest.revision} as it is"]}
            )
        if description != definition.description:
            definition.description = description
            definition.save(update_fields=["description"])
        definition.queues.set(data.queues)
        return _new_revision(
            definition,
            latest.revision + 1,
            fields,
            data.queues,
            actor=actor,
            reason=reason,
            now=now,
        )


def definition_retire(
    *, actor, definition_id: int, reason: str, now: dt.datetime | None = None
) -> JobDefinition:
    """Retire a definition: it refuses new jobs; jobs already submitted run on."""
    rules.require(actor, "job_definition.manage")
    now = now or timezone.now()
    errors: dict[str, list[str]] = {}
    _check_reason(reason, errors)
    with transaction.atomic():
        definition = JobDefinition.objects.select_for_update().get(pk=definition_id)
        if definition.retired_at is not None:
            errors.setdefault(NON_FIELD, []).append(f"{definition.name} is retired already")
        if errors:
            raise DefinitionError(errors)
        definition.retired_at = now
        definition.retired_by = _user(actor)
        definition.retire_reason = reason.strip()
        definition.save(update_fields=["retired_at", "retired_by", "retire_reason"])
    return definition


# Submission: parameter values -> the argument vector.


@functools.lru_cache(maxsize=1024)
def _template(command: tuple[str, ...]) -> tuple[tuple[tuple[str, str | None], ...], ...]:
    """Each element as (literal, placeholder) pieces: parsed once per distinct command."""
    return tuple(
        tuple((literal, name) for literal, name, _spec, _conv in Formatter().parse(element))
        for element in command
    )


def parameters_resolve(
    *, revision: JobDefinitionRevision, values
) -> tuple[dict, list[str], dict[str, list[str]]]:
    """(parameters, argv, errors) of a submission's values for a revision.

    `parameters` holds every declared parameter (given or default), typed; `argv` is
    the revision's command with each placeholder replaced inside its own element.
    Error keys are `parameters.<name>` (or `parameters`).
    """
    errors: dict[str, list[str]] = {}
    if values is None:
        values = {}
    if not isinstance(values, Mapping):
        return {}, [], {"parameters": ["an object of parameter name -> value"]}
    specs = {spec["name"]: spec for spec in revision.parameters}
    for name in values:
        if name not in specs:
            known = ", ".join(specs) or "none"
            errors[f"parameters.{name}"] = [
                f"{revision.definition.name}:{revision.revision} has no parameter {name} "
                f"(its parameters: {known})"
            ]
    parameters: dict = {}
    for name, spec in specs.items():
        raw = values.get(name)
        if raw is None or raw == "":
            if "default" not in spec:
                errors[f"parameters.{name}"] = ["required: give a value"]
                continue
            parameters[name] = spec["default"]
            continue
        value, problem = parameter_value(spec, raw)
        if problem:
            errors[f"parameters.{name}"] = [problem]
        else:
            parameters[name] = value
    if errors:
        return {}, [], errors
    argv = [
        "".join(literal + (str(parameters[name]) if name else "") for literal, name in pieces)
        for pieces in _template(tuple(revision.command))
    ]
    return parameters, argv, {}
