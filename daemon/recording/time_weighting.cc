#include "daemon/recording/time_weighting.h"

namespace pystrobe {

void AddOnAndOffCpuStacks(const StackAggregator& on_cpu, const StackAggregator& off_cpu,
                          const TimeWeighting& weighting, ProfileBuilder& builder,
                          Profile& profile) {
  constexpr double kMicrosPerNano = 1e-3;
  constexpr double kNanosPerSecond = 1e9;
  if (weighting.offcpu) {
    profile.count_unit = "microseconds";
    builder.AddTo(on_cpu, {.per_nanosecond = kMicrosPerNano, .root = "[on-cpu]"}, profile);
    builder.AddTo(off_cpu, {.per_nanosecond = kMicrosPerNano, .root = "[off-cpu]"}, profile);
    return;
  }
  builder.AddTo(on_cpu, profile);
  if (weighting.idle && weighting.rate_hz > 0) {
    builder.AddTo(off_cpu, {.per_nanosecond = weighting.rate_hz / kNanosPerSecond}, profile);
  }
}

}  // namespace pystrobe
