#include "daemon/containers/process_container_info.h"

#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "daemon/procfs/paths.h"
#include "daemon/procfs/small_file.h"

namespace pystrobe {

absl::StatusOr<ProcessContainerInfo> ReadProcessContainerInfo(int32_t pid,
                                                              const std::string& proc_root) {
  absl::StatusOr<std::string> text =
      procfs::ReadSmallFile(procfs::PidPath(pid, "cgroup", proc_root));
  if (!text.ok()) return text.status();
  std::vector<ProcCgroupEntry> entries = ParseProcCgroup(*text);

  ProcessContainerInfo info;
  info.pid = pid;
  info.cgroup_path = UnifiedCgroupPath(entries).value_or("");
  info.container = ContainerInfoFromProcCgroup(entries);
  absl::StatusOr<PidNamespaceInfo> ns = ReadPidNamespaceInfo(pid, proc_root);
  if (!ns.ok()) return ns.status();
  info.pid_namespace = std::move(*ns);
  info.root = procfs::RootPath(pid, "", proc_root);
  info.root.pop_back();  // without the trailing slash
  return info;
}

}  // namespace pystrobe
