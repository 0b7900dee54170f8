"""Native stacks without frame pointers, walked in the kernel with unwind tables.

unwind_chain is built -O2 -fomit-frame-pointer, as distributions build, so a
frame-pointer walk sees its leaf and nothing else. With --native every sample
must read the whole chain the program is known to run, down to _start: a
recursion of known depth, a callback from libc's qsort, and a signal handler
on top of the loop it interrupted.
"""

import os
import subprocess
import tempfile
import textwrap
import unittest

from pystrobe_testlib import (KERNEL_SUFFIX, BpfTestCase, CpuClock, printed_cpu_seconds,
                              process_pid, record, sample_floor, summarize, total, workload)
from python_testlib import installed_pythons

RATE = 499
# Samples that must read whole: the first samples of a process come before
# its mappings are read and its tables loaded, and end in one [unknown].
WHOLE_SHARE = 0.95
PROGRAM_START = ("_start", "__libc_start_main", "__libc_start_call_main", "main")


def user_frames(stack):
    """The stack's native frames of the program, root first: no process frame,
    no kernel frames."""
    return tuple(f for f in stack[1:] if not f.endswith(KERNEL_SUFFIX))


def base_name(frame):
    """GCC's clones read as their function: SortOuter.constprop.0 -> SortOuter."""
    return frame.split(".")[0]


class NativeUnwindTest(BpfTestCase):

    def run_chain(self, mode, seconds=3):
        recording = record(["--native", "-r", str(RATE), "--", workload("unwind_chain"), "--mode",
                            mode, "--seconds", str(seconds)], self.tmp, name=mode)
        self.assertRecorded(recording)
        mine = {s: c for s, c in recording.stacks.items() if s and s[0].startswith("unwind_chain")}
        # Judged by the CPU time the program had, which the machine's load decides.
        cpu = printed_cpu_seconds(recording.stdout)
        self.assertGreater(total(mine), sample_floor(cpu, RATE),
                           f"{total(mine)} samples at {RATE} Hz of {cpu:.2f} s of CPU "
                           f"(the workload's own clock); heaviest stacks:\n"
                           f"{summarize(recording.stacks)}")
        return recording, mine

    def assertMostlyWhole(self, stacks, is_whole, what):
        whole = sum(c for s, c in stacks.items() if is_whole(tuple(map(base_name,
                                                                        user_frames(s)))))
        self.assertGreaterEqual(
            whole, WHOLE_SHARE * total(stacks),
            f"{what}: {whole} of {total(stacks)} samples whole; heaviest stacks:\n"
            f"{summarize(stacks)}")

    def test_recursion_of_known_depth_reads_whole(self):
        _, mine = self.run_chain("recursion")
        chain = PROGRAM_START + ("RunRecursion",) + ("Recurse",) * 12 + ("SpinLeaf",)
        # The leaf, or any frame of the recursion when the sample came
        # between calls: always a prefix of the chain from _start.
        self.assertMostlyWhole(mine, lambda user: len(user) >= 6 and user == chain[:len(user)],
                               "recursion")
        deepest = sum(c for s, c in mine.items()
                      if tuple(map(base_name, user_frames(s))) == chain)
        self.assertGreater(deepest, 0.5 * total(mine), summarize(mine))

    def test_callback_from_libc_qsort_reads_whole(self):
        _, mine = self.run_chain("qsort")
        callers = PROGRAM_START + ("RunSort", "SortOuter", "SortInner")

        def whole(user):
            if user[:len(callers)] != callers:
                return False
            # Under qsort: libc's sort frames (named from libc's symbols), then
            # the comparison, or qsort's own work.
            rest = user[len(callers):]
            return not rest or rest[0].startswith("qsort") or rest[0] == "SortInner"

        self.assertMostlyWhole(mine, whole, "qsort")
        in_callback = {s: c for s, c in mine.items() if "CompareSlowly" in s}
        self.assertGreater(total(in_callback), 0.5 * total(mine), summarize(mine))
        for stack in in_callback:
            user = tuple(map(base_name, user_frames(stack)))
            if user[:len(callers)] == callers:
                self.assertTrue(any(f.startswith("msort") for f in user), stack)

    def test_signal_handler_reads_through_the_signal_frame(self):
        _, mine = self.run_chain("signal")
        loop = PROGRAM_START + ("RunSignal", "SignalLoop")
        in_handler = {s: c for s, c in mine.items() if "SpinInHandler" in s}
        self.assertGreater(total(in_handler), 0.3 * total(mine), summarize(mine))

        def whole(user):
            # The loop, the signal trampoline (libc's __restore_rt, named by
            # its address), the handler.
            if user[:len(loop)] != loop:
                return False
            rest = user[len(loop):]
            handler = rest[rest.index("OnSignal"):] if "OnSignal" in rest else ()
            return handler[:2] == ("OnSignal", "SpinInHandler")

        self.assertMostlyWhole(in_handler, whole, "signal handler")

    def test_unwinder_counts_whole_walks(self):
        recording, mine = self.run_chain("recursion", seconds=2)
        native = recording.summary.get("native_unwind", {})
        self.assertGreater(native.get("complete", 0), 0.9 * total(mine), recording.summary)
        self.assertGreater(native.get("tables", 0), 0, recording.summary)


