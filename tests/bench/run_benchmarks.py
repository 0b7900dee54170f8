#!/usr/bin/python3
"""pystrobe benchmarks side by side with its peers. Prints figures and the
targets' PASS/MISS; asserts nothing.

  1. cost to the profiled program: work a CPU-bound Python program (one thread; four
     threads) gets done in a fixed time, unprofiled and under pystrobe (19, 99 Hz),
     perf, bpftrace, scalene, cProfile; austin on the interpreter it supports;
  2. in-kernel ns per run of `sample_cpu` (kernel.bpf_stats_enabled) for Python
     stacks 10, 50, 100 deep and a native-only program;
  3. pystrobe's own CPU and peak RSS: `record --all -r 99` with ten busy Pythons;
  4. symbolization: few against many distinct Python / native functions;
  5. scale: 500 Python processes with 2,000 threads; a storm of short-lived Pythons;
  6. accuracy: a 50/30/20 split by thread CPU time, pystrobe against the peers.

Runs are interleaved round-robin (A B C ... A B C ...), figures are medians and ratios,
and every throughput table carries an A/A row (the unprofiled program against itself)
showing the noise floor. Costs are measured directly where the kernel counts them.

Run as root after a build:
  sudo python3 tests/bench/run_benchmarks.py --bin build/pystrobe [--quick]
"""

import argparse
import datetime
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
from bench_common import DEEP_PY, bpf_stats  # noqa: E402
from run_foundation_bench import default_binary  # noqa: E402

PY = "/usr/bin/python3.11"          # the workload interpreter (Debian's)
PY38_GLOB = "~/.pyenv/versions/3.8.18/bin/python3.8"  # austin 1.0.1 cannot read 3.11
CLK_TCK = os.sysconf("SC_CLK_TCK")
BPFTRACE_PROG = "profile:hz:99 { @[ustack] = count(); }"

OUT = []  # every line printed, for the markdown report


def say(line=""):
    print(line, flush=True)
    OUT.append(line)


def loadavg():
    return " ".join(open("/proc/loadavg").read().split()[:3])


def table(header, rows):
    """A markdown table, printed and kept."""
    cols = [header] + [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cols) for i in range(len(header))]
    fmt = lambda r: "| " + " | ".join(c.ljust(w) for c, w in zip(r, widths)) + " |"
    say(fmt(header))
    say("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for r in cols[1:]:
        say(fmt(r))
    say()


def proc_cpu_s(pid):
    """utime + stime of a live process, in seconds (None once gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLK_TCK
    except (OSError, IndexError):
        return None


def sampler_stats(pid):
    """(run_time_ns, run_cnt) of the perf_event program (sample_cpu) held open by
    `pid`, read from its fds' fdinfo: other pystrobe runs on the machine load
    programs of the same name, so bpftool's list by name is not enough."""
    seen = {}
    try:
        fds = os.listdir(f"/proc/{pid}/fdinfo")
    except OSError:
        return None
    for fd in fds:
        try:
            with open(f"/proc/{pid}/fdinfo/{fd}") as f:
                info = dict(l.split(":", 1) for l in f.read().splitlines() if ":" in l)
        except OSError:
            continue
        if info.get("prog_type", "").strip() == "7":  # BPF_PROG_TYPE_PERF_EVENT
            seen[info["prog_id"].strip()] = (int(info["run_time_ns"]), int(info["run_cnt"]))
    if len(seen) != 1:
        return None
    return next(iter(seen.values()))


def perf_fds(pid):
    n = 0
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                if os.readlink(f"/proc/{pid}/fd/{fd}") == "anon_inode:[perf_event]":
                    n += 1
            except OSError:
                pass
    except OSError:
        pass
    return n


def vm_hwm_kib(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            m = re.search(r"^VmHWM:\s+(\d+) kB", f.read(), re.M)
        return int(m.group(1)) if m else None
    except OSError:
        return None


# ---------------------------------------------------------------------------
# pystrobe runs


class Record:
    """One `pystrobe record` run, measured from outside: wall time, rusage (CPU,
    ru_maxrss), the last VmHWM seen, pystrobe's CPU at the end of the sampling
    phase (so start-up / sampling / write-out can be told apart), its counters."""

    def __init__(self, binary, args, duration=None, during=None, workdir=None, nice=0):
        self.output = os.path.join(workdir or tempfile.gettempdir(),
                                   f"pystrobe-bench-{os.getpid()}-{time.monotonic_ns()}.folded")
        cmd = [binary, "record", "-f", "folded", "-o", self.output] + args
        err = tempfile.TemporaryFile(mode="w+")
        start = time.monotonic()
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err,
                                preexec_fn=(lambda: os.nice(nice)) if nice else None)
        self.pid = proc.pid
        self.hwm = None
        self.cpu_at_end_of_sampling = None
        self.sampling_started = None
        stop = threading.Event()

        def watch():
            # Sampling runs while pystrobe holds its perf event fds (attached to
            # the end of its loop, closed at detach): pystrobe's CPU and the time
            # at both edges split start-up / sampling / the end (drain, symbolize,
            # write). VmHWM is read until the process is gone.
            while not stop.is_set():
                h = vm_hwm_kib(proc.pid)
                if h:
                    self.hwm = h
                if self.cpu_at_end_of_sampling is None:
                    n = perf_fds(proc.pid)
                    if n and self.sampling_started is None:
                        self.sampling_started = (time.monotonic(), proc_cpu_s(proc.pid))
                    elif not n and self.sampling_started is not None:
                        self.cpu_at_end_of_sampling = (time.monotonic(), proc_cpu_s(proc.pid))
                time.sleep(0.02)

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        self.during = during(proc) if during else None
        # Wait for the exit without reaping: the zombie's /proc/PID/stat holds
        # pystrobe's own final CPU time. wait4's rusage would add the CPU of the
        # command pystrobe started and reaped (`-- CMD`).
        os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT)
        self.own_cpu = proc_cpu_s(proc.pid)
        _, status, ru = os.wait4(proc.pid, 0)
        stop.set()
        watcher.join()
        self.wall = time.monotonic() - start
        self.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        self.stderr = err.read()
        if self.returncode != 0:
            raise RuntimeError(f"`{' '.join(cmd)}` exited {self.returncode}:\n{self.stderr}")
        self.user_s, self.sys_s, self.maxrss_kib = ru.ru_utime, ru.ru_stime, ru.ru_maxrss
        m = re.search(r"^pystrobe: (\d+) samples of (\d+) processes in ([\d.]+) s", self.stderr, re.M)
        self.samples, self.processes, self.elapsed = int(m.group(1)), int(m.group(2)), float(m.group(3))
        m = re.search(r"lost (\d+) samples \(ring buffer full\), (\d+) malformed records, (\d+) process "
                      r"events; stack reads failed: (\d+) kernel, (\d+) user", self.stderr)
        self.lost, self.malformed, self.events_lost, self.kfail, self.ufail = map(int, m.groups())
        m = re.search(r"Python: (\d+) processes, (\d+) samples walked, (\d+) truncated, (\d+) walks cut "
                      r"by failed reads, (\d+) threads without a thread state, (\d+) code objects "
                      r"unreadable", self.stderr)
        (self.py_procs, self.py_walked, self.py_trunc, self.py_readfail, self.py_nots,
         self.py_codefail) = map(int, m.groups()) if m else (0,) * 6
        m = re.search(r"(\d+) named from the kernel's copies", self.stderr)
        self.py_from_copies = int(m.group(1)) if m else 0
        with open(self.output) as f:
            self.folded = [(line.rsplit(" ", 1)[0], int(line.rsplit(" ", 1)[1]))
                           for line in f if line.strip()]
        os.unlink(self.output)

    @property
    def cpu_s(self):
        """pystrobe's own CPU seconds (its children's excluded)."""
        return self.own_cpu if self.own_cpu is not None else self.user_s + self.sys_s

    def sampling_cpu_rate(self):
        """pystrobe's CPU while sampling, as a fraction of one core (None if not seen)."""
        if not (self.sampling_started and self.cpu_at_end_of_sampling):
            return None
        (t0, c0), (t1, c1) = self.sampling_started, self.cpu_at_end_of_sampling
        if c0 is None or c1 is None or t1 <= t0:
            return None
        return (c1 - c0) / (t1 - t0)

    def counters(self):
        return (f"lost {self.lost}, events lost {self.events_lost}, failed k/u {self.kfail}/{self.ufail}, "
                f"py truncated {self.py_trunc}, py read-cut {self.py_readfail}, "
                f"no-tstate {self.py_nots}, code unreadable {self.py_codefail}, "
                f"named from kernel copies {self.py_from_copies}")


