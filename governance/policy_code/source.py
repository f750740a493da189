"""Reading a policy file: YAML or JSON text to plain data, keeping the line of every field.

Every format's parser reads through `load_documents`, so every error names the line
(from the YAML parser's marks, counted from 1) and the field path as the file spells
it (`quotaShares[1].resourceSharingConfiguration.borrowLimit`). A parser collects all
the problems of a file and raises them together in one `PolicyFileError`.

What a file may hold is bounded before it becomes Python objects, so a small hostile
file cannot take a worker's memory or stack: at most MAX_FILE_BYTES of text, nesting at
most MAX_DEPTH levels, and at most MAX_NODES values counting each repetition an alias
makes (a "billion laughs" file of a few hundred bytes expands to billions). No text may
hold a control character (NUL among them) other than tab and line breaks, and no number
may be longer than Python reads (4300 digits).
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

from core.errors import InvalidInput
from core.nesting import MAX_DEPTH, deeper_than

MAX_FILE_BYTES = 1_000_000
MAX_NODES = 100_000  # values in a file, each repetition by an alias counted
# Python reads whole numbers of at most this many digits (sys.get_int_max_str_digits).
_LONG_NUMBER = f"holds a number longer than {sys.get_int_max_str_digits()} digits"
# C0 controls but tab, line feed and carriage return; DEL; C1 controls.
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")


@dataclass(frozen=True)
class FileProblem:
    line: int | None
    field: str
    message: str

    def __str__(self) -> str:
        where = f"line {self.line}: " if self.line else ""
        return f"{where}{self.field}: {self.message}" if self.field else f"{where}{self.message}"


class PolicyFileError(InvalidInput):
    """The file cannot be read as a policy; `problems` name each line and field (`errors`
    holds them by field, "file" for the file as a whole)."""

    def __init__(self, problems: Iterable[FileProblem]):
        self.problems = list(problems)
        errors: dict[str, list[str]] = {}
        for problem in self.problems:
            where = f"line {problem.line}: " if problem.line else ""
            errors.setdefault(problem.field or "file", []).append(f"{where}{problem.message}")
        super().__init__(errors)

    def __str__(self) -> str:
        return "; ".join(str(problem) for problem in self.problems[:5])


@dataclass
class Lines:
    """Field path -> line. A path without its own line takes its closest parent's."""

    by_path: dict[str, int] = field(default_factory=dict)

    def of(self, path: str) -> int | None:
        while True:
            if path in self.by_path:
                return self.by_path[path]
            if not path:
                return None
            path = _parent(path)


def _parent(path: str) -> str:
    cut = max(path.rfind("."), path.rfind("["))
    return path[:cut] if cut > 0 else ""


def child(path: str, key: Any) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else str(key)


@dataclass
class Problems:
    """Collects a file's problems, each placed at the line of the field it names."""

    lines: Lines
    items: list[FileProblem] = field(default_factory=list)

    def add(self, path: str, message: str, *, label: str | None = None) -> None:
        self.items.append(FileProblem(self.lines.of(path), label or path, message))

    def raise_if_any(self) -> None:
        if self.items:
            raise PolicyFileError(self.items)


@dataclass(frozen=True)
class Document:
    data: Any
    lines: Lines


def decode(raw: bytes | str) -> str:
    if isinstance(raw, str):
        return raw
    if len(raw) > MAX_FILE_BYTES:
        raise PolicyFileError(
            [FileProblem(None, "file", f"is larger than {MAX_FILE_BYTES // 1000} kB")]
        )
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise PolicyFileError(
            [FileProblem(None, "file", f"is not UTF-8 text (byte {error.start})")]
        ) from None


def _too_big(line: int | None, message: str) -> PolicyFileError:
    return PolicyFileError([FileProblem(line, "file", message)])


