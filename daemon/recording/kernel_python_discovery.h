// Finds CPython in newly sampled processes and hands each one's layout to the
// kernel walker, so its next samples carry Python frames.
#ifndef PYSTROBE_DAEMON_RECORDING_KERNEL_PYTHON_DISCOVERY_H_
#define PYSTROBE_DAEMON_RECORDING_KERNEL_PYTHON_DISCOVERY_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "daemon/loader/bpf_sampler.h"
#include "daemon/recording/process_table.h"

namespace pystrobe {

class KernelPythonDiscovery : public PythonDiscovery {
 public:
  // `sampler` must outlive this object.
  explicit KernelPythonDiscovery(BpfSampler* sampler) : sampler_(sampler) {}

  absl::StatusOr<std::unique_ptr<PythonProcess>> Discover(uint32_t pid) override;

 private:
  // Hands the kernel the binary of `pid`'s interpreter, when CPython is in
  // its main executable, so later execs of it are walked from the start.
  void RememberBinary(uint32_t pid, const PythonInterpreter& interpreter);

  BpfSampler* sampler_;
  // Executables already handed to the kernel (pystrobe_python_binary_key).
  absl::flat_hash_set<std::pair<uint64_t, uint64_t>> binaries_;
  // Unsupported versions already warned about: one warning per version.
  absl::flat_hash_set<std::string> warned_;
};

}  // namespace pystrobe

#endif  // PYSTROBE_DAEMON_RECORDING_KERNEL_PYTHON_DISCOVERY_H_
