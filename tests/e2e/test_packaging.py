"""Packaging (packaging/): the systemd unit passes `systemd-analyze verify`,
the Debian package built by CPack installs with dpkg (binary, unit, conffile,
group) and purges cleanly, the Kubernetes manifest has what the daemon needs,
and the Grafana dashboard only queries metrics the daemon exports.

Installing needs root; without it those tests are skipped and say so. The
machine is left as it was: the package is purged and a group the package
created is removed.
"""

import glob
import json
import os
import re
import shutil
import subprocess
import tempfile
import unittest

SOURCE_DIR = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
PACKAGING = os.path.join(SOURCE_DIR, "packaging")
UNIT = os.path.join(PACKAGING, "systemd", "pystrobe.service")
DAEMONSET = os.path.join(PACKAGING, "kubernetes", "daemonset.yaml")
DASHBOARD = os.path.join(PACKAGING, "grafana", "pystrobe-dashboard.json")
PYSTROBE_BIN = os.environ.get("PYSTROBE_BIN", os.path.join(SOURCE_DIR, "build", "pystrobe"))
# The binary sits at the top of its build directory (daemon/CMakeLists.txt).
BUILD_DIR = os.path.dirname(os.path.abspath(PYSTROBE_BIN))

CAPABILITIES = {"CAP_BPF", "CAP_PERFMON", "CAP_SYS_PTRACE", "CAP_DAC_READ_SEARCH"}


def run(args, **kwargs):
    return subprocess.run(args, capture_output=True, text=True, **kwargs)


def unit_settings(text):
    """[Service] and the other sections as {key: [values]}, comments dropped."""
    settings = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith(("#", ";", "[")):
            continue
        key, _, value = line.partition("=")
        settings.setdefault(key.strip(), []).append(value.strip())
    return settings


class SystemdUnitTest(unittest.TestCase):
    def test_unit_says_what_the_daemon_needs(self):
        with open(UNIT) as f:
            s = unit_settings(f.read())
        self.assertEqual(s["Type"], ["notify"])
        self.assertIn("WatchdogSec", s)
        self.assertEqual(s["Restart"], ["on-failure"])
        self.assertEqual(
            s["ExecStart"], ["/usr/bin/pystrobe daemon --config /etc/pystrobe/pystrobe.yaml"])
        self.assertEqual(s["ExecReload"], ["/bin/kill -HUP $MAINPID"])
        self.assertEqual(set(s["CapabilityBoundingSet"][0].split()), CAPABILITIES)
        self.assertEqual(set(s["AmbientCapabilities"][0].split()), CAPABILITIES)
        self.assertEqual(s["NoNewPrivileges"], ["yes"])
        self.assertEqual(s["ProtectSystem"], ["strict"])
        self.assertIn(s["ProtectHome"][0], ("yes", "read-only"))
        self.assertEqual(s["StateDirectory"], ["pystrobe"])
        self.assertEqual(s["RuntimeDirectory"], ["pystrobe"])
        self.assertEqual(s["ConfigurationDirectory"], ["pystrobe"])
        # It would hide /proc/kallsyms, and with it every kernel frame.
        self.assertNotIn("ProtectKernelTunables", s)

    def test_systemd_analyze_verify_accepts_the_unit(self):
        if shutil.which("systemd-analyze") is None:
            self.fail("systemd-analyze is missing: apt-get install systemd")
        # verify checks that ExecStart exists: point it at the built binary.
        with tempfile.TemporaryDirectory(prefix="pystrobe-unit-") as tmp:
            with open(UNIT) as f:
                text = f.read().replace("/usr/bin/pystrobe", os.path.abspath(PYSTROBE_BIN))
            path = os.path.join(tmp, "pystrobe.service")
            with open(path, "w") as f:
                f.write(text)
            result = run(["systemd-analyze", "verify", path], timeout=60)
            self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
            self.assertNotIn("pystrobe.service:", result.stderr)


