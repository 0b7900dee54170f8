"""pystrobe daemon end to end: windows of pprof files in the profile directory
(decoded by npm pprof-format) kept within retention, /metrics scraped by a real
Prometheus and checked by promtool, SIGHUP reloads, SIGTERM writing the last
window, a restart after kill -9, in-kernel cgroup targeting, a process in a PID
namespace labelled with its pid there, and memory bounded under process
churn."""

import glob
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.parse
import urllib.request

from pystrobe_testlib import PYSTROBE_BIN, BpfTestCase, CpuClock, wait_for
import speedscope_render

HERE = os.path.dirname(os.path.abspath(__file__))
DECODE_PPROF = os.path.join(HERE, "js", "decode_pprof.mjs")
CGROUP2 = "/sys/fs/cgroup/unified"
BUSY = "import time\nend = time.time() + 120\nwhile time.time() < end: pass\n"
# The memory limit of the churn test (limits.memory) and the slack over it the
# daemon's RSS may show: near the limit it cuts its window early and takes no
# new processes (counted as dropped, reason tracked_process_limit).
CHURN_MEMORY_LIMIT = 128 << 20
CHURN_RSS_SLACK = 16 << 20
# How long a test waits for a state the daemon announces (a window file, a
# series in /metrics) or for it to end after SIGTERM: a liveness limit, not a
# judgement of speed (tests/bench measures that).
LIVENESS_S = 30


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def scrape(port):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        return response.read().decode()


def metric(text, name, **labels):
    """The value of the first series of `name` whose labels include `labels`."""
    for line in text.splitlines():
        if not line.startswith(name + "{") and not line.startswith(name + " "):
            continue
        found = dict(re.findall(r'(\w+)="([^"]*)"', line.split(" ")[0]))
        if all(found.get(k) == str(v) for k, v in labels.items()):
            return float(line.rsplit(" ", 1)[1])
    return None


def decode_pprof(path):
    result = subprocess.run(["node", DECODE_PPROF, path], capture_output=True, text=True,
                            timeout=60, check=False)
    if result.returncode != 0:
        raise AssertionError(f"pprof-format could not decode {path}:\n{result.stderr}")
    return json.loads(result.stdout)


def pids_in(profile):
    pids = set()
    for sample in profile.get("samples", []):
        for key in ("labels", "label"):
            labels = sample.get(key)
            if isinstance(labels, dict) and "pid" in labels:
                pids.add(int(labels["pid"]))
            elif isinstance(labels, list):
                for label in labels:
                    if label.get("key") == "pid":
                        pids.add(int(label.get("num", label.get("str", 0))))
    return pids


def remove_cgroup(path):
    """Removes a test's cgroup once it is empty (its processes may take a moment to die)."""
    for _ in range(50):
        try:
            os.rmdir(path)
            return
        except OSError:
            time.sleep(0.1)


def labels_of_pid(profile, pid):
    """The labels of every sample of process `pid` (its pid label, the host's)."""
    return [sample["labels"] for sample in profile.get("samples", [])
            if str(sample.get("labels", {}).get("pid")) == str(pid)]