# ---------------------------------------------------------------------------
# workloads (written to a temp dir)

THROUGHPUT_PY = r'''
import json, sys, threading, time
T, N, OUT = float(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
def step(x):
    return (x * 1103515245 + 12345) & 0xffffffff
counts = [0] * N
def worker(i, deadline):
    x, n = i, 0
    while True:
        for _ in range(500):
            x = step(x)
        n += 500
        if time.perf_counter() >= deadline:
            break
    counts[i] = n
t0, c0 = time.perf_counter(), time.process_time()
deadline = t0 + T
ts = [threading.Thread(target=worker, args=(i, deadline)) for i in range(1, N)]
for t in ts: t.start()
worker(0, deadline)
for t in ts: t.join()
wall, cpu = time.perf_counter() - t0, time.process_time() - c0
with open(OUT, "w") as f:
    json.dump({"iters": sum(counts), "wall": wall, "cpu": cpu}, f)
'''


NATIVE_C = r'''
#include <stdint.h>
volatile uint64_t sink;
__attribute__((noinline)) void spin(int d) {
  if (d > 1) { spin(d - 1); sink++; return; }
  for (;;) { sink = sink * 3 + 1; }
}
int main(void) { spin(10); return 0; }
'''

SPLIT_PY = r'''
import sys, time
D = float(sys.argv[1])
def func_a():
    end = time.thread_time() + 0.005
    x = 0
    while time.thread_time() < end:
        for _ in range(200):
            x = (x * 3 + 1) & 0xffff
def func_b():
    end = time.thread_time() + 0.003
    x = 0
    while time.thread_time() < end:
        for _ in range(200):
            x = (x * 3 + 1) & 0xffff
def func_c():
    end = time.thread_time() + 0.002
    x = 0
    while time.thread_time() < end:
        for _ in range(200):
            x = (x * 3 + 1) & 0xffff
stop = time.perf_counter() + D
while time.perf_counter() < stop:
    func_a(); func_b(); func_c()
'''
SPLIT_TRUE = {"func_a": 50.0, "func_b": 30.0, "func_c": 20.0}


def many_functions_py(n):
    lines = ["import sys, time", "D = float(sys.argv[1])"]
    for i in range(n):
        lines.append(f"def fn_{i:05d}(x):\n    for _ in range(300):\n        x = (x * 3 + {i}) & 0xffff\n"
                     f"    return x")
    lines.append(f"FNS = [{', '.join(f'fn_{i:05d}' for i in range(n))}]")
    lines.append("stop = time.perf_counter() + D\nx = 0\nwhile time.perf_counter() < stop:\n"
                 "    for f in FNS:\n        x = f(x)")
    return "\n".join(lines) + "\n"


