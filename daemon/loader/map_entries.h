// Every entry of a BPF hash map, read a batch at a time.
#ifndef PYSTROBE_DAEMON_LOADER_MAP_ENTRIES_H_
#define PYSTROBE_DAEMON_LOADER_MAP_ENTRIES_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"

namespace pystrobe {

// A map's entries as the kernel held them while they were read: entry i's
// key at keys[i * key_size], its value at values[i * value_size].
struct MapEntries {
  size_t key_size = 0;
  size_t value_size = 0;
  size_t count = 0;
  std::vector<uint8_t> keys;
  std::vector<uint8_t> values;

  const uint8_t* key(size_t i) const { return keys.data() + i * key_size; }
  const uint8_t* value(size_t i) const { return values.data() + i * value_size; }
};

// Reads every entry of the hash map `fd` (BPF_MAP_TYPE_HASH or LRU_HASH),
// up to a few hundred per system call (BPF_MAP_LOOKUP_BATCH). Walking a map
// with get_next_key and a lookup per entry took two calls an entry: among
// 1,000 processes, a quarter of the daemon's CPU at rest went to reading its
// per-process counters that way every second. Entries added or deleted while
// it reads may be missed; none is read twice.
absl::StatusOr<MapEntries> ReadHashMapEntries(int fd, size_t key_size, size_t value_size);

}  // namespace pystrobe

#endif  // PYSTROBE_DAEMON_LOADER_MAP_ENTRIES_H_
