"""pystrobe daemon exporting each window as OTLP Profiles (exporters.otlp), to
receivers written here: a gRPC one (Debian's python3-grpcio) and a plain HTTP
one. Both decode every request with classes that protoc generates, in the
test, from the published .proto files vendored in exporters/otlp/proto, and
the test compares them with the pprof the daemon wrote for the same window
(decoded with classes generated from exporters/profile.proto): the functions,
their lines, the pid and its resource attributes, the sample counts and CPU
time of every process.

Then the faults: a receiver that is down (the windows still reach the disk,
the failures are counted, and the export resumes when it comes up), one that
answers 503 with Retry-After (honoured, no window lost), a slow one (sampling
keeps its cadence, nothing lost), mTLS (a CA of the test's own, a client
certificate the receiver requires, a header whose value the daemon reads from
a file). Last, `record -f otlp` writes the same request to a file, and
`report` reads it back."""

import glob
import gzip
import http.server
import os
import subprocess
import sys
import tempfile
import threading
import time
from concurrent import futures

from pystrobe_testlib import BpfTestCase, PYSTROBE_BIN, wait_for
import test_daemon
import test_daemon_push

try:
    import grpc
except ImportError:  # python3-grpcio: installed by install-deps.sh --tests
    grpc = None

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
OTLP_PROTO_DIR = os.path.join(REPO, "exporters", "otlp", "proto")
OTLP_PROTOS = [
    "opentelemetry/proto/common/v1/common.proto",
    "opentelemetry/proto/resource/v1/resource.proto",
    "opentelemetry/proto/profiles/v1development/profiles.proto",
    "opentelemetry/proto/collector/profiles/v1development/profiles_service.proto",
]
GRPC_SERVICE = "opentelemetry.proto.collector.profiles.v1development.ProfilesService"

# A workload with a function of known name and line. It sleeps as long as it
# spins: every window still holds it, at half the CPU it would take (it runs
# through each test of the file, beside the others' work).
SPIN = """import time
def spin_for_otlp():
    x = 0
    for i in range(200000):
        x += i
    return x
end = time.time() + 120
while time.time() < end:
    started = time.monotonic()
    spin_for_otlp()
    time.sleep(time.monotonic() - started)
"""
SPIN_LINES = range(2, 7)

pb = None  # the generated modules, set by generate_classes()


def generate_classes(directory):
    """protoc --python_out over the vendored OTLP files and our profile.proto."""
    global pb
    subprocess.run(["protoc", "--python_out", directory, "-I", OTLP_PROTO_DIR, *OTLP_PROTOS],
                   check=True, timeout=60)
    subprocess.run(["protoc", "--python_out", directory, "-I", REPO,
                    os.path.join(REPO, "exporters", "profile.proto")], check=True, timeout=60)
    sys.path.insert(0, directory)
    from opentelemetry.proto.collector.profiles.v1development import profiles_service_pb2
    from exporters import profile_pb2

    class Modules:
        service = profiles_service_pb2
        pprof = profile_pb2
    pb = Modules


def any_value(value):
    kind = value.WhichOneof("value")
    return getattr(value, kind) if kind else None


class Window:
    """One decoded request, looked at per process."""

    def __init__(self, request):
        self.request = request
        self.dict = request.dictionary
        self.strings = list(self.dict.string_table)

    def resources(self):
        """{pid or None: (attributes, {"type/unit": Profile})}."""
        out = {}
        for resource in self.request.resource_profiles:
            attributes = {kv.key: any_value(kv.value) for kv in resource.resource.attributes}
            profiles = {}
            for scope in resource.scope_profiles:
                for profile in scope.profiles:
                    t = profile.sample_type
                    profiles[f"{self.strings[t.type_strindex]}/{self.strings[t.unit_strindex]}"] = \
                        profile
            out[attributes.get("process.pid")] = (attributes, profiles)
        return out

    def frames(self, sample):
        """(function, file, line) root first."""
        stack = self.dict.stack_table[sample.stack_index]
        frames = []
        for index in reversed(stack.location_indices):
            location = self.dict.location_table[index]
            for line in reversed(location.lines):
                function = self.dict.function_table[line.function_index]
                frames.append((self.strings[function.name_strindex],
                               self.strings[function.filename_strindex], line.line))
        return frames

    def start_nanos(self):
        for _, profiles in self.resources().values():
            for profile in profiles.values():
                return profile.time_unix_nano
        return None


def pprof_of(path):
    profile = pb.pprof.Profile()
    with gzip.open(path, "rb") as f:
        profile.ParseFromString(f.read())
    return profile


