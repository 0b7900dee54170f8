#!/usr/bin/env python3
"""What one sample costs pystrobe in the kernel, as a ratio that travels between hosts
(issue #26).

Absolute nanoseconds do not travel: a bare 8-byte bpf_probe_read_user costs about
30 ns on one VM of this kind and 110 ns on another (PLATFORM.md). So each figure here
is pystrobe's sampling program (sample_cpu) against a reference measured in the same
seconds on the same processes: a bpftrace `profile:hz:99` program that does nothing
but 100 plain 8-byte user reads per sample, one per 8 bytes up the thread's stack
(the cost of visiting 100 frames with one read each).

Per CPython generation it starts Python programs spinning 100 frames deep (one per
CPU), then records them with `pystrobe record --pid A --pid B ... -r 99` (with and without
--native) while the reference runs, and reads both programs' run_time_ns / run_cnt
(kernel.bpf_stats_enabled) over --seconds. Both programs run on every CPU at the same
rate and filter the same pids, so their runs on an idle CPU or another process count
alike. Prints each round, then each figure's median and range over the rounds;
asserts nothing. As root, with bpftool. --rate 99 --rate 999 measures at both rates:
at 99 Hz a busy host has evicted much of what a sample touches since the CPU's last
tick, at 999 Hz less, so the second figure is nearer the walk's own work.
  tests/bench/run_kernel_ratio.py --bin build/pystrobe
The reference is bpftrace's where it is installed, else the same 100 reads built in
(build/tests/bench/reference_reads, reference_reads.bpf.c): bpftrace needs LLVM, which
a host lent for a day may not have. --reference picks one; --python GEN=PATH measures
another interpreter (a host's own python3.12, say).
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_common import DEEP_PY, bpf_stats  # noqa: E402

DEPTH = 100
# (generation, interpreter): frames side by side on the data stack (3.11+), or
# apart on the heap (3.8-3.10).
PYTHONS = [
    ("3.11 (Debian)", "/usr/bin/python3.11"),
    ("3.12", "/root/.pyenv/versions/3.12.1/bin/python3.12"),
    ("3.10", "/root/.pyenv/versions/3.10.13/bin/python3.10"),
    ("3.8", "/root/.pyenv/versions/3.8.18/bin/python3.8"),
]

# 100 reads at 8-byte steps up the interrupted thread's user stack; %d is the
# rate, %s the filter on the measured pids.
REFERENCE = """
profile:hz:%d /%s/ {
  $at = reg("sp");
  unroll(100) {
    $v = *(uint64 *)uptr($at);
    $at += 8;
  }
}
"""


BUILTIN_REFERENCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                 "build", "tests", "bench", "reference_reads")


def reference_kind(asked=None, builtin=BUILTIN_REFERENCE):
    """`asked`, or bpftrace where installed, else the built-in reference; exits when
    the one picked is missing."""
    kind = asked or ("bpftrace" if shutil.which("bpftrace") else "builtin")
    if kind == "bpftrace" and shutil.which("bpftrace") is None:
        raise SystemExit("bpftrace is not installed (scripts/install-deps.sh --tests)")
    if kind == "builtin" and not os.access(builtin, os.X_OK):
        raise SystemExit(f"{builtin} is not built (cmake --build build)")
    return kind


def add_sample_options(parser):
    """The options both kernel benches take: which interpreters, which reference."""
    parser.add_argument("--only", action="append", default=[],
                        help="a generation to measure (3.11, 3.12, 3.10, 3.8); repeatable")
    parser.add_argument("--python", action="append", default=[], metavar="GEN=PATH",
                        help="measure this interpreter as generation GEN (repeatable); "
                             "with it, only the interpreters named")
    parser.add_argument("--reference", choices=("bpftrace", "builtin"),
                        help="the reference program (default: bpftrace where installed)")
    parser.add_argument("--reference-bin", default=BUILTIN_REFERENCE,
                        help="the built-in reference's loader (reference_reads)")


def interpreters(options):
    """(generation, interpreter) to measure: --python's, else PYTHONS narrowed by --only;
    one that is not installed is named and skipped."""
    for generation, python in [tuple(p.split("=", 1)) for p in options.python] or PYTHONS:
        if options.only and generation.split()[0] not in options.only:
            continue
        if not os.access(python, os.X_OK):
            print(f"skipped: {generation} ({python} is not installed)")
            continue
        yield generation, python


def start_reference(kind, pids, builtin=BUILTIN_REFERENCE, rate=99):
    """The reference's process on `pids` at `rate` Hz: bpftrace's program or the
    built-in one."""
    if kind == "bpftrace":
        filter_ = " || ".join(f"pid == {pid}" for pid in pids)
        command = ["bpftrace", "-e", REFERENCE % (rate, filter_)]
    else:
        command = [builtin, "--rate", str(rate), *map(str, pids)]
    return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def programs_of(pid):
    """{name: id} of the BPF programs process `pid` holds."""
    ids = set()
    for fd in os.listdir(f"/proc/{pid}/fdinfo"):
        try:
            with open(f"/proc/{pid}/fdinfo/{fd}") as f:
                ids.update(line.split()[1] for line in f if line.startswith("prog_id:"))
        except OSError:
            pass
    found = {}
    for prog in ids:
        info = json.loads(subprocess.run(["bpftool", "-j", "prog", "show", "id", prog],
                                         capture_output=True, text=True).stdout or "{}")
        found[info.get("name", "")] = info
    return found


def run_stats(prog_id):
    info = json.loads(subprocess.run(["bpftool", "-j", "prog", "show", "id", str(prog_id)],
                                     capture_output=True, text=True).stdout or "{}")
    return info.get("run_time_ns", 0), info.get("run_cnt", 0)


def wait_for_program(pid, pick, timeout=30):
    """The id of the program of process `pid` that `pick(name, info)` chooses."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        for name, info in programs_of(pid).items():
            if pick(name, info):
                return info["id"]
        time.sleep(0.2)
    raise SystemExit(f"process {pid} loaded no program to measure")


