// Builds unwind tables on a thread of its own, off the path that drains the
// sampler's ring buffer: libtorch_cpu's table takes a second or more to
// build from its 10 MB of .eh_frame, and samples must keep flowing while it
// does (they end in one [unknown] until it is loaded). With a disk cache, a
// table built once is read back on every later run instead.
#ifndef PYSTROBE_DAEMON_UNWIND_UNWIND_TABLE_BUILDER_H_
#define PYSTROBE_DAEMON_UNWIND_UNWIND_TABLE_BUILDER_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "daemon/unwind/unwind_table.h"
#include "daemon/unwind/unwind_table_disk_cache.h"

namespace pystrobe {

class UnwindTableBuilder {
 public:
  struct Request {
    uint32_t id = 0;  // the caller's name for it, handed back
    std::string key;  // content key: the disk cache's file name
    std::string path;
  };
  struct Result {
    uint32_t id = 0;
    std::string key;
    absl::StatusOr<std::shared_ptr<const UnwindTable>> table;
    bool from_disk = false;
    absl::Duration cpu;  // this thread's CPU time on it
  };
  struct Stats {
    uint64_t built = 0;      // from call frame information
    uint64_t from_disk = 0;  // read back from the disk cache
    uint64_t failed = 0;
    absl::Duration build_cpu;  // CPU spent building
    absl::Duration load_cpu;   // CPU spent reading the disk cache
  };

  // `disk` (may be null: no cache on disk) is used by the builder's thread
  // alone from now on.
  UnwindTableBuilder(UnwindTableOptions options, std::optional<UnwindTableDiskCache> disk);
  // Finishes the table being built, drops the rest.
  ~UnwindTableBuilder();
  UnwindTableBuilder(const UnwindTableBuilder&) = delete;
  UnwindTableBuilder& operator=(const UnwindTableBuilder&) = delete;

  void Enqueue(Request request);
  // Tables finished since the last call; cheap when there are none.
  std::vector<Result> TakeFinished();
  // Blocks until nothing is queued or being built, or `timeout` passes
  // (tests, and `record` before it reads the summary).
  bool WaitIdle(absl::Duration timeout);

  // A copy, consistent as of the call.
  Stats stats() const;
  bool has_disk_cache() const { return disk_.has_value(); }
  // Whether the disk cache holds a table for content key `key`.
  bool OnDisk(const std::string& key) const { return disk_ && disk_->Contains(key); }

 private:
  void Run();

  UnwindTableOptions options_;
  std::optional<UnwindTableDiskCache> disk_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable idle_;
  std::deque<Request> queue_;
  std::vector<Result> finished_;
  std::atomic<bool> has_finished_{false};
  bool busy_ = false;
  bool stopping_ = false;
  Stats stats_;
  std::thread thread_;
};

}  // namespace pystrobe

#endif  // PYSTROBE_DAEMON_UNWIND_UNWIND_TABLE_BUILDER_H_