DEBIAN_PYTHON = "/usr/bin/python3.11"
MATMUL = textwrap.dedent("""
    import time
    import numpy as np

    a = np.random.rand(300, 300)

    def multiply_for(seconds):
        end = time.time() + seconds
        while time.time() < end:
            a @ a

    multiply_for(3)
""")


def debian_numpy_missing():
    if not os.access(DEBIAN_PYTHON, os.X_OK):
        return f"{DEBIAN_PYTHON} is not installed"
    if subprocess.run([DEBIAN_PYTHON, "-c", "import numpy"], capture_output=True).returncode:
        return "Debian's python3-numpy is not installed"
    return None


class NativeUnwindPythonTest(BpfTestCase):

    @unittest.skipIf(debian_numpy_missing(), debian_numpy_missing())
    def test_numpy_matmul_shows_python_caller_and_blas_together(self):
        # Debian's python3.11, numpy and BLAS: no frame pointers anywhere.
        script = os.path.join(self.tmp, "matmul.py")
        with open(script, "w") as f:
            f.write(MATMUL)
        recording = record(["--native", "-r", str(RATE), "--", DEBIAN_PYTHON, script], self.tmp,
                           name="matmul")
        self.assertRecorded(recording)
        mine = {s: c for s, c in recording.stacks.items() if s and s[0].startswith("python3")}
        # Once numpy is imported, nearly every sample is in the product.
        in_product = {s: c for s, c in mine.items() if "multiply_for (matmul.py:10)" in s}
        self.assertGreater(total(in_product), 0.6 * total(mine), summarize(mine))
        together = sum(c for s, c in in_product.items() if any("gemm" in f for f in s))
        self.assertGreaterEqual(together, 0.8 * total(in_product),
                                f"{together} of {total(in_product)} samples name BLAS's gemm "
                                f"under the Python caller:\n{summarize(in_product)}")
        # BLAS is called from numpy's C under the Python frame, never above it.
        for stack in in_product:
            gemm = [i for i, f in enumerate(stack) if "gemm" in f]
            if gemm:
                self.assertLess(stack.index("multiply_for (matmul.py:10)"), gemm[0], stack)

    def test_ctypes_callback_stack_reads_python_c_python_in_true_order(self):
        # Python calls libc's qsort through ctypes; qsort calls back into
        # Python. Every interpreter, static (Debian) and shared (pyenv).
        script = os.path.join(self.tmp, "callback.py")
        with open(script, "w") as f:
            f.write(CALLBACK)
        tried = []
        for python in callback_pythons():
            with self.subTest(python=python):
                recording = record(["--native", "-r", str(RATE), "--", python, script], self.tmp,
                                   name=os.path.basename(python))
                self.assertRecorded(recording)
                in_callback = {s: c for s, c in recording.stacks.items()
                               if any(f.startswith("compare (callback.py") for f in s)}
                # The summary says whether the process was found to be CPython
                # and how its walks ended (a stressed run once had no Python
                # frame at all on 3.14t).
                self.assertGreater(total(in_callback), 0.3 * total(recording.stacks),
                                   f"{summarize(recording.stacks)}\n{recording.summary}\n"
                                   f"{recording.stderr}")

                def true_order(stack):
                    caller = [i for i, f in enumerate(stack) if f.startswith("sort_with_qsort (")]
                    sort = [i for i, f in enumerate(stack) if f.startswith("qsort")]
                    callback = [i for i, f in enumerate(stack) if f.startswith("compare (")]
                    return (caller and sort and callback and
                            caller[-1] < sort[0] and sort[-1] < callback[0])

                ordered = sum(c for s, c in in_callback.items() if true_order(s))
                self.assertGreaterEqual(ordered, 0.9 * total(in_callback),
                                        f"{python}: {ordered} of {total(in_callback)} in order:\n"
                                        f"{summarize(in_callback)}")
                tried.append(f"{python} {ordered}/{total(in_callback)}")
        print(f"true order: {'; '.join(tried)}")

    def test_python_312_perf_trampolines_named_from_the_perf_map(self):
        # -X perf: every Python call goes through a trampoline in anonymous
        # memory, named in /tmp/perf-PID.map, with frame pointers.
        python = next((p for p in callback_pythons() if p.endswith("python3.12")), None)
        if python is None:
            self.skipTest("no pyenv python3.12")
        script = os.path.join(self.tmp, "perf_callback.py")
        with open(script, "w") as f:
            f.write(CALLBACK)
        recording = record(["--native", "-r", str(RATE), "--", python, "-X", "perf", script],
                           self.tmp, name="perf312")
        self.assertRecorded(recording)
        stacks = {s: c for s, c in recording.stacks.items() if s and s[0].startswith("python3")}
        named = {s: c for s, c in stacks.items()
                 if any(f.startswith("py::compare:") for f in s)}
        self.assertGreater(total(named), 0.3 * total(stacks), summarize(stacks))
        # The walk goes on through the trampolines: the Python caller is there.
        whole = sum(c for s, c in named.items() if any(f.startswith("sort_with_qsort (")
                                                       for f in s))
        self.assertGreaterEqual(whole, 0.9 * total(named), summarize(named))
        # The trampolines' memory is mapped after the program starts: the
        # walks that meet it before its mappings are read again end [unknown].
        unknown = sum(c for s, c in named.items() if "[unknown]" in s)
        self.assertLessEqual(unknown, 0.1 * total(named), summarize(named))
        # ... in true order: the trampoline lies between the eval loop that
        # called compare and compare itself.
        def in_order(stack):
            callers = [i for i, f in enumerate(stack) if f.startswith("sort_with_qsort (")]
            compare = next(i for i, f in enumerate(stack) if f.startswith("py::compare:"))
            return bool(callers) and compare > max(callers)
        ordered = sum(c for s, c in named.items() if in_order(s))
        self.assertGreaterEqual(ordered, 0.9 * total(named), summarize(named))


