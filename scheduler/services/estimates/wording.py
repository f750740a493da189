"""The instants and names of blocker sentences. A stored sentence carries each instant in
the queue's clock (`mark`), printed when it is read, in the reader's time zone and day
(`print_instants`, `instant_printer`); jobs are named "job <pk> (<name>)" (`namer`).
"""

from __future__ import annotations

import datetime as dt
import re

from django.utils import timezone

from fleet.bridge import job_pk
from scheduler.services.estimates.clock import Clock

# An instant in a stored blocker sentence, printed when it is read (the reader's time
# zone and day): "\x00<queue clock>\x00".
_INSTANT = re.compile("\x00(-?[0-9]+)\x00")


def mark(value: int) -> str:
    return f"\x00{value}\x00"


def instant_printer(clock: Clock, now: dt.datetime):
    def when(value: int) -> str:
        moment = timezone.localtime(clock.to_real(value))
        if moment.date() == timezone.localtime(now).date():
            return moment.strftime("%H:%M")
        return moment.strftime("%Y-%m-%d %H:%M")

    return when


def print_instants(words: str, clock: Clock, now: dt.datetime) -> str:
    if "\x00" not in words:
        return words
    when = instant_printer(clock, now)
    return _INSTANT.sub(lambda found: when(int(found[1])), words)


def namer(names: dict[str, str]):
    def name(job_id: str) -> str:
        found = names.get(job_id)
        return f"job {job_pk(job_id)} ({found})" if found is not None else f"job {job_pk(job_id)}"

    return name
