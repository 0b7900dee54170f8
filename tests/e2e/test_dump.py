"""`pystrobe dump --pid PID [--json]` on live CPython processes.

For every installed CPython (Debian's 3.11 always, each pyenv 2.7 and 3.6 to 3.13
that exists; the missing ones are named), tests/workloads/python/e2e/dump_threads.py
parks five threads in known places (one spinning with the GIL, the others
sleeping or blocked) and reports their native thread ids, names and frames;
the dump must show every thread with its tid, its name, its GIL and run state,
and the expected functions and lines, innermost first, in both outputs. Also:
the errors for a missing pid, a process without Python, no permission, and
processes that exit while being dumped.

Needs root (process_vm_readv on another user's process). Without root these
tests fail, unless PYSTROBE_SKIP_BPF_TESTS=1 is set, which skips them.
"""

import json
import os
import re
import subprocess
import sys
import time
import unittest

from pystrobe_testlib import run_pystrobe, wait_for, PYSTROBE_BIN
from python_testlib import (PythonWorkload, installed_pythons, python_workload,
                            report_skipped_pythons, PYENV_ROOT)

WORKLOAD = python_workload("dump_threads.py")
EXIT_FAILURE = 1
EXIT_USAGE = 2


def require_root(test_case):
    if os.geteuid() == 0:
        if not os.access(PYSTROBE_BIN, os.X_OK):
            raise AssertionError(f"pystrobe binary {PYSTROBE_BIN} is missing (set PYSTROBE_BIN)")
        return
    reason = f"not root (euid {os.geteuid()}); pystrobe dump needs CAP_SYS_PTRACE"
    if os.environ.get("PYSTROBE_SKIP_BPF_TESTS") == "1":
        # Worded so that ctest's SKIP_REGULAR_EXPRESSION ("SKIPPED BPF test")
        # shows the test as skipped: dump needs root as the BPF tests do.
        message = (f"SKIPPED BPF test {test_case.__module__}.{test_case.__name__}: {reason} "
                   f"(PYSTROBE_SKIP_BPF_TESTS=1)")
        print(message, file=sys.stderr)
        raise unittest.SkipTest(message)
    raise AssertionError(f"{reason}; set PYSTROBE_SKIP_BPF_TESTS=1 to skip instead")


def dump(pid, *flags):
    return run_pystrobe(["dump", "--pid", str(pid)] + list(flags), timeout=30)


def mismatches(expected, dumped, minor):
    """What differs between the workload's report and one `dump --json` object."""
    problems = []
    by_tid = {t["tid"]: t for t in dumped["threads"]}
    want_tids = {t["tid"] for t in expected["threads"]}
    if set(by_tid) != want_tids:
        problems.append(f"tids {sorted(by_tid, key=str)} != {sorted(want_tids)}")
    for want in expected["threads"]:
        got = by_tid.get(want["tid"])
        if got is None:
            continue
        role = want["role"]
        if got["name"] != want["name"]:
            problems.append(f"{role}: name {got['name']!r}")
        frames = got["frames"]
        if len(frames) < len(want["frames"]) + 1:
            problems.append(f"{role}: only {len(frames)} frames")
            continue
        for i, (name, lines) in enumerate(want["frames"]):
            frame = frames[i]
            if frame["name"] != name or (lines is not None and frame["line"] not in lines):
                problems.append(f"{role}: frame {i} is {frame['name']}:{frame['line']}, "
                                f"want {name}:{lines}")
            if lines is None:  # a frame of the threading module
                if not frame["filename"].endswith("/threading.py") or frame["line"] is None:
                    problems.append(f"{role}: frame {i} at {frame['filename']}:{frame['line']}")
            elif frame["filename"] != WORKLOAD:
                problems.append(f"{role}: frame {i} file {frame['filename']}")
        bottom = frames[-1]
        if role == "mainthread":
            if bottom["name"] != "<module>" or bottom["filename"] != WORKLOAD:
                problems.append(f"main thread's bottom frame {bottom}")
        elif not (bottom["name"].endswith("_bootstrap")
                  and bottom["filename"].endswith("threading.py")):
            problems.append(f"{role}: bottom frame {bottom}")
        spinner = role == "spinner"
        # A free-threaded CPython has no GIL: null, for every thread.
        if got["holds_gil"] != (None if dumped.get("free_threaded") else spinner):
            problems.append(f"{role}: holds_gil {got['holds_gil']}")
        if got["state"] != ("running" if spinner else "idle"):
            problems.append(f"{role}: state {got['state']} ({got.get('proc_state')})")
        if got["truncated"]:
            problems.append(f"{role}: truncated")
    return problems


