#!/usr/bin/env python3
"""What resident-memory accounting costs while a program first-touches 1 GB/s.

The workload (tests/e2e/memory_workload.py rate) maps fresh memory, writes one
byte per 4 KiB page and unmaps it, at 1 GiB/s for SECONDS: about 262,000 page
faults a second, each making a page resident. Three designs, side by side:

  none     nothing attached
  ticks    pystrobe's always-on design: `pystrobe daemon` at its defaults, whose
           accounting programs read the mm's RSS counters on the scheduler
           events they already handle (nothing runs per fault); the BPF time
           counted is theirs, for the whole machine
  memory   `record --memory`: resident growth sampled every 512 KiB on average
           from a raw tracepoint on kmem:rss_stat (on demand, not always on)
  rss_stat the per-fault design: kmem:rss_stat traced (bpftrace 0.17, which
           has no raw tracepoints: the tracepoint's own sum of the per-CPU
           counters included), a per-CPU count per process: the least a
           per-event design does

For each: the workload's own CPU time per GiB touched (utime + stime from
/proc, medians of ROUNDS runs, alternating), and with kernel.bpf_stats_enabled
the in-kernel time of the programs that ran, as a share of one core.

usage: sudo python3 tests/bench/run_memory_cost.py [--bin build/pystrobe] [--rounds 3]
       [--seconds 8] [--mib-per-s 1024]
"""

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

from bench_common import bpf_stats

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
WORKLOAD = os.path.join(REPO, "tests", "e2e", "memory_workload.py")
PYTHON = "/usr/bin/python3.11"
TICKS = os.sysconf("SC_CLK_TCK")


def programs_of(pid):
    """The ids of the BPF programs process `pid` holds (its fds' prog_id)."""
    ids = set()
    fdinfo = f"/proc/{pid}/fdinfo"
    try:
        for fd in os.listdir(fdinfo):
            try:
                with open(os.path.join(fdinfo, fd)) as f:
                    for line in f:
                        if line.startswith("prog_id:"):
                            ids.add(int(line.split()[1]))
            except OSError:
                pass
    except OSError:
        pass
    return ids


def program_stats(ids, prefixes):
    """run_time_ns and run_cnt by program id, for `ids` whose name starts with one of
    `prefixes`."""
    out = subprocess.run(["bpftool", "prog", "show", "-j"], capture_output=True, text=True,
                         check=True).stdout
    return {p["id"]: (p.get("run_time_ns", 0), p.get("run_cnt", 0)) for p in json.loads(out)
            if p["id"] in ids and p.get("name", "").startswith(prefixes)}


class Watch:
    """The in-kernel time of one process's BPF programs, seen while it runs
    (its programs go with it)."""

    def __init__(self, pid, prefixes=("",)):
        self.pid = pid
        self.prefixes = tuple(prefixes)
        self.first = {}
        self.last = {}

    def poll(self):
        stats = program_stats(programs_of(self.pid), self.prefixes)
        for pid, value in stats.items():
            self.first.setdefault(pid, value)
            self.last[pid] = value

    def total(self):
        ns = sum(self.last[i][0] - self.first[i][0] for i in self.last)
        cnt = sum(self.last[i][1] - self.first[i][1] for i in self.last)
        return ns, cnt


