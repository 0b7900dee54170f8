"""Three threads, for the --gil test of tests/e2e/test_record_python.py:
  gil_spinner   spins in pure Python: on a CPU holding the GIL;
  nogil_hasher  hashes 16 MiB buffers: on a CPU in OpenSSL, the GIL released;
  gil_sleeper   sleeps in time.sleep: off the CPU, the GIL released.
Runs for --seconds; prints "ready", then one JSON line with the threads'
native ids and CPU seconds."""
import argparse
import hashlib
import json
import os
import threading
import time

results = {}


def gil_spinner(seconds):
    end = time.monotonic() + seconds
    x = 0
    while time.monotonic() < end:
        for i in range(200):
            x += i


def nogil_hasher(seconds):
    data = b"x" * (16 << 20)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        hashlib.sha256(data).digest()


def gil_sleeper(seconds):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        time.sleep(0.05)


def run(function, seconds):
    function(seconds)
    results[function.__name__] = {"tid": threading.get_native_id(), "cpu_s": time.thread_time()}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=3)
    args = parser.parse_args()
    threads = [threading.Thread(target=run, args=(f, args.seconds))
               for f in (gil_spinner, nogil_hasher, gil_sleeper)]
    for t in threads:
        t.start()
    print("ready", flush=True)
    for t in threads:
        t.join()
    print(json.dumps({"pid": os.getpid(), "threads": results}), flush=True)


main()
