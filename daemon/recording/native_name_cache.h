// Names of native frames, resolved once per distinct (image, address), and
// as samples arrive: a process image's symbols can then be released as soon
// as it exits, which keeps memory bounded by the live processes. What file
// the code lies in (path, build id, file offset) is taken at the same time,
// for the same reason.
#ifndef PYSTROBE_DAEMON_RECORDING_NATIVE_NAME_CACHE_H_
#define PYSTROBE_DAEMON_RECORDING_NATIVE_NAME_CACHE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/time/time.h"
#include "daemon/recording/process_table.h"
#include "daemon/symbolizer/perf_map.h"
#include "model/profile.h"

namespace pystrobe {

// Every frame but the leaf holds a return address, which may already point
// into the next function when the call was a function's last instruction;
// looking up the byte before it names the caller correctly.
inline uint64_t FrameLookupAddress(const std::vector<uint64_t>& ips, size_t index) {
  return index == 0 ? ips[index] : ips[index] - 1;
}

// A native frame as named at ingest.
struct NativeFrameName {
  // "function", "module+0xoffset", or "[unknown] 0x..." when the image has
  // no symbols.
  std::string name;
  // Where the code lies; module is null when no mapping held the address.
  std::shared_ptr<const NativeModule> module;
  uint64_t file_offset = 0;
};

class NativeNameCache {
 public:
  // The frame at `address` (a lookup address) in `image`.
  const NativeFrameName& Name(const ProcessImage& image, uint64_t address);

  // Resolves every frame of a user stack of `image` now.
  void NameAll(const ProcessImage& image, const std::vector<uint64_t>& user_ips) {
    for (size_t i = 0; i < user_ips.size(); ++i) Name(image, FrameLookupAddress(user_ips, i));
  }

  // Drops the names of an image no stack refers to any more.
  void Forget(ImageId image) {
    jit_.erase(image);
    auto it = names_.find(image);
    if (it == names_.end()) return;
    size_ -= it->second.size();
    names_.erase(it);
  }

  // Drops names to get under `max_names`: those of images `still_named`
  // says can name them again (live ones, whose symbols are still loaded).
  // Counts what it dropped in evictions().
  template <typename Predicate>
  void Shrink(size_t max_names, Predicate still_named) {
    for (auto it = names_.begin(); size_ > max_names && it != names_.end();) {
      if (!still_named(it->first)) {
        ++it;
        continue;
      }
      size_ -= it->second.size();
      evictions_ += it->second.size();
      names_.erase(it++);
    }
  }

  size_t size() const { return size_; }
  uint64_t evictions() const { return evictions_; }
  // Entries of the module table: records a name or a profile frame holds,
  // and expired ones not swept yet.
  size_t module_count() const { return modules_.size(); }

 private:
  // The one record of the module at `location`: 500 processes mapping libc
  // share one, and a name holds 16 bytes of it, not a path.
  std::shared_ptr<const NativeModule> Intern(const NativeCodeLocation& location);
  // The name of code no file holds: from the process's perf map, else
  // "[jit]" in anonymous executable memory; empty when neither.
  std::string JitName(const ProcessImage& image, uint64_t address);

  // What a process says of its JIT code, read again at most once a second
  // when an address is not found in it.
  struct JitInfo {
    PerfMap perf_map;
    std::vector<std::pair<uint64_t, uint64_t>> anonymous_code;  // [start, end)
    absl::Time read_at = absl::InfinitePast();
  };
  absl::flat_hash_map<ImageId, JitInfo> jit_;

  // Image -> lookup address -> name.
  absl::flat_hash_map<ImageId, absl::flat_hash_map<uint64_t, NativeFrameName>> names_;
  size_t size_ = 0;
  uint64_t evictions_ = 0;
  // Path, build id and segments (as bytes) -> the record. Weak: a record
  // lives while a name or a profile holds it; expired entries are swept when
  // the table has doubled since the last sweep.
  absl::flat_hash_map<std::string, std::weak_ptr<const NativeModule>> modules_;
  size_t modules_after_sweep_ = 0;
};

}  // namespace pystrobe

#endif  // PYSTROBE_DAEMON_RECORDING_NATIVE_NAME_CACHE_H_
