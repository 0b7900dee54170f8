#ifndef PYSTROBE_DAEMON_LOADER_KERNEL_BTF_H_
#define PYSTROBE_DAEMON_LOADER_KERNEL_BTF_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace pystrobe {

// The parameters of a raw tracepoint as the kernel's BTF declares them
// (btf_trace_<name>: a typedef of a pointer to a function prototype whose
// first parameter is the context).
struct RawTracepointParams {
  int count = 0;                  // the context included
  bool first_is_pointer = false;  // the first after the context
};

// What the kernel's BTF (normally /sys/kernel/btf/vmlinux) declares for each
// of `names` (tracepoints, without "btf_trace_"); a name it does not declare
// is left out. The file is scanned a buffer at a time, not parsed whole: it is
// megabytes, asked about before every load, and each page a start-up first
// touches costs a fault (tens of microseconds on some VMs). Fails, naming the
// file, when it cannot be read or is not BTF this scanner understands.
absl::StatusOr<std::map<std::string, RawTracepointParams>> ReadRawTracepointParams(
    const std::string& btf_path, const std::vector<std::string>& names);

}  // namespace pystrobe

#endif  // PYSTROBE_DAEMON_LOADER_KERNEL_BTF_H_
