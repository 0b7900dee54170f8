#include "daemon/kernel_python_discovery.h"

#include <cstdio>

namespace pystrobe {

absl::StatusOr<std::unique_ptr<PythonProcess>> KernelPythonDiscovery::Discover(uint32_t pid) {
  absl::StatusOr<std::unique_ptr<PythonProcess>> python = PythonProcess::Discover(pid);
  if (!python.ok()) {
    if (absl::IsUnimplemented(python.status()) &&
        warned_.insert(std::string(python.status().message())).second) {
      fprintf(stderr, "pystrobe: warning: %s; its samples keep native frames only\n",
              std::string(python.status().message()).c_str());
    }
    return python.status();
  }
  if (absl::Status status = sampler_->AddPythonProcess(pid, (*python)->interpreter().ToBpf());
      !status.ok()) {
    return status;
  }
  return python;
}

}  // namespace pystrobe
