"""pystrobe daemon pushing each window to a profile store (exporters.push,
Pyroscope's ingest API), against a loopback receiver written here that checks
the request: POST /ingest, the name/from/until parameters, a multipart body
whose `profile` field holds a gzipped pprof (decoded by npm pprof-format).
Then a receiver answering 503: the retries show in /metrics. Then a SIGHUP
that moves the push to another receiver.

Over HTTPS: a receiver with a certificate from a CA the test makes with the
`openssl` command, which checks basic auth, the tenant (X-Scope-OrgID) and an
extra header, and decodes the pprof; a server whose CA the daemon was not given
is refused and counted in pystrobe_push_errors_total{reason="tls"} (then taken
with insecure_skip_verify after a SIGHUP); a server that requires a client
certificate gets it; the password never shows in the daemon's output."""

import base64
import http.server
import os
import re
import secrets
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse

from pystrobe_testlib import BpfTestCase
import speedscope_render
import test_daemon

BUSY = "import time\nend = time.time() + 120\nwhile time.time() < end: pass\n"


def multipart_field(content_type, body, field):
    """(filename, bytes) of the part named `field`, or None."""
    match = re.search(r'boundary="?([^";]+)"?', content_type)
    if match is None:
        return None
    delimiter = b"--" + match.group(1).encode()
    for part in body.split(delimiter)[1:]:
        if part.startswith(b"--"):
            break
        head, _, content = part.partition(b"\r\n\r\n")
        disposition = re.search(rb'name="([^"]*)"(?:; filename="([^"]*)")?', head)
        if disposition and disposition.group(1).decode() == field:
            filename = disposition.group(2).decode() if disposition.group(2) else None
            return filename, content[:-2] if content.endswith(b"\r\n") else content
    return None


def openssl(*args):
    result = subprocess.run(["openssl", *args], capture_output=True, text=True, timeout=60)
    if result.returncode != 0:
        raise AssertionError(f"openssl {' '.join(args)}:\n{result.stderr}")


class CertificateAuthority:
    """A CA of the test's own, a server certificate for 127.0.0.1 and a client
    certificate that it signed (EC P-256 keys: quick to make)."""

    def __init__(self, directory, name):
        self.prefix = os.path.join(directory, name)
        self.ca_file = self.prefix + "-ca.pem"
        self.ca_key = self.prefix + "-ca.key"
        openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                "-nodes", "-keyout", self.ca_key, "-out", self.ca_file, "-days", "1",
                "-subj", f"/CN=pystrobe test CA {name}")
        self.cert_file, self.key_file = self.issue(
            "server", "/CN=127.0.0.1", "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n")
        self.client_cert_file, self.client_key_file = self.issue(
            "client", "/CN=pystrobe", "extendedKeyUsage=clientAuth\n")

    def issue(self, role, subject, extensions):
        cert, key = f"{self.prefix}-{role}.pem", f"{self.prefix}-{role}.key"
        request, extfile = f"{self.prefix}-{role}.csr", f"{self.prefix}-{role}.ext"
        with open(extfile, "w") as f:
            f.write("basicConstraints=CA:FALSE\nkeyUsage=digitalSignature\n" + extensions)
        openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                "-keyout", key, "-out", request, "-subj", subject)
        openssl("x509", "-req", "-in", request, "-CA", self.ca_file, "-CAkey", self.ca_key,
                "-CAcreateserial", "-out", cert, "-days", "1", "-extfile", extfile)
        return cert, key


class Receiver:
    """A loopback Pyroscope: records every request; answers `status`. With
    `tls` (a CertificateAuthority) it serves HTTPS with that CA's certificate,
    and with `client_ca` it requires a client certificate from that CA; with
    `expect_headers` it answers 401 to a request without those values."""

    def __init__(self, status=200, tls=None, expect_headers=None, client_ca=None):
        self.status = status
        self.requests = []
        self.lock = threading.Lock()
        self.tls = tls
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                length = int(self.headers.get("Content-Length", "0"))
                body = self.rfile.read(length)
                with receiver.lock:
                    receiver.requests.append({
                        "method": "POST", "path": self.path,
                        "content_type": self.headers.get("Content-Type", ""), "body": body,
                        "headers": {k.lower(): v for k, v in self.headers.items()},
                    })
                status = receiver.status
                for name, value in (expect_headers or {}).items():
                    if self.headers.get(name) != value:
                        status = 401
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        if tls is not None:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(tls.cert_file, tls.key_file)
            if client_ca is not None:
                context.verify_mode = ssl.CERT_REQUIRED
                context.load_verify_locations(client_ca)
            # A client that refuses the certificate makes accept() fail; the
            # server goes on with the next connection.
            self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self):
        scheme = "https" if self.tls is not None else "http"
        return f"{scheme}://127.0.0.1:{self.port}"

    def taken(self):
        with self.lock:
            return list(self.requests)

    def wait_for(self, count, timeout):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if len(self.taken()) >= count:
                return self.taken()
            time.sleep(0.2)
        return self.taken()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def push_config(url, extra=""):
    return (f"labels:\n  env: e2e\nexporters:\n  push:\n    url: \"{url}\"\n"
            f"    timeout: 2s\n    max_queue: 4\n{extra}")


