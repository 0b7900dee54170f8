// PID namespaces: a host pid's pid inside its own namespace (what the
// container's `ps` shows) and which namespace that is.
#ifndef PYSTROBE_DAEMON_CONTAINERS_PID_NAMESPACE_H_
#define PYSTROBE_DAEMON_CONTAINERS_PID_NAMESPACE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "daemon/procfs/paths.h"

namespace pystrobe {

// The pids of the "NSpid:" line of a /proc/PID/status text, outermost (as
// the reader's namespace sees it) first, innermost last. NotFound when there is
// no such line (kernels before 4.1).
absl::StatusOr<std::vector<int32_t>> ParseNsPids(absl::string_view status_text);

struct PidNamespaceInfo {
  int32_t pid = 0;  // as the reader (the daemon) sees it: the host pid when it runs in the host
  std::vector<int32_t> ns_pids;  // NSpid, outermost first; ns_pids.back() is ns_pid
  int32_t ns_pid = 0;            // the pid inside the process's own namespace
  uint64_t pid_ns_inode = 0;     // inode of /proc/PID/ns/pid: the namespace's identity
  // The process lives in a PID namespace nested below the reader's.
  bool in_child_namespace() const { return ns_pids.size() > 1; }
};

// Reads PROC_ROOT/PID/status and PROC_ROOT/PID/ns/pid. NotFound when the
// process is gone. The namespace inode needs ptrace access to the process
// (root, or CAP_SYS_PTRACE); without it pid_ns_inode stays 0.
absl::StatusOr<PidNamespaceInfo> ReadPidNamespaceInfo(
    int32_t pid, const std::string& proc_root = std::string(procfs::kRoot));

// Where a path inside the process's mount namespace (a binary, a library) can be
// read from the daemon: "/proc/PID/root/usr/bin/python3".
std::string PathInProcessRoot(int32_t pid, absl::string_view path,
                              const std::string& proc_root = std::string(procfs::kRoot));

}  // namespace pystrobe

#endif  // PYSTROBE_DAEMON_CONTAINERS_PID_NAMESPACE_H_
