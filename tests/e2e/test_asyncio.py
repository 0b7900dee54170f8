"""`pystrobe dump --asyncio` and `record --asyncio` on live asyncio services.

For every installed CPython (Debian's 3.11 always, each pyenv 3.8 to 3.13 that
exists; the missing ones are named), with the C _asyncio tasks and with the
pure-Python fallback, tests/workloads/python/e2e/asyncio_service.py runs five
tasks io-0..io-4 that wait in serve > handle_request > query_db (an
asyncio.sleep) and one task cpu-0 burning CPU in batch_loop > crunch, all
awaited by a "main" task through a TaskGroup (3.11+) or gather. The dump must
list the six tasks by name, each with its coroutine chain (outermost first,
with the lines the workload reports) and "main" among the tasks awaiting it.

`record --asyncio` on the same service must put the samples of crunch under
`[task cpu-0]`, then the frames of the task awaiting it (main), then
batch_loop > crunch, with none of the event loop's frames.

`record --asyncio --off-cpu` must also charge each io task the wall time it
spends suspended, under `[off-cpu]`, ending in `[await]`: each io task about
the whole run (it waits ~95% of the time), cpu-0 much less.

Needs root (process_vm_readv on another process; BPF for record).
"""

import json
import re
import sys
import unittest

from pystrobe_testlib import (BpfTestCase, parse_folded, printed_cpu_seconds, record,
                              sample_floor, stacks_of_pid)
from python_testlib import (PythonWorkload, installed_pythons, python_workload,
                            report_skipped_pythons)
from test_dump import dump, require_root

WORKLOAD = python_workload("asyncio_service.py")
IO_CHAIN = ["serve", "handle_request", "query_db"]


class DumpAsyncioTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        require_root(cls)
        report_skipped_pythons(cls.__name__)

    def check_service(self, python, pure_python):
        argv = [python.executable, WORKLOAD, "--seconds", "60"]
        if pure_python:
            argv.append("--pure-python")
        workload = PythonWorkload(argv)
        try:
            self.assertEqual(workload.info["c_tasks"], not pure_python)
            lines = workload.info["lines"]
            code, out, err, _ = dump(workload.pid, "--asyncio", "--json")
            self.assertEqual(code, 0, err)
            report = json.loads(out)
            self.assertIn("threads", report)
            tasks = {t["name"]: t for t in report["asyncio_tasks"]}
            for name in [f"io-{i}" for i in range(5)] + ["cpu-0", "main"]:
                self.assertIn(name, tasks, f"tasks: {sorted(tasks)}")
            self.assertEqual(report["asyncio_unreadable"], 0)
            for i in range(5):
                task = tasks[f"io-{i}"]
                self.assertEqual(task["state"], "pending", task)
                names = [f["name"] for f in task["stack"]]
                self.assertEqual(names[:3], IO_CHAIN, task)
                self.assertEqual([f["line"] for f in task["stack"][:3]],
                                 [lines[n] for n in IO_CHAIN], task)
                self.assertTrue(task["stack"][0]["filename"].endswith("asyncio_service.py"))
                self.assertEqual(task["awaited_by"], ["main"], task)
            cpu = tasks["cpu-0"]
            self.assertEqual(cpu["stack"][0]["name"], "batch_loop", cpu)
            self.assertLessEqual(len(cpu["stack"]), 3, cpu)  # no loop machinery
            if cpu["state"] == "running":
                # It is between batches, or in crunch.
                self.assertIn(cpu["stack"][-1]["name"], ("batch_loop", "crunch"), cpu)
            self.assertEqual(cpu["awaited_by"], ["main"], cpu)
            self.assertEqual(tasks["main"]["stack"][0]["name"], "main")
            self.assertEqual(tasks["main"]["awaited_by"], [])
            # The text rendering lists them too.
            code, text, err, _ = dump(workload.pid, "--asyncio")
            self.assertEqual(code, 0, err)
            self.assertIn('Task "io-3" (pending), awaited by "main"', text)
            self.assertIn('Task "cpu-0"', text)
        finally:
            workload.kill()

    def test_lists_every_task_with_its_chain_and_awaiters_c_tasks(self):
        for python in installed_pythons():
            with self.subTest(python=python.label):
                self.check_service(python, pure_python=False)

    def test_lists_every_task_with_its_chain_and_awaiters_pure_python_tasks(self):
        for python in installed_pythons():
            with self.subTest(python=python.label):
                self.check_service(python, pure_python=True)

    def test_tasks_changing_under_the_reader_never_break_it(self):
        churn = python_workload("asyncio_churn.py")
        for python in installed_pythons():
            with self.subTest(python=python.label):
                workload = PythonWorkload([python.executable, churn, "--seconds", "60"])
                try:
                    unreadable = 0
                    for _ in range(15):
                        code, out, err, _ = dump(workload.pid, "--asyncio", "--json")
                        self.assertEqual(code, 0, err)
                        report = json.loads(out)
                        names = [t["name"] for t in report["asyncio_tasks"]]
                        self.assertIn('ünï "q" 名', names)
                        steady = next(t for t in report["asyncio_tasks"]
                                      if t["name"] == 'ünï "q" 名')
                        self.assertEqual(steady["stack"][0]["name"], "steady_wait", steady)
                        unreadable += report["asyncio_unreadable"]
                    print(f"{python.label}: {unreadable} unreadable over 15 dumps",
                          file=sys.stderr)
                finally:
                    workload.kill()

    def test_without_asyncio_flag_there_is_no_task_list(self):
        python = installed_pythons()[0]
        workload = PythonWorkload([python.executable, WORKLOAD, "--seconds", "60"])
        try:
            report = json.loads(dump(workload.pid, "--json")[1])
            self.assertNotIn("asyncio_tasks", report)
        finally:
            workload.kill()


