"""What the benchmarks share: kernel.bpf_stats_enabled for a block.

With the sysctl on, each BPF program's run_time_ns and run_cnt count (bpftool
and /proc/PID/fdinfo show them): the in-kernel cost the benchmarks print. It
costs every program two clock reads per run, so it is on only while measured,
and put back to what it was, even when the block fails.
"""
import contextlib
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
