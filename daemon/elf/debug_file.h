// Where the separate debug file of an ELF file is: distributions strip
// binaries and ship their full symbol tables and .debug_frame apart
// (Debian's libc6-dbg, *-dbgsym), found by build id or by .gnu_debuglink as
// GDB finds them.
#ifndef PYSTROBE_DAEMON_ELF_DEBUG_FILE_H_
#define PYSTROBE_DAEMON_ELF_DEBUG_FILE_H_

#include <optional>
#include <string>
#include <vector>

#include "daemon/elf/elf_file.h"

namespace pystrobe {

struct DebugFileSearch {
  // Folders that hold .build-id/XX/REST.debug trees, and mirror the binary's
  // folder for .gnu_debuglink names (DIR/usr/bin/NAME for /usr/bin/...).
  std::vector<std::string> directories = {"/usr/lib/debug"};
  // Take a file found by .gnu_debuglink only when its CRC-32 is the link's:
  // a stale debug file of another build would give wrong names. Reads the
  // whole candidate; a file found by build id is taken as is.
  bool check_debuglink_crc = false;
};

// The separate debug file of `file`, opened at `path`: by build id in each
// directory, then by .gnu_debuglink next to the file, in its .debug folder,
// and in each directory (the file itself is never its own debug file).
// nullopt when none is there.
std::optional<std::string> FindDebugFile(const std::string& path, const ElfFile& file,
                                         const DebugFileSearch& search = {});

}  // namespace pystrobe

#endif  // PYSTROBE_DAEMON_ELF_DEBUG_FILE_H_