class NativeUnwindDaemonTest(BpfTestCase):
    """The daemon walks CPython's native stacks by default; its config turns it off."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        import speedscope_render  # the pprof decoder's node modules
        speedscope_render.ensure_node_modules()

    def setUp(self):
        if not os.access(DEBIAN_PYTHON, os.X_OK):
            self.skipTest(f"{DEBIAN_PYTHON} is not installed")
        self.dir = tempfile.mkdtemp(dir=self.tmp)
        script = os.path.join(self.dir, "callback.py")
        with open(script, "w") as f:
            f.write(CALLBACK.replace("sort_with_qsort(2)", "sort_with_qsort(60)"))
        self.child = subprocess.Popen([DEBIAN_PYTHON, script])
        self.addCleanup(self.child.wait)
        self.addCleanup(self.child.kill)

    def samples_of_child(self, config):
        # Imported here: test_daemon's helpers need node, which only these tests use.
        from test_daemon import Daemon, decode_pprof, metric
        daemon = Daemon(self.dir, ("--window", "2"), config)
        self.addCleanup(daemon.stop)
        if config is None:
            # The child's tables are built once the daemon has seen it: its
            # walks are whole from then on (a loaded machine takes longer).
            daemon.wait_for_metrics("the unwind tables of the interpreter, libc, ctypes...",
                                    lambda text: (metric(text, "pystrobe_native_unwind_tables")
                                                  or 0) >= 4, timeout=60)
        # The two windows after the one in progress: the child's CPU time over
        # them (its own clock, from the cut that starts them to the one that
        # ends them) is what their sample count is judged by.
        cut = len(daemon.profiles())
        daemon.wait_for_profiles(cut + 1, timeout=60)
        clock = CpuClock(self.child.pid)
        paths = daemon.wait_for_profiles(cut + 3, timeout=60)[cut + 1:cut + 3]
        clock.stop()
        # Scraped after those files were written: its counters include them.
        self.metrics = daemon.metrics()
        self.metric = lambda name, **labels: metric(self.metrics, name, **labels)
        mine = []
        cpu_ns = 0  # the CPU time those samples stand for
        for path in paths:
            for sample in decode_pprof(path).get("samples", []):
                labels = sample.get("labels") or sample.get("label") or {}
                pid = labels.get("pid") if isinstance(labels, dict) else next(
                    (int(l.get("num", l.get("str", 0))) for l in labels
                     if l.get("key") == "pid"), None)
                if pid is not None and int(pid) == self.child.pid:
                    # A stack once per sample it stands for.
                    names = [frame["name"] for frame in sample["stack"]]
                    mine.extend([names] * int(sample["values"][0]))
                    cpu_ns += int(sample["values"][1])
        # Judged by time, not by count: at the daemon's 19 Hz each CPU's rate
        # is drawn anew every second or two (sampling_clock.h), so the count
        # in 4 s moves with two or three draws (13 to 56 for the same
        # CPU time, in CI and here), while each sample's interval makes the
        # time exact on average.
        self.assertGreater(cpu_ns / 1e9, 0.5 * clock.cpu,
                           f"{len(mine)} samples of {self.child.pid} standing for "
                           f"{cpu_ns / 1e9:.2f} s; it used {clock.cpu:.2f} s of CPU in "
                           f"{clock.wall:.2f} s (its own clock); the daemon counted:\n" +
                           "\n".join(line for line in self.metrics.splitlines()
                                     if line.startswith(("pystrobe_samples_total",
                                                         "pystrobe_python_samples_total",
                                                         "pystrobe_dropped_total"))
                                     and not line.endswith(" 0")))
        return mine

    def test_daemon_shows_cpython_native_stacks_in_true_order(self):
        mine = self.samples_of_child(None)

        def true_order(leaf_first):
            names = list(reversed(leaf_first))
            caller = [i for i, n in enumerate(names) if n.startswith("sort_with_qsort")]
            sort = [i for i, n in enumerate(names) if n.startswith("qsort")]
            callback = [i for i, n in enumerate(names) if n.startswith("compare")]
            return caller and sort and callback and caller[-1] < sort[0] < callback[0]

        ordered = sum(1 for stack in mine if true_order(stack))
        self.assertGreaterEqual(ordered, 0.5 * len(mine), mine[:5])
        # Tables for the interpreter, libc, ctypes, libffi...: counted.
        self.assertGreaterEqual(self.metric("pystrobe_native_unwind_tables"), 4)
        self.assertGreater(self.metric("pystrobe_native_unwind_table_bytes"), 100000)
        # Each sample read in true order was a whole walk, and counted.
        self.assertGreaterEqual(self.metric("pystrobe_native_walks_total", outcome="complete"),
                                ordered)

    def test_native_stacks_false_keeps_python_frames_only(self):
        mine = self.samples_of_child("python:\n  native_stacks: false\n")
        with_qsort = [s for s in mine if any(n.startswith("qsort") for n in s)]
        self.assertEqual(with_qsort, [])
        self.assertEqual(self.metric("pystrobe_native_walks_total", outcome="complete"), 0)
        self.assertTrue(any(any(n.startswith("compare") for n in s) for s in mine), mine[:5])


CALLBACK = textwrap.dedent("""
    import ctypes
    import time

    libc = ctypes.CDLL("libc.so.6")
    COMPARE = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_int),
                               ctypes.POINTER(ctypes.c_int))

    def compare(a, b):
        x = 0
        for i in range(200):
            x += i
        return a[0] - b[0]

    compare_c = COMPARE(compare)

    def sort_with_qsort(seconds):
        values = (ctypes.c_int * 500)()
        end = time.time() + seconds
        while time.time() < end:
            for i in range(500):
                values[i] = (i * 7919) % 500
            libc.qsort(values, 500, ctypes.sizeof(ctypes.c_int), compare_c)

    sort_with_qsort(2)
