// What counting a hash map's entries costs the daemon (its
// pystrobe_bpf_map_entries gauge, read every 5 s): walking the keys, a system
// call an entry, against one read of the kernel's own counts through a map
// iterator (daemon/loader/map_counts.h), on a 65,536-entry hash map like
// thread_counters filled to several levels. As root; prints microseconds.
#include <bpf/bpf.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <vector>

#include "daemon/loader/map_counts.h"

namespace {

constexpr uint32_t kMaxEntries = 65536;

// The median of `rounds` runs of `count`, in microseconds.
template <typename Count>
double MedianMicros(int rounds, Count count) {
  std::vector<double> times;
  for (int i = 0; i < rounds; ++i) {
    auto start = std::chrono::steady_clock::now();
    count();
    times.push_back(
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
            .count());
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

}  // namespace

int main() {
  absl::StatusOr<std::unique_ptr<pystrobe::MapEntryCounter>> counter =
      pystrobe::MapEntryCounter::Open();
  if (!counter.ok()) {
    std::fprintf(stderr, "map_fill_cost: %s\n", std::string(counter.status().message()).c_str());
    return 1;
  }
  int fd =
      bpf_map_create(BPF_MAP_TYPE_HASH, "fill_cost", sizeof(uint32_t), 64, kMaxEntries, nullptr);
  if (fd < 0) {
    std::perror("map_fill_cost: bpf_map_create");
    return 1;
  }
  std::printf("A hash map of %u entries at most, 64-byte values; median of 5 counts, us\n",
              kMaxEntries);
  std::printf("%10s %18s %22s\n", "entries", "walking the keys", "the kernel's counts");
  char value[64] = {};
  uint32_t filled = 0;
  for (uint32_t entries : {0u, 100u, 1000u, 16384u, 65536u}) {
    for (; filled < entries; ++filled) {
      uint32_t key = filled * 2654435761u;
      if (bpf_map_update_elem(fd, &key, value, BPF_NOEXIST) != 0) {
        std::perror("map_fill_cost: bpf_map_update_elem");
        return 1;
      }
    }
    uint32_t walked = 0;
    double walk = MedianMicros(
        5, [&] { walked = pystrobe::CountByWalkingKeys(fd, sizeof(uint32_t), kMaxEntries); });
    int64_t counted = -1;
    double read = MedianMicros(5, [&] {
      auto counts = (*counter)->Read();
      if (counts.ok() && counts->contains(pystrobe::MapIdOf(fd))) {
        counted = counts->at(pystrobe::MapIdOf(fd));
      }
    });
    if (walked != entries || counted != entries) {
      std::fprintf(stderr, "map_fill_cost: %u entries walked as %u, counted as %ld\n", entries,
                   walked, static_cast<long>(counted));
      return 1;
    }
    std::printf("%10u %18.0f %22.0f\n", entries, walk, read);
  }
  close(fd);
  return 0;
}