def many_functions_c(n):
    out = ["#include <stdint.h>", "#include <time.h>", "#include <stdlib.h>",
           "volatile uint64_t sink;"]
    for i in range(n):
        out.append(f"__attribute__((noinline)) void fn_{i:05d}(void) "
                   f"{{ for (int k = 0; k < 3000; k++) sink = sink * 3 + {i}; }}")
    out.append("typedef void (*fn)(void);")
    out.append(f"static fn fns[] = {{ {', '.join(f'fn_{i:05d}' for i in range(n))} }};")
    out.append("int main(int argc, char** argv) { double d = atof(argv[1]); struct timespec a, b;"
               " clock_gettime(CLOCK_MONOTONIC, &a); for (;;) { for (unsigned i = 0; i < "
               f"{n}; i++) fns[i](); clock_gettime(CLOCK_MONOTONIC, &b);"
               " if (b.tv_sec - a.tv_sec + (b.tv_nsec - a.tv_nsec) / 1e9 > d) return 0; } }")
    return "\n".join(out) + "\n"


class Workdir:
    def __init__(self):
        self.path = tempfile.mkdtemp(prefix="pystrobe-bench-")
        self.throughput = self.write("throughput.py", THROUGHPUT_PY)
        self.deep = self.write("deep.py", DEEP_PY)
        self.split = self.write("split.py", SPLIT_PY)
        self.many_py = self.write("many.py", many_functions_py(2000))
        self.few_py = self.write("few.py", many_functions_py(1))
        self.native = self.compile("native_spin", NATIVE_C)
        self.many_c = self.compile("many_c", many_functions_c(2000))
        self.few_c = self.compile("few_c", many_functions_c(1))

    def write(self, name, text):
        path = os.path.join(self.path, name)
        with open(path, "w") as f:
            f.write(text)
        return path

    def compile(self, name, source):
        src = self.write(name + ".c", source)
        exe = os.path.join(self.path, name)
        subprocess.run(["cc", "-O1", "-g", "-fno-omit-frame-pointer", "-o", exe, src], check=True)
        return exe


# ---------------------------------------------------------------------------
# 1. cost to the profiled program


def find_py38():
    path = os.path.expanduser(PY38_GLOB)
    return path if os.access(path, os.X_OK) else None


def throughput_configs(binary, wd, threads, py38, peers):
    """name -> (interpreter, function(workload argv, tmp) -> full argv)."""
    c = {
        "unprofiled (A)": (PY, lambda w, t: w),
        "unprofiled (A', A/A)": (PY, lambda w, t: w),
        "pystrobe 19 Hz": (PY, lambda w, t: [binary, "record", "-r", "19", "-f", "folded", "-o",
                                             t + ".folded", "--"] + w),
        "pystrobe 99 Hz": (PY, lambda w, t: [binary, "record", "-r", "99", "-f", "folded", "-o",
                                             t + ".folded", "--"] + w),
    }
    if "perf" in peers:
        c["perf record -F 99 -g"] = (PY, lambda w, t: ["perf", "record", "-q", "-F", "99", "-g",
                                                       "-o", t + ".perf", "--"] + w)
    if "bpftrace" in peers:
        c["bpftrace profile:hz:99 ustack"] = (
            PY, lambda w, t: ["bpftrace", "-o", t + ".bt", "-e", BPFTRACE_PROG, "-c", " ".join(w)])
    if "scalene" in peers:
        c["scalene --cpu-only"] = (PY, lambda w, t: [w[0], "-m", "scalene", "--cli", "--cpu-only",
                                                      "--json", "--outfile", t + ".json", w[1],
                                                      "---"] + w[2:])
    c["cProfile (reference)"] = (PY, lambda w, t: [w[0], "-m", "cProfile", "-o", t + ".prof"] + w[1:])
    if py38 and threads == 1:
        c["3.8: unprofiled (B)"] = (py38, lambda w, t: w)
        if "austin" in peers:
            c["3.8: austin -i 10101"] = (py38, lambda w, t: ["austin", "-i", "10101", "-o",
                                                             t + ".austin"] + w)
        c["3.8: pystrobe 99 Hz"] = (py38, lambda w, t: [binary, "record", "-r", "99", "-f", "folded",
                                                        "-o", t + ".folded", "--"] + w)
    return c


def bench_throughput(binary, wd, threads, seconds, rounds, py38, peers, only=None):
    configs = throughput_configs(binary, wd, threads, py38, peers)
    names = [n for n in configs if only is None or n in only]
    results = {n: [] for n in names}
    failures = {}
    for r in range(rounds):
        order = names[r % len(names):] + names[:r % len(names)]  # rotate: no fixed position
        for name in order:
            interp, build = configs[name]
            tmp = os.path.join(wd.path, f"tp-{r}-{abs(hash(name))}")
            result = tmp + ".json.out"
            argv = build([interp, wd.throughput, str(seconds), str(threads), result], tmp)
            proc = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                  timeout=seconds * 10 + 60)
            try:
                with open(result) as f:
                    results[name].append(json.load(f))
                os.unlink(result)
            except (OSError, ValueError):
                failures[name] = f"rc {proc.returncode}: {proc.stderr.strip()[-300:]}"
            for ext in (".folded", ".perf", ".bt", ".json", ".prof", ".austin"):
                if os.path.exists(tmp + ext):
                    if name.startswith("bpftrace") and ext == ".bt" and r == 0:
                        with open(tmp + ext) as f:
                            bt = f.read()
                        results.setdefault("_bpftrace_stacks", []).append(bt.count("]: "))
                        results.setdefault("_bpftrace_err", []).append(proc.stderr.strip()[:200])
                    os.unlink(tmp + ext)
    return names, results, failures


