"""Four threads, each spinning in its own function (worker_a .. worker_d) for
--seconds, for tests/e2e/test_record_python.py. The GIL serialises them, so
each gets about a quarter of the process's CPU (2.7's GIL less evenly). Prints "ready" when they run,
then one JSON line with each thread's CPU seconds and native id. Runs on 2.7
and 3.6+."""
import argparse
import json
import os
import threading

import portable

results = {}


def spin(seconds):
    end = portable.monotonic() + seconds
    x = 0
    while portable.monotonic() < end:
        for i in range(200):
            x += i
    return x


def worker_a(seconds):
    spin(seconds)


def worker_b(seconds):
    spin(seconds)


def worker_c(seconds):
    spin(seconds)


def worker_d(seconds):
    spin(seconds)


def run(function, seconds):
    function(seconds)
    results[function.__name__] = {"cpu_s": portable.thread_time(),
                                  "tid": portable.native_thread_id()}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=3)
    args = parser.parse_args()
    threads = [threading.Thread(target=run, args=(f, args.seconds))
               for f in (worker_a, worker_b, worker_c, worker_d)]
    for t in threads:
        t.start()
    portable.say("ready")
    for t in threads:
        t.join()
    portable.say(json.dumps({"pid": os.getpid(), "threads": results}))


main()