def start_spinners(python, depth, tmp):
    """Programs of `python` spinning `depth` frames deep, one per CPU: every CPU's
    ticks then fall on a measured program, not on an idle CPU that both programs
    would only filter out."""
    script = os.path.join(tmp, "deep.py")
    with open(script, "w") as f:
        f.write(DEEP_PY)
    return [subprocess.Popen([python, script, str(depth)])
            for _ in range(len(os.sched_getaffinity(0)))]


def stop(processes):
    """Terminates `processes` and waits for them; kills any that linger."""
    for p in processes:
        p.terminate()
    for p in processes:
        try:
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def ns_per_run(before, after):
    runs = after[1] - before[1]
    return (after[0] - before[0]) / runs if runs > 0 else float("nan"), runs


def measure(binaries, python, native, seconds, tmp, kind, reference_bin, rate=99):
    """([pystrobe ns/run per binary], reference ns/run, [runs per binary]) on a
    spinner of `python` per CPU, every binary recording them in the same seconds,
    all at `rate` Hz."""
    spinners = start_spinners(python, DEPTH, tmp)
    procs = []
    try:
        time.sleep(1)  # past the interpreter's start
        pids = [p.pid for p in spinners]
        reference = start_reference(kind, pids, reference_bin, rate)
        procs.append(reference)
        ours = []
        for i, binary in enumerate(binaries):
            args = [binary, "record", "-r", str(rate), "-f", "folded",
                    "-o", os.path.join(tmp, f"p{i}.folded"),
                    *[arg for pid in pids for arg in ("--pid", str(pid))]]
            if native:
                args.append("--native")
            pystrobe = subprocess.Popen(args, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL)
            procs.append(pystrobe)
            ours.append(wait_for_program(pystrobe.pid, lambda name, _: name == "sample_cpu"))
        theirs = wait_for_program(reference.pid, lambda _, info: info.get("type") == "perf_event")
        time.sleep(2)  # pystrobe reads the processes and loads their tables first
        before = [run_stats(prog) for prog in ours], run_stats(theirs)
        time.sleep(seconds)
        after = [run_stats(prog) for prog in ours], run_stats(theirs)
        measured = [ns_per_run(b, a) for b, a in zip(before[0], after[0])]
        reference_ns, _ = ns_per_run(before[1], after[1])
        return [ns for ns, _ in measured], reference_ns, [runs for _, runs in measured]
    finally:
        stop(procs + spinners)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", action="append", default=[],
                        help="a pystrobe binary (default build/pystrobe); repeat to compare "
                             "binaries recording the same programs in the same seconds")
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--mode", choices=("python", "native", "both"), default="both")
    parser.add_argument("--rate", type=int, action="append", default=[],
                        help="the sampling rate of both programs (default 99); repeat to "
                             "measure at each: the cost at 99 Hz includes refetching code "
                             "and data that the host evicted since the last tick, which at "
                             "999 Hz is mostly still cached")
    parser.add_argument("--alone", action="store_true",
                        help="run the binaries one at a time, in turn, each against the "
                             "reference of its own seconds: recorders run at once share the "
                             "caches, and the ring buffer's cost depends on what else is written")
    add_sample_options(parser)
    options = parser.parse_args()
    binaries = options.bin or ["build/pystrobe"]
    if shutil.which("bpftool") is None:
        raise SystemExit("bpftool is not installed (scripts/install-deps.sh --tests)")
    kind = reference_kind(options.reference, options.reference_bin)
    cpus = len(os.sched_getaffinity(0))
    rates = options.rate or [99]
    print(f"{DEPTH}-deep Python stacks, {cpus} programs (one per CPU), "
          f"{', '.join(map(str, rates))} Hz, {options.seconds:g} s "
          f"per figure, {options.rounds} rounds; reference: {kind}, {DEPTH} user reads per "
          f"sample, in the same seconds")
    print(f"{'CPython':14} {'mode':10} {'Hz':>4} {'pystrobe ns':>12} {'reference ns':>13} "
          f"{'ratio':>6} {'runs':>6}" + ("  binary" if len(binaries) > 1 else ""))
    ratios = {}  # (generation, mode, rate, binary): every round's ratio
    with bpf_stats(), tempfile.TemporaryDirectory() as tmp:
        for generation, python in interpreters(options):
            for native in {"python": (False,), "native": (True,),
                           "both": (False, True)}[options.mode]:
                mode = "--native" if native else "python"
                for _ in range(options.rounds):
                    for rate in rates:
                        for group in ([[b] for b in binaries] if options.alone else [binaries]):
                            ours, reference, runs = measure(group, python, native,
                                                            options.seconds, tmp, kind,
                                                            options.reference_bin, rate)
                            for binary, ns, count in zip(group, ours, runs):
                                print(f"{generation:14} {mode:10} {rate:4d} {ns:12.0f} "
                                      f"{reference:13.0f} {ns / reference:6.2f} {count:6d}"
                                      + (f"  {binary}" if len(binaries) > 1 else ""), flush=True)
                                ratios.setdefault((generation, mode, rate, binary), []).append(
                                    ns / reference)
    if options.rounds > 1:
        print_medians(ratios, len(binaries) > 1)


def print_medians(ratios, name_binaries):
    """Each figure's median over its rounds, with the lowest and highest: one binary's
    ratio moves by a fifth from one round to the next on a shared host
    (docs/benchmarks.md), so a single round says little."""
    print(f"\n{'CPython':14} {'mode':10} {'Hz':>4} {'median':>6} {'range':>11}"
          + ("  binary" if name_binaries else ""))
    for (generation, mode, rate, binary), values in ratios.items():
        print(f"{generation:14} {mode:10} {rate:4d} {statistics.median(values):6.2f} "
              f"{min(values):5.2f}-{max(values):<5.2f}"
              + (f"  {binary}" if name_binaries else ""))


if __name__ == "__main__":
    main()
