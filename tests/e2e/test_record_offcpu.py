"""`pystrobe record --off-cpu` and `--idle`: where threads wait, and why.

- --off-cpu weighs on-CPU samples and time off CPU in microseconds under
  the roots [on-cpu] and [off-cpu]; off-CPU stacks end in their reason.
  A program that sleeps, spins and fsyncs in turn, measuring each: the time
  off CPU under its sleeping function is within 15% of the time it slept,
  its on-CPU time under the spinning function within 15% of its CPU time,
  and its fsync shows [io wait].
- Four pure-Python threads on this 2-core machine wait mostly for the GIL:
  [gil wait] is most of their time off CPU, on every installed CPython from
  3.6 on; on 2.7, whose GIL wakes every waiter, most of their time asleep.
- --idle folds time off CPU in as samples: the sleeping function gets about
  its sleeping time times the rate.
Needs root and BPF; PYSTROBE_SKIP_BPF_TESTS=1 skips instead of failing.
"""

import json
import os
import subprocess
import unittest

from pystrobe_testlib import BpfTestCase, record, summarize
from python_testlib import installed_pythons, python_workload, report_skipped_pythons

DEBIAN_PYTHON = "/usr/bin/python3.11"
RATE = 499


def time_under(stacks, root, function, leaf=None):
    """Sum of the counts of stacks under `root` that pass through `function`
    (a Python frame name prefix) and, if given, end in `leaf`."""
    found = 0
    for frames, count in stacks.items():
        if frames[0] != root:
            continue
        if not any(frame.startswith(function + " (") for frame in frames):
            continue
        if leaf is not None and frames[-1] != leaf:
            continue
        found += count
    return found


class OffCpuTest(BpfTestCase):

    def test_sleep_spin_and_fsync_are_weighed_by_time(self):
        recording = record(["--off-cpu", "-r", str(RATE), "--", DEBIAN_PYTHON,
                            python_workload("offcpu_mix.py"), "--seconds", "3"], self.tmp)
        self.assertRecorded(recording)
        truth = json.loads(recording.stdout.strip().splitlines()[-1])
        stacks = recording.stacks
        roots = {frames[0] for frames in stacks}
        self.assertLessEqual(roots, {"[on-cpu]", "[off-cpu]"}, summarize(stacks))

        slept_us = time_under(stacks, "[off-cpu]", "nap")
        self.assertAlmostEqual(slept_us / 1e6, truth["nap_wall_s"],
                               delta=0.15 * truth["nap_wall_s"], msg=summarize(stacks))
        # Asleep, but for the time it waited for a CPU once woken (the
        # machine's load, which its wall clock counts too).
        woken_us = time_under(stacks, "[off-cpu]", "nap", "[runqueue]")
        self.assertGreater(time_under(stacks, "[off-cpu]", "nap", "[sleep]"),
                           0.8 * (slept_us - woken_us), summarize(stacks))

        spun_us = time_under(stacks, "[on-cpu]", "spin")
        self.assertAlmostEqual(spun_us / 1e6, truth["spin_cpu_s"],
                               delta=0.15 * truth["spin_cpu_s"], msg=summarize(stacks))

        self.assertGreater(time_under(stacks, "[off-cpu]", "write_sync", "[io wait]"), 0,
                           summarize(stacks))

    def test_contending_threads_wait_for_the_gil(self):
        report_skipped_pythons(self.id())
        for python in installed_pythons(with_old=True, with_free_threaded=True):
            with self.subTest(python=python.label):
                recording = record(["--off-cpu", "--", python.executable,
                                    python_workload("gil_contention.py"), "--seconds", "1"],
                                   self.tmp)
                self.assertRecorded(recording)
                stacks = recording.stacks
                off_cpu = time_under(stacks, "[off-cpu]", "contend")
                gil_wait = time_under(stacks, "[off-cpu]", "contend", "[gil wait]")
                self.assertGreater(off_cpu, 0, summarize(stacks))
                # Time runnable, in the run queue, is the machine's load (other
                # programs, other tests): judged is the time they slept.
                runqueue = time_under(stacks, "[off-cpu]", "contend", "[runqueue]")
                if python.free_threaded:
                    # No GIL: the threads run side by side and never wait for one.
                    self.assertEqual(gil_wait, 0, summarize(stacks))
                elif python.major == 2:
                    # 2.7's GIL is a semaphore that wakes its waiters to race
                    # for it: on 2 cores half their off-CPU time is spent
                    # runnable, in the run queue. Of the time they sleep, most
                    # is waiting for the GIL.
                    self.assertGreater(gil_wait, 0.8 * (off_cpu - runqueue), summarize(stacks))
                else:
                    self.assertGreater(gil_wait, 0.5 * (off_cpu - runqueue), summarize(stacks))

    def test_idle_counts_sleeping_time_as_samples(self):
        rate = 97
        recording = record(["--idle", "-r", str(rate), "--", DEBIAN_PYTHON,
                            python_workload("offcpu_mix.py"), "--seconds", "3"], self.tmp)
        self.assertRecorded(recording)
        truth = json.loads(recording.stdout.strip().splitlines()[-1])
        stacks = recording.stacks
        # Its wall clock in nap counts the sleep and, on a busy machine, the
        # wait for a CPU once woken: [sleep] and [runqueue].
        napping = sum(count for frames, count in stacks.items()
                      if any(frame.startswith("nap (") for frame in frames)
                      and frames[-1] in ("[sleep]", "[runqueue]"))
        expected = truth["nap_wall_s"] * rate
        self.assertAlmostEqual(napping, expected, delta=0.2 * expected, msg=summarize(stacks))
        self.assertFalse(any(frames[0] == "[on-cpu]" for frames in stacks))
        # The stack is the sleeper's, not the profiler's own BPF program.
        self.assertFalse(any("handle_switch" in frame for frames in stacks for frame in frames),
                         summarize(stacks))


if __name__ == "__main__":
    unittest.main()
