"""What a user gets on disk: thread frames with --threads, an SVG flame graph
that shows the expected frames once a browser has run its script, and a
default-named file even when the recording is ended with Ctrl-C."""

import glob
import os
import signal
import subprocess
import sys
import tempfile
import time
import unittest

from pystrobe_testlib import (CHROMIUM_RENDER, PYSTROBE_BIN, THREAD_FRAME, BpfTestCase, Workload,
                              process_cpu_seconds, read_lines_until, read_split_json, record,
                              sample_floor, stacks_of_pid, summarize, total, wait_for, workload)


class RecordThreadsTest(BpfTestCase):

    def test_threads_adds_a_frame_with_the_working_threads_tid(self):
        result_path = os.path.join(self.tmp, "split.json")
        recording = record(
            ["--threads", "-r", "199", "--", workload("cpu_split"), "--worker-thread",
             "--seconds", "1.5", "--json", result_path], self.tmp)
        self.assertRecorded(recording)
        with open(result_path) as f:
            truth = read_split_json(f.read())
        self.assertNotEqual(truth["tid"], truth["pid"])
        mine = stacks_of_pid(recording.stacks, truth["pid"])
        working = {s: c for s, c in mine.items() if "spin_alpha" in s or "spin_beta" in s}
        cpu = truth["alpha_cpu_s"] + truth["beta_cpu_s"]
        self.assertGreaterEqual(total(working), max(10, sample_floor(cpu, 199)),
                                f"{cpu:.2f} s of CPU\n{summarize(mine)}")
        for stack in working:
            self.assertGreaterEqual(len(stack), 3, stack)
            self.assertEqual(stack[1], f"split-worker tid={truth['tid']}", stack)
        # Every stack has a thread frame right under the process frame.
        for stack in mine:
            self.assertRegex(stack[1], THREAD_FRAME, stack)

    def test_without_threads_there_is_no_thread_frame(self):
        recording = record(["-r", "199", "--", workload("short_lived"), "--seconds", "0.5"],
                           self.tmp, name="nothreads")
        self.assertRecorded(recording)
        frames = {f for s in recording.stacks for f in s}
        self.assertFalse([f for f in frames if THREAD_FRAME.match(f)], sorted(frames))


class RecordSvgTest(BpfTestCase):

    def test_svg_shows_process_and_function_frames_in_a_browser(self):
        result_path = os.path.join(self.tmp, "split.json")
        recording = record(["-r", "299", "--", workload("cpu_split"), "--seconds", "1.5",
                            "--json", result_path], self.tmp, fmt="svg")
        self.assertRecorded(recording)
        with open(result_path) as f:
            truth = read_split_json(f.read())
        with open(recording.output_path, encoding="utf-8") as f:
            head = f.read(4096)
        self.assertIn("<svg", head)
        names = [f"cpu_split ({truth['pid']})", "spin_alpha", "spin_beta"]
        render = subprocess.run([sys.executable, CHROMIUM_RENDER, recording.output_path] + names,
                                capture_output=True, text=True, timeout=120)
        self.assertEqual(render.returncode, 0,
                         f"chromium_render.py {recording.output_path} {names} exited "
                         f"{render.returncode}:\n{render.stdout}\n{render.stderr}")


class RecordInterruptTest(BpfTestCase):

    def test_sigint_ends_recording_and_writes_default_named_svg(self):
        cwd = tempfile.mkdtemp(dir=self.tmp)
        # Something to sample even on an idle host.
        busy = subprocess.Popen(["/usr/bin/python3.11", "-c",
                                 "import time\nend = time.time() + 10\n"
                                 "while time.time() < end: pass"])
        self.addCleanup(lambda: (busy.kill(), busy.wait()))
        proc = subprocess.Popen([PYSTROBE_BIN, "record", "--all"], cwd=cwd,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            # Sampling has started (its handlers are in place) once it says so.
            head = read_lines_until(proc.stderr, r"^pystrobe: recording ")
            # Something recorded: the busy program has had CPU since.
            before = process_cpu_seconds(busy.pid)
            wait_for("the busy program to run 0.3 s of CPU while recorded", lambda: (
                process_cpu_seconds(busy.pid) - before >= 0.3,
                process_cpu_seconds(busy.pid) - before))
            self.assertIsNone(proc.poll(), "pystrobe record --all ended by itself")
            proc.send_signal(signal.SIGINT)
            sent = time.monotonic()
            _, err = proc.communicate(timeout=30)
            err = "".join(head) + err
            took = time.monotonic() - sent
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
        self.assertEqual(proc.returncode, 0, err)
        # Ended by SIGINT (within communicate's liveness limit); how fast is
        # for tests/bench, so only printed.
        print(f"SIGINT ended the recording in {took:.2f} s", file=sys.stderr)
        files = glob.glob(os.path.join(cwd, "pystrobe-*"))
        self.assertEqual(len(files), 1, f"files: {files}; stderr: {err}")
        name = os.path.basename(files[0])
        self.assertRegex(name, r"^pystrobe-all-\d{8}-\d{6}\.svg$")
        self.assertIn(f"pystrobe: wrote {os.path.realpath(files[0])}", err)
        self.assertRegex(err, r"(?m)^pystrobe: [1-9]\d* samples")
        with open(files[0], encoding="utf-8") as f:
            content = f.read()
        self.assertIn("<svg", content)
        self.assertTrue(content.rstrip().endswith("</svg>"), "the SVG is cut short")

    def test_default_name_of_a_command_recording_names_the_command(self):
        cwd = tempfile.mkdtemp(dir=self.tmp)
        rc = subprocess.run([PYSTROBE_BIN, "record", "-f", "folded", "--",
                             workload("short_lived"), "--seconds", "0.3"],
                            cwd=cwd, capture_output=True, text=True, timeout=30)
        self.assertEqual(rc.returncode, 0, rc.stderr)
        files = os.listdir(cwd)
        self.assertEqual(len(files), 1, files)
        self.assertRegex(files[0], r"^pystrobe-short_lived-\d{8}-\d{6}\.folded$")


if __name__ == "__main__":
    unittest.main()
