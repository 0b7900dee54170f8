#include "daemon/accounting/stat_analysis.h"

#include <algorithm>
#include <vector>

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
  std::string process_suffix = absl::StrCat(" (", report.pid, ")");
  std::vector<const ProfileStack*> mine;
  uint64_t total = 0;
  for (const ProfileStack& stack : growth.stacks()) {
    if (!OfProcess(stack, process_suffix)) continue;
    mine.push_back(&stack);
    total += stack.count;
  }
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

}  // namespace pystrobe
