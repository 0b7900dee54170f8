"""Three threads, for the --gil test of tests/e2e/test_record_python.py:
  gil_spinner   spins in pure Python: on a CPU holding the GIL;
  nogil_hasher  hashes a 16 MiB buffer: on a CPU in OpenSSL, the GIL released
                (compresses it with zlib where hashlib has no OpenSSL, as
                pyenv's 2.7 and 3.6 here: its fallback keeps the GIL); the
                buffer is made before the threads start, as writing 16 MiB
                holds the GIL (tens of milliseconds on a busy machine);
  gil_sleeper   sleeps in time.sleep: off the CPU, the GIL released.
The spinner and the hasher run for --seconds of CPU time (their thread's;
the process's before 3.7), so that they are the same share of the samples
beside the interpreter's start however loaded the machine; the sleeper for
--seconds of wall time. Prints "ready", then one JSON line with the threads'
native ids and CPU seconds. Runs on 2.7 and 3.6+."""
import argparse
import hashlib
import json
import os
import threading
import time
import zlib

import portable

try:
    import _hashlib  # noqa: F401  (OpenSSL's, which lets the GIL go)
    OPENSSL = True
except ImportError:
    OPENSSL = False

results = {}


def gil_spinner(seconds):
    end = portable.cpu_time() + seconds
    x = 0
    while portable.cpu_time() < end:
        for i in range(200):
            x += i


DATA = []  # the buffer nogil_hasher hashes, made by main()


def nogil_hasher(seconds):
    data = DATA[0]
    end = portable.cpu_time() + seconds
    while portable.cpu_time() < end:
        if OPENSSL:
            hashlib.sha256(data).digest()
        else:
            zlib.compress(data, 1)


def gil_sleeper(seconds):
    end = portable.monotonic() + seconds
    while portable.monotonic() < end:
        time.sleep(0.05)


def run(function, seconds):
    function(seconds)
    results[function.__name__] = {"tid": portable.native_thread_id(),
                                  "cpu_s": portable.thread_time()}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=3)
    args = parser.parse_args()
    DATA.append(b"x" * (16 << 20))
    threads = [threading.Thread(target=run, args=(f, args.seconds))
               for f in (gil_spinner, nogil_hasher, gil_sleeper)]
    for t in threads:
        t.start()
    portable.say("ready")
    for t in threads:
        t.join()
    portable.say(json.dumps({"pid": os.getpid(), "threads": results}))


main()
