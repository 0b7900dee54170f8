"""A multi-threaded program that waits in known places, for
tests/unit/python/python_frame_walker_test.cc.

Once every thread is at (or about to reach) its waiting line, prints one line
per thread and then "ready":
    thread <threading.get_ident()> <threading.get_native_id()> <frames>
where <frames> lists the innermost frames the walker must find, innermost
first, as name@line separated by spaces (line '*' when it varies: the
spinner). Names are co_qualname on 3.11+ and co_name before, as pystrobe
shows them. Runs until killed.
"""
import sys
import threading
import time

HERE = open(__file__, encoding="utf-8").read().splitlines()


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
        reports.append((threading.get_ident(), threading.get_native_id(), frames))


def sleeper_inner():
    report([(name(sleeper_inner), line_of("SLEEP")), (name(sleeper_outer), line_of("CALL_INNER"))])
    while True:
        time.sleep(1000)  # SLEEP


def sleeper_outer():
    sleeper_inner()  # CALL_INNER


class Worker:
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
    threads = [threading.Thread(target=t, daemon=True) for t in targets]
    for thread in threads:
        thread.start()
    while len(reports) < len(threads):
        time.sleep(0.01)
    report([(name(main_wait), line_of("MAIN_WAIT")), (name(main), line_of("CALL_MAIN_WAIT"))])
    for ident, native_id, frames in reports:
        print("thread", ident, native_id, " ".join("%s@%s" % f for f in frames))
    print("ready", flush=True)
    main_wait()  # CALL_MAIN_WAIT


main()
