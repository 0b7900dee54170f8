#include "daemon/recording/sampling_session.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "daemon/procfs/paths.h"
#include "daemon/procfs/process_files.h"

namespace pystrobe {

absl::StatusOr<std::unique_ptr<SamplingSession>> SamplingSession::Open(
    SamplingSessionConfig config) {
  std::unique_ptr<SamplingSession> session(new SamplingSession(std::move(config)));
  const SamplingSessionConfig& c = session->config_;
  absl::StatusOr<std::unique_ptr<BpfSampler>> sampler = BpfSampler::Open();
  if (!sampler.ok()) return sampler.status();
  session->sampler_ = std::move(*sampler);
  BpfSampler& bpf = *session->sampler_;
  SamplerConfig sampler_config = c.sampler;
  sampler_config.accounting = c.accounting.has_value();
  if (c.rate_hz > 0) sampler_config.rate_hz = c.rate_hz;
  if (absl::Status s = bpf.Configure(sampler_config); !s.ok()) return s;
  if (absl::Status s = bpf.Load(); !s.ok()) return s;
  for (uint32_t pid : c.target_pids) {
    if (absl::Status s = bpf.AddTargetPid(pid); !s.ok()) return s;
  }
  if (c.sampler.native_unwind_bytes > 0) {
    // Targets known now are walked with tables from their first sample.
    session->unwind_maps_ = std::make_unique<UnwindMaps>(bpf.unwind_maps());
    NativeUnwindTrackerOptions options;
    options.python_only = c.native_unwind_python_only;
    if (!c.unwind_cache_directory.empty()) {
      // Without the cache tables are built in every run: slower, not wrong.
      absl::StatusOr<UnwindTableDiskCache> disk =
          UnwindTableDiskCache::Open(c.unwind_cache_directory, c.unwind_cache_bytes);
      if (disk.ok()) {
        options.disk_cache.emplace(std::move(*disk));
      } else {
        session->unwind_cache_status_ = disk.status();
      }
    }
    session->native_unwind_ =
        std::make_unique<NativeUnwindTracker>(session->unwind_maps_.get(), std::move(options));
    // A command pystrobe launched is still pystrobe until it execs: its
    // exec reads its mappings.
    std::string self = procfs::ReadLink(procfs::PidPath("self", "exe")).value_or("");
    for (uint32_t pid : c.target_pids) {
      std::string exe = procfs::ReadLink(procfs::PidPath(pid, "exe")).value_or("");
      if (exe != self && !c.native_unwind_python_only) {
        session->native_unwind_->Track(pid).IgnoreError();
      }
    }
  }

  absl::StatusOr<KernelSymbolizer> kernel = KernelSymbolizer::FromFile();
  if (kernel.ok()) {
    session->kernel_symbols_.emplace(std::move(*kernel));
  } else {
    session->kernel_symbols_status_ = kernel.status();
  }
  if (c.python != SamplingSessionConfig::PythonDiscovery::kOff) {
    session->python_discovery_ = std::make_unique<KernelPythonDiscovery>(
        &bpf,
        InterpreterProbes{.gc = c.python == SamplingSessionConfig::PythonDiscovery::kOnWithGcProbes,
                          .finalize = c.sampler.allocations});
  }
  session->recorder_ = std::make_unique<Recorder>(&session->native_symbols_,
                                                  session->python_discovery_.get(), c.recorder);
  return session;
}

SamplingSession::~SamplingSession() {
  if (attached_) sampler_->Detach();
}

absl::Status SamplingSession::Start(RecordObserver* observer) {
  if (config_.accounting) {
    if (absl::Status s = sampler_->AttachAccounting(*config_.accounting); !s.ok()) return s;
  } else if (absl::Status s = sampler_->AttachOomWatch(); !s.ok()) {
    return s;
  }
  observer_ = observer;
  absl::Status attached = sampler_->Attach(
      config_.rate_hz, [this](std::span<const uint8_t> record) { Dispatch(record); });
  attached_ = attached.ok();
  return attached;
}

void SamplingSession::Dispatch(std::span<const uint8_t> bytes) {
  if (capture_ != nullptr) capture_->emplace_back(bytes.begin(), bytes.end());
  // Into the last record's buffers: no allocation per sample. The recorder
  // comes last, as it may move what it keeps out of the record.
  RingRecord* record = recorder_->decoder().Decode(bytes);
  if (record == nullptr) return;
  if (observer_ != nullptr) observer_->Observe(*record);
  if (native_unwind_) native_unwind_->OnRecord(*record);
  recorder_->Handle(*record, bytes.size());
}

absl::Status SamplingSession::Poll(absl::Duration timeout) { return sampler_->Poll(timeout); }

absl::Status SamplingSession::Drain() { return sampler_->Drain(); }

absl::Status SamplingSession::Finish() {
  if (attached_) {
    sampler_->Detach();
    attached_ = false;
  }
  return sampler_->Drain();
}

}  // namespace pystrobe
