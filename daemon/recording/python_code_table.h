// Code objects of the sampled Python frames, read as their samples arrive
// (the process may be gone by the time the profile is written) and interned
// so stacks can refer to them by a small id.
#ifndef PYSTROBE_DAEMON_RECORDING_PYTHON_CODE_TABLE_H_
#define PYSTROBE_DAEMON_RECORDING_PYTHON_CODE_TABLE_H_

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/hash/hash.h"
#include "daemon/python/code_copies.h"
#include "daemon/python/code_object_reader.h"
#include "daemon/recording/python_process.h"
#include "daemon/records/record_decoder.h"

namespace pystrobe {

using PythonCodeId = uint32_t;

class PythonCodeTable {
 public:
  // The id of the code object `process` (image `image`, pid `pid`) had at
  // `address` when the kernel stamped it `stamp`. Read the first time: from
  // the kernel's copy in `copies` when it sent one, else from the process.
  PythonCodeId Intern(uint32_t image, uint32_t pid, PythonProcess& process, uint64_t address,
                      uint32_t stamp, PythonCodeCopies& copies) {
    return InternOne(image, pid, process, address, stamp, copies).id;
  }

  // Intern() of each of a sample's frames (innermost first) of thread `tid`,
  // into `ids` (replaced). A thread's consecutive samples share their outer
  // frames, most of a deep stack: the ids of those are taken from its
  // previous sample instead of being looked up again (one comparison each).
  void InternFrames(uint32_t image, uint32_t tid, uint32_t pid, PythonProcess& process,
                    std::span<const PythonFrameRecord> frames, PythonCodeCopies& copies,
                    std::vector<PythonCodeId>& ids) {
    ThreadFrames& last = last_frames_[absl::Hash<std::pair<uint32_t, uint32_t>>()({image, tid}) %
                                      kThreadsRemembered];
    // The outer frames this sample shares with the last one, counted from
    // the root, as far as they were readable then (an unreadable one is
    // looked up again: a copy sent since may name it).
    size_t shared = 0;
    if (last.image == image && last.tid == tid) {
      const size_t limit = std::min(frames.size(), last.readable_outer);
      const size_t n = frames.size(), m = last.keys.size();
      while (shared < limit && frames[n - 1 - shared].code == last.keys[m - 1 - shared].first &&
             frames[n - 1 - shared].stamp == last.keys[m - 1 - shared].second) {
        ++shared;
      }
    }
    const size_t n = frames.size();
    ids.resize(n);
    if (shared > 0) {
      std::copy(last.ids.end() - static_cast<std::ptrdiff_t>(shared), last.ids.end(),
                ids.end() - static_cast<std::ptrdiff_t>(shared));
    }
    size_t readable_outer = shared;
    bool readable_so_far = true;  // from the root inward, before the shared part ends
    for (size_t i = n - shared; i-- > 0;) {
      Interned interned = InternOne(image, pid, process, frames[i].code, frames[i].stamp, copies);
      ids[i] = interned.id;
      readable_so_far = readable_so_far && !interned.unreadable && readable_outer == n - 1 - i;
      if (readable_so_far) ++readable_outer;
    }
    last.image = image;
    last.tid = tid;
    last.readable_outer = readable_outer;
    last.keys.resize(n);
    for (size_t i = 0; i < n; ++i) last.keys[i] = {frames[i].code, frames[i].stamp};
    last.ids.assign(ids.begin(), ids.end());
  }

  // The code object, or null when it could not be read (exited, freed,
  // garbage) or was evicted.
  const PythonCodeObject* Get(PythonCodeId id) const {
    auto it = codes_.find(id);
    return it != codes_.end() ? it->second.get() : nullptr;
  }
  // Distinct code objects that could not be read.
  size_t read_errors() const { return read_errors_; }
  // Distinct code objects named from the kernel's copies.
  size_t read_from_copies() const { return read_from_copies_; }
  size_t size() const { return codes_.size(); }
  uint64_t evictions() const { return evictions_; }

