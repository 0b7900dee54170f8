"""A parent that starts Python children, for tests/e2e/test_record_python.py:
a multiprocessing (fork) child spinning in child_of_fork and an exec'd
interpreter (subprocess, this same file with --child) spinning in
child_of_exec, each for --seconds of its CPU time (so that their sample counts
do not depend on the machine's load), while the parent waits. Prints "ready", then one JSON line
{"pid", "fork_pid", "exec_pid"} when both are done. Runs on 2.7 and 3.6+."""
import argparse
import json
import multiprocessing
import os
import subprocess
import sys

import portable


def spin(seconds):
    end = portable.cpu_time() + seconds
    x = 0
    while portable.cpu_time() < end:
        for i in range(200):
            x += i
    return x


def child_of_fork(seconds):
    spin(seconds)


def child_of_exec(seconds):
    spin(seconds)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=2)
    parser.add_argument("--child", action="store_true")
    args = parser.parse_args()
    if args.child:
        child_of_exec(args.seconds)
        return
    portable.say("ready")
    # A forked child: 3.14 starts children with forkserver by default on
    # Linux (2.7 has fork only, and no get_context).
    context = (multiprocessing.get_context("fork") if hasattr(multiprocessing, "get_context")
               else multiprocessing)
    forked = context.Process(target=child_of_fork, args=(args.seconds,))
    forked.start()
    execed = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--child",
                               "--seconds", str(args.seconds)])
    forked.join()
    execed.wait()
    portable.say(json.dumps({"pid": os.getpid(), "fork_pid": forked.pid,
                             "exec_pid": execed.pid}))


if __name__ == "__main__":
    main()
