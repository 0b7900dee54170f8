"""For tests/e2e/test_record_offcpu.py: one thread that, in turn, sleeps
(nap), burns CPU (spin) and writes + fsyncs a file (write_sync), measuring
each; prints one JSON line with the totals when --seconds are up:
nap_wall_s, spin_cpu_s, sync_wall_s."""
import argparse
import json
import os
import tempfile
import time

totals = {"nap_wall_s": 0.0, "spin_cpu_s": 0.0, "sync_wall_s": 0.0}


def nap():
    start = time.monotonic()
    time.sleep(0.02)
    totals["nap_wall_s"] += time.monotonic() - start


def spin():
    start = time.thread_time()
    while time.thread_time() - start < 0.02:
        pass
    totals["spin_cpu_s"] += time.thread_time() - start


def write_sync(out):
    start = time.monotonic()
    out.write(os.urandom(64 << 10))
    out.flush()
    os.fsync(out.fileno())
    totals["sync_wall_s"] += time.monotonic() - start


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=3)
    args = parser.parse_args()
    end = time.monotonic() + args.seconds
    with tempfile.NamedTemporaryFile(dir="/var/tmp") as out:
        while time.monotonic() < end:
            nap()
            spin()
            write_sync(out)
    print(json.dumps(totals), flush=True)


if __name__ == "__main__":
    main()