  // Forgets the code objects of the images `forget` says, or (no argument)
  // all of them. Only when no stack refers to them any more: after a window
  // is written. `counted`: whether they count as evictions (a cache bound)
  // rather than as the end of their process.
  template <typename Predicate>
  void ForgetImages(Predicate forget, bool counted) {
    // The ids the threads' last samples hold may be among those forgotten.
    for (ThreadFrames& last : last_frames_) last = ThreadFrames();
    for (auto it = ids_.begin(); it != ids_.end();) {
      if (!forget(std::get<0>(it->first))) {
        ++it;
        continue;
      }
      codes_.erase(it->second.id);
      if (counted) ++evictions_;
      ids_.erase(it++);
    }
  }

 private:
  struct Interned {
    PythonCodeId id = 0;
    bool unreadable = false;  // its code object is null in codes_
  };

  Interned InternOne(uint32_t image, uint32_t pid, PythonProcess& process, uint64_t address,
                     uint32_t stamp, PythonCodeCopies& copies) {
    auto [it, inserted] =
        ids_.try_emplace(std::make_tuple(image, address, stamp), Interned{next_id_, false});
    Interned& interned = it->second;
    if (inserted) {
      ++next_id_;
      absl::StatusOr<std::shared_ptr<const PythonCodeObject>> code =
          Read(pid, process, address, stamp, copies);
      if (code.ok()) {
        codes_.emplace(interned.id, std::move(*code));
      } else {
        codes_.emplace(interned.id, nullptr);
        interned.unreadable = true;
        ++read_errors_;
      }
    } else if (interned.unreadable) {
      // Unreadable when first met (its copy put off by the kernel's budget,
      // the object gone): a copy sent with a later sample names it still.
      if (std::optional<CopiedMemory> copy = copies.Take(pid, address, stamp)) {
        absl::StatusOr<std::shared_ptr<const PythonCodeObject>> code =
            process.ReadCodeFrom(*copy, address, stamp);
        if (code.ok()) {
          codes_[interned.id] = std::move(*code);
          interned.unreadable = false;
          ++read_from_copies_;
        }
      }
    }
    return interned;
  }

  absl::StatusOr<std::shared_ptr<const PythonCodeObject>> Read(uint32_t pid, PythonProcess& process,
                                                               uint64_t address, uint32_t stamp,
                                                               PythonCodeCopies& copies) {
    // A copy that cannot name the object (a part left out) leaves it to the
    // process, if it still lives; so does one without the line table (too
    // big to copy), whose name serves when the process cannot.
    if (std::optional<CopiedMemory> copy = copies.Take(pid, address, stamp)) {
      absl::StatusOr<std::shared_ptr<const PythonCodeObject>> code =
          process.ReadCodeFrom(*copy, address, stamp);
      if (code.ok() && !(*code)->line_table_bytes.empty()) {
        ++read_from_copies_;
        return code;
      }
      if (code.ok()) {
        absl::StatusOr<std::shared_ptr<const PythonCodeObject>> live =
            process.ReadCode(address, stamp);
        if (live.ok()) return live;
        ++read_from_copies_;
        return code;
      }
    }
    return process.ReadCode(address, stamp);
  }

  absl::flat_hash_map<std::tuple<uint32_t, uint64_t, uint32_t>, Interned> ids_;
  absl::flat_hash_map<PythonCodeId, std::shared_ptr<const PythonCodeObject>> codes_;
  PythonCodeId next_id_ = 0;
  size_t read_errors_ = 0;
  size_t read_from_copies_ = 0;
  uint64_t evictions_ = 0;

  // The last sample's frames of a few threads, direct-mapped by (image, tid):
  // bounded, whatever the number of threads.
  struct ThreadFrames {
    uint32_t image = UINT32_MAX;
    uint32_t tid = 0;
    std::vector<std::pair<uint64_t, uint32_t>> keys;  // (address, stamp), innermost first
    std::vector<PythonCodeId> ids;
    size_t readable_outer = 0;  // outer frames whose code objects were read
  };
  static constexpr size_t kThreadsRemembered = 64;
  std::array<ThreadFrames, kThreadsRemembered> last_frames_;
};

}  // namespace pystrobe

#endif  // PYSTROBE_DAEMON_RECORDING_PYTHON_CODE_TABLE_H_
