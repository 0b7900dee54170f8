// How many entries BPF maps hold, counted by the kernel.
#ifndef PYSTROBE_DAEMON_LOADER_MAP_COUNTS_H_
#define PYSTROBE_DAEMON_LOADER_MAP_COUNTS_H_

#include <cstddef>
#include <cstdint>
#include <memory>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"

struct pystrobe_map_counts;
struct bpf_link;

namespace pystrobe {

// The entry count the kernel keeps of every BPF map (Linux 6.6+), read
// through a map iterator (bpf/map_counts.bpf.c): one read() for all maps,
// where walking a hash map's keys takes a system call an entry (among a
// busy host's thousands of threads and code objects, thousands a second).
class MapEntryCounter {
 public:
  // Loads and attaches the iterator; fails, naming why, where the kernel
  // refuses it (no bpf_map_sum_elem_count before 6.6).
  static absl::StatusOr<std::unique_ptr<MapEntryCounter>> Open();
  ~MapEntryCounter();
  MapEntryCounter(const MapEntryCounter&) = delete;
  MapEntryCounter& operator=(const MapEntryCounter&) = delete;

  // Entries by map id, for every map the kernel holds now (0 for maps
  // that keep no count, such as arrays).
  absl::StatusOr<absl::flat_hash_map<uint32_t, int64_t>> Read() const;

 private:
  MapEntryCounter(pystrobe_map_counts* skeleton, bpf_link* link)
      : skeleton_(skeleton), link_(link) {}

  pystrobe_map_counts* skeleton_;
  bpf_link* link_;
};

// The entries of the hash map open at `fd` counted by walking its keys, one
// system call each, up to one past `most` (a map may change while it is
// walked): what a kernel without MapEntryCounter leaves.
uint32_t CountByWalkingKeys(int fd, size_t key_size, uint32_t most);

// The id the kernel gave the map open at `fd`, as MapEntryCounter::Read
// keys it; 0 when it cannot be read.
uint32_t MapIdOf(int fd);

}  // namespace pystrobe

#endif  // PYSTROBE_DAEMON_LOADER_MAP_COUNTS_H_
