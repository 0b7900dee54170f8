// What binutils says about an ELF file, for tests to compare pystrobe's own
// readers against: `readelf -n` (build id), `readelf -lW` (segments), `nm`.
#ifndef PYSTROBE_TESTS_UNIT_ELF_TOOLS_H_
#define PYSTROBE_TESTS_UNIT_ELF_TOOLS_H_

#include <stdlib.h>

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "daemon/symbolizer/native_symbolizer.h"

namespace pystrobe {

// The canonical path, as /proc/PID/maps names a file; `path` if none.
inline std::string RealPath(const std::string& path) {
  std::unique_ptr<char, decltype(&free)> real(realpath(path.c_str(), nullptr), &free);
  return real != nullptr ? std::string(real.get()) : path;
}

// The standard output of `command` (run by the shell).
inline std::string CommandOutput(const std::string& command) {
  std::string out;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return out;
  char buffer[4096];
  for (size_t n; (n = fread(buffer, 1, sizeof(buffer), pipe)) > 0;) out.append(buffer, n);
  pclose(pipe);
  return out;
}

// The build id `readelf -n` prints; empty when it prints none.
inline std::string ReadelfBuildId(const std::string& path) {
  for (absl::string_view line :
       absl::StrSplit(CommandOutput("readelf -n '" + path + "' 2>/dev/null"), '\n')) {
    line = absl::StripAsciiWhitespace(line);
    if (absl::ConsumePrefix(&line, "Build ID: ")) return std::string(line);
  }
  return "";
}

// The LOAD lines of `readelf -lW` whose flags have E.
inline std::vector<CodeSegment> ReadelfCodeSegments(const std::string& path) {
  std::vector<CodeSegment> segments;
  for (absl::string_view line :
       absl::StrSplit(CommandOutput("readelf -lW '" + path + "' 2>/dev/null"), '\n')) {
    // LOAD Offset VirtAddr PhysAddr FileSiz MemSiz Flg... Align
    std::vector<absl::string_view> fields = absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (fields.size() < 8 || fields[0] != "LOAD") continue;
    bool executable = false;
    for (size_t i = 6; i + 1 < fields.size(); ++i) executable |= absl::StrContains(fields[i], 'E');
    CodeSegment segment;
    if (!executable || !absl::SimpleHexAtoi(fields[1], &segment.file_offset) ||
        !absl::SimpleHexAtoi(fields[2], &segment.vaddr) ||
        !absl::SimpleHexAtoi(fields[5], &segment.size)) {
      continue;
    }
    segments.push_back(segment);
  }
  return segments;
}

// The value `nm` gives `symbol` in the file's symbol table; 0 when absent.
inline uint64_t NmAddress(const std::string& path, const std::string& symbol) {
  for (absl::string_view line : absl::StrSplit(CommandOutput("nm '" + path + "'"), '\n')) {
    std::vector<absl::string_view> fields = absl::StrSplit(line, ' ', absl::SkipEmpty());
    uint64_t value = 0;
    if (fields.size() == 3 && fields[2] == symbol && absl::SimpleHexAtoi(fields[0], &value)) {
      return value;
    }
  }
  return 0;
}

}  // namespace pystrobe

#endif  // PYSTROBE_TESTS_UNIT_ELF_TOOLS_H_
