#include "daemon/accounting/stat_analysis.h"

#include <algorithm>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "daemon/gpu/gpu_wait.h"
#include "daemon/loader/cpu_clock_events.h"

namespace pystrobe {
namespace {

// The leaf frame that marks off-CPU stacks of the reason behind `bound`, or
// "" when on-CPU samples explain it.
const char* OffCpuLeafOf(Bound bound) {
  switch (bound) {
    case Bound::kIo:
      return "[io wait]";
    case Bound::kSleep:
      return "[sleep]";
    case Bound::kGil:
      return "[gil wait]";
    case Bound::kRunqueue:
      return "[runqueue]";
    case Bound::kCpu:
    case Bound::kMemory:
    case Bound::kGpu:
    case Bound::kGpuStarved:
      break;
  }
  return "";
}

bool OfProcess(const ProfileStack& stack, const std::string& process_suffix) {
  for (const Frame& frame : stack.frames) {
    if (frame.kind == FrameKind::kProcess && absl::EndsWith(frame.name, process_suffix)) {
      return true;
    }
  }
  return false;
}

// The stacks of process `pid` in `profile`, and their counts' sum.
struct ProcessStacks {
  std::vector<const ProfileStack*> stacks;
  uint64_t total = 0;
};

ProcessStacks StacksOf(const Profile& profile, uint32_t pid) {
  std::string process_suffix = absl::StrCat(" (", pid, ")");
  ProcessStacks mine;
  for (const ProfileStack& stack : profile.stacks()) {
    if (!OfProcess(stack, process_suffix)) continue;
    mine.stacks.push_back(&stack);
    mine.total += stack.count;
  }
  return mine;
}

// Native code that allocates on behalf of its caller: the C library and
// pystrobe's sampler. An allocation's site is below them.
bool InAllocator(const Frame& frame) {
  if (frame.module == nullptr) return false;
  absl::string_view path = frame.module->path;
  absl::string_view file = path.substr(path.rfind('/') + 1);
  return absl::StartsWith(file, "libc.so") || absl::StartsWith(file, "libpystrobe-alloc");
}

// Where the allocations of `stack` came from: its leaf-most Python frame,
// else its leaf-most native frame outside the allocator.
std::string AllocationSiteOf(const ProfileStack& stack) {
  const Frame* native = nullptr;
  for (auto frame = stack.frames.rbegin(); frame != stack.frames.rend(); ++frame) {
    if (frame->kind == FrameKind::kPython) return frame->name;
    if (frame->kind == FrameKind::kNative && native == nullptr && !InAllocator(*frame)) {
      native = &*frame;
    }
  }
  return native != nullptr ? native->name : "[unknown]";
}

bool EndsInGpuWait(const ProfileStack& stack) {
  return !stack.frames.empty() && stack.frames.back().name == kGpuWaitFrame;
}

}  // namespace

void MeasureGpuWait(const Profile& oncpu, const Profile& offcpu, StatReport& report) {
  std::string process_suffix = absl::StrCat(" (", report.pid, ")");
  uint64_t oncpu_ns = 0, offcpu_us = 0;
  for (const ProfileStack& stack : oncpu.stacks()) {
    if (EndsInGpuWait(stack) && OfProcess(stack, process_suffix)) oncpu_ns += stack.nanoseconds;
  }
  for (const ProfileStack& stack : offcpu.stacks()) {
    if (EndsInGpuWait(stack) && OfProcess(stack, process_suffix)) offcpu_us += stack.count;
  }
  report.gpu_wait_oncpu_seconds = oncpu_ns * 1e-9;
  report.gpu_wait_offcpu_seconds = offcpu_us * 1e-6;
}

void DecideStatVerdict(const ProcessSamples* samples, int rate_hz, StatReport& report) {
  VerdictInputs inputs;
  inputs.duration_seconds = report.duration_seconds;
  absl::StatusOr<std::vector<int>> cpus = OnlineCpus();
  inputs.cpus = cpus.ok() ? static_cast<int>(cpus->size()) : 1;
  inputs.figures = report.figures;
  inputs.sample_rate_hz = rate_hz;
  if (samples != nullptr) {
    report.samples = samples->samples;
    inputs.samples = samples->samples;
    inputs.python_samples = samples->python_samples;
    inputs.gil_samples = samples->gil_samples;
    // The kernel knew the process's CPython layout, so it could tell a
    // futex on the GIL from any other sleep.
    inputs.gil_wait_measured = samples->python_samples > 0;
    report.free_threaded = samples->free_threaded_samples > 0;
    if (samples->python_samples > 0 && !report.free_threaded) {
      report.gil_held_share = static_cast<double>(samples->gil_samples) / samples->python_samples;
    }
    double busy = kBusyThreadShare * report.duration_seconds * rate_hz;
    for (const auto& [tid, count] : samples->per_thread) {
      if (count >= busy) ++inputs.busy_threads;
    }
  }
  if (report.gpu) {
    inputs.uses_gpu = true;
    inputs.gpu_busy_share = report.gpu->busy_share();
  }
  inputs.gpu_wait_oncpu_seconds = report.gpu_wait_oncpu_seconds;
  inputs.gpu_wait_offcpu_seconds = report.gpu_wait_offcpu_seconds;
  report.gil_wait_measured = inputs.gil_wait_measured;
  report.verdict = Decide(inputs);
}

void PickStatStacks(const Profile& oncpu, const Profile& offcpu, const std::string& offcpu_missing,
                    StatReport& report) {
  std::string process_suffix = absl::StrCat(" (", report.pid, ")");
  std::string leaf = OffCpuLeafOf(report.verdict.bound);
  Bound bound = report.verdict.bound;
  // gpu-bound: CUDA waits spin on CPU; asleep in them only where none did.
  bool gpu_waits_oncpu = false;
  if (bound == Bound::kGpu) {
    for (const ProfileStack& stack : oncpu.stacks()) {
      gpu_waits_oncpu |= EndsInGpuWait(stack) && OfProcess(stack, process_suffix);
    }
    if (!gpu_waits_oncpu) leaf = std::string(kGpuWaitFrame);
  }
  const Profile& profile = leaf.empty() ? oncpu : offcpu;
  // On CPU a stack weighs the time its samples stand for (their intervals
  // differ), or its samples where that is unknown; off CPU, its time.
  bool timed = leaf.empty() && profile.total_nanoseconds() > 0;
  auto weight = [timed](const ProfileStack& stack) {
    return timed ? stack.nanoseconds : stack.count;
  };
  std::vector<const ProfileStack*> chosen;
  uint64_t total = 0;
  for (const ProfileStack& stack : profile.stacks()) {
    bool mine = false;
    for (const Frame& frame : stack.frames) {
      if (frame.kind == FrameKind::kProcess && absl::EndsWith(frame.name, process_suffix)) {
        mine = true;
        break;
      }
    }
    if (!mine) continue;
    if (!leaf.empty() && (stack.frames.empty() || stack.frames.back().name != leaf)) continue;
    if (bound == Bound::kGpu && gpu_waits_oncpu && !EndsInGpuWait(stack)) continue;
    if (bound == Bound::kGpuStarved && EndsInGpuWait(stack)) continue;
    total += weight(stack);
    chosen.push_back(&stack);
  }
  std::sort(chosen.begin(), chosen.end(), [&weight](const ProfileStack* a, const ProfileStack* b) {
    return weight(*a) > weight(*b);
  });
  if (chosen.size() > kReportStacks) chosen.resize(kReportStacks);
  for (const ProfileStack* stack : chosen) {
    ReportStack out;
    for (const Frame& frame : stack->frames) {
      if (frame.kind != FrameKind::kProcess) out.frames.push_back(frame.name);
    }
    if (leaf.empty()) {
      out.samples = stack->count;
      out.seconds = stack->nanoseconds * 1e-9;
    } else {
      out.seconds = stack->count * 1e-6;
    }
    out.share = total ? static_cast<double>(weight(*stack)) / total : 0;
    report.stacks.push_back(std::move(out));
  }
  report.stacks_kind =
      leaf.empty() ? "on-CPU samples" : absl::StrCat("off-CPU time ending in ", leaf);
  if (bound == Bound::kGpu && gpu_waits_oncpu) {
    report.stacks_kind = absl::StrCat("on-CPU samples ending in ", kGpuWaitFrame);
  } else if (bound == Bound::kGpuStarved) {
    report.stacks_kind = absl::StrCat("on-CPU samples outside ", kGpuWaitFrame);
  }
  if (!offcpu_missing.empty() && !leaf.empty()) {
    report.stacks_note = offcpu_missing;
  } else if (chosen.empty() && !leaf.empty()) {
    report.stacks_note = absl::StrCat("no off-CPU stack of the process ended in ", leaf);
  }
}

void PickMemoryGrowthStacks(const Profile& growth, StatReport& report) {
  auto [mine, total] = StacksOf(growth, report.pid);
  std::sort(mine.begin(), mine.end(),
            [](const ProfileStack* a, const ProfileStack* b) { return a->count > b->count; });
  if (mine.size() > kMemoryGrowthStacks) mine.resize(kMemoryGrowthStacks);
  report.memory_growth_bytes = total;
  for (const ProfileStack* stack : mine) {
    MemoryGrowthStack out;
    for (const Frame& frame : stack->frames) {
      if (frame.kind != FrameKind::kProcess) out.frames.push_back(frame.name);
    }
    out.bytes = stack->count;
    out.share = total ? static_cast<double>(stack->count) / total : 0;
    report.memory_growth_stacks.push_back(std::move(out));
  }
  // A memory-bound verdict names what grew memory.
  if (report.verdict.bound == Bound::kMemory && !report.memory_growth_stacks.empty()) {
    const MemoryGrowthStack& top = report.memory_growth_stacks.front();
    absl::StrAppend(&report.verdict.evidence,
                    absl::StrFormat("; resident memory grew %.1f MiB up to its peak, %.0f%% of it "
                                    "in %s",
                                    total / 1048576.0, 100 * top.share,
                                    top.frames.empty() ? "[unknown]" : top.frames.back()));
  }
}

void PickAllocationSites(const Profile& allocated, const Profile& in_use, uint32_t pid,
                         AllocationFigures& figures) {
  absl::flat_hash_map<std::string, AllocationSite> sites;
  ProcessStacks all = StacksOf(allocated, pid);
  ProcessStacks held = StacksOf(in_use, pid);
  for (auto [stacks, bytes] : {std::pair{&all.stacks, &AllocationSite::allocated_bytes},
                               std::pair{&held.stacks, &AllocationSite::in_use_bytes}}) {
    for (const ProfileStack* stack : *stacks) {
      std::string frame = AllocationSiteOf(*stack);
      AllocationSite& site = sites[frame];
      site.frame = frame;
      site.*bytes += stack->count;
    }
  }
  figures.allocated_bytes = all.total;
  figures.in_use_bytes = held.total;
  std::vector<AllocationSite> ranked;
  for (auto& [frame, site] : sites) {
    site.allocated_share = all.total ? static_cast<double>(site.allocated_bytes) / all.total : 0;
    site.in_use_share = held.total ? static_cast<double>(site.in_use_bytes) / held.total : 0;
    ranked.push_back(std::move(site));
  }
  // The most held first, to mark those that must stay; then the most allocated.
  auto heavier = [](uint64_t AllocationSite::*bytes) {
    return [bytes](const AllocationSite& a, const AllocationSite& b) {
      return a.*bytes != b.*bytes ? a.*bytes > b.*bytes : a.frame < b.frame;
    };
  };
  std::sort(ranked.begin(), ranked.end(), heavier(&AllocationSite::in_use_bytes));
  absl::flat_hash_set<std::string> most_held;
  for (size_t i = 0; i < ranked.size() && i < kAllocationSites; ++i) {
    if (ranked[i].in_use_bytes > 0) most_held.insert(ranked[i].frame);
  }
  std::sort(ranked.begin(), ranked.end(), heavier(&AllocationSite::allocated_bytes));
  figures.sites.clear();
  for (size_t i = 0; i < ranked.size(); ++i) {
    if (i < kAllocationSites || most_held.contains(ranked[i].frame)) {
      figures.sites.push_back(std::move(ranked[i]));
    }
  }
}

}  // namespace pystrobe
