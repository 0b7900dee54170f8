#!/usr/bin/env python3
"""What `record --allocations` costs an allocation-heavy Python program.

The workload (Debian's python3.11) runs two loops and times them itself
(perf_counter around them, so start-up is not counted):
  malloc  2,000,000 bytes objects of 1 KiB made and dropped: each a calloc and
          a free (objects over 512 bytes bypass pymalloc)
  mixed   2,000,000 iterations of small lists, dicts and strings (pymalloc,
          which calls malloc only for new 256 KiB arenas) and one 1 KiB bytes
under each of, alternating, ROUNDS times:
  none         unprofiled
  in-process   `pystrobe record --allocations -f folded -- CMD`: the command runs with
               libpystrobe-alloc.so preloaded, which samples every 512 KiB on average
               in the process; only sampled allocations and their frees trap
  library      the same library preloaded with no pystrobe attached (its probes stay
               nops): what the wrappers alone cost
  uprobes      `pystrobe record --allocations --pid PID` on the workload already
               running (waiting on stdin until pystrobe records): uprobes on libc's
               malloc, calloc, realloc, free, each call a trap
  tracemalloc  python3.11 -X tracemalloc=1 (exact, one frame)
  scalene      python3.11 -m scalene --cli --memory (Debian's python3-scalene: its
               own allocator shim, sampled), when installed
and memray when installed (named when not; it is not packaged for Debian 12).
Medians of wall and of the process's CPU seconds (user and system: a uprobe's trap
counts), and the slowdown against none; in brackets the lowest and highest of the
rounds' own slowdowns (each round's run against that round's none, run just before
it): on a shared host the spread says what a figure is worth.

usage: sudo python3 tests/bench/run_allocations_cost.py [--bin build/pystrobe] [--rounds 3]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
PYTHON = "/usr/bin/python3.11"

WORKLOAD = r"""
import json, sys, time
if len(sys.argv) > 2 and sys.argv[2] == "--wait":
    sys.stdin.readline()
def malloc_loop(n):
    for _ in range(n):
        b = bytes(1024)
def mixed_loop(n):
    for i in range(n):
        l = [i, i + 1, i + 2]
        d = {"a": i}
        s = str(i)
        if i % 4 == 0:
            b = bytes(1024)
n = 2_000_000
t0, c0 = time.perf_counter(), time.process_time()
malloc_loop(n)
t1, c1 = time.perf_counter(), time.process_time()
mixed_loop(n)
t2, c2 = time.perf_counter(), time.process_time()
with open(sys.argv[1], "w") as f:
    json.dump({"malloc": t1 - t0, "mixed": t2 - t1, "malloc_cpu": c1 - c0, "mixed_cpu": c2 - c1}, f)
"""


def run_uprobes(args, script, truth, tmp):
    """The workload started first, then `record --pid`: it runs its loops once
    pystrobe says it records."""
    workload = subprocess.Popen([PYTHON, script, truth, "--wait"], stdin=subprocess.PIPE,
                                text=True)
    recorder = subprocess.Popen(
        [args.bin, "record", "--allocations", "--no-daemon", "-f", "folded", "-o",
         os.path.join(tmp, "uprobes.folded"), "--pid", str(workload.pid)],
        stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    for line in recorder.stderr:
        if "recording" in line:
            break
    workload.stdin.write("go\n")
    workload.stdin.flush()
    workload.wait()
    recorder.communicate(timeout=120)
    with open(truth) as f:
        return json.load(f)


def library_beside(binary):
    """The libpystrobe-alloc.so that `binary` preloads (beside it, as in a build tree)."""
    return os.path.join(os.path.dirname(os.path.realpath(binary)), "libpystrobe-alloc.so")


def run(design, args, tmp):
    script = os.path.join(tmp, "workload.py")
    truth = os.path.join(tmp, "times.json")
    if design == "uprobes":
        return run_uprobes(args, script, truth, tmp)
    env = None
    if design == "library":
        env = dict(os.environ, LD_PRELOAD=library_beside(args.bin))
    cmd = {
        "none": [PYTHON, script, truth],
        "library": [PYTHON, script, truth],
        "in-process": [args.bin, "record", "--allocations", "--no-daemon", "-f", "folded", "-o",
                       os.path.join(tmp, "alloc.folded"), "--", PYTHON, script, truth],
        "tracemalloc": [PYTHON, "-X", "tracemalloc=1", script, truth],
        "scalene": [PYTHON, "-m", "scalene", "--cli", "--memory", "--outfile",
                    os.path.join(tmp, "scalene.txt"), script, truth],
        "memray": [PYTHON, "-m", "memray", "run", "-q", "-f", "-o",
                   os.path.join(tmp, "memray.bin"), script, truth],
    }[design]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    with open(truth) as f:
        return json.load(f)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", default=os.path.join(REPO, "build", "pystrobe"))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--no-uprobes", action="store_true",
                        help="leave out the uprobes design (minutes a round)")
    args = parser.parse_args()
    designs = (["none", "library", "in-process"] + ([] if args.no_uprobes else ["uprobes"]) +
               ["tracemalloc"])
    for peer in ("scalene", "memray"):
        if subprocess.run([PYTHON, "-c", f"import {peer}"], capture_output=True).returncode:
            print(f"{peer} is not installed for {PYTHON}: not measured", file=sys.stderr)
        else:
            designs.append(peer)
    results = {d: [] for d in designs}
    with tempfile.TemporaryDirectory() as tmp:
        with open(os.path.join(tmp, "workload.py"), "w") as f:
            f.write(WORKLOAD)
        for _ in range(args.rounds):
            for design in designs:
                results[design].append(run(design, args, tmp))
    # Wall seconds, and the process's own CPU seconds (user and system, the
    # kernel's traps included): far less sensitive to other load on the host.
    keys = ("malloc", "mixed", "malloc_cpu", "mixed_cpu")
    base = {k: statistics.median(r[k] for r in results["none"]) for k in keys}
    print(f"medians of {args.rounds} runs, seconds (slowdown against none)")
    print(f"{'design':12} {'malloc loop':>30} {'mixed loop':>30} {'malloc loop, CPU':>30} "
          f"{'mixed loop, CPU':>30}")
    for design in designs:
        cells = []
        for k in keys:
            t = statistics.median(r[k] for r in results[design])
            own = [r[k] / n[k] for r, n in zip(results[design], results["none"])]
            cells.append(f"{t:8.3f} ({t / base[k]:5.2f}x) [{min(own):.2f}-{max(own):.2f}]")
        print(f"{design:12} " + " ".join(f"{c:>30}" for c in cells))


if __name__ == "__main__":
    main()
