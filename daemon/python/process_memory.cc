#include "daemon/python/process_memory.h"

#include <sys/uio.h>

#include <cerrno>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace pystrobe {

absl::Status RemoteProcessMemory::Read(uint64_t address, void* out, size_t size) const {
  if (size == 0) return absl::OkStatus();
  if (size > kMaxReadSize) {
    return absl::InvalidArgumentError(
        absl::StrFormat("read of %u bytes at 0x%x in process %d exceeds the %u byte limit", size,
                        address, pid_, kMaxReadSize));
  }
  if (address == 0 || address + size < address) {
    return absl::OutOfRangeError(
        absl::StrFormat("read of %u bytes at bad address 0x%x in process %d", size, address, pid_));
  }
  iovec local{out, size};
  iovec remote{reinterpret_cast<void*>(address), size};
  const ssize_t n = process_vm_readv(pid_, &local, 1, &remote, 1, 0);
  if (n == static_cast<ssize_t>(size)) return absl::OkStatus();
  if (n >= 0) {
    return absl::OutOfRangeError(absl::StrFormat("short read in process %d: %d of %u bytes at 0x%x",
                                                 pid_, n, size, address));
  }
  const int err = errno;
  switch (err) {
    case ESRCH:
      return absl::NotFoundError(absl::StrCat("process ", pid_, " exited"));
    case EFAULT:
      return absl::OutOfRangeError(absl::StrFormat(
          "address 0x%x (%u bytes) is not mapped in process %d", address, size, pid_));
    case EPERM:
      return absl::PermissionDeniedError(absl::StrCat(
          "reading the memory of process ", pid_, ": permission denied (CAP_SYS_PTRACE needed)"));
    default:
      return absl::InternalError(absl::StrFormat("process_vm_readv(pid %d, 0x%x, %u): errno %d",
                                                 pid_, address, size, err));
  }
}

}  // namespace pystrobe
