"""Memory end to end, against a Python program whose memory is known
(memory_workload.py reads its own /proc/self/status): `stat`'s peak equals
the program's VmHWM and its timeline shows the growth and the fall; the
daemon's resident series match /proc/PID/status; `top` shows RSS. OOM kills:
a program grows past the limit of a memory cgroup the test makes (v2
memory.max or v1 memory.limit_in_bytes, whichever this machine has) and
`stat`, `record` and the daemon say the kernel's OOM killer took it."""

import json
import os
import re
import subprocess
import sys
import tempfile
import time

from pystrobe_testlib import HERE, PYSTROBE_BIN, BpfTestCase, run_pystrobe
from test_daemon import Daemon, metric, remove_cgroup

PYTHON = "/usr/bin/python3.11"
WORKLOAD = os.path.join(HERE, "memory_workload.py")
TOLERANCE = 0.05
MIB = 1 << 20


def proc_status(pid):
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if value.strip().endswith("kB"):
                out[key] = int(value.split()[0]) * 1024
    return out


OOM_LIMIT = 150 * MIB


def memory_cgroup(name):
    """Makes a cgroup with a memory limit of OOM_LIMIT; returns (its directory,
    its procs file). v2 where the memory controller is there, else v1."""
    for root in ("/sys/fs/cgroup", "/sys/fs/cgroup/unified"):
        controllers = os.path.join(root, "cgroup.controllers")
        if not os.path.exists(controllers):
            continue
        with open(controllers) as f:
            available = f.read().split()
        if "memory" in available:
            path = os.path.join(root, name)
            os.makedirs(path, exist_ok=True)
            with open(os.path.join(path, "memory.max"), "w") as f:
                f.write(str(OOM_LIMIT))
            with open(os.path.join(path, "memory.swap.max"), "w") as f:
                f.write("0")
            return path
    path = os.path.join("/sys/fs/cgroup/memory", name)
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, "memory.limit_in_bytes"), "w") as f:
        f.write(str(OOM_LIMIT))
    return path


def in_cgroup(path, argv):
    """A shell command line that joins the cgroup, then execs argv."""
    quoted = " ".join(f"'{a}'" for a in argv)
    return ["sh", "-c", f"echo $$ > {path}/cgroup.procs && exec {quoted}"]


class MemoryStatTest(BpfTestCase):

    def stat(self, *workload_args, options=()):
        truth_path = os.path.join(self.tmp, "truth.json")
        rc, out, err, _ = run_pystrobe(
            ["stat", "--json", *options, "--", PYTHON, WORKLOAD, workload_args[0], truth_path,
             *map(str, workload_args[1:])], timeout=120)
        lines = [line for line in out.splitlines() if line.startswith("{")]
        self.assertEqual(len(lines), 1, f"stat printed {out!r}, stderr {err}")
        with open(truth_path) as f:
            truth = json.load(f)
        return rc, json.loads(lines[0]), truth

    def test_peak_rss_is_the_programs_own_vmhwm_and_the_timeline_shows_the_fall(self):
        # Three runs: the peak is passed and memory freed before the end.
        for run in range(3):
            rc, report, truth = self.stat("grow", 240, 80, 1)
            self.assertEqual(rc, 0)
            self.assertEqual(report["pid"], truth["pid"])
            peak = report["peak_rss_bytes"]
            self.assertLessEqual(abs(peak - truth["VmHWM"]), TOLERANCE * truth["VmHWM"],
                                 f"run {run}: peak {peak}, VmHWM {truth['VmHWM']}")
            self.assertGreater(peak, 320 * MIB)
            # The peak came before the program freed its memory.
            self.assertGreater(report["peak_rss_seconds"], 0)
            self.assertLess(report["peak_rss_seconds"], report["duration_seconds"] - 0.5,
                            report["memory_timeline"])
            timeline = report["memory_timeline"]
            self.assertGreaterEqual(len(timeline), 10)
            highest = max(p["rss_bytes"] for p in timeline)
            self.assertGreater(highest, 0.9 * peak)
            # The end: what the program read of itself as it ended.
            self.assertLessEqual(abs(timeline[-1]["rss_bytes"] - truth["VmRSS"]),
                                 max(TOLERANCE * truth["VmRSS"], 2 * MIB), timeline[-1])
            self.assertLessEqual(abs(report["rss_anon_bytes"] - truth["RssAnon"]),
                                 max(TOLERANCE * truth["RssAnon"], 2 * MIB))
            self.assertFalse(report["oom_killed"])

    def test_text_report_names_the_peak(self):
        truth_path = os.path.join(self.tmp, "truth-text.json")
        rc, out, err, _ = run_pystrobe(
            ["stat", "--", PYTHON, WORKLOAD, "grow", truth_path, "64", "16", "0.2"], timeout=60)
        self.assertEqual(rc, 0, err)
        self.assertRegex(out, r"memory: resident .* \(anon .*, file .*, shmem .*\), swap")
        self.assertRegex(out, r"peak resident [\d.]+ MiB, first seen at [\d.]+ s")
        self.assertIn("timeline (resident):", out)


