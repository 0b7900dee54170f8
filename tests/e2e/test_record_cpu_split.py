"""Recorded CPU shares match what a program measured of itself.

cpu_split splits its CPU time between spin_alpha and spin_beta (70:30) and
reports each function's thread CPU seconds; the share of samples whose stack
contains each function must be within 5 points of that truth, whether pystrobe
starts the program (`-- CMD`) or attaches to it (`--pid`).
"""

import os
import time
import unittest

from pystrobe_testlib import (KERNEL_SUFFIX, BpfTestCase, Workload, pids_with_frame,
                              read_split_json, record, stacks_of_pid, summarize, total, workload)

ALPHA = "spin_alpha"
BETA = "spin_beta"


class RecordCommandTest(BpfTestCase):

    def test_command_shares_match_thread_cpu_time(self):
        result_path = os.path.join(self.tmp, "split.json")
        recording = record(
            ["-r", "499", "--", workload("cpu_split"), "--seconds", "4", "--alpha-percent", "70",
             "--json", result_path], self.tmp)
        self.assertRecorded(recording)
        with open(result_path) as f:
            truth = read_split_json(f.read())
        mine = stacks_of_pid(recording.stacks, truth["pid"])
        # 4 s at 499 Hz is about 2000 samples; a quarter of that means stacks went missing.
        self.assertGreater(total(mine), 500,
                           f"too few samples of cpu_split ({truth['pid']}):\n"
                           f"{summarize(recording.stacks)}")
        self.assertEqual(pids_with_frame(recording.stacks, ALPHA), {truth["pid"]})
        self.assertShareNear(mine, ALPHA, truth["alpha_cpu_s"] / truth["process_cpu_s"])
        self.assertShareNear(mine, BETA, truth["beta_cpu_s"] / truth["process_cpu_s"])
        # The frame-pointer walk goes through the program's own frames, in order
        # (an interrupt may add kernel frames below them).
        for stack in mine:
            user = tuple(f for f in stack if not f.endswith(KERNEL_SUFFIX))
            for leaf in (ALPHA, BETA):
                if leaf in user:
                    self.assertEqual(user[-3:], ("main", "RunSplit", leaf), stack)

    def test_command_summary_counts_every_sample_written(self):
        recording = record(["-r", "199", "--", workload("short_lived"), "--seconds", "0.5"],
                           self.tmp, name="summary")
        self.assertRecorded(recording)
        reported = recording.reported_samples()
        self.assertIsNotNone(reported, recording.describe())
        self.assertEqual(total(recording.stacks), reported, recording.describe())
        self.assertRegex(recording.stderr, r"(?m)^pystrobe: lost \d+ ")
        self.assertRegex(recording.stderr, r"stack reads failed: \d+ kernel, \d+ user")


class RecordPidTest(BpfTestCase):
    """One --pid recording of cpu_split while a bystander burns CPU beside it."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.bystander = Workload("bystander", ["--seconds", "0"])
        cls.split = Workload("cpu_split", ["--seconds", "0", "--alpha-percent", "70"])
        try:
            time.sleep(0.2)
            cls.recording = record(["--pid", str(cls.split.pid), "-r", "499", "-d", "3"], cls.tmp)
        finally:
            cls.truth = read_split_json(cls.split.stop())
            cls.bystander.stop()

    def test_pid_recording_succeeds(self):
        self.assertRecorded(self.recording)

    def test_pid_shares_match_thread_cpu_time(self):
        mine = stacks_of_pid(self.recording.stacks, self.split.pid)
        self.assertGreater(total(mine), 400,
                           f"too few samples of cpu_split:\n{summarize(self.recording.stacks)}")
        process_cpu = self.truth["process_cpu_s"]
        self.assertShareNear(mine, ALPHA, self.truth["alpha_cpu_s"] / process_cpu)
        self.assertShareNear(mine, BETA, self.truth["beta_cpu_s"] / process_cpu)

    def test_pid_recording_contains_only_the_target(self):
        others = {s: c for s, c in self.recording.stacks.items() if s[0] !=
                  f"cpu_split ({self.split.pid})"}
        self.assertEqual(others, {}, f"stacks of other processes:\n{summarize(others)}")
        self.assertNotIn("bystander_spin", {f for s in self.recording.stacks for f in s})


if __name__ == "__main__":
    unittest.main()
