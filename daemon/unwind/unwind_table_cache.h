// Unwind tables shared by every process that maps the same binary: keyed by
// the binary's build id (or, without one, a hash of its first and last 4 KiB
// and its size), with one id per binary while any process maps it.
//
// Acquiring a binary reads its headers only (build id, load segments, whether
// it has call frame information at all): a torch process maps 315 binaries,
// and building all their tables would cost seconds for the few the samples
// ever walk through. The table itself is built later, when a walk asks for it
// (daemon/unwind/unwind_table_builder.h), and kept here while referenced.
#ifndef PYSTROBE_DAEMON_UNWIND_UNWIND_TABLE_CACHE_H_
#define PYSTROBE_DAEMON_UNWIND_UNWIND_TABLE_CACHE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "daemon/elf/elf_file.h"
#include "daemon/unwind/unwind_table.h"

namespace pystrobe {

class UnwindTableCache {
 public:
  // A binary's table as the cache knows it.
  enum class State {
    kUnbuilt,   // nobody asked for it yet
    kBuilding,  // handed to the builder
    kBuilt,     // table() is there
    kFailed,    // the build failed: its walks end in [unknown]
  };
  struct Handle {
    uint32_t id = 0;     // stable while held; reused after the last Release
    bool first = false;  // the binary was not held by anyone before
  };
  struct Stats {
    uint64_t binaries = 0;  // distinct binaries acquired
    uint64_t shared = 0;    // acquisitions answered by an id already there
    // Distinct files without call frame information (or unreadable), each
    // counted once however many processes map it.
    uint64_t without_cfi = 0;
    uint64_t released = 0;  // ids whose last user let go
  };

  // The id of the file at `path` (for another process's file, a
  // /proc/PID/root/... or /proc/PID/map_files/... path), with one more
  // reference. NotFound for a file without call frame information; a file
  // that failed once fails again at once until it changes.
  absl::StatusOr<Handle> Acquire(const std::string& path);
  // Drops a reference taken by Acquire; true when it was the last and the
  // id is free.
  bool Release(uint32_t id);

  // Of a held id: its content key, a path it was acquired by (for the
  // builder), its load segments (for a mapping's bias), its state and table.
  const std::string& key(uint32_t id) const { return entries_.at(id).key; }
  const std::string& path(uint32_t id) const { return entries_.at(id).path; }
  const std::vector<ElfLoadSegment>& load_segments(uint32_t id) const {
    return entries_.at(id).segments;
  }
  State state(uint32_t id) const;
  const std::shared_ptr<const UnwindTable>& table(uint32_t id) const {
    return entries_.at(id).table;
  }
  void set_building(uint32_t id);
  // Whether `id` is held and names the binary of content key `key`.
  bool Holds(uint32_t id, const std::string& key) const;
  // A build's result: the table (kBuilt) or why not (kFailed).
  void SetBuilt(uint32_t id, absl::StatusOr<std::shared_ptr<const UnwindTable>> table);

  size_t size() const { return entries_.size(); }
  const Stats& stats() const { return stats_; }

 private:
  struct Entry {
    std::string key;
    std::string path;
    std::vector<ElfLoadSegment> segments;
    uint32_t references = 0;
    State state = State::kUnbuilt;
    std::shared_ptr<const UnwindTable> table;
  };
  absl::StatusOr<std::string> ContentKey(const std::string& path, const FileIdentity& id);

  absl::flat_hash_map<FileIdentity, std::string> keys_;  // file -> content key
  absl::flat_hash_map<FileIdentity, absl::Status> failures_;
  absl::flat_hash_map<std::string, uint32_t> ids_;  // content key -> id
  absl::flat_hash_map<uint32_t, Entry> entries_;
  uint32_t next_id_ = 0;
  std::vector<uint32_t> free_ids_;
  Stats stats_;
};

}  // namespace pystrobe

#endif  // PYSTROBE_DAEMON_UNWIND_UNWIND_TABLE_CACHE_H_