class RecordAsyncioTest(BpfTestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        report_skipped_pythons(cls.__name__)

    def check_record(self, python, pure_python):
        args = ["-r", "199", "--asyncio", "--", python.executable, WORKLOAD, "--seconds", "3"]
        if pure_python:
            args.append("--pure-python")
        tag = ("py-" if pure_python else "c-") + python.label.replace(" ", "_")
        recording = record(args, self.tmp, name=tag, timeout=60)
        self.assertRecorded(recording)
        with open(recording.output_path, encoding="utf-8") as f:
            stacks = parse_folded(f.read())

        def names(stack):
            return [frame.split(" (")[0] for frame in stack]

        crunch = {s: c for s, c in stacks.items() if "crunch" in names(s)}
        crunch_samples = sum(crunch.values())
        # crunch is most of what the program computes: judged by its CPU time.
        cpu = printed_cpu_seconds(recording.stdout)
        self.assertGreater(crunch_samples, sample_floor(cpu, 199),
                           f"{crunch_samples} samples in crunch at 199 Hz, the program had "
                           f"{cpu:.2f} s of CPU (its own clock): {list(crunch.items())[:5]}")
        labelled = sum(c for s, c in crunch.items() if s[1] == "[task cpu-0]")
        self.assertGreaterEqual(labelled / crunch_samples, 0.95,
                                f"crunch not under [task cpu-0]: {list(crunch.items())[:5]}")
        for stack, count in crunch.items():
            if stack[1] != "[task cpu-0]":
                continue
            frames = names(stack)
            self.assertEqual(frames[2], "main", stack)  # the awaiting task's chain
            self.assertIn("batch_loop", frames, stack)
            self.assertLess(frames.index("batch_loop"), frames.index("crunch"), stack)
            for machinery in ("BaseEventLoop._run_once", "_run_once", "Handle._run", "_run",
                              "run_forever", "BaseEventLoop.run_forever"):
                self.assertNotIn(machinery, frames, stack)

    def check_await(self, python, pure_python):
        seconds = 3.0
        args = ["-r", "99", "--asyncio", "--off-cpu", "--", python.executable, WORKLOAD,
                "--seconds", str(seconds)]
        if pure_python:
            args.append("--pure-python")
        tag = ("await-py-" if pure_python else "await-c-") + python.label.replace(" ", "_")
        recording = record(args, self.tmp, name=tag, timeout=60)
        self.assertRecorded(recording)
        with open(recording.output_path, encoding="utf-8") as f:
            stacks = parse_folded(f.read())
        awaited = {}  # task -> microseconds suspended
        for stack, weight in stacks.items():
            if stack[0] != "[off-cpu]" or stack[-1] != "[await]":
                continue
            self.assertTrue(stack[2].startswith("[task "), stack)
            task = stack[2][len("[task "):-1]
            awaited[task] = awaited.get(task, 0) + weight
            names = [frame.split(" (")[0] for frame in stack]
            if task.startswith("io-"):
                self.assertIn("serve", names, stack)
                at = names.index("serve")
                self.assertEqual(names[at:at + 3], IO_CHAIN, stack)
                self.assertEqual(names[3], "main", stack)
        # How long it ran by its own clock: `seconds`, or more when its timer
        # fired late on a busy machine.
        match = re.search(r"^wall_seconds ([0-9.]+)$", recording.stdout, re.M)
        self.assertIsNotNone(match, recording.stdout)
        ran = float(match.group(1))
        for i in range(5):
            # Suspended ~95% of a run of `seconds` (less interpreter start-up,
            # more than the run is impossible).
            self.assertGreater(awaited.get(f"io-{i}", 0), 0.8 * seconds * 1e6, awaited)
            self.assertLess(awaited[f"io-{i}"], 1.05 * ran * 1e6, (f"ran {ran:.2f} s", awaited))
        self.assertLess(awaited.get("cpu-0", 0), 0.5 * awaited["io-0"], awaited)

    def test_await_time_is_charged_to_suspended_chains_c_tasks(self):
        for python in installed_pythons():
            with self.subTest(python=python.label):
                self.check_await(python, pure_python=False)

    def test_await_time_is_charged_to_suspended_chains_pure_python_tasks(self):
        for python in installed_pythons():
            with self.subTest(python=python.label):
                self.check_await(python, pure_python=True)

    def test_a_task_not_yet_started_is_not_charged_await_time(self):
        workload = python_workload("asyncio_not_started.py")
        for python in installed_pythons():
            with self.subTest(python=python.label):
                recording = record(["-r", "99", "--asyncio", "--off-cpu", "--", python.executable,
                                    workload, "--hold", "2"], self.tmp,
                                   name="not-started-" + python.label.replace(" ", "_"),
                                   timeout=60)
                self.assertRecorded(recording)
                with open(recording.output_path, encoding="utf-8") as f:
                    stacks = parse_folded(f.read())
                # The loop was held: its samples are there, on CPU...
                held = sum(c for s, c in stacks.items()
                           if any(f.startswith("hold_the_loop") for f in s))
                cpu = printed_cpu_seconds(recording.stdout)
                self.assertGreater(held, sample_floor(cpu, 99),
                                   (f"{held} samples at 99 Hz, {cpu:.2f} s of CPU (its own "
                                    f"clock)", list(stacks.items())[:5]))
                # ... and the task it held back awaited nothing meanwhile.
                charged = {s: c for s, c in stacks.items()
                           if s[-1] == "[await]" and any("never_started" in f for f in s)}
                self.assertLess(sum(charged.values()), 0.2e6, charged)  # under 0.2 s

    def test_a_task_stepped_while_read_is_not_charged_await_time(self):
        # Forty tasks each burn 0.3 ms per step: the loop is stepping one of
        # them nearly always, and the reader often reads a chain mid-step.
        # Such a chain ends in a running frame, not in an await: charging it
        # would put [await] time under the busy line.
        workload = python_workload("asyncio_busy_steps.py")
        for python in installed_pythons():
            for pure_python in (False, True):
                label = python.label + (" pure-Python tasks" if pure_python else "")
                with self.subTest(python=label):
                    args = ["-r", "99", "--asyncio", "--off-cpu", "--", python.executable,
                            workload, "--seconds", "3"]
                    if pure_python:
                        args.append("--pure-python")
                    recording = record(args, self.tmp, timeout=60,
                                       name="busy-steps-" + label.replace(" ", "_"))
                    self.assertRecorded(recording)
                    with open(recording.output_path, encoding="utf-8") as f:
                        stacks = parse_folded(f.read())
                    awaited = {s: c for s, c in stacks.items()
                               if s[-1] == "[await]" and s[2].startswith("[task busy-")}
                    # Suspended chains are charged (40 tasks, most of 3 s each)...
                    self.assertGreater(sum(awaited.values()), 40 * 1.5e6,
                                       list(stacks.items())[:5])
                    # ... and each ends in asyncio's sleep, never in step's loop.
                    torn = {s: c for s, c in awaited.items()
                            if not any(f.startswith("step (") for f in s)
                            or s[-2].startswith(("step (", "work ("))}
                    self.assertEqual(torn, {}, label)

    def test_crunch_is_under_its_task_c_tasks(self):
        for python in installed_pythons():
            with self.subTest(python=python.label):
                self.check_record(python, pure_python=False)

    def test_crunch_is_under_its_task_pure_python_tasks(self):
        for python in installed_pythons():
            with self.subTest(python=python.label):
                self.check_record(python, pure_python=True)


if __name__ == "__main__":
    unittest.main()
