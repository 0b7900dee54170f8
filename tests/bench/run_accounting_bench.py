#!/usr/bin/env python3
"""What the accounting programs (bpf/accounting*.bpf.c) cost the programs they watch.

Two workloads, written in C so the kernel's share is large:
  reads     a million 1-byte read()s of /dev/zero (syscall-heavy)
  pingpong  two threads passing a byte back and forth through pipes
            (context-switch-heavy)
each timed by itself (clock_gettime around the loop, so pystrobe's start-up
is not counted), in four configurations, alternating A B S C A B S C ...:
  A  unprofiled
  B  under `pystrobe stat -r 1 --no-offcpu-stacks -- CMD` (accounting for
     the target only; the sampler at 1 Hz is negligible)
  S  under `pystrobe stat -r 1 -- CMD`: B plus the off-CPU stacks stat shows
     for io/sleep/GIL verdicts (a stack walk at each of the target's switches)
  C  unprofiled while `pystrobe top` accounts for the whole system
No syscall tracepoint is attached in any of them (stat --syscalls would).
Medians, ratios to A, and the A/A noise floor (median of A's odd runs over
A's even runs) are printed side by side. Then, with kernel.bpf_stats_enabled=1
(restored afterwards), the in-kernel cost of each accounting program per event.

usage: sudo python3 tests/bench/run_accounting_bench.py [--bin build/pystrobe] [--rounds 5]
"""

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

from bench_common import bpf_stats

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))

WORKLOAD_C = r"""
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int ping[2], pong[2];
static long rounds;

static void *echo(void *arg) {
  char c;
  (void)arg;
  for (long i = 0; i < rounds; i++) {
    if (read(ping[0], &c, 1) != 1 || write(pong[1], &c, 1) != 1) exit(1);
  }
  return NULL;
}

int main(int argc, char **argv) {
  long n = atol(argv[2]);
  double start = now();
  if (strcmp(argv[1], "reads") == 0) {
    int fd = open("/dev/zero", O_RDONLY);
    char c;
    for (long i = 0; i < n; i++) {
      if (read(fd, &c, 1) != 1) return 1;
    }
  } else {
    pthread_t thread;
    char c = 'x';
    rounds = n;
    if (pipe(ping) || pipe(pong)) return 1;
    pthread_create(&thread, NULL, echo, NULL);
    for (long i = 0; i < n; i++) {
      if (write(ping[1], &c, 1) != 1 || read(pong[0], &c, 1) != 1) return 1;
    }
    pthread_join(thread, NULL);
  }
  printf("%.6f\n", now() - start);
  return 0;
}
"""

WORKLOADS = {"reads": 1_000_000, "pingpong": 100_000}


def build_workload(tmp):
    source = os.path.join(tmp, "acct_workload.c")
    binary = os.path.join(tmp, "acct_workload")
    with open(source, "w") as f:
        f.write(WORKLOAD_C)
    subprocess.run(["cc", "-O2", "-pthread", "-o", binary, source], check=True)
    return binary


def seconds_of(output):
    for line in reversed(output.splitlines()):
        try:
            return float(line.strip())
        except ValueError:
            continue
    raise RuntimeError(f"workload printed no time: {output!r}")


def run_plain(cmd):
    return seconds_of(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout)


def run_stat(pystrobe, cmd, options=()):
    proc = subprocess.run([pystrobe, "stat", "-r", "1", *options, "--"] + cmd,
                          capture_output=True, text=True, check=True)
    # The workload's own line comes before stat's report.
    for line in proc.stdout.splitlines():
        try:
            return float(line.strip())
        except ValueError:
            continue
    raise RuntimeError(f"no time in: {proc.stdout!r}")


class SystemWideTop:
    """`pystrobe top` accounting for every process, in the background."""

    def __init__(self, pystrobe):
        self.proc = subprocess.Popen([pystrobe, "top", "-i", "3600"], stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
        time.sleep(1.5)  # load and attach
        if self.proc.poll() is not None:
            raise RuntimeError(f"pystrobe top exited: {self.proc.stderr.read()!r}")

    def stop(self):
        self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def bpf_prog_stats():
    """{program name: (run_cnt, run_time_ns)} of the loaded acct_* programs."""
    out = subprocess.run(["bpftool", "prog", "show", "-j"], capture_output=True, text=True,
                         check=True).stdout
    stats = {}
    for prog in json.loads(out):
        name = prog.get("name", "")
        if name.startswith("acct_"):
            cnt, ns = stats.get(name, (0, 0))
            stats[name] = (cnt + prog.get("run_cnt", 0), ns + prog.get("run_time_ns", 0))
    return stats


def per_event_costs(pystrobe, binary):
    """In-kernel ns per event of each accounting program while both workloads run."""
    with bpf_stats():
        top = SystemWideTop(pystrobe)
        try:
            before = bpf_prog_stats()
            for name, n in WORKLOADS.items():
                run_plain([binary, name, str(n)])
            after = bpf_prog_stats()
        finally:
            top.stop()
    rows = []
    for name in sorted(after):
        cnt = after[name][0] - before.get(name, (0, 0))[0]
        ns = after[name][1] - before.get(name, (0, 0))[1]
        rows.append((name, cnt, ns, ns / cnt if cnt else 0.0))
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bin", default=os.path.join(REPO, "build", "pystrobe"))
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("run as root: the accounting programs need BPF")
    pystrobe = os.path.abspath(args.bin)
    tmp = tempfile.mkdtemp(prefix="pystrobe-acct-bench-")
    try:
        binary = build_workload(tmp)
        results = {}
        for name, n in WORKLOADS.items():
            cmd = [binary, name, str(n)]
            run_plain(cmd)  # warm up
            times = {"A": [], "B": [], "S": [], "C": []}
            for _ in range(args.rounds):
                times["A"].append(run_plain(cmd))
                times["B"].append(run_stat(pystrobe, cmd, ["--no-offcpu-stacks"]))
                times["S"].append(run_stat(pystrobe, cmd))
                top = SystemWideTop(pystrobe)
                try:
                    times["C"].append(run_plain(cmd))
                finally:
                    top.stop()
            results[name] = times
        costs = per_event_costs(pystrobe, binary)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    print(f"Accounting overhead ({args.rounds} rounds, alternating A B S C; medians in seconds)")
    print(f"{'workload':<10} {'A plain':>9} {'B stat':>9} {'B/A':>7} {'S +stacks':>9} {'S/A':>7} "
          f"{'C top':>9} {'C/A':>7} {'A/A noise':>10}")
    for name, times in results.items():
        a = statistics.median(times["A"])
        b = statistics.median(times["B"])
        st = statistics.median(times["S"])
        c = statistics.median(times["C"])
        odd, even = times["A"][0::2], times["A"][1::2]
        noise = statistics.median(odd) / statistics.median(even) if even else float("nan")
        print(f"{name:<10} {a:9.3f} {b:9.3f} {b / a:7.3f} {st:9.3f} {st / a:7.3f} "
              f"{c:9.3f} {c / a:7.3f} {noise:10.3f}")
    print()
    print("In-kernel cost per event (kernel.bpf_stats_enabled=1, system-wide accounting, "
          "both workloads)")
    print(f"{'program':<18} {'events':>10} {'total ms':>10} {'ns/event':>9}")
    for name, cnt, ns, per in costs:
        print(f"{name:<18} {cnt:10d} {ns / 1e6:10.1f} {per:9.0f}")


if __name__ == "__main__":
    main()