class Daemon:
    def __init__(self, tmp, args=(), config=None):
        self.port = free_port()
        self.profile_dir = os.path.join(tmp, "profiles")
        self.log_path = os.path.join(tmp, f"daemon-{self.port}.log")
        self.config_path = os.path.join(tmp, f"config-{self.port}.yaml")
        cmd = [PYSTROBE_BIN, "daemon", "--prometheus-listen", f"127.0.0.1:{self.port}",
               "--profile-dir", self.profile_dir, *args]
        # A control socket of its own: at the default path it would answer
        # the record/stat/top of every other test (and take a running
        # daemon's place).
        if "--socket" not in args:
            cmd += ["--socket", os.path.join(tmp, f"control-{self.port}.sock")]
        if config is not None:
            self.write_config(config)
            cmd += ["--config", self.config_path]
        self.log = open(self.log_path, "w")
        # Up means what systemd is told: READY=1 comes once sampling runs and
        # the control socket has its final permissions. /metrics answers
        # earlier, before either.
        self.notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        notify_path = os.path.join(tmp, f"notify-{self.port}.sock")
        self.notify.bind(notify_path)
        self.notify.settimeout(0.2)
        env = dict(os.environ, NOTIFY_SOCKET=notify_path)
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT, env=env)
        deadline = time.time() + 30
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"daemon exited {self.proc.returncode}:\n{self.output()}")
            try:
                if "READY=1" in self.notify.recv(4096).decode().splitlines():
                    scrape(self.port)
                    return
            except socket.timeout:
                pass
        raise AssertionError(f"daemon never said READY=1:\n{self.output()}")

    def write_config(self, text):
        with open(self.config_path, "w") as f:
            f.write(text)

    def output(self):
        self.log.flush()
        with open(self.log_path) as f:
            return f.read()

    def metrics(self):
        return scrape(self.port)

    def profiles(self):
        return sorted(glob.glob(os.path.join(self.profile_dir, "*.pb.gz")))

    def wait_for_profiles(self, count, timeout=LIVENESS_S):
        """The window files once there are at least `count` of them."""
        return wait_for(f"{count} window files in {self.profile_dir}",
                        lambda: (len(self.profiles()) >= count, self.profiles()), timeout)

    def wait_for_metrics(self, what, until, timeout=LIVENESS_S):
        """A scrape of /metrics once `until(text)` holds (the daemon publishes
        what it knows at each scrape, and reads processes every second)."""
        def probe():
            text = self.metrics()
            return until(text), text[-3000:]
        wait_for(what, probe, timeout)
        return self.metrics()

    def stop_and_time(self, test):
        """SIGTERM; the daemon must end (within a generous liveness limit,
        the time it took printed: tests/bench judges speed) with exit 0."""
        start = time.monotonic()
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=LIVENESS_S)
        except subprocess.TimeoutExpired:
            test.fail(f"the daemon still runs {LIVENESS_S} s after SIGTERM:\n{self.output()}")
        elapsed = time.monotonic() - start
        print(f"daemon ended {elapsed:.2f} s after SIGTERM", file=sys.stderr)
        test.assertEqual(self.proc.returncode, 0, self.output())
        return elapsed

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        self.notify.close()


