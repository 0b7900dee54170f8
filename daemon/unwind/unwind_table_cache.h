// Unwind tables shared by every process that maps the same binary: keyed by
// the binary's build id (or, without one, a hash of its first and last 4 KiB
// and its size), built once, and evicted when the last user lets go.
#ifndef PYSTROBE_DAEMON_UNWIND_UNWIND_TABLE_CACHE_H_
#define PYSTROBE_DAEMON_UNWIND_UNWIND_TABLE_CACHE_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "daemon/unwind/unwind_table.h"

namespace pystrobe {

// What tells one file's contents from another's without reading them.
struct UnwindFileIdentity {
  uint64_t device = 0;
  uint64_t inode = 0;
  uint64_t size = 0;
  int64_t mtime_ns = 0;
  bool operator==(const UnwindFileIdentity&) const = default;
  template <typename H>
  friend H AbslHashValue(H h, const UnwindFileIdentity& id) {
    return H::combine(std::move(h), id.device, id.inode, id.size, id.mtime_ns);
  }
};

class UnwindTableCache {
 public:
  struct Handle {
    uint32_t id = 0;  // stable while held; reused after eviction
    std::shared_ptr<const UnwindTable> table;
    bool built_now = false;  // false: an existing table was shared
  };
  struct Stats {
    uint64_t built = 0;
    uint64_t shared = 0;  // acquisitions answered by a table already there
    uint64_t failed = 0;  // files without call frame information, or unreadable
    uint64_t evicted = 0;
    absl::Duration build_time;
  };

  explicit UnwindTableCache(UnwindTableOptions options = {}) : options_(std::move(options)) {}

  // The table of the file at `path` (for another process's file, a
  // /proc/PID/root/... or /proc/PID/map_files/... path), with one more
  // reference. A file that failed once fails again at once until it
  // changes.
  absl::StatusOr<Handle> Acquire(const std::string& path);
  // Drops a reference taken by Acquire; true when it was the last and the
  // table is gone.
  bool Release(uint32_t id);

  size_t size() const { return entries_.size(); }
  const Stats& stats() const { return stats_; }

 private:
  struct Entry {
    std::string key;
    std::shared_ptr<const UnwindTable> table;
    uint32_t references = 0;
  };
  absl::StatusOr<std::string> ContentKey(const std::string& path, const UnwindFileIdentity& id);

  UnwindTableOptions options_;
  absl::flat_hash_map<UnwindFileIdentity, std::string> keys_;  // file -> content key
  absl::flat_hash_map<UnwindFileIdentity, absl::Status> failures_;
  absl::flat_hash_map<std::string, uint32_t> ids_;  // content key -> id
  absl::flat_hash_map<uint32_t, Entry> entries_;
  uint32_t next_id_ = 0;
  std::vector<uint32_t> free_ids_;
  Stats stats_;
};

}  // namespace pystrobe

#endif  // PYSTROBE_DAEMON_UNWIND_UNWIND_TABLE_CACHE_H_
