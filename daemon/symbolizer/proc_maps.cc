#include "daemon/symbolizer/proc_maps.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace pystrobe {
namespace {

absl::Status ProcError(int error, uint32_t pid, absl::string_view what) {
  if (error == ENOENT || error == ESRCH) {
    return absl::NotFoundError(absl::StrCat("process ", pid, " is gone (", what, ")"));
  }
  return absl::ErrnoToStatus(error, absl::StrCat("process ", pid, ": ", what));
}

// Splits off the text up to the next space and skips the spaces after it.
absl::string_view NextField(absl::string_view& line) {
  size_t space = line.find(' ');
  absl::string_view field = line.substr(0, space);
  line = space == absl::string_view::npos ? absl::string_view()
                                          : absl::StripLeadingAsciiWhitespace(line.substr(space));
  return field;
}

bool ParseLine(absl::string_view line, ExecutableMapping& mapping) {
  absl::string_view range = NextField(line);
  absl::string_view perms = NextField(line);
  absl::string_view offset = NextField(line);
  absl::string_view dev = NextField(line);
  absl::string_view inode = NextField(line);
  absl::string_view path = line;  // The rest: paths may contain spaces.
  if (perms.size() != 4 || perms[2] != 'x') return false;
  if (!absl::StartsWith(path, "/") && path != "[vdso]") return false;
  size_t dash = range.find('-');
  size_t colon = dev.find(':');
  uint32_t major = 0;
  uint32_t minor = 0;
  if (dash == absl::string_view::npos || colon == absl::string_view::npos ||
      !absl::SimpleHexAtoi(range.substr(0, dash), &mapping.start) ||
      !absl::SimpleHexAtoi(range.substr(dash + 1), &mapping.end) ||
      !absl::SimpleHexAtoi(offset, &mapping.file_offset) ||
      !absl::SimpleHexAtoi(dev.substr(0, colon), &major) ||
      !absl::SimpleHexAtoi(dev.substr(colon + 1), &minor) ||
      !absl::SimpleAtoi(inode, &mapping.inode)) {
    return false;
  }
  mapping.dev = makedev(major, minor);
  mapping.deleted = absl::ConsumeSuffix(&path, " (deleted)");
  mapping.path = std::string(path);
  return true;
}

}  // namespace

std::vector<ExecutableMapping> ParseExecutableMappings(absl::string_view maps) {
  std::vector<ExecutableMapping> mappings;
  for (absl::string_view line : absl::StrSplit(maps, '\n', absl::SkipEmpty())) {
    ExecutableMapping mapping;
    if (ParseLine(line, mapping)) mappings.push_back(std::move(mapping));
  }
  return mappings;
}

absl::StatusOr<std::vector<ExecutableMapping>> ReadExecutableMappings(uint32_t pid) {
  absl::StatusOr<std::string> maps = ReadProcFile(pid, "maps");
  if (!maps.ok()) return maps.status();
  return ParseExecutableMappings(*maps);
}

absl::StatusOr<std::string> ReadProcFile(uint32_t pid, absl::string_view name) {
  std::string path = absl::StrCat("/proc/", pid, "/", name);
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ProcError(errno, pid, absl::StrCat("open ", path));
  std::string text;
  size_t size = 0;
  for (;;) {
    text.resize(size + 16384);
    ssize_t n = read(fd, text.data() + size, text.size() - size);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int error = errno;
      close(fd);
      return ProcError(error, pid, absl::StrCat("read ", path));
    }
    if (n == 0) break;
    size += static_cast<size_t>(n);
  }
  close(fd);
  text.resize(size);
  return text;
}

absl::StatusOr<ImageIdentity> ReadImageIdentity(uint32_t pid) {
  ImageIdentity identity;
  struct stat exe;
  std::string exe_path = absl::StrCat("/proc/", pid, "/exe");
  if (stat(exe_path.c_str(), &exe) != 0) {
    return ProcError(errno, pid, absl::StrCat("stat ", exe_path));
  }
  identity.exe_dev = exe.st_dev;
  identity.exe_inode = exe.st_ino;

  absl::StatusOr<std::string> stat_text = ReadProcFile(pid, "stat");
  if (!stat_text.ok()) return stat_text.status();
  // The command name may contain spaces and parentheses; fields resume after
  // the last ')'. starttime is field 22, the 20th after it; startcode 26.
  size_t paren = stat_text->rfind(')');
  std::vector<absl::string_view> fields;
  if (paren != std::string::npos) {
    fields =
        absl::StrSplit(absl::string_view(*stat_text).substr(paren + 1), ' ', absl::SkipEmpty());
  }
  if (fields.size() < 24 || !absl::SimpleAtoi(fields[19], &identity.start_time) ||
      !absl::SimpleAtoi(fields[23], &identity.start_code)) {
    return absl::InternalError(absl::StrCat("process ", pid, ": unexpected /proc/pid/stat"));
  }
  return identity;
}

}  // namespace pystrobe