class OomTest(BpfTestCase):

    def setUp(self):
        self.cgroup = memory_cgroup(f"pystrobe-oom-{os.getpid()}-{self.id().split('.')[-1]}")
        self.addCleanup(remove_cgroup, self.cgroup)
        self.truth_path = os.path.join(self.tmp, "oom-truth.json")

    def oom_program(self):
        return in_cgroup(self.cgroup, [PYTHON, WORKLOAD, "oom", self.truth_path, "16"])

    def test_stat_says_oom_killed_and_still_prints_its_figures(self):
        rc, out, err, _ = run_pystrobe(["stat", "--json", "--", *self.oom_program()],
                                       timeout=120)
        self.assertEqual(rc, 137, err)  # the command's own status: SIGKILL
        report = json.loads([line for line in out.splitlines() if line.startswith("{")][0])
        with open(self.truth_path) as f:
            truth = json.load(f)
        self.assertEqual(report["pid"], truth["pid"])
        self.assertTrue(report["oom_killed"], report)
        self.assertTrue(report["exited"])
        # It died at the limit: its peak is near it, never far above.
        self.assertGreater(report["peak_rss_bytes"], 0.6 * OOM_LIMIT)
        self.assertLess(report["peak_rss_bytes"], 1.1 * OOM_LIMIT)
        self.assertGreater(len(report["memory_timeline"]), 0)

    def test_record_prints_the_oom_kill(self):
        output = os.path.join(self.tmp, "oom.folded")
        rc, out, err, _ = run_pystrobe(["record", "-f", "folded", "-o", output, "--",
                                        *self.oom_program()], timeout=120)
        with open(self.truth_path) as f:
            pid = json.load(f)["pid"]
        self.assertRegex(err, rf"python3\.11 \({pid}\) was killed by the kernel's OOM killer: "
                              r"resident [\d.]+ MiB")

    def test_daemon_counts_the_kill_and_writes_a_report(self):
        tmp = tempfile.mkdtemp(dir=self.tmp)
        daemon = Daemon(tmp)
        self.addCleanup(daemon.stop)
        child = subprocess.Popen(self.oom_program())
        child.wait(timeout=60)
        self.assertEqual(child.returncode, -9)  # SIGKILL, from the OOM killer
        with open(self.truth_path) as f:
            pid = json.load(f)["pid"]
        deadline = time.time() + 15
        kills = None
        while time.time() < deadline:
            kills = metric(daemon.metrics(), "pystrobe_oom_kills_total", comm="python3.11")
            reports = [p for p in os.listdir(daemon.profile_dir) if p.startswith("oom-")]
            if kills and reports:
                break
            time.sleep(0.5)
        self.assertGreaterEqual(kills or 0, 1)
        report_path = [p for p in os.listdir(daemon.profile_dir)
                       if p.startswith("oom-") and p.endswith(f"-{pid}.json")]
        self.assertEqual(len(report_path), 1, os.listdir(daemon.profile_dir))
        with open(os.path.join(daemon.profile_dir, report_path[0])) as f:
            report = json.load(f)
        self.assertEqual(report["comm"], "python3.11")
        self.assertGreater(report["rss_bytes"], 0.6 * OOM_LIMIT)


class MemoryDaemonTest(BpfTestCase):

    def test_resident_series_match_proc_status(self):
        tmp = tempfile.mkdtemp(dir=self.tmp)
        daemon = Daemon(tmp)
        self.addCleanup(daemon.stop)
        # Holds 200 MiB of anonymous memory, then spins so it is among the
        # busiest processes (those get their own series).
        program = ("import time\nheld = b'x' * (200 << 20)\nend = time.time() + 60\n"
                   "while time.time() < end: pass\n")
        child = subprocess.Popen([PYTHON, "-c", program])
        self.addCleanup(child.kill)
        deadline = time.time() + 30
        checked = 0
        while time.time() < deadline and checked < 3:
            time.sleep(1.5)
            text = daemon.metrics()
            anon = metric(text, "pystrobe_process_resident_bytes", pid=child.pid, memory="anon")
            if anon is None or anon < 150 * MIB:
                continue
            truth = proc_status(child.pid)
            for kind, key in (("anon", "RssAnon"), ("file", "RssFile")):
                value = metric(text, "pystrobe_process_resident_bytes", pid=child.pid,
                               memory=kind)
                self.assertLessEqual(abs(value - truth[key]),
                                     max(TOLERANCE * truth[key], 1 * MIB),
                                     f"{kind}: daemon {value}, /proc {truth[key]}")
            peak = metric(text, "pystrobe_process_resident_peak_bytes", pid=child.pid)
            self.assertLessEqual(abs(peak - truth["VmHWM"]), TOLERANCE * truth["VmHWM"])
            self.assertEqual(metric(text, "pystrobe_process_swap_bytes", pid=child.pid),
                             truth.get("VmSwap", 0))
            checked += 1
        self.assertEqual(checked, 3, f"no resident series for pid {child.pid}")


class MemoryTopTest(BpfTestCase):

    def test_top_shows_rss_and_its_growth(self):
        program = ("import time\nheld = []\nend = time.time() + 20\n"
                   "while time.time() < end:\n    held.append(b'x' * (8 << 20)); time.sleep(0.05)\n")
        child = subprocess.Popen([PYTHON, "-c", program])
        self.addCleanup(child.kill)
        time.sleep(0.5)
        # Screens every second; the growth needs two of them.
        top = subprocess.Popen([PYSTROBE_BIN, "top", "--no-daemon", "-i", "1", "-s", "memory"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(4.5)
        top.terminate()
        out, err = top.communicate(timeout=30)
        self.assertIn("RSS/s", out, err)
        last_screen = out.split("pystrobe top")[-1]
        row = next((line for line in last_screen.splitlines()
                    if re.match(rf"\s*{child.pid}\s", line)), None)
        self.assertIsNotNone(row, out)
        # 8 MiB every 50 ms or so: RSS grows by tens of MB a second.
        growth = re.search(r"\+([\d.]+)([kMG]?)\s*$", row)
        self.assertIsNotNone(growth, row)
        scale = {"": 1, "k": 1e3, "M": 1e6, "G": 1e9}[growth.group(2)]
        self.assertGreater(float(growth.group(1)) * scale, 20e6, row)


if __name__ == "__main__":
    import unittest
    unittest.main()
