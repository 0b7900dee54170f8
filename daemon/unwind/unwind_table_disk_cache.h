// Unwind tables kept on disk across runs, keyed by the binary's content key
// (its build id, or a hash of its bytes): a second `record` of the same
// program reads libtorch_cpu's 1.4M rows in milliseconds instead of parsing
// 10 MB of .eh_frame for a second or more.
//
// A cache file is only ever a hint. It is read with the same distrust as a
// binary: the size must match its header exactly, a checksum must match, and
// every row and page entry is checked as the kernel's walk would rely on it
// (sorted rows, known rules, page entries in range and in order); anything
// else is deleted and the table is built from the binary. The directory
// must belong to us and be writable by nobody else; files are opened without
// following links. The cache is bounded: past `max_bytes`, the files read or
// written longest ago go first.
#ifndef PYSTROBE_DAEMON_UNWIND_UNWIND_TABLE_DISK_CACHE_H_
#define PYSTROBE_DAEMON_UNWIND_UNWIND_TABLE_DISK_CACHE_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "daemon/unwind/unwind_table.h"

namespace pystrobe {

// Where `record` keeps tables unless told otherwise, and how much of them.
inline constexpr char kDefaultUnwindCacheDirectory[] = "/var/cache/pystrobe/unwind";
inline constexpr uint64_t kDefaultUnwindCacheBytes = uint64_t{512} << 20;

class UnwindTableDiskCache {
 public:
  struct Stats {
    uint64_t hits = 0;
    uint64_t misses = 0;
    uint64_t rejected = 0;  // files that failed a check, deleted
    uint64_t written = 0;
    uint64_t evicted = 0;
  };

  // Creates `directory` (mode 0700) if needed. FailedPrecondition when it
  // is not a directory we own or others may write to it.
  static absl::StatusOr<UnwindTableDiskCache> Open(std::string directory, uint64_t max_bytes);

  // The table stored under `key`, or nullopt (absent, or rejected).
  std::optional<UnwindTable> Load(absl::string_view key);
  // Whether a file is stored under `key` (not whether it will pass the
  // checks). Safe to call from any thread.
  bool Contains(absl::string_view key) const;
  // Stores `table` under `key`, then trims the directory to max_bytes.
  absl::Status Store(absl::string_view key, const UnwindTable& table);

  const Stats& stats() const { return stats_; }
  const std::string& directory() const { return directory_; }

 private:
  UnwindTableDiskCache(std::string directory, uint64_t max_bytes)
      : directory_(std::move(directory)), max_bytes_(max_bytes) {}
  std::string PathOf(absl::string_view key) const;
  void Trim();

  std::string directory_;
  uint64_t max_bytes_;
  Stats stats_;
};

// The bytes of a cache file for `table`, and the table back from them
// (InvalidArgument/DataLoss on anything a check refuses): exposed for tests
// that feed it corrupted and hostile files.
std::string SerializeUnwindTable(const UnwindTable& table);
absl::StatusOr<UnwindTable> ParseUnwindTable(absl::string_view bytes);

}  // namespace pystrobe

#endif  // PYSTROBE_DAEMON_UNWIND_UNWIND_TABLE_DISK_CACHE_H_
