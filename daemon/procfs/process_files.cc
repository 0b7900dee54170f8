#include "daemon/procfs/process_files.h"

#include <dirent.h>
#include <unistd.h>

#include <cerrno>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "daemon/procfs/paths.h"
#include "daemon/procfs/small_file.h"

namespace pystrobe::procfs {

std::string ReadComm(const std::string& path) {
  // TASK_COMM_LEN is 16; 64 leaves room for a kernel thread's longer name.
  absl::StatusOr<std::string> text = ReadSmallFile(path, {.max_bytes = 64, .truncate = true});
  if (!text.ok()) return "";
  return std::string(absl::StripTrailingAsciiWhitespace(*text));
}

std::optional<absl::string_view> StatusField(absl::string_view status, absl::string_view name) {
  for (absl::string_view line : absl::StrSplit(status, '\n')) {
    if (!absl::ConsumePrefix(&line, name) || !absl::ConsumePrefix(&line, ":")) continue;
    return absl::StripAsciiWhitespace(line);
  }
  return std::nullopt;
}

absl::StatusOr<std::string> ReadLink(const std::string& path) {
  char target[4096];
  ssize_t n = readlink(path.c_str(), target, sizeof(target));
  if (n < 0) return FileError(path, errno);
  return std::string(target, static_cast<size_t>(n));
}

std::vector<uint32_t> ReadPids() {
  std::vector<uint32_t> pids;
  DIR* dir = opendir(std::string(kRoot).c_str());
  if (dir == nullptr) return pids;
  while (const dirent* entry = readdir(dir)) {
    uint32_t pid = 0;
    if (absl::SimpleAtoi(entry->d_name, &pid) && pid > 0) pids.push_back(pid);  // not "self"
  }
  closedir(dir);
  return pids;
}

std::vector<int32_t> ReadTaskIds(const absl::AlphaNum& pid) {
  std::vector<int32_t> tids;
  DIR* dir = opendir(PidPath(pid, "task").c_str());
  if (dir == nullptr) return tids;
  while (const dirent* entry = readdir(dir)) {
    int32_t tid = 0;
    if (absl::SimpleAtoi(entry->d_name, &tid) && tid > 0) tids.push_back(tid);  // not "." or ".."
  }
  closedir(dir);
  return tids;
}

}  // namespace pystrobe::procfs