def pprof_totals_by_pid(profile):
    """{pid: {"type/unit": total}} and {pid: set of (function, file, line)}."""
    strings = profile.string_table
    types = [f"{strings[t.type]}/{strings[t.unit]}" for t in profile.sample_type]
    functions = {f.id: f for f in profile.function}
    locations = {l.id: l for l in profile.location}
    totals, frames = {}, {}
    for sample in profile.sample:
        pid = next((l.num for l in sample.label if strings[l.key] == "pid"), None)
        for name, value in zip(types, sample.value):
            totals.setdefault(pid, {}).setdefault(name, 0)
            totals[pid][name] += value
        for location_id in sample.location_id:
            for line in locations[location_id].line:
                f = functions[line.function_id]
                frames.setdefault(pid, set()).add(
                    (strings[f.name], strings[f.filename], line.line))
    return totals, frames


class GrpcReceiver:
    """ProfilesService/Export on 127.0.0.1. `answer(n)` says what the n-th
    call (from 0) gets: None (OK), or a grpc.StatusCode to abort with;
    `delay` seconds of sleep before answering. With `ca` (a test
    CertificateAuthority) it serves TLS and requires a client certificate."""

    def __init__(self, answer=lambda n: None, delay=0.0, ca=None, port=0):
        self.requests = []
        self.metadata = []
        self.lock = threading.Lock()
        self.calls = 0

        def export(request, context):
            with self.lock:
                n = self.calls
                self.calls += 1
            if delay:
                time.sleep(delay)
            code = answer(n)
            if code is not None:
                context.abort(code, "receiver says no (test)")
            with self.lock:
                self.requests.append(request)
                self.metadata.append(dict(context.invocation_metadata()))
            return pb.service.ExportProfilesServiceResponse()

        handler = grpc.method_handlers_generic_handler(GRPC_SERVICE, {
            "Export": grpc.unary_unary_rpc_method_handler(
                export,
                request_deserializer=pb.service.ExportProfilesServiceRequest.FromString,
                response_serializer=pb.service.ExportProfilesServiceResponse.SerializeToString),
        })
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        self.server.add_generic_rpc_handlers((handler,))
        if ca is None:
            self.port = self.server.add_insecure_port(f"127.0.0.1:{port}")
            self.url = f"http://127.0.0.1:{self.port}"
        else:
            def read(path):
                with open(path, "rb") as f:
                    return f.read()
            credentials = grpc.ssl_server_credentials(
                [(read(ca.key_file), read(ca.cert_file))], root_certificates=read(ca.ca_file),
                require_client_auth=True)
            self.port = self.server.add_secure_port(f"127.0.0.1:{port}", credentials)
            self.url = f"https://127.0.0.1:{self.port}"
        self.server.start()

    def taken(self):
        with self.lock:
            return list(self.requests)

    def wait_for(self, count, timeout):
        deadline = time.time() + timeout
        while time.time() < deadline and len(self.taken()) < count:
            time.sleep(0.2)
        return self.taken()

    def close(self):
        self.server.stop(0)


class HttpReceiver:
    """POST /v1development/profiles on 127.0.0.1. `answer(n)` gives the n-th
    request's (status, headers)."""

    def __init__(self, answer=lambda n: (200, {})):
        self.requests = []
        self.arrivals = []
        self.lock = threading.Lock()
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                with receiver.lock:
                    n = len(receiver.arrivals)
                    receiver.arrivals.append((time.time(), self.path,
                                              self.headers.get("Content-Type")))
                status, headers = answer(n)
                response = b""
                if status == 200:
                    request = pb.service.ExportProfilesServiceRequest()
                    request.ParseFromString(body)
                    with receiver.lock:
                        receiver.requests.append(request)
                    response = pb.service.ExportProfilesServiceResponse().SerializeToString()
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(response)))
                self.end_headers()
                self.wfile.write(response)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def taken(self):
        with self.lock:
            return list(self.requests)

    def wait_for(self, count, timeout):
        deadline = time.time() + timeout
        while time.time() < deadline and len(self.taken()) < count:
            time.sleep(0.2)
        return self.taken()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def otlp_config(endpoint, protocol="grpc", extra=""):
    return (f"labels:\n  env: e2e\nexporters:\n  otlp:\n    endpoint: \"{endpoint}\"\n"
            f"    protocol: {protocol}\n    timeout: 5s\n    max_queue: 16\n"
            f"    service_name: otlp-e2e\n{extra}")


