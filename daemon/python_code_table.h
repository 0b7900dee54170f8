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
    auto [it, inserted] = ids_.try_emplace(std::make_tuple(image, address, stamp), codes_.size());
    if (inserted) {
      absl::StatusOr<std::shared_ptr<const PythonCodeObject>> code =
          process.ReadCode(address, stamp);
      if (code.ok()) {
        codes_.push_back(std::move(*code));
      } else {
        codes_.push_back(nullptr);
        ++read_errors_;
      }
    }
    return it->second;
  }

  // The code object, or null when it could not be read (exited, freed, garbage).
  const PythonCodeObject* Get(PythonCodeId id) const { return codes_[id].get(); }
  // Distinct code objects that could not be read.
  size_t read_errors() const { return read_errors_; }

 private:
  absl::flat_hash_map<std::tuple<uint32_t, uint64_t, uint32_t>, PythonCodeId> ids_;
  std::vector<std::shared_ptr<const PythonCodeObject>> codes_;
  size_t read_errors_ = 0;
};

}  // namespace pystrobe

#endif  // PYSTROBE_DAEMON_PYTHON_CODE_TABLE_H_
