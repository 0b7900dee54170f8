"""Spins in late_spin for --seconds of its CPU time (so that its start-up is
the same share of its samples however loaded the machine), for
tests/e2e/test_record_python.py: a Python process started after a
system-wide recording began. Prints "ready" and then one JSON line with its pid
and the CPU seconds it used (cpu_s). Runs on 2.7 and 3.6+."""
import argparse
import json
import os

import portable


def late_spin(seconds):
    end = portable.cpu_time() + seconds
    x = 0
    while portable.cpu_time() < end:
        for i in range(200):
            x += i
    return x


parser = argparse.ArgumentParser()
parser.add_argument("--seconds", type=float, default=2)
args = parser.parse_args()
portable.say("ready")
late_spin(args.seconds)
portable.say(json.dumps({"pid": os.getpid(), "cpu_s": portable.process_time()}))