class DaemonOtlpTest(BpfTestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        if grpc is None:
            raise AssertionError("python3-grpcio is missing: run scripts/install-deps.sh --tests")
        generate_classes(tempfile.mkdtemp(dir=cls.tmp))

    def setUp(self):
        self.dir = tempfile.mkdtemp(dir=self.tmp)
        saved = {k: os.environ.get(k) for k in ("no_proxy", "NO_PROXY")}
        os.environ["no_proxy"] = os.environ["NO_PROXY"] = "127.0.0.1,localhost"
        self.addCleanup(lambda: [os.environ.pop(k, None) if v is None else
                                 os.environ.__setitem__(k, v) for k, v in saved.items()])
        self.spin = subprocess.Popen(["/usr/bin/python3", "-c", SPIN])
        self.addCleanup(self.spin.wait)
        self.addCleanup(self.spin.kill)

    def keep(self, receiver):
        self.addCleanup(receiver.close)
        return receiver

    def daemon(self, config):
        socket = os.path.join(self.dir, f"control-{len(os.listdir(self.dir))}.sock")
        daemon = test_daemon.Daemon(self.dir, ("--window", "2", "--socket", socket), config)
        self.addCleanup(daemon.stop)
        return daemon

    def disk_windows(self, daemon):
        """{time_nanos: pprof} of the CPU windows the daemon wrote."""
        paths = [p for p in glob.glob(os.path.join(daemon.profile_dir, "*.pb.gz"))
                 if not p.endswith("-memory.pb.gz")]
        return {pprof_of(p).time_nanos: pprof_of(p) for p in paths}

    def assertWindowMatchesItsPprof(self, window, pprof, daemon):
        totals, frames = pprof_totals_by_pid(pprof)
        resources = window.resources()
        pid = self.spin.pid
        self.assertIn(pid, resources, f"no resource for the workload's pid {pid}")
        attributes, profiles = resources[pid]
        self.assertEqual(attributes["process.executable.name"], "python3")
        self.assertEqual(attributes["process.runtime.name"], "CPython")
        self.assertTrue(attributes["process.runtime.version"].startswith("3.11"), attributes)
        self.assertEqual(attributes["service.name"], "otlp-e2e")
        self.assertEqual(attributes["env"], "e2e")
        self.assertEqual(attributes["host.name"], os.uname().nodename)
        self.assertEqual(sorted(profiles), ["cpu/nanoseconds", "samples/count"])
        # Every process of the window: the same values as in its pprof.
        for p, (_, profs) in resources.items():
            for name, profile in profs.items():
                self.assertEqual(sum(v for s in profile.samples for v in s.values),
                                 totals[p][name], f"pid {p} {name}")
        self.assertEqual(set(totals), set(resources), "the same processes")
        # The workload's functions and lines, as its pprof has them.
        seen = set()
        for sample in profiles["cpu/nanoseconds"].samples:
            seen.update(window.frames(sample))
        self.assertEqual(seen, frames[pid])
        spin = {(f, line) for f, file, line in seen if f == "spin_for_otlp"}
        self.assertTrue(spin, f"spin_for_otlp not among {sorted(seen)[:20]}")
        for _, line in spin:
            self.assertIn(line, SPIN_LINES)

    def test_grpc_windows_hold_the_functions_lines_pid_and_values_of_their_pprof(self):
        receiver = self.keep(GrpcReceiver())
        daemon = self.daemon(otlp_config(receiver.url, extra=(
            "    headers:\n      X-Scope-OrgID: team-a\n")))
        requests = receiver.wait_for(3, timeout=20)
        self.assertGreaterEqual(len(requests), 3, daemon.output())
        self.assertEqual(receiver.metadata[0].get("x-scope-orgid"), "team-a")
        disk = self.disk_windows(daemon)
        compared = 0
        for request in requests:
            window = Window(request)
            if self.spin.pid not in window.resources():
                continue  # the window before the workload was seen
            self.assertIn(window.start_nanos(), disk, "every window pushed is on disk too")
            self.assertWindowMatchesItsPprof(window, disk[window.start_nanos()], daemon)
            compared += 1
        self.assertGreaterEqual(compared, 1)

        text = daemon.metrics()
        sent = test_daemon.metric(text, "pystrobe_push_windows_total", exporter="otlp",
                                  outcome="sent")
        self.assertGreaterEqual(sent, 3, text)
        self.assertEqual(test_daemon.metric(text, "pystrobe_push_windows_total",
                                            exporter="pyroscope", outcome="sent"), 0)
        check = subprocess.run(["promtool", "check", "metrics"], input=text, text=True,
                               capture_output=True, timeout=30)
        self.assertEqual(check.returncode, 0, check.stdout + check.stderr)

        # SIGTERM: the last window goes too, in the grace the daemon gives it.
        before = len(receiver.taken())
        daemon.stop_and_time(self)
        self.assertGreater(len(receiver.taken()), before, "the final window is exported")

    def test_http_503_with_retry_after_is_honoured_counted_and_no_window_is_lost(self):
        # Every window's first attempt gets 503 Retry-After: 1, its retry 200.
        receiver = self.keep(HttpReceiver(
            lambda n: (503, {"Retry-After": "1"}) if n % 2 == 0 else (200, {})))
        daemon = self.daemon(otlp_config(receiver.url, protocol="http/protobuf"))
        receiver.wait_for(3, timeout=30)
        text = daemon.metrics()
        self.assertGreaterEqual(test_daemon.metric(text, "pystrobe_push_retries_total",
                                                   exporter="otlp"), 1, text)
        self.assertGreaterEqual(test_daemon.metric(text, "pystrobe_push_errors_total",
                                                   exporter="otlp", reason="http_status"), 1)
        output = daemon.output()
        self.assertIn("HTTP 503", output)
        daemon.stop()
        arrivals = list(receiver.arrivals)
        self.assertTrue(all(path == "/v1development/profiles" and kind == "application/x-protobuf"
                            for _, path, kind in arrivals), arrivals)
        # Each retry came at least the Retry-After second after its 503.
        for i in range(0, len(arrivals) - 1, 2):
            self.assertGreaterEqual(arrivals[i + 1][0] - arrivals[i][0], 0.95, arrivals)
        pushed = {Window(r).start_nanos() for r in receiver.taken()}
        disk = set(self.disk_windows(daemon))
        self.assertGreaterEqual(len(pushed), 3)
        self.assertTrue(pushed <= disk)
        # Only the windows still queued at SIGTERM (its 0.5 s cannot wait out
        # a Retry-After) may be missing; they are counted dropped_shutdown.
        self.assertLessEqual(len(disk - pushed), 2, f"windows lost:\n{output}")

    def test_a_receiver_that_is_down_costs_no_window_on_disk_and_is_counted_until_it_is_up(self):
        port = test_daemon.free_port()
        daemon = self.daemon(otlp_config(f"http://127.0.0.1:{port}"))

        def down_for_two_windows():
            text = daemon.metrics()
            errors = test_daemon.metric(text, "pystrobe_push_errors_total", exporter="otlp",
                                        reason="connect") or 0
            windows = len(self.disk_windows(daemon))
            said = "otlp failed" in daemon.output()
            return errors >= 1 and windows >= 2 and said, (errors, windows, said, text)

        # Windows reach the disk while the receiver is down, and each failed
        # push is counted and said.
        *_, text = wait_for("a connect error counted and said, and two windows on disk",
                            down_for_two_windows, timeout=60, interval=0.5)
        samples = test_daemon.metric(text, "pystrobe_samples_total")
        self.assertGreater(samples, 0)
        # It comes up on the same port: the queued windows go through.
        receiver = self.keep(GrpcReceiver(port=port))
        requests = receiver.wait_for(2, timeout=30)
        self.assertGreaterEqual(len(requests), 2, daemon.output())
        text = daemon.metrics()
        self.assertGreater(test_daemon.metric(text, "pystrobe_samples_total"), samples)
        self.assertEqual(test_daemon.metric(text, "pystrobe_push_windows_total", exporter="otlp",
                                            outcome="dropped_queue_full"), 0)

    def test_a_slow_receiver_neither_slows_sampling_nor_loses_windows(self):
        receiver = self.keep(GrpcReceiver(delay=3.0))  # slower than the 2 s windows
        daemon = self.daemon(otlp_config(receiver.url))
        receiver.wait_for(3, timeout=40)

        def five_on_disk():
            written = sorted(self.disk_windows(daemon))
            return len(written) >= 5, written
        # Whether the fifth window is on disk when the third request arrives
        # is a race of the windows' cadence with the receiver's 3 s (seen: 4).
        # What is judged below is their cadence, and the queue behind the
        # receiver: both are there once five windows are.
        windows = wait_for("five windows on disk", five_on_disk, timeout=40)
        text = daemon.metrics()
        gaps = [(b - a) / 1e9 for a, b in zip(windows, windows[1:])]
        # Sampling waiting on the receiver would make every window last its
        # 3 s; a loaded machine may stretch one now and then.
        self.assertLess(sorted(gaps)[len(gaps) // 2], 2.5,
                        f"windows must keep their 2 s cadence: {gaps}")
        enqueued = sum(test_daemon.metric(text, "pystrobe_push_windows_total", exporter="otlp",
                                          outcome=o) or 0
                       for o in ("sent", "rejected", "failed", "dropped_queue_full",
                                 "dropped_shutdown"))
        queued = test_daemon.metric(text, "pystrobe_push_queue_windows", exporter="otlp")
        self.assertEqual(test_daemon.metric(text, "pystrobe_push_windows_total", exporter="otlp",
                                            outcome="sent"), enqueued, text)
        self.assertGreaterEqual(queued, 1, "the slow receiver leaves windows waiting")
        pushed = {Window(r).start_nanos() for r in receiver.taken()}
        self.assertTrue(pushed <= set(windows), "every window exported is one on disk")
        self.assertEqual(sorted(pushed), windows[:len(pushed)], "in order, none skipped")

    def test_grpc_over_tls_with_a_client_certificate_and_a_header_from_a_file(self):
        ca = test_daemon_push.CertificateAuthority(self.dir, "otlp")
        receiver = self.keep(GrpcReceiver(ca=ca))
        api_key = os.path.join(self.dir, "api-key")
        with open(api_key, "w") as f:
            f.write("Bearer k-e2e-secret\n")
        daemon = self.daemon(otlp_config(receiver.url, extra=(
            f"    tls:\n      ca_file: {ca.ca_file}\n      cert_file: {ca.client_cert_file}\n"
            f"      key_file: {ca.client_key_file}\n"
            f"    header_files:\n      Authorization: {api_key}\n")))
        requests = receiver.wait_for(2, timeout=20)
        self.assertGreaterEqual(len(requests), 2, daemon.output())
        self.assertEqual(receiver.metadata[0].get("authorization"), "Bearer k-e2e-secret")
        self.assertNotIn("k-e2e-secret", daemon.output())
        self.assertTrue(any(self.spin.pid in Window(r).resources() for r in requests))

    def test_grpc_without_the_client_certificate_is_refused_and_counted(self):
        ca = test_daemon_push.CertificateAuthority(self.dir, "otlp-nocert")
        receiver = self.keep(GrpcReceiver(ca=ca))
        daemon = self.daemon(otlp_config(receiver.url, extra=(
            f"    tls:\n      ca_file: {ca.ca_file}\n")))
        deadline = time.time() + 20
        errors = 0
        while time.time() < deadline and not errors:
            time.sleep(0.5)
            text = daemon.metrics()
            errors = sum(test_daemon.metric(text, "pystrobe_push_errors_total", exporter="otlp",
                                            reason=r) or 0 for r in ("tls", "network"))
        self.assertGreaterEqual(errors, 1, daemon.output())
        self.assertEqual(receiver.taken(), [])

    def test_record_writes_the_request_to_a_file_and_report_reads_it(self):
        path = os.path.join(self.dir, "spin.otlp.pb")
        subprocess.run([PYSTROBE_BIN, "record", "--threads", "-f", "otlp", "-o", path, "-d", "3",
                        "--pid", str(self.spin.pid)], check=True, capture_output=True,
                       timeout=60)
        request = pb.service.ExportProfilesServiceRequest()
        with open(path, "rb") as f:
            request.ParseFromString(f.read())
        window = Window(request)
        attributes, profiles = window.resources()[self.spin.pid]
        self.assertEqual(attributes["process.executable.name"], "python3")
        cpu = profiles["cpu/nanoseconds"]
        self.assertGreater(sum(v for s in cpu.samples for v in s.values), 0)
        names = {f for s in cpu.samples for f, _, _ in window.frames(s)}
        self.assertIn("spin_for_otlp", names)
        # --threads: thread.id on every sample.
        keys = {window.strings[window.dict.attribute_table[i].key_strindex]
                for s in cpu.samples for i in s.attribute_indices}
        self.assertIn("thread.id", keys)
        report = subprocess.run([PYSTROBE_BIN, "report", path, "--top", "5"], capture_output=True,
                                text=True, timeout=60)
        self.assertEqual(report.returncode, 0, report.stderr)
        self.assertIn("otlp", report.stdout)
        self.assertIn("spin_for_otlp", report.stdout)
        # The report's total is every process's CPU time in the file.
        everyone = sum(v for resource in request.resource_profiles
                       for scope in resource.scope_profiles for p in scope.profiles
                       if window.strings[p.sample_type.type_strindex] == "cpu"
                       for s in p.samples for v in s.values)
        self.assertIn(f"in all ({everyone})", report.stdout)


if __name__ == "__main__":
    import unittest
    unittest.main()
