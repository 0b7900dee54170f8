"""A training loop for the GPU tests without a GPU: each step prepares a batch
in Python, then waits in cuCtxSynchronize of a fake libcuda.so (which spins on
the CPU as CUDA's does), called through ctypes so that the samples' native
stack really goes through it. This process appends itself, with its pid, to
the fake NVML's script (whose device line the test wrote), so that NVML
"lists" it on the GPU.

usage: gpu_workload.py MODE SECONDS FAKE_LIBCUDA NVML_SCRIPT
  bound:   2 ms of Python a step, 20 ms in synchronize; the GPU busy 92%
  starved: 20 ms of Python a step, 1 ms in synchronize; the GPU busy 8%

With GPU_WORKLOAD_REPORT set, it writes there at its end its own CPU clocks:
the process's CPU seconds and those spent in synchronize, which is what a
profiler should count as waiting on the GPU. Both phases are timed by the wall
clock, so on a loaded machine their CPU split is not the steps' 2 to 20.
"""

import ctypes
import os
import sys
import time

MODES = {
    # mode: (Python ms, sync ms, process SM %)
    "bound": (2, 20, 92),
    "starved": (20, 1, 8),
}
GPU_MEMORY = 1_400_000_000


def prepare_batch(ms):
    """Python work of `ms` milliseconds: the input pipeline."""
    end = time.perf_counter() + ms / 1000
    total = 0
    while time.perf_counter() < end:
        total += sum(range(200))
    return total


def host_pid():
    return int(os.readlink("/proc/self"))


def synchronize(cuda):
    cuda.cuCtxSynchronize()


def main():
    mode, seconds, libcuda, script = sys.argv[1], float(sys.argv[2]), sys.argv[3], sys.argv[4]
    python_ms, sync_ms, sm_pct = MODES[mode]
    # NVML lists the pid in the driver's namespace, the host's: /proc/self
    # names it where /proc is the host's, even inside a PID namespace.
    with open(script, "a") as f:
        f.write(f"process {host_pid()} 0 {GPU_MEMORY} {sm_pct}\n")
    os.environ["FAKE_CUDA_SYNC_MS"] = str(sync_ms)
    cuda = ctypes.CDLL(libcuda)
    end = time.monotonic() + seconds
    sync_cpu = 0.0
    while time.monotonic() < end:
        prepare_batch(python_ms)
        before = time.thread_time()
        synchronize(cuda)
        sync_cpu += time.thread_time() - before
    report = os.environ.get("GPU_WORKLOAD_REPORT")
    if report:
        with open(report, "w") as f:
            f.write(f"process_cpu_seconds {time.process_time()}\n"
                    f"sync_cpu_seconds {sync_cpu}\n")


if __name__ == "__main__":
    main()
