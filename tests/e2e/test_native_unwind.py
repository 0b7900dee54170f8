"""Native stacks without frame pointers, walked in the kernel with unwind tables.

unwind_chain is built -O2 -fomit-frame-pointer, as distributions build, so a
frame-pointer walk sees its leaf and nothing else. With --native every sample
must read the whole chain the program is known to run, down to _start: a
recursion of known depth, a callback from libc's qsort, and a signal handler
on top of the loop it interrupted.
"""

import os
import subprocess
import textwrap
import unittest

from pystrobe_testlib import (KERNEL_SUFFIX, BpfTestCase, process_pid, record, summarize,
                              total, workload)

RATE = 499
# Samples that must read whole: the first sample or two of a process come
# before its mappings are read, and are walked with frame pointers.
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
        self.assertGreater(total(mine), seconds * RATE * 0.5, summarize(recording.stacks))
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


if __name__ == "__main__":
    unittest.main()
