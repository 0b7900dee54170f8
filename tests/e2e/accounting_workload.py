"""Workloads with a known bottleneck, for `pystrobe stat`'s tests.

usage: accounting_workload.py MODE SECONDS TRUTH_FILE [DIR]

Each mode runs for SECONDS, then writes the kernel's own figures for the
process (/proc/self/stat, /proc/self/io and /proc/self/schedstat, read at the end) to TRUTH_FILE as
JSON, so a test compares pystrobe's counts with the kernel's over the same
lifetime. It prints "ready" when it starts its MODE, for a test that attaches
to it running. Modes:
  cpu     a pure-Python loop
  io      write 4 KiB and fsync, in a file under DIR (a real disk, not tmpfs)
  memory  map fresh anonymous memory and touch every page, then unmap
  gil     four pure-Python threads
  sleep   sleep in short naps
  rw      read /dev/zero and write /dev/null in 64 KiB calls
  gc      make cyclic garbage, for the collector (truth: its collections)
"""

import gc
import json
import mmap
import os
import sys
import threading
import time

PAGE = mmap.PAGESIZE
# What the memory and rw modes do at the least, whatever the deadline: the
# tests' floors are these, not what a fast machine does in the time.
MEMORY_ROUND_BYTES = 64 << 20
RW_ROUND_CALLS = 1000


def spin(deadline):
    x = 0
    while time.monotonic() < deadline:
        for i in range(2000):
            x += i * i
    return x


def io(deadline, directory):
    path = os.path.join(directory, f"pystrobe-io-{os.getpid()}")
    block = b"x" * 4096
    with open(path, "wb", buffering=0) as f:
        while time.monotonic() < deadline:
            f.write(block)
            os.fsync(f.fileno())
    os.unlink(path)


def memory(deadline):
    # Whole rounds of MEMORY_ROUND_BYTES, at least one however slow the machine.
    while True:
        m = mmap.mmap(-1, MEMORY_ROUND_BYTES, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        # Small pages: one fault per page, as the test expects.
        m.madvise(mmap.MADV_NOHUGEPAGE)
        for offset in range(0, MEMORY_ROUND_BYTES, PAGE):
            m[offset] = 1
        m.close()
        if time.monotonic() >= deadline:
            return


def gil(deadline):
    threads = [threading.Thread(target=spin, args=(deadline,)) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def sleep(deadline):
    while time.monotonic() < deadline:
        time.sleep(0.05)


def rw(deadline):
    block = 64 << 10
    # Whole rounds of RW_ROUND_CALLS reads and writes, at least one however
    # slow the machine.
    with open("/dev/zero", "rb", buffering=0) as src, open("/dev/null", "wb", buffering=0) as dst:
        while True:
            for _ in range(RW_ROUND_CALLS):
                dst.write(src.read(block))
            if time.monotonic() >= deadline:
                return


def garbage(deadline):
    while time.monotonic() < deadline:
        for _ in range(1000):
            a, b = [], []
            a.append(b)
            b.append(a)


STARTED = time.monotonic()


def truth():
    with open("/proc/self/stat") as f:
        fields = f.read().rpartition(")")[2].split()
    with open("/proc/self/io") as f:
        io_fields = dict(line.split(": ") for line in f.read().splitlines())
    ticks = os.sysconf("SC_CLK_TCK")
    # The main thread's time on a CPU and runnable waiting for one, in ns.
    with open("/proc/self/schedstat") as f:
        run_ns, runqueue_ns = (int(field) for field in f.read().split()[:2])
    return {
        "pid": os.getpid(),
        "wall": time.monotonic() - STARTED,
        "utime": int(fields[11]) / ticks,
        "stime": int(fields[12]) / ticks,
        "minflt": int(fields[7]),
        "majflt": int(fields[9]),
        "rchar": int(io_fields["rchar"]),
        "wchar": int(io_fields["wchar"]),
        "syscr": int(io_fields["syscr"]),
        "syscw": int(io_fields["syscw"]),
        "gc_collections": sum(generation["collections"] for generation in gc.get_stats()),
        "run_s": run_ns / 1e9,
        "runqueue_s": runqueue_ns / 1e9,
    }


def main():
    mode, seconds, truth_file = sys.argv[1], float(sys.argv[2]), sys.argv[3]
    deadline = time.monotonic() + seconds
    print("ready", flush=True)
    if mode == "cpu":
        spin(deadline)
    elif mode == "io":
        io(deadline, sys.argv[4])
    elif mode == "memory":
        memory(deadline)
    elif mode == "gil":
        gil(deadline)
    elif mode == "sleep":
        sleep(deadline)
    elif mode == "rw":
        rw(deadline)
    elif mode == "gc":
        garbage(deadline)
    else:
        sys.exit(f"unknown mode {mode}")
    result = truth()
    with open(truth_file, "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main()
