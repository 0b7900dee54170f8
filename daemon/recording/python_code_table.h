// Code objects of the sampled Python frames, read as their samples arrive
// (the process may be gone by the time the profile is written) and interned
// so stacks can refer to them by a small id.
#ifndef PYSTROBE_DAEMON_RECORDING_PYTHON_CODE_TABLE_H_
#define PYSTROBE_DAEMON_RECORDING_PYTHON_CODE_TABLE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <tuple>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "daemon/python/code_copies.h"
#include "daemon/python/code_object_reader.h"
#include "daemon/recording/python_process.h"

namespace pystrobe {

using PythonCodeId = uint32_t;

class PythonCodeTable {
 public:
  // The id of the code object `process` (image `image`, pid `pid`) had at
  // `address` when the kernel stamped it `stamp`. Read the first time: from
  // the kernel's copy in `copies` when it sent one, else from the process.
  PythonCodeId Intern(uint32_t image, uint32_t pid, PythonProcess& process, uint64_t address,
                      uint32_t stamp, PythonCodeCopies& copies) {
    auto [it, inserted] = ids_.try_emplace(std::make_tuple(image, address, stamp), next_id_);
    if (inserted) {
      ++next_id_;
      absl::StatusOr<std::shared_ptr<const PythonCodeObject>> code =
          Read(pid, process, address, stamp, copies);
      if (code.ok()) {
        codes_.emplace(it->second, std::move(*code));
      } else {
        codes_.emplace(it->second, nullptr);
        ++read_errors_;
      }
    } else if (auto known = codes_.find(it->second);
               known != codes_.end() && known->second == nullptr) {
      // Unreadable when first met (its copy put off by the kernel's budget,
      // the object gone): a copy sent with a later sample names it still.
      if (std::optional<CopiedMemory> copy = copies.Take(pid, address, stamp)) {
        absl::StatusOr<std::shared_ptr<const PythonCodeObject>> code =
            process.ReadCodeFrom(*copy, address, stamp);
        if (code.ok()) {
          known->second = std::move(*code);
          ++read_from_copies_;
        }
      }
    }
    return it->second;
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
    for (auto it = ids_.begin(); it != ids_.end();) {
      if (!forget(std::get<0>(it->first))) {
        ++it;
        continue;
      }
      codes_.erase(it->second);
      if (counted) ++evictions_;
      ids_.erase(it++);
    }
  }

 private:
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

  absl::flat_hash_map<std::tuple<uint32_t, uint64_t, uint32_t>, PythonCodeId> ids_;
  absl::flat_hash_map<PythonCodeId, std::shared_ptr<const PythonCodeObject>> codes_;
  PythonCodeId next_id_ = 0;
  size_t read_errors_ = 0;
  size_t read_from_copies_ = 0;
  uint64_t evictions_ = 0;
};

}  // namespace pystrobe

#endif  // PYSTROBE_DAEMON_RECORDING_PYTHON_CODE_TABLE_H_
