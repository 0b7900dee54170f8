// One sampling session: the BPF sampler opened, configured and loaded for its
// targets, and every record it produces handed to a Recorder that names what
// it sees (native symbols, CPython code, the kernel). `record`, `stat` and
// `top` run one for themselves; the daemon runs one for the host.
//
// Its life: Open() (configured and loaded, nothing attached yet: the caller
// may add targets), Start() (counting and sampling begin), Poll() while it
// runs, Finish() (sampling stops and the ring buffer is drained).
#ifndef PYSTROBE_DAEMON_RECORDING_SAMPLING_SESSION_H_
#define PYSTROBE_DAEMON_RECORDING_SAMPLING_SESSION_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "daemon/loader/bpf_sampler.h"
#include "daemon/loader/unwind_maps.h"
#include "daemon/recording/kernel_python_discovery.h"
#include "daemon/recording/native_unwind_tracker.h"
#include "daemon/recording/recorder.h"
#include "daemon/records/record_decoder.h"
#include "daemon/symbolizer/kernel_symbolizer.h"
#include "daemon/symbolizer/shared_module_symbolizer.h"

namespace pystrobe {

struct SamplingSessionConfig {
  SamplerConfig sampler;
  // Processes in the kernel's filter from the start (with sampler.filter_pids).
  std::vector<uint32_t> target_pids;
  int rate_hz = 0;
  RecorderOptions recorder;
  // Per-process counters (scheduler, block, exit); nullopt: none.
  std::optional<BpfSampler::AccountingOptions> accounting;
  // How CPython processes are found and handed to the kernel's walker.
  enum class PythonDiscovery { kOff, kOn, kOnWithGcProbes };
  PythonDiscovery python = PythonDiscovery::kOn;
  // With sampler.native_unwind_bytes: walk only processes the kernel knows
  // as CPython with tables (the daemon), or every target (record --native).
  bool native_unwind_python_only = false;
  // Where unwind tables are kept across runs (UnwindTableDiskCache), and
  // how many bytes of them at most; "": built in every run.
  std::string unwind_cache_directory = kDefaultUnwindCacheDirectory;
  uint64_t unwind_cache_bytes = kDefaultUnwindCacheBytes;
};

class SamplingSession {
 public:
  // How long Poll() waits for records at most: how soon a new process's
  // first sample is seen (samples do not wake the reader, see bpf/sample.bpf.h),
  // so that its symbols and CPython layout are taken while it is alive.
  static constexpr absl::Duration kPollInterval = absl::Milliseconds(25);

  static absl::StatusOr<std::unique_ptr<SamplingSession>> Open(SamplingSessionConfig config);
  ~SamplingSession();
  SamplingSession(const SamplingSession&) = delete;
  SamplingSession& operator=(const SamplingSession&) = delete;

  // Attaches the counters (if configured; else only the OOM watch, see
  // BpfSampler::AttachOomWatch) and the sampler. Every record is decoded
  // once, by the recorder's decoder (which counts the malformed ones), and
  // goes to `observer` (if any, it must outlive the session), the native
  // unwind tracker, then the recorder.
  absl::Status Start(RecordObserver* observer = nullptr);
  // Keeps every record's bytes as the ring buffer held them, before they
  // are decoded, in `records` (a replay corpus's capture; null: none).
  void CaptureInto(std::vector<std::vector<uint8_t>>* records) { capture_ = records; }
  // Hands the records that came to the recorder, waiting up to `timeout`
  // (a signal ends the wait early and is not an error).
  absl::Status Poll(absl::Duration timeout = kPollInterval);
  // Hands every waiting record to the recorder without waiting (for a loop
  // that sleeps elsewhere, as the daemon's does).
  absl::Status Drain();
  // Stops sampling and hands the rest of the ring buffer to the recorder.
  // After it, the recorder holds everything the session saw.
  absl::Status Finish();

  BpfSampler& sampler() { return *sampler_; }
  Recorder& recorder() { return *recorder_; }
  const Recorder& recorder() const { return *recorder_; }
  // Null when /proc/kallsyms could not be read; kernel_symbols_status() says why.
  const KernelSymbolizer* kernel_symbols() const {
    return kernel_symbols_ ? &*kernel_symbols_ : nullptr;
  }
  const absl::Status& kernel_symbols_status() const { return kernel_symbols_status_; }
  // Null when the configuration turned discovery off.
  KernelPythonDiscovery* python_discovery() { return python_discovery_.get(); }
  // Null unless the sampler walks native stacks with unwind tables.
  const NativeUnwindTracker* native_unwind() const { return native_unwind_.get(); }
  NativeUnwindTracker* native_unwind() { return native_unwind_.get(); }
  // Why unwind tables are not kept on disk, when asked to be.
  const absl::Status& unwind_cache_status() const { return unwind_cache_status_; }
  const UnwindMaps* unwind_maps() const { return unwind_maps_.get(); }

 private:
  explicit SamplingSession(SamplingSessionConfig config) : config_(std::move(config)) {}

  // Where the unwind tables are read from, and why not from disk if not.
  absl::Status unwind_cache_status_;
  SamplingSessionConfig config_;
  std::unique_ptr<BpfSampler> sampler_;
  std::optional<KernelSymbolizer> kernel_symbols_;
  absl::Status kernel_symbols_status_;
  SharedModuleSymbolizer native_symbols_;
  std::unique_ptr<KernelPythonDiscovery> python_discovery_;
  std::unique_ptr<Recorder> recorder_;
  std::unique_ptr<UnwindMaps> unwind_maps_;
  std::unique_ptr<NativeUnwindTracker> native_unwind_;
  // Hands one record, decoded once, to every reader.
  void Dispatch(std::span<const uint8_t> bytes);

  RecordObserver* observer_ = nullptr;
  std::vector<std::vector<uint8_t>>* capture_ = nullptr;
  bool attached_ = false;
};

}  // namespace pystrobe

#endif  // PYSTROBE_DAEMON_RECORDING_SAMPLING_SESSION_H_
