"""Spins in late_spin for --seconds, for tests/e2e/test_record_python.py: a
Python process started after a system-wide recording began. Prints "ready"
and then one JSON line with its pid."""
import argparse
import json
import os
import time


def late_spin(seconds):
    end = time.monotonic() + seconds
    x = 0
    while time.monotonic() < end:
        for i in range(200):
            x += i
    return x


parser = argparse.ArgumentParser()
parser.add_argument("--seconds", type=float, default=2)
args = parser.parse_args()
print("ready", flush=True)
late_spin(args.seconds)
print(json.dumps({"pid": os.getpid()}), flush=True)
