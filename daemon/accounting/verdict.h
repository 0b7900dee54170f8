// Why is this process slow? One verdict from its counters and samples, with
// the figures that justify it. The rules are in README.md, "pystrobe stat:
// verdicts"; the thresholds below are the ones it quotes.
#ifndef PYSTROBE_DAEMON_ACCOUNTING_VERDICT_H_
#define PYSTROBE_DAEMON_ACCOUNTING_VERDICT_H_

#include <cstdint>
#include <string>

#include "daemon/accounting/process_counters.h"

namespace pystrobe {

// Faults per second above which CPU time spent in the kernel is charged to
// memory (with kMemorySystemShare of the CPU time in the kernel).
inline constexpr double kMemoryFaultsPerSecond = 10000;
inline constexpr double kMemorySystemShare = 0.4;
// Major faults per second that make a process memory-bound on their own.
inline constexpr double kMemoryMajorFaultsPerSecond = 50;
// Below this many thread-seconds per second of CPU, IO wait and run-queue
// wait, the process mostly sleeps or waits on locks.
inline constexpr double kActiveShare = 0.25;
// A thread is busy when its samples cover this share of the window.
inline constexpr double kBusyThreadShare = 0.05;
// GIL, measured: threads waited for it at least kActiveShare of the window
// and at least this share of the process's CPU time.
inline constexpr double kGilWaitCpuShare = 0.5;
// GIL, from samples only (when the wait is not measured): held in this
// share of the process's Python samples, ...
inline constexpr double kGilHeldShare = 0.6;
// ... while the busy threads get less than this share of the CPUs they
// could use without a GIL, and the process uses at least kGilMinCores.
inline constexpr double kGilCpuShare = 0.75;
inline constexpr double kGilMinCores = 0.5;

// GPU (the process is one NVML lists): gpu-bound when its GPUs were busy
// with its kernels at least kGpuBusyShare of the window and its threads spent
// at least kGpuWaitShare of their time (on CPU, plus asleep in CUDA) waiting
// on the GPU, or when the GPUs were busy at least kGpuSaturatedShare whatever
// the CPU did; gpu-starved when the GPUs were idle more than
// 1 - kGpuBusyShare of the window while the process worked on CPU, outside
// GPU waits, at least kGpuFeederCores and more than it waited for IO (else
// the disk starves both).
inline constexpr double kGpuBusyShare = 0.5;
inline constexpr double kGpuWaitShare = 0.5;
inline constexpr double kGpuSaturatedShare = 0.9;
inline constexpr double kGpuFeederCores = 0.25;

struct VerdictInputs {
  double duration_seconds = 0;
  int cpus = 1;  // online CPUs
  TaskFigures figures;
  // From the sampler.
  int sample_rate_hz = 0;
  uint64_t samples = 0;
  uint64_t python_samples = 0;
  uint64_t gil_samples = 0;
  int busy_threads = 0;
  // figures.gil_wait_seconds is measured: the kernel knew the process's
  // CPython layout (it has Python samples).
  bool gil_wait_measured = false;
  // NVML listed the process on a GPU; the share of the window its devices
  // ran its kernels (GpuProcessFigures::busy_share()).
  bool uses_gpu = false;
  double gpu_busy_share = 0;
  // From the stacks: on-CPU time in [gpu wait] (part of figures' CPU time),
  // and time asleep in it (part of its off-CPU time).
  double gpu_wait_oncpu_seconds = 0;
  double gpu_wait_offcpu_seconds = 0;
};

// The resource that bounds the process: which stacks explain it.
// kGpu: stacks ending in [gpu wait]; kGpuStarved: the on-CPU stacks that
// are not.
enum class Bound { kCpu, kIo, kMemory, kGil, kSleep, kRunqueue, kGpu, kGpuStarved };

struct Verdict {
  std::string name;      // cpu-bound, io-bound, memory-bound, gil-bound, gpu-bound, ...
  std::string evidence;  // the figures behind it, one sentence
  Bound bound = Bound::kCpu;
};

Verdict Decide(const VerdictInputs& in);

}  // namespace pystrobe

#endif  // PYSTROBE_DAEMON_ACCOUNTING_VERDICT_H_
