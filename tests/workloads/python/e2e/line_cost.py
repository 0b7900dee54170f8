"""One function, two lines of known 4:1 cost, for tests/e2e/test_record_python.py.

two_lines() runs its HEAVY line (4 units of work) and its LIGHT line (1 unit),
and times each with time.thread_time() (its stand-ins before 3.7, see
portable.py) on the lines between. Prints "ready",
runs for --seconds, then one JSON line:
  {"pid", "heavy_line", "light_line", "heavy_cpu_s", "light_cpu_s",
   "first_line" (two_lines' co_firstlineno), "path" (this file's absolute path)}
Runs on 2.7 and 3.6+.
"""
import argparse
import io
import json
import os

import portable

HERE = io.open(__file__, encoding="utf-8").read().splitlines()
UNIT = 20000


def line_of(tag):
    for number, text in enumerate(HERE, start=1):
        if text.rstrip().endswith("# " + tag):
            return number
    raise KeyError(tag)


def two_lines(used):
    acc = 0
    t0 = portable.cpu_time()
    for i in range(4 * UNIT): acc += i  # HEAVY
    t1 = portable.cpu_time()
    for i in range(UNIT): acc += i  # LIGHT
    t2 = portable.cpu_time()
    used[0] += t1 - t0
    used[1] += t2 - t1
    return acc


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=3)
    args = parser.parse_args()
    used = [0.0, 0.0]
    portable.say("ready")
    end = portable.monotonic() + args.seconds
    while portable.monotonic() < end:
        two_lines(used)
    portable.say(json.dumps({"pid": os.getpid(), "heavy_line": line_of("HEAVY"),
                             "light_line": line_of("LIGHT"), "heavy_cpu_s": used[0],
                             "light_cpu_s": used[1],
                             "first_line": two_lines.__code__.co_firstlineno,
                             "path": os.path.abspath(__file__)}))


main()