def text_mismatches(expected, text, free_threaded=False):
    """What differs between the workload's report and one plain `dump`."""
    problems = []
    for want in expected["threads"]:
        role = want["role"]
        header = re.search(rf'^Thread {want["tid"]} "{want["name"]}" \((\w+)(, holds the GIL)?\)$',
                           text, re.M)
        if header is None:
            problems.append(f"{role}: no header")
            continue
        spinner = role == "spinner"
        if header.group(1) != ("running" if spinner else "idle"):
            problems.append(f"{role}: state {header.group(1)}")
        if bool(header.group(2)) != (spinner and not free_threaded):
            problems.append(f"{role}: holds the GIL {bool(header.group(2))}")
        block = text[header.end():].split("\n\n")[0].splitlines()
        for i, (name, lines) in enumerate(want["frames"]):
            where = (r"\S*/threading\.py:\d+" if lines is None else
                     rf"{re.escape(WORKLOAD)}:({'|'.join(map(str, lines))})")
            if i + 1 >= len(block) or not re.match(rf"^    {re.escape(name)} \({where}\)$",
                                                   block[i + 1]):
                problems.append(f"{role}: frame {i} is not {name} at {where}")
    return problems


class DumpEveryInterpreterTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        require_root(cls)
        report_skipped_pythons("test_dump")

    def check_python(self, python):
        workload = PythonWorkload([python.executable, WORKLOAD])
        try:
            expected = workload.info
            self.assertEqual(len(expected["threads"]), 5, expected)
            # Threads report just before they park, and the spinner lets go of
            # the GIL now and then (2.7 every 100 bytecodes): retry until both
            # outputs caught every thread where it parks.
            deadline = time.monotonic() + 30  # a liveness limit
            while True:
                rc, out, err, _ = dump(workload.pid, "--json")
                self.assertEqual(rc, 0, f"dump --json of {python}: {err}")
                dumped = json.loads(out)
                problems = mismatches(expected, dumped, python.minor)
                rc, text, err, _ = dump(workload.pid)
                self.assertEqual(rc, 0, f"dump of {python}: {err}")
                text_problems = text_mismatches(expected, text, python.free_threaded)
                if not (problems or text_problems) or time.monotonic() > deadline:
                    break
                time.sleep(0.2)
            self.assertEqual(problems, [], f"{python}: dump --json:\n{out}")
            self.assertEqual(dumped["pid"], workload.pid)
            self.assertRegex(dumped["python_version"],
                             rf"^{python.major}\.{python.minor}\.\d+$")
            self.assertEqual(out.count("\n"), 1, "--json prints one line")

            self.assertIn(f"Process {workload.pid}: ", text)
            self.assertIn(f"Python v{dumped['python_version']}", text)
            self.assertEqual(dumped["free_threaded"], python.free_threaded)
            if python.free_threaded:
                self.assertIn("free-threaded, no GIL", text)
            self.assertEqual(text_problems, [], f"{python}: dump:\n{text}")
            print(f"dump OK: {python}", file=sys.stderr)
        finally:
            workload.kill()

    def test_every_thread_with_tid_name_gil_state_and_frames(self):
        pythons = installed_pythons(with_old=True, with_free_threaded=True)
        self.assertTrue(pythons, "no CPython on this machine")
        for python in pythons:
            with self.subTest(python=python.label):
                self.check_python(python)


