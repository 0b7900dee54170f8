// How on-CPU samples and off-CPU intervals are weighed into one profile: the
// one place `record`, `stat`, the daemon's windows and its on-demand
// recordings take it from.
#ifndef PYSTROBE_DAEMON_RECORDING_TIME_WEIGHTING_H_
#define PYSTROBE_DAEMON_RECORDING_TIME_WEIGHTING_H_

#include "daemon/recording/profile_builder.h"
#include "daemon/recording/stack_aggregator.h"
#include "model/profile.h"

namespace pystrobe {

struct TimeWeighting {
  // --off-cpu: on- and off-CPU time in microseconds, under "[on-cpu]" and
  // "[off-cpu]" roots. On-CPU time is each sample's interval, not a constant.
  bool offcpu = false;
  // --idle (py-spy's view): a profile of samples in which time off CPU
  // counts as the samples the mean rate would have taken in it.
  bool idle = false;
  int rate_hz = 0;
};

// Adds `on_cpu` and, where the weighting asks for it, `off_cpu` to `profile`
// (and sets its count unit).
void AddOnAndOffCpuStacks(const StackAggregator& on_cpu, const StackAggregator& off_cpu,
                          const TimeWeighting& weighting, ProfileBuilder& builder,
                          Profile& profile);

}  // namespace pystrobe

#endif  // PYSTROBE_DAEMON_RECORDING_TIME_WEIGHTING_H_
