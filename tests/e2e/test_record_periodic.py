"""Programs with a rhythm are recorded as they are, not as the sampler's beat.

A sampler ticking at an exact period sees a program whose cycle is a multiple
of that period at the same phase of its cycle, tick after tick: a function
taking 80% of each cycle read 0% in one recording and 100% in the next. The
workloads here spend each cycle of exactly one or two mean sampling periods
(at 99 and 199 Hz) in parts of known shares, and measure each part's CPU time
with their own thread clocks. Every one of three runs of each must read every
share within 5 points of that truth:
- tests/workloads/native/periodic.c: 80% / 20% of each cycle in two C
  functions, at 199 Hz;
- tests/workloads/python/e2e/periodic.py: 60/30/10 in three Python functions
  at 199 Hz, and 80/20 between two loop lines of one function at 99 Hz
  (Debian's python3.11).
The rhythm is the sampler's, whatever it walks: each rate is met by a program
whose parts the walk tells apart by function and by line, and a workload is
recorded at one rate, not both (that would double the file's CPU time, the
suite's largest, and find nothing the other rate does not). The workload that
needs the most samples (three shares, 1,500) gets the faster rate: its runs
take half the CPU seconds they would at 99 Hz.
Needs root and BPF; PYSTROBE_SKIP_BPF_TESTS=1 skips instead of failing.
"""
import json
import os
import sys
import unittest

from pystrobe_testlib import BpfTestCase, record, stacks_of_pid, summarize, workload
from python_testlib import python_workload

RUNS = 3
TOLERANCE = 0.05
PYTHON = "/usr/bin/python3.11"
# Cycles of one and two mean periods, at 99 and 199 Hz (a test per rate).
PERIODS = (1, 2)


def cycle_ms(rate, periods):
    return f"{1000.0 * periods / rate:.6f}"


def seconds_for(rate, samples):
    """The CPU seconds to run for about `samples` samples at `rate` Hz.

    A share p read from n samples is off by sqrt(p(1-p)/n) on average,
    whatever the sampler does: 1000 samples keep an 80/20 split within
    1.3 points (5 points is 4 of those), 1500 a 60/30/10 one.
    """
    return str(samples / rate)




class PeriodicTestCase(BpfTestCase):

    def record_rhythm(self, rate, argv, name):
        """Records `argv` at `rate` Hz; returns (the time its stacks' samples stand
        for, in nanoseconds, its JSON result, what a failure should also print).
        Shares are judged by that time, not by counts (see Recording.nanoseconds):
        a host that stole the guest's CPU during one part left it late samples,
        while the program's own clock counted the stolen time to that part."""
        result = os.path.join(self.tmp, f"{name}.json")
        recording = record(["-r", str(rate), "--"] + argv + ["--json", result], self.tmp,
                           fmt="speedscope", name=name, timeout=300)
        self.assertRecorded(recording)
        with open(result) as f:
            truth = json.load(f)
        return stacks_of_pid(recording.nanoseconds, truth["pid"]), truth, disturbance(
            truth, recording.summary)

    def assertSharesNear(self, stacks, parts, truth_cpu, where, disturbed=""):
        """Each part's share of the time sampled in any part (`stacks` in
        nanoseconds) is within TOLERANCE of its CPU share. A failure prints
        `disturbed` too: what the machine did to the run besides sampling."""
        sampled = {part: sum(ns for s, ns in stacks.items() if matches(s))
                   for part, matches in parts}
        seconds = sum(sampled.values()) / 1e9
        cpu = sum(truth_cpu.values())
        # A floor from the program's own CPU time: half of it.
        self.assertGreater(seconds, 0.5 * cpu,
                           f"{seconds:.3f} s sampled for {cpu:.2f} s of CPU ({where})")
        for part, _ in parts:
            recorded = sampled[part] / 1e9 / seconds
            true = truth_cpu[part] / cpu
            self.assertLess(abs(recorded - true), TOLERANCE,
                            f"{part}: {100 * recorded:.1f}% recorded, {100 * true:.1f}% true "
                            f"({where}); {seconds:.3f} s sampled; {disturbed}; "
                            f"nanoseconds per stack:\n{summarize(stacks)}")
        print(f"{where}: " + ", ".join(
            f"{part} {100 * sampled[part] / 1e9 / seconds:.1f}% "
            f"(true {100 * truth_cpu[part] / cpu:.1f}%)"
            for part, _ in parts), file=sys.stderr)


