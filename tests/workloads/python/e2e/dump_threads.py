"""A multi-threaded program parked in known places, for tests/e2e/test_dump.py.

Threads (each gives itself an OS thread name with prctl(PR_SET_NAME), so that
/proc/PID/task/TID/comm tells them apart):
  main      waits on a lock that is never released          (idle)
  spinner   spins in pure Python, holding the GIL           (running)
  sleeper   sleeps in time.sleep, two frames deep            (idle)
  locked    blocks on a lock, in a method                    (idle)
  waiter    waits on a threading.Event                        (idle)

Once every thread is about to reach its place it prints one JSON line and
then "ready":
  {"pid": P, "threads": [{"tid": native id, "name": comm, "role": ...,
    "frames": [[name, [lines...] or null], ...] innermost first}]}
Names are co_qualname on 3.11+ and co_name before, as pystrobe shows them;
each frame lists the lines it may be at (the spinner moves between two), or
null for a frame of threading.py, whose lines vary by version.
Runs until killed. Runs on 2.7 and 3.6+.
"""
import ctypes
import io
import json
import os
import sys
import threading
import time

import portable

HERE = io.open(__file__, encoding="utf-8").read().splitlines()
PR_SET_NAME = 15
_libc = ctypes.CDLL(None, use_errno=True)


def line_of(tag):
    """The number of the line ending with the comment '# <tag>'."""
    for number, text in enumerate(HERE, start=1):
        if text.rstrip().endswith("# " + tag):
            return number
    raise KeyError(tag)


def name(function):
    code = function.__code__
    return code.co_qualname if sys.version_info >= (3, 11) else code.co_name


def set_thread_name(text):
    _libc.prctl(PR_SET_NAME, text.encode(), 0, 0, 0)


never = threading.Lock()
never.acquire()
never_set = threading.Event()
reports = []
reports_lock = threading.Lock()


def report(role, frames):
    set_thread_name(role)
    with reports_lock:
        reports.append({"tid": portable.native_thread_id(), "name": role, "role": role,
                        "frames": frames})


def spin():
    report("spinner", [[name(spin), [line_of("SPIN_LOOP"), line_of("SPIN_ADD")]]])
    x = 0
    while True:  # SPIN_LOOP
        x += 1  # SPIN_ADD


def sleep_inner():
    report("sleeper", [[name(sleep_inner), [line_of("SLEEP")]],
                       [name(sleep_outer), [line_of("CALL_SLEEP_INNER")]]])
    while True:
        time.sleep(1000)  # SLEEP


def sleep_outer():
    sleep_inner()  # CALL_SLEEP_INNER


class Holder(object):
    def wait_for_lock(self):
        report("locked", [[name(Holder.wait_for_lock), [line_of("LOCK")]]])
        never.acquire()  # LOCK


def wait_for_event():
    # Event.wait parks in Condition.wait, two threading.py frames above ours
    # (2.7's Condition and Event are factories of _Condition and _Event).
    condition = getattr(threading, "_Condition", threading.Condition)
    event = getattr(threading, "_Event", threading.Event)
    report("waiter", [[name(condition.wait), None],
                      [name(event.wait), None],
                      [name(wait_for_event), [line_of("EVENT")]]])
    never_set.wait()  # EVENT


def main_wait():
    never.acquire()  # MAIN_WAIT


def main():
    targets = [spin, sleep_outer, Holder().wait_for_lock, wait_for_event]
    threads = [threading.Thread(target=t) for t in targets]
    for thread in threads:
        thread.daemon = True
        thread.start()
    while len(reports) < len(threads):
        time.sleep(0.01)
    report("mainthread", [[name(main_wait), [line_of("MAIN_WAIT")]],
                          [name(main), [line_of("CALL_MAIN_WAIT")]]])
    portable.say(json.dumps({"pid": os.getpid(), "threads": reports}))
    portable.say("ready")
    main_wait()  # CALL_MAIN_WAIT


main()
