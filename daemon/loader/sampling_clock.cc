#include "daemon/loader/sampling_clock.h"

#include <utility>

#include "daemon/loader/cpu_clock_events.h"

namespace pystrobe {
namespace {

// A redraw drops the tick under way, half a period on average, once per
// block of (kMinHoldPeriods + kMaxHoldPeriods) / 2 periods.
constexpr double kLostTickShare =
    0.5 / ((SamplingPeriodDraw::kMinHoldPeriods + SamplingPeriodDraw::kMaxHoldPeriods) / 2);

}  // namespace

SamplingPeriodDraw::SamplingPeriodDraw(int rate_hz, uint64_t seed)
    : mean_period_ns_(MeanPeriodNs(rate_hz)),
      random_(seed),
      rate_factor_(1 - kRateSpread + kLostTickShare, 1 + kRateSpread + kLostTickShare),
      hold_periods_(kMinHoldPeriods, kMaxHoldPeriods) {}

uint64_t SamplingPeriodDraw::NextPeriodNs() {
  return static_cast<uint64_t>(static_cast<double>(mean_period_ns_) / rate_factor_(random_));
}

absl::Duration SamplingPeriodDraw::NextHold() {
  return absl::Nanoseconds(static_cast<double>(mean_period_ns_) * hold_periods_(random_));
}

SamplingClock::SamplingClock(size_t cpus, int rate_hz, PeriodSetter set_period, uint64_t seed)
    : cpus_(cpus), set_period_(std::move(set_period)), draw_(rate_hz, seed) {
  thread_ = std::thread([this] { Run(); });
}

SamplingClock::~SamplingClock() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  thread_.join();
}

uint64_t SamplingClock::redraws() const {
  absl::MutexLock lock(&mu_);
  return redraws_;
}

uint64_t SamplingClock::failed_redraws() const {
  absl::MutexLock lock(&mu_);
  return failed_redraws_;
}

void SamplingClock::Run() {
  // The first draw is at once: the events were opened at the mean period.
  for (;;) {
    uint64_t set = 0;
    uint64_t failed = 0;
    for (size_t cpu = 0; cpu < cpus_; ++cpu) {
      (set_period_(cpu, draw_.NextPeriodNs()).ok() ? set : failed) += 1;
    }
    absl::Duration hold = draw_.NextHold();
    absl::MutexLock lock(&mu_);
    redraws_ += set;
    failed_redraws_ += failed;
    if (mu_.AwaitWithTimeout(absl::Condition(&stop_), hold)) return;
  }
}

}  // namespace pystrobe