class _BoundedLoader(yaml.SafeLoader):
    """PyYAML's safe loader, refusing while it composes (before any Python object is
    built) a document nested deeper than MAX_DEPTH or holding more than MAX_NODES
    values once its aliases are expanded, and an alias to a node that contains it."""

    def __init__(self, stream):
        super().__init__(stream)
        self._depth = 0
        self._nodes = 0
        self._sizes: dict[int, int] = {}  # id of an anchored node -> values it holds

    def _count(self, values: int, mark) -> None:
        self._nodes += values
        if self._nodes > MAX_NODES:
            raise _too_big(
                mark.line + 1,
                f"holds more than {MAX_NODES} values (counting what its aliases repeat)",
            )

    def compose_node(self, parent, index):
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent):
            node = super().compose_node(parent, index)  # an undefined alias is an error
            size = self._sizes.get(id(node))
            if size is None:
                raise _too_big(
                    event.start_mark.line + 1,
                    f"the alias *{event.anchor} is inside the node it names",
                )
            self._count(size, event.start_mark)
            return node
        self._depth += 1
        if self._depth > MAX_DEPTH:
            raise _too_big(event.start_mark.line + 1, f"is nested deeper than {MAX_DEPTH} levels")
        before = self._nodes
        self._count(1, event.start_mark)
        try:
            node = super().compose_node(parent, index)
        finally:
            self._depth -= 1
        if getattr(event, "anchor", None) is not None:
            self._sizes[id(node)] = self._nodes - before
        return node


def check_json_depth(text: str) -> None:
    """Before json.loads, which recurses once per level and would pass the stack."""
    line = deeper_than(text)
    if line is not None:
        raise _too_big(line, f"is nested deeper than {MAX_DEPTH} levels")


# CloudFormation's YAML short forms: `!Ref X` is {"Ref": X}, `!GetAtt A.B` is
# {"Fn::GetAtt": ["A", "B"]}, any other `!Name v` is {"Fn::Name": v}.
_SHORT_FORM = re.compile(r"^!(?P<name>[A-Za-z]+)$")


def _short_form(node, value) -> dict:
    name = _SHORT_FORM.match(node.tag).group("name")
    if name == "Ref":
        return {"Ref": value}
    if name == "GetAtt" and isinstance(value, str):
        value = value.split(".", 1)
    return {f"Fn::{name}": value}


def load_documents(text: str, *, short_forms: bool = False) -> list[Document]:
    """Every YAML document in `text` (JSON is read as YAML too), with its lines.
    `short_forms`: read CloudFormation's `!Ref`, `!GetAtt`, ... tags as their long form."""
    if len(text) > MAX_FILE_BYTES:
        raise PolicyFileError(
            [FileProblem(None, "file", f"is larger than {MAX_FILE_BYTES // 1000} kB")]
        )
    try:
        loader = _BoundedLoader(text)
    except yaml.YAMLError as error:  # a character YAML does not allow
        raise PolicyFileError([FileProblem(None, "file", f"is not valid YAML: {error}")]) from None
    try:
        nodes = []
        while loader.check_node():
            nodes.append(loader.get_node())
        documents = []
        for node in nodes:
            lines = Lines()
            problems: list[FileProblem] = []
            data = _convert(loader, node, "", lines, problems, short_forms=short_forms)
            if problems:
                raise PolicyFileError(problems)
            documents.append(Document(data, lines))
        return documents
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        line = mark.line + 1 if mark else None
        message = error.problem or error.context or "cannot be read"
        raise PolicyFileError(
            [FileProblem(line, "file", f"is not valid YAML: {message}")]
        ) from None
    except yaml.YAMLError as error:
        raise PolicyFileError([FileProblem(None, "file", f"is not valid YAML: {error}")]) from None
    finally:
        loader.dispose()


def loads_json(text: str) -> Any:
    """json.loads within the file's bounds: nesting (before it recurses) and the length
    of a number (Python reads at most sys.get_int_max_str_digits() digits). A syntax
    error is left to the caller, as json.JSONDecodeError."""
    check_json_depth(text)
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        raise
    except ValueError:
        raise _too_big(None, _LONG_NUMBER) from None


def load_json_document(text: str) -> Document:
    """One JSON document, with JSON's own syntax errors (by line) and YAML's line marks."""
    try:
        loads_json(text)
    except json.JSONDecodeError as error:
        raise PolicyFileError(
            [FileProblem(error.lineno, "file", f"is not valid JSON: {error.msg}")]
        ) from None
    documents = load_documents(text)
    if len(documents) != 1:
        raise PolicyFileError([FileProblem(None, "file", "must hold one JSON object")])
    return documents[0]


