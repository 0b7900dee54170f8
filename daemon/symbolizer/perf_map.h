// Names of JIT-compiled code from the perf map a process writes
// (/tmp/perf-PID.map: "START SIZE name" per line, hex, as perf reads it):
// CPython 3.12's -X perf trampolines, numba/LLVM, Node, JVM agents.
#ifndef PYSTROBE_DAEMON_SYMBOLIZER_PERF_MAP_H_
#define PYSTROBE_DAEMON_SYMBOLIZER_PERF_MAP_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace pystrobe {

class PerfMap {
 public:
  // Parses a perf map's text; malformed lines are skipped. A later entry
  // for the same start replaces an earlier one (code regenerated in place).
  static PerfMap Parse(absl::string_view text);

  // The name of the code at `address`, or nullptr.
  const std::string* Find(uint64_t address) const;
  size_t size() const { return entries_.size(); }

 private:
  struct Entry {
    uint64_t start = 0, end = 0;
    std::string name;
  };
  std::vector<Entry> entries_;  // sorted by start
};

}  // namespace pystrobe

#endif  // PYSTROBE_DAEMON_SYMBOLIZER_PERF_MAP_H_
