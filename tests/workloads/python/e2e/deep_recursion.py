"""A hot leaf under 150 levels of recursion, for tests/e2e/test_record_python.py.

<module> -> main -> recurse x 150 -> hot_leaf, which spins for --seconds of
CPU time (so that its sample count does not depend on the machine's load).
Prints "ready" and, at the end, one JSON line with its pid and the CPU seconds
it used. Runs on 2.7 and 3.6+."""
import argparse
import json
import os

import portable

DEPTH = 150


def hot_leaf(seconds):
    end = portable.cpu_time() + seconds
    x = 0
    while portable.cpu_time() < end:
        for i in range(200):
            x += i
    return x


def recurse(n, seconds):
    if n == 1:
        return hot_leaf(seconds)
    return recurse(n - 1, seconds)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=2)
    args = parser.parse_args()
    portable.say("ready")
    recurse(DEPTH, args.seconds)
    portable.say(json.dumps({"pid": os.getpid(), "depth": DEPTH,
                             "cpu_s": portable.process_time()}))


main()
