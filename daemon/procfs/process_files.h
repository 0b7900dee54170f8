#ifndef PYSTROBE_DAEMON_PROCFS_PROCESS_FILES_H_
#define PYSTROBE_DAEMON_PROCFS_PROCESS_FILES_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace pystrobe::procfs {

// A process's or thread's name from its comm file (PidPath(pid, "comm"),
// TaskPath(pid, tid, "comm")), the kernel's newline and trailing blanks
// removed. "" when it cannot be read: the process has exited, as it may at
// any time.
std::string ReadComm(const std::string& path);

// The value of one "Name:\tvalue" line of a status file (VmRSS, NSpid, Tgid),
// blanks around it removed; null when there is no such line (a kernel
// thread has no VmRSS, a zombie no memory at all).
std::optional<absl::string_view> StatusField(absl::string_view status, absl::string_view name);

// Where a symbolic link points (PidPath(pid, "exe"), "cwd", SelfFdPath(fd)).
// NotFound when the process is gone; a kernel thread's exe is NotFound too.
absl::StatusOr<std::string> ReadLink(const std::string& path);

// The pids of the processes alive now, from the names in /proc.
std::vector<uint32_t> ReadPids();

// The ids of the process's threads, from the names in PidPath(pid, "task");
// empty when the process is gone.
std::vector<int32_t> ReadTaskIds(const absl::AlphaNum& pid);

}  // namespace pystrobe::procfs

#endif  // PYSTROBE_DAEMON_PROCFS_PROCESS_FILES_H_
