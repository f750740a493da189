"""One pause of the cyclic garbage collector for the whole process.

What builds many objects that all live until it ends (a replay, a scheduling pass's
snapshot and board, a stored forecast read back) runs inside `cyclic_gc_paused()`.

A replay keeps hundreds of thousands of objects alive to the end (jobs, events, queue
entries); a pass over 10,000 jobs allocates some 50,000; a forecast read back from the
cache some 100,000. The collector would scan them again and again for cycles they
(almost) do not have: about a quarter of a long replay, some 40% of a pass's time on
PostgreSQL. Reference counting still frees them (a replay's few cycles, a queued job
and its queue entry, break when the job leaves the queue); what is left is collected
once the collector runs again. One counter for the process keeps it paused while any thread is
inside, so one user's end never turns it back on under another.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_lock = threading.Lock()
_pausers = 0
_was_enabled = False


@contextmanager
def cyclic_gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while the block runs (see the module doc);
    it is left as it was found once the last block of the process ends."""
    global _pausers, _was_enabled
    with _lock:
        _pausers += 1
        if _pausers == 1:
            _was_enabled = gc.isenabled()
            gc.disable()
    try:
        yield
    finally:
        with _lock:
            _pausers -= 1
            if _pausers == 0 and _was_enabled:
                gc.enable()
