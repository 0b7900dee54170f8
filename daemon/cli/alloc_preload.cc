#include "daemon/cli/alloc_preload.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "daemon/elf/elf_file.h"

namespace pystrobe {

absl::StatusOr<std::string> FindAllocationLibrary(const std::string& self) {
  std::error_code error;
  std::filesystem::path binary = std::filesystem::canonical(self, error);
  if (error) {
    return absl::NotFoundError(absl::StrCat("cannot resolve ", self, ": ", error.message()));
  }
  const std::filesystem::path dir = binary.parent_path();
  const std::filesystem::path candidates[] = {
      dir / kAllocationLibraryName,
      dir.parent_path() / "lib" / "pystrobe" / kAllocationLibraryName,
  };
  for (const std::filesystem::path& candidate : candidates) {
    if (access(candidate.c_str(), R_OK) == 0) return candidate.string();
  }
  return absl::NotFoundError(absl::StrCat("no ", kAllocationLibraryName, " in ", dir.string(),
                                          " or ", candidates[1].parent_path().string()));
}

absl::StatusOr<std::string> ResolveCommand(const std::string& command, const std::string& path) {
  if (command.find('/') != std::string::npos) {
    if (access(command.c_str(), X_OK) == 0) return command;
    return absl::NotFoundError(absl::StrCat(command, ": ", std::strerror(errno)));
  }
  for (absl::string_view dir : absl::StrSplit(path, ':')) {
    std::string candidate = absl::StrCat(dir.empty() ? "." : dir, "/", command);
    struct stat file = {};
    if (stat(candidate.c_str(), &file) == 0 && S_ISREG(file.st_mode) &&
        access(candidate.c_str(), X_OK) == 0) {
      return candidate;
    }
  }
  return absl::NotFoundError(absl::StrCat(command, " is not in PATH"));
}

namespace {

bool IsScript(const std::string& program) {
  std::ifstream file(program, std::ios::binary);
  char magic[2] = {};
  return file.read(magic, 2) && magic[0] == '#' && magic[1] == '!';
}

}  // namespace

bool IsStaticExecutable(const std::string& program) {
  absl::StatusOr<ElfFile> elf = ElfFile::Open(program);
  return elf.ok() && elf->FindSection(".interp") == nullptr;
}

absl::Status CheckPreloadable(const std::string& program) {
  struct stat file = {};
  if (stat(program.c_str(), &file) != 0) {
    return absl::NotFoundError(absl::StrCat(program, ": ", std::strerror(errno)));
  }
  if ((file.st_mode & (S_ISUID | S_ISGID)) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat(program, " is set-user-ID or set-group-ID: the loader ignores LD_PRELOAD"));
  }
  if (IsScript(program)) return absl::OkStatus();
  absl::StatusOr<ElfFile> elf = ElfFile::Open(program);
  if (!elf.ok()) {
    return absl::FailedPreconditionError(absl::StrCat(
        program, " is neither a script nor an ELF executable we read: ", elf.status().message()));
  }
  if (elf->FindSection(".interp") == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat(program, " is statically linked: no loader to preload a library"));
  }
  return absl::OkStatus();
}

std::vector<std::string> AllocationPreloadEnvironment(const std::string& library,
                                                      uint32_t sample_bytes, const char* existing) {
  std::string preload = absl::StrCat("LD_PRELOAD=", library);
  if (existing != nullptr && *existing != '\0') absl::StrAppend(&preload, ":", existing);
  return {preload, absl::StrCat("PYSTROBE_ALLOC_SAMPLE_BYTES=", sample_bytes)};
}

}  // namespace pystrobe
