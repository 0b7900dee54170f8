"""`pystrobe stat` and `pystrobe top` against real programs.

Accuracy: the workload (accounting_workload.py) reads its own /proc/self/stat
and /proc/self/io as it ends, so pystrobe's counts, which cover the process's
whole life under `stat -- CMD`, are compared with the kernel's over the same
window: CPU time, read/write bytes and faults within 5%.

Verdicts: a pure-Python loop is cpu-bound, write+fsync is io-bound, touching
fresh mmap'd pages is memory-bound, four Python threads on this machine are
gil-bound, a program that sleeps is lock-or-sleep-bound.
"""

import json
import os
import subprocess
import sys
import time
import unittest

from pystrobe_testlib import HERE, BpfTestCase, run_pystrobe

PYTHON = "/usr/bin/python3.11"  # Debian's, with the python:gc__* USDT probes
WORKLOAD = os.path.join(HERE, "accounting_workload.py")
TOLERANCE = 0.05
REQUIRED_FIELDS = (
    "pid", "comm", "duration_seconds", "cpu_user_seconds", "cpu_system_seconds",
    "runqueue_seconds", "offcpu_io_seconds", "offcpu_sleep_seconds", "gil_wait_seconds",
    "read_bytes", "write_bytes", "read_calls", "write_calls", "block_io_bytes", "minor_faults",
    "major_faults", "context_switches", "gc_seconds", "threads", "verdict", "evidence")


class StatTest(BpfTestCase):

    def stat(self, mode, seconds=3):
        """Runs `pystrobe stat --json -- python3.11 accounting_workload.py MODE`;
        returns (report, the kernel's truth)."""
        truth_path = os.path.join(self.tmp, f"truth-{mode}.json")
        # A real disk for the io mode: not tmpfs.
        disk_dir = os.path.dirname(os.path.abspath(__file__))
        rc, out, err, _ = run_pystrobe(
            ["stat", "--json", "--", PYTHON, WORKLOAD, mode, str(seconds), truth_path, disk_dir],
            timeout=seconds + 60)
        self.assertEqual(rc, 0, f"stat {mode} exited {rc}: {err}")
        lines = [line for line in out.splitlines() if line.startswith("{")]
        self.assertEqual(len(lines), 1, f"stat {mode} printed: {out!r}")
        report = json.loads(lines[0])
        with open(truth_path) as f:
            truth = json.load(f)
        self.assertEqual(report["pid"], truth["pid"])
        return report, truth

    def assertNear(self, measured, truth, what, tolerance=TOLERANCE, floor=0):
        self.assertLessEqual(abs(measured - truth), max(tolerance * truth, floor),
                             f"{what}: pystrobe {measured}, kernel {truth}")

    def test_json_has_every_field_and_gil_wait_marked_unmeasured(self):
        report, _ = self.stat("sleep", seconds=1)
        for field in REQUIRED_FIELDS:
            self.assertIn(field, report)
        self.assertEqual(report["gil_wait_seconds"], 0)
        self.assertIs(report["gil_wait_measured"], False)
        self.assertTrue(report["exited"])
        self.assertEqual(report["comm"], "python3.11")

    def test_cpu_bound_loop_cpu_time_matches_proc_stat(self):
        report, truth = self.stat("cpu")
        self.assertEqual(report["verdict"], "cpu-bound", report["evidence"])
        cpu = report["cpu_user_seconds"] + report["cpu_system_seconds"]
        # /proc/PID/stat is in clock ticks (10 ms): allow one tick beyond 5%.
        self.assertNear(cpu, truth["utime"] + truth["stime"], "CPU seconds", floor=0.02)
        self.assertNear(report["cpu_user_seconds"], truth["utime"], "user seconds", floor=0.05)
        self.assertGreater(report["samples"], 0)
        self.assertTrue(any("spin" in frame for s in report["stacks"] for frame in s["frames"]),
                        report["stacks"])
        # Debian's python3.11 has GC probes, and collects at startup.
        self.assertTrue(report["gc_measured"])

    def test_read_write_bytes_match_proc_io(self):
        report, truth = self.stat("rw", seconds=2)
        self.assertNear(report["read_bytes"], truth["rchar"], "read bytes")
        self.assertNear(report["write_bytes"], truth["wchar"], "write bytes")
        self.assertGreater(report["read_calls"], 1000)
        cpu = report["cpu_user_seconds"] + report["cpu_system_seconds"]
        self.assertNear(cpu, truth["utime"] + truth["stime"], "CPU seconds", floor=0.02)

    def test_fsync_loop_is_io_bound(self):
        report, truth = self.stat("io")
        self.assertEqual(report["verdict"], "io-bound", report["evidence"])
        self.assertGreater(report["offcpu_io_seconds"], 0.2 * report["duration_seconds"])
        self.assertGreater(report["block_io_bytes"], 0)
        self.assertNear(report["write_bytes"], truth["wchar"], "write bytes")

    def test_touching_fresh_pages_is_memory_bound_and_faults_match(self):
        report, truth = self.stat("memory")
        self.assertEqual(report["verdict"], "memory-bound", report["evidence"])
        self.assertGreater(truth["minflt"], 100000)
        self.assertNear(report["minor_faults"], truth["minflt"], "minor faults")
        self.assertNear(report["major_faults"], truth["majflt"], "major faults", floor=5)
        self.assertNear(report["cpu_user_seconds"] + report["cpu_system_seconds"],
                        truth["utime"] + truth["stime"], "CPU seconds", floor=0.02)

    def test_four_python_threads_are_gil_bound(self):
        report, _ = self.stat("gil")
        self.assertEqual(report["verdict"], "gil-bound", report["evidence"])
        self.assertGreaterEqual(report["threads"], 5)

    def test_sleeper_is_lock_or_sleep_bound(self):
        report, _ = self.stat("sleep")
        self.assertEqual(report["verdict"], "lock-or-sleep-bound", report["evidence"])
        self.assertGreater(report["offcpu_sleep_seconds"], 0.8 * report["duration_seconds"])
        self.assertGreater(report["context_switches"], 20)

    def test_pid_mode_watches_a_running_process_for_the_duration(self):
        truth_path = os.path.join(self.tmp, "truth-pid.json")
        proc = subprocess.Popen([PYTHON, WORKLOAD, "cpu", "6", truth_path])
        try:
            time.sleep(0.5)
            rc, out, err, _ = run_pystrobe(["stat", "--json", "--pid", str(proc.pid), "-d", "2"],
                                           timeout=60)
            self.assertEqual(rc, 0, err)
            report = json.loads(out)
            self.assertEqual(report["pid"], proc.pid)
            self.assertFalse(report["exited"])
            self.assertAlmostEqual(report["duration_seconds"], 2, delta=0.5)
            self.assertEqual(report["verdict"], "cpu-bound", report["evidence"])
        finally:
            proc.kill()
            proc.wait()