class KubernetesManifestTest(unittest.TestCase):
    def setUp(self):
        try:
            import yaml  # Debian python3-yaml
        except ImportError:
            self.fail("python3-yaml is missing: apt-get install python3-yaml")
        with open(DAEMONSET) as f:
            self.docs = [d for d in yaml.safe_load_all(f) if d]
        self.by_kind = {d["kind"]: d for d in self.docs}

    def test_daemonset_has_host_pids_capabilities_and_mounts(self):
        ds = self.by_kind["DaemonSet"]
        self.assertEqual(ds["apiVersion"], "apps/v1")
        spec = ds["spec"]["template"]["spec"]
        self.assertEqual(ds["spec"]["selector"]["matchLabels"].items() -
                         ds["spec"]["template"]["metadata"]["labels"].items(), set())
        self.assertIs(spec["hostPID"], True)
        (container,) = spec["containers"]
        security = container["securityContext"]
        self.assertIsNot(security.get("privileged"), True)
        self.assertEqual({"CAP_" + c for c in security["capabilities"]["add"]}, CAPABILITIES)
        self.assertIn("ALL", security["capabilities"]["drop"])
        for kind in ("requests", "limits"):
            self.assertIn("cpu", container["resources"][kind])
            self.assertIn("memory", container["resources"][kind])

        volumes = {v["name"]: v for v in spec["volumes"]}
        mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
        for path in ("/sys/kernel/btf", "/sys/fs/cgroup"):
            self.assertIn(path, mounts, path)
            self.assertIs(mounts[path].get("readOnly"), True, path)
            self.assertEqual(volumes[mounts[path]["name"]]["hostPath"]["path"], path)
        self.assertNotIn("/sys/kernel/debug", mounts)
        config = volumes[mounts["/etc/pystrobe"]["name"]]["configMap"]["name"]
        self.assertEqual(config, self.by_kind["ConfigMap"]["metadata"]["name"])

        annotations = ds["spec"]["template"]["metadata"]["annotations"]
        self.assertEqual(annotations["prometheus.io/scrape"], "true")
        port = int(annotations["prometheus.io/port"])
        self.assertIn(port, [p["containerPort"] for p in container["ports"]])
        self.assertEqual(container["args"],
                         ["daemon", "--config", "/etc/pystrobe/pystrobe.yaml"])

    def test_configmap_is_a_valid_pystrobe_configuration(self):
        text = self.by_kind["ConfigMap"]["data"]["pystrobe.yaml"]
        self.assertIn('listen: ":9464"', text)
        with tempfile.NamedTemporaryFile("w", suffix=".yaml", prefix="pystrobe-cm-") as f:
            f.write(text)
            f.flush()
            result = run([PYSTROBE_BIN, "daemon", f"--check-config={f.name}"], timeout=30)
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)


def exported_metric_names():
    """Every metric name the daemon's source spells out ("pystrobe_...")."""
    names = set()
    for path in glob.glob(os.path.join(SOURCE_DIR, "daemon", "**", "*.cc"), recursive=True) + \
            glob.glob(os.path.join(SOURCE_DIR, "daemon", "**", "*.h"), recursive=True):
        with open(path, errors="replace") as f:
            names.update(re.findall(r'"(pystrobe_[a-z0-9_]+)"', f.read()))
    return names


class GrafanaDashboardTest(unittest.TestCase):
    def test_dashboard_is_json_and_queries_only_exported_metrics(self):
        with open(DASHBOARD) as f:
            dashboard = json.load(f)
        exported = exported_metric_names()
        self.assertIn("pystrobe_samples_total", exported, "no metric names found in daemon/")

        exprs = []
        def collect(panels):
            for panel in panels:
                collect(panel.get("panels", []))
                exprs.extend(t["expr"] for t in panel.get("targets", []) if "expr" in t)
        collect(dashboard["panels"])
        for variable in dashboard["templating"]["list"]:
            if variable.get("type") == "query":
                exprs.append(variable["definition"])
        self.assertGreater(len(exprs), 10)

        used = set()
        for expr in exprs:
            for name in re.findall(r"\b(pystrobe_[a-z0-9_]+)", expr):
                used.add(name)
                base = re.sub(r"_(bucket|sum|count)$", "", name)
                self.assertTrue(name in exported or base in exported,
                                f"{name} (in {expr!r}) is not a metric the daemon exports")
        # The per-process families the dashboard is for.
        for name in ("pystrobe_process_cpu_user_seconds_total",
                     "pystrobe_process_offcpu_seconds_total",
                     "pystrobe_process_gil_wait_seconds_total",
                     "pystrobe_process_read_bytes_total",
                     "pystrobe_dropped_total"):
            self.assertIn(name, used)
        ids = [p["id"] for p in dashboard["panels"]]
        self.assertEqual(len(ids), len(set(ids)), "panel ids must be unique")


