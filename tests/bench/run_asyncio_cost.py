#!/usr/bin/env python3
"""What --asyncio costs on a service with many pending tasks.

Starts an asyncio service (Debian's python3.11) with --tasks pending tasks,
each waking every 100 ms for a few microseconds of work, and one task that
burns CPU in batches and counts them. Then, one after another on the same
service: `record -p PID` plain, with --asyncio, and with --asyncio --off-cpu,
and `dump --asyncio`. For each: pystrobe's own CPU seconds (rusage), its wall
time, and the batches per second the CPU task got done during it against the
same service unprofiled just before. Run as root, after a build:

    tests/bench/run_asyncio_cost.py --bin build/pystrobe [--tasks 1000]
"""
import argparse
import json
import os
import resource
import subprocess
import tempfile
import time

SERVICE = r'''
import asyncio, json, os, sys, time
TASKS = int(sys.argv[1]); COUNT = sys.argv[2]
batches = 0
async def wait_for_request(i):
    while True:
        await asyncio.sleep(0.1)
        sum(range(20))
async def crunch_batches():
    global batches
    while True:
        end = time.thread_time() + 0.002
        while time.thread_time() < end:
            pass
        batches += 1
        with open(COUNT + ".tmp", "w") as f:
            f.write(str(batches))
        os.replace(COUNT + ".tmp", COUNT)  # a reader never sees it half written
        await asyncio.sleep(0)
async def main():
    for i in range(TASKS):
        asyncio.create_task(wait_for_request(i), name=f"io-{i}")
    asyncio.create_task(crunch_batches(), name="cpu-0")
    print(json.dumps({"pid": os.getpid()}), flush=True)
    await asyncio.sleep(3600)
asyncio.run(main())
'''


def batches(path):
    try:
        return int(open(path).read() or 0)
    except (OSError, ValueError):
        return 0


def run_timed(argv, count_path):
    """Runs argv; returns (own CPU s, wall s, batches/s of the service meanwhile)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start, first = time.monotonic(), batches(count_path)
    result = subprocess.run(argv, capture_output=True, text=True)
    wall, done = time.monotonic() - start, batches(count_path) - first
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if result.returncode != 0:
        raise SystemExit(f"`{' '.join(argv)}` exited {result.returncode}:\n{result.stderr}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, wall, done / wall


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bin", default="build/pystrobe")
    parser.add_argument("--tasks", type=int, default=1000)
    parser.add_argument("--seconds", type=int, default=10)
    args = parser.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("run as root: pystrobe loads BPF programs")
    with tempfile.TemporaryDirectory(prefix="pystrobe-asyncio-") as tmp:
        count = os.path.join(tmp, "batches")
        service = subprocess.Popen(["/usr/bin/python3.11", "-c", SERVICE, str(args.tasks), count],
                                   stdout=subprocess.PIPE, text=True)
        try:
            pid = json.loads(service.stdout.readline())["pid"]
            time.sleep(2)
            rows = []
            for label, flags in (("record", []), ("record --asyncio", ["--asyncio"]),
                                 ("record --asyncio --off-cpu", ["--asyncio", "--off-cpu"])):
                first = batches(count)
                time.sleep(args.seconds)
                unprofiled = (batches(count) - first) / args.seconds
                cpu, wall, rate = run_timed(
                    [args.bin, "record", "--no-daemon", "-p", str(pid), "-d", str(args.seconds),
                     "-r", "99", "-f", "folded", "-o", os.path.join(tmp, "out.folded"), *flags],
                    count)
                rows.append((label, cpu, wall, rate / unprofiled if unprofiled else 0))
            cpu, wall, _ = run_timed([args.bin, "dump", "--pid", str(pid), "--asyncio", "--json"],
                                     count)
            rows.append(("dump --asyncio", cpu, wall, None))
        finally:
            service.kill()
            service.wait()
    load = " ".join(open("/proc/loadavg").read().split()[:3])
    print(f"a service with {args.tasks} pending tasks and one busy task, -r 99, "
          f"{args.seconds} s recordings (load {load})")
    print("| run | pystrobe CPU (s) | wall (s) | busy task's throughput vs unprofiled |")
    print("|---|---|---|---|")
    for label, cpu, wall, ratio in rows:
        print(f"| {label} | {cpu:.2f} | {wall:.2f} | "
              f"{'-' if ratio is None else f'{100 * ratio:.1f}%'} |")


if __name__ == "__main__":
    main()
