"""Loading and validating scenario documents (the JSON of the scenario format).

`validate_policy` is the one implementation of the policy rules: the Django forms,
the API, policy import and the scenario loader all call it, and show its messages
next to the field they name. Messages are short, plain English, and start in lower
case so they read well after the field path (`shares[2].borrow_limit: only allowed
with LEND_AND_BORROW`).

`load_scenario` checks a whole document (policy, jobs, actions, and every policy an
action produces) and returns a frozen `Scenario`, or raises `ScenarioError` listing
all problems. Besides the fields of the format it accepts a job field
`protected_until` (seconds; see `scheduling`), and it ignores the top-level
annotations `expect` and `source` that worked examples carry.

Any JSON value may stand where a field expects another kind: a reference (a share, a
job, an instance type, an action type) is looked up only once it is known to be text,
and messages quote only text, shortened, never a value of another kind. Whole numbers
are bounded by `MAX_INTEGER`, the largest JSON interoperates exactly (I-JSON), which
also keeps every sum the simulation forms far from Python's 4,300-digit limit on
writing integers. `parse_json` turns the bytes of a document into JSON with every
failure (bad UTF-8, bad JSON, too deep a nesting, an overlong integer) a problem that
says where.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from .contracts import CONTRACT_FIELDS, contract_problems
from .strategies import spoken_list, strategies_that
from .types import (
    MAX_INTEGER,
    STRATEGIES,
    JobSpec,
    Problem,
    QueueSpec,
    Scenario,
    ScenarioError,
    SetCapacity,
    SetPriority,
    ShareSpec,
    Terminate,
    UpdateShare,
)

MAX_INSTANCE_TYPES = 5
MAX_SHARES = 20
MAX_PRIORITY = 9999
STATES = ("ENABLED", "DISABLED")
# The strategies that take a borrow limit.
BORROWING = strategies_that(takes_borrow_limit=True)
# Past this depth a parse that ran out of stack reports where the nesting went wrong.
MAX_NESTING = 100
# Longer integer literals are beyond MAX_INTEGER whatever their digits.
_MAX_INT_LITERAL = len(str(MAX_INTEGER)) + 1
_SHOWN = 60

_QUEUE_FIELDS = {"capacity", "default_preemption_retries", "runnable_time_limit"}
_SHARE_FIELDS = {
    "name",
    "capacity_limits",
    "strategy",
    "borrow_limit",
    "in_share_preemption",
    "state",
}
# With the interruption contract's (engine.contracts.CONTRACT_FIELDS): a document
# naming any of those is a v2 document.
_JOB_FIELDS = {
    "id",
    "share",
    "priority",
    "instance_type",
    "instances",
    "submit_at",
    "duration",
    "checkpoint_interval",
    "restart_overhead",
    "preemption_retries",
    "protected_until",
} | set(CONTRACT_FIELDS)
_ACTION_FIELDS = {
    "set_priority": {"at", "type", "job", "priority"},
    "update_share": {"at", "type", "share"} | (_SHARE_FIELDS - {"name"}),
    "set_capacity": {"at", "type", "capacity"},
    "terminate": {"at", "type", "job"},
}
_DOCUMENT_FIELDS = {"name", "description", "queue", "shares", "jobs", "actions"}
_ANNOTATIONS = {"expect", "source"}


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _text(value: Any) -> str | None:
    """`value` if it is text, else None: what a name or a reference must be."""
    return value if isinstance(value, str) else None


def _name_problem(value: Any, what: str, *, blank_ok: bool = True) -> str | None:
    """Why `value` cannot be a name or id (printed as it is, so it must encode), or None."""
    if not isinstance(value, str) or not (value if blank_ok else value.strip()):
        return f"must be a non-empty {what}"
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return "must be text without lone surrogates (\\ud800-\\udfff)"
    return None


def _shown(text: str) -> str:
    """Text as a message quotes it: shortened, and lone surrogates escaped."""
    if len(text) > _SHOWN:
        text = text[: _SHOWN - 1] + "…"
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _check_int(
    problems: list[Problem], path: str, value: Any, *, minimum: int, maximum: int | None = None
) -> bool:
    """Append a problem unless `value` is a whole number in range; say whether it was."""
    if not _is_int(value):
        problems.append(Problem(path, "must be a whole number"))
        return False
    if maximum is not None and not minimum <= value <= maximum:
        problems.append(Problem(path, f"must be between {minimum} and {maximum}"))
        return False
    if value < minimum:
        problems.append(Problem(path, f"must be at least {minimum}"))
        return False
    if value > MAX_INTEGER:
        problems.append(Problem(path, f"must be at most {MAX_INTEGER}"))
        return False
    return True


def _check_optional_int(
    problems: list[Problem], obj: Mapping, key: str, path: str, *, minimum: int
) -> None:
    value = obj.get(key)
    if value is not None:
        _check_int(problems, f"{path}.{key}", value, minimum=minimum)


def _unknown_fields(problems: list[Problem], obj: Mapping, allowed: set[str], path: str) -> None:
    for key in sorted(set(obj) - allowed, key=str):
        key = _shown(key)
        problems.append(Problem(f"{path}.{key}" if path else key, "unknown field"))


def check_capacity(capacity: Any, path: str) -> list[Problem]:
    """Problems of a queue capacity map (1 to 5 instance types, each with at least 1)."""
    problems: list[Problem] = []
    if not isinstance(capacity, dict):
        return [Problem(path, "must map instance types to instance counts")]
    if not 1 <= len(capacity) <= MAX_INSTANCE_TYPES:
        problems.append(Problem(path, f"must list 1 to {MAX_INSTANCE_TYPES} instance types"))
    for instance_type, count in capacity.items():
        _check_int(problems, f"{path}.{_shown(instance_type)}", count, minimum=1)
    return problems


def _queue_problems(queue: Any) -> list[Problem]:
    if not isinstance(queue, dict):
        return [Problem("queue", "must be an object")]
    problems: list[Problem] = []
    _unknown_fields(problems, queue, _QUEUE_FIELDS, "queue")
    if "capacity" not in queue:
        problems.append(Problem("queue.capacity", "is required"))
    else:
        problems += check_capacity(queue["capacity"], "queue.capacity")
    _check_optional_int(problems, queue, "default_preemption_retries", "queue", minimum=0)
    _check_optional_int(problems, queue, "runnable_time_limit", "queue", minimum=1)
    return problems


def share_problems(share: Any, path: str, queue_types: set[str] | None) -> list[Problem]:
    """Problems of one share object; `queue_types` None skips the in-the-queue check."""
    if not isinstance(share, dict):
        return [Problem(path, "must be an object")]
    problems: list[Problem] = []
    _unknown_fields(problems, share, _SHARE_FIELDS, path)
    name_problem = _name_problem(share.get("name"), "name", blank_ok=False)
    if name_problem:
        problems.append(Problem(f"{path}.name", name_problem))
    limits = share.get("capacity_limits")
    if not isinstance(limits, dict):
        problems.append(
            Problem(f"{path}.capacity_limits", "must map instance types to instance counts")
        )
    else:
        if not 1 <= len(limits) <= MAX_INSTANCE_TYPES:
            problems.append(
                Problem(
                    f"{path}.capacity_limits",
                    f"must list 1 to {MAX_INSTANCE_TYPES} instance types",
                )
            )
        for instance_type, count in limits.items():
            shown = _shown(instance_type)
            field_path = f"{path}.capacity_limits.{shown}"
            if queue_types is not None and instance_type not in queue_types:
                problems.append(Problem(field_path, f"instance type '{shown}' is not in the queue"))
            _check_int(problems, field_path, count, minimum=1)
    strategy = share.get("strategy")
    if strategy not in STRATEGIES:
        problems.append(Problem(f"{path}.strategy", f"must be {spoken_list(STRATEGIES)}"))
    borrow_limit = share.get("borrow_limit", -1)
    if not _is_int(borrow_limit):
        problems.append(Problem(f"{path}.borrow_limit", "must be a whole number"))
    elif borrow_limit > MAX_INTEGER:
        problems.append(Problem(f"{path}.borrow_limit", f"must be at most {MAX_INTEGER}"))
    elif borrow_limit < -1:
        problems.append(
            Problem(f"{path}.borrow_limit", "must be -1 (unlimited) or a percent of at least 0")
        )
    elif borrow_limit != -1 and strategy in STRATEGIES and strategy not in BORROWING:
        problems.append(
            Problem(f"{path}.borrow_limit", f"only allowed with {spoken_list(BORROWING)}")
        )
    if not isinstance(share.get("in_share_preemption", False), bool):
        problems.append(Problem(f"{path}.in_share_preemption", "must be true or false"))
    if share.get("state", "ENABLED") not in STATES:
        problems.append(Problem(f"{path}.state", "must be ENABLED or DISABLED"))
    return problems


def validate_policy(queue: dict, shares: list[dict]) -> list[Problem]:
    """Every problem of a queue and its shares, in scenario-format JSON; empty when valid."""
    problems = _queue_problems(queue)
    capacity = queue.get("capacity") if isinstance(queue, dict) else None
    queue_types = set(capacity) if isinstance(capacity, dict) else None
    if not isinstance(shares, list):
        return [*problems, Problem("shares", "must be a list of shares")]
    if not shares:
        problems.append(Problem("shares", "at least 1 share per queue"))
    elif len(shares) > MAX_SHARES:
        problems.append(Problem("shares", f"at most {MAX_SHARES} shares per queue"))
    seen: set[str] = set()
    for index, share in enumerate(shares):
        problems += share_problems(share, f"shares[{index}]", queue_types)
        name = _text(share.get("name")) if isinstance(share, dict) else None
        if name is not None:
            if name in seen:
                problems.append(
                    Problem(f"shares[{index}].name", f"duplicate share name '{_shown(name)}'")
                )
            seen.add(name)
    return problems


def queue_from_dict(queue: Mapping) -> QueueSpec:
    return QueueSpec(
        capacity=queue["capacity"],
        default_preemption_retries=queue.get("default_preemption_retries"),
        runnable_time_limit=queue.get("runnable_time_limit"),
    )


def share_from_dict(share: Mapping) -> ShareSpec:
    return ShareSpec(
        name=share["name"],
        capacity_limits=share["capacity_limits"],
        strategy=share["strategy"],
        borrow_limit=share.get("borrow_limit", -1),
        in_share_preemption=share.get("in_share_preemption", False),
        enabled=share.get("state", "ENABLED") == "ENABLED",
    )


def _job_problems(
    job: Any, path: str, share_names: set[str], queue_types: set[str] | None
) -> list[Problem]:
    if not isinstance(job, dict):
        return [Problem(path, "must be an object")]
    problems: list[Problem] = []
    _unknown_fields(problems, job, _JOB_FIELDS, path)
    id_problem = _name_problem(job.get("id"), "id")
    if id_problem:
        problems.append(Problem(f"{path}.id", id_problem))
    share = _text(job.get("share"))
    if share is None:
        problems.append(Problem(f"{path}.share", "must be the name of a share"))
    elif share not in share_names:
        problems.append(Problem(f"{path}.share", f"share '{_shown(share)}' does not exist"))
    if "priority" in job:
        _check_int(problems, f"{path}.priority", job["priority"], minimum=0, maximum=MAX_PRIORITY)
    instance_type = _text(job.get("instance_type"))
    if instance_type is None:
        problems.append(Problem(f"{path}.instance_type", "must be the name of an instance type"))
    elif queue_types is not None and instance_type not in queue_types:
        problems.append(
            Problem(
                f"{path}.instance_type",
                f"instance type '{_shown(instance_type)}' is not in the queue",
            )
        )
    for key, minimum in (("instances", 1), ("submit_at", 0), ("duration", 1)):
        if key not in job:
            problems.append(Problem(f"{path}.{key}", "is required"))
        else:
            _check_int(problems, f"{path}.{key}", job[key], minimum=minimum)
    _check_optional_int(problems, job, "checkpoint_interval", path, minimum=1)
    _check_optional_int(problems, job, "restart_overhead", path, minimum=0)
    _check_optional_int(problems, job, "preemption_retries", path, minimum=0)
    _check_optional_int(problems, job, "protected_until", path, minimum=0)
    # The interruption contract (spec v2, V1): null is the same as absent.
    contract = {key: job[key] for key in CONTRACT_FIELDS if key in job}
    for key, message in contract_problems(contract).items():
        problems.append(Problem(f"{path}.{key}", message))
    return problems


def _job_from_dict(job: Mapping, default_retries: int | None) -> JobSpec:
    retries = job.get("preemption_retries")
    return JobSpec(
        id=job["id"],
        share=job["share"],
        priority=job.get("priority", 0),
        instance_type=job["instance_type"],
        instances=job["instances"],
        submit_at=job["submit_at"],
        duration=job["duration"],
        checkpoint_interval=job.get("checkpoint_interval"),
        restart_overhead=job.get("restart_overhead") or 0,
        preemption_retries=default_retries if retries is None else retries,
        protected_until=job.get("protected_until"),
        min_runtime_reclaim=job.get("min_runtime_reclaim") or 0,
        min_runtime_preempt=job.get("min_runtime_preempt") or 0,
        grace=job.get("grace") or 0,
        checkpoint_on_notice=job.get("checkpoint_on_notice"),
    )


class _ActionReader:
    """Checks actions in the order they apply, tracking the policy each one leaves."""

    def __init__(self, queue: Mapping, shares: list[Mapping], jobs: Mapping[str, Mapping]):
        self.capacity = dict(queue["capacity"])
        self.shares = {share["name"]: dict(share) for share in shares}
        self.jobs = jobs
        self.problems: list[Problem] = []

    def read(self, action: Mapping, path: str):
        kind = action["type"]
        if kind == "set_priority":
            return self._set_priority(action, path)
        if kind == "terminate":
            return self._terminate(action, path)
        if kind == "update_share":
            return self._update_share(action, path)
        return self._set_capacity(action, path)

    def _known_job(self, action: Mapping, path: str) -> Mapping | None:
        job_id = _text(action.get("job"))
        if job_id is None:
            self.problems.append(Problem(f"{path}.job", "must be the id of a job"))
            return None
        job = self.jobs.get(job_id)
        if job is None:
            self.problems.append(Problem(f"{path}.job", f"job '{_shown(job_id)}' does not exist"))
        return job

    def _set_priority(self, action: Mapping, path: str):
        job = self._known_job(action, path)
        ok = _check_int(
            self.problems,
            f"{path}.priority",
            action.get("priority"),
            minimum=0,
            maximum=MAX_PRIORITY,
        )
        if job is not None and ok:
            return SetPriority(at=action["at"], job=job["id"], priority=action["priority"])
        return None

    def _terminate(self, action: Mapping, path: str):
        job = self._known_job(action, path)
        if job is None:
            return None
        if action["at"] <= job["submit_at"]:
            self.problems.append(
                Problem(
                    f"{path}.at",
                    f"job '{_shown(job['id'])}' is only submitted at t={job['submit_at']}; "
                    "terminate it after that",
                )
            )
            return None
        return Terminate(at=action["at"], job=job["id"])

    def _update_share(self, action: Mapping, path: str):
        name = _text(action.get("share"))
        if name is None:
            self.problems.append(Problem(f"{path}.share", "must be the name of a share"))
            return None
        current = self.shares.get(name)
        if current is None:
            self.problems.append(Problem(f"{path}.share", f"share '{_shown(name)}' does not exist"))
            return None
        changes = {
            key: value for key, value in action.items() if key not in ("at", "type", "share")
        }
        if not changes:
            self.problems.append(Problem(path, "names nothing to change"))
            return None
        merged = {**current, **changes}
        if merged.get("strategy") not in BORROWING and "borrow_limit" not in changes:
            # A share that stops borrowing drops its old borrow limit rather than failing.
            merged.pop("borrow_limit", None)
        problems = share_problems(merged, path, set(self.capacity))
        if problems:
            self.problems += problems
            return None
        self.shares[name] = merged
        return UpdateShare(at=action["at"], share=share_from_dict(merged))

    def _set_capacity(self, action: Mapping, path: str):
        capacity = action.get("capacity")
        problems = check_capacity(capacity, f"{path}.capacity")
        if problems:
            self.problems += problems
            return None
        for share in self.shares.values():
            for instance_type in share["capacity_limits"]:
                if instance_type not in capacity:
                    self.problems.append(
                        Problem(
                            f"{path}.capacity",
                            f"drops instance type '{_shown(instance_type)}', which share "
                            f"'{_shown(share['name'])}' still has a limit for",
                        )
                    )
                    return None
        self.capacity = dict(capacity)
        return SetCapacity(at=action["at"], capacity=capacity)


def _action_problems(action: Any, path: str) -> list[Problem]:
    if not isinstance(action, dict):
        return [Problem(path, "must be an object")]
    kind = _text(action.get("type"))
    if kind not in _ACTION_FIELDS:
        return [
            Problem(
                f"{path}.type",
                "must be set_priority, update_share, set_capacity or terminate",
            )
        ]
    problems: list[Problem] = []
    _unknown_fields(problems, action, _ACTION_FIELDS[kind], path)
    if "at" not in action:
        problems.append(Problem(f"{path}.at", "is required"))
    else:
        _check_int(problems, f"{path}.at", action["at"], minimum=0)
    return problems


def load_scenario(doc: Any) -> Scenario:  # noqa: C901
    """Validate a scenario document and return it frozen; raise `ScenarioError` on problems."""
    if not isinstance(doc, dict):
        raise ScenarioError([Problem("document", "must be a JSON object")])
    problems: list[Problem] = []
    _unknown_fields(problems, doc, _DOCUMENT_FIELDS | _ANNOTATIONS, "")
    name = doc.get("name")
    name_problem = _name_problem(name, "name")
    if name_problem:
        problems.append(Problem("name", name_problem))
    if not isinstance(doc.get("description", ""), str):
        problems.append(Problem("description", "must be text"))
    if "queue" not in doc:
        problems.append(Problem("queue", "is required"))
    if "shares" not in doc:
        problems.append(Problem("shares", "is required"))
    queue, shares = doc.get("queue", {}), doc.get("shares", [])
    policy_problems = validate_policy(queue, shares)
    problems += policy_problems
    share_names = (
        {s["name"] for s in shares if isinstance(s, dict) and _text(s.get("name")) is not None}
        if isinstance(shares, list)
        else set()
    )
    capacity = queue.get("capacity") if isinstance(queue, dict) else None
    queue_types = set(capacity) if isinstance(capacity, dict) else None

    jobs = doc.get("jobs", [])
    jobs_by_id: dict[str, Mapping] = {}
    if not isinstance(jobs, list):
        problems.append(Problem("jobs", "must be a list of jobs"))
        jobs = []
    for index, job in enumerate(jobs):
        job_problems = _job_problems(job, f"jobs[{index}]", share_names, queue_types)
        problems += job_problems
        if isinstance(job, dict) and isinstance(job.get("id"), str):
            if job["id"] in jobs_by_id:
                problems.append(
                    Problem(f"jobs[{index}].id", f"duplicate job id '{_shown(job['id'])}'")
                )
            elif not job_problems:
                jobs_by_id[job["id"]] = job

    actions = doc.get("actions", [])
    if not isinstance(actions, list):
        problems.append(Problem("actions", "must be a list of actions"))
        actions = []
    well_formed = []
    for index, action in enumerate(actions):
        action_problems = _action_problems(action, f"actions[{index}]")
        problems += action_problems
        if not action_problems:
            well_formed.append((action["at"], index, action))
    if problems:
        raise ScenarioError(problems)

    # Actions apply in time order, then listed order; each must leave a valid policy.
    reader = _ActionReader(queue, shares, jobs_by_id)
    read_actions = []
    for _, index, action in sorted(well_formed, key=lambda item: (item[0], item[1])):
        read_actions.append(reader.read(action, f"actions[{index}]"))
    if reader.problems:
        raise ScenarioError(reader.problems)

    queue_spec = queue_from_dict(queue)
    return Scenario(
        name=name,
        description=doc.get("description", ""),
        queue=queue_spec,
        shares=tuple(share_from_dict(share) for share in shares),
        jobs=tuple(_job_from_dict(job, queue_spec.default_preemption_retries) for job in jobs),
        actions=tuple(read_actions),
        contracts=any(key in job for job in jobs for key in CONTRACT_FIELDS),
    )


# -- reading a document --------------------------------------------------------------------

_NESTING_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]')


def _line_column(text: str | bytes, offset: int) -> str:
    newline = "\n" if isinstance(text, str) else b"\n"
    line = text.count(newline, 0, offset) + 1
    return f"line {line} column {offset - (text.rfind(newline, 0, offset) + 1) + 1}"


def _too_deep(text: str) -> str:
    """Where the nesting of arrays and objects first passes MAX_NESTING levels."""
    depth = 0
    for match in _NESTING_TOKENS.finditer(text):
        token = match.group()
        if token in ("[", "{"):
            depth += 1
            if depth > MAX_NESTING:
                return f"past {MAX_NESTING} levels at {_line_column(text, match.start())}"
        elif token in ("]", "}"):
            depth -= 1
    return "deeper than this reader can follow"


def _parse_int(literal: str) -> int:
    # Python refuses to read integers of more than 4,300 digits; any literal this long
    # is out of range anyway, so a value just past the bound stands in for it and
    # validation names the field.
    if len(literal.lstrip("-")) > _MAX_INT_LITERAL:
        return -(MAX_INTEGER + 1) if literal.startswith("-") else MAX_INTEGER + 1
    return int(literal)


def parse_json(data: bytes | str) -> Any:
    """The JSON value of a document's UTF-8 bytes (a leading BOM is skipped) or text.

    Raises `ScenarioError` with one problem at `document` saying what is wrong and where.
    """
    if isinstance(data, bytes):
        try:
            text = data.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            where = _line_column(data, exc.start)
            message = f"not valid UTF-8: byte 0x{data[exc.start]:02x} at {where}"
            raise ScenarioError([Problem("document", message)]) from None
    else:
        text = data
    try:
        return json.loads(text, parse_int=_parse_int)
    except json.JSONDecodeError as exc:
        message = f"not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
        raise ScenarioError([Problem("document", message)]) from None
    except RecursionError:
        message = f"not valid JSON: arrays or objects nested too deeply, {_too_deep(text)}"
        raise ScenarioError([Problem("document", message)]) from None
