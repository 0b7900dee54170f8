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
the whole run (it waits ~95% of the time), cpu-0 much less. How tasks are read
is each version's own, and is tested on every interpreter (the dump, and
crunch under its task); what is charged to them is not, so the tests of await
time run on one interpreter of each kind pystrobe finds differently.

On CPython 3.14+ the dump must also agree with CPython's own reader,
`python3.X -m asyncio ps PID` and `pstree PID`, run through the same
interpreter on the same service: the same tasks by name, each with the same
coroutine chain (by function name) and the same awaiting task.

Needs root (process_vm_readv on another process; BPF for record).
"""

import json
import re
import subprocess
import sys
import unittest

from pystrobe_testlib import (BpfTestCase, parse_folded, printed_cpu_seconds, record,
                              sample_floor, stacks_of_pid)
from python_testlib import (PythonWorkload, installed_pythons, one_of_each_kind,
                            python_workload, report_skipped_pythons)
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
        for python in installed_pythons(with_free_threaded=True):
            with self.subTest(python=python.label):
                self.check_service(python, pure_python=False)

    def test_lists_every_task_with_its_chain_and_awaiters_pure_python_tasks(self):
        for python in installed_pythons():
            with self.subTest(python=python.label):
                self.check_service(python, pure_python=True)

    def test_tasks_changing_under_the_reader_never_break_it(self):
        # What a torn read meets is the same code for each version of a kind
        # (other offsets): one interpreter of each kind, fifteen dumps each.
        churn = python_workload("asyncio_churn.py")
        for python in one_of_each_kind(installed_pythons()):
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

    def test_tasks_of_other_threads_ended_threads_and_eager_tasks_are_listed(self):
        # 3.14+ keeps C tasks on per-thread lists and an ended thread's on
        # its interpreter's; older versions in asyncio.tasks' sets.
        workload_path = python_workload("asyncio_threads.py")
        for python in installed_pythons(with_free_threaded=True):
            for pure_python in (False, True):
                label = python.label + (" pure-Python tasks" if pure_python else "")
                with self.subTest(python=label):
                    argv = [python.executable, workload_path, "--seconds", "60"]
                    if pure_python:
                        argv.insert(1, "-c")
                        argv[2:3] = ["import sys; sys.modules['_asyncio'] = None; "
                                     "sys.argv = sys.argv[1:]; import runpy; "
                                     "runpy.run_path(sys.argv[0], run_name='__main__')",
                                     workload_path]
                    workload = PythonWorkload(argv)
                    try:
                        code, out, err, _ = dump(workload.pid, "--asyncio", "--json")
                        self.assertEqual(code, 0, err)
                        tasks = {t["name"]: t for t in json.loads(out)["asyncio_tasks"]}
                        want = {"main": "main", "thread-main": "thread_wait",
                                "orphan": "orphan_wait"}
                        if workload.info["eager"]:
                            want.update({"eager-0": "eager_wait", "eager-1": "eager_wait"})
                        self.assertEqual(set(tasks), set(want), tasks)
                        for name, frame in want.items():
                            self.assertEqual(tasks[name]["stack"][0]["name"], frame, tasks[name])
                            self.assertEqual(tasks[name]["state"], "pending", tasks[name])
                        for name in ("eager-0", "eager-1"):
                            if name in tasks:
                                self.assertEqual(tasks[name]["awaited_by"], ["main"])
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


PS_COLUMNS = ["tid", "task id", "task name", "coroutine stack", "awaiter chain",
              "awaiter name", "awaiter id"]


def parse_asyncio_ps(text):
    """`python -m asyncio ps`: {task name: (chain outermost first, {awaiter names})}."""
    lines = text.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("tid "))
    starts = [lines[header].index(column) for column in PS_COLUMNS] + [None]
    tasks = {}
    for line in lines[header + 1:]:
        if not line.strip() or set(line.strip()) == {"-"}:
            continue
        cells = {column: line[starts[i]:starts[i + 1]].strip()
                 for i, column in enumerate(PS_COLUMNS)}
        chain = [f for f in cells["coroutine stack"].split(" -> ") if f]
        stack, awaiters = tasks.setdefault(cells["task name"], (chain[::-1], set()))
        if cells["awaiter name"]:
            awaiters.add(cells["awaiter name"])
    return tasks


def parse_asyncio_pstree(text):
    """`python -m asyncio pstree`: {task name: (own frames outermost first,
    awaiting task name or None, frames of that task down to this one)}."""
    tasks = {}
    path = []  # (depth, kind, name) from the root down to the line read
    for line in text.splitlines():
        match = re.search(r"(└── |├── )", line)
        if not match:
            continue
        depth = match.start()
        content = line[match.end():].strip()
        while path and path[-1][0] >= depth:
            path.pop()
        if content.startswith("(T) "):
            name = content[4:]
            above = [i for i, entry in enumerate(path) if entry[1] == "task"]
            parent = path[above[-1]][2] if above else None
            between = [e[2] for e in path[above[-1] + 1:]] if above else []
            tasks.setdefault(name, ([], parent, between))
            path.append((depth, "task", name))
        else:
            function = content.split(" ")[0]
            task_at = [e for e in path if e[1] == "task"]
            # A task's own frames come straight below it, before any child task.
            if task_at and all(e[1] == "frame" for e in path[path.index(task_at[-1]) + 1:]):
                tasks[task_at[-1][2]][0].append(function)
            path.append((depth, "frame", function))
    return tasks


class AsyncioReferenceTest(unittest.TestCase):
    """`dump --asyncio` against CPython 3.14+'s own `python -m asyncio ps|pstree`."""

    @classmethod
    def setUpClass(cls):
        require_root(cls)
        cls.pythons = [p for p in installed_pythons() if p.minor >= 14 and not p.free_threaded]
        if not cls.pythons:
            raise unittest.SkipTest("no CPython 3.14+ (scripts/test-pythons.sh)")

    def reference(self, python, command, pid):
        result = subprocess.run([python.executable, "-m", "asyncio", command, str(pid)],
                                capture_output=True, text=True, timeout=60)
        self.assertEqual(result.returncode, 0, result.stderr)
        return result.stdout

    def differences(self, python, pid):
        """What differs between one dump and the references read after it."""
        code, out, err, _ = dump(pid, "--asyncio", "--json")
        self.assertEqual(code, 0, err)
        report = json.loads(out)
        ours = {t["name"]: t for t in report["asyncio_tasks"]}
        ps_text = self.reference(python, "ps", pid)
        tree_text = self.reference(python, "pstree", pid)
        ps, tree = parse_asyncio_ps(ps_text), parse_asyncio_pstree(tree_text)
        problems = []
        if set(ours) != set(ps) or set(ours) != set(tree):
            problems.append(f"tasks: ours {sorted(ours)}, ps {sorted(ps)}, pstree {sorted(tree)}")
        for name in set(ours) & set(ps) & set(tree):
            task = ours[name]
            chain = [f["name"] for f in task["stack"]]
            awaiters = set(task["awaited_by"])
            ps_chain, ps_awaiters = ps[name]
            tree_chain, tree_parent, tree_between = tree[name]
            if name.startswith("cpu-"):
                # It runs: the references and we saw it at different moments.
                # Its outermost frame is the same whenever it is read.
                ps_chain, tree_chain, chain = ps_chain[:1], tree_chain[:1], chain[:1]
            if chain != ps_chain or chain != tree_chain:
                problems.append(f"{name}: chain ours {chain}, ps {ps_chain}, pstree {tree_chain}")
            if awaiters != ps_awaiters or awaiters != ({tree_parent} if tree_parent else set()):
                problems.append(f"{name}: awaited by ours {sorted(awaiters)}, ps "
                                f"{sorted(ps_awaiters)}, pstree {tree_parent}")
            if tree_parent in ours:
                # The frames of the awaiting task above this one are its chain.
                parent_chain = [f["name"] for f in ours[tree_parent]["stack"]]
                if tree_between != parent_chain:
                    problems.append(f"{name}: under {tree_parent}'s {tree_between} in pstree, "
                                    f"ours {parent_chain}")
        return problems, ps_text, tree_text

    def test_dump_agrees_with_cpythons_own_ps_and_pstree(self):
        for python in self.pythons:
            with self.subTest(python=python.label):
                workload = PythonWorkload([python.executable, WORKLOAD, "--seconds", "120"])
                try:
                    # A task stepped between our read and theirs differs for
                    # a moment: three reads, and the last must agree.
                    for attempt in range(3):
                        problems, ps_text, tree_text = self.differences(python, workload.pid)
                        if not problems:
                            break
                        print(f"{python.label} attempt {attempt}: {problems}", file=sys.stderr)
                    self.assertEqual(problems, [], ps_text + tree_text)
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
        for python in one_of_each_kind(installed_pythons(with_free_threaded=True)):
            with self.subTest(python=python.label):
                self.check_await(python, pure_python=False)

    def test_await_time_is_charged_to_suspended_chains_pure_python_tasks(self):
        for python in one_of_each_kind(installed_pythons()):
            with self.subTest(python=python.label):
                self.check_await(python, pure_python=True)

    def test_a_task_not_yet_started_is_not_charged_await_time(self):
        workload = python_workload("asyncio_not_started.py")
        for python in one_of_each_kind(installed_pythons()):
            with self.subTest(python=python.label):
                recording = record(["-r", "99", "--asyncio", "--off-cpu", "--", python.executable,
                                    workload, "--hold", "1"], self.tmp,
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
        for python in one_of_each_kind(installed_pythons()):
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
        for python in installed_pythons(with_free_threaded=True):
            with self.subTest(python=python.label):
                self.check_record(python, pure_python=False)

    def test_crunch_is_under_its_task_pure_python_tasks(self):
        for python in installed_pythons():
            with self.subTest(python=python.label):
                self.check_record(python, pure_python=True)


if __name__ == "__main__":
    unittest.main()
