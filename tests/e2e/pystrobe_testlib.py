"""Shared helpers for pystrobe's end-to-end tests: run the real binary, start
the native workloads, parse folded output, and decide whether BPF is usable.

Paths come from the environment (tests/e2e/CMakeLists.txt sets them for ctest):
  PYSTROBE_BIN            the pystrobe binary
  PYSTROBE_WORKLOADS_DIR  directory holding the native workloads (cpu_split, ...)
  PYSTROBE_SKIP_BPF_TESTS=1  skip, instead of fail, the tests that need BPF when
                          BPF cannot be used here (not root, no permission).
"""

import atexit
import collections
import json
import os
import re
import resource
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))

PYSTROBE_BIN = os.environ.get("PYSTROBE_BIN", os.path.join(REPO, "build", "pystrobe"))
WORKLOADS_DIR = os.environ.get(
    "PYSTROBE_WORKLOADS_DIR", os.path.join(REPO, "build", "tests", "workloads", "native"))
CHROMIUM_RENDER = os.path.join(HERE, "chromium_render.py")

EXIT_USAGE = 2


def _print_cpu_used():
    """The CPU this test file used, its children's included, and its wall time:
    the suite is CPU-bound on 2 cores, so this is what a file costs it."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime
    print(f"pystrobe e2e: {cpu:.1f} s of CPU in {time.monotonic() - _STARTED:.1f} s",
          file=sys.stderr)


_STARTED = time.monotonic()
atexit.register(_print_cpu_used)
PROCESS_FRAME = re.compile(r"^(?P<comm>.*) \((?P<pid>\d+)\)$")
# "<name> tid=<tid>", or "<name> [interpreter <id>] tid=<tid>" in a sub-interpreter.
THREAD_FRAME = re.compile(
    r"^(?P<name>.*?)(?: \[interpreter (?P<interpreter>\d+)\])? tid=(?P<tid>\d+)$")
KERNEL_SUFFIX = "_[k]"


def workload(name):
    """Absolute path of a native workload, failing clearly when it is not built."""
    path = os.path.join(WORKLOADS_DIR, name)
    if not os.access(path, os.X_OK):
        raise AssertionError(
            f"workload {path} is missing: build the native_workloads target "
            f"(or set PYSTROBE_WORKLOADS_DIR)")
    return path


# --- running pystrobe -------------------------------------------------------------

class Recording:
    """What one `pystrobe record` run left behind."""

    def __init__(self, args, returncode, stdout, stderr, output_path, elapsed, summary_path=None):
        self.args = args
        self.returncode = returncode
        self.stdout = stdout
        self.stderr = stderr
        self.output_path = output_path
        self.elapsed = elapsed
        self.summary_path = summary_path
        self._stacks = None
        self._nanoseconds = None

    def describe(self):
        return (f"`pystrobe {' '.join(self.args)}` exited {self.returncode} after "
                f"{self.elapsed:.1f}s; stderr:\n{self.stderr}")

    @property
    def stacks(self):
        """{tuple of frames: count} parsed from a folded output file."""
        if self.output_path.endswith(".speedscope"):
            raise AssertionError(f"no counts in {self.output_path}: read its nanoseconds")
        if self._stacks is None:
            with open(self.output_path, encoding="utf-8", errors="replace") as f:
                self._stacks = parse_folded(f.read())
        return self._stacks

    @property
    def nanoseconds(self):
        """{tuple of frames: nanoseconds}, the time each stack's samples stand for,
        parsed from a speedscope output file (record(..., fmt="speedscope")).

        A share or a total of CPU time is judged by these, not by counts: on a
        virtual machine whose host steals its CPU, a tick due while the guest did
        not run comes late, as one sample that weighs the whole interval, while
        the workload's own CPU clock counts the stolen time as its own."""
        if not self.output_path.endswith(".speedscope"):
            raise AssertionError(f"no weights in {self.output_path}: record with fmt='speedscope'")
        if self._nanoseconds is None:
            with open(self.output_path, encoding="utf-8") as f:
                self._nanoseconds = parse_speedscope(json.load(f))
        return self._nanoseconds

    @property
    def summary(self):
        """The summary's counters, from --summary-json (see record())."""
        if self.summary_path is None or not os.path.exists(self.summary_path):
            raise AssertionError(f"no --summary-json written:\n{self.describe()}")
        with open(self.summary_path) as f:
            return json.load(f)

    def reported_samples(self):
        """The sample count pystrobe reported in its summary."""
        return self.summary["samples"]

    def written_path(self):
        """The path of the `pystrobe: wrote PATH` line, or None."""
        match = re.search(r"^pystrobe: wrote (.+)$", self.stderr, re.M)
        return match.group(1) if match else None