class DaemonPushTest(BpfTestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        speedscope_render.ensure_node_modules()

    def setUp(self):
        self.dir = tempfile.mkdtemp(dir=self.tmp)
        # The daemon takes proxies from the environment (libcurl's default):
        # the loopback receivers are reached directly whatever this host uses.
        saved = {k: os.environ.get(k) for k in ("no_proxy", "NO_PROXY")}
        os.environ["no_proxy"] = os.environ["NO_PROXY"] = "127.0.0.1,localhost"
        self.addCleanup(lambda: [os.environ.pop(k, None) if v is None else
                                 os.environ.__setitem__(k, v) for k, v in saved.items()])

    def start_busy(self):
        """Starts self.busy, a Python busy loop, for the tests that look for it
        in a profile (before their daemon starts): it takes a core while it runs."""
        self.busy = subprocess.Popen([sys.executable, "-c", BUSY])
        self.addCleanup(self.busy.wait)
        self.addCleanup(self.busy.kill)

    def receiver(self, status=200, tls=None, expect_headers=None, client_ca=None):
        receiver = Receiver(status, tls, expect_headers, client_ca)
        self.addCleanup(receiver.close)
        return receiver

    def daemon(self, config):
        # A socket of its own: no other test's daemon or client on the default one.
        socket = os.path.join(self.dir, f"control-{len(os.listdir(self.dir))}.sock")
        daemon = test_daemon.Daemon(self.dir, ("--window", "2", "--socket", socket), config)
        self.addCleanup(daemon.stop)
        return daemon

    def test_windows_arrive_as_pyroscope_ingest_requests_with_a_gzipped_pprof(self):
        self.start_busy()
        receiver = self.receiver()
        daemon = self.daemon(push_config(receiver.url))
        requests = receiver.wait_for(2, timeout=test_daemon.LIVENESS_S)
        self.assertGreaterEqual(len(requests), 2, daemon.output())
        for request in requests:
            url = urllib.parse.urlsplit(request["path"])
            self.assertEqual(url.path, "/ingest")
            query = urllib.parse.parse_qs(url.query)
            self.assertEqual(query["name"], ["pystrobe{env=e2e}"], request["path"])
            self.assertLess(int(query["from"][0]), int(query["until"][0]) + 1)
            self.assertEqual(query.get("sampleRate"), ["19"], request["path"])
            self.assertNotIn("format", query, "multipart bodies go without format=pprof")
            self.assertTrue(request["content_type"].startswith("multipart/form-data"),
                            request["content_type"])
            field = multipart_field(request["content_type"], request["body"], "profile")
            self.assertIsNotNone(field, request["body"][:300])
            _, profile_gz = field
            self.assertEqual(profile_gz[:2], b"\x1f\x8b", "the profile is gzipped")

        path = os.path.join(self.dir, "pushed.pb.gz")
        with open(path, "wb") as f:
            f.write(multipart_field(requests[-1]["content_type"], requests[-1]["body"],
                                    "profile")[1])
        profile = test_daemon.decode_pprof(path)
        self.assertEqual(profile.get("errors"), [], str(profile)[:2000])
        self.assertIn(self.busy.pid, test_daemon.pids_in(profile), str(profile)[:2000])

        # The receiver has the windows before the pusher has read its answers
        # and counted them: the count follows.
        text = daemon.wait_for_metrics("a pushed window counted as sent", lambda text: (
            test_daemon.metric(text, "pystrobe_push_windows_total", outcome="sent") or 0) >= 1)
        sent = test_daemon.metric(text, "pystrobe_push_windows_total", outcome="sent")
        self.assertGreaterEqual(sent, 1, text)
        self.assertGreater(test_daemon.metric(text, "pystrobe_push_bytes_total"), 0)
        self.assertIsNotNone(test_daemon.metric(text, "pystrobe_push_queue_windows"))
        self.assertEqual(test_daemon.metric(text, "pystrobe_dropped_total",
                                            reason="push_queue_full"), 0)
        check = subprocess.run(["promtool", "check", "metrics"], input=text, text=True,
                               capture_output=True, timeout=30)
        self.assertEqual(check.returncode, 0, check.stdout + check.stderr)

        # SIGTERM: the last window is pushed too, in the grace the daemon gives it.
        before = len(receiver.taken())
        daemon.stop_and_time(self)
        self.assertGreater(len(receiver.taken()), before, "the final window is pushed")

    def test_a_store_answering_503_is_retried_and_the_retries_are_counted(self):
        receiver = self.receiver(status=503)
        daemon = self.daemon(push_config(receiver.url))
        deadline = time.time() + test_daemon.LIVENESS_S
        retries = 0
        while time.time() < deadline:
            retries = test_daemon.metric(daemon.metrics(), "pystrobe_push_retries_total") or 0
            if retries >= 2:
                break
            time.sleep(0.5)
        self.assertGreaterEqual(retries, 2, daemon.metrics())
        self.assertGreaterEqual(len(receiver.taken()), 3)
        text = daemon.metrics()
        self.assertEqual(test_daemon.metric(text, "pystrobe_push_windows_total", outcome="sent"),
                         0)

    def test_sighup_moves_the_push_to_the_new_url(self):
        first = self.receiver()
        second = self.receiver()
        daemon = self.daemon(push_config(first.url))
        self.assertGreaterEqual(len(first.wait_for(1, timeout=test_daemon.LIVENESS_S)), 1,
                                daemon.output())
        daemon.write_config(push_config(second.url))
        daemon.proc.send_signal(1)
        self.assertGreaterEqual(len(second.wait_for(1, timeout=test_daemon.LIVENESS_S)), 1,
                                daemon.output())
        # The receiver has the window before the pusher has read its answer
        # and counted it: give the count a moment to follow.
        deadline = time.monotonic() + test_daemon.LIVENESS_S
        while True:
            sent = test_daemon.metric(daemon.metrics(), "pystrobe_push_windows_total",
                                      outcome="sent") or 0
            if sent >= 2 or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        self.assertGreaterEqual(sent, 2, "counters carry over a reload")

    def https_config(self, url, ca_file, password):
        password_file = os.path.join(self.dir, "push-password")
        with open(password_file, "w") as f:
            f.write(password + "\n")
        return push_config(url, (
            f"    tls:\n      ca_file: {ca_file}\n"
            f"    basic_auth:\n      username: alice\n      password_file: {password_file}\n"
            f"    tenant_id: team-a\n"
            f"    headers:\n      X-Team: profiling\n"))

    def test_https_with_its_own_ca_basic_auth_and_a_tenant(self):
        self.start_busy()
        ca = CertificateAuthority(self.dir, "store")
        password = "pw-" + secrets.token_hex(8)
        authorization = "Basic " + base64.b64encode(f"alice:{password}".encode()).decode()
        receiver = self.receiver(tls=ca, expect_headers={
            "Authorization": authorization, "X-Scope-OrgID": "team-a", "X-Team": "profiling"})
        daemon = self.daemon(self.https_config(receiver.url, ca.ca_file, password))
        requests = receiver.wait_for(1, timeout=test_daemon.LIVENESS_S)
        self.assertGreaterEqual(len(requests), 1, daemon.output())
        headers = requests[0]["headers"]
        self.assertEqual(headers.get("authorization"), authorization)
        self.assertEqual(headers.get("x-scope-orgid"), "team-a")
        self.assertEqual(headers.get("x-team"), "profiling")
        path = os.path.join(self.dir, "pushed-over-tls.pb.gz")
        with open(path, "wb") as f:
            f.write(multipart_field(requests[0]["content_type"], requests[0]["body"],
                                    "profile")[1])
        profile = test_daemon.decode_pprof(path)
        self.assertEqual(profile.get("errors"), [], str(profile)[:2000])
        self.assertIn(self.busy.pid, test_daemon.pids_in(profile), str(profile)[:2000])

        # The store answered 200 (the headers were right) and nothing failed.
        deadline = time.monotonic() + test_daemon.LIVENESS_S
        while True:
            text = daemon.metrics()
            sent = test_daemon.metric(text, "pystrobe_push_windows_total", outcome="sent") or 0
            if sent >= 1 or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        self.assertGreaterEqual(sent, 1, daemon.output())
        for reason in ("tls", "connect", "http_status", "timeout"):
            self.assertEqual(test_daemon.metric(text, "pystrobe_push_errors_total",
                                                reason=reason), 0, reason)
        daemon.stop()
        with open(daemon.log_path) as f:
            self.assertNotIn(password, f.read())

    def test_a_store_whose_ca_is_not_trusted_is_refused_and_counted(self):
        trusted = CertificateAuthority(self.dir, "trusted")
        other = CertificateAuthority(self.dir, "other")
        receiver = self.receiver(tls=other)
        password = "pw-" + secrets.token_hex(8)
        daemon = self.daemon(self.https_config(receiver.url, trusted.ca_file, password))
        deadline = time.time() + test_daemon.LIVENESS_S
        errors = 0
        while time.time() < deadline:
            errors = test_daemon.metric(daemon.metrics(), "pystrobe_push_errors_total",
                                        reason="tls") or 0
            if errors >= 1:
                break
            time.sleep(0.5)
        self.assertGreaterEqual(errors, 1, daemon.metrics())
        self.assertEqual(receiver.taken(), [], "no request may reach an untrusted server")
        text = daemon.metrics()
        self.assertEqual(test_daemon.metric(text, "pystrobe_push_windows_total", outcome="sent"),
                         0)
        check = subprocess.run(["promtool", "check", "metrics"], input=text, text=True,
                               capture_output=True, timeout=30)
        self.assertEqual(check.returncode, 0, check.stdout + check.stderr)
        # The log names the URL and why, never the password.
        deadline = time.time() + test_daemon.LIVENESS_S
        while "push failed" not in daemon.output() and time.time() < deadline:
            time.sleep(0.2)
        output = daemon.output()
        self.assertIn(f"push failed: POST {receiver.url}/ingest: ", output)
        self.assertRegex(output, r"(?i)certificate")

        # insecure_skip_verify (tests only) takes the same server.
        daemon.write_config(
            push_config(receiver.url, "    tls:\n      insecure_skip_verify: true\n"))
        daemon.proc.send_signal(1)
        self.assertGreaterEqual(len(receiver.wait_for(1, timeout=test_daemon.LIVENESS_S)), 1,
                                daemon.output())
        daemon.stop()
        with open(daemon.log_path) as f:
            self.assertNotIn(password, f.read())

    def test_a_store_that_asks_for_a_client_certificate_gets_it(self):
        store = CertificateAuthority(self.dir, "store")
        clients = CertificateAuthority(self.dir, "clients")
        receiver = self.receiver(tls=store, client_ca=clients.ca_file)
        daemon = self.daemon(push_config(receiver.url, (
            f"    tls:\n      ca_file: {store.ca_file}\n"
            f"      cert_file: {clients.client_cert_file}\n"
            f"      key_file: {clients.client_key_file}\n")))
        requests = receiver.wait_for(1, timeout=test_daemon.LIVENESS_S)
        self.assertGreaterEqual(len(requests), 1, daemon.output())
        field = multipart_field(requests[0]["content_type"], requests[0]["body"], "profile")
        self.assertEqual(field[1][:2], b"\x1f\x8b")

    def test_check_config_accepts_https_and_names_an_unreadable_ca_file(self):
        config = os.path.join(self.dir, "https.yaml")
        missing = os.path.join(self.dir, "no-such-ca.pem")
        with open(config, "w") as f:
            f.write(push_config("https://profiles.example.com",
                                f"    tls:\n      ca_file: {missing}\n"))
        result = subprocess.run([test_daemon.PYSTROBE_BIN, "daemon", "--check-config", config],
                                capture_output=True, text=True, timeout=30)
        self.assertEqual(result.returncode, 1, result.stdout + result.stderr)
        self.assertIn(f"exporters.push.tls.ca_file: cannot read {missing}", result.stderr)

        with open(config, "w") as f:
            f.write(push_config("https://profiles.example.com"))
        result = subprocess.run([test_daemon.PYSTROBE_BIN, "daemon", "--check-config", config],
                                capture_output=True, text=True, timeout=30)
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
