"""Memory end to end, against a Python program whose memory is known
(memory_workload.py reads its own /proc/self/status, and grows 240 MiB in
grow_big() and 80 MiB in grow_small()): `record --memory` reads 75/25 in
every format (three runs, 8 points); `stat`'s peak equals the program's VmHWM,
its timeline shows the growth and the fall, its growth stacks name the
functions that grew; `stat --allocations` puts the held and the churned bytes
on the lines that allocated them; the
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
import threading
import time

from pystrobe_testlib import (HERE, PYSTROBE_BIN, BpfTestCase, read_lines_until, run_pystrobe,
                              wait_for, workload)
from test_daemon import LIVENESS_S, Daemon, decode_pprof, metric, remove_cgroup
import speedscope_render

PYTHON = "/usr/bin/python3.11"
WORKLOAD = os.path.join(HERE, "memory_workload.py")
TOLERANCE = 0.05
MIB = 1 << 20


def thread_state(pid, tid):
    """The state letter of /proc/PID/task/TID/stat (S: asleep)."""
    try:
        with open(f"/proc/{pid}/task/{tid}/stat") as f:
            return f.read().rpartition(")")[2].split()[0]
    except OSError:
        return None


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


def warm_up(daemon):
    """Runs python3.11 until the daemon knows the executable as CPython: the
    kernel then knows every later run of it from its exec, so that a program
    whose growth takes a fraction of a second is walked whole. Waited for (a
    run counted in pystrobe_python_processes_at_exec_total: only Debian's
    python3.11 has CPython linked into the executable), not assumed, on
    however loaded a machine."""
    def at_exec():
        return metric(daemon.metrics(), "pystrobe_python_processes_at_exec_total") or 0
    before = at_exec()
    spinner = subprocess.Popen([PYTHON, "-c", "while True: pass"])

    def known_at_exec():
        # 0.2 s of CPU: sampled (19 Hz) and so walked, if it is known.
        subprocess.run([PYTHON, "-c", "import time\nend = time.process_time() + 0.2\n"
                        "while time.process_time() < end: pass"], check=True, timeout=60)
        return at_exec() > before, at_exec()
    try:
        wait_for("a python3.11 run known as CPython from its exec", known_at_exec,
                 LIVENESS_S, interval=0.5)
    finally:
        spinner.kill()
        spinner.wait()


def in_cgroup(path, argv):
    """A shell command line that joins the cgroup, then execs argv."""
    quoted = " ".join(f"'{a}'" for a in argv)
    return ["sh", "-c", f"echo $$ > {path}/cgroup.procs && exec {quoted}"]


SHARE_TOLERANCE = 0.08


def growth_shares(weights):
    """{function: share} of grow_big and grow_small in [(frames, bytes)]."""
    totals = {"grow_big": 0, "grow_small": 0}
    for frames, weight in weights:
        for name in totals:
            # "grow_big (file:line)", or "grow_big" where the line is apart (pprof)
            if any(f == name or f.startswith(name + " ") for f in frames):
                totals[name] += weight
    both = sum(totals.values())
    return {k: v / both for k, v in totals.items()} if both else totals, both


class RecordMemoryTest(BpfTestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        speedscope_render.ensure_node_modules()

    def record(self, fmt, name):
        output = os.path.join(self.tmp, f"{name}.{fmt}")
        truth_path = os.path.join(self.tmp, f"{name}-truth.json")
        rc, out, err, _ = run_pystrobe(
            ["record", "--memory", "-f", fmt, "-o", output, "--", PYTHON, WORKLOAD, "grow",
             truth_path, "240", "80", "0.2"], timeout=120)
        self.assertEqual(rc, 0, err)
        self.assertRegex(err, r"memory: \d+ samples of resident growth \([\d.]+ MiB\)")
        return output

    def weights(self, fmt, path):
        """[(frames root first, bytes)] of a recording in `fmt`."""
        if fmt == "folded":
            out = []
            with open(path) as f:
                for line in f:
                    stack, _, count = line.rstrip("\n").rpartition(" ")
                    out.append((stack.split(";"), int(count)))
            return out
        if fmt == "pprof":
            profile = decode_pprof(path)
            self.assertEqual(profile["sampleTypes"], [["resident_growth", "bytes"]])
            self.assertEqual(profile["periodType"], ["space", "bytes"])
            self.assertEqual(profile["errors"], [])
            return [([frame["name"] for frame in reversed(sample["stack"])],
                     int(sample["values"][0])) for sample in profile["samples"]]
        if fmt == "speedscope":
            with open(path) as f:
                doc = json.load(f)
            frames = doc["shared"]["frames"]
            out = []
            for profile in doc["profiles"]:
                self.assertEqual(profile["unit"], "bytes")
                for stack, weight in zip(profile["samples"], profile["weights"]):
                    out.append(([frames[i]["name"] for i in stack], weight))
            return out
        raise AssertionError(fmt)

    def test_240_and_80_mib_read_75_25_in_every_format(self):
        for fmt in ("folded", "pprof", "speedscope"):
            for run in range(3 if fmt == "folded" else 1):
                path = self.record(fmt, f"grow-{fmt}-{run}")
                shares, both = growth_shares(self.weights(fmt, path))
                self.assertGreater(both, 250 * MIB, f"{fmt} run {run}: {both} bytes")
                self.assertLessEqual(abs(shares["grow_big"] - 0.75), SHARE_TOLERANCE,
                                     f"{fmt} run {run}: {shares}")
                self.assertLessEqual(abs(shares["grow_small"] - 0.25), SHARE_TOLERANCE,
                                     f"{fmt} run {run}: {shares}")

    def test_svg_is_in_bytes_and_names_both_functions(self):
        path = self.record("svg", "grow-svg")
        with open(path) as f:
            svg = f.read()
        self.assertRegex(svg, r"\d+ bytes")
        self.assertIn("grow_big", svg)
        self.assertIn("grow_small", svg)

    def test_memory_excludes_off_cpu(self):
        rc, _, err, _ = run_pystrobe(["record", "--memory", "--off-cpu", "--", "true"])
        self.assertEqual(rc, 2)
        self.assertIn("--memory", err)


class RecordAllocationsTest(BpfTestCase):
    """A program leaks 200 MiB in leak_into() and allocates and frees as much
    in churn(), in 1 MiB blocks, then exits without freeing (os._exit)."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        speedscope_render.ensure_node_modules()  # pprof-format, for the pprof test

    def record(self, *flags, fmt="folded"):
        output = os.path.join(self.tmp, f"alloc{'-'.join(flags)}.{fmt}")
        truth_path = os.path.join(self.tmp, "leak-truth.json")
        rc, out, err, _ = run_pystrobe(
            ["record", "--allocations", *flags, "-f", fmt, "-o", output, "--", PYTHON, WORKLOAD,
             "leak", truth_path, "200"], timeout=120)
        self.assertEqual(rc, 0, err)
        self.assertIn("--allocations samples inside the command", err)
        self.assertRegex(err, r"allocations: \d+ sampled \([\d.]+ MiB allocated\), \d+ freed")
        # os._exit: no finalization, so the view is the one at exit.
        if "--alloc-space" not in flags:
            self.assertRegex(err, r"[\d.]+ MiB held at exit \(1 process\)")
        return output

    def shares(self, path):
        totals = {"leak_into": 0, "churn": 0}
        with open(path) as f:
            for line in f:
                stack, _, count = line.rstrip("\n").rpartition(" ")
                for name in totals:
                    if f";{name} (" in stack:
                        totals[name] += int(count)
        return totals

    def test_inuse_space_shows_the_leak_and_alloc_space_both(self):
        for run in range(2):
            inuse = self.shares(self.record())
            self.assertGreater(inuse["leak_into"], 150 * MIB, inuse)
            self.assertLess(inuse["churn"], 0.1 * inuse["leak_into"], inuse)
            allocated = self.shares(self.record("--alloc-space"))
            both = allocated["leak_into"] + allocated["churn"]
            self.assertGreater(both, 300 * MIB, allocated)
            self.assertLessEqual(abs(allocated["leak_into"] / both - 0.5), SHARE_TOLERANCE,
                                 allocated)

    def test_pprof_has_inuse_space_in_bytes(self):
        profile = decode_pprof(self.record(fmt="pprof"))
        self.assertEqual(profile["sampleTypes"], [["inuse_space", "bytes"]])
        self.assertEqual(profile["periodType"], ["space", "bytes"])
        self.assertEqual(profile["errors"], [])


