"""A Python program with a rhythm, for tests/e2e/test_record_periodic.py.

Each cycle of --cycle-ms milliseconds of wall time is split between three
functions (--mode functions: phase_a, phase_b, phase_c) or between two loop
lines of one function (--mode lines: the lines tagged HEAVY and LIGHT), in the
shares --shares gives, as a frame loop or a 100 Hz control loop would spend
it. Each part spins until its deadline on the monotonic clock and is timed
with time.thread_time(), the truth the test compares with. Writes one JSON
object at the end, to --json FILE (or stdout):
  {"pid", "cpu_s": {part: thread CPU seconds}, "lines": {"HEAVY": n, "LIGHT": n},
   "off_cpu_s": {part: wall seconds in the part the thread did not run},
   "steal_s": the host's steal over the run (/proc/stat, all CPUs),
   "involuntary_switches": n}
The last three tell a failed test whether the machine, not the sampler, moved
time between the parts.
"""
import argparse
import json
import os
import resource
import time

clock = time.perf_counter
HERE = open(__file__, encoding="utf-8").read().splitlines()


def line_of(tag):
    for number, text in enumerate(HERE, start=1):
        if text.rstrip().endswith("# " + tag):
            return number
    raise KeyError(tag)


def steal_seconds():
    """The steal time of all CPUs so far (0 where the kernel does not say)."""
    with open("/proc/stat") as f:
        fields = f.readline().split()
    return int(fields[8]) / os.sysconf("SC_CLK_TCK") if len(fields) > 8 else 0.0


def spin(until):
    while clock() < until:
        pass


def phase_a(until):
    spin(until)


def phase_b(until):
    spin(until)


def phase_c(until):
    spin(until)


def two_lines(start, heavy_end, light_end, used, off_cpu):
    w0, t0 = clock(), time.thread_time()
    while clock() < heavy_end: pass  # HEAVY
    w1, t1 = clock(), time.thread_time()
    while clock() < light_end: pass  # LIGHT
    w2, t2 = clock(), time.thread_time()
    used["HEAVY"] += t1 - t0
    used["LIGHT"] += t2 - t1
    off_cpu["HEAVY"] += (w1 - w0) - (t1 - t0)
    off_cpu["LIGHT"] += (w2 - w1) - (t2 - t1)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--cycle-ms", type=float, default=10)
    parser.add_argument("--mode", choices=["functions", "lines"], default="functions")
    parser.add_argument("--shares", default="60,30,10")
    parser.add_argument("--cpu-seconds", type=float, default=5,
                        help="run until the parts used this much CPU (a busy machine makes "
                             "the run longer, not the sample count smaller)")
    parser.add_argument("--json", help="write the result here instead of stdout")
    args = parser.parse_args()
    cycle = args.cycle_ms / 1000
    shares = [float(s) / 100 for s in args.shares.split(",")]
    if args.mode == "functions":
        parts = list(zip(["phase_a", "phase_b", "phase_c"], [phase_a, phase_b, phase_c], shares))
        used = {name: 0.0 for name, _, _ in parts}
    else:
        used = {"HEAVY": 0.0, "LIGHT": 0.0}
    off_cpu = {part: 0.0 for part in used}
    steal_at_start = steal_seconds()
    cycle_start = clock()
    # Cycles begin at fixed multiples of the cycle, as a timer-driven loop's do.
    while sum(used.values()) < args.cpu_seconds:
        if args.mode == "functions":
            deadline = cycle_start
            for name, function, share in parts:
                deadline += share * cycle
                w0, t0 = clock(), time.thread_time()
                function(deadline)
                w1, t1 = clock(), time.thread_time()
                used[name] += t1 - t0
                off_cpu[name] += (w1 - w0) - (t1 - t0)
        else:
            two_lines(cycle_start, cycle_start + shares[0] * cycle, cycle_start + cycle, used,
                      off_cpu)
        cycle_start += cycle
    result = json.dumps({"pid": os.getpid(), "cpu_s": used,
                         "lines": {"HEAVY": line_of("HEAVY"), "LIGHT": line_of("LIGHT")},
                         "off_cpu_s": off_cpu, "steal_s": steal_seconds() - steal_at_start,
                         "involuntary_switches": resource.getrusage(
                             resource.RUSAGE_SELF).ru_nivcsw})
    if args.json:
        with open(args.json, "w") as f:
            f.write(result + "\n")
    else:
        print(result, flush=True)


main()