def wait_until_asleep_in(pid, executable):
    """Waits until `pid` has exec'd `executable` and sleeps (its program is
    past its start), rather than for a fixed time."""
    def probe():
        try:
            exe = os.readlink(f"/proc/{pid}/exe")
            with open(f"/proc/{pid}/stat") as f:
                state = f.read().rpartition(")")[2].split()[0]
        except OSError as error:
            return False, str(error)
        return os.path.basename(exe) == executable and state == "S", (exe, state)
    wait_for(f"pid {pid} asleep in {executable}", probe)


class DumpErrorsTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        require_root(cls)

    def test_no_such_pid_is_a_usage_error(self):
        # A pid that is certainly free: one of ours that has been reaped.
        proc = subprocess.Popen(["/bin/true"])
        proc.wait()
        rc, out, err, _ = dump(proc.pid)
        self.assertEqual(rc, EXIT_USAGE, err)
        self.assertIn(f"no process with pid {proc.pid}", err)
        self.assertEqual(out, "")

    def test_process_without_python_is_named(self):
        proc = subprocess.Popen(["/bin/sleep", "30"])
        try:
            wait_until_asleep_in(proc.pid, "sleep")
            rc, out, err, _ = dump(proc.pid)
            self.assertEqual(rc, EXIT_FAILURE, err)
            self.assertIn(f"process {proc.pid}", err)
            self.assertIn("is not a CPython process", err)
            self.assertEqual(out, "")
        finally:
            proc.kill()
            proc.wait()

    def test_bad_flags_are_usage_errors(self):
        for args in (["dump"], ["dump", "--pid"], ["dump", "--pid", "x"], ["dump", "--bogus"]):
            rc, _, err, _ = run_pystrobe(args)
            self.assertEqual(rc, EXIT_USAGE, f"{args}: {err}")
            self.assertTrue(err.startswith("pystrobe dump: "), err)
        rc, out, _, _ = run_pystrobe(["dump", "--help"])
        self.assertEqual(rc, 0)
        self.assertIn("--json", out)

    def test_without_ptrace_permission_says_root_is_needed(self):
        proc = subprocess.Popen(["/usr/bin/python3.11", "-c", "import time; time.sleep(30)"])
        try:
            wait_until_asleep_in(proc.pid, "python3.11")
            result = subprocess.run(
                ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", PYSTROBE_BIN,
                 "dump", "--pid", str(proc.pid)], capture_output=True, text=True, timeout=30)
            self.assertEqual(result.returncode, EXIT_FAILURE, result.stderr)
            self.assertIn("permission denied", result.stderr)
            self.assertIn("root", result.stderr)
            self.assertIn("CAP_SYS_PTRACE", result.stderr)
        finally:
            proc.kill()
            proc.wait()

    def test_processes_exiting_while_dumped_give_clear_errors(self):
        """Short-lived interpreters with threads, dumped as they exit: every
        run ends with a dump or a clear message, never a crash."""
        code = ("import threading, time\n"
                "def f():\n    time.sleep(0.05)\n"
                "ts = [threading.Thread(target=f) for _ in range(4)]\n"
                "[t.start() for t in ts]\n"
                "print('go', flush=True)\n"
                "time.sleep(0.04)\n")
        outcomes = {}
        for i in range(25):
            proc = subprocess.Popen(["/usr/bin/python3.11", "-c", code], stdout=subprocess.PIPE,
                                    text=True)
            proc.stdout.readline()
            time.sleep(0.002 * (i % 20))
            rc, out, err, _ = dump(proc.pid)
            proc.wait()
            proc.stdout.close()
            self.assertIn(rc, (0, EXIT_FAILURE, EXIT_USAGE), f"dump crashed: rc {rc}: {err}")
            if rc == 0:
                self.assertIn(f"Process {proc.pid}", out)
            else:
                self.assertRegex(err, r"^pystrobe dump: .*(exited|no process|not a CPython)",
                                 err)
                self.assertEqual(err.count("\n"), 1, err)
            outcomes[rc] = outcomes.get(rc, 0) + 1
        print(f"dump of exiting processes: exit codes {outcomes}", file=sys.stderr)


if __name__ == "__main__":
    unittest.main()
