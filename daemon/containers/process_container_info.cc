#include "daemon/containers/process_container_info.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace pystrobe {

absl::StatusOr<ProcessContainerInfo> ReadProcessContainerInfo(int32_t pid,
                                                              const std::string& proc_root) {
  std::string cgroup_file = absl::StrCat(proc_root, "/", pid, "/cgroup");
  std::ifstream in(cgroup_file);
  if (!in) {
    int err = errno;
    std::string message = absl::StrCat("cannot read ", cgroup_file, ": ", strerror(err));
    return err == ENOENT || err == ESRCH ? absl::NotFoundError(message)
                                         : absl::FailedPreconditionError(message);
  }
  std::stringstream text;
  text << in.rdbuf();
  std::vector<ProcCgroupEntry> entries = ParseProcCgroup(text.str());

  ProcessContainerInfo info;
  info.pid = pid;
  info.cgroup_path = UnifiedCgroupPath(entries).value_or("");
  info.container = ContainerInfoFromProcCgroup(entries);
  absl::StatusOr<PidNamespaceInfo> ns = ReadPidNamespaceInfo(pid, proc_root);
  if (!ns.ok()) return ns.status();
  info.pid_namespace = std::move(*ns);
  info.root = PathInProcessRoot(pid, "/", proc_root);
  info.root.pop_back();  // "/proc/PID/root", without the trailing slash
  return info;
}

}  // namespace pystrobe
