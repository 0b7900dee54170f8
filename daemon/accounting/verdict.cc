#include "daemon/accounting/verdict.h"

#include <algorithm>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace pystrobe {
namespace {

Verdict Make(std::string name, Bound bound, std::string evidence) {
  return Verdict{.name = std::move(name), .evidence = std::move(evidence), .bound = bound};
}

// The GPU rules, first: a process feeding a GPU is bound by the GPU or starves
// it, whatever its CPU figures say (CUDA's synchronize spins on a CPU).
std::optional<Verdict> DecideGpu(const VerdictInputs& in) {
  if (!in.uses_gpu) return std::nullopt;
  double d = std::max(in.duration_seconds, 1e-3);
  double cpu = in.figures.cpu_seconds();
  double wait = in.gpu_wait_oncpu_seconds + in.gpu_wait_offcpu_seconds;
  double active = cpu + in.gpu_wait_offcpu_seconds;  // on CPU, or asleep waiting on the GPU
  double wait_share = active > 0 ? wait / active : 0;
  double work = std::max(0.0, cpu - in.gpu_wait_oncpu_seconds) / d;  // cores
  std::string figures = absl::StrFormat(
      "its GPUs ran its kernels %.0f%% of the time; per second of wall time its threads "
      "waited %.2f s on the GPU (%.2f s spinning on CPU), worked %.2f s on CPU outside "
      "GPU waits, %.2f s in IO wait and %.2f s runnable in the run queue",
      100 * in.gpu_busy_share, wait / d, in.gpu_wait_oncpu_seconds / d, work,
      in.figures.offcpu_io_seconds / d, in.figures.runqueue_seconds / d);
  if (in.gpu_busy_share >= kGpuSaturatedShare ||
      (in.gpu_busy_share >= kGpuBusyShare && wait_share >= kGpuWaitShare)) {
    return Make("gpu-bound", Bound::kGpu,
                absl::StrFormat("%s; %s",
                                in.gpu_busy_share >= kGpuSaturatedShare
                                    ? "the GPU is saturated"
                                    : "the GPU is busy and the CPU mostly waits on it",
                                figures));
  }
  // Waiting for a CPU is wanting to work: a CPU-starved feeder starves the
  // GPU too, and its work is what to make faster. Waiting on the disk is not.
  double io = in.figures.offcpu_io_seconds / d;
  if (in.gpu_busy_share < kGpuBusyShare && work >= kGpuFeederCores && work > io) {
    return Make("gpu-starved", Bound::kGpuStarved,
                absl::StrFormat("the GPU idles while the CPU prepares its work; %s", figures));
  }
  return std::nullopt;
}

}  // namespace

Verdict Decide(const VerdictInputs& in) {
  if (std::optional<Verdict> gpu = DecideGpu(in)) return *gpu;
  // Time spinning in a CUDA wait is not the CPU's work: the other rules
  // see the CPU time without it.
  TaskFigures f = in.figures;
  double spin = std::min(in.gpu_wait_oncpu_seconds, f.cpu_user_seconds);
  f.cpu_user_seconds -= spin;
  double d = std::max(in.duration_seconds, 1e-3);
  double cpu = f.cpu_seconds() / d;  // cores
  double io = f.offcpu_io_seconds / d;
  double runqueue = f.runqueue_seconds / d;
  double sleep = f.offcpu_sleep_seconds / d;
  double faults = (f.minor_faults + f.major_faults) / d;
  double major = f.major_faults / d;
  double system_share = f.cpu_seconds() > 0 ? f.cpu_system_seconds / f.cpu_seconds() : 0;
  std::string shares = absl::StrFormat(
      "per second of wall time: %.2f s on CPU (%.0f%% system), %.2f s in IO wait, %.2f s "
      "runnable in the run queue, %.2f s asleep (%.2f s of it waiting for the GIL)",
      cpu, 100 * system_share, io, runqueue, sleep, f.gil_wait_seconds / d);
  if (spin > 0) {
    absl::StrAppend(&shares,
                    absl::StrFormat(" (%.2f s on CPU spinning in CUDA waits left out)", spin / d));
  }

  // 1. The GIL: threads that want to run Python wait for the one that does.
  // The samples' GIL share is a second figure, and the rule when the wait
  // is not measured.
  double gil_held =
      in.python_samples > 0 ? static_cast<double>(in.gil_samples) / in.python_samples : 0;
  std::string held = in.python_samples > 0
                         ? absl::StrFormat("%.0f%% of %d Python samples held the GIL",
                                           100 * gil_held, in.python_samples)
                         : std::string("no Python samples");
  double could_use = std::min(in.busy_threads, in.cpus);
  if (in.gil_wait_measured) {
    double wait = f.gil_wait_seconds;
    if (wait / d >= kActiveShare && wait >= kGilWaitCpuShare * f.cpu_seconds()) {
      return Make("gil-bound", Bound::kGil,
                  absl::StrFormat("threads waited %.2f s per second for the GIL (%.2f s on CPU); "
                                  "%s; %s",
                                  wait / d, cpu, held, shares));
    }
  } else if (in.busy_threads >= 2 && in.python_samples > 0 && gil_held >= kGilHeldShare &&
             cpu >= kGilMinCores && cpu < kGilCpuShare * could_use) {
    return Make("gil-bound", Bound::kGil,
                absl::StrFormat("%d busy Python threads got %.2f of the %.0f CPUs they could use; "
                                "%s (GIL wait not measured); %s",
                                in.busy_threads, cpu, could_use, held, shares));
  }
  // 2. Major faults wait on the disk for memory.
  if (major >= kMemoryMajorFaultsPerSecond) {
    return Make("memory-bound", Bound::kMemory,
                absl::StrFormat("%.0f major faults per second; %s", major, shares));
  }
  // 3. Mostly neither running, nor waiting for a CPU or the disk.
  if (std::max({cpu, io, runqueue}) < kActiveShare) {
    return Make("lock-or-sleep-bound", Bound::kSleep,
                absl::StrFormat("on CPU, in IO wait and in the run queue each under %.2f s per "
                                "second; %s",
                                kActiveShare, shares));
  }
  // 4. The largest of CPU, IO wait and run-queue wait bounds the process.
  // Run-queue wait that follows wakeups is charged to what the thread woke
  // from; starvation is waiting after preemption.
  double preempted = f.preempted_seconds / d;
  if (runqueue >= cpu && runqueue >= io && preempted >= 0.5 * runqueue) {
    return Make("cpu-starved", Bound::kRunqueue,
                absl::StrFormat("runnable but waiting for a CPU more than running; %s", shares));
  }
  if (io >= cpu) {
    return Make("io-bound", Bound::kIo, absl::StrFormat("IO wait exceeds CPU time; %s", shares));
  }
  if (faults >= kMemoryFaultsPerSecond && system_share >= kMemorySystemShare) {
    return Make("memory-bound", Bound::kMemory,
                absl::StrFormat("%.0f page faults per second with %.0f%% of CPU time in the "
                                "kernel; %s",
                                faults, 100 * system_share, shares));
  }
  return Make("cpu-bound", Bound::kCpu,
              absl::StrFormat("CPU time exceeds IO and run-queue wait; %s", shares));
}

}  // namespace pystrobe
