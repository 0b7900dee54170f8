"""Recorded CPU shares match what a program measured of itself.

cpu_split splits its CPU time between spin_alpha and spin_beta (70:30) and
reports each function's thread CPU seconds; the share of samples whose stack
contains each function must be within 5 points of that truth, whether pystrobe
starts the program (`-- CMD`) or attaches to it (`--pid`).
"""

import os
import threading
import unittest

from pystrobe_testlib import (KERNEL_SUFFIX, BpfTestCase, Workload, pids_with_frame,
                              process_cpu_seconds, read_split_json, record, stacks_of_pid,
                              summarize, total, workload)

ALPHA = "spin_alpha"
BETA = "spin_beta"
# High for many samples; odd, so samples do not fall in step with cpu_split's 2 ms chunks.
RATE = 997


class RecordCommandTest(BpfTestCase):

    def test_command_shares_match_thread_cpu_time(self):
        result_path = os.path.join(self.tmp, "split.json")
        # 2 s at 997 Hz: about 2000 samples on a quiet machine, where a 70%
        # share's standard error is 1 point, a fifth of the 5-point tolerance.
        recording = record(
            ["-r", str(RATE), "--", workload("cpu_split"), "--seconds", "2", "--alpha-percent",
             "70", "--json", result_path], self.tmp)
        self.assertRecorded(recording)
        with open(result_path) as f:
            truth = read_split_json(f.read())
        mine = stacks_of_pid(recording.stacks, truth["pid"])
        # One sample per 1/RATE s of CPU the process used, give or take.
        expected = truth["process_cpu_s"] * RATE
        self.assertTrue(0.8 * expected <= total(mine) <= 1.1 * expected,
                        f"{total(mine)} samples of cpu_split ({truth['pid']}) for "
                        f"{truth['process_cpu_s']:.2f} s of CPU at {RATE} Hz:\n"
                        f"{summarize(recording.stacks)}")
        self.assertEqual(pids_with_frame(recording.stacks, ALPHA), {truth["pid"]})
        self.assertShareNear(mine, ALPHA, truth["alpha_cpu_s"] / truth["process_cpu_s"])
        self.assertShareNear(mine, BETA, truth["beta_cpu_s"] / truth["process_cpu_s"])
        # The frame-pointer walk goes through the program's own frames, in order
        # (an interrupt may add kernel frames below them). A sample on the first
        # instruction of a leaf, before it pushed its frame pointer, skips its
        # caller: a frame-pointer walk cannot do better, so that is allowed in
        # one sample in a hundred, and the leaf must still be under main.
        exact = inexact = 0
        for stack in mine:
            user = tuple(f for f in stack if not f.endswith(KERNEL_SUFFIX))
            for leaf in (ALPHA, BETA):
                if leaf not in user:
                    continue
                self.assertEqual(user[-1], leaf, stack)
                self.assertIn("main", user, stack)
                if user[-3:] == ("main", "RunSplit", leaf):
                    exact += mine[stack]
                else:
                    inexact += mine[stack]
        self.assertLessEqual(inexact, 0.01 * (exact + inexact),
                             f"{inexact} of {exact + inexact} samples lack main;RunSplit;leaf:\n"
                             f"{summarize(recording.stacks)}")

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
        # Its CPU while sampled: from the recording's "recording" line for the
        # 3 s it then samples by its own clock, however long loading took
        # before and writing takes after.
        cpu = []
        ended = threading.Timer(3, lambda: cpu.append(process_cpu_seconds(cls.split.pid)))

        def sampling_started(_):
            cpu.append(process_cpu_seconds(cls.split.pid))
            ended.start()
        try:  # it splits its CPU from "ready" on
            cls.recording = record(["--pid", str(cls.split.pid), "-r", str(RATE), "-d", "3"],
                                   cls.tmp, when_recording=sampling_started)
            ended.join()
            cls.cpu_while_recording = cpu[1] - cpu[0]
        finally:
            ended.cancel()
            cls.truth = read_split_json(cls.split.stop())
            cls.bystander.stop()

    def test_pid_recording_succeeds(self):
        self.assertRecorded(self.recording)

    def test_pid_shares_match_thread_cpu_time(self):
        mine = stacks_of_pid(self.recording.stacks, self.split.pid)
        expected = self.cpu_while_recording * RATE
        self.assertGreater(total(mine), 0.6 * expected,
                           f"{total(mine)} samples for {self.cpu_while_recording:.2f} s of CPU "
                           f"while sampled (its own clock):\n{summarize(self.recording.stacks)}")
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