""")


def callback_pythons():
    """Debian's python3.11, pyenv's 3.8 to 3.13 and Debian unstable's 3.14 and 3.15
    that are installed."""
    found = [DEBIAN_PYTHON] if os.access(DEBIAN_PYTHON, os.X_OK) else []
    root = subprocess.run(["pyenv", "root"], capture_output=True, text=True).stdout.strip() \
        if subprocess.run(["which", "pyenv"], capture_output=True).returncode == 0 else ""
    versions = os.path.join(root or os.path.expanduser("~/.pyenv"), "versions")
    for minor in range(8, 14):
        candidates = sorted(d for d in (os.listdir(versions) if os.path.isdir(versions) else [])
                            if d.startswith(f"3.{minor}."))
        missing = True
        for version in candidates:
            path = os.path.join(versions, version, "bin", f"python3.{minor}")
            if os.access(path, os.X_OK):
                found.append(path)
                missing = False
                break
        if missing:
            print(f"skipped: no pyenv python3.{minor}")
    # Debian unstable's 3.14 and 3.15 (a chroot): stripped PGO builds whose eval
    # loop runs mostly in a cold part without a symbol of its own.
    # And the free-threaded builds: no GIL, threads truly in parallel.
    found += [python.executable for python in installed_pythons(with_free_threaded=True)
              if python.in_chroot or python.free_threaded]
    return found


if __name__ == "__main__":
    unittest.main()