def disturbance(truth, summary):
    """What, besides the sampler, could have moved time between the parts of
    a run: the wall time each part did not run, the host's steal, the
    workload's preemptions, and the sampler's own counters."""
    sampler = {key: summary.get(key) for key in ("period_redraws", "period_redraws_failed",
                                                 "dropped")}
    off_cpu = {part: round(s, 3) for part, s in truth.get("off_cpu_s", {}).items()}
    return (f"off CPU in each part {off_cpu} s, steal {truth.get('steal_s', 0):.2f} s, "
            f"{truth.get('involuntary_switches')} preemptions, sampler {sampler}, "
            f"{summary.get('samples')} samples")


def with_frame(name):
    return lambda stack: name in stack


def with_python_frame(prefix):
    return lambda stack: any(frame.startswith(prefix) for frame in stack)


class NativeRhythmTest(PeriodicTestCase):
    """Each of its cycles, three runs (a ctest per test of this file, so that
    ctest spreads them over the cores)."""

    def check_c_program(self, rate):
        parts = [("alpha", with_frame("phase_alpha")), ("beta", with_frame("phase_beta"))]
        for periods in PERIODS:
            for run in range(RUNS):
                name = f"c-{rate}-{periods}-{run}"
                argv = [workload("periodic"), "--cycle-ms", cycle_ms(rate, periods),
                        "--alpha-percent", "80", "--cpu-seconds", seconds_for(rate, 1000)]
                stacks, truth, disturbed = self.record_rhythm(rate, argv, name)
                self.assertSharesNear(
                    stacks, parts, {"alpha": truth["alpha_cpu_s"], "beta": truth["beta_cpu_s"]},
                    {"rate": rate, "periods": periods, "run": run}, disturbed)

    def test_c_program_cycling_at_one_and_two_periods_at_199_hz(self):
        self.check_c_program(199)


@unittest.skipUnless(os.access(PYTHON, os.X_OK), f"{PYTHON} is not installed")
class PythonRhythmTest(PeriodicTestCase):
    """One test per mode, each at one rate (see the module's docstring)."""

    def check_three_functions(self, rate):
        parts = [(f, with_python_frame(f"{f} (")) for f in ("phase_a", "phase_b", "phase_c")]
        for periods in PERIODS:
            for run in range(RUNS):
                argv = [PYTHON, python_workload("periodic.py"), "--mode", "functions",
                        "--shares", "60,30,10", "--cycle-ms", cycle_ms(rate, periods),
                        "--cpu-seconds", seconds_for(rate, 1500)]
                stacks, truth, disturbed = self.record_rhythm(rate, argv,
                                                              f"py-f-{rate}-{periods}-{run}")
                self.assertSharesNear(stacks, parts, truth["cpu_s"],
                                      {"rate": rate, "periods": periods, "run": run}, disturbed)

    def check_two_lines(self, rate):
        for periods in PERIODS:
            for run in range(RUNS):
                argv = [PYTHON, python_workload("periodic.py"), "--mode", "lines",
                        "--shares", "80,20", "--cycle-ms", cycle_ms(rate, periods),
                        "--cpu-seconds", seconds_for(rate, 1000)]
                stacks, truth, disturbed = self.record_rhythm(rate, argv,
                                                              f"py-l-{rate}-{periods}-{run}")
                parts = [(tag, with_python_frame(f"two_lines (periodic.py:{line})"))
                         for tag, line in truth["lines"].items()]
                self.assertSharesNear(stacks, parts, truth["cpu_s"],
                                      {"rate": rate, "periods": periods, "run": run}, disturbed)

    def test_three_functions_cycling_at_one_and_two_periods_at_199_hz(self):
        self.check_three_functions(199)

    def test_two_lines_cycling_at_one_and_two_periods_at_99_hz(self):
        self.check_two_lines(99)


if __name__ == "__main__":
    unittest.main()
