// How `--allocations` reaches a target's allocator, shared by `record` and
// `stat`: a command pystrobe starts samples in its own process through the
// preloaded library (alloc_preload.h); a running process, or a command the
// library cannot be loaded into, through uprobes on its allocator.
#ifndef PYSTROBE_DAEMON_CLI_ALLOCATION_ROUTE_H_
#define PYSTROBE_DAEMON_CLI_ALLOCATION_ROUTE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
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
