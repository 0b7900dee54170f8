"""`pystrobe report` and `pystrobe diff` on real recordings.

Debian's python3.11 runs the workloads of tests/workloads/python/e2e/ under
`pystrobe record`; the recordings are then read back:
- `report --json` of four threads (folded, pprof, speedscope): every row's
  total share within 1 point of the share the file itself gives (parsed here,
  independently: folded text, pprof by a small protobuf decoder, speedscope
  JSON), and the four workers about a quarter each of the four;
- `report --by line` of a 4:1 pair of lines: the heavy line's share of the two
  within 8 points of the program's own thread CPU clocks; `--source` shows the
  line's text with the same share; `--callers`/`--callees` name the neighbours;
- `diff` of a recording with itself is zero everywhere (and its flame graph
  white); of two programs, names the functions that came and went, and its
  flame graph draws the grown function red and runs in headless Chromium;
- bad input (a cut pprof file, a Python script, an unknown --by or
  --sample-type, a missing file) exits 2 naming the file or flag.
Recording needs root and BPF (PYSTROBE_SKIP_BPF_TESTS=1 skips); the bad-input
tests need neither.
"""

import collections
import gzip
import json
import os
import re
import subprocess
import sys
import tempfile
import unittest

from pystrobe_testlib import (CHROMIUM_RENDER, EXIT_USAGE, PROCESS_FRAME, PYSTROBE_BIN,
                              THREAD_FRAME, BpfTestCase, parse_folded, record, run_pystrobe,
                              sample_floor)
from python_testlib import PYTHON_WORKLOADS, python_workload

PYTHON = "/usr/bin/python3.11"
RATE = "499"
PY_FRAME = re.compile(r"^(?P<name>\S.*?) \((?P<file>[^()]*?)(?::(?P<line>\d+))?\)$")
WORKERS = ("worker_a", "worker_b", "worker_c", "worker_d")


def json_line(text):
    found = [json.loads(line) for line in text.splitlines() if line.startswith("{")]
    if not found:
        raise AssertionError(f"the workload printed no JSON result: {text!r}")
    return found[-1]


def report(*args, cwd=None):
    """`pystrobe report ARGS` run in `cwd`: (returncode, stdout, stderr)."""
    # The binary's path may be relative to where the tests run.
    proc = subprocess.run([os.path.abspath(PYSTROBE_BIN), "report"] + list(args),
                          capture_output=True, text=True, timeout=60, cwd=cwd)
    return proc.returncode, proc.stdout, proc.stderr


def report_json(test, *args, command="report", cwd=None):
    returncode, stdout, stderr, _ = run_pystrobe([command] + list(args) + ["--json"], cwd=cwd)
    test.assertEqual(returncode, 0, f"pystrobe {command} {' '.join(args)}: {stderr}")
    return json.loads(stdout)


# --- the files' own shares, read here without pystrobe -----------------------------

def folded_functions(stack):
    """(function, file) of each frame of a folded stack, as a report groups
    them: without the process frame and the thread frame under it."""
    frames = list(stack)
    if frames and PROCESS_FRAME.match(frames[0]):
        frames = frames[1:]
    if frames and THREAD_FRAME.match(frames[0]):
        frames = frames[1:]
    keys = []
    for frame in frames:
        match = PY_FRAME.match(frame)
        if match and not frame.endswith("_[k]"):
            keys.append((match.group("name"), match.group("file")))
        else:
            keys.append((frame, ""))
    return keys


def folded_shares(path):
    """{(function, file): share of all samples of the stacks holding it}."""
    with open(path, encoding="utf-8") as f:
        stacks = parse_folded(f.read())
    all_samples = sum(stacks.values())
    held = collections.Counter()
    for stack, count in stacks.items():
        for key in set(folded_functions(stack)):
            held[key] += count
    return {key: n / all_samples for key, n in held.items()}, all_samples


def _varint(buf, i):
    result = shift = 0
    while True:
        byte = buf[i]
        i += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, i
        shift += 7


