#!/usr/bin/env python3
"""In-kernel cost per sample of native unwinding with tables (issue #12).

Runs `pystrobe record` with and without --native on a C program built without
frame pointers (unwind_chain --mode recursion, 18 native frames) and on Debian's
python3.11 spinning 98 Python frames deep, reads the run time of pystrobe's own
sample_cpu program (kernel.bpf_stats_enabled, found through the recorder's
/proc/PID/fdinfo) after 5 s, and divides by the samples sent in that time. The
runs on idle CPUs and of other processes count too: the figures are upper
bounds. As root, with bpftool; prints a table, asserts nothing.

  tests/bench/run_native_unwind_cost.py --bin build/pystrobe \\
      --workloads build/tests/workloads/native
"""
import argparse
import json
import os
import subprocess
import tempfile
import time

from bench_common import bpf_stats

DEEP = """
import time
def spin(n):
    if n == 0:
        end = time.time() + 7
        x = 0
        while time.time() < end:
            for i in range(1000): x += i
        return x
    return spin(n - 1) + 1
spin(97)
"""


def program_run_time(pid):
    """(run_time_ns, run_cnt) of the sample_cpu program `pid` holds, or None."""
    ids = set()
    for fd in os.listdir(f"/proc/{pid}/fdinfo"):
        try:
            with open(f"/proc/{pid}/fdinfo/{fd}") as f:
                for line in f:
                    if line.startswith("prog_id:"):
                        ids.add(line.split()[1])
        except OSError:
            pass
    for prog in ids:
        info = json.loads(subprocess.run(["bpftool", "-j", "prog", "show", "id", prog],
                                         capture_output=True, text=True).stdout or "{}")
        if info.get("name") == "sample_cpu":
            return info.get("run_time_ns", 0), info.get("run_cnt", 0)
    return None


def measure(binary, native, command, tmp):
    summary = os.path.join(tmp, "summary.json")
    args = [binary, "record", "-r", "997", "-f", "folded", "-o", os.path.join(tmp, "p.folded"),
            "--summary-json", summary] + (["--native"] if native else []) + ["--"] + command
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(5)
    run = program_run_time(proc.pid)
    proc.wait()
    with open(summary) as f:
        sent = json.load(f)["samples"]
    # The program ran 7 s; the first 5 are measured.
    return run[0] / (sent * 5 / 7) / 1000 if run and sent else float("nan")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", default="build/pystrobe")
    parser.add_argument("--workloads", default="build/tests/workloads/native")
    options = parser.parse_args()
    with bpf_stats(), tempfile.TemporaryDirectory() as tmp:
        deep = os.path.join(tmp, "deep.py")
        with open(deep, "w") as f:
            f.write(DEEP)
        workloads = [
            ("C, 18 native frames", [os.path.join(options.workloads, "unwind_chain"), "--mode",
                                     "recursion", "--seconds", "7"]),
            ("python3.11, 98 Python frames", ["/usr/bin/python3.11", deep]),
        ]
        print(f"{'workload':32} {'without --native':>18} {'with --native':>15}")
        for name, command in workloads:
            without = measure(options.bin, False, command, tmp)
            with_native = measure(options.bin, True, command, tmp)
            print(f"{name:32} {without:15.2f} us {with_native:12.2f} us")


if __name__ == "__main__":
    main()
