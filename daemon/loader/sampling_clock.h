// Sampling instants that no program can follow.
//
// A cpu-clock perf event ticks at an exact period. A program whose own cycle
// is near a multiple of that period (a frame loop, a 100 Hz control loop,
// batches of a fixed size) is then sampled at the same phase of its cycle,
// tick after tick, run after run: a function taking 80% of such a program
// read 0% in one recording and 99% in the next. A prime rate only moves the
// trap to other cycles.
//
// So each CPU's rate is redrawn at random moments. A redraw restarts the
// CPU's timer (PERF_EVENT_IOC_PERIOD), so the ticks after it begin at a
// moment that has nothing to do with the program, and tick at a period that
// differs from the last block's: the phase of the samples against any
// periodic program is uniform, and shares are unbiased. Each sample carries
// the interval that preceded it on its CPU (measured in the kernel), so time
// totals stay exact although intervals differ.
//
// Why blocks of ticks rather than a draw per tick: userspace changes a
// period only by ioctl, and an ioctl on another CPU's event is an
// inter-processor interrupt. A draw per tick would cost a wakeup and an IPI
// per sample; a draw per 16 to 48 ticks costs a few per second in all.
#ifndef PYSTROBE_DAEMON_LOADER_SAMPLING_CLOCK_H_
#define PYSTROBE_DAEMON_LOADER_SAMPLING_CLOCK_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <random>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace pystrobe {

// The random draws of the sampling clock, for a mean rate of `rate_hz`.
//
// A block's rate is uniform over [0.5, 1.5] x rate_hz: wide enough that
// within one block the phases of successive ticks spread over any cycle up
// to two mean periods, bounded so that no block samples more than 1.5 times
// as often as asked (cost stays predictable), unlike an exponential draw.
// A block holds for 16 to 48 mean periods. A redraw drops the tick that was
// under way (on average half a period), so rates are drawn 1/64 higher:
// over time each CPU samples `rate_hz` times a second on average.
class SamplingPeriodDraw {
 public:
  static constexpr double kRateSpread = 0.5;  // the rate is uniform in 1 +- this
  static constexpr double kMinHoldPeriods = 16;
  static constexpr double kMaxHoldPeriods = 48;

  SamplingPeriodDraw(int rate_hz, uint64_t seed);

  // A block's period for one CPU, in nanoseconds.
  uint64_t NextPeriodNs();
  // How long the next block holds before every CPU's period is redrawn.
  absl::Duration NextHold();

  uint64_t mean_period_ns() const { return mean_period_ns_; }

 private:
  uint64_t mean_period_ns_;
  std::mt19937_64 random_;
  std::uniform_real_distribution<double> rate_factor_;
  std::uniform_real_distribution<double> hold_periods_;
};

// Redraws each CPU's cpu-clock period at random moments, in a thread of its
// own, from construction until destruction.
class SamplingClock {
 public:
  // Sets the period of the CPU at `index` (0 to cpus-1); an error leaves
  // that CPU at its old period until the next redraw.
  using PeriodSetter = std::function<absl::Status(size_t index, uint64_t period_ns)>;

  SamplingClock(size_t cpus, int rate_hz, PeriodSetter set_period, uint64_t seed);
  ~SamplingClock();
  SamplingClock(const SamplingClock&) = delete;
  SamplingClock& operator=(const SamplingClock&) = delete;

  // Periods set, and periods the kernel refused, so far.
  uint64_t redraws() const;
  uint64_t failed_redraws() const;

 private:
  void Run();

  const size_t cpus_;
  const PeriodSetter set_period_;
  SamplingPeriodDraw draw_;  // used by the thread only
  mutable absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t redraws_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t failed_redraws_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread thread_;
};

}  // namespace pystrobe

#endif  // PYSTROBE_DAEMON_LOADER_SAMPLING_CLOCK_H_
