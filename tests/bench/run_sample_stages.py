#!/usr/bin/env python3
"""Where one cpu-clock sample's time goes in the kernel, stage by stage, as shares of
the bare-read reference measured in the same seconds (issue #26).

run_kernel_ratio.py says what a whole sample costs; this says which stage it goes to,
with every other stage running, from a pystrobe built to time them
(bpf/sample_stages.bpf.h):
  cmake -B build-stages -G Ninja -DPYSTROBE_SAMPLE_STAGES=ON
  cmake --build build-stages --target pystrobe
  tests/bench/run_sample_stages.py --bin build-stages/pystrobe
Per CPython generation and depth (1 and 100), spinners (one per CPU) are recorded
at 99 Hz while run_kernel_ratio's reference (100 plain user reads a sample: bpftrace's,
or the built-in one) runs on the same pids; each stage's nanoseconds a sample, summed over CPUs from
sample_stage_ns, are printed over the reference's. A mark costs a clock read and a
lookup (about 0.04 of the reference on the VMs measured), counted in each stage. Prints
a table; asserts nothing. As root, with bpftool.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run_kernel_ratio  # noqa: E402
from bench_common import bpf_stats  # noqa: E402

# enum sample_stage, in order.
STAGES = ["ids", "stacks", "walk setup", "thread state", "interp+GIL", "top frame", "frames",
          "finish", "output"]


def stage_times():
    """[samples, ns of each stage], summed over CPUs, from sample_stage_ns."""
    dump = subprocess.run(["bpftool", "-j", "map", "dump", "name", "sample_stage_ns"],
                          capture_output=True, text=True)
    if dump.returncode != 0:
        raise SystemExit("no sample_stage_ns map: is --bin built with "
                         "-DPYSTROBE_SAMPLE_STAGES=ON?\n" + dump.stderr)
    totals = [0] * (1 + len(STAGES))
    for entry in json.loads(dump.stdout):
        for per_cpu in entry["values"]:
            raw = bytes(int(byte, 16) for byte in per_cpu["value"])
            words = [int.from_bytes(raw[8 * i:8 * i + 8], "little") for i in range(len(raw) // 8)]
            # struct sample_stage_times: samples, mark_ns, ns[...]
            totals[0] += words[0]
            for i in range(len(STAGES)):
                totals[1 + i] += words[2 + i]
    return totals


def measure(binary, python, depth, seconds, tmp, kind, reference_bin, native=False, rate=99):
    """(reference ns a sample, samples, [ns a sample per stage]), at `rate` Hz."""
    spinners = run_kernel_ratio.start_spinners(python, depth, tmp)
    procs = []
    try:
        time.sleep(1)  # past the interpreter's start
        pids = [p.pid for p in spinners]
        procs.append(subprocess.Popen(
            [binary, "record", "-r", str(rate), "-f", "folded", "-o", os.path.join(tmp, "out"),
             *(["--native"] if native else []), *[arg for pid in pids for arg in ("--pid", str(pid))]],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        reference = run_kernel_ratio.start_reference(kind, pids, reference_bin, rate)
        procs.append(reference)
        theirs = run_kernel_ratio.wait_for_program(
            reference.pid, lambda _, info: info.get("type") == "perf_event")
        run_kernel_ratio.wait_for_program(procs[0].pid, lambda name, _: name == "sample_cpu")
        time.sleep(2)  # pystrobe reads the processes first
        before, reference_before = stage_times(), run_kernel_ratio.run_stats(theirs)
        time.sleep(seconds)
        after, reference_after = stage_times(), run_kernel_ratio.run_stats(theirs)
        reference_ns, _ = run_kernel_ratio.ns_per_run(reference_before, reference_after)
        samples = after[0] - before[0]
        stages = [(a - b) / samples if samples else float("nan")
                  for a, b in zip(after[1:], before[1:])]
        return reference_ns, samples, stages
    finally:
        run_kernel_ratio.stop(procs + spinners)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", required=True, help="a pystrobe built with PYSTROBE_SAMPLE_STAGES")
    parser.add_argument("--seconds", type=float, default=8)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--native", action="store_true",
                        help="native stacks too (record --native): the user stage is their walk")
    parser.add_argument("--rate", type=int, default=99,
                        help="both programs' rate (at 999 Hz less of what they touch has "
                             "left the caches since the last tick)")
    run_kernel_ratio.add_sample_options(parser)
    options = parser.parse_args()
    kind = run_kernel_ratio.reference_kind(options.reference, options.reference_bin)
    print(f"Each stage's ns a sample over the reference's ({kind}, 100 user reads) of the same "
          f"seconds; a spinner per CPU, {options.rate} Hz, "
          + ("Python and native frames" if options.native else "Python frames"))
    print(f"{'CPython':14} {'depth':>5} {'ref ns':>7} {'samples':>7} {'total':>6}  "
          + "  ".join(STAGES))
    with bpf_stats(), tempfile.TemporaryDirectory() as tmp:
        for generation, python in run_kernel_ratio.interpreters(options):
            for depth in (1, 100):
                for _ in range(options.rounds):
                    reference, samples, stages = measure(options.bin, python, depth,
                                                         options.seconds, tmp, kind,
                                                         options.reference_bin,
                                                         options.native, options.rate)
                    shares = [ns / reference for ns in stages]
                    print(f"{generation:14} {depth:5} {reference:7.0f} {samples:7d} "
                          f"{sum(shares):6.2f}  "
                          + "  ".join(f"{share:.2f}".rjust(len(name))
                                      for name, share in zip(STAGES, shares)), flush=True)


if __name__ == "__main__":
    main()
