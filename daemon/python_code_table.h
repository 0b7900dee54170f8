// Code objects of the sampled Python frames, read as their samples arrive
// (the process may be gone by the time the profile is written) and interned
// so stacks can refer to them by a small id.
#ifndef PYSTROBE_DAEMON_PYTHON_CODE_TABLE_H_
#define PYSTROBE_DAEMON_PYTHON_CODE_TABLE_H_

#include <cstdint>
#include <memory>
#include <tuple>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "daemon/python/code_object_reader.h"
#include "daemon/python_process.h"

namespace pystrobe {

using PythonCodeId = uint32_t;

class PythonCodeTable {
 public:
  // The id of the code object `process` (image `image`) had at `address`
  // when the kernel stamped it `stamp`; read from the process the first time.
  PythonCodeId Intern(uint32_t image, PythonProcess& process, uint64_t address, uint32_t stamp) {
    auto [it, inserted] = ids_.try_emplace(std::make_tuple(image, address, stamp), next_id_);
    if (inserted) {
      ++next_id_;
      absl::StatusOr<std::shared_ptr<const PythonCodeObject>> code =
          process.ReadCode(address, stamp);
      if (code.ok()) {
        codes_.emplace(it->second, std::move(*code));
      } else {
        codes_.emplace(it->second, nullptr);
        ++read_errors_;
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
  absl::flat_hash_map<std::tuple<uint32_t, uint64_t, uint32_t>, PythonCodeId> ids_;
  absl::flat_hash_map<PythonCodeId, std::shared_ptr<const PythonCodeObject>> codes_;
  PythonCodeId next_id_ = 0;
  size_t read_errors_ = 0;
  uint64_t evictions_ = 0;
};

}  // namespace pystrobe

#endif  // PYSTROBE_DAEMON_PYTHON_CODE_TABLE_H_
