// Keeps the kernel's view of each sampled process's executable mappings and
// their unwind tables current: read from /proc/PID/maps on a process's first
// sample, again after exec and whenever the kernel's walk met a pc outside
// every mapping it knew (a library loaded since), and dropped at exit, the
// tables with the last process that maps them.
#ifndef PYSTROBE_DAEMON_RECORDING_NATIVE_UNWIND_TRACKER_H_
#define PYSTROBE_DAEMON_RECORDING_NATIVE_UNWIND_TRACKER_H_

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "bpf/pystrobe_abi.h"
#include "daemon/unwind/unwind_table_cache.h"
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

class NativeUnwindTracker {
 public:
  struct Stats {
    uint64_t processes = 0;  // tracked now
    uint64_t refreshes = 0;  // mappings re-read after a stale walk or exec
    uint64_t tables_loaded = 0;
    uint64_t table_failures = 0;  // files with no tables (or no room for them)
  };

  // `proc` is where processes are found ("/proc", or a fake tree in tests).
  explicit NativeUnwindTracker(UnwindTableStore* store, std::string proc = "/proc");
  ~NativeUnwindTracker();

  // A ring buffer record: a sample of a process not yet tracked, or one
  // whose walk was stale, (re)reads its mappings; exec re-reads them; exit
  // forgets the process.
  void OnRecord(std::span<const uint8_t> record);
  // Reads `pid`'s mappings and hands them and their tables to the store.
  absl::Status Track(uint32_t pid);
  void Forget(uint32_t pid);

  const Stats& stats() const { return stats_; }
  const UnwindTableCache& cache() const { return cache_; }

 private:
  struct Process {
    std::vector<uint32_t> tables;  // references held in cache_
    absl::Time read_at;
  };
  // The table id of one region (acquiring a reference into `held`).
  uint32_t TableFor(uint32_t pid, const ExecutableRegion& region, std::vector<uint32_t>& held,
                    uint64_t& bias);
  void Release(const std::vector<uint32_t>& tables);
  std::string VdsoPath();

  UnwindTableStore* store_;
  std::string proc_;
  UnwindTableCache cache_;
  absl::flat_hash_map<uint32_t, Process> processes_;
  int vdso_fd_ = -1;
  Stats stats_;
};

}  // namespace pystrobe

#endif  // PYSTROBE_DAEMON_RECORDING_NATIVE_UNWIND_TRACKER_H_
