// The sampling clock's draws and its thread, with a fake in place of the
// perf events (the kernel's side is tested end to end in
// tests/e2e/test_record_periodic.py).
#include "daemon/loader/sampling_clock.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace pystrobe {
namespace {

// What a CPU's ticks look like under the draw: each block restarts the timer
// (the tick under way is lost), then ticks every period until the next.
struct SimulatedTicks {
  double seconds = 0;
  uint64_t ticks = 0;
  std::vector<double> periods;  // the period of each tick, in seconds
};

SimulatedTicks Simulate(int rate_hz, uint64_t seed, int blocks) {
  SamplingPeriodDraw draw(rate_hz, seed);
  SimulatedTicks result;
  for (int block = 0; block < blocks; ++block) {
    double period = static_cast<double>(draw.NextPeriodNs()) * 1e-9;
    double hold = absl::ToDoubleSeconds(draw.NextHold());
    auto ticks = static_cast<uint64_t>(std::floor(hold / period));
    result.ticks += ticks;
    result.seconds += hold;
    result.periods.insert(result.periods.end(), ticks, period);
  }
  return result;
}

TEST(SamplingPeriodDraw, EachCpuTicksAtTheMeanRateWithinOnePercent) {
  for (int rate : {1, 19, 99, 199, 997}) {
    for (uint64_t seed : {1u, 2u, 3u}) {
      SimulatedTicks ticks = Simulate(rate, seed, 20000);
      double mean_interval = ticks.seconds / static_cast<double>(ticks.ticks);
      EXPECT_NEAR(mean_interval * rate, 1.0, 0.01) << rate << " Hz, seed " << seed;
    }
  }
}

TEST(SamplingPeriodDraw, PeriodsSpreadOverTheDesignedRangeAndNoFurther) {
  SamplingPeriodDraw draw(99, 7);
  double mean = static_cast<double>(draw.mean_period_ns());
  std::vector<double> factors;
  for (int i = 0; i < 100000; ++i) factors.push_back(mean / draw.NextPeriodNs());
  auto [low, high] = std::minmax_element(factors.begin(), factors.end());
  // Rates uniform over [0.5, 1.5] of the mean (plus 1/64 for the lost tick).
  EXPECT_GE(*low, 0.5);
  EXPECT_LT(*low, 0.52);
  EXPECT_LE(*high, 1.5 + 1.0 / 64 + 1e-9);
  EXPECT_GT(*high, 1.5);
  // Uniform: each tenth of the range holds a tenth of the draws.
  std::vector<int> deciles(10);
  for (double f : factors) ++deciles[std::min(9, static_cast<int>((f - 0.5 - 1.0 / 64) * 10))];
  for (int count : deciles) EXPECT_NEAR(count, 10000, 500);
}

TEST(SamplingPeriodDraw, BlocksHoldSixteenToFortyEightMeanPeriods) {
  SamplingPeriodDraw draw(100, 11);
  for (int i = 0; i < 10000; ++i) {
    double periods = absl::ToDoubleSeconds(draw.NextHold()) * 100;
    ASSERT_GE(periods, 16 - 1e-6);
    ASSERT_LE(periods, 48 + 1e-6);
  }
}

TEST(SamplingPeriodDraw, SeedsGiveDifferentDraws) {
  SamplingPeriodDraw a(99, 1);
  SamplingPeriodDraw b(99, 2);
  int same = 0;
  for (int i = 0; i < 100; ++i) same += a.NextPeriodNs() == b.NextPeriodNs();
  EXPECT_LT(same, 5);
}

TEST(SamplingClock, RedrawsEveryCpuAtOnceThenAgainAfterEachHold) {
  absl::Mutex mu;
  std::vector<std::vector<uint64_t>> periods(3);
  {
    SamplingClock clock(
        3, 1000,
        [&](size_t cpu, uint64_t period_ns) {
          absl::MutexLock lock(&mu);
          periods.at(cpu).push_back(period_ns);
          return absl::OkStatus();
        },
        42);
    // Holds are 16-48 ms at 1000 Hz: 8 redraws a CPU come in 400 ms on a quiet
    // machine; waited for (up to a liveness limit), not assumed.
    absl::Time deadline = absl::Now() + absl::Seconds(30);
    while (clock.redraws() < 3u * 8 && absl::Now() < deadline) {
      absl::SleepFor(absl::Milliseconds(10));
    }
    EXPECT_GE(clock.redraws(), 3u * 8);
    EXPECT_EQ(clock.failed_redraws(), 0u);
  }
  absl::MutexLock lock(&mu);
  for (const std::vector<uint64_t>& cpu : periods) {
    ASSERT_GE(cpu.size(), 8u);
    for (uint64_t period : cpu) {
      EXPECT_GE(period, 1'000'000 / 1.52);
      EXPECT_LE(period, 1'000'000 / 0.5);
    }
  }
  // Each CPU draws its own period.
  EXPECT_NE(periods[0], periods[1]);
}

TEST(SamplingClock, CountsRefusedPeriodsAndStopsAtOnce) {
  absl::Time before = absl::Now();
  {
    // At 1 Hz a block holds 16-48 s: destruction must not wait for it.
    SamplingClock clock(
        2, 1, [](size_t, uint64_t) { return absl::InternalError("refused"); }, 5);
    absl::Time deadline = absl::Now() + absl::Seconds(30);
    while (clock.failed_redraws() < 2u && absl::Now() < deadline) {
      absl::SleepFor(absl::Milliseconds(5));
    }
    EXPECT_EQ(clock.redraws(), 0u);
    EXPECT_EQ(clock.failed_redraws(), 2u);
  }
  // Waiting out the hold would take 16 s at least: 10 s tells the two apart
  // on however busy a machine.
  EXPECT_LT(absl::Now() - before, absl::Seconds(10));
}

}  // namespace
}  // namespace pystrobe
