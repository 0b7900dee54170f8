// What `pystrobe stat` prints at the end: counters, verdict and the stacks
// behind it, as text for people or as one JSON object for scripts.
#ifndef PYSTROBE_DAEMON_ACCOUNTING_STAT_REPORT_H_
#define PYSTROBE_DAEMON_ACCOUNTING_STAT_REPORT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "daemon/accounting/memory_timeline.h"
#include "daemon/accounting/process_counters.h"
#include "daemon/accounting/verdict.h"
#include "daemon/gpu/gpu_figures.h"

namespace pystrobe {

struct ReportStack {
  std::vector<std::string> frames;  // root first
  uint64_t samples = 0;             // on-CPU stacks: samples
  double seconds = 0;               // on CPU: the time the samples stand for; off: time off CPU
  double share = 0;  // of the process's on-CPU time, or of its off-CPU time for this reason
};

// A stack that made memory resident, and how much (sampled first touches).
struct MemoryGrowthStack {
  std::vector<std::string> frames;  // root first, without the process frame
  uint64_t bytes = 0;
  double share = 0;  // of the growth sampled up to the peak
};

// Where sampled allocations came from: the leaf-most Python frame of their
// stacks ("function (file:line)"), or the leaf-most native function where
// no Python frame is.
struct AllocationSite {
  std::string frame;
  uint64_t allocated_bytes = 0;
  double allocated_share = 0;  // of the bytes allocated
  uint64_t in_use_bytes = 0;
  double in_use_share = 0;  // of the bytes in use at the end
};

// stat --allocations: estimates from the sampled allocations (each weighs
// the bytes it stands for), and what the sampling lost.
struct AllocationFigures {
  bool in_process = false;  // the preloaded sampler; else uprobes on the allocator
  uint32_t sample_bytes = 0;
  uint64_t samples = 0;       // sampled allocations the kernel sent
  uint64_t frees = 0;         // frees of sampled blocks
  uint64_t untracked = 0;     // sampled blocks whose free went unseen (counted as held)
  uint64_t records_lost = 0;  // records of any kind the ring buffer had no room for
  uint64_t allocated_bytes = 0;
  uint64_t in_use_bytes = 0;
  // When the in-use view was taken ("when Python finalization began", "at
  // exit", "when the recording ended").
  std::string in_use_moment;
  // At most kAllocationSites, most allocated first; a site among the most
  // held is there too.
  std::vector<AllocationSite> sites;
};

struct StatReport {
  uint32_t pid = 0;
  std::string comm;
  double duration_seconds = 0;
  TaskFigures figures;
  bool gc_measured = false;        // the interpreter's GC probes were attached
  bool gil_wait_measured = false;  // a CPython process whose layout the kernel knew
  // Share of the process's Python samples whose thread held the GIL (-1: none).
  double gil_held_share = -1;
  bool free_threaded = false;  // a free-threaded CPython: there is no GIL to wait for
  bool syscalls = false;       // --syscalls: the sys_* figures were counted
  uint32_t threads = 0;
  bool exited = false;
  uint64_t samples = 0;
  // GPUs, when NVML is there (gpu_measured): every device over the window,
  // and the process's own figures when NVML listed it (matched by host pid).
  bool gpu_measured = false;
  std::vector<GpuDeviceFigures> gpu_devices;
  std::optional<GpuProcessFigures> gpu;
  // From the stacks, NVML or not: on-CPU time in CUDA waits (part of the CPU
  // time above) and time asleep in them (part of the off-CPU time).
  double gpu_wait_oncpu_seconds = 0;
  double gpu_wait_offcpu_seconds = 0;
  Verdict verdict;
  // What the stacks show ("off-CPU time in [io wait]"), and why there are none if so.
  std::string stacks_kind;
  std::string stacks_note;
  std::vector<ReportStack> stacks;
  AccountingDrops drops;
  // Resident memory (memory.known(): the kernel read it): at the end, the
  // peak and when it was first seen (seconds since the window began,
  // negative: before it), and the timeline.
  ResidentMemory memory;
  double peak_seconds = 0;
  std::vector<MemoryPoint> memory_timeline;
  // The kernel's OOM killer chose the process.
  bool oom_killed = false;
  // The stacks that made memory resident up to the peak, heaviest first
  // (memory_growth_sampled: growth was sampled at all).
  bool memory_growth_sampled = false;
  // The growth stacks are those up to the peak (a local stat), or of the
  // whole window (the daemon's, which does not keep them per peak).
  bool memory_growth_to_peak = true;
  uint64_t memory_growth_bytes = 0;
  std::vector<MemoryGrowthStack> memory_growth_stacks;
  // --allocations: sampled allocations (absent: not asked for).
  std::optional<AllocationFigures> allocations;
};

// One JSON object, one line.
std::string StatReportJson(const StatReport& report);
// Aligned text for a terminal.
std::string StatReportText(const StatReport& report);

}  // namespace pystrobe

#endif  // PYSTROBE_DAEMON_ACCOUNTING_STAT_REPORT_H_
