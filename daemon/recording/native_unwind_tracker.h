// Keeps the kernel's view of each sampled process's executable mappings and
// their unwind tables current: mappings read from /proc/PID/maps on a
// process's first sample, again after exec and whenever the kernel's walk met
// a pc outside every mapping it knew (a library loaded since), and dropped at
// exit.
//
// Tables follow the walks, not the mappings: a binary gets an id when a
// process maps it (its headers read, nothing built), and its table is built
// (off this thread, or read from the disk cache) and loaded into the kernel
// only when a walk reaches it and asks (PYSTROBE_SAMPLE_NATIVE_TABLE_WANTED).
// A torch process maps 315 binaries; its samples walk through about a dozen.
// When the kernel's table memory is full, the tables walks used least
// recently are evicted (and loaded again when asked for).
#ifndef PYSTROBE_DAEMON_RECORDING_NATIVE_UNWIND_TRACKER_H_
#define PYSTROBE_DAEMON_RECORDING_NATIVE_UNWIND_TRACKER_H_

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "bpf/pystrobe_abi.h"
#include "daemon/procfs/paths.h"
#include "daemon/records/record_decoder.h"
#include "daemon/unwind/unwind_table_builder.h"
#include "daemon/unwind/unwind_table_cache.h"
#include "daemon/unwind/unwind_table_disk_cache.h"
#include "daemon/unwind/unwind_table_store.h"

namespace pystrobe {

// One executable mapping from a /proc/PID/maps line.
struct ExecutableRegion {
  uint64_t start = 0, end = 0, file_offset = 0;
  std::string path;  // "" for anonymous memory
  bool deleted = false;
  bool anonymous() const { return path.empty() || (path[0] == '[' && path != "[vdso]"); }
};

// The executable regions of a maps file, anonymous ones too (JIT code),
// [vsyscall] left out (no pc of it is ever walked past).
std::vector<ExecutableRegion> ParseExecutableRegions(absl::string_view maps);

struct NativeUnwindTrackerOptions {
  std::string proc =
      std::string(procfs::kRoot);  // where processes are found (a fake tree in tests)
  // Only samples of processes the kernel walks as CPython start tracking.
  bool python_only = false;
  UnwindTableOptions tables;
  // Tables kept across runs; nullopt: none.
  std::optional<UnwindTableDiskCache> disk_cache;
};

class NativeUnwindTracker {
 public:
  struct Stats {
    uint64_t processes = 0;       // tracked now
    uint64_t refreshes = 0;       // mappings re-read after a stale walk or exec
    uint64_t tables_loaded = 0;   // tables put in the kernel (again after an eviction too)
    uint64_t tables_evicted = 0;  // taken out for room, least recently used first
    // Tables that did not fit even with every other one evicted, and
    // tables that failed to build or load: their walks end in [unknown].
    uint64_t tables_unavailable = 0;
  };

  NativeUnwindTracker(UnwindTableStore* store, NativeUnwindTrackerOptions options = {});
  ~NativeUnwindTracker();

  // A decoded ring buffer record: an on- or off-CPU sample of a process not
  // yet tracked, or one whose walk was stale, (re)reads its mappings; one
  // whose walk asked for a table has it built or loaded; exec re-reads the
  // mappings; exit forgets the process.
  void OnRecord(const RingRecord& record);
  // Reads `pid`'s mappings and hands them to the store (no table is built).
  absl::Status Track(uint32_t pid);
  void Forget(uint32_t pid);
  // Loads the tables finished by the builder, and the ones the kernel asked
  // for (when `asked`); OnRecord calls it.
  void Service(bool asked);
  // Waits for the builder to finish what it was handed, then loads it
  // (tests; `record` before its summary).
  void Settle(absl::Duration timeout);

  const Stats& stats() const { return stats_; }
  const UnwindTableCache& cache() const { return cache_; }
  UnwindTableBuilder::Stats builder_stats() const { return builder_.stats(); }
  bool has_disk_cache() const { return builder_.has_disk_cache(); }

 private:
  struct Process {
    std::vector<uint32_t> tables;  // references held in cache_
    absl::Time read_at;
  };
  // The table id of one region (acquiring a reference into `held`).
  uint32_t TableFor(uint32_t pid, const ExecutableRegion& region, std::vector<uint32_t>& held,
                    uint64_t& bias);
  void Release(const std::vector<uint32_t>& tables);
  // Has table `id` built, or loaded when it is.
  void Want(uint32_t id);
  // Puts table `id` (built) in the kernel, evicting the least recently used
  // others while there is no room.
  void Load(uint32_t id);
  std::string VdsoPath();

  UnwindTableStore* store_;
  std::string proc_;
  bool python_only_;
  UnwindTableCache cache_;
  absl::flat_hash_map<uint32_t, Process> processes_;
  absl::flat_hash_set<uint32_t> loaded_;  // ids whose rows are in the kernel
  int vdso_fd_ = -1;
  Stats stats_;
  // Last: its thread stops before the members it hands results to go.
  UnwindTableBuilder builder_;
};

}  // namespace pystrobe

#endif  // PYSTROBE_DAEMON_RECORDING_NATIVE_UNWIND_TRACKER_H_