def throughput_rows(names, results, failures):
    rows, ratios = [], {}
    for base_name in ("unprofiled (A)", "3.8: unprofiled (B)"):
        pass
    for name in names:
        base = "3.8: unprofiled (B)" if name.startswith("3.8:") else "unprofiled (A)"
        runs, base_runs = results[name], results[base]
        if not runs or not base_runs:
            rows.append([name, "-", "-", "-", "-", failures.get(name, "no result")])
            continue
        k = min(len(runs), len(base_runs))
        # pairs of the same round: ratio per round, then the median
        wall = [runs[i]["iters"] / runs[i]["wall"] / (base_runs[i]["iters"] / base_runs[i]["wall"])
                for i in range(k)]
        cpu = [runs[i]["iters"] / runs[i]["cpu"] / (base_runs[i]["iters"] / base_runs[i]["cpu"])
               for i in range(k)]
        med = statistics.median(wall)
        ratios[name] = (med, statistics.median(cpu))
        rows.append([name, f"{100 * med:.1f}%", f"{100 * min(wall):.0f}-{100 * max(wall):.0f}%",
                     f"{100 * statistics.median(cpu):.1f}%", str(k),
                     failures.get(name, "")[:80]])
    return rows, ratios


# ---------------------------------------------------------------------------
# 2. in-kernel cost per sample


def kernel_cost(binary, target_argvs, seconds, rate):
    """ns per run of sample_cpu while the targets (started here) spin, and the
    estimated ns per sample of a target: runs that did not hit a target are
    charged at the filtered-out cost, measured separately. Targets and
    recorder run at nice -20, so the targets own the CPUs even on a busy
    machine: nearly every run is then on a target and the estimate leans
    little on the filtered-out cost."""
    top = lambda: os.nice(-20)
    procs = [subprocess.Popen(a, stdout=subprocess.DEVNULL, preexec_fn=top) for a in target_argvs]
    time.sleep(0.5)
    readings = []

    def during(rec):
        started = time.monotonic()
        for at in (1.5, seconds - 1.0):
            time.sleep(max(0.0, at - (time.monotonic() - started)))
            stats = sampler_stats(rec.pid)
            cpu = sum(proc_cpu_s(p.pid) or 0 for p in procs)
            if stats:
                readings.append((time.monotonic(), stats[0], stats[1], cpu))

    args = ["-r", str(rate), "-d", str(seconds), "--max-python-depth", "128"]
    for p in procs:
        args += ["--pid", str(p.pid)]
    try:
        rec = Record(binary, args, duration=seconds, during=during, nice=-20)
    finally:
        for p in procs:
            p.kill()
            p.wait()
    (t0, ns0, c0, cpu0), (t1, ns1, c1, cpu1) = readings[0], readings[-1]
    return rec, dict(runs=c1 - c0, ns=ns1 - ns0, target_cpu=cpu1 - cpu0, wall=t1 - t0)


def bench_kernel(binary, wd, seconds, rate):
    out = {}
    with bpf_stats():
        # Filtered-out runs: the target sleeps, every run is the pid check alone.
        _, out["filtered"] = kernel_cost(binary, [["sleep", str(seconds + 5)]], seconds, rate)
        for depth in (10, 50, 100):
            rec, st = kernel_cost(binary, [[PY, wd.deep, str(depth)]] * 2, seconds, rate)
            out[depth] = (rec, st)
        rec, st = kernel_cost(binary, [[wd.native]] * 2, seconds, rate)
        out["native"] = (rec, st)
    return out


def per_sample_ns(st, filtered_ns, rate):
    target_runs = min(st["target_cpu"] * rate, st["runs"])
    other = st["runs"] - target_runs
    if target_runs <= 0:
        return None, 0
    return (st["ns"] - other * filtered_ns) / target_runs, target_runs / st["runs"]


# ---------------------------------------------------------------------------
# helpers for busy processes


def spawn_busy(n, code=None):
    code = code or "x = 0\nwhile True:\n    x = (x * 3 + 1) & 0xffff\n"
    return [subprocess.Popen([PY, "-c", code]) for _ in range(n)]


def kill_all(procs):
    for p in procs:
        try:
            p.kill()
        except OSError:
            pass
    for p in procs:
        p.wait()


def python_frames_of(stack):
    """The Python frames of a folded stack ('name (file:line)' after the process)."""
    return [f for f in stack.split(";")[1:] if re.search(r" \([^()]*:\d+\)$", f)]


# How a profile shows a Python frame whose code object could not be read.
UNNAMED_PYTHON_FRAME = "[unknown python frame]"


def root_pid(stack):
    m = re.match(r"[^;]* \((\d+)\)(;|$)", stack)
    return int(m.group(1)) if m else None


# ---------------------------------------------------------------------------
# 5. scale

SCALE_WORKER = r'''
import random, sys, threading, time
spin = sys.argv[1] == "1"
def sleepy():
    x = 0
    while True:
        time.sleep(random.uniform(1.0, 3.0))
        end = time.thread_time() + 0.0005
        while time.thread_time() < end:
            x = (x * 3 + 1) & 0xffff
def spinner():
    x = 0
    while True:
        x = (x * 3 + 1) & 0xffff
ts = [threading.Thread(target=spinner if (spin and i == 0) else sleepy, daemon=True) for i in range(4)]
for t in ts: t.start()
sys.stdout.write("up\n"); sys.stdout.flush()
time.sleep(3600)
'''

STORM_CODE = ("import time\ndef burn_{tok}():\n    e = time.thread_time() + 0.02\n    x = 0\n"
              "    while time.thread_time() < e:\n        x = (x * 3 + 1) & 0xffff\nburn_{tok}()\n")


def bench_scale_processes(binary, nproc, seconds):
    procs = []
    t0 = time.monotonic()
    try:
        for i in range(nproc):
            procs.append(subprocess.Popen([PY, "-c", SCALE_WORKER, "1" if i % 100 == 0 else "0"],
                                          stdout=subprocess.PIPE))
        for p in procs:
            p.stdout.readline()
        startup = time.monotonic() - t0
        threads = sum(len(os.listdir(f"/proc/{p.pid}/task")) for p in procs)
        rec = Record(binary, ["--all", "-r", "99", "-d", str(seconds)], duration=seconds)
    finally:
        kill_all(procs)
    ours = {p.pid for p in procs}
    seen, with_py = set(), set()
    for stack, n in rec.folded:
        pid = root_pid(stack)
        if pid in ours:
            seen.add(pid)
            if python_frames_of(stack):
                with_py.add(pid)
    return rec, dict(nproc=nproc, threads=threads, startup=startup, seen=len(seen), with_py=len(with_py))


