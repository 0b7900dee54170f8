"""`pystrobe record` rejects bad command lines with exit status 2 and a message
that names the problem, before touching BPF (so these need no root)."""

import os
import subprocess
import tempfile
import unittest

from pystrobe_testlib import EXIT_USAGE, PYSTROBE_BIN, run_pystrobe


def unused_pid():
    """A pid no process has right now (above every live one, below pid_max)."""
    with open("/proc/sys/kernel/pid_max") as f:
        pid_max = int(f.read())
    live = {int(name) for name in os.listdir("/proc") if name.isdigit()}
    for candidate in range(pid_max - 1, 1, -1):
        if candidate not in live:
            return candidate
    raise AssertionError("no unused pid")


class RecordCliErrorTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        if not os.access(PYSTROBE_BIN, os.X_OK):
            raise AssertionError(f"pystrobe binary {PYSTROBE_BIN} is missing (set PYSTROBE_BIN)")

    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory(prefix="pystrobe-cli-")
        self.output = os.path.join(self._tmp.name, "never.svg")

    def tearDown(self):
        self._tmp.cleanup()

    def assertUsageError(self, args, *expected_words):
        rc, _, err, _ = run_pystrobe(["record", "-o", self.output] + args, timeout=20)
        where = f"`pystrobe record {' '.join(args)}` exited {rc}, stderr: {err!r}"
        self.assertEqual(rc, EXIT_USAGE, where)
        lowered = err.lower()
        for word in expected_words:
            self.assertIn(word.lower(), lowered, where)
        self.assertNotIn("libbpf", lowered, where)
        self.assertFalse(os.path.exists(self.output), f"{where}; yet it created {self.output}")
        return err

    def test_rate_zero_is_rejected(self):
        self.assertUsageError(["--rate", "0", "--all", "-d", "1"], "--rate", "1 to 1000")

    def test_rate_above_1000_is_rejected(self):
        self.assertUsageError(["-r", "1001", "--all", "-d", "1"], "1 to 1000", "1001")

    def test_rate_that_is_not_a_number_is_rejected(self):
        self.assertUsageError(["--rate", "fast", "--all", "-d", "1"], "rate", "fast")

    def test_summary_json_without_a_path_is_rejected(self):
        self.assertUsageError(["--all", "-d", "1", "--summary-json"], "--summary-json")

    def test_unknown_format_is_rejected(self):
        self.assertUsageError(["--format", "nope", "--all", "-d", "1"], "nope", "folded", "svg")

    def test_pid_of_missing_process_is_rejected(self):
        pid = unused_pid()
        self.assertUsageError(["--pid", str(pid), "-d", "1"], str(pid))

    def test_unknown_option_is_rejected(self):
        self.assertUsageError(["--frobnicate", "--all", "-d", "1"], "--frobnicate")

    def test_two_kinds_of_target_are_rejected(self):
        self.assertUsageError(["--all", "--pid", str(os.getpid()), "-d", "1"], "target")

    def test_help_exits_zero_and_lists_options(self):
        proc = subprocess.run([PYSTROBE_BIN, "record", "--help"], capture_output=True, text=True,
                              timeout=20)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        for option in ("--pid", "--all", "--rate", "--duration", "--format", "--output",
                       "--threads"):
            self.assertIn(option, proc.stdout)


if __name__ == "__main__":
    unittest.main()
