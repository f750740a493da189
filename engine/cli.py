"""The engine's command line: `python -m engine simulate FILE|- [--pretty|--summary] [-o OUT]`.

Replays a scenario document and writes the result document (or the summary table) with
no Django. `manage.py simulate` is a thin wrapper over `simulate_command`, so both print
the same bytes and the same messages: unusable input (a file that cannot be read, bad
UTF-8 or JSON, a document breaking the format) exits with status 2 and a message
naming the problem on stderr.

Reading and writing use orjson when it is installed, the only module of the engine
allowed a package outside the standard library; the result is the same as with the
standard library, which stays the reference and the fallback:

- orjson's reading is kept only if the loader accepts it and the annotations the loader
  ignores (`expect`, `source`) nest at most `MAX_NESTING` levels. Where orjson reads
  otherwise than `json`, it refuses the document (NaN, 1e400, a lone surrogate, more
  than 1,024 levels), or makes a value the loader rejects (an integer beyond 64 bits
  becomes a float), or accepts a nesting `json` cannot follow. Anything not kept is read
  again by `parse_json`, so every verdict and message is the standard library's.
- orjson writes the result only if its bytes are those of `dump_result`: its compact
  and 2-space layouts and sorted keys are `json.dumps`', and of the strings it writes
  only non-ASCII and DEL (0x7f) differ, which `json.dumps` escapes; the result holds no
  floats. Output with a byte of 0x7f or above, or an integer beyond 64 bits, is written
  by `json.dumps` instead.
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
from typing import Any, BinaryIO, TextIO

from .results import dump_json, format_summary, result_to_json
from .simulator import simulate
from .types import Scenario, ScenarioError
from .validation import _ANNOTATIONS, MAX_NESTING, load_scenario, parse_json

try:
    import orjson
except ImportError:  # the same bytes by the json module: reading ~3x, writing ~6x slower
    orjson = None

BOM = b"\xef\xbb\xbf"


class InputError(Exception):
    """Unusable input: the message names the problem; the command exits with status 2."""


def read_input(path: str, stdin: Any = None) -> bytes | str:
    """The bytes at `path` (`-` = stdin, or text if stdin is a text stream without bytes)."""
    try:
        if path == "-":
            stdin = sys.stdin if stdin is None else stdin
            # An in-process caller may swap in a text stream, with no bytes underneath.
            return getattr(stdin, "buffer", stdin).read()
        with open(path, "rb") as handle:
            return handle.read()
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {exc.strerror}") from exc


def _deeper_than(value: Any, depth: int) -> bool:
    """Whether arrays and objects nest more than `depth` levels inside `value`."""
    level = [value]
    for _ in range(depth + 1):
        level = [
            child
            for item in level
            if isinstance(item, (dict, list))
            for child in (item.values() if isinstance(item, dict) else item)
        ]
        if not level:
            return False
    return True


def _fast_scenario(data: bytes) -> Scenario | None:
    """The scenario orjson reads from `data`, or None where `parse_json` must judge."""
    try:
        document = orjson.loads(data[len(BOM) :] if data.startswith(BOM) else data)
    except orjson.JSONDecodeError:
        return None
    if isinstance(document, dict) and any(
        _deeper_than(document[key], MAX_NESTING) for key in _ANNOTATIONS if key in document
    ):
        return None
    try:
        return load_scenario(document)
    except ScenarioError:
        return None


def read_scenario(data: bytes | str, path: str) -> Scenario:
    """The scenario of a document's bytes (or text); InputError naming the problem if unusable."""
    if orjson is not None and isinstance(data, bytes):
        scenario = _fast_scenario(data)
        if scenario is not None:
            return scenario
    try:
        document = parse_json(data)
    except ScenarioError as exc:
        raise InputError(f"{path}: {exc.problems[0].message}") from exc
    try:
        return load_scenario(document)
    except ScenarioError as exc:
        raise InputError("\n".join(str(problem) for problem in exc.problems)) from exc


def dump_bytes(document: dict, pretty: bool = False) -> bytes:
    """`dump_json(document, pretty)` and a newline, as UTF-8 bytes (orjson where identical)."""
    if orjson is not None:
        option = orjson.OPT_SORT_KEYS | orjson.OPT_APPEND_NEWLINE
        if pretty:
            option |= orjson.OPT_INDENT_2
        try:
            output = orjson.dumps(document, option=option)
        except TypeError:  # an integer beyond 64 bits
            pass
        else:
            if output.isascii() and b"\x7f" not in output:
                return output
    return (dump_json(document, pretty) + "\n").encode()


def simulate_command(
    path: str, *, pretty: bool = False, summary: bool = False, stdin: Any = None
) -> bytes:
    """What `simulate FILE` prints: the result document (or the summary) and a newline.

    Raises InputError on unusable input. The one implementation of the command, for
    `python -m engine simulate` and `manage.py simulate` alike.
    """
    scenario = read_scenario(read_input(path, stdin), path)
    result = simulate(scenario)
    if summary:
        return (format_summary(result) + "\n").encode()
    return dump_bytes(result_to_json(result), pretty)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m engine", description="The scheduling engine, without Django."
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    command = commands.add_parser(
        "simulate",
        help="replay a scenario document and print the result JSON",
        description="Replay a scenario document and print the result JSON "
        "(see the scenario format). Unusable input exits with status 2.",
    )
    command.add_argument("file", help="scenario JSON file, or - for stdin")
    layout = command.add_mutually_exclusive_group()
    layout.add_argument("--pretty", action="store_true", help="indent the JSON")
    layout.add_argument(
        "--summary", action="store_true", help="print a table per share instead of the JSON"
    )
    command.add_argument("-o", "--output", metavar="OUT", help="write to OUT, not stdout")
    return parser


def main(
    argv: list[str] | None = None,
    *,
    stdin: Any = None,
    stdout: BinaryIO | None = None,
    stderr: TextIO | None = None,
) -> int:
    """Run the command line; return the exit status (2 for unusable input)."""
    options = build_parser().parse_args(argv)
    stderr = sys.stderr if stderr is None else stderr
    # A one-shot process: what it builds is trees that reference counting frees, and
    # the collector would only scan them again and again as they grow.
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        output = simulate_command(
            options.file, pretty=options.pretty, summary=options.summary, stdin=stdin
        )
        if options.output is None:
            target = sys.stdout.buffer if stdout is None else stdout
            target.write(output)
            target.flush()
        else:
            try:
                with open(options.output, "wb") as handle:
                    handle.write(output)
            except OSError as exc:
                raise InputError(f"{options.output}: cannot write: {exc.strerror}") from exc
    except InputError as exc:
        print(f"error: {exc}", file=stderr)
        return 2
    except BrokenPipeError:
        # The reader left (`| head`): say nothing, and keep the exit from writing again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    finally:
        if gc_was_enabled:
            gc.enable()
    return 0