def bench_storm(binary, rate_per_s, seconds, max_inflight=64):
    launched = {}  # pid -> token
    done = threading.Event()
    lag = []

    def spawner(rec_proc):
        time.sleep(1.0)  # let pystrobe attach
        start = time.monotonic()
        inflight = []
        i = 0
        while time.monotonic() - start < seconds:
            due = start + i / rate_per_s
            now = time.monotonic()
            if now < due:
                time.sleep(due - now)
            inflight = [p for p in inflight if p.poll() is None]
            if len(inflight) >= max_inflight:
                time.sleep(0.002)
                continue
            p = subprocess.Popen([PY, "-c", STORM_CODE.format(tok=f"{i:06d}")])
            launched[p.pid] = f"{i:06d}"
            inflight.append(p)
            i += 1
        lag.append(time.monotonic() - start)
        for p in inflight:
            p.wait()
        done.set()
        return i

    rec = Record(binary, ["--all", "-r", "99", "-d", str(seconds + 3)], duration=seconds + 3,
                 during=spawner)
    n = rec.during
    # samples, with Python frames, with the burn_ frame, with a Python frame left unnamed
    per = {pid: [0, 0, 0, 0] for pid in launched}
    for stack, cnt in rec.folded:
        pid = root_pid(stack)
        if pid in per:
            per[pid][0] += cnt
            frames = python_frames_of(stack)
            if frames:
                per[pid][1] += cnt
            if f"burn_{launched[pid]}" in stack:
                per[pid][2] += cnt
            if UNNAMED_PYTHON_FRAME in stack:
                per[pid][3] += cnt
    got = sum(1 for v in per.values() if v[0])
    got_py = sum(1 for v in per.values() if v[1])
    got_burn = sum(1 for v in per.values() if v[2])
    samples = sum(v[0] for v in per.values())
    samples_py = sum(v[1] for v in per.values())
    samples_unnamed = sum(v[3] for v in per.values())
    return rec, dict(launched=n, rate=n / lag[0] if lag else 0, got=got, got_py=got_py, got_burn=got_burn,
                     samples=samples, samples_py=samples_py, samples_unnamed=samples_unnamed)


# ---------------------------------------------------------------------------
# 6. accuracy


def shares_from_pairs(pairs):
    tot = {k: 0.0 for k in SPLIT_TRUE}
    for stack, n in pairs:
        for k in SPLIT_TRUE:
            if k in stack:
                tot[k] += n
                break
    s = sum(tot.values())
    return {k: 100 * v / s for k, v in tot.items()} if s else None


def bench_accuracy(binary, wd, seconds, py38, peers):
    res = {}
    tmp = os.path.join(wd.path, "acc")
    rec = Record(binary, ["-r", "99", "--"] + [PY, wd.split, str(seconds)])
    res["pystrobe 99 Hz (3.11)"] = (shares_from_pairs(rec.folded), rec.samples)
    subprocess.run([PY, "-m", "cProfile", "-o", tmp + ".prof", wd.split, str(seconds)], check=True,
                   stdout=subprocess.DEVNULL)
    out = subprocess.run([PY, "-c", "import pstats,sys,json; s=pstats.Stats(sys.argv[1]).stats;"
                          "print(json.dumps({k[2]: v[2] for k, v in s.items()}))", tmp + ".prof"],
                         capture_output=True, text=True, check=True).stdout
    tt = json.loads(out)
    res["cProfile tottime (3.11, deterministic)"] = (shares_from_pairs(list(tt.items())), None)
    if "scalene" in peers:
        p = subprocess.run([PY, "-m", "scalene", "--cli", "--cpu-only", "--json", "--outfile",
                            tmp + ".json", wd.split, "---", str(seconds)], capture_output=True, text=True)
        try:
            with open(tmp + ".json") as f:
                js = json.load(f)
            pairs = []
            for fdata in js["files"].values():
                for fn in fdata.get("functions", []):
                    pairs.append((fn["line"], fn["n_cpu_percent_python"] + fn["n_cpu_percent_c"] +
                                  fn.get("n_sys_percent", 0)))
            res["scalene --cpu-only (3.11)"] = (shares_from_pairs(pairs), None)
        except (OSError, ValueError, KeyError) as e:
            res["scalene --cpu-only (3.11)"] = (None, f"failed: {e} {p.stderr[-200:]}")
    if py38:
        rec = Record(binary, ["-r", "99", "--"] + [py38, wd.split, str(seconds)])
        res["pystrobe 99 Hz (3.8)"] = (shares_from_pairs(rec.folded), rec.samples)
        if "austin" in peers:
            subprocess.run(["austin", "-i", "10101", "-o", tmp + ".austin", py38, wd.split,
                            str(seconds)], capture_output=True)
            pairs = []
            with open(tmp + ".austin") as f:
                for line in f:
                    parts = line.rstrip().rsplit(" ", 1)
                    if len(parts) == 2 and parts[1].isdigit():
                        pairs.append((parts[0], int(parts[1])))
            res["austin -i 10101 (3.8)"] = (shares_from_pairs(pairs), len(pairs))
    return res


# ---------------------------------------------------------------------------


def check_peers():
    peers = {}
    for tool in ("perf", "bpftrace", "austin"):
        peers[tool] = shutil.which(tool)
    peers["scalene"] = subprocess.run([PY, "-c", "import scalene"], capture_output=True).returncode == 0
    return {k for k, v in peers.items() if v}


