// Everything the daemon labels a process with about where it runs: its cgroup,
// its container (or systemd unit, or pod), and its pids inside and outside its
// PID namespace.
#ifndef PYSTROBE_DAEMON_CONTAINERS_PROCESS_CONTAINER_INFO_H_
#define PYSTROBE_DAEMON_CONTAINERS_PROCESS_CONTAINER_INFO_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "daemon/containers/container_id.h"
#include "daemon/containers/pid_namespace.h"
#include "daemon/procfs/paths.h"

namespace pystrobe {

struct ProcessContainerInfo {
  int32_t pid = 0;  // as the daemon sees it (the host pid)
  // The cgroup v2 path ("0::" line), relative to the cgroup2 mount; empty on a
  // host without cgroup v2. Equal to what CgroupResolver::PathForId returns
  // for the sample's cgroup id.
  std::string cgroup_path;
  ContainerInfo container;  // from the v2 path, else from the v1 lines
  PidNamespaceInfo pid_namespace;
  std::string root;  // PROC_ROOT/PID/root, no trailing slash: read its binaries through it
};

// Reads PROC_ROOT/PID/cgroup, /status and /ns/pid. NotFound when the process is
// gone (it may exit between reads: callers treat NotFound as "exited").
absl::StatusOr<ProcessContainerInfo> ReadProcessContainerInfo(
    int32_t pid, const std::string& proc_root = std::string(procfs::kRoot));

}  // namespace pystrobe

#endif  // PYSTROBE_DAEMON_CONTAINERS_PROCESS_CONTAINER_INFO_H_
