// How `record --allocations -- CMD` samples: in the process, through the
// library pystrobe ships (preload/alloc_sampler.c, LD_PRELOAD'ed into CMD),
// or, where that cannot work, through uprobes on the allocator.
#ifndef PYSTROBE_DAEMON_CLI_ALLOC_PRELOAD_H_
#define PYSTROBE_DAEMON_CLI_ALLOC_PRELOAD_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "daemon/procfs/paths.h"

namespace pystrobe {

inline constexpr char kAllocationLibraryName[] = "libpystrobe-alloc.so";

// The allocation sampler that goes with the binary at `self` (a path, by
// default this process's executable): beside it (a build tree) or in
// ../lib/pystrobe/ (installed). NotFound names the places looked at.
absl::StatusOr<std::string> FindAllocationLibrary(const std::string& self = procfs::PidPath("self",
                                                                                            "exe"));

// The file `command` runs, as execvp finds it (PATH searched when it has no
// slash). NotFound when there is none.
absl::StatusOr<std::string> ResolveCommand(const std::string& command, const std::string& path);

// Whether the dynamic loader will load a preloaded library into `program`
// (a path): OK for a dynamically linked executable or a script (#!);
// FailedPrecondition, saying why, for a statically linked one (no loader)
// and a set-user-ID or set-group-ID one (the loader ignores LD_PRELOAD).
absl::Status CheckPreloadable(const std::string& program);

// True when `program` is an ELF executable without a dynamic loader: its
// allocator is its own, probed in the file itself.
bool IsStaticExecutable(const std::string& program);

// The environment entries that make a command sample its allocations:
// LD_PRELOAD with `library` first (before `existing`, the LD_PRELOAD already
// set, if any) and the mean bytes between samples.
std::vector<std::string> AllocationPreloadEnvironment(const std::string& library,
                                                      uint32_t sample_bytes, const char* existing);

}  // namespace pystrobe

#endif  // PYSTROBE_DAEMON_CLI_ALLOC_PRELOAD_H_
