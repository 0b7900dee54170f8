"""`pystrobe stat` and `pystrobe top` against real programs.

Accuracy: the workload (accounting_workload.py) reads its own /proc/self/stat
and /proc/self/io as it ends, so pystrobe's counts, which cover the process's
whole life under `stat -- CMD`, are compared with the kernel's over the same
window: CPU time, read/write bytes and faults within 5%.

Verdicts: a pure-Python loop is cpu-bound, write+fsync is io-bound, touching
fresh mmap'd pages is memory-bound, four Python threads on this machine are
gil-bound (their off-CPU time mostly measured GIL wait, on Debian's 3.11 and
the pyenv 3.12/3.13 that exist), a program that sleeps is lock-or-sleep-bound.
The stacks shown are those of the bounding resource (the fsync caller's).

Old interpreters (pyenv's 2.7, 3.6 and 3.7, named when absent): `stat` measures
their GIL wait and GC and names their Python functions; `top` names the
function a busy one runs.
"""

import json
import os
import re
import subprocess
import sys
import unittest

from accounting_workload import MEMORY_ROUND_BYTES, PAGE, RW_ROUND_CALLS
from pystrobe_testlib import (HERE, PYSTROBE_BIN, BpfTestCase, CpuClock, busy_loop_verdicts,
                              read_lines_until, run_pystrobe)
from python_testlib import installed_pythons, python_workload, skipped_pythons, PythonWorkload

PYTHON = "/usr/bin/python3.11"  # Debian's, with the python:gc__* USDT probes
# Other interpreters for the GIL tests, where installed (pyenv: shared libpython).
PYENV_PYTHONS = [f"/root/.pyenv/versions/{v}/bin/python3" for v in ("3.12.1", "3.13.0")]
WORKLOAD = os.path.join(HERE, "accounting_workload.py")
TOLERANCE = 0.05
REQUIRED_FIELDS = (
    "pid", "comm", "duration_seconds", "cpu_user_seconds", "cpu_system_seconds",
    "runqueue_seconds", "offcpu_io_seconds", "offcpu_sleep_seconds", "gil_wait_seconds",
    "read_bytes", "write_bytes", "read_calls", "write_calls", "block_io_bytes", "minor_faults",
    "major_faults", "context_switches", "gc_seconds", "threads", "verdict", "evidence")


# daemon/accounting/verdict.h's kMemorySystemShare.
MEMORY_SYSTEM_SHARE = 0.4


def verdicts_given_the_run_queue(verdict, truth):
    """The verdicts stat may give a program whose bottleneck is `verdict`: that
    one, or cpu-starved too where the machine's load kept it waiting for a CPU
    about as long as it ran, by the kernel's own count (/proc/self/schedstat of
    its one thread)."""
    if truth["runqueue_s"] <= 0.8 * truth["run_s"]:
        return {verdict}
    return {verdict, "cpu-starved"}


