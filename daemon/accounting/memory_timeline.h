// A process's resident memory over a window, as the accounting programs read
// it from the kernel's RSS counters (ResidentMemory): points taken every
// `interval`, thinned to at most `max_points` (every other one is dropped and
// the interval doubles) so a long run keeps its whole shape in bounded memory.
#ifndef PYSTROBE_DAEMON_ACCOUNTING_MEMORY_TIMELINE_H_
#define PYSTROBE_DAEMON_ACCOUNTING_MEMORY_TIMELINE_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "daemon/accounting/process_counters.h"

namespace pystrobe {

struct MemoryPoint {
  double seconds = 0;  // since the window began
  uint64_t resident_bytes = 0;
  uint64_t anon_bytes = 0;
  uint64_t swap_bytes = 0;
};

class MemoryTimeline {
 public:
  // `start_ns`: CLOCK_MONOTONIC ns when the window began (the kernel's clock).
  MemoryTimeline(uint64_t start_ns, uint64_t interval_ns = 100'000'000, size_t max_points = 600)
      : start_ns_(start_ns), interval_ns_(interval_ns), max_points_(max_points) {}

  // Notes `memory` as read at `now_ns`, if a point is due (or `force`).
  // Memory the kernel never read is no point.
  void Observe(const ResidentMemory& memory, uint64_t now_ns, bool force = false);

  const std::vector<MemoryPoint>& points() const { return points_; }
  // Seconds since the window began of a kernel time (CLOCK_MONOTONIC ns);
  // negative when it is before the window.
  double SecondsOf(uint64_t ns) const {
    return (static_cast<double>(ns) - static_cast<double>(start_ns_)) * 1e-9;
  }

 private:
  uint64_t start_ns_;
  uint64_t interval_ns_;
  size_t max_points_;
  uint64_t next_ns_ = 0;
  std::vector<MemoryPoint> points_;
};

// CLOCK_MONOTONIC now, in ns: bpf_ktime_get_ns()'s clock.
uint64_t MonotonicNowNs();

}  // namespace pystrobe

#endif  // PYSTROBE_DAEMON_ACCOUNTING_MEMORY_TIMELINE_H_