class DaemonTest(BpfTestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        speedscope_render.ensure_node_modules()

    def setUp(self):
        self.dir = tempfile.mkdtemp(dir=self.tmp)
        self.children = []

    def tearDown(self):
        for child in self.children:
            if child.poll() is None:
                child.kill()
                child.wait()

    def busy(self, preexec_fn=None):
        child = subprocess.Popen([sys.executable, "-c", BUSY], preexec_fn=preexec_fn)
        self.children.append(child)
        return child

    def daemon(self, *args, config=None):
        daemon = Daemon(self.dir, args, config)
        self.addCleanup(daemon.stop)
        return daemon

    def test_windows_become_pprof_files_metrics_grow_and_sigterm_writes_the_last(self):
        busy = self.busy()
        daemon = self.daemon("--window", "2")

        def user_seconds(text):
            return metric(text, "pystrobe_process_cpu_user_seconds_total", pid=busy.pid,
                          comm="python3")
        first = user_seconds(daemon.wait_for_metrics(
            f"a series for pid {busy.pid}", lambda text: user_seconds(text) is not None))
        # It grows by a second of CPU, however long the machine takes to give it one.
        clock = CpuClock(busy.pid)
        text = daemon.wait_for_metrics(
            f"pid {busy.pid}'s CPU seconds to grow by 1 from {first}",
            lambda text: user_seconds(text) > first + 1.0)
        clock.stop()
        print(f"busy's series grew {user_seconds(text) - first:.2f} s while it used "
              f"{clock.cpu:.2f} s of CPU by its own clock", file=sys.stderr)
        self.assertIsNotNone(metric(text, "pystrobe_process_cpu_user_seconds_total", pid="other"))
        self.assertGreater(metric(text, "pystrobe_samples_total"), 0)
        # How full the kernel's maps are: the busy CPython has its entry, and
        # so have its thread's counters (read every 5 s).
        text = daemon.wait_for_metrics(
            "python_processes' entries to count the busy CPython", lambda text: (metric(
                text, "pystrobe_bpf_map_entries", map="python_processes") or 0) >= 1)
        self.assertGreaterEqual(metric(text, "pystrobe_bpf_map_entries", map="thread_counters"), 1)
        self.assertIsNotNone(metric(text, "pystrobe_dropped_total", reason="ringbuf_full"))
        self.assertGreater(metric(text, "pystrobe_resident_memory_bytes"), 0)
        # Each CPU's sampling period is redrawn at random, and the kernel takes it.
        self.assertGreater(metric(text, "pystrobe_sampling_period_redraws_total", outcome="set"),
                           os.cpu_count())
        self.assertEqual(metric(text, "pystrobe_sampling_period_redraws_total", outcome="failed"), 0)

        # promtool's lint of a real scrape.
        check = subprocess.run(["promtool", "check", "metrics"], input=text, text=True,
                               capture_output=True, timeout=30)
        self.assertEqual(check.returncode, 0, check.stdout + check.stderr)

        files = daemon.wait_for_profiles(2)
        profile = decode_pprof(files[-1])
        self.assertIn(busy.pid, pids_in(profile), f"{files[-1]}: {str(profile)[:2000]}")

        before = len(daemon.profiles())
        daemon.stop_and_time(self)
        self.assertGreaterEqual(len(daemon.profiles()), before + 1, "the last window is written")

    def test_a_real_prometheus_scrapes_the_daemon(self):
        self.busy()
        daemon = self.daemon("--window", "5")
        prom_port = free_port()
        storage = os.path.join(self.dir, "prometheus-data")
        config = os.path.join(self.dir, "prometheus.yml")
        with open(config, "w") as f:
            f.write("global:\n  scrape_interval: 1s\nscrape_configs:\n"
                    "  - job_name: pystrobe\n    static_configs:\n"
                    f"      - targets: ['127.0.0.1:{daemon.port}']\n")
        prometheus = subprocess.Popen(
            ["prometheus", f"--config.file={config}", f"--storage.tsdb.path={storage}",
             f"--web.listen-address=127.0.0.1:{prom_port}"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.children.append(prometheus)
        api = f"http://127.0.0.1:{prom_port}/api/v1"

        def get(path):
            with urllib.request.urlopen(api + path, timeout=5) as response:
                return json.load(response)

        deadline, health, result = time.time() + 60, None, []
        while time.time() < deadline:
            try:
                targets = get("/targets")["data"]["activeTargets"]
                health = targets[0]["health"] if targets else None
                if health == "up":
                    query = urllib.parse.quote("pystrobe_process_cpu_user_seconds_total")
                    result = get(f"/query?query={query}")["data"]["result"]
                    if result:
                        break
            except OSError:
                pass
            time.sleep(1)
        self.assertEqual(health, "up", "Prometheus never saw the target up")
        self.assertTrue(result, "Prometheus has no pystrobe series")
        self.assertTrue(any(r["metric"].get("comm") == "python3" for r in result))

    def test_sighup_rejects_a_bad_config_and_applies_a_good_one(self):
        daemon = self.daemon(config="window: 3\n")
        self.assertEqual(metric(daemon.metrics(), "pystrobe_window_seconds"), 3)
        daemon.write_config("window: 3\nrate: nope\n")
        daemon.proc.send_signal(signal.SIGHUP)
        daemon.wait_for_metrics("a reload error counted", lambda text: (metric(
            text, "pystrobe_config_reload_errors_total") or 0) >= 1)
        self.assertIsNone(daemon.proc.poll(), daemon.output())
        self.assertIn("configuration rejected", daemon.output())
        self.assertIn("rate", daemon.output())
        self.assertEqual(metric(daemon.metrics(), "pystrobe_config_reload_errors_total"), 1)
        self.assertEqual(metric(daemon.metrics(), "pystrobe_window_seconds"), 3)
        daemon.write_config("window: 1\n")
        daemon.proc.send_signal(signal.SIGHUP)
        daemon.wait_for_metrics("window 1 s after the reload", lambda text: metric(
            text, "pystrobe_window_seconds") == 1)
        # 1 s windows after the reload: three more files, cut about a second
        # apart by the daemon's clock (their modification times), not 3.
        count = len(daemon.profiles())
        files = daemon.wait_for_profiles(count + 4)[count + 1:]
        times = [os.path.getmtime(path) for path in files]
        spacing = (times[-1] - times[0]) / (len(times) - 1)
        self.assertLess(spacing, 2.0, f"1 s windows after reload: {files} at {times}")

    def test_restart_after_kill_9_starts_cleanly(self):
        daemon = self.daemon("--window", "1")
        daemon.wait_for_profiles(1)
        # A half-written profile, as a kill -9 mid-write would leave.
        stale = os.path.join(daemon.profile_dir, "pystrobe-20000101T000000Z-000009.pb.gz.tmp")
        with open(stale, "w") as f:
            f.write("half")
        daemon.proc.kill()
        daemon.proc.wait()
        again = self.daemon("--window", "1")
        again.wait_for_metrics("a window written after the restart", lambda text: (
            metric(text, "pystrobe_windows_total") or 0) > 0)
        self.assertIsNone(again.proc.poll(), again.output())
        self.assertFalse(os.path.exists(stale))

    def test_retention_deletes_old_profiles_and_keeps_the_directory_within_size(self):
        profile_dir = os.path.join(self.dir, "profiles")
        os.makedirs(profile_dir)
        old = os.path.join(profile_dir, "pystrobe-20000101T000000Z-000001.pb.gz")
        with open(old, "wb") as f:
            f.write(b"\x1f\x8b" + b"\0" * 100)
        os.utime(old, (time.time() - 7200, time.time() - 7200))
        big = os.path.join(profile_dir, "pystrobe-20000101T000001Z-000002.pb.gz")
        with open(big, "wb") as f:
            f.write(b"\0" * (2 << 20))
        daemon = self.daemon(
            "--window", "1",
            config="exporters:\n  retention:\n    max_age: 1h\n    max_total_size: 1MiB\n")
        # Retention runs as windows are written.
        daemon.wait_for_profiles(2)
        wait_for("retention to delete the old and the big file", lambda: (
            not os.path.exists(old) and not os.path.exists(big), os.listdir(profile_dir)))
        self.assertFalse(os.path.exists(old), "older than max_age")
        self.assertFalse(os.path.exists(big), "beyond max_total_size")
        total = sum(os.path.getsize(p) for p in daemon.profiles())
        self.assertLessEqual(total, 1 << 20)
        text = daemon.metrics()
        self.assertEqual(metric(text, "pystrobe_profile_files_deleted_total", reason="age"), 1)
        self.assertGreaterEqual(metric(text, "pystrobe_profile_files_deleted_total",
                                       reason="size"), 1)

    def test_cgroup_targeting_profiles_only_processes_in_the_group(self):
        if not os.path.isdir(CGROUP2):
            self.fail(f"no cgroup v2 mount at {CGROUP2}")
        group = os.path.join(CGROUP2, f"pystrobe-daemon-test-{os.getpid()}")
        os.makedirs(os.path.join(group, "child"), exist_ok=True)

        self.addCleanup(remove_cgroup, group)
        self.addCleanup(remove_cgroup, os.path.join(group, "child"))
        procs = os.path.join(group, "child", "cgroup.procs")
        def join_group():
            with open(procs, "w") as f:
                f.write(str(os.getpid()))
        inside = self.busy(preexec_fn=join_group)
        outside = self.busy()
        relative = "/" + os.path.relpath(group, CGROUP2)
        daemon = self.daemon("--window", "2",
                             config=f"targets:\n  all: false\n  cgroups: ['{relative}']\n")
        daemon.wait_for_profiles(2)
        text = daemon.wait_for_metrics(f"a series for pid {inside.pid}", lambda text: metric(
            text, "pystrobe_process_cpu_user_seconds_total", pid=inside.pid) is not None)
        # Its series carries the cgroup it runs in (a descendant of the target).
        self.assertIsNotNone(metric(text, "pystrobe_process_cpu_user_seconds_total",
                                    pid=inside.pid, cgroup=relative + "/child"), text[:3000])
        self.assertIsNone(metric(text, "pystrobe_process_cpu_user_seconds_total",
                                 pid=outside.pid))
        self.assertGreater(metric(text, "pystrobe_samples_filtered_total"), 0)
        pids = set()
        for path in daemon.profiles():
            pids |= pids_in(decode_pprof(path))
        self.assertIn(inside.pid, pids)
        self.assertNotIn(outside.pid, pids)

    def busy_in_pid_namespace(self):
        """A busy python3 that is pid 1 of a PID namespace of its own: its host pid."""
        unshare = subprocess.Popen(["unshare", "--pid", "--fork", "--mount-proc", "--kill-child",
                                    sys.executable, "-c", BUSY])
        self.children.append(unshare)
        deadline = time.time() + 10
        while time.time() < deadline:
            try:
                with open(f"/proc/{unshare.pid}/task/{unshare.pid}/children") as f:
                    children = f.read().split()
                if children:
                    with open(f"/proc/{children[0]}/status") as f:
                        nspid = [line.split()[1:] for line in f if line.startswith("NSpid:")][0]
                    if nspid == [children[0], "1"]:
                        with open(f"/proc/{children[0]}/comm") as f:
                            if f.read().strip().startswith("python"):
                                return int(children[0])
            except (OSError, IndexError):
                pass
            time.sleep(0.05)
        self.fail(f"unshare --pid (pid {unshare.pid}) started no python3 as pid 1")

    def test_a_process_in_a_pid_namespace_carries_its_pid_there(self):
        # Both pids, in every view: the host pid as `pid`, the one its
        # container's `ps` shows (1) as pid_in_namespace; none for a host process.
        inside = self.busy_in_pid_namespace()
        outside = self.busy()
        socket_path = os.path.join(self.dir, "control.sock")
        daemon = self.daemon("--window", "2", "--socket", socket_path)
        recorded = {}
        for how in ("daemon", "local"):
            out = os.path.join(self.dir, f"record-{how}.pb.gz")
            where = ["--socket", socket_path] if how == "daemon" else ["--no-daemon"]
            result = subprocess.run([PYSTROBE_BIN, "record", *where, "-p", str(inside), "-p",
                                     str(outside.pid), "-d", "2", "-f", "pprof", "-o", out],
                                    capture_output=True, text=True, timeout=60)
            self.assertEqual(result.returncode, 0, result.stderr)
            self.assertEqual("using the running daemon" in result.stderr, how == "daemon",
                             result.stderr)
            recorded[f"record ({how})"] = decode_pprof(out)
        # The windows cut while the two recordings ran (4 s of 2 s windows).
        for path in daemon.wait_for_profiles(2):
            recorded[os.path.basename(path)] = decode_pprof(path)
        text = daemon.metrics()

        for name in ("record (daemon)", "record (local)"):
            self.assertTrue(labels_of_pid(recorded[name], inside), name)
        windows_with_it = 0
        for name, profile in recorded.items():
            inside_labels = labels_of_pid(profile, inside)
            windows_with_it += bool(inside_labels)
            for labels in inside_labels:
                self.assertEqual(str(labels.get("pid_in_namespace")), "1", (name, labels))
            for labels in labels_of_pid(profile, outside.pid):
                self.assertNotIn("pid_in_namespace", labels, (name, labels))
        self.assertGreater(windows_with_it, 2, list(recorded))

        self.assertIsNotNone(metric(text, "pystrobe_process_cpu_user_seconds_total",
                                    pid=inside, pid_in_namespace=1), text[:3000])
        self.assertIsNotNone(metric(text, "pystrobe_process_cpu_user_seconds_total",
                                    pid=outside.pid, pid_in_namespace=""), text[:3000])

    def test_memory_stays_bounded_under_process_churn(self):
        daemon = self.daemon("--window", "2", "--rate", "99",
                             config="limits:\n  memory: 128MiB\n")
        churn = subprocess.Popen(
            ["/bin/sh", "-c", "end=$(($(date +%s)+22)); while [ $(date +%s) -lt $end ]; do "
             "for i in 1 2 3 4 5 6 7 8 9 10; do /bin/true & done; wait; done"])
        self.children.append(churn)
        daemon.wait_for_profiles(2)
        start_rss = metric(daemon.metrics(), "pystrobe_resident_memory_bytes")
        churn.wait(timeout=60)
        # A window cut after the churn ended.
        daemon.wait_for_profiles(len(daemon.profiles()) + 1)
        text = daemon.metrics()
        end_rss = metric(text, "pystrobe_resident_memory_bytes")
        cpu = (metric(text, "pystrobe_cpu_seconds_total", mode="user") +
               metric(text, "pystrobe_cpu_seconds_total", mode="system"))
        evicted = metric(text, "pystrobe_process_images_evicted_total")
        print(f"churn: RSS {start_rss / 2**20:.1f} MiB -> {end_rss / 2**20:.1f} MiB, "
              f"daemon CPU {cpu:.2f} s, images evicted {evicted:.0f}", file=sys.stderr)
        self.assertLess(end_rss, CHURN_MEMORY_LIMIT + CHURN_RSS_SLACK)
        self.assertGreater(evicted, 0)
        self.assertIsNotNone(metric(text, "pystrobe_dropped_total", reason="tracked_process_limit"))


if __name__ == "__main__":
    unittest.main()
