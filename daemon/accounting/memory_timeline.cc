#include "daemon/accounting/memory_timeline.h"

#include <time.h>

namespace pystrobe {

void MemoryTimeline::Observe(const ResidentMemory& memory, uint64_t now_ns, bool force) {
  // Not read yet, or read between fork and exec: no point.
  if (!memory.known() || memory.resident_bytes() == 0) return;
  if (!force && now_ns < next_ns_) return;
  next_ns_ = now_ns + interval_ns_;
  points_.push_back(MemoryPoint{.seconds = SecondsOf(now_ns),
                                .resident_bytes = memory.resident_bytes(),
                                .anon_bytes = memory.anon_bytes,
                                .swap_bytes = memory.swap_bytes});
  if (points_.size() <= max_points_ || max_points_ < 2) return;
  // Keep every other point, the last one always.
  std::vector<MemoryPoint> kept;
  kept.reserve(points_.size() / 2 + 1);
  for (size_t i = 0; i < points_.size(); i += 2) kept.push_back(points_[i]);
  if ((points_.size() - 1) % 2 != 0) kept.push_back(points_.back());
  points_ = std::move(kept);
  interval_ns_ *= 2;
}

uint64_t MonotonicNowNs() {
  timespec now = {};
  clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<uint64_t>(now.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(now.tv_nsec);
}

}  // namespace pystrobe
