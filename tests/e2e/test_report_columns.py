"""`pystrobe report` for Python people (issue #32): per Python line, where its
time went; the call graph; the HTML page.

Debian's python3.11 runs tests/workloads/python/e2e/line_columns.py, whose one
hot line per mode is known and timed by the program itself:
- numpy (`a @ a`, reference BLAS), recorded `--native --off-cpu -f pprof` as
  the issue did: `report --by line` puts that line first, not dgemm_; it holds
  >= 90% of the samples, and >= 85% of the CPU samples are native under it;
- a pure-Python loop: its line is >= 90% of the CPU and >= 90% of it Python;
- time.sleep with --off-cpu: the line's time is off-CPU sleep, its share of
  the wall time what the program measured (within 8 points);
- write + fsync with --off-cpu: the line shows IO wait;
- `report --dot` renders with Graphviz `dot -Tsvg`, and its heaviest edge
  is the heaviest caller -> callee pair of the folded stacks;
- `report --html` and `diff --html` load in headless Chromium: the rendered
  DOM names the heaviest line and function, the flame graph's script ran,
  and a screenshot is not blank.
- the daemon serves the same page for a recent window (`/` lists windows and
  processes, `/profile?window=N&pid=P`), GET only, read in Chromium too;
- a hand-written folded file goes through the columns, --dot and --html.
Recording needs root and BPF (PYSTROBE_SKIP_BPF_TESTS=1 skips); the
hand-written and bad-input tests need neither.
"""

import collections
import json
import os
import re
import shutil
import struct
import subprocess
import tempfile
import time
import unittest
import urllib.error
import urllib.request
import zlib

from pystrobe_testlib import (EXIT_USAGE, PROCESS_FRAME, THREAD_FRAME, BpfTestCase,
                              parse_folded, record, run_pystrobe)
from python_testlib import python_workload
import chromium_render

PYTHON = "/usr/bin/python3.11"
RATE = "499"
SCRIPT = "line_columns.py"
PY_FRAME = re.compile(r"^(?P<name>\S.*?) \((?P<file>[^()]*?)(?::(?P<line>\d+))?\)$")


def json_line(text):
    found = [json.loads(line) for line in text.splitlines() if line.startswith("{")]
    if not found:
        raise AssertionError(f"the workload printed no JSON result: {text!r}")
    return found[-1]


def report_json(test, *args):
    returncode, stdout, stderr, _ = run_pystrobe(["report"] + list(args) + ["--json"])
    test.assertEqual(returncode, 0, f"pystrobe report {' '.join(args)}: {stderr}")
    return json.loads(stdout)


def hot_row(result, truth):
    for row in result["rows"]:
        if row["file"] == SCRIPT and row.get("line") == truth["hot_line"]:
            return row
    raise AssertionError(f"no row for {SCRIPT}:{truth['hot_line']}: {result['rows'][:8]}")


def http_get(url, method="GET"):
    """(status, body) of one request; HTTP errors are answers too."""
    request = urllib.request.Request(url, method=method, data=b"" if method == "POST" else None)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def column(row, name):
    return row["columns"].get(name, 0.0)


