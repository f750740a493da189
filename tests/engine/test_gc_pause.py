"""One pause of the cyclic collector per process (engine.gc_pause): a replay, a pass
and a forecast read share its counter, so the first to end never turns it back on
under another, and the last leaves it as it was found."""

import gc
import threading

from engine.gc_pause import cyclic_gc_paused


def test_the_collector_stays_paused_until_the_last_user_ends():
    assert gc.isenabled()
    outer_in, inner_done = threading.Event(), threading.Event()

    def other_thread():
        with cyclic_gc_paused():
            outer_in.set()
            inner_done.wait(5)

    thread = threading.Thread(target=other_thread)
    thread.start()
    outer_in.wait(5)
    with cyclic_gc_paused():
        assert not gc.isenabled()
    assert not gc.isenabled()  # the other thread is still inside
    inner_done.set()
    thread.join(5)
    assert gc.isenabled()


def test_a_collector_found_off_is_left_off():
    gc.disable()
    try:
        with cyclic_gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        gc.enable()
