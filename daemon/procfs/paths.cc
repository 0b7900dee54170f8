#include "daemon/procfs/paths.h"

#include <unistd.h>

#include "absl/strings/match.h"
#include "absl/strings/str_format.h"

namespace pystrobe::procfs {

std::string Path(absl::string_view name) { return absl::StrCat(kRoot, "/", name); }

std::string PidPath(const absl::AlphaNum& pid, absl::string_view name, absl::string_view root) {
  if (name.empty()) return absl::StrCat(root, "/", pid);
  return absl::StrCat(root, "/", pid, "/", name);
}

std::string TaskPath(const absl::AlphaNum& pid, const absl::AlphaNum& tid, absl::string_view name) {
  return absl::StrCat(kRoot, "/", pid, "/task/", tid, "/", name);
}

std::string RootPath(const absl::AlphaNum& pid, absl::string_view path, absl::string_view root) {
  if (!absl::StartsWith(path, "/")) return absl::StrCat(root, "/", pid, "/root/", path);
  return absl::StrCat(root, "/", pid, "/root", path);
}

std::string MappedFilePath(const absl::AlphaNum& pid, absl::string_view path) {
  std::string in_root = RootPath(pid, path);
  if (access(in_root.c_str(), F_OK) == 0 || access(std::string(path).c_str(), F_OK) != 0) {
    return in_root;
  }
  return std::string(path);
}

std::string MapFilesPath(const absl::AlphaNum& pid, uint64_t start, uint64_t end,
                         absl::string_view root) {
  return absl::StrFormat("%s/%s/map_files/%x-%x", root, pid.Piece(), start, end);
}

std::string SelfFdPath(int fd) { return absl::StrCat(kRoot, "/self/fd/", fd); }

}  // namespace pystrobe::procfs
