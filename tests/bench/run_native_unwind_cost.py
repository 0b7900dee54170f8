#!/usr/bin/env python3
"""In-kernel cost per sample of native unwinding with tables (issues #12, #31).

Runs `pystrobe record` with and without --native on a C program built without
frame pointers (unwind_chain --mode recursion, 18 native frames), on Debian's
python3.11 spinning 98 Python frames deep and, where python3-torch is
installed, on a torch training loop (one thread; Linear layers, backward,
SGD: ~40 native frames through libtorch_cpu). It reads the run time and run
count of pystrobe's own sample_cpu program (kernel.bpf_stats_enabled, found
through the recorder's /proc/PID/fdinfo) over 5 s (after torch's import) and
divides one by the other. The runs on idle CPUs and of other processes count
too (cheap ones): compare with and without --native on one workload, not
workloads with each other. For torch it also runs --native twice more with a
fresh table cache and prints what the tables cost: kernel bytes, tables, CPU
to build them (first run) and to read them back from disk (second run). As
root, with bpftool; prints tables, asserts nothing.

  tests/bench/run_native_unwind_cost.py --bin build/pystrobe \\
      --workloads build/tests/workloads/native
"""
import argparse
import json
import os
import subprocess
import tempfile
import time

from bench_common import bpf_stats

DEEP = """
import time
def spin(n):
    if n == 0:
        end = time.time() + 7
        x = 0
        while time.time() < end:
            for i in range(1000): x += i
        return x
    return spin(n - 1) + 1
spin(97)
"""

TRAIN = """
import time
import torch
torch.set_num_threads(1)
model = torch.nn.Sequential(torch.nn.Linear(512, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
loss_fn = torch.nn.CrossEntropyLoss()
x, y = torch.randn(256, 512), torch.randint(0, 10, (256,))
end = time.time() + 7
while time.time() < end:
    opt.zero_grad()
    loss_fn(model(x), y).backward()
    opt.step()
"""


def program_run_time(pid):
    """(run_time_ns, run_cnt) of the sample_cpu program `pid` holds, or None."""
    ids = set()
    for fd in os.listdir(f"/proc/{pid}/fdinfo"):
        try:
            with open(f"/proc/{pid}/fdinfo/{fd}") as f:
                for line in f:
                    if line.startswith("prog_id:"):
                        ids.add(line.split()[1])
        except OSError:
            pass
    for prog in ids:
        info = json.loads(subprocess.run(["bpftool", "-j", "prog", "show", "id", prog],
                                         capture_output=True, text=True).stdout or "{}")
        if info.get("name") == "sample_cpu":
            return info.get("run_time_ns", 0), info.get("run_cnt", 0)
    return None


def measure(binary, native, command, tmp, settle=0, cache="none"):
    """Microseconds per run of sample_cpu over 5 s after `settle` seconds (an
    import): the runs on the idle CPU and of filtered processes included,
    which are cheap, so compare with and without --native, not across
    workloads."""
    summary = os.path.join(tmp, "summary.json")
    args = [binary, "record", "-r", "997", "-f", "folded", "-o", os.path.join(tmp, "p.folded"),
            "--summary-json", summary, "--unwind-cache", cache] + \
        (["--native"] if native else []) + ["--"] + command
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(settle)
    before = program_run_time(proc.pid) or (0, 0)
    time.sleep(5)
    run = program_run_time(proc.pid)
    proc.wait()
    if not run or run[1] == before[1]:
        return float("nan")
    return (run[0] - before[0]) / (run[1] - before[1]) / 1000


def table_costs(binary, command, tmp):
    """The summary's native_unwind of two --native runs sharing a fresh cache."""
    cache = tempfile.mkdtemp(dir=tmp)
    runs = []
    for run in range(2):
        summary = os.path.join(tmp, f"tables{run}.json")
        subprocess.run([binary, "record", "-r", "199", "--native", "--unwind-cache", cache,
                        "-f", "folded", "-o", os.path.join(tmp, "t.folded"), "--summary-json",
                        summary, "--"] + command, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, check=True)
        with open(summary) as f:
            runs.append(json.load(f)["native_unwind"])
    return runs


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", default="build/pystrobe")
    parser.add_argument("--workloads", default="build/tests/workloads/native")
    options = parser.parse_args()
    with bpf_stats(), tempfile.TemporaryDirectory() as tmp:
        deep = os.path.join(tmp, "deep.py")
        with open(deep, "w") as f:
            f.write(DEEP)
        train = os.path.join(tmp, "train.py")
        with open(train, "w") as f:
            f.write(TRAIN)
        workloads = [
            ("C, 18 native frames", [os.path.join(options.workloads, "unwind_chain"), "--mode",
                                     "recursion", "--seconds", "7"], 0),
            ("python3.11, 98 Python frames", ["/usr/bin/python3.11", deep], 0),
        ]
        has_torch = subprocess.run(["/usr/bin/python3.11", "-c", "import torch"],
                                   capture_output=True).returncode == 0
        if has_torch:
            # torch's import takes seconds: the measured 5 s start after it.
            workloads.append(("torch training loop", ["/usr/bin/python3.11", train], 4))
        else:
            print("skipped: torch training loop (python3-torch is not installed)")
        print(f"{'workload':32} {'without --native':>18} {'with --native':>15}")
        for name, command, settle in workloads:
            without = measure(options.bin, False, command, tmp, settle)
            with_native = measure(options.bin, True, command, tmp, settle)
            print(f"{name:32} {without:15.2f} us {with_native:12.2f} us")
        if has_torch:
            for run, native in zip(("first", "second"),
                                   table_costs(options.bin, ["/usr/bin/python3.11", train], tmp)):
                print(f"torch, {run} run: {native['tables']} tables loaded of "
                      f"{native['binaries']} binaries mapped, {native['tables_built']} built in "
                      f"{native['build_ms']:.1f} ms CPU, {native['tables_from_disk']} read from "
                      f"disk in {native['disk_load_ms']:.1f} ms CPU, "
                      f"{native['kernel_bytes'] / 1048576:.1f} MiB in the kernel at most, "
                      f"{native['complete']} walks whole")


if __name__ == "__main__":
    main()
