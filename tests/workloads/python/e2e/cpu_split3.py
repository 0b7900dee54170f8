"""Splits its CPU time between three functions in known shares, for
tests/e2e/test_record_python.py.

Each round gives split_alpha, split_beta and split_gamma their share of a
slice of thread CPU time (by default 50/30/20), measured with
time.thread_time() around each call. Slices are long (100 to 200 ms, varied)
so that the round does not beat against the sampling period. Prints "ready", runs for --seconds
(0: until SIGTERM), then prints one JSON line:
  {"pid", "alpha_cpu_s", "beta_cpu_s", "gamma_cpu_s", "process_cpu_s"}
"""
import argparse
import json
import os
import random
import signal
import sys
import time

stop = False


def on_term(signum, frame):
    global stop
    stop = True


def burn(budget):
    """Pure Python work until this thread has used `budget` more CPU seconds."""
    end = time.thread_time() + budget
    x = 0
    while time.thread_time() < end:
        for i in range(200):
            x += i
    return x


def split_alpha(budget):
    return burn(budget)


def split_beta(budget):
    return burn(budget)


def split_gamma(budget):
    return burn(budget)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=4)
    parser.add_argument("--shares", default="50,30,20")
    args = parser.parse_args()
    shares = [int(s) / 100 for s in args.shares.split(",")]
    signal.signal(signal.SIGTERM, on_term)
    used = [0.0, 0.0, 0.0]
    functions = [split_alpha, split_beta, split_gamma]
    print("ready", flush=True)
    deadline = time.monotonic() + args.seconds
    while not stop and (args.seconds == 0 or time.monotonic() < deadline):
        slice_s = random.uniform(0.1, 0.2)
        for k, function in enumerate(functions):
            start = time.thread_time()
            function(slice_s * shares[k])
            used[k] += time.thread_time() - start
    print(json.dumps({"pid": os.getpid(), "alpha_cpu_s": used[0], "beta_cpu_s": used[1],
                      "gamma_cpu_s": used[2], "process_cpu_s": time.process_time()}),
          flush=True)


main()
