// Turns aggregated raw stacks into a symbolized Profile: a process frame, an
// optional thread frame, then native frames from the outermost caller down to
// the kernel frames where the sample was taken.
#ifndef PYSTROBE_DAEMON_PROFILE_BUILDER_H_
#define PYSTROBE_DAEMON_PROFILE_BUILDER_H_

#include <cstdint>
#include <string>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "daemon/process_table.h"
#include "daemon/stack_aggregator.h"
#include "daemon/symbolizer/kernel_symbolizer.h"
#include "exporters/profile.h"

namespace pystrobe {

struct ProfileBuilderOptions {
  bool threads = false;  // add "<thread name> tid=<tid>" under the process
};

class ProfileBuilder {
 public:
  // `processes` and `kernel` must outlive the builder; `kernel` may be null
  // (kernel frames then read "0x..._[k]").
  ProfileBuilder(ProcessTable* processes, const KernelSymbolizer* kernel,
                 ProfileBuilderOptions options)
      : processes_(processes), kernel_(kernel), options_(options) {}

  // Adds every stack of `stacks` to `profile`.
  void AddTo(const StackAggregator& stacks, Profile& profile);

 private:
  const std::string& NativeName(const ProcessImage& image, uint64_t address);
  const std::string& KernelName(uint64_t address);

  ProcessTable* processes_;
  const KernelSymbolizer* kernel_;
  ProfileBuilderOptions options_;
  // Names are resolved once per distinct address.
  absl::flat_hash_map<std::pair<ImageId, uint64_t>, std::string> native_names_;
  absl::flat_hash_map<uint64_t, std::string> kernel_names_;
};

}  // namespace pystrobe

#endif  // PYSTROBE_DAEMON_PROFILE_BUILDER_H_