class TopTest(BpfTestCase):

    def test_once_shows_a_busy_process_and_its_python_function(self):
        truth_path = os.path.join(self.tmp, "truth-top.json")
        proc = subprocess.Popen([PYTHON, WORKLOAD, "cpu", "10", truth_path])
        try:
            time.sleep(0.5)
            rc, out, err, _ = run_pystrobe(["top", "--once", "--sort", "cpu", "-n", "50"],
                                           timeout=60)
            self.assertEqual(rc, 0, err)
            rows = [line.split() for line in out.splitlines()]
            mine = [r for r in rows if r and r[0] == str(proc.pid)]
            self.assertTrue(mine, f"pid {proc.pid} not in:\n{out}")
            self.assertGreater(float(mine[0][2]), 20.0, out)  # USR%
            self.assertIn("spin (accounting_workload.py", out)

            rc, out, err, _ = run_pystrobe(["top", "--once", "--pid", str(proc.pid)], timeout=60)
            self.assertEqual(rc, 0, err)
            self.assertIn(f"pid {proc.pid}", out)
            self.assertTrue(any(line.split()[:1] == [str(proc.pid)] for line in out.splitlines()),
                            out)  # the main thread's tid is the pid
        finally:
            proc.kill()
            proc.wait()

    def test_bad_sort_key_is_a_usage_error(self):
        rc, _, err, _ = run_pystrobe(["top", "--sort", "bogus"], timeout=30)
        self.assertEqual(rc, 2, err)


if __name__ == "__main__":
    unittest.main()
