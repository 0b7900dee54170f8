"""pystrobe record through a running daemon's control socket: the profile
comes from the daemon (no second copy of the BPF programs), a rate other than
the daemon's is refused clearly, garbage on the socket gets an error reply and
the daemon goes on serving /metrics and good requests, and a user who is
neither root nor in group pystrobe is refused (SO_PEERCRED); each request is
counted by kind and outcome in /metrics. stat through a daemon with restricted
targets answers for the processes its name patterns and cgroups target."""

import os
import pwd
import signal
import socket
import stat
import struct
import subprocess
import sys
import tempfile
import time

from pystrobe_testlib import (PYSTROBE_BIN, BpfTestCase, CpuClock, busy_loop_verdicts,
                              read_lines_until)
import test_daemon
from python_testlib import installed_pythons

BUSY = "import time\nend = time.time() + 120\nwhile time.time() < end: pass\n"
MAGIC = 0x42545350


def frame(type_, payload, magic=MAGIC, version=1, length=None):
    if length is None:
        length = len(payload)
    return struct.pack("<IHHII", magic, version, type_, length, 0) + payload


def read_reply(sock):
    """(type, payload) of the first frame the daemon sends back."""
    sock.settimeout(10)
    header = b""
    while len(header) < 16:
        chunk = sock.recv(16 - len(header))
        if not chunk:
            return None
        header += chunk
    magic, version, type_, length, _ = struct.unpack("<IHHII", header)
    payload = b""
    while len(payload) < length:
        payload += sock.recv(length - len(payload))
    return type_, payload.decode(errors="replace")


