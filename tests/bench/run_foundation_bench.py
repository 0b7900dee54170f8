#!/usr/bin/python3
"""Foundation benchmark for `pystrobe record`. Prints figures; asserts nothing.

  (a) samples per second handled by userspace: `record --all -r 1000` while two
      busy processes keep both CPUs sampled, samples / elapsed, and pystrobe's
      own CPU time per sample (from wait4's rusage);
  (b) in-kernel nanoseconds per sample: kernel.bpf_stats_enabled=1 (restored
      afterwards), run_time_ns / run_cnt of the `sample_cpu` program, read with
      `bpftool prog show -j` twice during the recording (the difference drops
      load and warm-up);
  (c) pystrobe's own CPU seconds and peak RSS over a 10-second `record --all`
      at 99 Hz, with the same two busy processes running;
  (d) how much a --all recording's RSS grows per short-lived process it sampled.

Run as root after a build:
  sudo tests/bench/run_foundation_bench.py [--bin build/pystrobe]
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

from bench_common import bpf_stats

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
SAMPLER_PROG = "sample_cpu"


def default_binary():
    for build in ("build", "build-e2e"):
        path = os.path.join(REPO, build, "pystrobe")
        if os.access(path, os.X_OK):
            return path
    return os.path.join(REPO, "build", "pystrobe")


class BusyProcesses:
    """Two CPU-bound processes, so every CPU has something to sample."""

    def __init__(self, count=2):
        code = "import time\nend = time.time() + 600\nwhile time.time() < end: pass\n"
        self.procs = [subprocess.Popen([sys.executable, "-c", code]) for _ in range(count)]

    def __enter__(self):
        time.sleep(0.2)
        return self

    def __exit__(self, *exc):
        for proc in self.procs:
            proc.kill()
            proc.wait()


class Run:
    """One `pystrobe record` run: its stderr, rusage and wall time."""

    def __init__(self, binary, args, during=None):
        out_dir = tempfile.mkdtemp(prefix="pystrobe-bench-")
        self.output = os.path.join(out_dir, "bench.folded")
        cmd = [binary, "record", "-f", "folded", "-o", self.output] + args
        err_file = tempfile.TemporaryFile(mode="w+")
        start = time.monotonic()
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err_file)
        self.during = during(proc) if during else None
        _, status, rusage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        self.wall = time.monotonic() - start
        err_file.seek(0)
        self.stderr = err_file.read()
        if proc.returncode != 0:
            raise SystemExit(f"`{' '.join(cmd)}` exited {proc.returncode}:\n{self.stderr}")
        self.user_s = rusage.ru_utime
        self.sys_s = rusage.ru_stime
        self.max_rss_kib = rusage.ru_maxrss
        match = re.search(r"^pystrobe: (\d+) samples of (\d+) processes in ([\d.]+) s", self.stderr,
                          re.M)
        if not match:
            raise SystemExit(f"no sample summary in pystrobe's stderr:\n{self.stderr}")
        self.samples = int(match.group(1))
        self.elapsed = float(match.group(3))
        lost = re.search(r"^pystrobe: lost (\d+) samples", self.stderr, re.M)
        self.lost = int(lost.group(1)) if lost else None
        failed = re.search(r"stack reads failed: (\d+) kernel, (\d+) user", self.stderr)
        self.failed = (int(failed.group(1)), int(failed.group(2))) if failed else None
        os.unlink(self.output)
        os.rmdir(out_dir)

    @property
    def cpu_s(self):
        return self.user_s + self.sys_s


def sampler_stats(owner_pid):
    """(run_time_ns, run_cnt) of the sampler program loaded by owner_pid, or None."""
    out = subprocess.run(["bpftool", "prog", "show", "-j"], capture_output=True, text=True,
                         check=True).stdout
    for prog in json.loads(out):
        if prog.get("name") != SAMPLER_PROG:
            continue
        pids = {p.get("pid") for p in prog.get("pids", [])}
        if pids and owner_pid not in pids:
            continue
        return prog.get("run_time_ns", 0), prog.get("run_cnt", 0)
    return None


def rss_watcher(sampling_seconds):
    """A `during` callback: VmRSS (KiB) of the recorder, polled every 0.1 s, split
    into the sampling phase (first `sampling_seconds`) and what follows it
    (draining, symbolizing, writing)."""

    def watch(proc):
        start = time.monotonic()
        during, after = 0, 0
        while True:
            try:
                with open(f"/proc/{proc.pid}/status") as f:
                    status = f.read()
            except OSError:
                break
            match = re.search(r"^VmRSS:\s+(\d+) kB", status, re.M)
            if not match:  # a zombie has no VmRSS: it has exited
                break
            rss = int(match.group(1))
            if time.monotonic() - start < sampling_seconds:
                during = max(during, rss)
            else:
                after = max(after, rss)
            time.sleep(0.1)
        return during, after

    return watch


def bench_fixed_cost(binary):
    """Start-up, kallsyms, writing: what a run costs with almost no samples."""
    return Run(binary, ["--all", "-r", "1", "-d", "1"])


def bench_userspace_rate(binary, seconds):
    with BusyProcesses():
        run = Run(binary, ["--all", "-r", "1000", "-d", str(seconds)])
    return run


def bench_kernel_cost(binary, seconds):
    readings = []

    def read_stats(proc):
        # First reading once the program is attached and warm, second near the end.
        for at in (1.5, seconds - 1.5):
            time.sleep(max(0.0, at - (time.monotonic() - started)))
            stats = sampler_stats(proc.pid)
            if stats:
                readings.append(stats)
        return readings

    with bpf_stats(), BusyProcesses():
        started = time.monotonic()
        run = Run(binary, ["--all", "-r", "1000", "-d", str(seconds)], during=read_stats)
    if len(readings) < 2:
        raise SystemExit(f"could not read {SAMPLER_PROG}'s stats with bpftool ({readings})")
    (ns0, cnt0), (ns1, cnt1) = readings[0], readings[-1]
    if cnt1 <= cnt0:
        raise SystemExit(f"{SAMPLER_PROG} did not run between the readings ({readings})")
    return run, (ns1 - ns0) / (cnt1 - cnt0), cnt1 - cnt0, ns1 / max(cnt1, 1)


def bench_rss_per_process(binary, spawns=30):
    """VmRSS growth of a --all recording per short-lived process it samples:
    `spawns` runs of the same interpreter, 0.1 s of CPU each, one after another.
    A system-wide recorder must not grow with every process it has ever seen."""
    code = "import time\ne = time.time() + 0.1\nwhile time.time() < e: pass\n"
    values = []

    def spawn(proc):
        time.sleep(1.0)
        values.append(_vm_rss_kib(proc.pid))
        for _ in range(spawns):
            subprocess.run([sys.executable, "-c", code], check=True)
        values.append(_vm_rss_kib(proc.pid))

    Run(binary, ["--all", "-r", "99", "-d", str(2 + spawns * 0.15)], during=spawn)
    return values[0], values[1], spawns


def _vm_rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        return int(re.search(r"^VmRSS:\s+(\d+) kB", f.read(), re.M).group(1))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bin", default=default_binary(), help="the pystrobe binary")
    parser.add_argument("--seconds", type=float, default=6,
                        help="length of the high-rate runs (a) and (b)")
    args = parser.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("run as root: the benchmark loads BPF programs")
    if not os.access(args.bin, os.X_OK):
        raise SystemExit(f"no pystrobe binary at {args.bin} (build first, or pass --bin)")
    ncpu = os.cpu_count()
    print(f"pystrobe foundation benchmark: {args.bin}, {ncpu} CPUs, kernel {os.uname().release}")
    print("(each run has two busy processes, so every CPU has a task to sample)\n", flush=True)

    fixed = bench_fixed_cost(args.bin)
    rate = bench_userspace_rate(args.bin, args.seconds)
    kernel_run, ns_per_sample, kernel_samples, ns_overall = bench_kernel_cost(args.bin,
                                                                              args.seconds)
    with BusyProcesses():
        steady = Run(args.bin, ["--all", "-r", "99", "-d", "10"], during=rss_watcher(10.0))
    rss_sampling_kib, rss_after_kib = steady.during
    rss_before, rss_after, spawns = bench_rss_per_process(args.bin)
    marginal_cpu = max(rate.cpu_s - fixed.cpu_s, 0.0)

    rows = [
        ("(a) userspace, --all -r 1000, %.0f s" % rate.elapsed, ""),
        ("    samples handled", f"{rate.samples}"),
        ("    samples per second", f"{rate.samples / rate.elapsed:.0f}"
         f" (ideal {1000 * ncpu})"),
        ("    lost (ring buffer) / failed stacks k,u", f"{rate.lost} / {rate.failed}"),
        ("    pystrobe CPU user + sys", f"{rate.user_s:.2f} + {rate.sys_s:.2f} s"
         f" = {100 * rate.cpu_s / rate.wall:.1f}% of one CPU"),
        ("    pystrobe CPU per sample, all in", f"{1e6 * rate.cpu_s / max(rate.samples, 1):.1f} us"),
        ("    fixed cost (-r 1 -d 1: start, write)", f"{fixed.cpu_s:.2f} s CPU"),
        ("    CPU per sample beyond the fixed cost", f"{1e6 * marginal_cpu / max(rate.samples, 1):.1f} us"),
        ("(b) in kernel, sample_cpu, -r 1000", ""),
        ("    runs measured (bpftool, 2 readings)", f"{kernel_samples}"),
        ("    ns per run (between readings)", f"{ns_per_sample:.0f} ns"),
        ("    ns per run (whole run, incl. warm-up)", f"{ns_overall:.0f} ns"),
        ("(c) --all -r 99 for 10 s", ""),
        ("    samples", f"{steady.samples} in {steady.elapsed:.1f} s"),
        ("    pystrobe CPU user + sys", f"{steady.user_s:.2f} + {steady.sys_s:.2f} s"
         f" = {steady.cpu_s:.2f} s ({100 * steady.cpu_s / steady.wall:.1f}% of one CPU)"),
        ("    pystrobe peak RSS (rusage)", f"{steady.max_rss_kib / 1024:.1f} MiB"),
        ("    max VmRSS while sampling (first 10 s)", f"{rss_sampling_kib / 1024:.1f} MiB"),
        ("    max VmRSS after (symbolize, write)", f"{rss_after_kib / 1024:.1f} MiB"),
        ("    wall time incl. start-up and writing", f"{steady.wall:.1f} s"),
        (f"(d) --all while {spawns} short-lived {os.path.basename(sys.executable)} run", ""),
        ("    VmRSS before / after", f"{rss_before / 1024:.1f} / {rss_after / 1024:.1f} MiB"),
        ("    growth per exited process", f"{(rss_after - rss_before) / spawns:.0f} KiB"),
    ]
    width = max(len(name) for name, _ in rows) + 2
    for name, value in rows:
        print(f"{name:<{width}}{value}")
    del kernel_run
    if rate.lost or steady.lost:
        print("\nnote: the ring buffer lost samples; the rates above undercount.")


if __name__ == "__main__":
    main()
