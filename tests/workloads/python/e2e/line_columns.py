"""One hot Python line per mode, for tests/e2e/test_report_columns.py: where
that line's time goes is known, and the program measures it itself.

  --mode numpy   `b = a @ a` (Debian's numpy, reference BLAS: dgemm_): native
  --mode loop    a pure-Python arithmetic loop on one line: the interpreter
  --mode sleep   time.sleep(0.005) on one line: off CPU, asleep
  --mode fsync   write a block to a file and os.fsync it on one line: IO wait

Prints "ready", runs the mode for --seconds, then one JSON line:
  {"pid", "mode", "hot_line" (the line number), "path" (this file),
   "hot_wall_s" (monotonic seconds spent on the hot line), "run_wall_s"
   (seconds from "ready" to the end), "hot_cpu_s" (thread CPU seconds on it),
   "process_cpu_s" (the process's CPU seconds, its start included)}
main() holds all of the run but the interpreter's start (numpy is imported
before it): the hot line's share of main() is hot_wall_s / run_wall_s.
Debian's python3.11 (numpy is Debian's python3-numpy).
"""
import argparse
import json
import os
import sys
import tempfile
import time

if "--mode=numpy" in sys.argv or "numpy" in sys.argv:
    import numpy  # noqa: F401  (before main(): its import is not main's time)

HERE = open(__file__, encoding="utf-8").read().splitlines()


def line_of(tag):
    for number, text in enumerate(HERE, start=1):
        if text.rstrip().endswith("# " + tag):
            return number
    raise KeyError(tag)


def run_numpy(end, clocks):
    import numpy
    a = numpy.random.default_rng(1).random((400, 400))
    while time.monotonic() < end:
        w, c = time.monotonic(), time.thread_time()
        b = a @ a  # HOT numpy
        clocks[0] += time.monotonic() - w
        clocks[1] += time.thread_time() - c
    return b


def run_loop(end, clocks):
    acc = 0
    while time.monotonic() < end:
        w, c = time.monotonic(), time.thread_time()
        for i in range(200000): acc = (acc + i * i) % 1000003  # HOT loop
        clocks[0] += time.monotonic() - w
        clocks[1] += time.thread_time() - c
    return acc


def run_sleep(end, clocks):
    while time.monotonic() < end:
        w, c = time.monotonic(), time.thread_time()
        time.sleep(0.005)  # HOT sleep
        clocks[0] += time.monotonic() - w
        clocks[1] += time.thread_time() - c


def run_fsync(end, clocks):
    block = os.urandom(64 * 1024)
    # On disk, not tmpfs: fsync must wait for the device.
    with tempfile.NamedTemporaryFile(dir="/var/tmp", prefix="pystrobe-fsync-") as f:
        fd = f.fileno()
        while time.monotonic() < end:
            w, c = time.monotonic(), time.thread_time()
            os.write(fd, block); os.fsync(fd)  # HOT fsync
            clocks[0] += time.monotonic() - w
            clocks[1] += time.thread_time() - c
            if os.lseek(fd, 0, os.SEEK_CUR) > 16 << 20:
                os.lseek(fd, 0, os.SEEK_SET)


MODES = {"numpy": run_numpy, "loop": run_loop, "sleep": run_sleep, "fsync": run_fsync}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--mode", choices=sorted(MODES), required=True)
    parser.add_argument("--seconds", type=float, default=3)
    args = parser.parse_args()
    clocks = [0.0, 0.0]
    print("ready", flush=True)
    start = time.monotonic()
    MODES[args.mode](start + args.seconds, clocks)
    print(json.dumps({"pid": os.getpid(), "mode": args.mode,
                      "hot_line": line_of("HOT " + args.mode), "path": os.path.abspath(__file__),
                      "hot_wall_s": clocks[0], "hot_cpu_s": clocks[1],
                      "run_wall_s": time.monotonic() - start,
                      "process_cpu_s": time.process_time()}), flush=True)


if __name__ == "__main__":
    sys.exit(main())
