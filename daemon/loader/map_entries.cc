#include "daemon/loader/map_entries.h"

#include <bpf/bpf.h>

#include <cerrno>

#include "daemon/loader/libbpf_errors.h"

namespace pystrobe {
namespace {

// Entries asked for per call. A hash map's batch is whole buckets, so a call
// whose first bucket holds more entries than it asks for fails with ENOSPC
// and is asked again for twice as many.
constexpr uint32_t kBatchEntries = 256;
constexpr uint32_t kMostEntriesAsked = 1 << 20;

}  // namespace

absl::StatusOr<MapEntries> ReadHashMapEntries(int fd, size_t key_size, size_t value_size) {
  MapEntries entries;
  entries.key_size = key_size;
  entries.value_size = value_size;
  // A hash map's position between batches: the next bucket.
  uint32_t position = 0, next = 0;
  bool first = true;
  uint32_t asked = kBatchEntries;
  for (;;) {
    entries.keys.resize((entries.count + asked) * key_size);
    entries.values.resize((entries.count + asked) * value_size);
    uint32_t count = asked;
    int error = bpf_map_lookup_batch(
        fd, first ? nullptr : &position, &next, entries.keys.data() + entries.count * key_size,
        entries.values.data() + entries.count * value_size, &count, nullptr);
    int cause = errno;
    if (error != 0 && cause == ENOSPC && count == 0 && asked < kMostEntriesAsked) {
      asked *= 2;
      continue;
    }
    if (error != 0 && cause != ENOENT) {
      return LibbpfError(-cause, "read a map's entries");
    }
    entries.count += count;
    if (error != 0) break;  // ENOENT: no bucket after these
    position = next;
    first = false;
  }
  entries.keys.resize(entries.count * key_size);
  entries.values.resize(entries.count * value_size);
  return entries;
}

}  // namespace pystrobe
