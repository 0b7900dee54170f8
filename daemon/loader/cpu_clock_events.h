// One software cpu-clock perf event per online CPU: the clock that drives
// the sampler. Hardware counters are not assumed (many VMs have none).
#ifndef PYSTROBE_DAEMON_LOADER_CPU_CLOCK_EVENTS_H_
#define PYSTROBE_DAEMON_LOADER_CPU_CLOCK_EVENTS_H_

#include <cstdint>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace pystrobe {

// Parses a CPU list as in /sys/devices/system/cpu/online ("0-3,6,8-9").
absl::StatusOr<std::vector<int>> ParseCpuList(absl::string_view text);

// The CPUs that are online now.
absl::StatusOr<std::vector<int>> OnlineCpus();

// The mean interval between ticks at `rate_hz`, in nanoseconds.
inline uint64_t MeanPeriodNs(int rate_hz) {
  return 1'000'000'000ull / static_cast<uint64_t>(rate_hz);
}

// Owns the perf event file descriptors; closes them on destruction.
class CpuClockEvents {
 public:
  // Opens a system-wide (every task) cpu-clock event on each CPU in `cpus`,
  // ticking every 1/`rate_hz` seconds until SetPeriod changes it.
  static absl::StatusOr<CpuClockEvents> Open(const std::vector<int>& cpus, int rate_hz);

  CpuClockEvents(CpuClockEvents&& other) noexcept;
  CpuClockEvents& operator=(CpuClockEvents&& other) noexcept;
  CpuClockEvents(const CpuClockEvents&) = delete;
  CpuClockEvents& operator=(const CpuClockEvents&) = delete;
  ~CpuClockEvents();

  struct Event {
    int cpu;
    int fd;
  };
  const std::vector<Event>& events() const { return events_; }

  // Makes `event`'s CPU tick every `period_ns` from now on.
  absl::Status SetPeriod(const Event& event, uint64_t period_ns) const;

 private:
  CpuClockEvents() = default;
  void Close();

  std::vector<Event> events_;
};

}  // namespace pystrobe

#endif  // PYSTROBE_DAEMON_LOADER_CPU_CLOCK_EVENTS_H_
