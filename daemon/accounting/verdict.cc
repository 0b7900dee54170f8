#include "daemon/accounting/verdict.h"

#include <algorithm>

#include "absl/strings/str_format.h"

namespace pystrobe {
namespace {

Verdict Make(std::string name, Bound bound, std::string evidence) {
  return Verdict{.name = std::move(name), .evidence = std::move(evidence), .bound = bound};
}

}  // namespace

Verdict Decide(const VerdictInputs& in) {
  const TaskFigures& f = in.figures;
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
