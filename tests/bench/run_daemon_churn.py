#!/usr/bin/env python3
"""The daemon at its default limits under churn of short-lived Pythons: RSS over time.

Starts `pystrobe daemon` with a configuration that sets nothing but its
files (so limits.memory is the default), then starts short-lived Python
processes (each imports a few modules and burns ~20 ms) at --rate a second
for --seconds, and prints the daemon's RSS, CPU, tracked images, evictions
and drops every few seconds, read from its own /metrics. Run as root:

    tests/bench/run_daemon_churn.py --bin build/pystrobe --seconds 120
"""
import argparse
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

CHILD = ("import json, re, time\n"
         "end = time.thread_time() + 0.02\n"
         "while time.thread_time() < end: pass\n")


def metric(text, name, **labels):
    total = None
    for line in text.splitlines():
        if not (line.startswith(name + "{") or line.startswith(name + " ")):
            continue
        found = dict(re.findall(r'(\w+)="([^"]*)"', line.split(" ")[0]))
        if all(found.get(k) == str(v) for k, v in labels.items()):
            total = (total or 0.0) + float(line.rsplit(" ", 1)[1])
    return total


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", default=os.path.join(os.path.dirname(__file__), "../../build/pystrobe"))
    ap.add_argument("--seconds", type=float, default=120)
    ap.add_argument("--rate", type=float, default=100, help="Python processes started a second")
    ap.add_argument("--python", default="/usr/bin/python3.11")
    args = ap.parse_args()

    work = tempfile.mkdtemp(prefix="pystrobe-churn-")
    port = free_port()
    config = os.path.join(work, "pystrobe.yaml")
    with open(config, "w") as f:
        f.write(f"exporters:\n  profile_dir: {work}/profiles\n"
                f"  prometheus:\n    listen: 127.0.0.1:{port}\n")
    daemon = subprocess.Popen([args.bin, "daemon", "--config", config, "--socket",
                               os.path.join(work, "pystrobe.sock")],
                              stdout=subprocess.DEVNULL, stderr=open(os.path.join(work, "log"), "w"))

    def scrape():
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
            return r.read().decode()

    for _ in range(100):
        try:
            scrape()
            break
        except OSError:
            time.sleep(0.1)
    print("| t (s) | started | RSS (MiB) | limit (MiB) | daemon CPU (s) | live processes | "
          "images evicted | memory-pressure cuts | dropped (tracked_process_limit) |")
    print("|---|---|---|---|---|---|---|---|---|")
    started, children = 0, []
    begin = time.monotonic()
    next_report = begin
    peak = 0.0
    try:
        while time.monotonic() - begin < args.seconds:
            due = int((time.monotonic() - begin) * args.rate)
            while started < due:
                children.append(subprocess.Popen([args.python, "-c", CHILD]))
                started += 1
            children = [c for c in children if c.poll() is None]
            if time.monotonic() >= next_report:
                text = scrape()
                rss = (metric(text, "pystrobe_resident_memory_bytes") or 0) / 2**20
                peak = max(peak, rss)
                limit = metric(text, "pystrobe_memory_limit_bytes")
                cpu = (metric(text, "pystrobe_cpu_seconds_total") or 0)
                print(f"| {time.monotonic() - begin:.0f} | {started} | {rss:.1f} | "
                      f"{(limit or 0) / 2**20:.0f} | {cpu:.2f} | "
                      f"{metric(text, 'pystrobe_live_processes') or 0:.0f} | "
                      f"{metric(text, 'pystrobe_process_images_evicted_total') or 0:.0f} | "
                      f"{metric(text, 'pystrobe_memory_pressure_cuts_total') or 0:.0f} | "
                      f"{metric(text, 'pystrobe_dropped_total', reason='tracked_process_limit') or 0:.0f} |",
                      flush=True)
                next_report += 10
            time.sleep(0.005)
    finally:
        for c in children:
            c.wait()
        daemon.send_signal(signal.SIGTERM)
        daemon.wait(timeout=10)
        shutil.rmtree(work, ignore_errors=True)
    print(f"\npeak RSS {peak:.1f} MiB over {args.seconds:.0f} s, {started} Python processes "
          f"({started / args.seconds:.0f}/s)")


if __name__ == "__main__":
    sys.exit(main())
