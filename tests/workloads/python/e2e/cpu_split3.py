"""Splits its CPU time between three functions in known shares, for
tests/e2e/test_record_python.py.

Each round gives split_alpha, split_beta and split_gamma their share of a
slice of thread CPU time (by default 50/30/20), measured with
time.thread_time() around each call (time.process_time on 3.6, time.clock on
2.7: the program has one thread). Slices are long (100 to 200 ms, varied)
so that the round does not beat against the sampling period. Prints "ready",
runs for --seconds of wall time (0: until SIGTERM) or --cpu-seconds of its
own CPU time (the same number of samples however loaded the machine), then
prints one JSON line (with --go-on-sigusr1 it sleeps after "ready" until
SIGUSR1, for a test that attaches to it first):
  {"pid", "alpha_cpu_s", "beta_cpu_s", "gamma_cpu_s", "process_cpu_s"}
Runs on 2.7 and 3.6+.
"""
import argparse
import json
import os
import random
import signal
import sys
import time

import portable

stop = False
go = False


def on_term(signum, frame):
    global stop
    stop = True


def on_usr1(signum, frame):
    global go
    go = True


def burn(budget):
    """Pure Python work until this thread has used `budget` more CPU seconds."""
    end = portable.cpu_time() + budget
    x = 0
    while portable.cpu_time() < end:
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
    parser.add_argument("--cpu-seconds", type=float, default=0)
    parser.add_argument("--shares", default="50,30,20")
    parser.add_argument("--go-on-sigusr1", action="store_true")
    args = parser.parse_args()
    shares = [int(s) / 100.0 for s in args.shares.split(",")]
    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGUSR1, on_usr1)
    used = [0.0, 0.0, 0.0]
    functions = [split_alpha, split_beta, split_gamma]
    portable.say("ready")
    while args.go_on_sigusr1 and not go and not stop:
        time.sleep(0.01)  # 2.7 has no sigwait
    deadline = portable.monotonic() + args.seconds

    def more():
        if args.cpu_seconds:
            return sum(used) < args.cpu_seconds
        return args.seconds == 0 or portable.monotonic() < deadline

    while not stop and more():
        slice_s = random.uniform(0.1, 0.2)
        for k, function in enumerate(functions):
            start = portable.cpu_time()
            function(slice_s * shares[k])
            used[k] += portable.cpu_time() - start
    portable.say(json.dumps({"pid": os.getpid(), "alpha_cpu_s": used[0], "beta_cpu_s": used[1],
                             "gamma_cpu_s": used[2], "process_cpu_s": portable.process_time()}))


main()
