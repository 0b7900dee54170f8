#include "daemon/recording/recording_profile.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "daemon/loader/bpf_sampler.h"
#include "daemon/recording/process_labels.h"

namespace pystrobe {
namespace {

const StackAggregator& OrNone(const StackAggregator* stacks) {
  static const StackAggregator* const kNone = new StackAggregator();
  return stacks != nullptr ? *stacks : *kNone;
}

}  // namespace

std::string RecordingTarget(const std::vector<std::string>& command,
                            const std::vector<uint32_t>& pids) {
  if (!command.empty()) return absl::StrJoin(command, " ");
  if (!pids.empty()) return absl::StrCat("pid ", absl::StrJoin(pids, ", "));
  return "all processes";
}

void AddRecordedStacks(const RecordingProfileSpec& spec, const RecordedStacks& stacks,
                       ProfileBuilder& builder, const ProcessTable& processes, Profile& profile) {
  switch (spec.measure) {
    case RecordingMeasure::kAllocations: {
      // Sampled allocations: held when each process's view was taken (inuse;
      // a Python one's when its finalization began), or all of them (alloc).
      profile.count_unit = spec.alloc_space ? "alloc_bytes" : "inuse_bytes";
      profile.sample_rate_hz = 0;
      profile.sampling_interval_bytes = spec.alloc_sample_bytes;
      const StackAggregator& allocations = OrNone(stacks.allocations);
      builder.AddBytesTo(allocations, profile);
      AddProcessLabels(processes, {&allocations}, profile);
      return;
    }
    case RecordingMeasure::kResidentGrowth: {
      // Each stack weighs the bytes its samples stand for.
      profile.count_unit = "bytes";
      profile.sample_rate_hz = 0;
      profile.sampling_interval_bytes = SamplerConfig{}.memory_sample_bytes;
      const StackAggregator& growth = OrNone(stacks.resident_growth);
      builder.AddBytesTo(growth, profile);
      AddProcessLabels(processes, {&growth}, profile);
      return;
    }
    case RecordingMeasure::kCpuTime: {
      profile.sample_rate_hz = spec.time.rate_hz;
      const StackAggregator& on_cpu = OrNone(stacks.on_cpu);
      const StackAggregator& off_cpu = OrNone(stacks.off_cpu);
      AddOnAndOffCpuStacks(on_cpu, off_cpu, spec.time, builder, profile);
      AddProcessLabels(processes, {&on_cpu, &off_cpu}, profile);
      return;
    }
  }
}

std::string RecordingTitle(const RecordingProfileSpec& spec, const Recorder::InUseTotals& in_use) {
  switch (spec.measure) {
    case RecordingMeasure::kAllocations:
      return absl::StrCat(spec.recorded_by, " --allocations: ", spec.target,
                          spec.alloc_space
                              ? std::string(" (allocated, bytes)")
                              : absl::StrCat(" (held ", InUseMomentWords(in_use), ", bytes)"));
    case RecordingMeasure::kResidentGrowth:
      return absl::StrCat(spec.recorded_by, " --memory: ", spec.target,
                          " (resident growth, bytes)");
    case RecordingMeasure::kCpuTime:
      break;
  }
  return absl::StrCat(spec.recorded_by, ": ", spec.target);
}

Profile BuildRecordingProfile(const RecordingProfileSpec& spec, Recorder& recorder,
                              const KernelSymbolizer* kernel) {
  Profile profile;
  ProfileBuilder builder(recorder, kernel, spec.names);
  RecordedStacks stacks;
  Recorder::InUseTotals in_use;
  StackAggregator held;  // made only when it is the profile
  switch (spec.measure) {
    case RecordingMeasure::kAllocations:
      if (spec.alloc_space) {
        stacks.allocations = &recorder.allocation_stacks();
      } else {
        held = recorder.InUseStacks();
        in_use = recorder.InUseByMoment();
        stacks.allocations = &held;
      }
      break;
    case RecordingMeasure::kResidentGrowth:
      stacks.resident_growth = &recorder.memory_stacks();
      break;
    case RecordingMeasure::kCpuTime:
      stacks.on_cpu = &recorder.stacks();
      stacks.off_cpu = &recorder.offcpu_stacks();
      break;
  }
  profile.title = RecordingTitle(spec, in_use);
  AddRecordedStacks(spec, stacks, builder, recorder.processes(), profile);
  return profile;
}

std::string InUseMomentWords(const Recorder::InUseTotals& in_use) {
  std::vector<std::string> moments;
  if (in_use.finalized_processes > 0) moments.push_back("when Python finalization began");
  if (in_use.exited_processes > 0) moments.push_back("at exit");
  if (in_use.running_processes > 0) moments.push_back("when the recording ended");
  if (moments.empty()) return "when the recording ended";
  return absl::StrJoin(moments, " or ");
}

}  // namespace pystrobe
