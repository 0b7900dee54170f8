#!/usr/bin/env python3
"""The daemon on a host with many processes: its start-up, its rest, its memory.

Starts --pythons sleeping CPython processes, spread over every interpreter the
tests know (Debian's, pyenv's 2.7 to 3.13, sid's 3.14 and 3.15 in their chroot,
the free-threaded builds), each with a second thread and a few modules
imported, and --others sleeping processes of other programs (sleep, tail, cat,
bash, perl, awk: different binaries, different libraries). Then `pystrobe
daemon` with a configuration that sets nothing but its files (rate, window and
limits at their defaults), and reads:
- start-up: the daemon's CPU (every thread's schedstat) when it says READY=1 on
  its NOTIFY_SOCKET, and --settle seconds later (the work a new process costs
  that is done at its first window or sample);
- at rest: its share of one core over --seconds, and its resident size
  (VmRSS, VmHWM);
- busy: with --busy-rate R the same daemon runs at R Hz with two busy 100-deep
  Pythons, one per CPU here: 2 x R samples a second stand for a 64-CPU host at
  the default rate when 2 x R = 64 x 19 (R = 608), so its share of one core then
  is what the per-sample path costs such a host.
--perf-rest FILE records the daemon with perf (20 kHz, DWARF call graphs) over
the rest window, to see where its rest goes; perf's own interrupts are then
charged to the daemon too, so that run's share is not the figure to quote.
Run as root:

    tests/bench/run_daemon_scale.py --bin build/pystrobe [--pythons 500 --others 500]
"""
import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "e2e"))
from python_testlib import installed_pythons  # noqa: E402
from bench_common import cpu_seconds  # noqa: E402

# 2.7 too: no print function, no Thread(daemon=).
SLEEPER = ("import sys, threading, time, json, re, collections, socket\n"
           "t = threading.Thread(target=time.sleep, args=(86400,))\nt.daemon = True\nt.start()\n"
           "sys.stdout.write('ready\\n')\nsys.stdout.flush()\ntime.sleep(86400)\n")
DEEP = ("import sys\nsys.setrecursionlimit(1000)\n"
        "def down(n):\n    return down(n - 1) if n else spin()\n"
        "def spin():\n    x = 0\n    while True:\n        x = (x * 3 + 1) & 0xffff\n"
        "print('ready', flush=True)\ndown(98)\n")
OTHERS = (["sleep", "86400"], ["tail", "-f", "/dev/null"], ["cat"],
          ["bash", "-c", "read"], ["perl", "-e", "sleep 86400"], ["awk", "{ print }"])




def status_kib(pid, field):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(field)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_many(pythons, count_pythons, count_others):
    """The sleeping processes, started in a few seconds and each announced ready."""
    procs = []
    for i in range(count_pythons):
        python = pythons[i % len(pythons)]
        procs.append(subprocess.Popen([python.executable, "-c", SLEEPER], stdout=subprocess.PIPE,
                                      stdin=subprocess.DEVNULL, text=True))
    for p in procs:
        if p.stdout.readline().strip() != "ready":
            raise SystemExit(f"a sleeping Python did not start: {p.args}")
    for i in range(count_others):
        procs.append(subprocess.Popen(OTHERS[i % len(OTHERS)], stdin=subprocess.PIPE,
                                      stdout=subprocess.DEVNULL))
    return procs


class Daemon:
    def __init__(self, binary, tmp, rate=None):
        config = os.path.join(tmp, "pystrobe.yaml")
        with open(config, "w") as f:
            f.write(f"exporters:\n  profile_dir: {tmp}/profiles\n"
                    f"  prometheus:\n    listen: 127.0.0.1:{free_port()}\n")
            if rate:
                f.write(f"rate: {rate}\n")
        notify_path = os.path.join(tmp, "notify.sock")
        self.notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.notify.bind(notify_path)
        self.notify.settimeout(300)
        self.started = time.monotonic()
        self.proc = subprocess.Popen([binary, "daemon", "--config", config,
                                      "--socket", os.path.join(tmp, "control.sock")],
                                     env=dict(os.environ, NOTIFY_SOCKET=notify_path),
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)

    def wait_ready(self):
        while True:
            try:
                message = self.notify.recv(4096).decode()
            except socket.timeout:
                raise SystemExit("the daemon did not say READY=1 in 300 s")
            if "READY=1" in message.split("\n"):
                return time.monotonic() - self.started

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=60)
        self.notify.close()


