#include "daemon/containers/pid_namespace.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace pystrobe {

absl::StatusOr<std::vector<int32_t>> ParseNsPids(absl::string_view status_text) {
  for (absl::string_view line : absl::StrSplit(status_text, '\n')) {
    if (!absl::ConsumePrefix(&line, "NSpid:")) continue;
    std::vector<int32_t> pids;
    for (absl::string_view field :
         absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty())) {
      int32_t pid;
      if (!absl::SimpleAtoi(field, &pid) || pid <= 0) {
        return absl::InvalidArgumentError(absl::StrCat("bad NSpid line: \"", line, "\""));
      }
      pids.push_back(pid);
    }
    if (pids.empty()) return absl::InvalidArgumentError("empty NSpid line");
    return pids;
  }
  return absl::NotFoundError("no NSpid line in /proc/PID/status");
}

absl::StatusOr<PidNamespaceInfo> ReadPidNamespaceInfo(int32_t pid, const std::string& proc_root) {
  std::string status_path = absl::StrCat(proc_root, "/", pid, "/status");
  std::ifstream in(status_path);
  if (!in) {
    int err = errno;
    std::string message = absl::StrCat("cannot read ", status_path, ": ", strerror(err));
    return err == ENOENT || err == ESRCH ? absl::NotFoundError(message)
                                         : absl::FailedPreconditionError(message);
  }
  std::stringstream text;
  text << in.rdbuf();
  absl::StatusOr<std::vector<int32_t>> ns_pids = ParseNsPids(text.str());
  if (!ns_pids.ok()) {
    return absl::Status(ns_pids.status().code(),
                        absl::StrCat(status_path, ": ", ns_pids.status().message()));
  }
  PidNamespaceInfo info;
  info.pid = pid;
  info.ns_pids = std::move(*ns_pids);
  info.ns_pid = info.ns_pids.back();
  struct stat st;
  if (stat(absl::StrCat(proc_root, "/", pid, "/ns/pid").c_str(), &st) == 0) {
    info.pid_ns_inode = st.st_ino;
  }
  return info;
}

std::string PathInProcessRoot(int32_t pid, absl::string_view path, const std::string& proc_root) {
  if (!absl::StartsWith(path, "/")) return absl::StrCat(proc_root, "/", pid, "/root/", path);
  return absl::StrCat(proc_root, "/", pid, "/root", path);
}

}  // namespace pystrobe