def verdict(ok, figure, target, miss_by):
    return ("PASS" if ok else "MISS") + f": {figure} (target {target})" + ("" if ok else f"; missed by {miss_by}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", default=default_binary(), help="the pystrobe binary")
    ap.add_argument("--quick", action="store_true", help="short smoke run (~3 minutes)")
    ap.add_argument("--doc", default=None,
                    help="markdown file to write the results into (default: docs/benchmarks.md, "
                         "not in --quick)")
    ap.add_argument("--only", default="123456", help="sections to run, e.g. 126")
    args = ap.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("run as root: the benchmark loads BPF programs")
    if not os.access(args.bin, os.X_OK):
        raise SystemExit(f"no pystrobe binary at {args.bin} (build first, or pass --bin)")
    if not os.access(PY, os.X_OK):
        raise SystemExit(f"{PY} (Debian's python3.11) is the workload interpreter and is missing")
    doc = args.doc or (None if args.quick else os.path.join(REPO, "docs", "benchmarks.md"))
    q = args.quick
    P = dict(tp_seconds=1.0 if q else 2.0, tp_rounds=2 if q else 5, tp_target_rounds=3 if q else 20,
             k_seconds=4 if q else 8,
             own_seconds=8 if q else 30, sym_seconds=4 if q else 8, scale_procs=100 if q else 500,
             scale_seconds=6 if q else 20, storm_seconds=4 if q else 10, acc_seconds=4 if q else 10)
    peers = check_peers()
    py38 = find_py38()
    wd = Workdir()
    cpu_model = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo")
                      if l.startswith("model name")), platform.processor())
    started = time.monotonic()
    say(f"pystrobe benchmarks ({'quick' if q else 'full'}), {datetime.datetime.now():%Y-%m-%d %H:%M %Z}")
    say(f"machine: {os.cpu_count()} CPUs ({cpu_model}), kernel {os.uname().release}, "
        f"{os.sysconf('SC_PHYS_PAGES') * os.sysconf('SC_PAGE_SIZE') / 2**30:.0f} GiB; "
        f"binary {args.bin}; workload interpreter {PY}")
    say(f"peers found: {', '.join(sorted(peers)) or 'none'}; 3.8 for austin: {py38 or 'absent'}")
    say(f"load average at start: {loadavg()}")
    say()
    targets = []

    if "1" in args.only:
        for threads in (1, 4):
            say(f"## 1. Cost to the profiled program: {threads} thread(s), {P['tp_seconds']:.0f} s "
                f"per run, {P['tp_rounds']} rounds round-robin (load {loadavg()})")
            say()
            names, results, failures = bench_throughput(args.bin, wd, threads, P["tp_seconds"],
                                                        P["tp_rounds"], py38, peers)
            rows, ratios = throughput_rows(names, results, failures)
            say("Throughput = loop iterations per wall second of the program itself, as a ratio to the "
                "unprofiled run of the same round (3.8 rows: to the unprofiled 3.8 run); per-CPU-s = "
                "iterations per CPU second of the program.")
            say()
            table(["run", "throughput vs unprofiled (median)", "range over rounds",
                   "per-CPU-s vs unprofiled", "rounds", "note"], rows)
            if "_bpftrace_stacks" in results:
                say(f"bpftrace: {results['_bpftrace_stacks'][0]} distinct stacks printed; its stderr: "
                    f"`{results['_bpftrace_err'][0]}`")
                say()
            # The target is judged on its own longer series: unprofiled, its A/A twin and
            # pystrobe at 99 Hz alone, rotated, so that a median resolves the 1% asked;
            # the table above, with every peer, has too few rounds for that.
            judged = ["unprofiled (A)", "unprofiled (A', A/A)", "pystrobe 99 Hz"]
            names, results, failures = bench_throughput(args.bin, wd, threads, P["tp_seconds"],
                                                        P["tp_target_rounds"], py38, peers,
                                                        only=judged)
            rows, ratios = throughput_rows(names, results, failures)
            say(f"For the target: the same, {P['tp_target_rounds']} rounds of these three alone.")
            say()
            table(["run", "throughput vs unprofiled (median)", "range over rounds",
                   "per-CPU-s vs unprofiled", "rounds", "note"], rows)
            aa = ratios.get("unprofiled (A', A/A)")
            r99 = ratios.get("pystrobe 99 Hz")
            if r99 is not None and aa is not None:
                # Judged per CPU second of the program: the wall ratio's A/A spread on this
                # shared machine is wider than the 1% the target asks to resolve.
                targets.append(("throughput at 99 Hz, %d thread(s), per CPU second, %d rounds" %
                                (threads, P["tp_target_rounds"]),
                                verdict(r99[1] >= 0.99, f"{100 * r99[1]:.1f}% (A/A {100 * aa[1]:.1f}%; "
                                        f"wall {100 * r99[0]:.1f}%, wall A/A {100 * aa[0]:.1f}%)",
                                        ">= 99%", f"{99 - 100 * r99[1]:.1f} points")))

    if "2" in args.only:
        rate = 99
        say(f"## 2. In-kernel cost of sample_cpu (bpf_stats), -r {rate}, --max-python-depth 128, "
            f"two target processes (load {loadavg()})")
        say()
        k = bench_kernel(args.bin, wd, P["k_seconds"], rate)
        filt = k["filtered"]
        filtered_ns = filt["ns"] / max(filt["runs"], 1)
        rows = [["filtered out (target asleep)", filt["runs"], f"{filtered_ns:.0f}", "-", "-", "-"]]
        for key in (10, 50, 100, "native"):
            rec, st = k[key]
            per, frac = per_sample_ns(st, filtered_ns, rate)
            label = f"Python, {key} frames deep" if key != "native" else "native only (C, 10 frames)"
            rows.append([label, st["runs"], f"{st['ns'] / max(st['runs'], 1):.0f}", f"{100 * frac:.0f}%",
                         f"{per:.0f}" if per else "-", rec.counters()])
            if key == 100 and per:
                targets.append(("in-kernel ns per sample, 100-deep Python stack",
                                verdict(per <= 5000, f"{per / 1000:.2f} us", "<= 5 us",
                                        f"{(per - 5000) / 1000:.2f} us ({per / 5000:.1f}x)")))
        table(["stack", "runs measured", "ns per run (all runs)", "runs on a target",
               "ns per target sample", "pystrobe counters"], rows)
        say("ns per target sample = (run_time_ns - non-target runs x filtered-out ns) / target runs; "
            "target runs = the targets' CPU seconds (/proc/PID/stat) x rate.")
        say()

    if "3" in args.only:
        say(f"## 3. pystrobe's own cost: record --all -r 99 -d {P['own_seconds']}, ten busy Pythons "
            f"(load {loadavg()})")
        say()
        busy = spawn_busy(10)
        try:
            time.sleep(0.5)
            rec = Record(args.bin, ["--all", "-r", "99", "-d", str(P["own_seconds"])],
                         duration=P["own_seconds"])
        finally:
            kill_all(busy)
        steady = rec.sampling_cpu_rate()
        start_cpu = rec.sampling_started[1] if rec.sampling_started else None
        end_cpu = rec.cpu_at_end_of_sampling[1] if rec.cpu_at_end_of_sampling else None
        rows = [
            ["samples / processes", f"{rec.samples} / {rec.processes} in {rec.elapsed:.1f} s"],
            ["counters", rec.counters()],
            ["CPU user + sys, whole run (wait4; /proc stat)", f"{rec.user_s:.2f} + {rec.sys_s:.2f}; {rec.cpu_s:.2f} s "
             f"over {rec.wall:.1f} s wall = {100 * rec.cpu_s / rec.wall:.2f}% of one core"],
            ["sampling phase, wall (perf fds open; asked -d)", f"{rec.cpu_at_end_of_sampling[0] - rec.sampling_started[0]:.1f} s"
             if rec.cpu_at_end_of_sampling else "-"],
            ["  of which start-up (until perf events open)", f"{start_cpu:.2f} s" if start_cpu is not None else "-"],
            ["  of which sampling phase", f"{end_cpu - start_cpu:.2f} s = {100 * steady:.2f}% of one core"
             if steady is not None else "-"],
            ["  of which the end (drain, symbolize, write)", f"{rec.cpu_s - end_cpu:.2f} s"
             if end_cpu is not None else "-"],
            ["CPU per sample, all in", f"{1e6 * rec.cpu_s / max(rec.samples, 1):.0f} us"],
            ["peak RSS (ru_maxrss / last VmHWM)", f"{rec.maxrss_kib / 1024:.1f} / "
             f"{(rec.hwm or 0) / 1024:.1f} MiB"],
        ]
        table(["pystrobe record --all, 99 Hz", "figure"], rows)
        if steady is not None:
            targets.append(("pystrobe CPU at 99 Hz system-wide (sampling phase)",
                            verdict(steady <= 0.02, f"{100 * steady:.2f}% of one core "
                                    f"(whole run incl. start/end {100 * rec.cpu_s / rec.wall:.2f}%)",
                                    "<= 2%", f"{100 * steady - 2:.2f} points ({steady / 0.02:.1f}x)")))
        else:
            # The watcher missed an edge of the sampling phase (pystrobe closed its
            # perf fds and exited between two looks): judge the whole run, start-up
            # and write-out included, which can only read higher.
            whole = rec.cpu_s / rec.wall
            targets.append(("pystrobe CPU at 99 Hz system-wide (whole run: sampling phase not seen)",
                            verdict(whole <= 0.02, f"{100 * whole:.2f}% of one core", "<= 2%",
                                    f"{100 * whole - 2:.2f} points ({whole / 0.02:.1f}x)")))
        rss = rec.maxrss_kib / 1024
        targets.append(("pystrobe peak RSS", verdict(rss <= 100, f"{rss:.1f} MiB", "<= 100 MiB",
                                                      f"{rss - 100:.1f} MiB")))

    if "4" in args.only:
        say(f"## 4. Symbolization: few against 2000 distinct functions, -r 999, {P['sym_seconds']} s "
            f"(load {loadavg()})")
        say()
        rows = []
        d = P["sym_seconds"]
        runs = {}
        for label, argv in (("Python, 1 function", [PY, wd.few_py, str(d + 5)]),
                            ("Python, 2000 functions", [PY, wd.many_py, str(d + 5)]),
                            ("native, 1 function", [wd.few_c, str(d + 5)]),
                            ("native, 2000 functions", [wd.many_c, str(d + 5)])):
            rec = Record(args.bin, ["-r", "999", "-d", str(d), "--"] + argv, duration=d)
            if label.startswith("Python"):
                distinct = {f.split(" (")[0] for s, _ in rec.folded for f in python_frames_of(s)}
            else:
                distinct = {f for s, _ in rec.folded for f in s.split(";")[1:] if f.startswith("fn_")}
            frames = sum(n * len(s.split(";")[1:]) for s, n in rec.folded)
            end_cpu = rec.cpu_at_end_of_sampling[1] if rec.cpu_at_end_of_sampling else None
            st_cpu = rec.sampling_started[1] if rec.sampling_started else None
            runs[label] = (rec, len(distinct), frames, st_cpu, end_cpu)
            rows.append([label, rec.samples, len(distinct), frames,
                         f"{end_cpu - st_cpu:.2f}" if end_cpu is not None and st_cpu is not None else "-",
                         f"{rec.cpu_s - end_cpu:.2f}" if end_cpu is not None else "-",
                         f"{rec.cpu_s:.2f}", f"{rec.wall - rec.elapsed:.2f}"])
        table(["program", "samples", "distinct fns seen", "frames in samples", "CPU s sampling",
               "CPU s end phase", "CPU s total", "wall s outside sampling"], rows)
        for kind in ("Python", "native"):
            few, many = runs[f"{kind}, 1 function"], runs[f"{kind}, 2000 functions"]
            dcpu = many[0].cpu_s - few[0].cpu_s
            dfn = many[1] - few[1]
            warm_frames_per_s = few[2] / max(few[4] - few[3], 1e-3) if few[4] is not None else None
            say(f"{kind}: cold, per distinct function: {1e3 * dcpu / max(dfn, 1):.2f} ms of pystrobe CPU "
                f"({'%.0f' % (dfn / dcpu) if dcpu > 0 else 'not measurable: <= noise'} functions/s); warm "
                f"(few functions): {warm_frames_per_s:.0f} frames in samples per CPU second of the "
                f"sampling phase (all userspace work, not symbolization alone)." if warm_frames_per_s else "")
        say()

    if "5" in args.only:
        say(f"## 5. Scale (load {loadavg()})")
        say()
        rec, st = bench_scale_processes(args.bin, P["scale_procs"], P["scale_seconds"])
        steady = rec.sampling_cpu_rate()
        rows = [
            ["processes / threads (started in)", f"{st['nproc']} / {st['threads']} ({st['startup']:.0f} s)"],
            ["samples / processes seen (all)", f"{rec.samples} / {rec.processes} in {rec.elapsed:.1f} s"],
            ["our processes with samples / with Python frames", f"{st['seen']} / {st['with_py']}"],
            ["counters", rec.counters()],
            ["pystrobe CPU: sampling phase / whole run", f"{100 * steady:.2f}% of one core / {rec.cpu_s:.2f} s"
             if steady is not None else f"- / {rec.cpu_s:.2f} s"],
            ["pystrobe peak RSS", f"{rec.maxrss_kib / 1024:.1f} MiB"],
        ]
        table([f"record --all -r 99 -d {P['scale_seconds']}, {st['nproc']} Pythons x 4 threads "
               "(1 in 100 spinning, the rest sleeping 1-3 s then 0.5 ms CPU)", "figure"], rows)
        rec, st = bench_storm(args.bin, 200, P["storm_seconds"])
        steady = rec.sampling_cpu_rate()
        rows = [
            ["processes launched (asked 200/s)", f"{st['launched']} at {st['rate']:.0f}/s achieved"],
            ["with >= 1 sample / with Python frames / with their burn_ frame",
             f"{st['got']} / {st['got_py']} / {st['got_burn']}"],
            ["samples of storm processes / with Python frames / with a Python frame left unnamed",
             f"{st['samples']} / {st['samples_py']} / {st['samples_unnamed']}"],
            ["counters", rec.counters()],
            ["pystrobe CPU: sampling phase / whole run", f"{100 * steady:.2f}% of one core / {rec.cpu_s:.2f} s"
             if steady is not None else f"- / {rec.cpu_s:.2f} s"],
            ["pystrobe peak RSS", f"{rec.maxrss_kib / 1024:.1f} MiB"],
        ]
        table(["storm: python3.11 -c (burn ~20 ms thread CPU), record --all -r 99", "figure"], rows)
        # A sample is kept whole when it arrives and every Python frame in it
        # is named. Whether a process shows its burn_ frame at all is chance:
        # at 99 Hz a 20 ms burn gets two samples on average, none in one run
        # of seven, so that count is reported but not judged.
        dropped = rec.lost + rec.events_lost
        targets.append(("no sample of a new process dropped (storm)",
                        verdict(dropped == 0 and st["samples_unnamed"] == 0,
                                f"lost {rec.lost} samples, {rec.events_lost} process events; "
                                f"{st['samples_unnamed']} of {st['samples_py']} samples with Python "
                                f"frames had one left unnamed",
                                "0 lost, every Python frame named",
                                f"{dropped} lost, {st['samples_unnamed']} samples with unnamed frames")))

    if "6" in args.only:
        say(f"## 6. Accuracy: func_a/func_b/func_c = 50/30/20 by thread CPU time, {P['acc_seconds']} s "
            f"(load {loadavg()})")
        say()
        res = bench_accuracy(args.bin, wd, P["acc_seconds"], py38, peers)
        rows = []
        for name, (sh, n) in res.items():
            if not sh:
                rows.append([name, "-", "-", "-", "-", str(n)])
                continue
            errs = [abs(sh[k] - SPLIT_TRUE[k]) for k in SPLIT_TRUE]
            rows.append([name, *(f"{sh[k]:.1f}" for k in SPLIT_TRUE), f"{max(errs):.1f}",
                         "" if n is None else str(n)])
        table(["profiler", "func_a % (50)", "func_b % (30)", "func_c % (20)", "max error, points",
               "samples"], rows)

    say(f"## Targets (load at end {loadavg()}, run took {(time.monotonic() - started) / 60:.1f} min)")
    say()
    for name, v in targets:
        say(f"- {name}: {v}")
    say()
    shutil.rmtree(wd.path, ignore_errors=True)
    if doc:
        write_doc(doc, args)


BEGIN, END = "<!-- results: begin (written by tests/bench/run_benchmarks.py) -->", "<!-- results: end -->"


def write_doc(path, args):
    block = "\n".join([BEGIN, "", "Command: `sudo python3 tests/bench/run_benchmarks.py --bin "
                       f"{os.path.relpath(args.bin, REPO) if args.bin.startswith(REPO) else args.bin}"
                       f"{' --quick' if args.quick else ''}`", ""] + OUT + [END])
    text = open(path).read() if os.path.exists(path) else "# Benchmarks\n\n"
    if BEGIN in text and END in text:
        text = text[:text.index(BEGIN)] + block + text[text.index(END) + len(END):]
    else:
        text = text.rstrip("\n") + "\n\n" + block + "\n"
    with open(path, "w") as f:
        f.write(text)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
