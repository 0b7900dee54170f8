#!/usr/bin/env python3
"""What the OOM killer's stacks cost programs that are never killed.

The daemon takes each OOM-killed thread's stack on signal:signal_deliver, so
its program (sample_oom_killed) runs on every signal any thread of the
machine takes, and returns at once unless it is a SIGKILL to a victim. The
workload takes signals as fast as it can: a Python program sending itself
SIGUSR1 with a handler, SIGNALS times. Side by side, alternating:

  none    nothing attached
  daemon  `pystrobe daemon` at its defaults

For each: the workload's wall time per signal (median of ROUNDS runs) and,
with kernel.bpf_stats_enabled, sample_oom_killed's runs and ns per run.

usage: sudo python3 tests/bench/run_oom_stack_cost.py [--bin build/pystrobe] [--rounds 5]
       [--signals 200000]
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_common import bpf_stats  # noqa: E402
from run_memory_cost import PYTHON, REPO, Watch, start_daemon  # noqa: E402

STORM = """
import os, signal, sys, time
signal.signal(signal.SIGUSR1, lambda *_: None)
n = int(sys.argv[1])
start = time.perf_counter()
for _ in range(n):
    os.kill(os.getpid(), signal.SIGUSR1)
print((time.perf_counter() - start) / n * 1e9)
"""


def run(design, args, tmp):
    """Returns (workload ns per signal, sample_oom_killed runs, its ns per run)."""
    daemon = watch = None
    if design == "daemon":
        daemon = start_daemon(args.bin, tmp)
        watch = Watch(daemon.pid, ("sample_oom",))
        watch.poll()
    try:
        out = subprocess.run([PYTHON, "-c", STORM, str(args.signals)], capture_output=True,
                             text=True, check=True).stdout
        if watch is not None:
            watch.poll()
    finally:
        if daemon is not None:
            daemon.terminate()
            daemon.wait()
    ns, runs = watch.total() if watch is not None else (0, 0)
    return float(out), runs, ns / runs if runs else 0


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", default=os.path.join(REPO, "build", "pystrobe"))
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--signals", type=int, default=200000)
    args = parser.parse_args()
    results = {"none": [], "daemon": []}
    with bpf_stats(), tempfile.TemporaryDirectory() as tmp:
        for _ in range(args.rounds):
            for design in results:
                results[design].append(run(design, args, tmp))
    base = statistics.median(r[0] for r in results["none"])
    print(f"{args.signals} self-sent SIGUSR1 with a Python handler, medians of {args.rounds} runs")
    print(f"{'design':8} {'ns/signal':>10} {'vs none':>8} {'BPF runs':>9} {'BPF ns/run':>10}")
    for design, rows in results.items():
        per_signal = statistics.median(r[0] for r in rows)
        runs = statistics.median(r[1] for r in rows)
        per_run = statistics.median(r[2] for r in rows)
        print(f"{design:8} {per_signal:10.0f} {per_signal / base - 1:+8.1%} {runs:9.0f} "
              f"{per_run:10.0f}")


if __name__ == "__main__":
    main()
