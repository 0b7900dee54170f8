// How `--allocations` reaches a target's allocator, shared by `record` and
// `stat`: a command pystrobe starts samples in its own process through the
// preloaded library (alloc_preload.h); a running process, or a command the
// library cannot be loaded into, through uprobes on its allocator.
#ifndef PYSTROBE_DAEMON_CLI_ALLOCATION_ROUTE_H_
#define PYSTROBE_DAEMON_CLI_ALLOCATION_ROUTE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "daemon/cli/target_launcher.h"
#include "daemon/loader/bpf_sampler.h"

namespace pystrobe {

struct AllocationRoute {
  std::string library;  // preloaded into the command; empty: uprobes
  // The command's own file, for a statically linked one: its allocator is
  // in it, not in a libc.
  std::string static_program;
  // What the command's environment gets (LD_PRELOAD and the mean), empty
  // for uprobes.
  std::vector<std::string> environment;

  bool in_process() const { return !library.empty(); }
};

// Decides before `command` (empty: none, running processes only) starts,
// and says on stderr why when it falls back to uprobes.
AllocationRoute ChooseAllocationRoute(const std::vector<std::string>& command,
                                      uint32_t sample_bytes);

// The command `record` or `stat` starts, held at the door until sampling is
// ready, and the route its allocations take: chosen before it starts, since a
// preloaded library must be in its environment.
struct HeldCommand {
  AllocationRoute allocation_route;         // the default (none) without --allocations
  std::optional<LaunchedCommand> launched;  // nullopt: no command, running processes only
};

// `allocations`: whether --allocations asked for them. The error is the
// launch's (the fork, or the pipe that holds the child).
absl::StatusOr<HeldCommand> HoldCommand(const std::vector<std::string>& command, bool allocations,
                                        uint32_t alloc_sample_bytes);

// Attaches what `route` needs once the session is started: the library's
// probe functions, or uprobes on the allocator of each of `targets` (a
// command we start runs our C library: it is probed before its exec, unless
// route.static_program is its own allocator), or of every process with
// `all`. Says on stderr what it costs the targets.
absl::Status AttachAllocationRoute(BpfSampler& sampler, const AllocationRoute& route,
                                   const std::vector<uint32_t>& targets, bool all,
                                   uint32_t sample_bytes);

}  // namespace pystrobe

#endif  // PYSTROBE_DAEMON_CLI_ALLOCATION_ROUTE_H_