class DaemonControlTest(BpfTestCase):

    def setUp(self):
        self.dir = tempfile.mkdtemp(dir=self.tmp)
        os.chmod(self.dir, 0o755)
        self.socket = os.path.join(self.dir, "run", "pystrobe.sock")
        self._busy = None
        # Up (READY=1) means the control socket is there.
        self.daemon = test_daemon.Daemon(self.dir, ("--window", "2", "--socket", self.socket))
        self.addCleanup(self.daemon.stop)

    @property
    def busy(self):
        """A Python busy loop, for the tests that judge what was measured of
        it; started when first asked for, since it takes a core while it runs."""
        if self._busy is None:
            self._busy = subprocess.Popen([sys.executable, "-c", BUSY])
            self.addCleanup(self._busy.wait)
            self.addCleanup(self._busy.kill)
        return self._busy

    def idle(self):
        """A process that sleeps, for the tests that need a pid and no samples."""
        sleeper = subprocess.Popen(["sleep", "120"])
        self.addCleanup(sleeper.wait)
        self.addCleanup(sleeper.kill)
        return sleeper

    def record(self, *args):
        out = os.path.join(self.dir, f"out-{time.time()}.folded")
        result = subprocess.run([PYSTROBE_BIN, "record", "--socket", self.socket, "-f", "folded",
                                 "-o", out, *args], capture_output=True, text=True, timeout=60)
        return result, out

    def test_record_takes_the_profile_from_the_daemon(self):
        mode = stat.S_IMODE(os.stat(self.socket).st_mode)
        self.assertIn(mode, (0o600, 0o660), oct(mode))
        out = os.path.join(self.dir, "from-the-daemon.pb.gz")
        record = subprocess.Popen([PYSTROBE_BIN, "record", "--socket", self.socket, "-f",
                                   "pprof", "-o", out, "-p", str(self.busy.pid), "-d", "3"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        # The daemon says its rate when the recording begins: the busy loop's
        # clock runs from then, not from the client's start (a loaded machine
        # may run the loop while the request waits, and not in the window).
        announced = read_lines_until(record.stderr, "the daemon samples at", timeout=60)
        clock = CpuClock(self.busy.pid)
        _, err = record.communicate(timeout=60)
        clock.stop()
        err = "".join(announced) + err
        self.assertEqual(record.returncode, 0, err)
        self.assertIn(f"using the running daemon ({self.socket})", err)
        profile = test_daemon.decode_pprof(out)
        samples = profile.get("samples", [])
        count = sum(int(sample["values"][0]) for sample in samples)
        seconds = sum(int(sample["values"][1]) for sample in samples) / 1e9
        # The CPU time the samples stand for, against the loop's own clock:
        # the count moves with the daemon's random rate (each CPU's is drawn
        # in [0.5, 1.5] x 19 Hz every second or two, sampling_clock.h), the
        # time each sample's interval carries does not.
        self.assertGreater(seconds, 0.5 * clock.cpu,
                           (f"{count} samples for {seconds:.3f} s; the loop's own clock: "
                            f"{clock.cpu:.3f} s of CPU in {clock.wall:.3f} s", err))
        # The daemon's 19 Hz, not a rate of the client's own: at most 1.5 x 19
        # a second (86 in 3 s); 99 Hz would be about 300.
        self.assertLess(count, 150, err)
        self.assertEqual(test_daemon.pids_in(profile), {self.busy.pid})

        refused, _ = self.record("-p", str(self.busy.pid), "-d", "1", "--rate", "99")
        self.assertNotEqual(refused.returncode, 0)
        self.assertIn("the daemon samples at 19 Hz, not 99 Hz", refused.stderr)

    def test_garbage_gets_an_error_and_the_daemon_keeps_serving(self):
        cases = [
            b"garbage garbage garbage!",
            frame(1, b"all=1\n", magic=0xdeadbeef),
            frame(1, b"all=1\n", version=7),
            frame(1, b"", length=0xffffffff),
            frame(99, b"all=1\n"),
            frame(1, b"all=1\n", length=100),  # truncated payload
            frame(1, b"\x00\xff\x13 nonsense"),
            frame(1, b"pids=1\nall=1\n"),
            os.urandom(4096),
        ]
        for case in cases:
            with socket.socket(socket.AF_UNIX) as s:
                s.connect(self.socket)
                try:
                    s.sendall(case)
                    if case == frame(1, b"all=1\n", length=100):
                        s.shutdown(socket.SHUT_WR)
                except OSError:
                    pass  # the daemon may answer and close before reading it all
                reply = read_reply(s)
            self.assertIsNotNone(reply, case[:40])
            self.assertEqual(reply[0], 0x84, reply)
            self.assertIn("bad request", reply[1])
        self.assertIsNotNone(test_daemon.metric(self.daemon.metrics(), "pystrobe_samples_total"))
        result, _ = self.record("-p", str(self.idle().pid), "-d", "1")
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIsNone(self.daemon.proc.poll(), self.daemon.output())

    def request_as_nobody(self, type_, payload):
        """Sends one request as user nobody; the reply's payload is on stdout."""
        # Let anyone reach the socket file: what is left is SO_PEERCRED.
        os.chmod(self.socket, 0o666)
        for path in (self.tmp, self.dir, os.path.dirname(self.socket)):
            os.chmod(path, 0o755)
        nobody = pwd.getpwnam("nobody")
        code = ("import socket,struct,sys\n"
                "p=sys.argv[3].encode()\n"
                "s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])\n"
                "try: s.sendall(struct.pack('<IHHII',0x42545350,1,int(sys.argv[2]),len(p),0)+p)\n"
                "except OSError: pass  # refused before the request was read\n"
                "s.settimeout(10); print(s.recv(4096)[16:].decode())\n")

        def become_nobody():
            os.setgroups([])
            os.setgid(nobody.pw_gid)
            os.setuid(nobody.pw_uid)
        return subprocess.run(["/usr/bin/python3", "-c", code, self.socket, str(type_), payload],
                              capture_output=True, text=True, timeout=30,
                              preexec_fn=become_nobody)

    def test_a_user_neither_root_nor_in_group_pystrobe_is_refused(self):
        result = self.request_as_nobody(1, "all=1\n")
        self.assertIn("permission denied", result.stdout, result.stderr)
        self.assertIn("group pystrobe", result.stdout)
        text = self.control_metrics(lambda text: test_daemon.metric(
            text, "pystrobe_control_requests_total", kind="unknown",
            outcome="permission_denied") == 1)
        self.assertEqual(test_daemon.metric(text, "pystrobe_control_requests_total",
                                            kind="unknown", outcome="permission_denied"), 1)

    def control_metrics(self, until=lambda text: True, timeout=test_daemon.LIVENESS_S):
        """/metrics once `until(text)` holds (the daemon publishes every second)."""
        deadline = time.time() + timeout
        while True:
            text = self.daemon.metrics()
            if until(text) or time.time() > deadline:
                return text

    def test_the_control_sockets_requests_and_connections_are_in_the_metrics(self):
        def requests(text, kind, outcome):
            return test_daemon.metric(text, "pystrobe_control_requests_total", kind=kind,
                                      outcome=outcome)
        before = self.control_metrics(
            lambda text: test_daemon.metric(text, "pystrobe_control_socket_up") == 1)
        self.assertEqual(test_daemon.metric(before, "pystrobe_control_socket_up"), 1, before)
        result, _ = self.record("-p", str(self.idle().pid), "-d", "1")
        self.assertEqual(result.returncode, 0, result.stderr)
        for case in (frame(99, b"all=1\n"), frame(3, b"pid=1\n")):
            with socket.socket(socket.AF_UNIX) as s:
                s.connect(self.socket)
                s.sendall(case)
                s.shutdown(socket.SHUT_WR)
                self.assertEqual(read_reply(s)[0], 0x84)
        expected = {("record", "ok"): 1, ("unknown", "malformed"): 1, ("stat", "malformed"): 1}
        after = self.control_metrics(lambda text: all(
            requests(text, *key) >= requests(before, *key) + n for key, n in expected.items()))
        for key, n in expected.items():
            self.assertEqual(requests(after, *key), requests(before, *key) + n, key)
        self.assertEqual(requests(after, "record", "error"), requests(before, "record", "error"))
        self.assertGreaterEqual(
            test_daemon.metric(after, "pystrobe_control_connections_total"),
            test_daemon.metric(before, "pystrobe_control_connections_total") + 3)
        self.assertEqual(test_daemon.metric(after, "pystrobe_control_connections_open"), 0)
        check = subprocess.run(["promtool", "check", "metrics"], input=after, text=True,
                               capture_output=True, timeout=30)
        self.assertEqual(check.returncode, 0, check.stdout + check.stderr)

    # stat and top through the daemon (kStat, kTop).

    def run_pystrobe(self, *args):
        return subprocess.run([PYSTROBE_BIN, *args], capture_output=True, text=True, timeout=60)

    def test_stat_asks_the_daemon(self):
        import json
        clock = CpuClock(self.busy.pid)
        result = self.run_pystrobe("stat", "--socket", self.socket, "--pid", str(self.busy.pid),
                                   "-d", "2", "--json")
        clock.stop()
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn(f"using the running daemon ({self.socket})", result.stderr)
        report = json.loads(result.stdout)
        self.assertEqual(report["pid"], self.busy.pid)
        self.assertIn(report["verdict"], busy_loop_verdicts(clock.cpu, clock.wall), report)
        cpu = report["cpu_user_seconds"] + report["cpu_system_seconds"]
        # The clock spans the whole command, the report its 2 s window: the
        # truth is the clock's CPU less what the one busy thread can have run
        # outside the window (at most that wall time; more on a loaded machine,
        # where the client takes longer). Within 10% of that, and a tick.
        outside = max(0.0, clock.wall - report["duration_seconds"])
        low, high = max(0.0, clock.cpu - outside), clock.cpu
        self.assertTrue(0.9 * low - 0.01 <= cpu <= 1.1 * high + 0.01,
                        (f"stat {cpu:.3f} s of CPU; by its own clock {clock.cpu:.3f} s in "
                         f"{clock.wall:.3f} s, {low:.3f} s to {high:.3f} s in the window",
                         report))
        if report["stacks_kind"].startswith("off-CPU"):
            # A cpu-starved verdict (a loaded machine) is shown with its
            # [runqueue] stacks, which a daemon without off_cpu: true lacks,
            # and says so.
            self.assertIn("off_cpu: true", report["stacks_note"], report)
        else:
            self.assertTrue(report["stacks"], report)

        clock = CpuClock(self.busy.pid)
        text = self.run_pystrobe("stat", "--socket", self.socket, "--pid", str(self.busy.pid),
                                 "-d", "1")
        clock.stop()
        self.assertEqual(text.returncode, 0, text.stderr)
        self.assertRegex(text.stdout, "verdict: (%s)" % "|".join(
            busy_loop_verdicts(clock.cpu, clock.wall)))

        gone = self.run_pystrobe("stat", "--socket", self.socket, "--pid", "4194000", "-d", "1")
        self.assertNotEqual(gone.returncode, 0)

    def test_top_asks_the_daemon(self):
        clock = CpuClock(self.busy.pid)
        result = self.run_pystrobe("top", "--socket", self.socket, "--once")
        clock.stop()
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn(f"using the running daemon ({self.socket})", result.stderr)
        self.assertIn("from the daemon", result.stdout)
        rows = [line.split() for line in result.stdout.splitlines()]
        busy = [row for row in rows if row and row[0] == str(self.busy.pid)]
        self.assertTrue(busy, result.stdout)
        # USR% over top's interval, against the share of a CPU it had meanwhile
        # (which the machine's load decides).
        self.assertGreater(float(busy[0][2]), 50 * clock.cpu / clock.wall,
                           (result.stdout, clock.cpu, clock.wall))

    def test_top_from_the_daemon_shows_no_gil_wait_for_a_free_threaded_cpython(self):
        python = next((p for p in installed_pythons(with_free_threaded=True) if p.free_threaded),
                      None)
        if python is None:
            self.skipTest("no free-threaded CPython (scripts/test-pythons.sh builds one)")
        spinner = subprocess.Popen([python.executable, "-c", BUSY])
        self.addCleanup(spinner.wait)
        self.addCleanup(spinner.kill)
        # The daemon knows the process's CPython once it has sampled it: top
        # asks again until the row is there (each --once is one interval).
        for _ in range(10):
            result = self.run_pystrobe("top", "--socket", self.socket, "--once", "--pid",
                                       str(spinner.pid))
            self.assertEqual(result.returncode, 0, result.stderr)
            self.assertIn("using the running daemon", result.stderr)
            lines = result.stdout.splitlines()
            header = next([w for w in line.split() if not w.startswith("\x1b")]
                          for line in lines if "GIL%" in line)
            rows = [line.split() for line in lines if line.split()[:1] == [str(spinner.pid)]]
            if rows and rows[0][header.index("GIL%")] == "-":
                return
        self.fail(f"GIL% of free-threaded {python.label} is not a dash:\n{result.stdout}")

    def test_no_daemon_still_measures_locally(self):
        import json
        stat = subprocess.Popen([PYSTROBE_BIN, "stat", "--socket", self.socket, "--no-daemon",
                                 "--pid", str(self.busy.pid), "-d", "1", "--json"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        # The busy loop's clock over stat's window, not over its start (a
        # loaded machine may starve the loop then and not in the window).
        announced = read_lines_until(stat.stderr, "measuring pid", timeout=60)
        clock = CpuClock(self.busy.pid)
        out, err = stat.communicate(timeout=60)
        clock.stop()
        err = "".join(announced) + err
        self.assertEqual(stat.returncode, 0, err)
        self.assertNotIn("using the running daemon", err)
        self.assertIn(json.loads(out)["verdict"], busy_loop_verdicts(clock.cpu, clock.wall),
                      (out, f"the loop's own clock: {clock.cpu:.3f} s of CPU in "
                            f"{clock.wall:.3f} s"))
        top = self.run_pystrobe("top", "--socket", self.socket, "--no-daemon", "--once")
        self.assertEqual(top.returncode, 0, top.stderr)
        self.assertNotIn("using the running daemon", top.stderr)
        self.assertIn(str(self.busy.pid), top.stdout)

    def test_stat_and_top_of_a_user_neither_root_nor_in_group_pystrobe_are_refused(self):
        for type_, payload in ((3, f"pid={self.idle().pid}\nduration_ms=1000\n"),
                               (4, "interval_ms=1000\n")):
            result = self.request_as_nobody(type_, payload)
            self.assertIn("permission denied", result.stdout, result.stderr)

    def test_malformed_stat_and_top_requests_are_errors(self):
        for case in (frame(3, b"pid=1\n"), frame(3, b"pid=1\nduration_ms=0\n"),
                     frame(3, b"pid=1\nduration_ms=10\nbogus=1\n"), frame(4, b"interval_ms=5\n"),
                     frame(4, b"interval_ms=1000\n", length=40)):
            with socket.socket(socket.AF_UNIX) as s:
                s.connect(self.socket)
                s.sendall(case)
                s.shutdown(socket.SHUT_WR)
                reply = read_reply(s)
            self.assertIsNotNone(reply, case)
            self.assertEqual(reply[0], 0x84, reply)
            self.assertIn("bad request", reply[1])
        self.assertIsNone(self.daemon.proc.poll(), self.daemon.output())


# Names itself argv[1] (its comm, which name patterns match), says "ready",
# then sleeps until SIGUSR1, after which it spins until SIGUSR2.
WAKE_ON_USR1 = (
    "import signal, sys\n"
    "with open('/proc/self/comm', 'w') as f: f.write(sys.argv[1])\n"
    "signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1, signal.SIGUSR2})\n"
    "print('ready', flush=True)\n"
    "signal.sigwait({signal.SIGUSR1})\n"
    "while signal.SIGUSR2 not in signal.sigpending(): pass\n"
    "signal.sigwait({signal.SIGUSR2})\n")


class DaemonTargetsTest(BpfTestCase):
    """stat through a daemon whose configuration restricts its targets: a
    process that matches a name pattern, or lives in a targeted cgroup, is a
    target even when it has not run since the daemon began (so the accounting
    has nothing of it yet); any other process is refused."""

    def setUp(self):
        if not os.path.isdir(test_daemon.CGROUP2):
            self.fail(f"no cgroup v2 mount at {test_daemon.CGROUP2}")
        self.dir = tempfile.mkdtemp(dir=self.tmp)
        self.socket = os.path.join(self.dir, "control.sock")
        name = f"pstgt-{os.getpid() % 100000}"  # within comm's 15 characters
        group = os.path.join(test_daemon.CGROUP2, f"pystrobe-target-test-{os.getpid()}")
        os.makedirs(group, exist_ok=True)
        self.addCleanup(test_daemon.remove_cgroup, group)

        def join_group():
            with open(os.path.join(group, "cgroup.procs"), "w") as f:
                f.write(str(os.getpid()))
        # Asleep from before the daemon starts until the test wakes them.
        self.named = self.start(name)
        self.grouped = self.start("grouped", preexec_fn=join_group)
        self.untargeted = self.start("untargeted")
        relative = "/" + os.path.relpath(group, test_daemon.CGROUP2)
        config = (f"targets:\n  all: false\n  process_names: ['{name}']\n"
                  f"  cgroups: ['{relative}']\n")
        self.daemon = test_daemon.Daemon(self.dir, ("--window", "2", "--socket", self.socket),
                                         config)
        # READY=1 comes after the daemon's first look for processes by name.
        self.addCleanup(self.daemon.stop)

    def start(self, name, preexec_fn=None):
        child = subprocess.Popen(["/usr/bin/python3", "-c", WAKE_ON_USR1, name],
                                 stdout=subprocess.PIPE, text=True, preexec_fn=preexec_fn)
        self.addCleanup(child.stdout.close)
        self.addCleanup(child.wait)
        self.addCleanup(child.kill)
        self.assertEqual(child.stdout.readline().strip(), "ready")
        return child

    def stat(self, pid):
        return subprocess.Popen([PYSTROBE_BIN, "stat", "--socket", self.socket, "--pid", str(pid),
                                 "-d", "2", "--json"], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)

    def test_stat_answers_processes_targeted_by_name_or_cgroup_and_refuses_others(self):
        import json
        for child in (self.named, self.grouped):
            # Asleep until the daemon holds the request (its connection is
            # open); then it spins until stat has answered, so the window
            # sees it run whenever the daemon began it.
            stat = self.stat(child.pid)
            self.daemon.wait_for_metrics("the stat request's connection open", lambda text: (
                test_daemon.metric(text, "pystrobe_control_connections_open") or 0) >= 1)
            clock = CpuClock(child.pid)
            os.kill(child.pid, signal.SIGUSR1)
            out, err = stat.communicate(timeout=60)
            clock.stop()
            os.kill(child.pid, signal.SIGUSR2)
            self.assertEqual(stat.returncode, 0, err)
            self.assertIn(f"using the running daemon ({self.socket})", err)
            report = json.loads(out)
            self.assertEqual(report["pid"], child.pid)
            # Most of the CPU it had (its own clock) while stat ran.
            cpu = report["cpu_user_seconds"] + report["cpu_system_seconds"]
            self.assertGreater(cpu, 0.5 * clock.cpu, (report, "own clock", clock.cpu))
        refused = self.stat(self.untargeted.pid)
        _, err = refused.communicate(timeout=60)
        self.assertNotEqual(refused.returncode, 0)
        self.assertIn(f"the daemon does not target process {self.untargeted.pid}", err)
