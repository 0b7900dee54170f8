"""Helpers for the CPython end-to-end tests (test_dump.py, test_record_python.py):
which interpreters this machine has, and Python workloads that announce
themselves with a JSON line followed by "ready".

Interpreters: Debian's /usr/bin/python3.11 always, and each pyenv 3.8 to 3.13
under $PYENV_ROOT (default /root/.pyenv) that exists, Debian unstable's 3.14 and
3.15 (run in the chroot scripts/test-pythons.sh makes, as in a container) and
the free-threaded 3.13t, 3.14t and 3.15t it builds, and pyenv's 2.7, 3.6 and
3.7 for the tests whose workloads run there (installed_pythons(with_old=True));
the missing ones are named by `skipped_pythons()` so a run says what it did
not cover. PYSTROBE_TEST_PYTHONS=word,word narrows the set (see below).
"""

import json
import os
import subprocess
import sys
import threading

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
PYTHON_WORKLOADS = os.path.join(REPO, "tests", "workloads", "python", "e2e")
PYENV_ROOT = os.environ.get("PYENV_ROOT", "/root/.pyenv")
PYENV_VERSIONS = ("3.8.18", "3.9.18", "3.10.13", "3.11.7", "3.12.1", "3.13.0")
# The versions without _PyRuntime's modern layout (2.7, 3.6) or with it new (3.7).
OLD_PYENV_VERSIONS = ("2.7.18", "3.6.15", "3.7.16")
# scripts/test-pythons.sh: the chroot's launchers and the free-threaded builds.
TEST_PYTHONS_ROOT = "/opt/pystrobe-test"
SID_MINORS = (14, 15)
FREE_THREADED_MINORS = (13, 14, 15)


class Python:
    def __init__(self, label, executable, minor, pyenv_prefix=None, major=3,
                 free_threaded=False, in_chroot=False):
        self.label = label            # "debian 3.11", "pyenv 3.9.18", "sid 3.14", "3.14t"
        self.executable = executable  # absolute path
        self.major = major
        self.minor = minor            # <major>.<minor>
        self.pyenv_prefix = pyenv_prefix  # the installation prefix, for libpython
        self.free_threaded = free_threaded  # --disable-gil: no GIL, threads truly parallel
        self.in_chroot = in_chroot    # runs in another root, as in a container

    @property
    def old(self):
        """2.7, 3.6 or 3.7."""
        return (self.major, self.minor) < (3, 8)

    def __repr__(self):
        return self.label


def _find_pythons():
    found, missing = [], []
    if os.access("/usr/bin/python3.11", os.X_OK):
        found.append(Python("debian 3.11", "/usr/bin/python3.11", 11))
    else:
        missing.append("debian /usr/bin/python3.11")
    for version in OLD_PYENV_VERSIONS + PYENV_VERSIONS:
        prefix = os.path.join(PYENV_ROOT, "versions", version)
        major, minor = (int(part) for part in version.split(".")[:2])
        exe = os.path.join(prefix, "bin", f"python{major}")
        if os.access(exe, os.X_OK):
            found.append(Python(f"pyenv {version}", exe, minor, prefix, major))
        else:
            missing.append(f"pyenv {version} ({exe} not installed)")
    for minor in SID_MINORS:
        launcher = os.path.join(TEST_PYTHONS_ROOT, "bin", f"python3.{minor}")
        if os.access(launcher, os.X_OK):
            found.append(Python(f"sid 3.{minor}", launcher, minor, in_chroot=True))
        else:
            missing.append(f"sid 3.{minor} ({launcher} missing: run scripts/test-pythons.sh)")
    for minor in FREE_THREADED_MINORS:
        prefix = os.path.join(TEST_PYTHONS_ROOT, f"3.{minor}t")
        exe = os.path.join(prefix, "bin", f"python3.{minor}t")
        if os.access(exe, os.X_OK):
            found.append(Python(f"3.{minor}t", exe, minor, free_threaded=True))
        else:
            missing.append(f"free-threaded 3.{minor}t ({exe} missing: run scripts/test-pythons.sh)")
    return found, missing


