#ifndef PYSTROBE_DAEMON_PROCFS_PATHS_H_
#define PYSTROBE_DAEMON_PROCFS_PATHS_H_

#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace pystrobe::procfs {

// Where processes are found; tests pass a fake tree where a function takes a root.
inline constexpr absl::string_view kRoot = "/proc";

// "/proc/NAME": a system-wide file ("kallsyms") or one of ours ("self/stat").
std::string Path(absl::string_view name);

// "ROOT/PID", or "ROOT/PID/NAME" ("maps", "task/12/comm"). `pid` is a number
// or "self".
std::string PidPath(const absl::AlphaNum& pid, absl::string_view name = "",
                    absl::string_view root = kRoot);

// "/proc/PID/task/TID/NAME": one thread's file.
std::string TaskPath(const absl::AlphaNum& pid, const absl::AlphaNum& tid, absl::string_view name);

// Where a path inside the process's mount namespace (a binary, a library) can
// be read from here: "ROOT/PID/root/usr/bin/python3". A relative path is
// taken from the process's root.
std::string RootPath(const absl::AlphaNum& pid, absl::string_view path,
                     absl::string_view root = kRoot);

// The path under which this process can open the file that process `pid`
// maps at `path`, as its maps file names it: through the process's root (a
// container's mount namespace has files of its own at the path), or the name
// itself where that finds nothing, since maps names files from the reader's
// root: a chrooted process's files already carry the chroot.
std::string MappedFilePath(const absl::AlphaNum& pid, absl::string_view path);

// "ROOT/PID/map_files/START-END": the file of one mapping, even one deleted or
// replaced on disk since.
std::string MapFilesPath(const absl::AlphaNum& pid, uint64_t start, uint64_t end,
                         absl::string_view root = kRoot);

// "/proc/self/fd/FD": what one of our own descriptors refers to.
std::string SelfFdPath(int fd);

}  // namespace pystrobe::procfs

#endif  // PYSTROBE_DAEMON_PROCFS_PATHS_H_