def _convert(
    loader, node, path: str, lines: Lines, problems: list[FileProblem], *, short_forms=False
) -> Any:
    lines.by_path.setdefault(path, node.start_mark.line + 1)
    if short_forms and _SHORT_FORM.match(node.tag or ""):
        if isinstance(node, yaml.ScalarNode):
            inner = yaml.ScalarNode("tag:yaml.org,2002:str", node.value, node.start_mark)
        else:
            inner = type(node)(
                "tag:yaml.org,2002:" + ("seq" if isinstance(node, yaml.SequenceNode) else "map"),
                node.value,
                node.start_mark,
            )
        return _short_form(node, _convert(loader, inner, path, lines, problems, short_forms=True))
    if isinstance(node, yaml.MappingNode):
        result: dict = {}
        for key_node, value_node in node.value:
            try:
                key = loader.construct_object(key_node, deep=True)
            except ValueError:  # an integer longer than Python reads
                key = None
            if not isinstance(key, str | int) or isinstance(key, bool):
                problems.append(
                    FileProblem(key_node.start_mark.line + 1, path or "file", "keys must be text")
                )
                continue
            key = str(key)
            if found := _CONTROL.search(key):
                problems.append(
                    FileProblem(
                        key_node.start_mark.line + 1,
                        path or "file",
                        f"a key must not contain control characters ({_escaped(found)})",
                    )
                )
                continue
            key_path = child(path, key)
            if key in result:
                problems.append(
                    FileProblem(key_node.start_mark.line + 1, key_path, "is given twice")
                )
                continue
            lines.by_path[key_path] = key_node.start_mark.line + 1
            result[key] = _convert(
                loader, value_node, key_path, lines, problems, short_forms=short_forms
            )
        return result
    if isinstance(node, yaml.SequenceNode):
        return [
            _convert(loader, item, child(path, index), lines, problems, short_forms=short_forms)
            for index, item in enumerate(node.value)
        ]
    try:
        value = loader.construct_object(node, deep=True)
    except ValueError:  # an integer longer than Python reads
        problems.append(FileProblem(node.start_mark.line + 1, path or "file", _LONG_NUMBER))
        return None
    if isinstance(value, str) and (found := _CONTROL.search(value)):
        problems.append(
            FileProblem(
                node.start_mark.line + 1,
                path or "file",
                f"must not contain control characters ({_escaped(found)})",
            )
        )
    return value


def _escaped(found: re.Match) -> str:
    return f"\\x{ord(found.group()):02x} at character {found.start() + 1}"


# Typed reads: each records a problem naming the field and returns None when it fails.


def is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def mapping(problems: Problems, value: Any, path: str) -> Mapping | None:
    if isinstance(value, dict):
        return value
    problems.add(path, "must be a mapping of fields")
    return None


def sequence(problems: Problems, value: Any, path: str) -> list | None:
    if isinstance(value, list):
        return value
    problems.add(path, "must be a list")
    return None


def text(problems: Problems, value: Any, path: str, *, required: bool = True) -> str | None:
    if isinstance(value, str) and (value.strip() or not required):
        return value
    problems.add(path, "must be a non-empty text" if required else "must be a text")
    return None


def whole(problems: Problems, value: Any, path: str, *, minimum: int) -> int | None:
    if not is_int(value):
        problems.add(path, "must be a whole number")
        return None
    if value < minimum:
        problems.add(path, f"must be at least {minimum}")
        return None
    return value


def choice(problems: Problems, value: Any, path: str, choices: Iterable[str]) -> str | None:
    choices = tuple(choices)
    if value in choices:
        return value
    problems.add(path, f"must be one of {', '.join(choices)}")
    return None


def unknown_fields(problems: Problems, obj: Mapping, allowed: Iterable[str], path: str) -> None:
    allowed = set(allowed)
    for key in obj:
        if key not in allowed:
            problems.add(child(path, key), f"unknown field; expected {', '.join(sorted(allowed))}")


def required(problems: Problems, obj: Mapping, key: str, path: str) -> bool:
    if key in obj:
        return True
    problems.add(child(path, key), "is required", label=child(path, key))
    return False
