// Reads another process's memory; an interface so tests can serve fake memory.
#ifndef PYSTROBE_DAEMON_PYTHON_PROCESS_MEMORY_H_
#define PYSTROBE_DAEMON_PYTHON_PROCESS_MEMORY_H_

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace pystrobe {

class ProcessMemory {
 public:
  virtual ~ProcessMemory() = default;

  // Reads exactly `size` bytes at `address`, or fails without partial data.
  virtual absl::Status Read(uint64_t address, void* out, size_t size) const = 0;

  template <typename T>
  absl::StatusOr<T> ReadValue(uint64_t address) const {
    static_assert(std::is_trivially_copyable_v<T>);
    T value;
    if (absl::Status status = Read(address, &value, sizeof(T)); !status.ok()) return status;
    return value;
  }
};

// Reads with process_vm_readv (needs CAP_SYS_PTRACE, or being the target's
// ancestor under Yama). Reads above kMaxReadSize are refused.
class RemoteProcessMemory : public ProcessMemory {
 public:
  static constexpr size_t kMaxReadSize = 4u << 20;

  explicit RemoteProcessMemory(pid_t pid) : pid_(pid) {}

  // Errors: NotFound "process N exited" when the process is gone (also mid
  // walk), OutOfRange for unmapped addresses, PermissionDenied without access.
  absl::Status Read(uint64_t address, void* out, size_t size) const override;

  pid_t pid() const { return pid_; }

 private:
  pid_t pid_;
};

}  // namespace pystrobe

#endif  // PYSTROBE_DAEMON_PYTHON_PROCESS_MEMORY_H_
