// What `pystrobe stat` makes of a window, shared by the local command
// (stat_command.cc) and the daemon (daemon/service/on_demand_accounting.cc):
// the verdict from the counters and samples, and the stacks behind it.
#ifndef PYSTROBE_DAEMON_ACCOUNTING_STAT_ANALYSIS_H_
#define PYSTROBE_DAEMON_ACCOUNTING_STAT_ANALYSIS_H_

#include <cstdint>
#include <string>

#include "daemon/accounting/sample_tally.h"
#include "daemon/accounting/stat_report.h"
#include "model/profile.h"

namespace pystrobe {

inline constexpr size_t kReportStacks = 5;

// The process's time in CUDA waits, from its stacks ending in [gpu wait]:
// on-CPU samples (`oncpu`, their time) and off-CPU stacks (`offcpu`,
// microseconds). Fills report.gpu_wait_oncpu_seconds and _offcpu_seconds.
void MeasureGpuWait(const Profile& oncpu, const Profile& offcpu, StatReport& report);

// Decides report.verdict from report.figures and duration_seconds and the
// process's samples (`samples`, may be null) at `rate_hz`; fills in
// report.samples, gil_held_share and gil_wait_measured. The GPU rules read
// report.gpu and the GPU wait (MeasureGpuWait first).
void DecideStatVerdict(const ProcessSamples* samples, int rate_hz, StatReport& report);

// The stacks that explain report.verdict, heaviest first: off-CPU stacks
// (`offcpu`, microseconds, no root frame) ending in the bounding reason, or
// on-CPU samples (`oncpu`) for cpu- and memory-bound processes; for
// gpu-bound, the stacks ending in [gpu wait] (on CPU, else off), for
// gpu-starved the on-CPU stacks outside GPU waits. Empty
// `offcpu_missing`: off-CPU stacks were followed; else why not (the note
// of an io, sleep, GIL or run-queue verdict).
void PickStatStacks(const Profile& oncpu, const Profile& offcpu, const std::string& offcpu_missing,
                    StatReport& report);

// The stacks of report.pid in `growth` (resident growth up to the peak,
// counts in bytes), heaviest first, at most kMemoryGrowthStacks: fills
// report.memory_growth_stacks and memory_growth_bytes.
inline constexpr size_t kMemoryGrowthStacks = 10;
void PickMemoryGrowthStacks(const Profile& growth, StatReport& report);

// The allocation sites of process `pid` (AllocationSite: a Python line, or
// a native function) in `allocated` (every sampled allocation) and `in_use`
// (those held at the end), counts in bytes: fills figures.allocated_bytes,
// in_use_bytes and sites, the kAllocationSites that allocated most and any
// of the kAllocationSites holding most beside them, most allocated first.
inline constexpr size_t kAllocationSites = 10;
void PickAllocationSites(const Profile& allocated, const Profile& in_use, uint32_t pid,
                         AllocationFigures& figures);

}  // namespace pystrobe

#endif  // PYSTROBE_DAEMON_ACCOUNTING_STAT_ANALYSIS_H_
