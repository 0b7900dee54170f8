"""A process whose last function runs while the recorder cannot look, for
tests/e2e/test_record_python.py.

Run as `pystrobe record -- python exits_unseen.py`, so its parent is the
recorder. It burns CPU in warm_up() until the recorder has surely found it,
then stops the recorder (SIGSTOP), burns in burn_unseen() and exits. A forked
waker resumes the recorder (SIGCONT) only once this process is gone, its
memory with it: the recorder can name burn_unseen only from what the kernel
copied while sampling it.

Prints one JSON line with its pid before the stop. Runs on 2.7 and 3.6+.
"""
import argparse
import json
import os
import signal
import sys
import time

import portable


def burn(seconds):
    end = portable.cpu_time() + seconds
    x = 0
    while portable.cpu_time() < end:
        x = (x * 3 + 1) & 0xFFFF
    return x


def warm_up(seconds):
    return burn(seconds)


def burn_unseen(seconds):
    return burn(seconds)


def wake_recorder_after_exit(recorder):
    """Forks a child that sends SIGCONT to `recorder` once this process has
    exited (the child is then reparented)."""
    me = os.getpid()
    if os.fork() != 0:
        return
    while os.getppid() == me:
        time.sleep(0.01)
    os.kill(recorder, signal.SIGCONT)
    os._exit(0)


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=0.3,
                        help="CPU seconds in warm_up() and again in burn_unseen()")
    args = parser.parse_args()
    recorder = os.getppid()
    warm_up(args.seconds)
    portable.say(json.dumps({"pid": os.getpid(), "recorder": recorder}))
    wake_recorder_after_exit(recorder)
    os.kill(recorder, signal.SIGSTOP)
    burn_unseen(args.seconds)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
