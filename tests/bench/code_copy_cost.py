#!/usr/bin/env python3
"""What the kernel's code object copies cost, for docs/benchmarks.md.

Runs `pystrobe record -r RATE -- python3.11 WORKLOAD` for three workloads and
reports, per run: the in-kernel time of sample_cpu per run and per sample of
the target (kernel.bpf_stats_enabled, from the recorder's own fd; the latter
charges the runs that hit other tasks to the target), the copies sent, the
ring buffer bytes and the in-kernel time they took (the record summary: the
kernel times each copy), and whether any sample held an unnamed Python frame. With --baseline BIN the same runs are made
with another pystrobe (main's, which copied only in a process's first 2 s).

  long import:  late_imports.py --wait 2.5 (numpy and some stdlib, after 2.5 s)
  steady state: a loop over the same few functions for 8 s (nothing new to copy)
  steady, 100 deep: the same under 100 distinct functions
  churn:        short_lived_code.py --seconds 8 (new code objects without end)

Usage (root): python3 tests/bench/code_copy_cost.py --bin build/pystrobe [--baseline B]
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_common import bpf_stats  # noqa: E402
from run_benchmarks import sampler_stats  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
WORKLOADS = os.path.join(REPO, "tests", "workloads", "python", "e2e")
PYTHON = "/usr/bin/python3.11"
STEADY = ("import time\n"
          "def leaf(n):\n    return sum(i * i for i in range(n))\n"
          "def middle(n):\n    return leaf(n) + leaf(n // 2)\n"
          "end = time.monotonic() + 8\n"
          "while time.monotonic() < end:\n    middle(2000)\n")

# 100 distinct functions deep: every frame is a lookup in the kernel's set of
# code objects already sent (a recursion of one function costs one).
DEEP = ("import time\n"
        "def f99(n):\n    return sum(i * i for i in range(n))\n" +
        "".join(f"def f{k}(n):\n    return f{k + 1}(n)\n" for k in range(99)) +
        "end = time.monotonic() + 8\n"
        "while time.monotonic() < end:\n    f0(2000)\n")

SCENARIOS = [
    ("long import", [PYTHON, os.path.join(WORKLOADS, "late_imports.py"), "--wait", "2.5"]),
    ("steady state", [PYTHON, "-c", STEADY]),
    ("steady, 100 deep", [PYTHON, "-c", DEEP]),
    ("churn", [PYTHON, os.path.join(WORKLOADS, "short_lived_code.py"), "--seconds", "8"]),
]


def run(binary, rate, command, output):
    proc = subprocess.Popen([binary, "record", "-r", str(rate), "-f", "folded", "-o", output,
                             "--"] + command, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    stats = None
    while proc.poll() is None:
        now = sampler_stats(proc.pid)
        if now is not None:
            stats = now
        time.sleep(0.05)
    stderr = proc.stderr.read()
    with open(output, encoding="utf-8", errors="replace") as f:
        folded = f.read()
    samples = re.search(r"^pystrobe: (\d+) samples", stderr, re.M)
    copies = re.search(r"\((\d+) sent, ([\d.]+) KiB, ([\d.]+) ms in the kernel; (\d+) put off",
                       stderr)
    old_copies = re.search(r"(\d+) named from the kernel's copies", stderr)
    unnamed = sum(int(line.rsplit(" ", 1)[1]) for line in folded.splitlines()
                  if "[unknown python frame]" in line)
    return {
        "samples": int(samples.group(1)) if samples else 0,
        "run_time_ns": stats[0] if stats else 0,
        "run_cnt": stats[1] if stats else 0,
        "copies": copies.group(1) if copies else "?",
        "kib": copies.group(2) if copies else "?",
        "copy_ms": float(copies.group(3)) if copies else None,
        "deferred": copies.group(4) if copies else "?",
        "named_from_copies": old_copies.group(1) if old_copies else "?",
        "unnamed": unnamed,
        "stderr": stderr,
    }


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", default=os.path.join(REPO, "build", "pystrobe"))
    parser.add_argument("--baseline", help="another pystrobe binary to compare with")
    parser.add_argument("--rate", type=int, default=499)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--only", help="run only the workloads whose name contains this")
    args = parser.parse_args()
    binaries = [("this", args.bin)] + ([("baseline", args.baseline)] if args.baseline else [])
    rows = []
    with bpf_stats(), tempfile.TemporaryDirectory() as tmp:
        for scenario, command in SCENARIOS:
            if args.only and args.only not in scenario:
                continue
            for round_ in range(args.rounds):
                for label, binary in binaries:
                    r = run(binary, args.rate, command, os.path.join(tmp, "out.folded"))
                    per_run = r["run_time_ns"] / r["run_cnt"] if r["run_cnt"] else 0
                    per_sample = r["run_time_ns"] / r["samples"] if r["samples"] else 0
                    copy_us = (f"{1000 * r['copy_ms'] / int(r['copies']):.1f}"
                               if r["copy_ms"] is not None and int(r["copies"]) else "-")
                    copy_share = (f"{1e6 * r['copy_ms'] / r['run_time_ns']:.1%}"
                                  if r["copy_ms"] is not None and r["run_time_ns"] else "-")
                    rows.append((scenario, label, r["samples"], f"{per_run:.0f}",
                                 f"{per_sample:.0f}", r["copies"], r["kib"], copy_us,
                                 copy_share, r["deferred"],
                                 r["named_from_copies"], r["unnamed"]))
                    print(" | ".join(str(c) for c in rows[-1]), flush=True)
    print()
    print(f"load {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f}, "
          f"-r {args.rate}")
    print("| workload | pystrobe | samples | ns/run | ns/target sample | copies | KiB | "
          "us/copy | copies' share of sample_cpu | put off | named from copies | "
          "samples unnamed |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for row in rows:
        print("| " + " | ".join(str(c) for c in row) + " |")


if __name__ == "__main__":
    main()
