"""A Python program whose memory is known, for pystrobe's memory tests.

    memory_workload.py MODE TRUTH_PATH [ARGS]

MODE:
  grow BIG_MIB SMALL_MIB HOLD_S: makes BIG_MIB resident in grow_big() and
      SMALL_MIB in grow_small() (interleaved, 4 MiB at a time, every byte
      written), holds it HOLD_S seconds, frees it all, then sleeps 0.5 s: the
      peak is passed before the end.
  oom STEP_MIB: grows_until_killed() adds STEP_MIB at a time until the kernel
      kills it (run it in a memory-limited cgroup), while a second thread
      sleeps in waits_beside(). Writes its pid and that thread's tid first.
  rate MIB_PER_S SECONDS: first-touches fresh mmap'd memory at MIB_PER_S for
      SECONDS, unmapping each chunk after touching it (RSS stays flat).
  leak MIB: leak_into() allocates MIB blocks of 1 MiB and keeps them;
      churn() allocates as many and frees each at once; then it exits without
      freeing anything (os._exit), so the leak is still held at the end.
  hold MIB CHURN_MIB: hold_into() keeps MIB blocks of 1 MiB in a module-level
      list, while churn_small() makes and drops CHURN_MIB MiB of 1 KiB bytes
      objects (interleaved); then it ends normally, so interpreter teardown
      frees what it held. Writes the bytes it counted itself (sys.getsizeof
      of every object, as malloc was asked for them): held_bytes,
      churned_bytes.

Before it exits (grow, rate) it writes the kernel's truth to TRUTH_PATH as
JSON: its pid, VmHWM, VmRSS and the times of the peak, from
/proc/self/status. `oom` writes its pid first, as it cannot write later.
"""

import json
import mmap
import os
import sys
import threading
import time

CHUNK = 4 << 20
PAGE = 4096


def status():
    out = {}
    with open("/proc/self/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmHWM", "VmRSS", "RssAnon", "RssFile", "RssShmem", "VmSwap"):
                out[key] = int(value.split()[0]) * 1024
    return out


def touched_chunk():
    # b"x" * n writes every byte: the pages become resident here.
    return b"x" * CHUNK


def grow_big(held):
    held.append(touched_chunk())


def grow_small(held):
    held.append(touched_chunk())


def grow(big_mib, small_mib, hold_s, truth_path):
    start = time.monotonic()
    held = []
    big, small = big_mib * (1 << 20) // CHUNK, small_mib * (1 << 20) // CHUNK
    # Interleaved, so neither function owns a phase of the run.
    ratio = big / max(small, 1)
    done_big = done_small = 0
    while done_big < big or done_small < small:
        if done_big < big and (done_small >= small or done_big < ratio * (done_small + 1)):
            grow_big(held)
            done_big += 1
        else:
            grow_small(held)
            done_small += 1
    at_peak = status()
    peak_at = time.monotonic() - start
    time.sleep(hold_s)
    held.clear()
    time.sleep(0.5)
    truth = status()
    truth.update(pid=os.getpid(), peak_seconds=peak_at, at_peak=at_peak,
                 wall=time.monotonic() - start)
    with open(truth_path, "w") as f:
        json.dump(truth, f)


def grows_until_killed(step_mib, held):
    held.append(b"y" * (step_mib << 20))


def waits_beside():
    while True:
        time.sleep(0.01)


def oom(step_mib, truth_path):
    waiter = threading.Thread(target=waits_beside, name="waiter", daemon=True)
    waiter.start()
    with open(truth_path, "w") as f:
        json.dump({"pid": os.getpid(), "waiter_tid": waiter.native_id}, f)
    held = []
    while True:
        grows_until_killed(step_mib, held)
        time.sleep(0.02)


def first_touch(chunk):
    for offset in range(0, len(chunk), PAGE):
        chunk[offset] = 1


def rate(mib_per_s, seconds, truth_path):
    start = time.monotonic()
    size = 16 << 20
    touched = 0
    while time.monotonic() - start < seconds:
        chunk = mmap.mmap(-1, size)
        first_touch(chunk)
        chunk.close()
        touched += size
        ahead = touched / (mib_per_s << 20) - (time.monotonic() - start)
        if ahead > 0:
            time.sleep(ahead)
    truth = status()
    cpu = os.times()
    truth.update(pid=os.getpid(), touched_bytes=touched, wall=time.monotonic() - start,
                 cpu_seconds=cpu.user + cpu.system)
    with open(truth_path, "w") as f:
        json.dump(truth, f)


LEAKED = []


def leak_into(held):
    held.append(b"l" * (1 << 20))


def churn():
    block = b"c" * (1 << 20)
    return len(block)


def leak(mib, truth_path):
    for _ in range(mib):
        leak_into(LEAKED)
        churn()
    with open(truth_path, "w") as f:
        json.dump({"pid": os.getpid(), "leaked_bytes": mib << 20}, f)
    time.sleep(0.3)
    os._exit(0)


HELD = []


def hold_into(held):
    block = b"h" * (1 << 20)
    held.append(block)
    return sys.getsizeof(block)


def churn_small(count):
    made = 0
    for i in range(count):
        block = bytes(1024)
        made += sys.getsizeof(block)
    return made


def hold(mib, churn_mib, truth_path):
    held = churned = 0
    per_round = (churn_mib << 10) // mib  # 1 KiB objects per held MiB
    for _ in range(mib):
        held += hold_into(HELD)
        churned += churn_small(per_round)
    with open(truth_path, "w") as f:
        json.dump({"pid": os.getpid(), "held_bytes": held, "churned_bytes": churned}, f)


def main():
    mode, truth_path = sys.argv[1], sys.argv[2]
    args = [float(a) if "." in a else int(a) for a in sys.argv[3:]]
    if mode == "grow":
        grow(*args, truth_path)
    elif mode == "oom":
        oom(*args, truth_path)
    elif mode == "rate":
        rate(*args, truth_path)
    elif mode == "leak":
        leak(*args, truth_path)
    elif mode == "hold":
        hold(*args, truth_path)
    else:
        sys.exit(f"unknown mode {mode}")


if __name__ == "__main__":
    main()
