#ifndef PYSTROBE_DAEMON_SYMBOLIZER_PROC_MAPS_H_
#define PYSTROBE_DAEMON_SYMBOLIZER_PROC_MAPS_H_

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace pystrobe {

// One executable mapping of a file (or of the vDSO) in a process, from a
// /proc/PID/maps line "start-end perms offset dev inode path".
struct ExecutableMapping {
  uint64_t start = 0;
  uint64_t end = 0;
  uint64_t file_offset = 0;
  uint64_t dev = 0;  // makedev(major, minor) of the file's filesystem.
  uint64_t inode = 0;
  std::string path;  // As the process sees it, without " (deleted)"; or "[vdso]".
  bool deleted = false;

  bool is_vdso() const { return path == "[vdso]"; }
};

// The executable file-backed and vDSO mappings of a maps file, in file order.
// Other pseudo-paths ([stack], anonymous memory) are left out.
std::vector<ExecutableMapping> ParseExecutableMappings(absl::string_view maps);

// Reads and parses /proc/PID/maps. NotFound when the process is gone.
absl::StatusOr<std::vector<ExecutableMapping>> ReadExecutableMappings(uint32_t pid);

// The mapping of `sorted` (by start; with start and end members) that covers
// addr, or null.
template <typename Mapping>
const Mapping* MappingAt(const std::vector<Mapping>& sorted, uint64_t addr) {
  auto it = std::upper_bound(sorted.begin(), sorted.end(), addr,
                             [](uint64_t a, const Mapping& m) { return a < m.start; });
  if (it == sorted.begin()) return nullptr;
  const Mapping& mapping = *std::prev(it);
  return addr < mapping.end ? &mapping : nullptr;
}

// What tells one image of a pid from another: exec replaces the executable
// (dev, inode) and pid reuse changes the start time.
struct ImageIdentity {
  uint64_t start_time = 0;  // /proc/PID/stat field 22, in clock ticks since boot.
  uint64_t exe_dev = 0;
  uint64_t exe_inode = 0;
  uint64_t start_code = 0;  // field 26: where the executable's code was loaded.
  bool operator==(const ImageIdentity&) const = default;
};

// NotFound when the process is gone.
absl::StatusOr<ImageIdentity> ReadImageIdentity(uint32_t pid);

}  // namespace pystrobe

#endif  // PYSTROBE_DAEMON_SYMBOLIZER_PROC_MAPS_H_
