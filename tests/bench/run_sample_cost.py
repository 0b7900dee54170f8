#!/usr/bin/env python3
"""What one sample costs pystrobe in userspace: replayed, and live.

replay (default): captures corpora of real ring buffer records (build/tests/bench/
  record_replay_bench capture, as root) while two 100-deep python3.11 busy loops
  (one per CPU), a 100-deep Python program that sleeps (off-CPU records) and a
  process churn (exec and exit events) run, then replays each corpus through
  Recorder, ProfileBuilder and the pprof writer and prints microseconds per sample.
  Corpora: "cpu" (`record --all`'s records), "offcpu" (`--off-cpu`: every
  interval off CPU of every thread too) and "native" (`--native --off-cpu`: every
  Python sample carries its native stack too).
  --corpus-dir keeps them; --replay-only replays kept ones again (the same
  records before and after a change).
live: `pystrobe record --all -r 99` for --long and --short seconds on the same
  load; pystrobe's own CPU (rusage) difference over the sample count difference is
  the steady-state CPU per sample, start-up and the final write cancelled out.
  --baseline BIN measures another build in the same run, alternating.
pid: the same for `record --pid A --pid B` (the two busy loops).
On a bigger host, --busy N keeps N CPUs busy (live, pid) and --python names its
interpreter.

Asserts nothing; timings move with the machine's other load (printed).
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_common import DEEP_PY  # noqa: E402

PY = "/usr/bin/python3.11"


SLEEPER_PY = r'''
import sys, time
sys.setrecursionlimit(10000)
def recurse(d):
    if d > 1:
        return recurse(d - 1)
    while True:
        for _ in range(2000):
            pass
        time.sleep(0.02)
recurse(int(sys.argv[1]) - 1)
'''

CHURN_PY = r'''
import subprocess, time
while True:
    subprocess.run(["/bin/true"])
    time.sleep(0.1)
'''


class Load:
    """The programs sampled: started on entry, killed on exit."""

    def __init__(self, workdir, python=PY, busy=2):
        self.workdir = workdir
        self.python = python
        self.busy_count = busy
        self.procs = []

    def write(self, name, text):
        path = os.path.join(self.workdir, name)
        with open(path, "w") as f:
            f.write(text)
        return path

    def __enter__(self):
        deep = self.write("deep.py", DEEP_PY)
        sleeper = self.write("sleeper.py", SLEEPER_PY)
        churn = self.write("churn.py", CHURN_PY)
        cpus = sorted(os.sched_getaffinity(0))[:self.busy_count]
        for cpu in cpus:
            self.procs.append(subprocess.Popen(["taskset", "-c", str(cpu), self.python, deep,
                                                "100"]))
        self.busy = [p.pid for p in self.procs]
        self.procs.append(subprocess.Popen([self.python, sleeper, "100"]))
        self.procs.append(subprocess.Popen([self.python, churn]))
        time.sleep(1.0)  # past start-up: imports are not the loop
        return self

    def __exit__(self, *exc):
        for p in self.procs:
            p.kill()
        for p in self.procs:
            p.wait()


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def run_record(binary, args, seconds, out):
    """pystrobe record ARGS for SECONDS: (its CPU seconds, samples it counted)."""
    cmd = [binary, "record", *args, "-r", "99", "-d", str(seconds), "-o", out]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    stderr = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    if status != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{stderr}")
    m = re.search(r"pystrobe: (\d+) samples of", stderr)
    if not m:
        sys.exit(f"no sample count in the output of {' '.join(cmd)}:\n{stderr}")
    return usage.ru_utime + usage.ru_stime, int(m.group(1))


def live(args, binaries, extra):
    """Steady-state CPU per sample of each binary: (long - short) runs."""
    with tempfile.TemporaryDirectory() as tmp, Load(tmp, args.python, args.busy) as load:
        record_args = list(extra)
        if "--pid" in record_args:
            record_args = [a for pid in load.busy for a in ("--pid", str(pid))]
        print(f"load average {loadavg()}; record {' '.join(record_args)} -r 99, "
              f"{args.long} s less {args.short} s, {args.rounds} rounds")
        results = {b: [] for b in binaries}
        for r in range(args.rounds):
            for binary in binaries if r % 2 == 0 else reversed(binaries):
                out = os.path.join(tmp, "out.pb.gz")
                cpu_long, n_long = run_record(binary, record_args, args.long, out)
                cpu_short, n_short = run_record(binary, record_args, args.short, out)
                per = (cpu_long - cpu_short) / max(n_long - n_short, 1) * 1e6
                results[binary].append(per)
                print(f"  {binary}: {cpu_long:.3f} s CPU for {n_long} samples, "
                      f"{cpu_short:.3f} s for {n_short}: {per:.1f} us per sample")
        for binary, values in results.items():
            values.sort()
            print(f"{binary}: median {values[len(values) // 2]:.1f} us per sample "
                  f"(range {values[0]:.1f} to {values[-1]:.1f}); load average {loadavg()}")


def replay(args):
    corpus_dir = args.corpus_dir or tempfile.mkdtemp(prefix="pystrobe-corpus-")
    os.makedirs(corpus_dir, exist_ok=True)
    corpora = {"cpu": [], "offcpu": ["--off-cpu"], "native": ["--off-cpu", "--native"]}
    if not args.replay_only:
        with Load(corpus_dir) as _:
            for name, flags in corpora.items():
                path = os.path.join(corpus_dir, f"{name}.corpus")
                subprocess.run([args.bench, "capture", "--out", path, "--seconds",
                                str(args.seconds), "--rate", "99", *flags], check=True)
    print(f"load average {loadavg()}")
    for name in corpora:
        path = os.path.join(corpus_dir, f"{name}.corpus")
        for extra in ([], ["--min-python-frames", "90"]):
            label = "100-deep samples only" if extra else "every sample"
            print(f"--- {name} corpus, {label}")
            sys.stdout.flush()
            subprocess.run([args.bench, "replay", path, "--rounds", str(args.rounds), *extra],
                           check=True)
    if not args.corpus_dir:
        shutil.rmtree(corpus_dir)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    build = os.path.join(here, "..", "..", "build")
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("mode", nargs="?", choices=["replay", "live", "pid"], default="replay")
    parser.add_argument("--bin", default=os.path.join(build, "pystrobe"))
    parser.add_argument("--baseline", help="another pystrobe binary measured alongside (live, pid)")
    parser.add_argument("--bench", default=os.path.join(build, "tests", "bench",
                                                        "record_replay_bench"))
    parser.add_argument("--seconds", type=int, default=20, help="capture length (replay)")
    parser.add_argument("--rounds", type=int, default=None)
    parser.add_argument("--corpus-dir")
    parser.add_argument("--replay-only", action="store_true")
    parser.add_argument("--long", type=int, default=30)
    parser.add_argument("--short", type=int, default=4)
    parser.add_argument("--python", default=PY, help="the interpreter of the load (live, pid)")
    parser.add_argument("--busy", type=int, default=2,
                        help="100-deep busy loops, one per CPU from the first (live, pid)")
    args = parser.parse_args()
    if args.mode == "replay":
        args.rounds = args.rounds or 20
        replay(args)
        return
    args.rounds = args.rounds or 2
    binaries = [args.bin] + ([args.baseline] if args.baseline else [])
    live(args, binaries, ["--all"] if args.mode == "live" else ["--pid"])


if __name__ == "__main__":
    main()