def start_daemon(binary, tmp):
    """`pystrobe daemon` at its defaults, on a free port and a control socket
    of its own, loaded and attached when this returns."""
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    daemon = subprocess.Popen(
        [binary, "daemon", "--prometheus-listen", f"127.0.0.1:{port}", "--profile-dir",
         os.path.join(tmp, "profiles"), "--socket", os.path.join(tmp, f"control-{port}.sock")],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(4)
    return daemon


def workload_cmd(tmp, args):
    return [PYTHON, WORKLOAD, "rate", os.path.join(tmp, "truth.json"), str(args.mib_per_s),
            str(args.seconds)]


def cpu_of_children():
    usage = os.times()
    return usage.children_user + usage.children_system


def run(design, args, tmp):
    """Returns (workload CPU s per GiB, BPF ns per second, BPF runs per second, bytes/s)."""
    tracer = watch = None
    truth_path = os.path.join(tmp, "truth.json")
    if design == "rss_stat":
        tracer = subprocess.Popen(
            ["bpftrace", "-e", "tracepoint:kmem:rss_stat { @[pid] = count(); }"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(4)  # attached
        watch = Watch(tracer.pid)
        cmd = workload_cmd(tmp, args)
    elif design == "ticks":
        # The always-on daemon, at its defaults: its accounting programs' time.
        tracer = start_daemon(args.bin, tmp)
        watch = Watch(tracer.pid, ("acct_",))
        cmd = workload_cmd(tmp, args)
    elif design == "memory":
        cmd = [args.bin, "record", "--memory", "--no-daemon", "-r", "1", "-f", "folded", "-o",
               os.devnull, "--", *workload_cmd(tmp, args)]
    else:
        cmd = workload_cmd(tmp, args)
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if design == "memory":
        watch = Watch(proc.pid, ("sample_memory",))
    start = time.monotonic()
    watched = 0.0
    while proc.poll() is None:
        if watch is not None:
            watch.poll()
            if watch.first:
                watched = time.monotonic() - start
        time.sleep(0.25)
    if tracer is not None:
        tracer.terminate()
        tracer.wait()
    with open(truth_path) as f:
        truth = json.load(f)
    ns, cnt = watch.total() if watch is not None else (0, 0)
    seconds = watched or 1
    gib = truth["touched_bytes"] / (1 << 30)
    return (truth["cpu_seconds"] / gib, ns / seconds, cnt / seconds,
            truth["touched_bytes"] / truth["wall"])


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", default=os.path.join(REPO, "build", "pystrobe"))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=int, default=8)
    parser.add_argument("--mib-per-s", type=int, default=1024)
    args = parser.parse_args()
    designs = ["none", "ticks", "memory"]
    if shutil.which("bpftrace"):
        designs.append("rss_stat")
    else:
        print("bpftrace is not installed: the rss_stat design is not measured", file=sys.stderr)
    # bpftrace attaches tracepoints through tracefs: mounted for the run if absent.
    mounted_tracefs = False
    if "rss_stat" in designs and not os.path.exists("/sys/kernel/tracing/events"):
        subprocess.run(["mount", "-t", "tracefs", "nodev", "/sys/kernel/tracing"], check=True)
        mounted_tracefs = True
    results = {d: [] for d in designs}
    try:
        with bpf_stats(), tempfile.TemporaryDirectory() as tmp:
            for _ in range(args.rounds):
                for design in designs:
                    results[design].append(run(design, args, tmp))
    finally:
        if mounted_tracefs:
            subprocess.run(["umount", "/sys/kernel/tracing"], check=False)
    base = statistics.median(r[0] for r in results["none"])
    print(f"first touch at {args.mib_per_s} MiB/s for {args.seconds} s, "
          f"medians of {args.rounds} runs")
    print(f"{'design':10} {'touched MiB/s':>13} {'CPU s/GiB':>10} {'vs none':>8} "
          f"{'BPF runs/s':>11} {'BPF ns/run':>10} {'BPF % core':>10}")
    for design in designs:
        rows = results[design]
        cpu = statistics.median(r[0] for r in rows)
        ns = statistics.median(r[1] for r in rows)
        cnt = statistics.median(r[2] for r in rows)
        rate = statistics.median(r[3] for r in rows) / (1 << 20)
        per_run = ns / cnt if cnt else 0
        print(f"{design:10} {rate:13.0f} {cpu:10.3f} {cpu / base - 1:+8.1%} {cnt:11.0f} "
              f"{per_run:10.0f} {ns / 1e9:10.3%}")


if __name__ == "__main__":
    main()
