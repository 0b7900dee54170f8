#!/usr/bin/env python3
"""Aliasing: how far each sampler reads from the truth on programs with a rhythm.

Runs the periodic workloads of the e2e tests (tests/workloads/native/periodic,
tests/workloads/python/e2e/periodic.py), whose cycle is exactly one or two
sampling periods, under pystrobe and the peers a user would pick, side by side,
and prints the error in points of the hottest part's share against the
workload's own CPU clocks, for each of --runs runs:
- C (80/20 in two functions): pystrobe, `perf record -F`, bpftrace
  `profile:hz` (both sample at an exact period, as pystrobe did before);
- Python (60/30/10 in three functions): pystrobe, Austin at the same mean
  interval (Austin reads CPython 3.8-3.10 here: pyenv's 3.8 runs both).

As root, after a build:
  tests/bench/run_periodic_bench.py --bin build/pystrobe [--runs 3] [--samples 1000]
Needs perf (linux-perf), bpftrace and austin for their rows; a missing one is named
and skipped. Asserts nothing.
"""
import argparse
import collections
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PY38 = sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.8.*/bin/python3.8")))
BPFTRACE_PROG = "profile:hz:{rate} /pid == {pid}/ {{ @[ustack] = count(); }}"


def shares(counts):
    total = sum(counts.values())
    return {k: v / total for k, v in counts.items()} if total else {}


def count_parts(lines, parts):
    """{part: samples} from (stack text, count) pairs; a stack counts for the first part in it."""
    counts = collections.Counter({p: 0 for p in parts})
    for stack, count in lines:
        for part in parts:
            if part in stack:
                counts[part] += count
                break
    return counts


def folded_lines(path):
    with open(path) as f:
        for line in f:
            stack, _, count = line.rstrip("\n").rpartition(" ")
            if count.isdigit():
                yield stack, int(count)


def truth_shares(path, parts):
    with open(path) as f:
        truth = json.load(f)
    cpu = truth.get("cpu_s") or {"phase_alpha": truth["alpha_cpu_s"],
                                 "phase_beta": truth["beta_cpu_s"]}
    return shares({p: cpu[p] for p in parts})


def run_pystrobe(binary, rate, argv, tmp):
    out = os.path.join(tmp, "p.folded")
    subprocess.run([binary, "record", "-r", str(rate), "-f", "folded", "-o", out, "--"] + argv,
                   check=True, capture_output=True)
    return list(folded_lines(out))


def run_perf(rate, argv, tmp):
    data = os.path.join(tmp, "perf.data")
    subprocess.run(["perf", "record", "-q", "-F", str(rate), "-g", "-o", data, "--"] + argv,
                   check=True, capture_output=True)
    script = subprocess.run(["perf", "script", "-i", data, "-F", "sym"], check=True,
                            capture_output=True, text=True).stdout
    # One sample per blank-line-separated block of symbols.
    return [(block, 1) for block in script.split("\n\n") if block.strip()]


def run_bpftrace(rate, argv, tmp):
    # bpftrace starts the command itself (-c) and filters on its pid.
    out = os.path.join(tmp, "bt.txt")
    prog = BPFTRACE_PROG.format(rate=rate, pid="cpid")
    subprocess.run(["bpftrace", "-o", out, "-e", prog, "-c", " ".join(argv)],
                   capture_output=True)
    text = open(out).read()
    # @[\n frames...\n]: count
    return [(m.group(1), int(m.group(2)))
            for m in re.finditer(r"@\[(.*?)\]: (\d+)", text, re.S)]


def run_austin(rate, argv, tmp):
    out = os.path.join(tmp, "austin.txt")
    subprocess.run(["austin", "-i", str(int(1e6 / rate)), "-o", out] + argv,
                   capture_output=True)
    lines = []
    for line in open(out):
        stack, _, count = line.rstrip("\n").rpartition(" ")
        if count.isdigit():
            lines.append((stack, int(count)))
    return lines


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", default=os.path.join(REPO, "build", "pystrobe"))
    parser.add_argument("--workloads", default=os.path.join(REPO, "build", "tests", "workloads",
                                                           "native"))
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--samples", type=int, default=1000,
                        help="run each program long enough for about this many samples")
    args = parser.parse_args()
    binary = os.path.abspath(args.bin)
    periodic_c = os.path.join(args.workloads, "periodic")
    periodic_py = os.path.join(REPO, "tests", "workloads", "python", "e2e", "periodic.py")

    tools_c = {"pystrobe": lambda r, a, t: run_pystrobe(binary, r, a, t)}
    tools_py = {"pystrobe": lambda r, a, t: run_pystrobe(binary, r, a, t)}
    for tool, runner, table in (("perf", run_perf, tools_c), ("bpftrace", run_bpftrace, tools_c),
                                ("austin", run_austin, tools_py)):
        if shutil.which(tool):
            table[f"{tool}"] = runner
        else:
            print(f"skipped: {tool} is not installed", file=sys.stderr)
    if not PY38:
        print("skipped: Python rows (no pyenv 3.8 for Austin and pystrobe)", file=sys.stderr)

    rows = []
    with tempfile.TemporaryDirectory(prefix="pystrobe-periodic-") as tmp:
        for rate in (99, 199):
            for periods in (1, 2):
                cycle = f"{1000.0 * periods / rate:.6f}"
                seconds = str(args.samples / rate)
                cases = [("C 80/20", tools_c, ["phase_alpha", "phase_beta"],
                          lambda j: [periodic_c, "--cycle-ms", cycle, "--alpha-percent", "80",
                                     "--cpu-seconds", seconds, "--json", j])]
                if PY38:
                    cases.append(("Python 60/30/10", tools_py, ["phase_a", "phase_b", "phase_c"],
                                  lambda j: [PY38[-1], periodic_py, "--cycle-ms", cycle, "--shares",
                                             "60,30,10", "--cpu-seconds", seconds, "--json", j]))
                for label, tools, parts, argv_for in cases:
                    for tool, runner in tools.items():
                        errors = []
                        for run in range(args.runs):
                            truth_path = os.path.join(tmp, f"truth-{run}.json")
                            try:
                                lines = runner(rate, argv_for(truth_path), tmp)
                                got = shares(count_parts(lines, parts))
                                truth = truth_shares(truth_path, parts)
                                errors.append(max(abs(got.get(p, 0) - truth[p]) for p in parts))
                            except (subprocess.CalledProcessError, OSError, KeyError,
                                    ValueError) as error:
                                print(f"{tool} {label} failed: {error}", file=sys.stderr)
                        row = (f"| {label} | {rate} Hz, cycle {periods} period{'s' * (periods > 1)}"
                               f" | {tool} | " + ", ".join(f"{100 * e:.1f}" for e in errors) +
                               f" | {100 * max(errors):.1f} |" if errors else " failed |")
                        print(row, flush=True)
                        rows.append(row)
    print("\n| program | rhythm | sampler | error per run (points) | worst |")
    print("| --- | --- | --- | --- | --- |")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
