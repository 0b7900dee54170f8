#ifndef PYSTROBE_DAEMON_PROCFS_SMALL_FILE_H_
#define PYSTROBE_DAEMON_PROCFS_SMALL_FILE_H_

#include <cstddef>
#include <string>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace pystrobe::procfs {

// Far above any /proc file we read (a maps file of 65530 mappings is ~7 MB),
// low enough that a file that never ends (/dev/zero) cannot fill memory.
inline constexpr size_t kDefaultMaxBytes = size_t{64} << 20;

struct ReadOptions {
  // More than this is an error ("larger than N bytes"), unless `truncate`.
  size_t max_bytes = kDefaultMaxBytes;
  // Return the first max_bytes bytes instead of failing on a longer file.
  bool truncate = false;
  // Refuse what is not a regular file ("not a file"): a directory, a device,
  // a FIFO (opened without blocking, so that one without a writer cannot hang).
  bool regular_file_only = false;
};

// The whole of a small file (a /proc file, a configuration file, a secret),
// read with plain read(2) to its end: /proc files report size 0, so their
// size says nothing, and no stream buffer copies the text twice.
//
// Errors name the path, "cannot read PATH: <strerror>": NotFound for ENOENT
// and ESRCH (a process that exited before or during the read: a normal case
// for callers, never a crash), PermissionDenied for EACCES and EPERM,
// FailedPrecondition otherwise.
absl::StatusOr<std::string> ReadSmallFile(const std::string& path, const ReadOptions& options = {});

// Hands each line of `path` (without its newline) to `line`, reading a buffer
// at a time: for files of megabytes (/proc/kallsyms) that are wanted parsed,
// not whole. A line longer than 64 KiB comes in 64 KiB pieces.
absl::Status ForEachLine(const std::string& path,
                         absl::FunctionRef<void(absl::string_view line)> line);

// The Status ReadSmallFile returns for errno `err` on `path`; for callers that
// open or stat /proc files themselves and want the same codes and words.
absl::Status FileError(absl::string_view path, int err);

}  // namespace pystrobe::procfs

#endif  // PYSTROBE_DAEMON_PROCFS_SMALL_FILE_H_
