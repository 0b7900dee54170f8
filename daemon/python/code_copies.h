// Code objects the kernel copied out of sampled processes (see
// pystrobe_python_code_event in bpf/pystrobe_abi.h), kept until the sample
// that needs one is named. A copy is the memory a CodeObjectReader would
// read, so a frame is named the same way from it, even once its process is
// gone.
#ifndef PYSTROBE_DAEMON_PYTHON_CODE_COPIES_H_
#define PYSTROBE_DAEMON_PYTHON_CODE_COPIES_H_

#include <cstdint>
#include <optional>
#include <span>
#include <tuple>
#include <vector>

#include "absl/container/btree_map.h"
#include "absl/status/statusor.h"
#include "daemon/python/process_memory.h"

namespace pystrobe {

// Regions of a process's memory as they were copied; reads outside them fail.
class CopiedMemory : public ProcessMemory {
 public:
  struct Region {
    uint64_t address = 0;
    std::vector<uint8_t> bytes;
  };

  explicit CopiedMemory(std::vector<Region> regions) : regions_(std::move(regions)) {}

  // OutOfRange unless [address, address + size) lies in one region.
  absl::Status Read(uint64_t address, void* out, size_t size) const override;

  // Bytes copied, over all regions.
  size_t bytes() const;

 private:
  std::vector<Region> regions_;
};

// One code object's copy, as the kernel sent it.
struct PythonCodeCopy {
  uint32_t pid = 0;
  uint64_t code = 0;
  uint32_t stamp = 0;
  CopiedMemory memory;
};

// Parses a PYSTROBE_EVENT_PYTHON_CODE record; InvalidArgument names what is
// wrong with a malformed one.
absl::StatusOr<PythonCodeCopy> ParsePythonCodeCopy(std::span<const uint8_t> record);

class PythonCodeCopies {
 public:
  // Copies, and bytes of them, held at most: those whose samples never came
  // (dropped, or of a process userspace refused) wait for their process to
  // end. Most copies take a few hundred bytes.
  static constexpr size_t kMaxCopies = 4096;
  static constexpr size_t kMaxBytes = 8u << 20;

  // Keeps `copy` until it is taken, or counts it as dropped when full.
  void Add(PythonCodeCopy copy);

  // The copy of `pid`'s code object at `code` stamped `stamp`, removed from
  // the store; nullopt when the kernel sent none.
  std::optional<CopiedMemory> Take(uint32_t pid, uint64_t code, uint32_t stamp);

  // Drops the copies of `pid`: it exited or exec'd, and its samples, which
  // the ring buffer delivers first, are all in.
  void ForgetProcess(uint32_t pid);

  size_t size() const { return copies_.size(); }
  size_t bytes() const { return bytes_; }
  uint64_t received() const { return received_; }
  uint64_t dropped() const { return dropped_; }

 private:
  absl::btree_map<std::tuple<uint32_t, uint64_t, uint32_t>, CopiedMemory> copies_;
  size_t bytes_ = 0;
  uint64_t received_ = 0;
  uint64_t dropped_ = 0;
};

}  // namespace pystrobe

#endif  // PYSTROBE_DAEMON_PYTHON_CODE_COPIES_H_
