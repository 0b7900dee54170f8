// One software cpu-clock perf event per online CPU: the clock that drives
// the sampler. Hardware counters are not assumed (many VMs have none).
#ifndef PYSTROBE_DAEMON_LOADER_CPU_CLOCK_EVENTS_H_
#define PYSTROBE_DAEMON_LOADER_CPU_CLOCK_EVENTS_H_

#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace pystrobe {

// Parses a CPU list as in /sys/devices/system/cpu/online ("0-3,6,8-9").
absl::StatusOr<std::vector<int>> ParseCpuList(absl::string_view text);

// The CPUs that are online now.
absl::StatusOr<std::vector<int>> OnlineCpus();

// Owns the perf event file descriptors; closes them on destruction.
class CpuClockEvents {
 public:
  // Opens a system-wide (every task) cpu-clock event on each CPU in `cpus`,
  // sampling `rate_hz` times a second.
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

 private:
  CpuClockEvents() = default;
  void Close();

  std::vector<Event> events_;
};

}  // namespace pystrobe

#endif  // PYSTROBE_DAEMON_LOADER_CPU_CLOCK_EVENTS_H_
