// Which profile a recording builds from what it sampled, and how: CPU time
// (on-CPU samples, with off-CPU time as TimeWeighting says), resident growth
// (record --memory) or sampled allocations (record --allocations, those held
// or all of them). The one place `record` and the daemon's on-demand
// recordings take their profile from, so that the two cannot drift.
#ifndef PYSTROBE_DAEMON_RECORDING_RECORDING_PROFILE_H_
#define PYSTROBE_DAEMON_RECORDING_RECORDING_PROFILE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "daemon/recording/process_table.h"
#include "daemon/recording/profile_builder.h"
#include "daemon/recording/recorder.h"
#include "daemon/recording/stack_aggregator.h"
#include "daemon/recording/time_weighting.h"
#include "daemon/symbolizer/kernel_symbolizer.h"
#include "exporters/profile.h"

namespace pystrobe {

// What a recording's profile weighs.
enum class RecordingMeasure {
  kCpuTime,         // samples, or time on and off CPU
  kResidentGrowth,  // bytes of resident growth by stack (--memory)
  kAllocations,     // bytes of sampled allocations by stack (--allocations)
};

struct RecordingProfileSpec {
  RecordingMeasure measure = RecordingMeasure::kCpuTime;
  // Who recorded, and what, for the title: "pystrobe record" or "pystrobe
  // record (daemon)", and RecordingTarget().
  std::string recorded_by = "pystrobe record";
  std::string target = {};
  // How frames are named.
  ProfileBuilderOptions names = {};
  // kCpuTime: how on- and off-CPU stacks are weighed; its rate is the profile's.
  TimeWeighting time = {};
  // kAllocations: every sampled allocation, freed or not (alloc_space),
  // instead of those held; and the mean bytes between two samples.
  bool alloc_space = false;
  uint32_t alloc_sample_bytes = 0;
};

// What a recording targets, in words: the command line, "pid 1, 2", or
// "all processes".
std::string RecordingTarget(const std::vector<std::string>& command,
                            const std::vector<uint32_t>& pids);

// The stacks a recording sampled, by what they measure (null: none). Only
// those the spec's measure weighs are read.
struct RecordedStacks {
  const StackAggregator* on_cpu = nullptr;
  const StackAggregator* off_cpu = nullptr;
  const StackAggregator* resident_growth = nullptr;
  // The held allocations, or all of them with alloc_space.
  const StackAggregator* allocations = nullptr;
};

// Adds the stacks `spec` weighs to `profile`, named by `builder`, with the
// labels of their processes (while `processes` still knows them), and sets
// the profile's unit and rate. A second call adds more stacks (the daemon's
// recordings add each window's part).
void AddRecordedStacks(const RecordingProfileSpec& spec, const RecordedStacks& stacks,
                       ProfileBuilder& builder, const ProcessTable& processes, Profile& profile);

// The profile's title; `in_use` says when the held allocations were taken
// (kAllocations without alloc_space).
std::string RecordingTitle(const RecordingProfileSpec& spec,
                           const Recorder::InUseTotals& in_use = {});

// The whole profile of a recording whose stacks are all in `recorder`
// (`record` on its own): the stacks `spec` weighs, named with `kernel` (may
// be null), and its title.
Profile BuildRecordingProfile(const RecordingProfileSpec& spec, Recorder& recorder,
                              const KernelSymbolizer* kernel);

// When the in-use view of --allocations was taken, in words: "when Python
// finalization began", "at exit", "when the recording ended", or those that
// apply joined by "or".
std::string InUseMomentWords(const Recorder::InUseTotals& in_use);

}  // namespace pystrobe

#endif  // PYSTROBE_DAEMON_RECORDING_RECORDING_PROFILE_H_