def measure_rest(binary, settle, seconds, perf_file=None):
    with tempfile.TemporaryDirectory(prefix="pystrobe-scale-") as tmp:
        daemon = Daemon(binary, tmp)
        try:
            ready_s = daemon.wait_ready()
            cpu_ready = cpu_seconds(daemon.proc.pid)
            time.sleep(settle)
            cpu_settled = cpu_seconds(daemon.proc.pid)
            t0 = time.monotonic()
            if perf_file:
                subprocess.run(["perf", "record", "-q", "-F", "20000", "--call-graph", "dwarf",
                                "-p", str(daemon.proc.pid), "-o", perf_file, "--",
                                "sleep", str(seconds)], check=True)
            else:
                time.sleep(seconds)
            cpu_rest = (cpu_seconds(daemon.proc.pid) - cpu_settled) / (time.monotonic() - t0)
            rss, hwm = status_kib(daemon.proc.pid, "VmRSS"), status_kib(daemon.proc.pid, "VmHWM")
        finally:
            daemon.stop()
    return ready_s, cpu_ready, cpu_settled, cpu_rest, rss, hwm


def measure_busy(binary, rate, settle, seconds):
    deep = [subprocess.Popen([sys.executable, "-c", DEEP], stdout=subprocess.PIPE, text=True)
            for _ in range(2)]
    try:
        for p in deep:
            p.stdout.readline()
        with tempfile.TemporaryDirectory(prefix="pystrobe-scale-") as tmp:
            daemon = Daemon(binary, tmp, rate)
            try:
                daemon.wait_ready()
                time.sleep(settle)
                cpu0, t0 = cpu_seconds(daemon.proc.pid), time.monotonic()
                time.sleep(seconds)
                share = (cpu_seconds(daemon.proc.pid) - cpu0) / (time.monotonic() - t0)
                hwm = status_kib(daemon.proc.pid, "VmHWM")
            finally:
                daemon.stop()
    finally:
        for p in deep:
            p.kill()
            p.wait()
    return share, hwm


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bin", action="append", required=True, help="a pystrobe binary")
    parser.add_argument("--pythons", type=int, default=500)
    parser.add_argument("--others", type=int, default=500)
    parser.add_argument("--settle", type=float, default=20)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--busy-rate", type=int, default=608,
                        help="Hz per CPU for the busy run (0: none); 608 x 2 CPUs = 64 x 19")
    parser.add_argument("--perf-rest", metavar="FILE",
                        help="perf record the daemon at rest into FILE (one --bin)")
    args = parser.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("run as root: the daemon loads BPF programs")
    if args.perf_rest and len(args.bin) > 1:
        raise SystemExit("--perf-rest records one binary")
    pythons = installed_pythons(with_old=True, with_free_threaded=True)
    started = time.monotonic()
    procs = start_many(pythons, args.pythons, args.others)
    print(f"{args.pythons} Pythons ({len(pythons)} interpreters: "
          f"{', '.join(p.label for p in pythons)}) and {args.others} other processes "
          f"started in {time.monotonic() - started:.1f} s; "
          f"{len(os.listdir('/proc'))} /proc entries", flush=True)
    rows = []
    try:
        for binary in args.bin:
            rest = measure_rest(binary, args.settle, args.seconds, args.perf_rest)
            busy = measure_busy(binary, args.busy_rate, args.settle, args.seconds) \
                if args.busy_rate else None
            rows.append((binary, rest, busy))
    finally:
        for p in procs:
            p.kill()
        for p in procs:
            p.wait()
    load = " ".join(open("/proc/loadavg").read().split()[:3])
    print(f"(load {load})")
    print("| binary | READY after | CPU at READY | CPU after "
          f"{args.settle:.0f} s more | at rest (share of a core) | RSS / peak | "
          f"busy at {args.busy_rate} Hz x 2 CPUs (share of a core) / its peak RSS |")
    print("|---|---|---|---|---|---|---|")
    for binary, (ready_s, cpu_ready, cpu_settled, rest, rss, hwm), busy in rows:
        busy_cell = f"{100 * busy[0]:.2f}% / {busy[1] / 1024:.1f} MiB" if busy else "-"
        print(f"| {binary} | {ready_s:.1f} s | {cpu_ready:.2f} s | {cpu_settled:.2f} s | "
              f"{100 * rest:.3f}% | {rss / 1024:.1f} / {hwm / 1024:.1f} MiB | {busy_cell} |")


if __name__ == "__main__":
    main()
