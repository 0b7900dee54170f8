"""A multi-threaded program that waits in known places, for
tests/unit/python/python_frame_walker_test.cc.

Once every thread is at (or about to reach) its waiting line, prints one line
per thread and then "ready":
    thread <threading.get_ident()> <threading.get_native_id()> <frames>
where <frames> lists the innermost frames the walker must find, innermost
first, as name@line separated by spaces (line '*' when it varies: the
spinner). Names are co_qualname on 3.11+ and co_name before, as pystrobe
shows them. Runs until killed, on 2.7 and 3.6+.
"""
import ctypes
import io
import sys
import threading
import time

HERE = io.open(__file__, encoding="utf-8").read().splitlines()
# PyThreadState.thread_id (pthread_self) as Python sees it; 2.7 names it _get_ident.
get_ident = getattr(threading, "get_ident", None) or threading._get_ident
_libc = ctypes.CDLL(None)


def get_native_id():
    get = getattr(threading, "get_native_id", None)
    return get() if get else _libc.syscall(186)  # SYS_gettid on x86_64


def line_of(tag):
    """The line number of the line ending with the comment '# <tag>'."""
    for number, text in enumerate(HERE, start=1):
        if text.rstrip().endswith("# " + tag):
            return number
    raise KeyError(tag)


def name(function):
    code = function.__code__
    return code.co_qualname if sys.version_info >= (3, 11) else code.co_name


never = threading.Lock()
never.acquire()
reports = []
reports_lock = threading.Lock()


def report(frames):
    with reports_lock:
        reports.append((get_ident(), get_native_id(), frames))


def sleeper_inner():
    report([(name(sleeper_inner), line_of("SLEEP")), (name(sleeper_outer), line_of("CALL_INNER"))])
    while True:
        time.sleep(1000)  # SLEEP


def sleeper_outer():
    sleeper_inner()  # CALL_INNER


class Worker(object):
    def blocked_on_lock(self):
        report([(name(Worker.blocked_on_lock), line_of("LOCK"))])
        never.acquire()  # LOCK


def recurse(depth):
    if depth == 0:
        report([(name(recurse), line_of("RECURSE_LEAF"))] +
               [(name(recurse), line_of("RECURSE_CALL"))] * 20)
        while True:
            time.sleep(1000)  # RECURSE_LEAF
    recurse(depth - 1)  # RECURSE_CALL


def spinner():
    report([(name(spinner), "*")])
    x = 0
    while True:
        x += 1


def main_wait():
    never.acquire()  # MAIN_WAIT


def main():
    targets = [sleeper_outer, Worker().blocked_on_lock, lambda: recurse(20), spinner]
    threads = [threading.Thread(target=t) for t in targets]
    for thread in threads:
        thread.daemon = True
        thread.start()
    while len(reports) < len(threads):
        time.sleep(0.01)
    report([(name(main_wait), line_of("MAIN_WAIT")), (name(main), line_of("CALL_MAIN_WAIT"))])
    for ident, native_id, frames in reports:
        sys.stdout.write("thread %d %d %s\n" % (ident, native_id,
                                                " ".join("%s@%s" % f for f in frames)))
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    main_wait()  # CALL_MAIN_WAIT


main()
