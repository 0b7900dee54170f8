// Finds CPython in newly sampled processes and hands each one's layout to the
// kernel walker, so its next samples carry Python frames.
#ifndef PYSTROBE_DAEMON_RECORDING_KERNEL_PYTHON_DISCOVERY_H_
#define PYSTROBE_DAEMON_RECORDING_KERNEL_PYTHON_DISCOVERY_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "daemon/loader/bpf_sampler.h"
#include "daemon/recording/process_table.h"

namespace pystrobe {

// Probes attached to the interpreter binary (executable or libpython) of
// every CPython process found, once per binary.
struct InterpreterProbes {
  // GC time (the sampler's accounting must be attached).
  bool gc = false;
  // Finalization's start, where --allocations takes its in-use view (the
  // sampler's allocations must be on).
  bool finalize = false;
};

class KernelPythonDiscovery : public PythonDiscovery {
 public:
  // `sampler` must outlive this object.
  explicit KernelPythonDiscovery(BpfSampler* sampler, InterpreterProbes probes = {})
      : sampler_(sampler), gc_probes_(probes.gc), finalize_probes_(probes.finalize) {}

  absl::StatusOr<std::unique_ptr<PythonProcess>> Discover(uint32_t pid) override;
  absl::StatusOr<std::unique_ptr<PythonProcess>> FromExec(
      uint32_t pid, const PythonExecutable& executable) override;

  // Whether process `pid` was found running an interpreter whose GC probes
  // are attached: its GC time is counted.
  bool GcMeasured(uint32_t pid) const { return gc_measured_.contains(pid); }

 private:
  // Hands the kernel the binary of `pid`'s interpreter, when CPython is in
  // its main executable, so later execs of it are walked from the start.
  void RememberBinary(uint32_t pid, const PythonProcess& python);
  // Attaches the GC probes to `pid`'s interpreter binary (see gc_probes).
  void AttachGcProbes(uint32_t pid, const PythonInterpreter& interpreter);
  // Attaches the finalization probe to `pid`'s interpreter binary; says
  // once per binary when it cannot (the in-use view is then taken at exit).
  void AttachFinalizeProbe(uint32_t pid, const PythonInterpreter& interpreter);

  BpfSampler* sampler_;
  // An executable handed to the kernel: the run it was found in, and where
  // the kernel had loaded that run's text; later runs are that one moved.
  struct KnownExecutable {
    std::unique_ptr<PythonProcess> first_run;
    uint64_t start_code = 0;
  };
  // By pystrobe_python_binary_key (dev, inode).
  absl::flat_hash_map<std::pair<uint64_t, uint64_t>, KnownExecutable> executables_;
  // Unsupported versions already warned about: one warning per version.
  absl::flat_hash_set<std::string> warned_;
  bool gc_probes_;
  bool finalize_probes_;
  // Processes whose GC is counted; the exited ones are let go as it grows.
  absl::flat_hash_set<uint32_t> gc_measured_;
  static constexpr size_t kGcMeasuredSweepAt = 4096;
  size_t gc_measured_sweep_at_ = kGcMeasuredSweepAt;
};

}  // namespace pystrobe

#endif  // PYSTROBE_DAEMON_RECORDING_KERNEL_PYTHON_DISCOVERY_H_
