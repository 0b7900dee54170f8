#include "daemon/loader/capabilities.h"

#include <linux/capability.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"

namespace pystrobe {
namespace {

// Older libc headers may not know the capabilities added in Linux 5.8.
constexpr int kCapSysAdmin = 21;
constexpr int kCapPerfmon = 38;
constexpr int kCapBpf = 39;

constexpr char kHowToGrant[] =
    "run pystrobe as root, or grant it with "
    "`setcap cap_bpf,cap_perfmon,cap_sys_ptrace,cap_dac_read_search+ep pystrobe`";

}  // namespace

CapabilitySet CapabilitySet::OfThisProcess() {
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2] = {};
  if (syscall(SYS_capget, &header, data) != 0) return CapabilitySet(0);
  return CapabilitySet(static_cast<uint64_t>(data[1].effective) << 32 | data[0].effective);
}

absl::Status CheckProfilingCapabilities(const CapabilitySet& caps) {
  if (caps.Has(kCapSysAdmin)) return absl::OkStatus();
  if (!caps.Has(kCapBpf)) {
    return absl::PermissionDeniedError(
        absl::StrCat("missing capability CAP_BPF (needed to load the sampler): ", kHowToGrant));
  }
  if (!caps.Has(kCapPerfmon)) {
    return absl::PermissionDeniedError(absl::StrCat(
        "missing capability CAP_PERFMON (needed for system-wide cpu-clock events): ", kHowToGrant));
  }
  return absl::OkStatus();
}

}  // namespace pystrobe
