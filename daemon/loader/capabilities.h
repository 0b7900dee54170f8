// Checks that the process holds the capabilities profiling needs, so a
// missing one is reported by name before anything is loaded.
#ifndef PYSTROBE_DAEMON_LOADER_CAPABILITIES_H_
#define PYSTROBE_DAEMON_LOADER_CAPABILITIES_H_

#include <cstdint>

#include "absl/status/status.h"

namespace pystrobe {

// The effective capability set of a process, as capget(2) reports it.
class CapabilitySet {
 public:
  // The calling process's effective set.
  static CapabilitySet OfThisProcess();
  explicit CapabilitySet(uint64_t effective) : effective_(effective) {}

  bool Has(int capability) const {
    return capability >= 0 && capability < 64 && ((effective_ >> capability) & 1) != 0;
  }

 private:
  uint64_t effective_;
};

// OK when `caps` can load BPF programs and open system-wide perf events
// (CAP_BPF and CAP_PERFMON, or CAP_SYS_ADMIN which implies both). Otherwise a
// PermissionDenied error naming the first missing capability and how to get it.
absl::Status CheckProfilingCapabilities(const CapabilitySet& caps);

}  // namespace pystrobe

#endif  // PYSTROBE_DAEMON_LOADER_CAPABILITIES_H_
