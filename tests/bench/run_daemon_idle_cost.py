#!/usr/bin/env python3
"""What an always-on daemon costs at its defaults: its CPU and its wakeups.

Starts three busy Python programs, then `pystrobe daemon` with a configuration
that sets nothing but its files (rate, window and limits at their defaults),
and after a settling time reads, over --seconds, the daemon's CPU from
/proc/PID/task/*/schedstat (every thread of it, in nanoseconds) and its context switches from
/proc/PID/task/*/status (each voluntary switch is a wakeup of one of its
threads). Several binaries run one after another in one invocation, so their
figures sit side by side. With --churn N, a thread also starts N short programs a second (the C++
compiler's cc1plus printing its version), as a build machine or a CI runner
does: each new process is one the daemon looks at. Run as root:

    tests/bench/run_daemon_idle_cost.py --bin build/pystrobe [--bin other/pystrobe] [--churn 20]
"""
import argparse
import glob
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time

from bench_common import cpu_seconds

BUSY = "x = 0\nwhile True:\n    x = (x * 3 + 1) & 0xffff\n"




def voluntary_switches(pid):
    total = 0
    for status in glob.glob(f"/proc/{pid}/task/*/status"):
        try:
            for line in open(status):
                if line.startswith("voluntary_ctxt_switches:"):
                    total += int(line.split()[1])
        except OSError:
            pass  # a thread gone between listing and reading
    return total


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def measure(binary, seconds, settle):
    with tempfile.TemporaryDirectory(prefix="pystrobe-idle-") as tmp:
        config = os.path.join(tmp, "pystrobe.yaml")
        with open(config, "w") as f:
            f.write(f"exporters:\n  profile_dir: {tmp}/profiles\n"
                    f"  prometheus:\n    listen: 127.0.0.1:{free_port()}\n")
        daemon = subprocess.Popen([binary, "daemon", "--config", config,
                                   "--socket", os.path.join(tmp, "control.sock")],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            time.sleep(settle)
            if daemon.poll() is not None:
                raise SystemExit(f"{binary} daemon exited: {daemon.stderr.read()}")
            cpu0, wake0, t0 = cpu_seconds(daemon.pid), voluntary_switches(daemon.pid), time.monotonic()
            time.sleep(seconds)
            cpu1, wake1, t1 = cpu_seconds(daemon.pid), voluntary_switches(daemon.pid), time.monotonic()
        finally:
            daemon.terminate()
            daemon.wait(timeout=30)
    return (cpu1 - cpu0) / (t1 - t0), (wake1 - wake0) / (t1 - t0)


def churn(per_second, stop):
    """Starts `per_second` short-lived cc1plus processes a second until `stop`."""
    compiler = subprocess.run(["gcc", "-print-prog-name=cc1plus"], capture_output=True,
                              text=True).stdout.strip()
    interval = 1.0 / per_second
    next_start = time.monotonic()
    while not stop.is_set():
        subprocess.run([compiler, "--version"], stdin=subprocess.DEVNULL,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        next_start += interval
        stop.wait(max(0.0, next_start - time.monotonic()))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bin", action="append", required=True, help="a pystrobe binary")
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--settle", type=float, default=5)
    parser.add_argument("--churn", type=float, default=0,
                        help="short-lived processes started per second meanwhile")
    args = parser.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("run as root: the daemon loads BPF programs")
    busy = [subprocess.Popen([sys.executable, "-c", BUSY]) for _ in range(3)]
    stop = threading.Event()
    churner = threading.Thread(target=churn, args=(args.churn, stop)) if args.churn else None
    try:
        if churner:
            churner.start()
        rows = [(binary, *measure(binary, args.seconds, args.settle)) for binary in args.bin]
    finally:
        stop.set()
        if churner:
            churner.join()
        for p in busy:
            p.kill()
            p.wait()
    load = " ".join(open("/proc/loadavg").read().split()[:3])
    churned = f", {args.churn:g} new processes a second" if args.churn else ""
    print(f"daemon at its defaults, three busy Pythons{churned}, {args.seconds:.0f} s each "
          f"(load {load})")
    print("| binary | CPU (share of one core) | wakeups per second (voluntary switches) |")
    print("|---|---|---|")
    for binary, cpu, wakeups in rows:
        print(f"| {binary} | {100 * cpu:.3f}% | {wakeups:.1f} |")


if __name__ == "__main__":
    main()