class DebianPackageTest(unittest.TestCase):
    """cpack -G DEB, dpkg -i, look, dpkg --purge."""

    def setUp(self):
        if os.geteuid() != 0:
            self.skipTest("SKIPPED packaging install test: needs root (dpkg -i)")
        status = run(["dpkg-query", "-W", "-f=${Status}", "pystrobe"])
        if "installed" in status.stdout and "not-installed" not in status.stdout:
            self.skipTest("SKIPPED packaging install test: a pystrobe package is already "
                          "installed on this machine; not touching it")
        self.group_existed = run(["getent", "group", "pystrobe"]).returncode == 0
        self.tmp = tempfile.mkdtemp(prefix="pystrobe-deb-")
        self.addCleanup(shutil.rmtree, self.tmp, ignore_errors=True)
        self.addCleanup(self.restore)

    def restore(self):
        run(["dpkg", "--purge", "pystrobe"], timeout=120)
        if not self.group_existed and run(["getent", "group", "pystrobe"]).returncode == 0:
            run(["groupdel", "pystrobe"])

    def build_deb(self):
        config = os.path.join(BUILD_DIR, "CPackConfig.cmake")
        self.assertTrue(os.path.exists(config), f"{config}: configure the build first")
        # Packaging installs what is built (CMAKE_SKIP_INSTALL_ALL_DEPENDENCY).
        built = run(["cmake", "--build", BUILD_DIR, "--target", "pystrobe"], timeout=400)
        self.assertEqual(built.returncode, 0, built.stdout + built.stderr)
        result = run(["cpack", "-G", "DEB", "--config", config, "-B", self.tmp], timeout=400)
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        debs = glob.glob(os.path.join(self.tmp, "pystrobe_*.deb"))
        self.assertEqual(len(debs), 1, os.listdir(self.tmp))
        return debs[0]

    def test_package_installs_runs_and_purges(self):
        deb = self.build_deb()

        fields = run(["dpkg-deb", "-f", deb, "Package", "Version", "Depends"]).stdout
        self.assertIn("Package: pystrobe", fields)
        # Computed by dpkg-shlibdeps from the binary's libraries (libelf1 comes
        # with libbpf1: our own ELF reader needs no libelf).
        for dependency in ("libbpf1", "zlib1g", "libc6", "libstdc++6"):
            self.assertRegex(fields, rf"\b{re.escape(dependency)}\b", fields)
        control = run(["dpkg-deb", "-I", deb, "conffiles"]).stdout
        self.assertIn("/etc/pystrobe/pystrobe.yaml", control)
        contents = run(["dpkg-deb", "-c", deb]).stdout
        for path in ("./usr/bin/pystrobe", "./lib/systemd/system/pystrobe.service",
                     "./etc/pystrobe/pystrobe.yaml",
                     "./usr/lib/pystrobe/libpystrobe-alloc.so"):  # record --allocations -- CMD
            self.assertIn(path, contents)

        result = run(["dpkg", "-i", deb], timeout=120)
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)

        self.assertTrue(os.access("/usr/bin/pystrobe", os.X_OK))
        self.assertTrue(os.path.isfile("/usr/lib/pystrobe/libpystrobe-alloc.so"))
        self.assertTrue(os.path.isfile("/lib/systemd/system/pystrobe.service"))
        with open("/etc/pystrobe/pystrobe.yaml") as installed, \
                open(os.path.join(SOURCE_DIR, "config", "pystrobe.yaml")) as shipped:
            self.assertEqual(installed.read(), shipped.read())
        with open("/var/lib/dpkg/info/pystrobe.conffiles") as f:
            self.assertIn("/etc/pystrobe/pystrobe.yaml", f.read())
        self.assertEqual(run(["getent", "group", "pystrobe"]).returncode, 0,
                         "postinst did not create the pystrobe group")

        version = run(["/usr/bin/pystrobe", "version"], timeout=30)
        self.assertEqual(version.returncode, 0, version.stderr)
        self.assertRegex(version.stdout + version.stderr, r"\d+\.\d+\.\d+")
        check = run(["/usr/bin/pystrobe", "daemon",
                     "--check-config=/etc/pystrobe/pystrobe.yaml"], timeout=30)
        self.assertEqual(check.returncode, 0, check.stdout + check.stderr)
        verify = run(["systemd-analyze", "verify", "/lib/systemd/system/pystrobe.service"],
                     timeout=60)
        self.assertEqual(verify.returncode, 0, verify.stdout + verify.stderr)

        # Installing the same package again (an upgrade in place) works.
        again = run(["dpkg", "-i", deb], timeout=120)
        self.assertEqual(again.returncode, 0, again.stdout + again.stderr)

        purge = run(["dpkg", "--purge", "pystrobe"], timeout=120)
        self.assertEqual(purge.returncode, 0, purge.stdout + purge.stderr)
        for path in ("/usr/bin/pystrobe", "/lib/systemd/system/pystrobe.service",
                     "/etc/pystrobe/pystrobe.yaml"):
            self.assertFalse(os.path.exists(path), f"{path} left after purge")


if __name__ == "__main__":
    unittest.main()