def function_bytes(path, names):
    """{name: bytes} of the folded stacks at `path` that pass through each
    function (Python "name (file:line)" or native "name"), and their total."""
    totals = dict.fromkeys(names, 0)
    everything = 0
    with open(path) as f:
        for line in f:
            stack, _, count = line.rstrip("\n").rpartition(" ")
            frames = stack.split(";")
            everything += int(count)
            for name in names:
                if any(frame == name or frame.startswith(name + " (") for frame in frames):
                    totals[name] += int(count)
    return totals, everything


class RecordAllocationsInProcessTest(BpfTestCase):
    """`record --allocations -- CMD` samples inside the command (the preloaded
    libpystrobe-alloc.so). A Python program holds 200 MiB in a module-level
    list from hold_into() while churn_small() makes and drops 200 MiB of 1 KiB
    objects, then ends normally; a C program leaks 64 MiB from leak_into()
    while churn() mallocs and frees as much. Each counts its own bytes."""

    TRUTH_TOLERANCE = 0.10

    def record(self, name, command, *flags):
        output = os.path.join(self.tmp, f"{name}.folded")
        rc, _, err, _ = run_pystrobe(
            ["record", "--allocations", *flags, "-f", "folded", "-o", output, "--", *command],
            timeout=180)
        self.assertEqual(rc, 0, err)
        return output, err

    def record_python(self, name, *flags):
        truth_path = os.path.join(self.tmp, f"{name}-truth.json")
        output, err = self.record(name, [PYTHON, WORKLOAD, "hold", truth_path, "200", "200"],
                                  *flags)
        with open(truth_path) as f:
            return output, err, json.load(f)

    def assertNear(self, measured, truth, what):
        self.assertLessEqual(abs(measured - truth) / truth, self.TRUTH_TOLERANCE,
                             f"{what}: sampled {measured} bytes, the program counted {truth}")

    # The held 1 MiB blocks are sampled every 64 KiB on average, so nearly
    # every one is (p = 1 - e^-16). At the default 512 KiB each is sampled
    # with p = 0.865 and weighs 1.21 MiB: 100 blocks strayed by 3.9% of
    # themselves (one standard deviation), and 10% was only 2.5 of those.
    EXACT_BLOCKS = ("--alloc-sample-bytes", "65536")

    def test_python_inuse_is_taken_when_finalization_begins(self):
        output, err, truth = self.record_python("hold-inuse", *self.EXACT_BLOCKS)
        self.assertIn("--allocations samples inside the command", err)
        self.assertNotIn("traps every malloc", err)
        self.assertRegex(err, r"[\d.]+ MiB held when Python finalization began \(1 process\)")
        held, total = function_bytes(output, ["hold_into", "churn_small"])
        self.assertGreaterEqual(held["hold_into"], 0.9 * total, f"{held}, {total}\n{err}")
        self.assertNear(held["hold_into"], truth["held_bytes"], f"hold_into, in use\n{err}")

    def test_python_alloc_space_puts_the_churn_where_it_is(self):
        output, _, truth = self.record_python("hold-space", "--alloc-space",
                                              "--alloc-sample-bytes", "65536")
        allocated, _ = function_bytes(output, ["hold_into", "churn_small"])
        self.assertNear(allocated["churn_small"], truth["churned_bytes"], "churn_small")
        self.assertNear(allocated["hold_into"], truth["held_bytes"], "hold_into, allocated")

    def leaky(self, binary, name, *flags, mib=64):
        truth_path = os.path.join(self.tmp, f"{name}-truth.txt")
        output, err = self.record(
            name, [workload(binary), "--leak-mib", str(mib), "--truth", truth_path], *flags)
        with open(truth_path) as f:
            _, leaked, churned = (int(x) for x in f.read().split())
        return output, err, leaked, churned

    def test_a_c_programs_leak_is_found_at_exit(self):
        output, err, leaked, _ = self.leaky("leaky", "leaky-inuse", "--alloc-sample-bytes", "65536")
        self.assertRegex(err, r"[\d.]+ MiB held at exit \(1 process\)")
        held, total = function_bytes(output, ["leak_into", "churn"])
        self.assertGreaterEqual(held["leak_into"], 0.9 * total, (held, total))
        self.assertNear(held["leak_into"], leaked, "leak_into, in use")
        output, _, leaked, churned = self.leaky("leaky", "leaky-space", "--alloc-space",
                                                "--alloc-sample-bytes", "65536")
        allocated, _ = function_bytes(output, ["leak_into", "churn"])
        self.assertNear(allocated["churn"], churned, "churn")
        self.assertNear(allocated["leak_into"], leaked, "leak_into, allocated")

    def test_a_static_program_runs_unchanged_under_uprobes_instead(self):
        output, err, leaked, _ = self.leaky("leaky_static", "static", mib=8)
        self.assertIn("is statically linked", err)
        self.assertIn("uprobes instead", err)
        self.assertIn("traps every malloc", err)
        held, total = function_bytes(output, ["leak_into", "churn"])
        self.assertGreaterEqual(held["leak_into"], 0.9 * total, (held, total))

    def test_a_program_with_its_own_allocator_keeps_it_and_is_sampled(self):
        output = os.path.join(self.tmp, "own.folded")
        rc, out, err, _ = run_pystrobe(
            ["record", "--allocations", "-f", "folded", "-o", output, "--",
             workload("own_allocator")], timeout=120)
        self.assertEqual(rc, 0, err)
        self.assertIn("--allocations samples inside the command", err)
        # Every block still came from its allocator, and its early dlopen worked.
        self.assertRegex(out, r"bump (\d+) dlopen ok")
        self.assertGreaterEqual(int(re.search(r"bump (\d+)", out).group(1)), 1000 * (16 << 10))
        held, total = function_bytes(output, ["keep"])
        self.assertGreaterEqual(held["keep"], 0.9 * total, (held, total))

    def test_children_started_through_a_shell_inherit_the_sampler(self):
        truth_path = os.path.join(self.tmp, "child-truth.json")
        output, err = self.record(
            "child", ["sh", "-c", f"{PYTHON} {WORKLOAD} hold {truth_path} 200 20; true"],
            "--subprocesses", *self.EXACT_BLOCKS)
        self.assertIn("--allocations samples inside the command", err)
        self.assertRegex(err, r"[\d.]+ MiB held when Python finalization began \(1 process\)")
        with open(truth_path) as f:
            truth = json.load(f)
        held, total = function_bytes(output, ["hold_into"])
        with open(output) as f:
            said = f"pystrobe said:\n{err}\nheaviest stacks:\n" + "".join(
                sorted(f, key=lambda line: -int(line.rsplit(" ", 1)[1]))[:8])
        self.assertGreaterEqual(held["hold_into"], 0.9 * total, f"{held}, {total}\n{said}")
        self.assertNear(held["hold_into"], truth["held_bytes"], f"hold_into in the child\n{said}")


