#ifndef PYSTROBE_DAEMON_PROCFS_MAPS_H_
#define PYSTROBE_DAEMON_PROCFS_MAPS_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/strings/string_view.h"

namespace pystrobe::procfs {

// One line of /proc/PID/maps: "start-end perms offset major:minor inode [path]".
// The views point into the text it was parsed from.
struct MapsLine {
  uint64_t start = 0;
  uint64_t end = 0;
  absl::string_view perms;  // "r-xp"
  uint64_t offset = 0;
  uint32_t dev_major = 0;
  uint32_t dev_minor = 0;
  uint64_t inode = 0;
  // The rest of the line, leading padding removed: paths may hold spaces. ""
  // for anonymous memory, "[vdso]", "[stack]"...; a file replaced or removed
  // since it was mapped ends in " (deleted)".
  absl::string_view path;

  bool executable() const { return perms.size() >= 3 && perms[2] == 'x'; }
};

// Null for a line that is not a maps line.
std::optional<MapsLine> ParseMapsLine(absl::string_view line);

// Every well-formed line of a maps file, in file order; malformed lines are skipped.
std::vector<MapsLine> ParseMaps(absl::string_view text);

}  // namespace pystrobe::procfs

#endif  // PYSTROBE_DAEMON_PROCFS_MAPS_H_