def _fields(buf):
    """(field number, wire type, value) of a protobuf message."""
    i = 0
    while i < len(buf):
        key, i = _varint(buf, i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, i = _varint(buf, i)
        elif wire == 2:
            size, i = _varint(buf, i)
            value, i = buf[i:i + size], i + size
        elif wire == 1:
            value, i = buf[i:i + 8], i + 8
        elif wire == 5:
            value, i = buf[i:i + 4], i + 4
        else:
            raise ValueError(f"protobuf wire type {wire}")
        yield number, wire, value


def _ints(wire, value):
    """A repeated integer field's values, packed or not."""
    if wire == 0:
        return [value]
    out, i = [], 0
    while i < len(value):
        v, i = _varint(value, i)
        out.append(v)
    return out


def pprof_shares(path):
    """({(function, file): share of the default sample type's total}, total),
    read with the decoder above from profile.proto's field numbers."""
    with open(path, "rb") as f:
        data = gzip.decompress(f.read())
    strings, types, samples, functions, locations, default = [], [], [], {}, {}, 0
    for number, wire, value in _fields(data):
        if number == 6:
            strings.append(value.decode("utf-8"))
        elif number == 1:
            types.append(dict((n, v) for n, _, v in _fields(value)).get(1, 0))
        elif number == 2:
            ids, values = [], []
            for n, w, v in _fields(value):
                if n == 1:
                    ids += _ints(w, v)
                elif n == 2:
                    values += _ints(w, v)
            samples.append((ids, values))
        elif number == 5:
            fields = dict((n, v) for n, _, v in _fields(value))
            functions[fields.get(1, 0)] = (fields.get(2, 0), fields.get(4, 0))
        elif number == 4:
            fields = [(n, v) for n, _, v in _fields(value)]
            location_id = dict(fields).get(1, 0)
            locations[location_id] = [dict((n, v) for n, _, v in _fields(line)).get(1, 0)
                                      for n, line in fields if n == 4]
        elif number == 14:
            default = value
    type_names = [strings[t] for t in types]
    index = type_names.index(strings[default]) if default else len(types) - 1
    held, all_samples = collections.Counter(), 0
    for ids, values in samples:
        all_samples += values[index]
        keys = set()
        for location in ids:
            for function in locations[location]:
                name, filename = functions[function]
                keys.add((strings[name], strings[filename]))
        for key in keys:
            held[key] += values[index]
    return {key: n / all_samples for key, n in held.items()}, all_samples


def speedscope_shares(path):
    with open(path, encoding="utf-8") as f:
        document = json.load(f)
    frames = document["shared"]["frames"]
    held, all_samples = collections.Counter(), 0
    for profile in document["profiles"]:
        for stack, weight in zip(profile["samples"], profile["weights"]):
            all_samples += weight
            names = [frames[i]["name"] for i in stack]
            for key in set(folded_functions(names)):
                held[key] += weight
    return {key: n / all_samples for key, n in held.items()}, all_samples


# --- recordings --------------------------------------------------------------------

class ReportRecordingTest(BpfTestCase):
    """Records the workloads once per class; the tests read the files."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        if not os.access(PYTHON, os.X_OK):
            raise AssertionError(f"{PYTHON} is missing (Debian's python3.11 is a dependency)")
        cls.recordings = {}
        cls.truths = {}

    def recording(self, script, fmt, seconds="2.5", flags=()):
        """The recording of `script` in `fmt`, made on first use."""
        key = (script, fmt, tuple(flags))
        if key not in self.recordings:
            args = ["-r", RATE] + list(flags) + ["--", PYTHON, python_workload(script),
                                                  "--seconds", seconds]
            name = f"{script.split('.')[0]}-{len(self.recordings)}"
            made = record(args, self.tmp, fmt=fmt, name=name, timeout=90)
            self.assertRecorded(made)
            self.recordings[key] = made.output_path
            self.truths[key] = json_line(made.stdout)
        return self.recordings[key], self.truths[key]


class ReportJsonTest(ReportRecordingTest):

    def check_agrees(self, path, shares, all_samples, python_only=False):
        result = report_json(self, path)
        self.assertEqual(result["total_samples"], all_samples, path)
        self.assertGreater(all_samples, 0, path)
        rows = {(r["function"], r["file"]): r for r in result["rows"]}
        self.assertTrue(rows, f"{path}: no rows")
        for key, row in rows.items():
            if python_only and not key[1]:
                continue
            self.assertIn(key, shares, f"{path}: report row {key} is in no stack of the file")
            self.assertAlmostEqual(row["total"], shares[key], delta=0.01,
                                   msg=f"{path}: {key} total {row['total']:.2%}, "
                                       f"the file {shares[key]:.2%}")
            self.assertLessEqual(row["self"], row["total"] + 1e-9, key)
        # Self shares add up to the whole: every sample has one leaf.
        self.assertAlmostEqual(sum(r["self"] for r in result["rows"]), 1.0, delta=0.001, msg=path)
        # The four threads: a quarter each of the four, within 10 points.
        four = {w: rows[(w, "four_threads.py")]["total"] for w in WORKERS
                if (w, "four_threads.py") in rows}
        self.assertEqual(sorted(four), list(WORKERS), f"{path}: workers missing from the rows")
        for worker, share in four.items():
            self.assertAlmostEqual(share / sum(four.values()), 0.25, delta=0.10,
                                   msg=f"{path}: {worker} {share:.2%} of {four}")
        return result

    def test_folded_rows_agree_with_the_folded_file(self):
        path, _ = self.recording("four_threads.py", "folded", flags=["--threads"])
        shares, all_samples = folded_shares(path)
        result = self.check_agrees(path, shares, all_samples)
        self.assertEqual(result["format"], "folded")
        # No process or thread frame became a row.
        for row in result["rows"]:
            self.assertIsNone(THREAD_FRAME.match(row["function"]), row)
            self.assertIsNone(PROCESS_FRAME.match(row["function"]), row)

    def test_pprof_rows_agree_with_the_pprof_file(self):
        path, _ = self.recording("four_threads.py", "pprof")
        shares, all_samples = pprof_shares(path)
        result = self.check_agrees(path, shares, all_samples, python_only=True)
        self.assertEqual(result["format"], "pprof")
        self.assertEqual(result["sample_type"], {"type": "cpu", "unit": "nanoseconds"})
        # The other sample type counts the same stacks; each sample's CPU time
        # is its own interval, so shares by time and by count differ a little.
        samples = report_json(self, path, "--sample-type", "samples")
        self.assertEqual(samples["sample_type"]["type"], "samples")
        by_cpu = {(r["function"], r["file"]): r["total"] for r in result["rows"]}
        for row in samples["rows"]:
            self.assertAlmostEqual(row["total"], by_cpu[(row["function"], row["file"])],
                                   delta=0.03, msg=row)

    def test_speedscope_rows_agree_with_the_speedscope_file(self):
        path, _ = self.recording("four_threads.py", "speedscope", flags=["--threads"])
        shares, all_samples = speedscope_shares(path)
        result = self.check_agrees(path, shares, all_samples)
        self.assertEqual(result["format"], "speedscope")

    def test_text_table_is_heaviest_first_and_top_limits_it(self):
        path, _ = self.recording("four_threads.py", "folded", flags=["--threads"])
        returncode, stdout, stderr = report(path, "--sort", "total", "--top", "5")
        self.assertEqual(returncode, 0, stderr)
        lines = stdout.splitlines()
        self.assertIn("samples (count)", lines[0])
        rows = [l for l in lines[3:] if re.match(r"^\s*[\d.]+%", l)]
        self.assertEqual(len(rows), 5, stdout)
        totals = [float(l.split()[2].rstrip("%")) for l in rows]
        self.assertEqual(totals, sorted(totals, reverse=True), stdout)
        self.assertRegex(stdout, r"\.\.\. \d+ more")


class ReportLinesTest(ReportRecordingTest):

    def test_by_line_splits_four_to_one(self):
        path, truth = self.recording("line_cost.py", "folded", seconds="3")
        result = report_json(self, path, "--by", "line", "--focus", "two_lines")
        lines = {(r["function"], r["line"]): r for r in result["rows"]
                 if r["file"] == "line_cost.py"}
        heavy = lines.get(("two_lines", truth["heavy_line"]))
        light = lines.get(("two_lines", truth["light_line"]))
        self.assertIsNotNone(heavy, f"no row for the heavy line: {sorted(lines)}")
        self.assertIsNotNone(light, f"no row for the light line: {sorted(lines)}")
        cpu = truth["heavy_cpu_s"] + truth["light_cpu_s"]
        self.assertGreaterEqual(heavy["total_samples"] + light["total_samples"],
                                max(100, sample_floor(cpu, int(RATE))), (cpu, result))
        measured = heavy["total_samples"] / (heavy["total_samples"] + light["total_samples"])
        expected = truth["heavy_cpu_s"] / (truth["heavy_cpu_s"] + truth["light_cpu_s"])
        self.assertAlmostEqual(measured, expected, delta=0.08,
                               msg=f"heavy line {measured:.1%} of the two, truth {expected:.1%}")
        # The folded file says the same.
        shares, _ = folded_shares(path)
        with open(path, encoding="utf-8") as f:
            stacks = parse_folded(f.read())
        frame = f"two_lines (line_cost.py:{truth['heavy_line']})"
        in_file = sum(c for s, c in stacks.items() if frame in s) / sum(stacks.values())
        self.assertAlmostEqual(heavy["total"], in_file, delta=0.01)
        # --focus keeps shares of the whole recording.
        self.assertEqual(result["total_samples"], sum(stacks.values()))
        self.assertLess(result["focused_samples"], result["total_samples"])

    def test_source_annotates_the_heavy_line(self):
        path, truth = self.recording("line_cost.py", "folded", seconds="3")
        by_line = report_json(self, path, "--by", "line")
        heavy = next(r for r in by_line["rows"]
                     if r["function"] == "two_lines" and r["line"] == truth["heavy_line"])
        # Names are shortened to the base name: found from the workload's directory.
        returncode, stdout, stderr = report(path, "--source", "two_lines", cwd=PYTHON_WORKLOADS)
        self.assertEqual(returncode, 0, stderr)
        self.assertNotIn("source not found", stdout)
        self.assertIn("def two_lines(used):", stdout)
        row = next((l for l in stdout.splitlines() if l.rstrip().endswith("# HEAVY")), None)
        self.assertIsNotNone(row, stdout)
        self.assertIn(f" {truth['heavy_line']}  ", row)
        total = float(re.findall(r"([\d.]+)%", row)[-1])
        self.assertAlmostEqual(total / 100, heavy["total"], delta=0.0001, msg=row)

        # From elsewhere the source is not found; the lines still are.
        returncode, stdout, stderr = report(path, "--source", "two_lines", cwd="/")
        self.assertEqual(returncode, 0, stderr)
        self.assertIn("source not found", stdout)

    def test_callers_and_callees(self):
        path, _ = self.recording("line_cost.py", "folded", seconds="3")
        callers = report_json(self, path, "--callers", "two_lines")
        self.assertEqual(callers["callers"][0]["function"], "main", callers)
        self.assertGreater(callers["callers"][0]["share_of_function"], 0.99, callers)
        callees = report_json(self, path, "--callees", "main")
        names = [r["function"] for r in callees["callees"]]
        self.assertEqual(names[0], "two_lines", callees)

    def test_unknown_function_is_an_error(self):
        path, _ = self.recording("line_cost.py", "folded", seconds="3")
        returncode, _, stderr = report(path, "--callers", "no_such_function")
        self.assertEqual(returncode, EXIT_USAGE)
        self.assertIn("no_such_function", stderr)


class DiffTest(ReportRecordingTest):

    def test_a_recording_against_itself_is_all_zero(self):
        path, _ = self.recording("four_threads.py", "folded", flags=["--threads"])
        svg = os.path.join(self.tmp, "self-diff.svg")
        result = report_json(self, path, path, "-o", svg, command="diff")
        self.assertEqual(result["before"]["total_samples"], result["after"]["total_samples"])
        self.assertTrue(result["rows"])
        for row in result["rows"]:
            self.assertEqual(row["delta_self"], 0, row)
            self.assertEqual(row["delta_total"], 0, row)
            self.assertEqual(row["before_total_samples"], row["after_total_samples"], row)
        with open(svg, encoding="utf-8") as f:
            drawing = f.read()
        fills = re.findall(r'<g class="f"[^>]*>.*?fill="([^"]+)"', drawing)
        self.assertGreater(len(fills), 5)
        self.assertEqual(set(fills[1:]), {"rgb(255,255,255)"}, "a frame changed colour")

    def test_two_programs_name_what_changed(self):
        before, _ = self.recording("four_threads.py", "folded", flags=["--threads"])
        after, _ = self.recording("line_cost.py", "pprof", seconds="3")
        svg = os.path.join(self.tmp, "diff.svg")
        result = report_json(self, before, after, "--sort", "total", "--top", "12",
                             "-o", svg, command="diff")
        rows = {r["function"]: r for r in result["rows"]}
        self.assertIn("two_lines", rows, result)
        self.assertGreater(rows["two_lines"]["delta_total"], 0.5, rows["two_lines"])
        self.assertEqual(rows["two_lines"]["before_total"], 0)
        for worker in WORKERS:
            self.assertIn(worker, rows, result)
            self.assertLess(rows[worker]["delta_total"], -0.1, rows[worker])
            self.assertEqual(rows[worker]["after_total"], 0)
        # Biggest change first.
        changes = [abs(r["delta_total"]) for r in result["rows"]]
        self.assertEqual(changes, sorted(changes, reverse=True))
        # The flame graph draws AFTER; two_lines grew: red.
        with open(svg, encoding="utf-8") as f:
            drawing = f.read()
        grown = re.findall(r'<title>two_lines \(line_cost\.py:\d+\) \([^<]*\+[\d.]+ points[^<]*'
                           r'</title><rect [^>]*fill="rgb\(255,(\d+),(\d+)\)"', drawing)
        self.assertTrue(grown, "two_lines is not drawn red")
        self.assertTrue(any(int(g) < 255 for g, _ in grown), grown)
        # It opens in a browser and its script (zoom, search) runs.
        render = subprocess.run([sys.executable, CHROMIUM_RENDER, svg, "two_lines (line_cost.py"],
                                capture_output=True, text=True, timeout=120)
        self.assertEqual(render.returncode, 0, f"chromium_render.py {svg}:\n{render.stdout}"
                                               f"\n{render.stderr}")

        returncode, stdout, stderr, _ = run_pystrobe(["diff", before, after])
        self.assertEqual(returncode, 0, stderr)
        self.assertIn("two_lines", stdout)


class BadInputTest(unittest.TestCase):
    """No recording needed: files made here."""

    @classmethod
    def setUpClass(cls):
        cls._tmp = tempfile.TemporaryDirectory(prefix="pystrobe-report-bad-")
        cls.tmp = cls._tmp.name
        cls.folded = os.path.join(cls.tmp, "ok.folded")
        with open(cls.folded, "w") as f:
            f.write("python3 (1);main (m.py:1);f (m.py:3) 7\n")

    @classmethod
    def tearDownClass(cls):
        cls._tmp.cleanup()

    def assertUsageError(self, args, *needles):
        returncode, stdout, stderr, _ = run_pystrobe(args)
        self.assertEqual(returncode, EXIT_USAGE, f"{args}: {stdout}{stderr}")
        for needle in needles:
            self.assertIn(needle, stderr, args)
        self.assertEqual(stdout, "", args)

    def test_cut_pprof_file(self):
        # A pprof-shaped gzip stream cut in half.
        cut = os.path.join(self.tmp, "cut.pb.gz")
        whole = gzip.compress(bytes(range(256)) * 64)
        with open(cut, "wb") as f:
            f.write(whole[:len(whole) // 2])
        self.assertUsageError(["report", cut], cut, "truncated")
        self.assertUsageError(["diff", self.folded, cut], cut, "truncated")

    def test_file_that_is_not_a_recording(self):
        script = python_workload("line_cost.py")
        self.assertUsageError(["report", script], script, "line 1")
        empty = os.path.join(self.tmp, "empty.folded")
        open(empty, "w").close()
        self.assertUsageError(["report", empty], empty)
        self.assertUsageError(["report", os.path.join(self.tmp, "missing.folded")],
                              "missing.folded")

    def test_bad_flags(self):
        self.assertUsageError(["report", self.folded, "--by", "module"], "--by", "module")
        self.assertUsageError(["report", self.folded, "--sort", "calls"], "--sort")
        self.assertUsageError(["report", self.folded, "--top", "-1"], "--top")
        self.assertUsageError(["report", self.folded, "--sample-type", "alloc_space"],
                              "--sample-type", "alloc_space", "samples")
        self.assertUsageError(["report", self.folded, "--focus", "("], "--focus")
        self.assertUsageError(["report", self.folded, "--bogus"], "--bogus")
        self.assertUsageError(["report"], "FILE")
        self.assertUsageError(["diff", self.folded], "BEFORE and AFTER")

    def test_help(self):
        for command in ("report", "diff"):
            returncode, stdout, _, _ = run_pystrobe([command, "--help"])
            self.assertEqual(returncode, 0)
            self.assertIn(f"usage: pystrobe {command}", stdout)


if __name__ == "__main__":
    unittest.main()
