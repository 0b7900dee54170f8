"""`pystrobe record --all` sees every process: busy ones by their own function
names, a syscall-heavy one with its kernel frames, and one that exited before
the recording ended, still named."""

import os
import signal
import time
import unittest

from pystrobe_testlib import (KERNEL_SUFFIX, BpfTestCase, Workload, pids_with_frame,
                              process_pid, record, sample_floor, share, stacks_of_pid, summarize,
                              total)

RATE = 199
DURATION = 3.5  # seconds the --all recording samples at least


SYSCALL_ENTRY = {"entry_SYSCALL_64_after_hwframe_[k]", "entry_SYSCALL_64_[k]", "do_syscall_64_[k]"}


def kernel_frames(stack):
    return [f for f in stack if f.endswith(KERNEL_SUFFIX)]


class RecordAllTest(BpfTestCase):
    """One --all recording while cpu_split, bystander and syscall_storm run, and
    short_lived starts once the recording says it samples and burns a second of
    CPU; the recording ends (Ctrl-C) once short_lived has exited and it has
    sampled for 3.5 s."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.split = Workload("cpu_split", ["--seconds", "0"])
        cls.bystander = Workload("bystander", ["--seconds", "0"])
        # Until stopped: it must outlive the recording, however long loading takes.
        cls.storm = Workload("syscall_storm", ["--seconds", "600"])
        cls.short_lived = None
        busy = (cls.split, cls.bystander, cls.storm)
        cpu_before, cpu_after = {}, {}

        def while_recording(proc):
            # The CPU each busy program has while sampled is what its samples
            # stand for, however busy the machine was, however long loading
            # the BPF programs took before and writing the profile takes after.
            started = time.monotonic()
            cpu_before.update((w.pid, w.cpu_seconds()) for w in busy)
            # A second of its own CPU: on a busy machine it lives as long as
            # it takes to get it, as pystrobe's reader does to see it.
            cls.short_lived = Workload("short_lived", ["--seconds", "1", "--cpu"])
            cls.short_lived.wait(120)
            # Sampled for a while after it exited, and 3.5 s in all at least.
            time.sleep(max(0.5, DURATION - (time.monotonic() - started)))
            cpu_after.update((w.pid, w.cpu_seconds()) for w in busy)
            proc.send_signal(signal.SIGINT)

        try:
            # -d 300: a liveness limit; Ctrl-C ends it.
            cls.recording = record(["--all", "-r", str(RATE), "-d", "300"], cls.tmp,
                                   timeout=300, when_recording=while_recording)
            cls.cpu_recorded = {w.pid: cpu_after[w.pid] - cpu_before[w.pid] for w in busy}
        finally:
            for w in (cls.split, cls.bystander, cls.storm, cls.short_lived):
                if w is not None:
                    w.kill()

    def setUp(self):
        self.assertRecorded(self.recording)

    def test_all_shows_every_busy_process_by_name(self):
        stacks = self.recording.stacks
        self.assertEqual(pids_with_frame(stacks, "spin_alpha"), {self.split.pid},
                         summarize(stacks))
        self.assertEqual(pids_with_frame(stacks, "bystander_spin"), {self.bystander.pid},
                         summarize(stacks))
        self.assertTrue(any(s[0] == f"cpu_split ({self.split.pid})" for s in stacks))
        self.assertTrue(any(s[0] == f"bystander ({self.bystander.pid})" for s in stacks))
        # Each busy program is sampled for the CPU it had; most of its samples are named.
        for pid in (self.split.pid, self.bystander.pid):
            mine = stacks_of_pid(stacks, pid)
            self.assertGreaterEqual(total(mine), sample_floor(self.cpu_recorded[pid], RATE),
                                    f"{self.cpu_recorded[pid]:.2f} s of CPU\n{summarize(mine)}")
        self.assertGreater(share(stacks_of_pid(stacks, self.bystander.pid), "bystander_spin"),
                           0.9, summarize(stacks_of_pid(stacks, self.bystander.pid)))

    def test_all_counts_samples_of_many_processes(self):
        summary = self.recording.summary
        self.assertEqual(summary["samples"], total(self.recording.stacks), summary)
        # "processes" counts pids: a process that execs while recorded shows
        # under both its names ("sh (7)", then "sleep (7)").
        pids = {process_pid(s) for s in self.recording.stacks}
        self.assertGreaterEqual(len(pids), 4)
        self.assertGreaterEqual(summary["processes"], len(pids), summary)

    def test_syscall_heavy_program_shows_kernel_frames_below_its_own(self):
        mine = stacks_of_pid(self.recording.stacks, self.storm.pid)
        # syscall_storm_read issues the syscall itself, so it is the user frame
        # right above the kernel's.
        in_read = {s: c for s, c in mine.items() if "syscall_storm_read" in s}
        self.assertGreaterEqual(total(in_read),
                                max(5, sample_floor(self.cpu_recorded[self.storm.pid], RATE, 0.25)),
                                summarize(mine))
        with_kernel = {s: c for s, c in in_read.items() if kernel_frames(s)}
        # It spends most of its time inside read(2): most samples end in the kernel.
        self.assertGreater(total(with_kernel) / total(in_read), 0.5, summarize(mine))
        for stack in with_kernel:
            first_kernel = stack.index(kernel_frames(stack)[0])
            self.assertEqual(stack[first_kernel - 1], "syscall_storm_read", stack)
            self.assertTrue(all(f.endswith(KERNEL_SUFFIX) for f in stack[first_kernel:]),
                            f"user frame below a kernel frame: {stack}")
        # Inside the syscall the whole user stack is there. (An interrupt on the
        # first instruction of syscall_storm_read, before it pushed its frame
        # pointer, legitimately skips its caller; those samples are not syscalls.)
        syscalls = {s: c for s, c in with_kernel.items() if SYSCALL_ENTRY & set(s)}
        self.assertGreater(total(syscalls) / total(with_kernel), 0.8, summarize(mine))
        for stack in syscalls:
            self.assertIn("syscall_storm_reader", stack, summarize(mine))
        frames = {f for s in with_kernel for f in s}
        self.assertTrue(frames & {"ksys_read_[k]", "vfs_read_[k]", "read_zero_[k]"},
                        f"no read(2) path frame among {sorted(frames)}")

    def test_program_that_exited_mid_recording_is_still_symbolized(self):
        mine = stacks_of_pid(self.recording.stacks, self.short_lived.pid)
        # It burned for about a second on a machine shared with three other busy
        # programs (and whatever else runs): its samples follow the CPU it had.
        cpu = self.short_lived.cpu_seconds()
        self.assertGreaterEqual(total(mine), max(3, sample_floor(cpu, RATE)),
                                f"{cpu:.2f} s of CPU\n{summarize(self.recording.stacks)}")
        self.assertTrue(any(s[0] == f"short_lived ({self.short_lived.pid})" for s in mine),
                        summarize(mine))
        self.assertGreater(share(mine, "short_lived_burner"), 0.8, summarize(mine))


class RecordPidUntilExitTest(BpfTestCase):

    def test_pid_recording_ends_when_target_exits_and_names_its_frames(self):
        # Asleep until the recording samples, then it burns for 2.5 s: its CPU
        # from then on is what its samples stand for, however long loading took.
        target = Workload("short_lived", ["--seconds", "2.5", "--go-on-sigusr1"])
        try:
            recording = record(["--pid", str(target.pid), "-r", str(RATE), "-d", "120"], self.tmp,
                               timeout=180,
                               when_recording=lambda _: os.kill(target.pid, signal.SIGUSR1))
        finally:
            target.kill()
        cpu = target.cpu_seconds()
        self.assertRecorded(recording)
        # Ended by its target, long before its 120 s (a liveness limit; the
        # time it took is in the message, not judged).
        self.assertLess(recording.elapsed, 60,
                        f"the recording did not end with its only target: {recording.describe()}")
        mine = stacks_of_pid(recording.stacks, target.pid)
        self.assertGreaterEqual(total(mine), max(3, sample_floor(cpu, RATE)),
                                f"{cpu:.2f} s of CPU (its own clock)\n"
                                f"{summarize(recording.stacks)}")
        self.assertGreater(share(mine, "short_lived_burner"), 0.8, summarize(mine))


if __name__ == "__main__":
    unittest.main()
