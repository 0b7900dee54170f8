#include "daemon/containers/pid_namespace.h"

#include <sys/stat.h>

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "daemon/procfs/paths.h"
#include "daemon/procfs/process_files.h"
#include "daemon/procfs/small_file.h"

namespace pystrobe {

absl::StatusOr<std::vector<int32_t>> ParseNsPids(absl::string_view status_text) {
  std::optional<absl::string_view> line = procfs::StatusField(status_text, "NSpid");
  if (!line) return absl::NotFoundError("no NSpid line in /proc/PID/status");
  std::vector<int32_t> pids;
  for (absl::string_view field : absl::StrSplit(*line, absl::ByAnyChar(" \t"), absl::SkipEmpty())) {
    int32_t pid;
    if (!absl::SimpleAtoi(field, &pid) || pid <= 0) {
      return absl::InvalidArgumentError(absl::StrCat("bad NSpid line: \"", *line, "\""));
    }
    pids.push_back(pid);
  }
  if (pids.empty()) return absl::InvalidArgumentError("empty NSpid line");
  return pids;
}

absl::StatusOr<PidNamespaceInfo> ReadPidNamespaceInfo(int32_t pid, const std::string& proc_root) {
  std::string status_path = procfs::PidPath(pid, "status", proc_root);
  absl::StatusOr<std::string> text = procfs::ReadSmallFile(status_path);
  if (!text.ok()) return text.status();
  absl::StatusOr<std::vector<int32_t>> ns_pids = ParseNsPids(*text);
  if (!ns_pids.ok()) {
    return absl::Status(ns_pids.status().code(),
                        absl::StrCat(status_path, ": ", ns_pids.status().message()));
  }
  PidNamespaceInfo info;
  info.pid = pid;
  info.ns_pids = std::move(*ns_pids);
  info.ns_pid = info.ns_pids.back();
  struct stat st;
  if (stat(procfs::PidPath(pid, "ns/pid", proc_root).c_str(), &st) == 0) {
    info.pid_ns_inode = st.st_ino;
  }
  return info;
}

std::string PathInProcessRoot(int32_t pid, absl::string_view path, const std::string& proc_root) {
  return procfs::RootPath(pid, path, proc_root);
}

}  // namespace pystrobe
