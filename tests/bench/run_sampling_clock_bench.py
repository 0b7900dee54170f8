#!/usr/bin/env python3
"""The sampling clock's cost: two pystrobe binaries side by side in one run.

Compares a binary built before the random sampling clock (fixed cpu-clock
periods) with one built after it (periods redrawn at random, each sample's
interval measured in the kernel), round-robin so that the machine's load
falls on both alike:

- in-kernel ns per sample of `sample_cpu` (bpf_stats) with two Python targets
  50 frames deep, as section 2 of run_benchmarks.py measures it;
- pystrobe's own CPU while sampling, `record --all -r 99` with ten busy
  Pythons, as a share of one core, as section 3 measures it.

    sudo python3 tests/bench/run_sampling_clock_bench.py \\
        --before /path/to/old/pystrobe --after build/pystrobe
"""
import argparse
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from bench_common import bpf_stats  # noqa: E402
from run_benchmarks import (PY, Record, Workdir, kernel_cost, kill_all,  # noqa: E402
                            loadavg, per_sample_ns, say, spawn_busy, table)

RATE = 99


def kernel_ns_per_sample(binary, wd, seconds):
    _, filtered = kernel_cost(binary, [["sleep", str(seconds + 5)]], seconds, RATE)
    filtered_ns = filtered["ns"] / max(filtered["runs"], 1)
    _, st = kernel_cost(binary, [[PY, wd.deep, "50"]] * 2, seconds, RATE)
    per, _ = per_sample_ns(st, filtered_ns, RATE)
    return per, filtered_ns


def own_cpu_share(binary, seconds):
    busy = spawn_busy(10)
    try:
        time.sleep(0.5)
        rec = Record(binary, ["--all", "-r", str(RATE), "-d", str(seconds)], duration=seconds)
    finally:
        kill_all(busy)
    return rec.sampling_cpu_rate(), rec.samples / max(rec.elapsed, 1e-9)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--before", required=True, help="pystrobe with fixed periods")
    parser.add_argument("--after", required=True, help="pystrobe with the sampling clock")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--kernel-seconds", type=float, default=6)
    parser.add_argument("--own-seconds", type=float, default=15)
    args = parser.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("run as root: the benchmark loads BPF programs")
    wd = Workdir()
    binaries = {"before (fixed periods)": args.before, "after (sampling clock)": args.after}
    kernel = {name: [] for name in binaries}
    filtered = {name: [] for name in binaries}
    own = {name: [] for name in binaries}
    rates = {name: [] for name in binaries}
    say(f"sampling clock cost, {args.rounds} rounds round-robin, -r {RATE} (load {loadavg()})")
    with bpf_stats():
        for round_ in range(args.rounds):
            order = list(binaries.items())
            if round_ % 2:
                order.reverse()
            for name, binary in order:
                per, filt = kernel_ns_per_sample(binary, wd, args.kernel_seconds)
                if per:
                    kernel[name].append(per)
                filtered[name].append(filt)
                share, rate = own_cpu_share(binary, args.own_seconds)
                if share is not None:
                    own[name].append(share)
                rates[name].append(rate)

    def med(values, fmt):
        return (fmt.format(statistics.median(values)) +
                f" ({fmt.format(min(values))} to {fmt.format(max(values))})") if values else "-"

    say()
    table(["binary", "ns per target sample, Python 50 deep", "ns per filtered-out run",
           "pystrobe CPU while sampling (share of a core)", "samples per second"],
          [[name, med(kernel[name], "{:.0f}"), med(filtered[name], "{:.0f}"),
            med([100 * s for s in own[name]], "{:.2f}%"), med(rates[name], "{:.0f}")]
           for name in binaries])
    say(f"median (min to max) of {args.rounds} rounds; load at end {loadavg()}")


if __name__ == "__main__":
    main()