class StatTest(BpfTestCase):

    def stat(self, mode, seconds=3, python=PYTHON, options=()):
        """Runs `pystrobe stat --json -- python3.11 accounting_workload.py MODE`;
        returns (report, the kernel's truth)."""
        truth_path = os.path.join(self.tmp, f"truth-{mode}.json")
        # A real disk for the io mode: not tmpfs.
        disk_dir = os.path.dirname(os.path.abspath(__file__))
        rc, out, err, _ = run_pystrobe(
            ["stat", "--json", *options, "--", python, WORKLOAD, mode, str(seconds), truth_path,
             disk_dir],
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

    def test_json_has_every_field(self):
        report, _ = self.stat("sleep", seconds=1)
        for field in REQUIRED_FIELDS:
            self.assertIn(field, report)
        self.assertTrue(report["exited"])
        self.assertEqual(report["comm"], "python3.11")
        self.assertNotIn("syscalls", report)  # only with --syscalls

    def test_cpu_bound_loop_cpu_time_matches_proc_stat(self):
        report, truth = self.stat("cpu")
        self.assertIn(report["verdict"],
                      busy_loop_verdicts(truth["utime"] + truth["stime"], truth["wall"]),
                      (report["evidence"], truth))
        cpu = report["cpu_user_seconds"] + report["cpu_system_seconds"]
        # /proc/PID/stat is in clock ticks (10 ms): allow one tick beyond 5%.
        self.assertNear(cpu, truth["utime"] + truth["stime"], "CPU seconds", floor=0.02)
        self.assertNear(report["cpu_user_seconds"], truth["utime"], "user seconds", floor=0.05)
        self.assertGreater(report["samples"], 0)
        # A cpu-starved loop is shown where it waited: its [runqueue] stacks.
        self.assertEqual(report["stacks_kind"],
                         "off-CPU time ending in [runqueue]"
                         if report["verdict"] == "cpu-starved" else "on-CPU samples")
        self.assertTrue(any("spin" in frame for s in report["stacks"] for frame in s["frames"]),
                        report["stacks"])
        # Debian's python3.11 has GC probes, and collects at startup.
        self.assertTrue(report["gc_measured"])
        # One thread: nobody to wait for the GIL.
        self.assertTrue(report["gil_wait_measured"])
        self.assertLess(report["gil_wait_seconds"], 0.05, report)

    def test_gc_is_measured_for_every_interpreter_with_or_without_usdt_probes(self):
        # Debian's 3.11 has USDT probes in its executable; pyenv's have none and
        # keep the collector in libpython3.X.so, probed where discovery finds it.
        # 3.8's collector is split into compiler clones: not measured.
        pythons = [p for p in installed_pythons() if p.minor >= 9]
        self.assertTrue(any(p.pyenv_prefix for p in pythons), "no pyenv CPython 3.9+ installed")
        for python in pythons:
            with self.subTest(python=python.label):
                report, truth = self.stat("gc", seconds=2, python=python.executable)
                self.assertTrue(report["gc_measured"], report)
                self.assertGreater(report["gc_collections"], 0, report)
                # Discovery attaches at the first sample: the collections of the
                # first milliseconds may be missed; the interpreter's shutdown
                # collects a few more after the truth was written.
                self.assertLessEqual(report["gc_collections"], truth["gc_collections"] + 10)
                self.assertGreater(report["gc_collections"], 0.5 * truth["gc_collections"])
                self.assertGreater(report["gc_seconds"], 0)

    def test_read_write_bytes_and_calls_match_proc_io(self):
        report, truth = self.stat("rw", seconds=2)
        self.assertNear(report["read_bytes"], truth["rchar"], "read bytes")
        self.assertNear(report["write_bytes"], truth["wchar"], "write bytes")
        self.assertNear(report["read_calls"], truth["syscr"], "read calls")
        self.assertNear(report["write_calls"], truth["syscw"], "write calls")
        self.assertGreaterEqual(report["read_calls"], RW_ROUND_CALLS)
        cpu = report["cpu_user_seconds"] + report["cpu_system_seconds"]
        self.assertNear(cpu, truth["utime"] + truth["stime"], "CPU seconds", floor=0.02)

    def test_syscalls_option_traces_each_read_and_write(self):
        report, truth = self.stat("rw", seconds=1, options=["--syscalls"])
        sys_counts = report["syscalls"]
        self.assertNear(sys_counts["read_bytes"], truth["rchar"], "traced read bytes")
        self.assertNear(sys_counts["write_bytes"], truth["wchar"], "traced write bytes")
        self.assertNear(sys_counts["read_calls"], truth["syscr"], "traced read calls")
        self.assertGreater(sys_counts["read_seconds"], 0)

    def test_fsync_loop_is_io_bound_and_its_top_stack_is_the_fsync_caller(self):
        report, truth = self.stat("io")
        self.assertIn(report["verdict"], verdicts_given_the_run_queue("io-bound", truth),
                      (report["evidence"], truth))
        # A share of the time it did not spend waiting for a CPU (a busy
        # machine leaves it runnable for much of the run).
        self.assertGreater(report["offcpu_io_seconds"],
                           0.2 * (report["duration_seconds"] - report["runqueue_seconds"]),
                           report["evidence"])
        self.assertGreater(report["block_io_bytes"], 0)
        self.assertNear(report["write_bytes"], truth["wchar"], "write bytes")
        if report["verdict"] == "cpu-starved":
            return  # its stacks are where it waited for a CPU
        self.assertEqual(report["stacks_kind"], "off-CPU time ending in [io wait]")
        self.assertTrue(report["stacks"], report)
        top = report["stacks"][0]
        self.assertEqual(top["frames"][-1], "[io wait]")
        self.assertTrue(any(f.startswith("io (accounting_workload.py:") for f in top["frames"]),
                        top["frames"])
        self.assertGreater(top["seconds"], 0.1)

    def test_touching_fresh_pages_is_memory_bound_and_faults_match(self):
        report, truth = self.stat("memory")
        # stat calls faulting memory-bound when the kernel has at least
        # MEMORY_SYSTEM_SHARE of the CPU time. Judged by the workload's own clocks:
        # beside a busy neighbour its Python loop's share grew to 61% in one run.
        system = truth["stime"] / (truth["utime"] + truth["stime"])
        bounds = set()
        if system >= MEMORY_SYSTEM_SHARE - 0.05:
            bounds |= verdicts_given_the_run_queue("memory-bound", truth)
        if system < MEMORY_SYSTEM_SHARE + 0.05:
            bounds |= verdicts_given_the_run_queue("cpu-bound", truth)
        self.assertIn(report["verdict"], bounds, (report["evidence"], truth))
        # At least one of the workload's rounds, each a fault per page.
        self.assertGreaterEqual(truth["minflt"], MEMORY_ROUND_BYTES // PAGE)
        self.assertNear(report["minor_faults"], truth["minflt"], "minor faults")
        self.assertNear(report["major_faults"], truth["majflt"], "major faults", floor=5)
        self.assertNear(report["cpu_user_seconds"] + report["cpu_system_seconds"],
                        truth["utime"] + truth["stime"], "CPU seconds", floor=0.02)

    def test_four_python_threads_mostly_wait_for_the_gil_and_are_gil_bound(self):
        pythons = [PYTHON] + [p for p in PYENV_PYTHONS if os.access(p, os.X_OK)]
        skipped = [p for p in PYENV_PYTHONS if p not in pythons]
        if skipped:
            print(f"GIL wait not tested on missing {skipped}", file=sys.stderr)
        for python in pythons:
            with self.subTest(python=python):
                report, _ = self.stat("gil", python=python)
                self.assertEqual(report["verdict"], "gil-bound", report["evidence"])
                self.assertGreaterEqual(report["threads"], 5)
                self.assertTrue(report["gil_wait_measured"])
                # The main thread sleeps in join() for the whole window; the
                # four spinners' off-CPU time is the rest, mostly GIL wait.
                offcpu = (report["offcpu_sleep_seconds"] + report["offcpu_io_seconds"] +
                          report["runqueue_seconds"])
                spinners_offcpu = offcpu - report["duration_seconds"]
                # Less the time they waited for a CPU (the machine's load).
                self.assertGreater(report["gil_wait_seconds"],
                                   0.6 * (spinners_offcpu - report["runqueue_seconds"]), report)
                self.assertEqual(report["stacks_kind"], "off-CPU time ending in [gil wait]")
                self.assertTrue(any(f.startswith("spin (accounting_workload.py:")
                                    for f in report["stacks"][0]["frames"]), report["stacks"])

    def test_sleeper_is_lock_or_sleep_bound(self):
        report, truth = self.stat("sleep")
        self.assertIn(report["verdict"], verdicts_given_the_run_queue("lock-or-sleep-bound", truth),
                      (report["evidence"], truth))
        # Of the time it did not spend waiting for a CPU (the machine's load).
        self.assertGreater(report["offcpu_sleep_seconds"],
                           0.8 * (report["duration_seconds"] - report["runqueue_seconds"]),
                           report["evidence"])
        self.assertGreater(report["context_switches"], 20)
        self.assertLess(report["gil_wait_seconds"], 0.05, report)
        if report["verdict"] == "cpu-starved":
            return  # its stacks are where it waited for a CPU
        self.assertEqual(report["stacks_kind"], "off-CPU time ending in [sleep]")
        self.assertTrue(any(f.startswith("sleep (accounting_workload.py:")
                            for s in report["stacks"] for f in s["frames"]), report["stacks"])

    def test_pid_mode_watches_a_running_process_for_the_duration(self):
        truth_path = os.path.join(self.tmp, "truth-pid.json")
        # Until killed: it must outlive stat's start, however long that takes.
        proc = subprocess.Popen([PYTHON, WORKLOAD, "cpu", "600", truth_path],
                                stdout=subprocess.PIPE, text=True)
        try:
            read_lines_until(proc.stdout, "^ready$")
            clock = CpuClock(proc.pid)
            rc, out, err, _ = run_pystrobe(["stat", "--json", "--pid", str(proc.pid), "-d", "2"],
                                           timeout=60)
            clock.stop()
            self.assertEqual(rc, 0, err)
            report = json.loads(out)
            self.assertEqual(report["pid"], proc.pid)
            self.assertFalse(report["exited"])
            self.assertAlmostEqual(report["duration_seconds"], 2, delta=0.5)
            self.assertIn(report["verdict"], busy_loop_verdicts(clock.cpu, clock.wall),
                          (report["evidence"], clock.cpu, clock.wall))
        finally:
            proc.kill()
            proc.wait()
            proc.stdout.close()

    def test_exits_with_the_commands_status_as_time_does(self):
        rc, out, err, _ = run_pystrobe(["stat", "--json", "--", "sh", "-c", "exit 3"],
                                       timeout=60)
        self.assertEqual(rc, 3, err)
        report = json.loads(out)  # the report is still printed
        self.assertTrue(report["exited"])

        rc, out, err, _ = run_pystrobe(["stat", "--", "sh", "-c", "kill -TERM $$"], timeout=60)
        self.assertEqual(rc, 128 + 15, err)
        self.assertIn("verdict", out.lower())

        rc, _, err, _ = run_pystrobe(["stat", "--", "true"], timeout=60)
        self.assertEqual(rc, 0, err)


    def test_a_process_without_an_executable_is_measured_or_named_never_a_crash(self):
        # kthreadd has no /proc/2/exe. It runs only when a kernel thread is
        # made, which a busy machine may do in the half second: then stat
        # measures it as any process; otherwise it says that nothing was
        # counted for process 2 and exits 1.
        rc, out, err, _ = run_pystrobe(["stat", "--pid", "2", "-d", "0.5"], timeout=60)
        self.assertNotIn("terminate called", err)
        if rc == 0:
            self.assertIn("verdict", out.lower(), err)
        else:
            self.assertEqual(rc, 1, err)
            # (After the line that says the window started.)
            self.assertRegex(err, r"(?m)^pystrobe stat: .*process 2", err)


class TopTest(BpfTestCase):

    def test_shows_a_busy_process_and_its_python_function(self):
        truth_path = os.path.join(self.tmp, "truth-top.json")
        proc = subprocess.Popen([PYTHON, WORKLOAD, "cpu", "600", truth_path],
                                stdout=subprocess.PIPE, text=True)
        try:
            read_lines_until(proc.stdout, "^ready$")
            clock = CpuClock(proc.pid)
            rc, out, err, _ = run_pystrobe(["top", "--once", "--sort", "cpu", "-n", "50"],
                                           timeout=60)
            clock.stop()
            self.assertEqual(rc, 0, err)
            rows = [line.split() for line in out.splitlines()]
            mine = [r for r in rows if r and r[0] == str(proc.pid)]
            self.assertTrue(mine, f"pid {proc.pid} not in:\n{out}")
            # USR% over top's interval, against half the share of a CPU it had
            # meanwhile by its own clock (which the machine's load decides).
            self.assertGreater(float(mine[0][2]), 50 * clock.cpu / clock.wall,
                               (out, "own clock", clock.cpu, clock.wall))
            # Its hottest Python function, once pystrobe has found its
            # interpreter: a loaded machine may take longer than one interval
            # for that, so screens are read until one names it.
            top = subprocess.Popen([PYSTROBE_BIN, "top", "--sort", "cpu", "-n", "50"],
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            try:
                read_lines_until(top.stdout, r"spin \(accounting_workload\.py", timeout=60)
            finally:
                top.terminate()
                top.wait()
                top.stdout.close()

            rc, out, err, _ = run_pystrobe(["top", "--once", "--pid", str(proc.pid)], timeout=60)
            self.assertEqual(rc, 0, err)
            self.assertIn(f"pid {proc.pid}", out)
            self.assertIn("BIO/s", out)
            self.assertIn("GC%", out)
            self.assertTrue(any(line.split()[:1] == [str(proc.pid)] for line in out.splitlines()),
                            out)  # the main thread's tid is the pid
        finally:
            proc.kill()
            proc.wait()
            proc.stdout.close()

    def test_a_free_threaded_cpython_shows_no_gil_wait_figure(self):
        python = next((p for p in installed_pythons(with_free_threaded=True) if p.free_threaded),
                      None)
        if python is None:
            self.skipTest("no free-threaded CPython (scripts/test-pythons.sh builds one)")
        proc = subprocess.Popen([python.executable, "-c",
                                 "print('ready', flush=True)\nwhile True: pass"],
                                stdout=subprocess.PIPE, text=True)
        try:
            read_lines_until(proc.stdout, "^ready$")
            rc, out, err, _ = run_pystrobe(["top", "--once", "--pid", str(proc.pid)], timeout=60)
            self.assertEqual(rc, 0, err)
            lines = out.splitlines()
            # (The header starts with a terminal escape: a word of its own.)
            header = next([w for w in line.split() if not w.startswith("\x1b")]
                          for line in lines if "GIL%" in line)
            rows = [line.split() for line in lines if line.split()[:1] == [str(proc.pid)]]
            self.assertTrue(rows, out)
            # No GIL to wait for: a dash, not 0.0.
            self.assertEqual(rows[0][header.index("GIL%")], "-", out)
        finally:
            proc.kill()
            proc.wait()
            proc.stdout.close()

    def test_bad_sort_key_is_a_usage_error(self):
        rc, _, err, _ = run_pystrobe(["top", "--sort", "bogus"], timeout=30)
        self.assertEqual(rc, 2, err)


if __name__ == "__main__":
    unittest.main()


class OldCPythonTest(BpfTestCase):
    """stat and top on the interpreters without _PyRuntime's modern layout."""

    def old_pythons(self):
        for missing in skipped_pythons():
            if any(v in missing for v in ("2.7", "3.6", "3.7")):
                print(f"SKIPPED CPython for {self.id()}: {missing}", file=sys.stderr)
        pythons = [p for p in installed_pythons(with_old=True) if p.old]
        if not pythons:
            self.skipTest("none of pyenv's 2.7, 3.6, 3.7 is installed")
        return pythons

    def test_stat_measures_gil_wait_and_gc_and_names_the_python_function(self):
        for python in self.old_pythons():
            with self.subTest(python=python.label):
                rc, out, err, _ = run_pystrobe(
                    ["stat", "--json", "--", python.executable,
                     python_workload("gil_contention.py"), "--seconds", "2"], timeout=60)
                self.assertEqual(rc, 0, err)
                report = json.loads(out)
                self.assertTrue(report["gil_wait_measured"], report)
                # On a machine so busy that the threads waited longer for a CPU
                # than the run lasted, the run queue held them more than the
                # GIL: some GIL wait is all that can be asked.
                starved = report["runqueue_seconds"] > report["duration_seconds"]
                self.assertGreater(report["gil_wait_seconds"], 0 if starved else 0.1, report)
                if python.major == 3:
                    self.assertEqual(report["verdict"], "gil-bound", report["evidence"])
                # 2.7's semaphore GIL wakes every waiter: as much run queue as
                # GIL wait, so its verdict may be cpu-bound (README).
                frames = [f for stack in report["stacks"] for f in stack["frames"]]
                self.assertTrue(any(f.startswith("contend (") and "gil_contention.py:" in f
                                    for f in frames), report["stacks"])

                # Collections for a second: a libpython's GC probes attach
                # when discovery finds the interpreter, after the program
                # has started (README), and 200 collections can be over by then.
                rc, out, err, _ = run_pystrobe(
                    ["stat", "--json", "--", python.executable, "-c",
                     "import gc, time\nend = time.time() + 1\n"
                     "while time.time() < end: gc.collect()"], timeout=60)
                self.assertEqual(rc, 0, err)
                report = json.loads(out)
                self.assertTrue(report["gc_measured"], report)
                self.assertGreater(report["gc_seconds"], 0, report)

    def test_top_names_the_function_a_busy_old_interpreter_runs(self):
        for python in self.old_pythons():
            with self.subTest(python=python.label):
                workload = PythonWorkload([python.executable, python_workload("cpu_split3.py"),
                                           "--seconds", "0"])
                hot = r"(burn|split_\w+) \(\S*cpu_split3\.py:\d+\)"
                try:  # it burns from "ready" on
                    # One interval of a starved workload can hold no sample of
                    # it (beside stress-ng one got 0.18 s of CPU in top's 1 s,
                    # 82% of it in the run queue): ask for another, up to five.
                    for _ in range(5):
                        rc, out, err, _ = run_pystrobe(
                            ["top", "--no-daemon", "--once", "--pid", str(workload.pid)],
                            timeout=60)
                        self.assertEqual(rc, 0, err)
                        self.assertIn(f"pid {workload.pid}", out)
                        if re.search(hot, out):
                            break
                finally:
                    workload.kill()
                self.assertRegex(out, hot)