_PYTHONS, _MISSING = _find_pythons()
# PYSTROBE_TEST_PYTHONS="debian,3.9" runs only the interpreters whose label
# contains one of the words (for quick runs); the others are named as skipped.
if os.environ.get("PYSTROBE_TEST_PYTHONS"):
    _words = os.environ["PYSTROBE_TEST_PYTHONS"].split(",")
    _MISSING += [f"{p.label} (not in PYSTROBE_TEST_PYTHONS)" for p in _PYTHONS
                 if not any(w in p.label for w in _words)]
    _PYTHONS = [p for p in _PYTHONS if any(w in p.label for w in _words)]


def installed_pythons(with_old=False, with_free_threaded=False):
    """The interpreters to test: 3.8+, and 2.7, 3.6 and 3.7 too when `with_old`
    (for tests whose workloads run there, the ones importing portable.py), and
    the free-threaded builds when `with_free_threaded` (for what reads them:
    stacks, threads, lines, the GIL's absence, dump; not yet asyncio or imports)."""
    return [p for p in _PYTHONS if (with_old or not p.old)
            and (with_free_threaded or not p.free_threaded)]


def one_of_each_kind(pythons):
    """Of `pythons`, the first of each kind that pystrobe finds differently, for
    the tests of what the version does not change (attaching to a running
    program, following its children, the frames' text, an embedding program):
    Python 2; by pystrobe's own tables, 3.6 to 3.10 (frame objects) and 3.11
    and 3.12 (interpreter frames); by the debug offsets the runtime publishes,
    3.13+; each as a static executable, from a shared libpython, in another
    root, free-threaded. The tests of the frames themselves (shares, threads,
    lines, depth, the GIL) run on every interpreter."""
    kinds, chosen = set(), []
    for python in pythons:
        found_by = ("2" if python.major == 2 else "frame objects" if python.minor <= 10 else
                    "interpreter frames" if python.minor <= 12 else "debug offsets")
        kind = (found_by, python.pyenv_prefix is not None, python.in_chroot,
                python.free_threaded)
        if kind not in kinds:
            kinds.add(kind)
            chosen.append(python)
    return chosen


def skipped_pythons():
    return list(_MISSING)


def report_skipped_pythons(test_name):
    """Prints (to stderr, so unittest -v shows it) the interpreters not covered."""
    for missing in _MISSING:
        print(f"SKIPPED CPython for {test_name}: {missing}", file=sys.stderr)


def python_workload(name):
    path = os.path.join(PYTHON_WORKLOADS, name)
    if not os.path.exists(path):
        raise AssertionError(f"Python workload {path} is missing")
    return path


def frame_name(qualname, co_name, minor):
    """How a Python frame is named: co_qualname on 3.11+, co_name before."""
    return qualname if minor >= 11 else co_name


class PythonWorkload:
    """A Python program that prints one JSON line, then "ready", then runs on.

    `info` is the JSON it printed. A reader thread drains the rest of its
    stdout (a later JSON line is kept in `final`) and reaps it when it exits.
    """

    def __init__(self, argv, timeout=60, cwd=None, env=None):
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, cwd=cwd, env=env)
        self.pid = self.proc.pid
        self.info = None
        self.final = None
        self._stderr = ""
        lines = []
        ready = threading.Event()

        def read():
            for line in self.proc.stdout:
                line = line.rstrip("\n")
                if not ready.is_set():
                    if line == "ready":
                        ready.set()
                    else:
                        lines.append(line)
                elif line.startswith("{"):
                    self.final = json.loads(line)
            ready.set()
            self._stderr = self.proc.stderr.read()
            self.proc.stdout.close()
            self.proc.stderr.close()
            self.proc.wait()

        self._reader = threading.Thread(target=read, daemon=True)
        self._reader.start()
        if not ready.wait(timeout) or self.proc.poll() is not None and not lines:
            # Whether it ended or was still starting, and what it said: the
            # reader has its stderr once it has reaped it.
            exited = self.proc.poll()
            self.kill()
            how = (f"exited with status {exited}" if exited is not None
                   else f"did not print ready within {timeout} s")
            raise AssertionError(f"{argv} {how}; its stdout: {lines!r}; "
                                 f"its stderr: {self._stderr!r}")
        for line in lines:
            if line.startswith("{"):
                self.info = json.loads(line)

    def running(self):
        return self.proc.poll() is None

    def wait(self, timeout=60):
        self._reader.join(timeout)
        if self._reader.is_alive():
            raise AssertionError(f"pid {self.pid} still runs after {timeout}s")
        return self.final

    def stderr(self):
        return self._stderr

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self._reader.join(5)