def png_rows(path):
    """(bytes per pixel, row of pixels) for each row of an 8-bit RGB or RGBA
    PNG, unfiltered (PNG's filters 0-4), with the standard library only."""
    with open(path, "rb") as f:
        data = f.read()
    if not data.startswith(b"\x89PNG\r\n\x1a\n"):
        raise AssertionError(f"{path} is not a PNG")
    at, idat, header = 8, b"", None
    while at < len(data):
        length, kind = struct.unpack(">I4s", data[at:at + 8])
        body = data[at + 8:at + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        at += 12 + length
    width, height, depth, colour, _, _, interlace = header
    if depth != 8 or colour not in (2, 6) or interlace:
        raise AssertionError(f"{path}: not an 8-bit RGB(A) PNG: {header}")
    bpp = 3 if colour == 2 else 4
    raw, stride, prev = zlib.decompress(idat), width * bpp, bytearray(width * bpp)
    for y in range(height):
        kind, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            left = line[i - bpp] if i >= bpp else 0
            up, up_left = prev[i], prev[i - bpp] if i >= bpp else 0
            if kind == 1:
                line[i] = (line[i] + left) & 0xFF
            elif kind == 2:
                line[i] = (line[i] + up) & 0xFF
            elif kind == 3:
                line[i] = (line[i] + (left + up) // 2) & 0xFF
            elif kind == 4:
                p = left + up - up_left
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - up_left)
                line[i] = (line[i] + (left if pa <= pb and pa <= pc else up if pb <= pc
                                      else up_left)) & 0xFF
        yield bpp, bytes(line)
        prev = line


def png_is_blank(path):
    """Whether every pixel of the PNG at `path` has one colour."""
    first = None
    for bpp, row in png_rows(path):
        if first is None:
            first = row
        if row != first or row != row[:bpp] * (len(row) // bpp):
            return False
    return True


# Recordings shared by the classes of this file: each is made once.
_RECORDINGS = {}
_RECORDINGS_DIR = None


def setUpModule():
    global _RECORDINGS_DIR
    _RECORDINGS_DIR = tempfile.TemporaryDirectory(prefix="pystrobe-report-columns-")


def tearDownModule():
    _RECORDINGS_DIR.cleanup()


class ColumnsRecordingTest(BpfTestCase):
    """Records each mode once; the tests read the files."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        if not os.access(PYTHON, os.X_OK):
            raise AssertionError(f"{PYTHON} is missing (Debian's python3.11 is a dependency)")

    def recording(self, mode, fmt, flags=()):
        # The interpreter's start (and numpy's import) are in the recording
        # but not the hot line's: a longer run makes them small beside it, on
        # CPU time too when the machine is busy, so that the hot line leads
        # the report by far. Its share is judged by the program's own clocks.
        seconds = "12" if mode == "numpy" else "4"
        key = (mode, fmt, tuple(flags))
        if key not in _RECORDINGS:
            args = ["-r", RATE] + list(flags) + ["--", PYTHON, python_workload(SCRIPT),
                                                  "--mode", mode, "--seconds", seconds]
            made = record(args, _RECORDINGS_DIR.name, fmt=fmt,
                          name=f"{mode}-{len(_RECORDINGS)}", timeout=120)
            self.assertRecorded(made)
            _RECORDINGS[key] = (made.output_path, json_line(made.stdout))
        return _RECORDINGS[key]


def share_of_main(result, row):
    """`row`'s self as a share of main()'s total: of the run the workload
    timed, without the interpreter's start."""
    main = next((r for r in result["rows"] if r["function"] == "main" and r["file"] == SCRIPT),
                None)
    if main is None:
        raise AssertionError(f"no main() row: {result['rows'][:8]}")
    return row["self"] / main["total"]


class LineColumnsTest(ColumnsRecordingTest):

    def test_numpy_line_leads_and_its_time_is_native(self):
        path, truth = self.recording("numpy", "pprof", ["--native", "--off-cpu"])
        # The first row was dgemm_: now it is the Python line.
        returncode, stdout, stderr, _ = run_pystrobe(["report", path, "--by", "line"])
        self.assertEqual(returncode, 0, stderr)
        table = [l for l in stdout.splitlines() if re.match(r"^\s*[\d.]+%", l)]
        self.assertTrue(table[0].endswith(f"run_numpy ({SCRIPT}:{truth['hot_line']})"), stdout)
        self.assertIn("native", stdout.splitlines()[2], stdout)

        # Wall time (the file's default): the line's share of main() is the
        # program's own measure of it.
        wall = report_json(self, path, "--by", "line")
        row = hot_row(wall, truth)
        self.assertEqual(wall["rows"][0]["line"], truth["hot_line"], wall["rows"][:3])
        measured = share_of_main(report_json(self, path, "--by", "function"), row)
        expected = truth["hot_wall_s"] / truth["run_wall_s"]
        self.assertAlmostEqual(measured, expected, delta=0.05,
                               msg=f"of main(): {measured:.1%}; {row}; truth {truth}")
        # The columns are the line's self, split; waiting for a CPU on a
        # busy machine is runqueue, not the line's native time.
        self.assertAlmostEqual(sum(row["columns"].values()), row["self"], delta=1e-5, msg=row)
        on_cpu = sum(column(row, c) for c in ("python", "native", "system"))
        self.assertGreaterEqual(column(row, "native"), 0.85 * on_cpu, row)

        cpu = report_json(self, path, "--by", "line", "--sample-type", "cpu")
        row = hot_row(cpu, truth)
        # The program's own share of its CPU on the line, not a fixed floor:
        # beside a busy neighbour its start weighs more (it measured 88.7%).
        expected = truth["hot_cpu_s"] / truth["process_cpu_s"]
        self.assertAlmostEqual(row["self"], expected, delta=0.08, msg=f"{row}; truth {truth}")
        self.assertGreaterEqual(column(row, "native"), 0.85, row)
        # dgemm_ is below it: total, but nothing charged to it.
        blas = [r for r in cpu["rows"] if r["function"] == "dgemm_"]
        self.assertTrue(blas, "no dgemm_ row: were native frames recorded?")
        self.assertEqual(blas[0]["self"], 0, blas[0])
        self.assertGreater(blas[0]["total"], 0.5, blas[0])

        # --by function has the same columns.
        functions = report_json(self, path, "--by", "function", "--sample-type", "cpu")
        self.assertEqual(functions["rows"][0]["function"], "run_numpy", functions["rows"][:3])
        self.assertGreaterEqual(column(functions["rows"][0], "native"), 0.85)

    def test_pure_python_loop_line_is_python(self):
        path, truth = self.recording("loop", "folded", ["--native"])
        result = report_json(self, path, "--by", "line")
        row = hot_row(result, truth)
        self.assertEqual(result["rows"][0]["line"], truth["hot_line"], result["rows"][:3])
        expected = truth["hot_cpu_s"] / truth["process_cpu_s"]
        self.assertAlmostEqual(row["self"], expected, delta=0.08, msg=f"{row}; truth {truth}")
        self.assertGreaterEqual(column(row, "python") / row["self"], 0.90, row)
        # --source shows the line with the same columns.
        source = report_json(self, path, "--source", "run_loop")
        line = next(l for l in source["files"][0]["lines"] if l["line"] == truth["hot_line"])
        self.assertAlmostEqual(column(line, "python"), column(row, "python"), delta=1e-6)

    def test_sleep_line_is_off_cpu_sleep(self):
        path, truth = self.recording("sleep", "folded", ["--off-cpu"])
        result = report_json(self, path, "--by", "line")
        row = hot_row(result, truth)
        by_function = report_json(self, path, "--by", "function")
        measured = share_of_main(by_function, row)
        expected = truth["hot_wall_s"] / truth["run_wall_s"]
        self.assertAlmostEqual(measured, expected, delta=0.05,
                               msg=f"of main(): {measured:.1%}; {row}; truth {truth}")
        self.assertGreaterEqual(column(row, "sleep") / row["self"], 0.95, row)
        self.assertEqual(result["rows"][0]["line"], truth["hot_line"], result["rows"][:3])

    def test_fsync_line_shows_io_wait(self):
        path, truth = self.recording("fsync", "pprof", ["--off-cpu"])
        result = report_json(self, path, "--by", "line")
        row = hot_row(result, truth)
        by_function = report_json(self, path, "--by", "function")
        measured = share_of_main(by_function, row)
        expected = truth["hot_wall_s"] / truth["run_wall_s"]
        self.assertAlmostEqual(measured, expected, delta=0.05,
                               msg=f"of main(): {measured:.1%}; {row}; truth {truth}")
        self.assertGreater(column(row, "io_wait"), 0.5 * row["self"], row)
        self.assertIn("io_wait", result["column_names"])


class CallGraphDotTest(ColumnsRecordingTest):

    def test_dot_renders_and_its_heaviest_edge_is_the_folded_stacks(self):
        if shutil.which("dot") is None:
            self.fail("Graphviz's dot is missing (scripts/install-deps.sh installs graphviz)")
        path, truth = self.recording("numpy", "folded", ["--native"])
        graph = os.path.join(self.tmp, "numpy.dot")
        returncode, _, stderr, _ = run_pystrobe(["report", path, "--dot", "-o", graph])
        self.assertEqual(returncode, 0, stderr)
        svg = os.path.join(self.tmp, "numpy.svg")
        rendered = subprocess.run(["dot", "-Tsvg", graph, "-o", svg], capture_output=True,
                                  text=True, timeout=60)
        self.assertEqual(rendered.returncode, 0, rendered.stderr)
        with open(svg, encoding="utf-8") as f:
            drawing = f.read()
        self.assertIn("<svg", drawing)
        self.assertIn("run_numpy", drawing)

        # The dot file's edges, by the nodes' functions.
        with open(graph, encoding="utf-8") as f:
            text = f.read()
        names = {m.group(1): m.group(2) for m in
                 re.finditer(r'^\s*(n\d+) \[label="((?:[^"\\]|\\.)*?)(?:\\n|")', text, re.M)}
        edges = [(names[m.group(1)], names[m.group(2)], int(m.group(3))) for m in
                 re.finditer(r'^\s*(n\d+) -> (n\d+) \[.*?tooltip="(\d+) ', text, re.M)]
        self.assertTrue(edges, text[:2000])
        caller, callee, samples = max(edges, key=lambda e: e[2])

        # The folded file's own: each caller -> callee pair once per stack.
        with open(path, encoding="utf-8") as f:
            stacks = parse_folded(f.read())
        pairs = collections.Counter()
        for stack, count in stacks.items():
            frames = list(stack)
            if frames and PROCESS_FRAME.match(frames[0]):
                frames = frames[1:]
            if frames and THREAD_FRAME.match(frames[0]):
                frames = frames[1:]
            functions = []
            for frame in frames:
                match = PY_FRAME.match(frame)
                functions.append(match.group("name") if match and not frame.endswith("_[k]")
                                 else frame)
            for pair in set(zip(functions, functions[1:])):
                pairs[pair] += count
        heaviest = max(pairs.values())
        self.assertEqual(samples, heaviest, f"dot's heaviest {caller} -> {callee}: {samples}; "
                                            f"folded: {pairs.most_common(3)}")
        self.assertEqual(pairs[(caller, callee)], heaviest, pairs.most_common(3))


class HtmlPageTest(ColumnsRecordingTest):

    def check_in_chromium(self, page, png):
        try:
            dom = chromium_render.render_dom(page)
            chromium_render.render_screenshot(page, png, width=1300, height=1000)
        except FileNotFoundError as e:
            self.fail(f"Chromium is missing: {e}")
        self.assertIn(chromium_render.READY_MARKER, dom, "the flame graph's script did not run")
        self.assertFalse(png_is_blank(png), f"{png} is blank")
        return dom

    def test_report_page_in_a_browser(self):
        path, truth = self.recording("numpy", "pprof", ["--native", "--off-cpu"])
        page = os.path.join(self.tmp, "numpy.html")
        # Run beside the workload: its file name is recorded relative to there.
        returncode, _, stderr, _ = run_pystrobe(["report", path, "--html", "-o", page],
                                                cwd=os.path.dirname(python_workload(SCRIPT)))
        self.assertEqual(returncode, 0, stderr)
        with open(page, encoding="utf-8") as f:
            html_text = f.read()
        self.assertNotRegex(html_text, r'(src|href)="(https?:)?//', "the page fetches something")
        dom = self.check_in_chromium(page, os.path.join(self.tmp, "numpy.png"))
        line = f"run_numpy ({SCRIPT}:{truth['hot_line']})"
        body = re.search(r"<body[^>]*>", dom).group(0)
        self.assertIn(f'data-heaviest-line="{line}"', body)
        self.assertIn('data-heaviest-function="run_numpy"', body)
        first_row = re.search(r'<tr class="line-row"[^>]*>', dom)
        self.assertIsNotNone(first_row, "no line rows in the rendered page")
        self.assertIn(f'data-line="{truth["hot_line"]}"', first_row.group(0))
        self.assertTrue("<th>native</th>" in dom, "no native column in the page")
        # The annotated source of the heaviest function, with its text.
        source = re.search(r'<tr class="hot" data-line="%d">.*?</tr>' % truth["hot_line"], dom)
        self.assertIsNotNone(source, "the hot line is not highlighted in the source")
        self.assertIn("b = a @ a  # HOT numpy", source.group(0).replace("&amp;", "&"))

    def test_diff_page_in_a_browser(self):
        before, _ = self.recording("loop", "folded", ["--native"])
        after, _ = self.recording("numpy", "pprof", ["--native", "--off-cpu"])
        page = os.path.join(self.tmp, "diff.html")
        returncode, _, stderr, _ = run_pystrobe(["diff", before, after, "--html", "-o", page])
        self.assertEqual(returncode, 0, stderr)
        dom = self.check_in_chromium(page, os.path.join(self.tmp, "diff.png"))
        for part in ('id="before"', 'id="after"', 'id="differential"', 'class="diff-row"'):
            self.assertIn(part, dom)
        self.assertRegex(dom, r'class="diff-row" data-function="run_(numpy|loop)"')


class DaemonPagesTest(BpfTestCase):
    """The daemon serves the same page for its recent windows, beside /metrics."""

    def test_index_and_profile_pages_in_a_browser(self):
        import test_daemon  # its Daemon helper; a module, so its tests do not run here
        busy = subprocess.Popen([PYTHON, python_workload(SCRIPT), "--mode", "loop",
                                 "--seconds", "40"], stdout=subprocess.PIPE, text=True)
        self.addCleanup(lambda: (busy.kill(), busy.wait(), busy.stdout.close()))
        self.assertEqual(busy.stdout.readline().strip(), "ready")
        daemon = test_daemon.Daemon(self.tmp, ["--window", "2"])
        self.addCleanup(daemon.stop)
        base = f"http://127.0.0.1:{daemon.port}"

        # A window that holds the workload, listed on /. The daemon's first
        # windows may hold its samples before its Python was read (native
        # frames only): the newest window is taken until one has its lines.
        window, index, page, heaviest = None, "", "", None
        deadline = time.time() + 40
        while time.time() < deadline:
            time.sleep(1)
            index = http_get(f"{base}/")[1]
            newest = next((int(m.group(1)) for m in re.finditer(
                r'href="/profile\?window=(\d+)&amp;pid=(\d+)"', index)
                if int(m.group(2)) == busy.pid), None)
            if newest is None or newest == window:
                continue
            window = newest
            status, page = http_get(f"{base}/profile?window={window}&pid={busy.pid}")
            self.assertEqual(status, 200, page[:500])
            heaviest = re.search(r'data-heaviest-line="([^"]*)"', page)
            self.assertIsNotNone(heaviest, page[:2000])
            if heaviest.group(1).startswith("run_loop ("):
                break
        self.assertIsNotNone(window, f"pid {busy.pid} in no window of /:\n{index[:3000]}")
        url = f"{base}/profile?window={window}&pid={busy.pid}"
        self.assertRegex(heaviest.group(1), r"^run_loop \(.*line_columns\.py:\d+\)$")
        self.assertIn("<th>python</th>", page)
        # The same access as /metrics, and nothing that writes.
        self.assertEqual(http_get(f"{base}/metrics")[0], 200)
        self.assertEqual(http_get(url, method="POST")[0], 405)
        self.assertEqual(http_get(f"{base}/profile?window=999999")[0], 404)
        self.assertEqual(http_get(f"{base}/profile?window=x")[0], 400)

        try:
            dom = chromium_render.render_url_dom(url)
            png = os.path.join(self.tmp, "daemon.png")
            chromium_render.render_url_screenshot(url, png, width=1300, height=1000)
        except FileNotFoundError as e:
            self.fail(f"Chromium is missing: {e}")
        self.assertIn(chromium_render.READY_MARKER, dom, "the flame graph's script did not run")
        self.assertIn(f'data-heaviest-line="{heaviest.group(1)}"', dom)
        self.assertIn('data-heaviest-function="run_loop"', dom)
        self.assertFalse(png_is_blank(png), f"{png} is blank")
        index_dom = chromium_render.render_url_dom(f"{base}/")
        self.assertIn(f'data-pid="{busy.pid}"', index_dom)


class HandWrittenFoldedTest(unittest.TestCase):
    """No recording, no root: a folded file written here, as pystrobe names
    frames, read through every view."""

    FOLDED = ("[on-cpu];python3 (9);<module> (mm.py:6);python3.11+0x1f;libblas.so.3+0x40;dgemm_ 900\n"
              "[on-cpu];python3 (9);<module> (mm.py:6);PyObject_Call 50\n"
              "[on-cpu];python3 (9);<module> (mm.py:6);dgemm_;clear_page_erms_[k] 20\n"
              "[off-cpu];python3 (9);<module> (mm.py:7);schedule_[k];[io wait] 30\n")

    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory(prefix="pystrobe-report-folded-")
        self.addCleanup(self._tmp.cleanup)
        self.path = os.path.join(self._tmp.name, "mm.folded")
        with open(self.path, "w") as f:
            f.write(self.FOLDED)

    def test_columns_dot_and_html(self):
        result = report_json(self, self.path, "--by", "line")
        rows = {r["line"]: r for r in result["rows"] if r["file"] == "mm.py"}
        self.assertEqual(result["rows"][0]["line"], 6)
        self.assertAlmostEqual(column(rows[6], "native"), 0.90, places=6)
        self.assertAlmostEqual(column(rows[6], "python"), 0.05, places=6)
        self.assertAlmostEqual(column(rows[6], "system"), 0.02, places=6)
        self.assertAlmostEqual(column(rows[7], "io_wait"), 0.03, places=6)
        self.assertEqual(result["column_names"], ["python", "native", "system", "io_wait"])

        returncode, dot, stderr, _ = run_pystrobe(["report", self.path, "--dot"])
        self.assertEqual(returncode, 0, stderr)
        if shutil.which("dot") is None:
            self.fail("Graphviz's dot is missing (scripts/install-deps.sh installs graphviz)")
        rendered = subprocess.run(["dot", "-Tsvg"], input=dot, capture_output=True, text=True,
                                  timeout=60)
        self.assertEqual(rendered.returncode, 0, rendered.stderr)
        self.assertIn("dgemm_", rendered.stdout)

        page = os.path.join(self._tmp.name, "mm.html")
        returncode, _, stderr, _ = run_pystrobe(["report", self.path, "--html", "-o", page])
        self.assertEqual(returncode, 0, stderr)
        with open(page, encoding="utf-8") as f:
            self.assertIn('data-heaviest-line="&lt;module&gt; (mm.py:6)"', f.read())


class BadInputTest(unittest.TestCase):

    def test_missing_or_bad_files_exit_2_naming_them(self):
        for args in (["report", "/nonexistent/x.folded", "--html", "-o", "/tmp/x.html"],
                     ["report", "/nonexistent/x.folded", "--dot"],
                     ["diff", "/nonexistent/a.folded", "/nonexistent/b.folded", "--html",
                      "-o", "/tmp/x.html"]):
            returncode, stdout, stderr, _ = run_pystrobe(args)
            self.assertEqual(returncode, EXIT_USAGE, args)
            self.assertIn("/nonexistent/", stderr, args)
            self.assertEqual(stdout, "", args)
        returncode, _, stderr, _ = run_pystrobe(["report", python_workload(SCRIPT), "--dot"])
        self.assertEqual(returncode, EXIT_USAGE)
        self.assertIn(SCRIPT, stderr)

    def test_flags_that_do_not_go_together(self):
        for args, needle in ((["--dot", "--json"], "--json"),
                             (["--html", "--source", "f"], "one at a time"),
                             (["-o", "x.dot"], "-o"),
                             (["--dot", "--node-threshold", "abc"], "--node-threshold")):
            returncode, _, stderr, _ = run_pystrobe(["report", "/nonexistent.folded"] + args)
            self.assertEqual(returncode, EXIT_USAGE, args)
            self.assertIn(needle, stderr, args)


if __name__ == "__main__":
    unittest.main()
