#!/usr/bin/env python3
"""pystrobe beside CPython 3.15's own sampler, `python3.15 -m profiling.sampling`,
on the same programs in one run: how far each reads from the truth the program
measures itself, and what each costs per sample.

Programs (Debian unstable's python3.15 through scripts/test-pythons.sh's launcher):
- split: tests/workloads/python/e2e/cpu_split3.py, three functions 60/30/10 by CPU;
- periodic: tests/workloads/python/e2e/periodic.py, the same split inside a 10 ms
  cycle (one sampling period at 99 Hz: a sampler at an exact period aliases).
Error: points between the hottest function's sampled share and its CPU share as the
program's own thread clock measured it. Cost: the tool's CPU seconds (its process tree
less the program's own CPU) per sample it kept, at 99 Hz and 1 kHz.

As root, after a build and scripts/test-pythons.sh:
  tests/bench/run_newest_cpython_bench.py --bin build/pystrobe [--runs 3]
Asserts nothing; prints a markdown table.
"""
import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
WORKLOADS = os.path.join(REPO, "tests", "workloads", "python", "e2e")
PYTHON315 = "/opt/pystrobe-test/bin/python3.15"
FUNCTIONS = {"split": ("split_alpha", "split_beta", "split_gamma"),
             "periodic": ("phase_a", "phase_b", "phase_c")}


def program(name, seconds, json_path):
    if name == "split":
        return [os.path.join(WORKLOADS, "cpu_split3.py"), "--seconds", str(seconds),
                "--shares", "60,30,10"]
    return [os.path.join(WORKLOADS, "periodic.py"), "--cycle-ms", "10.101",
            "--cpu-seconds", str(seconds), "--json", json_path]


def truth_of(name, stdout, json_path):
    if name == "split":
        line = next(l for l in stdout.splitlines() if l.startswith("{"))
        t = json.loads(line)
        used = {"split_alpha": t["alpha_cpu_s"], "split_beta": t["beta_cpu_s"],
                "split_gamma": t["gamma_cpu_s"]}
    else:
        with open(json_path) as f:
            used = json.load(f)["cpu_s"]
    return used


def run_measured(argv):
    """Runs argv to its end; (stdout, stderr, CPU seconds of its whole process tree)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if proc.returncode != 0:
        raise RuntimeError(f"{argv[:3]} failed ({proc.returncode}): {proc.stderr[-800:]}")
    return proc.stdout, proc.stderr, cpu


def count_functions(folded_text, functions):
    counts = {f: 0 for f in functions}
    total = 0
    for line in folded_text.splitlines():
        stack, _, n = line.rpartition(" ")
        if not n.isdigit():
            continue
        total += int(n)
        for f in functions:
            if f in stack:
                counts[f] += int(n)
                break
    return counts, total


def one_run(tool, name, rate, seconds, pystrobe):
    with tempfile.TemporaryDirectory() as tmp:
        out_json = os.path.join(tmp, "truth.json")
        folded = os.path.join(tmp, "out.folded")
        target = [PYTHON315] + program(name, seconds, out_json)
        if tool == "pystrobe":
            argv = [pystrobe, "record", "-r", str(rate), "-f", "folded", "-o", folded, "--"] + target
        else:
            # CPU mode: samples of threads on a CPU, as pystrobe's.
            argv = [PYTHON315, "-m", "profiling.sampling", "run", "-r", str(rate), "--mode",
                    "cpu", "--collapsed", "-o", folded] + target[1:]
        stdout, stderr, cpu = run_measured(argv)
        used = truth_of(name, stdout, out_json)
        with open(folded) as f:
            counts, total = count_functions(f.read(), FUNCTIONS[name])
    program_cpu = sum(used.values())
    kept = sum(counts.values())
    hot = FUNCTIONS[name][0]
    error = abs(counts[hot] / kept - used[hot] / program_cpu) * 100 if kept else float("nan")
    # The tool's own CPU: its process tree less the program's functions (a lower
    # bound of the program's CPU: start-up is left in the tool's figure).
    tool_cpu = max(cpu - program_cpu, 0)
    return {"error_points": error, "samples": total, "tool_cpu_s": tool_cpu,
            "us_per_sample": 1e6 * tool_cpu / total if total else float("nan")}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bin", default=os.path.join(REPO, "build", "pystrobe"))
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=4)
    args = parser.parse_args()
    if not os.access(PYTHON315, os.X_OK):
        sys.exit(f"{PYTHON315} missing: run scripts/test-pythons.sh")
    print("| program | rate | tool | error of the hottest share (points), per run | "
          "samples | tool CPU per sample |")
    print("| --- | --- | --- | --- | --- | --- |")
    for name in ("split", "periodic"):
        for rate in (99, 1000):
            for tool in ("pystrobe", "profiling.sampling"):
                runs = [one_run(tool, name, rate, args.seconds, args.bin)
                        for _ in range(args.runs)]
                errors = ", ".join(f"{r['error_points']:.1f}" for r in runs)
                samples = sum(r["samples"] for r in runs) // len(runs)
                per = sorted(r["us_per_sample"] for r in runs)[len(runs) // 2]
                print(f"| {name} | {rate} Hz | {tool} | {errors} | {samples} | {per:.0f} us |",
                      flush=True)


if __name__ == "__main__":
    main()
