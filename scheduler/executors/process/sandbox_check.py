"""What a runner checks at start about the sandbox its jobs will get.

A runner whose job account cannot execute the interpreter (a virtual environment under
root's home, mode 700) or a registered program would fail every such job, and a runner
that cannot give jobs a network namespace of their own would either expose the
database to them or refuse them. It finds out once, at start (`runner_problems`), says
so in its log, records it on its Runner row (`/healthz/` is "degraded" and names the
problem) and refuses such jobs with that cause instead of an exit code 127.

- Network: a forked child tries what a job's child does
  (`process.network_isolation_problem`).
- Interpreter: `<interpreter> -c pass` is started exactly as a job is (the same
  account, network, session and limits), and every directory on the way to the real
  file is checked for search permission as the job's account, to name the one at fault.
- Programs: the first element of the latest revision of every definition a queue of
  the runner's instance types may run, found on the job's PATH as the job's account
  would (in a forked child that switched to it), never run.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

from scheduler.executors.process import run as process
from scheduler.executors.run_area import JobAccount, job_path

logger = logging.getLogger(__name__)

PROBE_TIMEOUT_SECONDS = 30
READ_CHUNK = 65536


def in_child(work, account: JobAccount) -> dict:
    """work() in a forked child running as `account`; its JSON answer, or {"error"}."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: only system calls and plain Python, then _exit
        try:
            os.close(read_end)
            if account.uid is not None:
                os.setgroups([])
                os.setresgid(account.gid, account.gid, account.gid)
                os.setresuid(account.uid, account.uid, account.uid)
            answer = work()
        except BaseException as error:  # noqa: BLE001 - reported to the parent
            answer = {"error": f"{type(error).__name__}: {error}"}
        try:
            os.write(write_end, json.dumps(answer).encode())
        finally:
            os._exit(0)
    os.close(write_end)
    chunks = []
    while chunk := os.read(read_end, READ_CHUNK):
        chunks.append(chunk)
    os.close(read_end)
    os.waitpid(pid, 0)
    try:
        return json.loads(b"".join(chunks) or b"{}")
    except ValueError:
        return {"error": "the check's child gave no answer"}


def _unsearchable_directory(path: str) -> str | None:
    """The first directory on the way to `path` (symlinks followed) the calling account
    cannot search, or None."""
    real = Path(os.path.realpath(path))
    for directory in [*reversed(real.parents)]:
        if not os.access(directory, os.X_OK):
            return str(directory)
    return None


def _explain(path: str, account_name: str) -> str:
    """Why `path` cannot be executed by the calling account (it is run as that one)."""
    blocked = _unsearchable_directory(path)
    if blocked is not None:
        return f"{blocked} is not searchable by {account_name}"
    if not os.path.exists(path):
        return "no such file"
    return "not executable by it"


def _account_name(account: JobAccount) -> str:
    if account.uid is None:
        return f"the runner's own account (uid {os.geteuid()})"
    return account.name or f"uid {account.uid}"


def interpreter_problem(account: JobAccount, interpreter: str) -> str | None:
    """None when the job's account can run `interpreter -c pass` in the sandbox."""
    name = _account_name(account)
    isolate = process.network_isolation_problem() is None
    try:
        probe = process.spawn(
            [interpreter, "-c", "pass"],
            env={"PATH": job_path(), "LANG": "C.UTF-8"},
            cwd=Path("/"),
            stdout=subprocess.PIPE,
            account=account,
            isolate=isolate,
        )
        output, _ = probe.communicate(timeout=PROBE_TIMEOUT_SECONDS)
        code = probe.returncode
    except subprocess.TimeoutExpired:
        probe.kill()
        probe.communicate()
        return f"{interpreter} -c pass did not finish in {PROBE_TIMEOUT_SECONDS} s as {name}"
    except OSError as error:
        answer = in_child(lambda: {"why": _explain(interpreter, name)}, account)
        why = answer.get("why") or answer.get("error") or error.strerror
        return f"{name} cannot execute the interpreter {interpreter}: {why}"
    if code != 0:
        lines = (output or b"").decode(errors="replace").strip().splitlines()
        return f"{interpreter} -c pass exits {code} as {name}" + (f": {lines[-1]}" if lines else "")
    return None


def registered_programs(instance_types: Iterable[str]) -> list[str]:
    """The program of the latest revision of every live definition that a queue with
    capacity of these instance types runs as a real process."""
    from fleet.models import JobDefinitionRevision
    from scheduler.executors import executor_names

    latest: dict[int, list] = {}
    rows = (
        JobDefinitionRevision.objects.filter(
            definition__retired_at__isnull=True,
            definition__queues__executor__in=executor_names(runs_programs=True),
            definition__queues__capacities__instance_type__name__in=list(instance_types),
        )
        .order_by("definition_id", "revision")
        .values_list("definition_id", "command")
    )
    for definition_id, command in rows:
        latest[definition_id] = command
    return sorted({command[0] for command in latest.values() if command})


def program_problems(account: JobAccount, programs: Iterable[str]) -> list[str]:
    """One sentence per program the job's account cannot execute from the job's PATH."""
    programs = list(programs)
    if not programs:
        return []
    name = _account_name(account)
    path = job_path()

    def check() -> dict:
        missing = {}
        for program in programs:
            if "/" in program:
                if not os.access(program, os.X_OK):
                    missing[program] = _explain(program, name)
            elif shutil.which(program, path=path) is None:
                missing[program] = f"not found on the jobs' PATH ({path}) or not executable"
        return {"missing": missing}

    answer = in_child(check, account)
    if "error" in answer:
        return [f"could not check the registered programs as {name}: {answer['error']}"]
    return [
        f"{name} cannot execute the registered program {program}: {why}"
        for program, why in sorted(answer["missing"].items())
    ]


def runner_problems(
    *,
    account: JobAccount,
    instance_types: Iterable[str],
    interpreter: str | None = None,
) -> list[str]:
    """Everything this runner cannot do for its jobs, one sentence each."""
    problems = []
    isolation = process.network_isolation_problem()
    if isolation is not None and not process.allow_host_network():
        problems.append(f"{isolation}: jobs without network access are refused")
    elif isolation is not None:
        logger.warning("%s: RUNNER_ALLOW_HOST_NETWORK=1 runs jobs on its network", isolation)
    interpreter = interpreter or sys.executable
    problem = interpreter_problem(account, interpreter)
    if problem is not None:
        problems.append(problem)
    problems.extend(program_problems(account, registered_programs(instance_types)))
    return problems