def run_pystrobe(args, timeout=60, cwd=None):
    """Runs `pystrobe ARGS` to completion; returns (returncode, stdout, stderr, elapsed)."""
    start = time.monotonic()
    proc = subprocess.run([PYSTROBE_BIN] + list(args), capture_output=True, text=True,
                          timeout=timeout, cwd=cwd)
    return proc.returncode, proc.stdout, proc.stderr, time.monotonic() - start


def read_lines_until(stream, pattern, timeout=30):
    """Reads lines of a child's `stream` until one matches `pattern`, for a test
    that must wait for a state the child announces (e.g. "recording") rather
    than sleep and hope. Returns the lines read; raises AssertionError on
    timeout or end of stream."""
    lines = []
    found = threading.Event()

    def read():
        for line in stream:
            lines.append(line)
            if re.search(pattern, line):
                found.set()
                return

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(timeout)
    if not found.is_set():
        raise AssertionError(f"no line matching {pattern!r} within {timeout}s: {''.join(lines)!r}")
    return lines


def record(args, output_dir, fmt="folded", name="profile", timeout=60, when_recording=None):
    """Runs `pystrobe record -f FMT -o DIR/NAME.FMT --summary-json DIR/NAME.summary.json
    ARGS` and returns a Recording (its counters in .summary).

    `when_recording(proc)`, if given, is called with pystrobe's Popen once it
    says it samples ("pystrobe: recording ..."), for a test that starts
    something the recording must see from its beginning, or ends it (SIGINT)
    once something has happened."""
    output = os.path.join(output_dir, f"{name}.{fmt}")
    summary = os.path.join(output_dir, f"{name}.summary.json")
    full = ["record", "-f", fmt, "-o", output, "--summary-json", summary] + list(args)
    if when_recording is None:
        returncode, stdout, stderr, elapsed = run_pystrobe(full, timeout=timeout)
        return Recording(full, returncode, stdout, stderr, output, elapsed, summary)
    start = time.monotonic()
    proc = subprocess.Popen([PYSTROBE_BIN] + full, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        head = read_lines_until(proc.stderr, r"^pystrobe: recording ", timeout=timeout)
        when_recording(proc)
        stdout, stderr = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    return Recording(full, proc.returncode, stdout, "".join(head) + stderr, output,
                     time.monotonic() - start, summary)


# --- folded output ---------------------------------------------------------------

def parse_folded(text):
    """Parses folded stacks ("a;b;c 12" per line) into {("a", "b", "c"): 12}.

    Raises ValueError on a line that is not in that form: malformed output is a
    failure of its own, not something to skip over.
    """
    stacks = collections.Counter()
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        stack, sep, count = line.rpartition(" ")
        if not sep or not stack or not count.isdigit():
            raise ValueError(f"folded line {number} is malformed: {line!r}")
        stacks[tuple(stack.split(";"))] += int(count)
    return dict(stacks)


def process_pid(stack):
    """The pid in the stack's process frame (its first frame), or None."""
    match = PROCESS_FRAME.match(stack[0]) if stack else None
    return int(match.group("pid")) if match else None


def parse_speedscope(document):
    """{tuple of frames: nanoseconds} of a speedscope document as pystrobe writes
    it: a sampled profile per process, named as the folded output's first frame,
    with an entry per stack (frame indices from the root) and its weight."""
    frames = [frame["name"] for frame in document["shared"]["frames"]]
    nanoseconds = collections.Counter()
    for profile in document["profiles"]:
        if profile["unit"] != "nanoseconds" or len(profile["samples"]) != len(profile["weights"]):
            raise ValueError(f"profile {profile['name']!r} is not one of weighed stacks")
        for stack, weight in zip(profile["samples"], profile["weights"]):
            nanoseconds[(profile["name"],) + tuple(frames[i] for i in stack)] += weight
    return nanoseconds


def stacks_of_pid(stacks, pid):
    return {s: c for s, c in stacks.items() if process_pid(s) == pid}


def total(stacks):
    return sum(stacks.values())


def share(stacks, frame):
    """Fraction of the samples in `stacks` whose stack contains `frame`."""
    all_samples = total(stacks)
    if all_samples == 0:
        return 0.0
    return sum(c for s, c in stacks.items() if frame in s) / all_samples


def pids_with_frame(stacks, frame):
    return {process_pid(s) for s in stacks if frame in s}


def summarize(stacks, limit=15):
    """The heaviest stacks, for assertion messages."""
    top = sorted(stacks.items(), key=lambda item: -item[1])[:limit]
    return "\n".join(f"  {count:6d} {';'.join(stack)}" for stack, count in top) or "  (none)"


# --- workloads -------------------------------------------------------------------

def process_cpu_seconds(pid):
    """utime + stime of a process, from /proc/PID/stat (also of one that has
    exited and is not reaped yet)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class CpuClock:
    """A process's CPU time and the wall time over the same span, for truths
    that depend on how much CPU the machine gave it (see busy_loop_verdicts)."""

    def __init__(self, pid):
        self.pid = pid
        self.cpu_start = process_cpu_seconds(pid)
        self.wall_start = time.monotonic()
        self.cpu = self.wall = None

    def stop(self):
        self.cpu = process_cpu_seconds(self.pid) - self.cpu_start
        self.wall = time.monotonic() - self.wall_start
        return self


def busy_loop_verdicts(cpu_seconds, wall_seconds):
    """The verdicts `stat` may give a loop that only computes, from its own
    clocks: cpu-bound while it ran most of the time; cpu-starved when the
    machine's load kept it waiting for a CPU longer than it ran; either near
    the line between the two."""
    ran = cpu_seconds / wall_seconds
    if ran >= 0.6:
        return {"cpu-bound"}
    if ran <= 0.4:
        return {"cpu-starved"}
    return {"cpu-bound", "cpu-starved"}


def printed_cpu_seconds(text):
    """The CPU time a workload says it used ("cpu_seconds S" on a line of its
    output), for judging a sample count by what the machine gave it."""
    match = re.search(r"^cpu_seconds ([0-9.]+)$", text, re.M)
    if match is None:
        raise AssertionError(f"the workload printed no cpu_seconds line: {text!r}")
    return float(match.group(1))


def wait_for(what, probe, timeout=30, interval=0.1):
    """Polls `probe()` until it returns (True, seen); returns that `seen`.

    For a test that must wait for a state the program announces (a file, a
    metric, a window written) rather than sleep and hope. The timeout is a
    liveness limit, not a judgement of speed: on expiry it raises
    AssertionError naming `what` it waited for and the last `seen`."""
    start = time.monotonic()
    deadline = start + timeout
    while True:
        done, seen = probe()
        if done:
            return seen
        if time.monotonic() >= deadline:
            raise AssertionError(f"waited {time.monotonic() - start:.1f}s for {what}; "
                                 f"last saw: {seen!r}"[:6000])
        time.sleep(interval)


def sample_floor(cpu_seconds, rate_hz, fraction=0.5):
    """The fewest samples a process that used `cpu_seconds` of CPU may get at
    `rate_hz`: a fraction of what its CPU time stands for, so that a test holds
    on a busy machine (where the workload gets less CPU) as on a quiet one."""
    return fraction * rate_hz * cpu_seconds


def samples_before_native_tables(summary):
    """How many samples the native walk took before pystrobe had loaded the
    unwind tables for the code they were in, as the recording counted them
    (`dropped.native_table_absent` and `native_mappings_stale`). Each ends at
    its pc ([unknown] after it with --native; a CPython stack's [native]
    leaf without); how many there are depends on how soon a loaded machine
    lets pystrobe load the tables, so a share judged on whole stacks leaves
    them out."""
    dropped = summary["dropped"]
    return dropped["native_table_absent"] + dropped["native_mappings_stale"]


class Workload:
    """A workload started with --announce; knows its pid once it is running.

    A thread reads its stdout and reaps it as soon as it exits, as a shell would:
    an exited but unreaped child stays a zombie with a /proc entry.
    """

    def __init__(self, name, args=(), announce=True):
        self.name = name
        self.proc = subprocess.Popen([workload(name)] + list(args) + (["--announce"] if announce else []),
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.pid = self.proc.pid
        if announce:
            line = self.proc.stdout.readline()
            if line.strip() != f"ready {self.pid}":
                self.kill()
                self.proc.stdout.close()
                raise AssertionError(f"{name} did not start: {line!r}")
        self._output = ""
        self.cpu_seconds_at_exit = None
        self._reaper = threading.Thread(target=self._reap, daemon=True)
        self._reaper.start()

    def _reap(self):
        with self.proc.stdout:
            self._output = self.proc.stdout.read()
        # Waits for the exit without reaping, so that the CPU time it used can
        # still be read (an exited process keeps it until reaped).
        try:
            os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOWAIT)
            self.cpu_seconds_at_exit = process_cpu_seconds(self.pid)
        except (ChildProcessError, OSError):
            pass  # already reaped by kill()
        self.proc.wait()

    def running(self):
        if self.proc.returncode is not None:
            return False
        try:
            return os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None
        except ChildProcessError:
            return False

    def cpu_seconds(self):
        """The CPU time it has used so far, or in all once it has exited."""
        if self.cpu_seconds_at_exit is not None:
            return self.cpu_seconds_at_exit
        return process_cpu_seconds(self.pid)

    def wait(self, timeout=30):
        """Waits for it to exit by itself; returns what it printed after 'ready'."""
        self._reaper.join(timeout)
        if self._reaper.is_alive():
            raise AssertionError(f"{self.name} ({self.pid}) still runs after {timeout}s")
        return self._output

    def stop(self, timeout=10):
        """SIGTERM, then waits; returns what it printed after 'ready'."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.wait(timeout)

    def kill(self):
        if self.running():
            self.proc.kill()
        self._reaper.join(30)
        self.proc.wait()


def read_split_json(text):
    """The JSON line cpu_split prints at its end."""
    for line in text.splitlines():
        if line.startswith("{"):
            return json.loads(line)
    raise AssertionError(f"cpu_split printed no result: {text!r}")


# --- the BPF precondition ----------------------------------------------------------

_bpf_verdict = None  # None until checked; then (usable, reason)

# What pystrobe says when this machine, not pystrobe, is the problem: a missing
# capability or a bpf()/perf_event_open() the kernel does not permit. A program
# the verifier rejects (EACCES too) is a bug in pystrobe and must fail the tests.
_BPF_UNAVAILABLE = re.compile(r"CAP_[A-Z_]+|capabilit|operation not permitted|EPERM|not root",
                              re.I)
_PYSTROBE_BUG = re.compile(r"verifier|rejected", re.I)


def _check_bpf():
    if os.geteuid() != 0:
        return False, f"not root (euid {os.geteuid()}); BPF tests need root"
    if not os.access(PYSTROBE_BIN, os.X_OK):
        # Not a reason to skip: the binary under test is missing.
        raise AssertionError(f"pystrobe binary {PYSTROBE_BIN} is missing (set PYSTROBE_BIN)")
    with tempfile.TemporaryDirectory(prefix="pystrobe-probe-") as tmp:
        out = os.path.join(tmp, "probe.folded")
        try:
            rc, _, err, _ = run_pystrobe(
                ["record", "-d", "0.2", "-f", "folded", "-o", out, "--all"], timeout=60)
        except subprocess.TimeoutExpired:
            raise AssertionError("`pystrobe record -d 0.2 --all` did not finish within 60 s")
        if rc == 0:
            return True, ""
        if _BPF_UNAVAILABLE.search(err) and not _PYSTROBE_BUG.search(err):
            return False, f"`pystrobe record -d 0.2 --all` cannot use BPF here: {err.strip()}"
        # Anything else is a bug in pystrobe, not a property of this machine.
        raise AssertionError(f"`pystrobe record -d 0.2 --all` failed (exit {rc}): {err.strip()}")


def require_bpf(test_case):
    """Fails the test when BPF is unusable, or skips it if PYSTROBE_SKIP_BPF_TESTS=1."""
    global _bpf_verdict
    if _bpf_verdict is None:
        _bpf_verdict = _check_bpf()
    usable, reason = _bpf_verdict
    if usable:
        return
    if os.environ.get("PYSTROBE_SKIP_BPF_TESTS") == "1":
        what = f"{test_case.__module__}.{test_case.__name__}"
        message = f"SKIPPED BPF test {what}: {reason} (PYSTROBE_SKIP_BPF_TESTS=1)"
        print(message, file=sys.stderr)
        raise unittest.SkipTest(message)
    raise AssertionError(f"{reason}; set PYSTROBE_SKIP_BPF_TESTS=1 to skip the BPF tests instead")


class BpfTestCase(unittest.TestCase):
    """Base for tests that run pystrobe for real: checks the BPF precondition once
    per class and gives each class a scratch directory."""

    @classmethod
    def setUpClass(cls):
        require_bpf(cls)
        cls._tmp = tempfile.TemporaryDirectory(prefix=f"pystrobe-{cls.__name__}-")
        cls.tmp = cls._tmp.name

    @classmethod
    def tearDownClass(cls):
        tmp = getattr(cls, "_tmp", None)
        if tmp is not None:
            tmp.cleanup()

    def assertRecorded(self, recording):
        """The run succeeded and said where it wrote its output."""
        self.assertEqual(recording.returncode, 0, recording.describe())
        self.assertTrue(os.path.exists(recording.output_path), recording.describe())
        self.assertEqual(recording.written_path(), os.path.abspath(recording.output_path),
                         recording.describe())

    def assertShareNear(self, stacks, frame, truth, tolerance=0.05):
        measured = share(stacks, frame)
        self.assertLessEqual(
            abs(measured - truth), tolerance,
            f"{frame}: {measured:.1%} of {total(stacks)} samples, truth {truth:.1%} "
            f"(tolerance {tolerance:.0%}); heaviest stacks:\n{summarize(stacks)}")
