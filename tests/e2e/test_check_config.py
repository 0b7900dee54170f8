"""`pystrobe daemon --check-config FILE` validates a configuration and exits:
0 and "FILE: OK" for a good file, 1 and every error as FILE:LINE:COLUMN: KEY:
MESSAGE for a bad one, 2 when the file cannot be read. Needs no root."""

import os
import tempfile
import textwrap
import unittest

from pystrobe_testlib import EXIT_USAGE, PYSTROBE_BIN, REPO, run_pystrobe

SHIPPED_CONFIG = os.path.join(REPO, "config", "pystrobe.yaml")


class CheckConfigTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        if not os.access(PYSTROBE_BIN, os.X_OK):
            raise AssertionError(f"pystrobe binary {PYSTROBE_BIN} is missing (set PYSTROBE_BIN)")

    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory(prefix="pystrobe-check-config-")

    def tearDown(self):
        self._tmp.cleanup()

    def write(self, name, text):
        path = os.path.join(self._tmp.name, name)
        with open(path, "w") as f:
            f.write(textwrap.dedent(text))
        return path

    def check(self, *args):
        rc, out, err, _ = run_pystrobe(["daemon", "--check-config", *args], timeout=20)
        self.assertNotIn("libbpf", err.lower(), "checking a file must not touch BPF")
        return rc, out, err

    def test_shipped_configuration_is_ok(self):
        rc, out, err = self.check(SHIPPED_CONFIG)
        self.assertEqual(rc, 0, err)
        self.assertEqual(out, f"{SHIPPED_CONFIG}: OK\n")
        self.assertEqual(err, "")

    def test_every_error_is_named_with_its_line_and_column(self):
        path = self.write("pystrobe.yaml", """\
            rate: 0
            targets:
              all: true
            python:
              max_depth: 1000
            exporters:
              retention:
                max_age: 7 days
                max_total_size: 1 GB
              prometheus:
                listen: 9464
              pushh:
                url: http://x
            labels:
              team-name: web
            """)
        rc, out, err = self.check(path)
        self.assertEqual(rc, 1, err)
        self.assertEqual(out, "")
        lines = err.splitlines()
        self.assertEqual(lines, [
            f"{path}:1:7: rate: 0 is out of range (1 to 1000)",
            f"{path}:5:14: python.max_depth: 1000 is out of range (1 to 384)",
            f"{path}:8:14: exporters.retention.max_age: \"7 days\" is not a duration "
            "(use e.g. 90m, 24h, 7d)",
            f"{path}:9:21: exporters.retention.max_total_size: \"1 GB\" is not a size "
            "(use e.g. 500MiB, 1GiB)",
            f"{path}:11:13: exporters.prometheus.listen: \"9464\" is not a HOST:PORT address "
            "(no port)",
            f"{path}:12:3: exporters.pushh: unknown key (expected one of: profile_dir, "
            "retention, push, otlp, prometheus)",
            f"{path}:15:3: labels.team-name: \"team-name\" is not a valid Prometheus label name "
            "([a-zA-Z_][a-zA-Z0-9_]*)",
        ])

    def test_yaml_syntax_error_is_reported_with_its_position(self):
        path = self.write("broken.yaml", "rate: 19\ntargets:\n  pids: [1, 2\n")
        rc, _, err = self.check(path)
        self.assertEqual(rc, 1, err)
        self.assertRegex(err, rf"^{path}:\d+:\d+: not valid YAML: ")

    def test_missing_file_exits_2(self):
        missing = os.path.join(self._tmp.name, "absent.yaml")
        rc, out, err = self.check(missing)
        self.assertEqual(rc, EXIT_USAGE, err)
        self.assertIn(missing, err)
        self.assertIn("No such file", err)

    def test_directory_instead_of_file_exits_2(self):
        rc, _, err = self.check(self._tmp.name)
        self.assertEqual(rc, EXIT_USAGE, err)

    def test_overrides_are_validated_too(self):
        rc, _, err = self.check(SHIPPED_CONFIG, "--rate", "0", "--prometheus-listen=localhost")
        self.assertEqual(rc, 1, err)
        self.assertIn("--rate: 0 is out of range (1 to 1000)", err)
        self.assertIn("--prometheus-listen: \"localhost\" is not a HOST:PORT address", err)
        rc, out, err = self.check(SHIPPED_CONFIG, "--window", "5m", "--profile-dir", "/srv/p")
        self.assertEqual(rc, 0, err)
        self.assertIn("OK", out)

    def test_check_config_without_a_file_or_with_a_bad_flag_is_a_usage_error(self):
        for args in (["daemon", "--check-config"], ["daemon", "--check-config", SHIPPED_CONFIG,
                                                    "--frobnicate"]):
            rc, _, err, _ = run_pystrobe(args, timeout=20)
            self.assertEqual(rc, EXIT_USAGE, f"{args}: {err}")
            self.assertIn("pystrobe daemon:", err)


if __name__ == "__main__":
    unittest.main()
