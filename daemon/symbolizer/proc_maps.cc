#include "daemon/symbolizer/proc_maps.h"

#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <cerrno>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "daemon/procfs/maps.h"
#include "daemon/procfs/paths.h"
#include "daemon/procfs/small_file.h"
#include "daemon/procfs/stat.h"

namespace pystrobe {
namespace {

// procfs's status, said of the process: NotFound says that it is gone.
absl::Status ProcError(uint32_t pid, const absl::Status& status) {
  if (absl::IsNotFound(status)) {
    return absl::NotFoundError(absl::StrCat("process ", pid, " is gone (", status.message(), ")"));
  }
  return absl::Status(status.code(), absl::StrCat("process ", pid, ": ", status.message()));
}

}  // namespace

std::vector<ExecutableMapping> ParseExecutableMappings(absl::string_view maps) {
  std::vector<ExecutableMapping> mappings;
  for (absl::string_view text : absl::StrSplit(maps, '\n', absl::SkipEmpty())) {
    std::optional<procfs::MapsLine> line = procfs::ParseMapsLine(text);
    if (!line || line->perms.size() != 4 || !line->executable()) continue;
    absl::string_view path = line->path;
    if (!absl::StartsWith(path, "/") && path != "[vdso]") continue;
    ExecutableMapping mapping;
    mapping.start = line->start;
    mapping.end = line->end;
    mapping.file_offset = line->offset;
    mapping.dev = makedev(line->dev_major, line->dev_minor);
    mapping.inode = line->inode;
    mapping.deleted = absl::ConsumeSuffix(&path, " (deleted)");
    mapping.path = std::string(path);
    mappings.push_back(std::move(mapping));
  }
  return mappings;
}

absl::StatusOr<std::vector<ExecutableMapping>> ReadExecutableMappings(uint32_t pid) {
  absl::StatusOr<std::string> maps = procfs::ReadSmallFile(procfs::PidPath(pid, "maps"));
  if (!maps.ok()) return ProcError(pid, maps.status());
  return ParseExecutableMappings(*maps);
}

absl::StatusOr<ImageIdentity> ReadImageIdentity(uint32_t pid) {
  ImageIdentity identity;
  struct stat exe;
  std::string exe_path = procfs::PidPath(pid, "exe");
  if (stat(exe_path.c_str(), &exe) != 0) return ProcError(pid, procfs::FileError(exe_path, errno));
  identity.exe_dev = exe.st_dev;
  identity.exe_inode = exe.st_ino;

  absl::StatusOr<procfs::StatLine> stat = procfs::ReadStat(procfs::PidPath(pid, "stat"));
  if (absl::IsNotFound(stat.status())) return ProcError(pid, stat.status());
  std::optional<uint64_t> start_time = stat.ok() ? stat->Number(22) : std::nullopt;
  std::optional<uint64_t> start_code = stat.ok() ? stat->Number(26) : std::nullopt;
  if (!start_time || !start_code) {
    if (!stat.ok() && !absl::IsInvalidArgument(stat.status())) return ProcError(pid, stat.status());
    return absl::InternalError(absl::StrCat("process ", pid, ": unexpected /proc/pid/stat"));
  }
  identity.start_time = *start_time;
  identity.start_code = *start_code;
  return identity;
}

}  // namespace pystrobe