def function_site(test, allocations, function):
    """The allocation sites of `function`'s lines, added up. Sites are lines,
    and beside the line that allocates what a test counts, another may be
    sampled now and then (hold_into's `held.append` as the list grows: one
    sample standing for 64 KiB)."""
    lines = [site for site in allocations["sites"]
             if site["frame"].partition(" (")[0] == function]
    test.assertTrue(lines, f"no site in {function}: {allocations}")
    return {key: sum(site[key] for site in lines)
            for key in ("allocated_bytes", "allocated_share", "in_use_bytes", "in_use_share")}


class StatAllocationsTest(BpfTestCase):
    """`stat --allocations -- CMD` samples in the command's own process (the
    library `record --allocations` preloads) and prints, beside stat's other
    figures, the bytes allocated and still in use when Python finalization
    began, and the Python lines that allocated them. The program holds 200
    MiB in a module-level list from hold_into() while churn_small() makes and
    drops 200 MiB of 1 KiB objects, counting its own bytes: each line's
    estimate is within 10% of them."""

    TRUTH_TOLERANCE = 0.10
    stat_output = ""  # what the last stat printed, shown when a figure is off

    def stat(self, name, *flags):
        truth_path = os.path.join(self.tmp, f"{name}-truth.json")
        rc, out, err, _ = run_pystrobe(
            ["stat", "--allocations", "--alloc-sample-bytes", "65536", *flags, "--", PYTHON,
             WORKLOAD, "hold", truth_path, "200", "200"], timeout=180)
        self.assertEqual(rc, 0, err)
        self.assertIn("--allocations samples inside the command", err)
        self.assertNotIn("traps every malloc", err)
        self.stat_output = f"{out}\n{err}"
        with open(truth_path) as f:
            return out, json.load(f)

    def assertNear(self, measured, truth, what):
        self.assertLessEqual(abs(measured - truth) / truth, self.TRUTH_TOLERANCE,
                             f"{what}: sampled {measured} bytes, the program counted {truth}; "
                             f"what stat printed:\n{self.stat_output}")

    def test_json_puts_the_held_and_the_churned_bytes_on_their_lines(self):
        out, truth = self.stat("json", "--json")
        report = json.loads(out)
        self.assertEqual(report["pid"], truth["pid"])
        allocations = report["allocations"]
        self.assertEqual(allocations["sampler"], "in-process")
        self.assertEqual(allocations["sample_bytes"], 65536)
        self.assertEqual(allocations["in_use_moment"], "when Python finalization began")
        self.assertEqual(allocations["records_lost"], 0)
        hold = function_site(self, allocations, "hold_into")
        churn = function_site(self, allocations, "churn_small")
        self.assertNear(hold["allocated_bytes"], truth["held_bytes"], "hold_into, allocated")
        self.assertNear(hold["in_use_bytes"], truth["held_bytes"], "hold_into, in use")
        self.assertNear(churn["allocated_bytes"], truth["churned_bytes"], "churn_small")
        # What is held at the end is the list's, not the churn's.
        self.assertGreaterEqual(hold["in_use_share"], 0.9, allocations)
        self.assertLessEqual(churn["in_use_bytes"], 0.02 * truth["churned_bytes"], allocations)
        self.assertNear(hold["allocated_share"],
                        truth["held_bytes"] / allocations["allocated_bytes"], "hold_into's share")
        # The other figures are still there.
        self.assertGreater(report["cpu_user_seconds"], 0)
        self.assertIn("peak_rss_bytes", report)

    def test_text_names_the_line_that_still_holds_memory(self):
        out, truth = self.stat("text")
        self.assertRegex(out, r"allocations: sampled every 64.00 KiB on average, in the process")
        held = re.search(r"still in use +([\d.]+) MiB +\(held when Python finalization began\)",
                         out)
        self.assertIsNotNone(held, out)
        self.assertNear(float(held.group(1)) * MIB, truth["held_bytes"], "in use")
        # The first site is hold_into's or churn_small's (about as much each),
        # hold_into's with nearly all that is held.
        line = re.search(r"([\d.]+)% +[\d.]+ MiB +([\d.]+)% +[\d.]+ MiB +hold_into "
                         r"\(memory_workload.py:\d+\)", out)
        self.assertIsNotNone(line, out)
        self.assertGreaterEqual(float(line.group(2)), 90, out)


    def test_a_running_process_is_seen_through_uprobes_and_named_by_its_python_line(self):
        """--pid: uprobes on the process's libc, and its first sampled
        allocations already walked to their Python line (the process is
        looked at before they come). It holds 32 MiB from grow() once stat
        says it measures, then ends."""
        script = os.path.join(self.tmp, "wait_then_grow.py")
        with open(script, "w") as f:
            f.write("import sys\nHELD = []\ndef grow():\n    for _ in range(32):\n"
                    "        HELD.append(bytes(1 << 20))\nsys.stdin.readline()\ngrow()\n")
        proc = subprocess.Popen([PYTHON, script], stdin=subprocess.PIPE, text=True)
        try:
            stat = subprocess.Popen(
                [PYSTROBE_BIN, "stat", "--json", "--no-daemon", "--allocations",
                 "--alloc-sample-bytes", "65536", "--pid", str(proc.pid), "-d", "60"],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            read_lines_until(stat.stderr, "measuring pid", timeout=60)
            proc.stdin.write("go\n")
            proc.stdin.flush()
            proc.wait(timeout=60)
            out, err = stat.communicate(timeout=60)
        finally:
            proc.kill()
            proc.wait()
            proc.stdin.close()
        self.assertEqual(stat.returncode, 0, err)
        allocations = json.loads(out)["allocations"]
        self.assertEqual(allocations["sampler"], "uprobes")
        grow = function_site(self, allocations, "grow")
        self.assertNear(grow["allocated_bytes"], 32 * ((1 << 20) + 33), "grow")
        self.assertGreaterEqual(grow["in_use_share"], 0.9, allocations)


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
            # What grew memory up to the peak: grow_big's stack first, 75/25.
            stacks = report["memory_growth_stacks"]
            self.assertTrue(report["memory_growth_sampled"])
            self.assertTrue(any(f.startswith("grow_big ") for f in stacks[0]["stack"]), stacks[0])
            shares, both = growth_shares([(s["stack"], s["bytes"]) for s in stacks])
            self.assertLessEqual(abs(shares["grow_big"] - 0.75), SHARE_TOLERANCE, shares)

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
        # The function that grew, first among the growth stacks.
        top = report["memory_growth_stacks"][0]
        self.assertIn("do_anonymous_page_[k]", top["stack"], top)
        self.assertTrue(any(f.startswith("grows_until_killed (") for f in top["stack"]), top)
        self.assertGreater(top["share"], 0.5, top)

    def test_record_prints_the_oom_kill(self):
        output = os.path.join(self.tmp, "oom.folded")
        rc, out, err, _ = run_pystrobe(["record", "-f", "folded", "-o", output, "--",
                                        *self.oom_program()], timeout=120)
        with open(self.truth_path) as f:
            pid = json.load(f)["pid"]
        self.assertRegex(err, rf"python3\.11 \({pid}\) was killed by the kernel's OOM killer: "
                              r"resident [\d.]+ MiB")

    def test_daemon_counts_the_kill_and_writes_a_report_with_what_grew(self):
        tmp = tempfile.mkdtemp(dir=self.tmp)
        daemon = Daemon(tmp, config="memory: true\n")
        self.addCleanup(daemon.stop)
        # The daemon knows python3.11 as CPython from its exec: the program
        # is walked from its start (its growth takes a fraction of a second).
        warm_up(daemon)
        child = subprocess.Popen(self.oom_program())
        child.wait(timeout=60)
        self.assertEqual(child.returncode, -9)  # SIGKILL, from the OOM killer
        with open(self.truth_path) as f:
            pid = json.load(f)["pid"]
        def counted_and_reported():
            kills = metric(daemon.metrics(), "pystrobe_oom_kills_total", comm="python3.11")
            reports = [p for p in os.listdir(daemon.profile_dir) if p.startswith("oom-")]
            return bool(kills and reports), (kills, reports)
        kills, _ = wait_for("the OOM kill counted in /metrics and its report written",
                            counted_and_reported, LIVENESS_S)
        self.assertGreaterEqual(kills or 0, 1)
        report_path = [p for p in os.listdir(daemon.profile_dir)
                       if p.startswith("oom-") and p.endswith(f"-{pid}.json")]
        self.assertEqual(len(report_path), 1, os.listdir(daemon.profile_dir))
        with open(os.path.join(daemon.profile_dir, report_path[0])) as f:
            report = json.load(f)
        self.assertEqual(report["comm"], "python3.11")
        self.assertGreater(report["rss_bytes"], 0.6 * OOM_LIMIT)
        # Every thread's stack as it took the kill: the one that grew, in the
        # function that grew, and the one sleeping beside it.
        with open(self.truth_path) as f:
            waiter_tid = json.load(f)["waiter_tid"]
        threads = {t["tid"]: t for t in report["threads"]}
        self.assertEqual(set(threads), {pid, waiter_tid}, report["threads"])
        self.assertTrue(any(f.startswith("grows_until_killed (") for f in threads[pid]["stack"]),
                        threads[pid])
        self.assertTrue(any(f.startswith("oom (") for f in threads[pid]["stack"]), threads[pid])
        self.assertTrue(any(f.startswith("waits_beside (") for f in threads[waiter_tid]["stack"]),
                        threads[waiter_tid])
        self.assertFalse(any(f.startswith("grows_until_killed (")
                             for f in threads[waiter_tid]["stack"]), threads[waiter_tid])
        # What grew it: the victim's first touches, most of its memory, in
        # the function that grew it.
        top = report["memory_growth_stacks"][0]
        self.assertIn("do_anonymous_page_[k]", top["stack"], top)
        self.assertTrue(any(f.startswith("grows_until_killed (") for f in top["stack"]), top)
        self.assertGreater(top["share"], 0.5, top)


class MemoryDaemonTest(BpfTestCase):

    def test_resident_series_match_proc_status(self):
        tmp = tempfile.mkdtemp(dir=self.tmp)
        daemon = Daemon(tmp)
        self.addCleanup(daemon.stop)
        # Holds 200 MiB of anonymous memory, then spins so it is among the
        # busiest processes (those get their own series). It says when all of
        # it is resident: before that, /proc read a moment after the scrape
        # is ahead of it by what a loaded machine took to fill the pages.
        program = ("import time\nheld = b'x' * (200 << 20)\nprint('held', flush=True)\n"
                   "end = time.time() + 60\nwhile time.time() < end: pass\n")
        child = subprocess.Popen([PYTHON, "-c", program], stdout=subprocess.PIPE, text=True)
        self.addCleanup(child.stdout.close)
        self.addCleanup(child.wait)
        self.addCleanup(child.kill)
        read_lines_until(child.stdout, "^held$", LIVENESS_S)
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


class DaemonStatMemoryTest(BpfTestCase):
    """`stat --pid` answered by the daemon has the memory a local stat has: the
    timeline, the peak and, with memory: true, what grew it."""

    def test_daemon_stat_has_the_timeline_the_peak_and_the_growth_stacks(self):
        tmp = tempfile.mkdtemp(dir=self.tmp)
        sock = os.path.join(tmp, "control.sock")
        daemon = Daemon(tmp, ("--socket", sock), config="memory: true\n")
        self.addCleanup(daemon.stop)
        truth_path = os.path.join(tmp, "truth.json")
        # The daemon knows python3.11 as CPython from its exec: the program
        # is walked from its start (its growth takes a fraction of a second).
        warm_up(daemon)
        # Grows 120 + 40 MiB once told to (a line on its stdin, once the
        # daemon holds stat's request), holds it a second, frees it, exits.
        program = (f"import sys, time; sys.path.insert(0, {HERE!r}); import memory_workload as w; "
                   f"sys.stdin.readline(); w.grow(120, 40, 1, {truth_path!r})")
        child = subprocess.Popen([PYTHON, "-c", program], stdin=subprocess.PIPE, text=True)
        self.addCleanup(child.kill)
        stat = subprocess.Popen([PYSTROBE_BIN, "stat", "--socket", sock, "--json", "--pid",
                                 str(child.pid), "-d", "20"], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        self.addCleanup(stat.kill)
        daemon.wait_for_metrics("stat's request held by the daemon", lambda text: (
            metric(text, "pystrobe_control_connections_open") or 0) >= 1)
        child.stdin.write("grow\n")
        child.stdin.close()
        out, err = stat.communicate(timeout=60)
        rc = stat.returncode
        child.wait(timeout=30)
        self.assertEqual(rc, 0, err)
        self.assertIn("using the running daemon", err)
        report = json.loads(out)
        with open(truth_path) as f:
            truth = json.load(f)
        self.assertEqual(report["pid"], truth["pid"])
        self.assertLessEqual(abs(report["peak_rss_bytes"] - truth["VmHWM"]),
                             TOLERANCE * truth["VmHWM"], (report["peak_rss_bytes"], truth))
        timeline = report["memory_timeline"]
        self.assertGreater(len(timeline), 5, timeline)
        self.assertGreater(max(p["rss_bytes"] for p in timeline), 140 * MIB, timeline)
        self.assertLess(timeline[-1]["rss_bytes"], 100 * MIB, timeline)  # freed at the end
        self.assertTrue(report["memory_growth_sampled"])
        self.assertFalse(report["memory_growth_to_peak"])
        self.assertTrue(report["memory_growth_stacks"], report)
        top = report["memory_growth_stacks"][0]
        self.assertTrue(any(f.startswith("grow_big (") for f in top["stack"]), top)
        self.assertGreater(top["share"], 0.5, report["memory_growth_stacks"])


class DaemonMemoryWindowsTest(BpfTestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        speedscope_render.ensure_node_modules()

    def test_memory_true_writes_a_resident_growth_profile_beside_each_window(self):
        tmp = tempfile.mkdtemp(dir=self.tmp)
        daemon = Daemon(tmp, config="window: 2\nmemory: true\n")
        self.addCleanup(daemon.stop)
        truth_path = os.path.join(tmp, "truth.json")
        # The daemon knows python3.11 as CPython from its exec: the program
        # is walked from its start (its growth takes a fraction of a second).
        warm_up(daemon)
        subprocess.run([PYTHON, WORKLOAD, "grow", truth_path, "240", "80", "0.2"], check=True,
                       timeout=60)
        with open(truth_path) as f:
            pid = json.load(f)["pid"]

        def memory_files():
            return sorted(p for p in os.listdir(daemon.profile_dir)
                          if p.endswith("-memory.pb.gz"))
        # The window that saw it is cut: one more file than there was when it ended.
        seen = len(memory_files())
        memory_files = wait_for("a memory profile cut after the growth", lambda: (
            len(memory_files()) > seen, memory_files()), LIVENESS_S)
        self.assertTrue(memory_files, os.listdir(daemon.profile_dir))
        weights = []
        for name in memory_files:
            profile = decode_pprof(os.path.join(daemon.profile_dir, name))
            self.assertEqual(profile["sampleTypes"], [["resident_growth", "bytes"]])
            self.assertEqual(profile["errors"], [])
            for sample in profile["samples"]:
                if str(sample["labels"].get("pid")) == str(pid):
                    weights.append(([f["name"] for f in reversed(sample["stack"])],
                                    int(sample["values"][0])))
        shares, both = growth_shares(weights)
        self.assertGreater(both, 250 * MIB, f"{len(weights)} samples of pid {pid}")
        self.assertLessEqual(abs(shares["grow_big"] - 0.75), SHARE_TOLERANCE, shares)


TOP_MEMORY_COLUMNS = re.compile(
    r"(?P<rss>[\d.]+)(?P<rss_unit>[kMG]?)\s+(?P<growth>[+-][\d.]+)(?P<growth_unit>[kMG]?)\s*$")


def top_row_memory(screen, pid):
    """(row, RSS in bytes, RSS/s) of `pid`'s row on a top screen; (None, 0, 0)
    when it has none or its columns have no growth yet."""
    scale = {"": 1, "k": 1e3, "M": 1e6, "G": 1e9}
    for line in screen.splitlines():
        if re.match(rf"\s*{pid}\s", line):
            match = TOP_MEMORY_COLUMNS.search(line)
            if match:
                return (line, float(match["rss"]) * scale[match["rss_unit"]],
                        float(match["growth"]) * scale[match["growth_unit"]])
    return None, 0, 0


# Grows its resident memory 8 MiB at a time, every 50 ms, for 20 s, and prints
# "ready" (then its RSS growth rate by its own clock, "grew B/S", each second).
GROWER = ("import time\nheld = []\nend = time.time() + 20\nprint('ready', flush=True)\n"
          "last, rss = time.time(), 0\n"
          "while time.time() < end:\n"
          "    held.append(b'x' * (8 << 20)); time.sleep(0.05)\n"
          "    if time.time() - last >= 1:\n"
          "        now, grown = time.time(), len(held) * (8 << 20)\n"
          "        print(f'grew {(grown - rss) / (now - last):.0f}', flush=True)\n"
          "        last, rss = now, grown\n")


class TopScreens:
    """The screens `pystrobe top ARGS` prints, read as they come."""

    def __init__(self, args):
        self.proc = subprocess.Popen([PYSTROBE_BIN, "top", *args], stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        self.out = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.proc.stdout:
            self.out.append(line)

    def complete_screens(self):
        """Every screen followed by another (so printed whole)."""
        return "".join(self.out).split("pystrobe top")[1:-1]

    def wait_for_row(self, pid, what):
        """The first whole screen whose row of `pid` shows RSS and its growth
        (which needs two screens); a liveness limit, not a judgement of speed."""
        def probe():
            for screen in self.complete_screens():
                if top_row_memory(screen, pid)[0] is not None:
                    return True, screen
            return False, "".join(self.out)[-3000:]
        return wait_for(what, probe, LIVENESS_S)

    def stop(self):
        """Ends top; returns what it said on stderr (its stdout is the reader's)."""
        self.proc.terminate()
        self.proc.wait(timeout=30)
        self.reader.join(30)
        with self.proc.stderr:
            return self.proc.stderr.read()


def grower_rates(grower):
    """The RSS growth rates (bytes/s) a GROWER printed so far, by its own clock."""
    return [float(line.split()[1]) for line in grower.lines if line.startswith("grew ")]


class Grower:
    def __init__(self, test):
        self.proc = subprocess.Popen([PYTHON, "-c", GROWER], stdout=subprocess.PIPE, text=True)
        test.addCleanup(self.proc.wait)
        test.addCleanup(self.proc.kill)
        self.lines = read_lines_until(self.proc.stdout, "^ready$")
        self.pid = self.proc.pid
        threading.Thread(target=lambda: self.lines.extend(self.proc.stdout), daemon=True).start()


class MemoryTopTest(BpfTestCase):

    def assertGrowthNear(self, row, growth, grower):
        # top's RSS/s against the growth the program measured of itself, which
        # the machine's load decides: at least half of its slowest second.
        rates = grower_rates(grower)
        floor = 0.5 * min(rates) if rates else 0
        self.assertGreater(growth, max(floor, 0), (row, "own growth rates, B/s:", rates))

    def test_top_shows_rss_and_its_growth(self):
        grower = Grower(self)
        # Screens every second; the growth needs two of them.
        top = TopScreens(["--no-daemon", "-i", "1", "-s", "memory"])
        self.addCleanup(top.proc.kill)
        screen = top.wait_for_row(grower.pid, f"a top screen with pid {grower.pid}'s RSS/s")
        err = top.stop()
        self.assertIn("RSS/s", screen, err)
        row, _, growth = top_row_memory(screen, grower.pid)
        self.assertGrowthNear(row, growth, grower)

    def test_top_answered_by_the_daemon_shows_rss_and_its_growth(self):
        tmp = tempfile.mkdtemp(dir=self.tmp)
        sock = os.path.join(tmp, "control.sock")
        daemon = Daemon(tmp, ("--socket", sock))
        self.addCleanup(daemon.stop)
        grower = Grower(self)
        holder = subprocess.Popen([PYTHON, "-c", (
            "import time\nheld = b'x' * (200 << 20)\nprint('ready', flush=True)\n"
            "time.sleep(30)\n")], stdout=subprocess.PIPE, text=True)
        self.addCleanup(holder.wait)
        self.addCleanup(holder.kill)
        read_lines_until(holder.stdout, "^ready$")
        truth = proc_status(holder.pid)
        top = TopScreens(["--socket", sock, "-i", "1", "-s", "memory"])
        self.addCleanup(top.proc.kill)
        screen = top.wait_for_row(grower.pid, f"a top screen with pid {grower.pid}'s RSS/s")
        err = top.stop()
        self.assertIn("using the running daemon", err)
        self.assertIn("RSS/s", screen, err)
        row, rss, _ = top_row_memory(screen, holder.pid)
        self.assertIsNotNone(row, screen)
        self.assertLessEqual(abs(rss - truth["VmRSS"]), TOLERANCE * truth["VmRSS"],
                             (row, truth["VmRSS"]))
        row, _, growth = top_row_memory(screen, grower.pid)
        self.assertGrowthNear(row, growth, grower)

    def test_top_of_a_process_asleep_since_before_it_names_its_threads_and_rss(self):
        # Asleep (two threads, 64 MiB held) before the daemon and top start:
        # the accounting never sees it run, /proc still knows it.
        sleeper = subprocess.Popen([PYTHON, "-c", (
            "import threading, time\nheld = b'x' * (64 << 20)\n"
            "threading.Thread(target=time.sleep, args=(60,)).start()\n"
            "print('ready', flush=True)\ntime.sleep(60)\n")], stdout=subprocess.PIPE, text=True)
        self.addCleanup(sleeper.stdout.close)
        self.addCleanup(sleeper.wait)
        self.addCleanup(sleeper.kill)
        self.assertEqual(sleeper.stdout.readline().strip(), "ready")

        def both_asleep():
            tids = sorted(int(t) for t in os.listdir(f"/proc/{sleeper.pid}/task"))
            states = [thread_state(sleeper.pid, tid) for tid in tids]
            return len(tids) == 2 and states == ["S", "S"], (tids, states)
        tids, _ = wait_for("both of its threads asleep", both_asleep, LIVENESS_S)
        tmp = tempfile.mkdtemp(dir=self.tmp)
        sock = os.path.join(tmp, "control.sock")
        daemon = Daemon(tmp, ("--socket", sock))
        self.addCleanup(daemon.stop)
        for how in (["--no-daemon"], ["--socket", sock]):
            with self.subTest(how=how[0]):
                rc, out, err, _ = run_pystrobe(["top", *how, "--once", "--pid", str(sleeper.pid)],
                                               timeout=60)
                self.assertEqual(rc, 0, err)
                truth = proc_status(sleeper.pid)["VmRSS"]
                title = re.search(rf"pid {sleeper.pid} \(python3\.11\), per thread"
                                  r"( \(from the daemon\))?, RSS ([\d.]+) MiB", out)
                self.assertIsNotNone(title, out)
                self.assertLessEqual(abs(float(title[2]) * MIB - truth), TOLERANCE * truth,
                                     (out, truth))
                rows = sorted(int(line.split()[0]) for line in out.splitlines()
                              if re.match(r"\s*\d+ python3\.11\s", line))
                self.assertEqual(rows, tids, out)


if __name__ == "__main__":
    import unittest
    unittest.main()
