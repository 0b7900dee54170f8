"""What the benchmarks share: kernel.bpf_stats_enabled for a block, a
process's CPU time to the nanosecond, a deep Python spinner.

With the sysctl on, each BPF program's run_time_ns and run_cnt count (bpftool
and /proc/PID/fdinfo show them): the in-kernel cost the benchmarks print. It
costs every program two clock reads per run, so it is on only while measured,
and put back to what it was, even when the block fails.
"""
import contextlib
import glob
import subprocess

BPF_STATS = "/proc/sys/kernel/bpf_stats_enabled"


@contextlib.contextmanager
def bpf_stats():
    """kernel.bpf_stats_enabled=1 for the block, restored afterwards."""
    with open(BPF_STATS) as f:
        was = f.read().strip()
    subprocess.run(["sysctl", "-q", "kernel.bpf_stats_enabled=1"], check=True)
    try:
        yield
    finally:
        subprocess.run(["sysctl", "-q", f"kernel.bpf_stats_enabled={was}"], check=True)

# A Python program spinning D frames deep (argv[1]), <module> the first.
DEEP_PY = r'''
import sys
sys.setrecursionlimit(10000)
D = int(sys.argv[1])
def recurse(d):
    if d > 1:
        return recurse(d - 1)
    x = 0
    while True:
        x = (x * 3 + 1) & 0xffff
recurse(D - 1)   # <module> is the first frame
'''


def cpu_seconds(pid):
    """Time on a CPU of every thread of `pid`, from each thread's schedstat
    (nanoseconds): /proc/PID/stat counts 10 ms ticks, too coarse for a process
    that runs a millisecond a second."""
    total = 0
    for schedstat in glob.glob(f"/proc/{pid}/task/*/schedstat"):
        try:
            total += int(open(schedstat).read().split()[0])
        except OSError:
            pass  # a thread gone between listing and reading
    return total / 1e9
