// One run of the BPF programs under one configuration: the sampler with its
// accounting, the recorder, the targets, the per-process metrics and the
// window loop. A configuration change that the kernel side must see (rate,
// targets, Python walk, off-CPU) ends the session and starts another; every
// other change applies to the running one.
#ifndef PYSTROBE_DAEMON_SERVICE_PROFILING_SESSION_H_
#define PYSTROBE_DAEMON_SERVICE_PROFILING_SESSION_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "config/config.h"
#include "daemon/accounting/process_counters.h"
#include "daemon/loader/bpf_sampler.h"
#include "daemon/recording/profile_builder.h"
#include "daemon/recording/sampling_session.h"
#include "daemon/service/container_labels.h"
#include "daemon/service/gpu_metrics.h"
#include "daemon/service/on_demand_accounting.h"
#include "daemon/service/on_demand_recordings.h"
#include "daemon/service/oom_report.h"
#include "daemon/service/process_metrics.h"
#include "daemon/service/self_metrics.h"
#include "daemon/service/target_selector.h"
#include "daemon/service/window_loop.h"

namespace pystrobe {

// Whether going from `a` to `b` needs a new session.
bool NeedsNewSession(const DaemonConfig& a, const DaemonConfig& b);

// What limits.memory is split into.
struct MemoryBudget {
  size_t max_stacks = 0;
  size_t max_native_names = 0;
  size_t max_python_codes = 0;
};
MemoryBudget BudgetFor(uint64_t memory_bytes);

class ProfilingSession {
 public:
  // Loads and attaches everything. `sinks` and `labels` must outlive it.
  static absl::StatusOr<std::unique_ptr<ProfilingSession>> Start(const DaemonConfig& config,
                                                                 std::vector<WindowSink*> sinks,
                                                                 ContainerLabels* labels,
                                                                 uint64_t next_sequence);
  ~ProfilingSession();

  // Hands every waiting record to the recorder. Most records do not wake the
  // reader (see bpf/sample.bpf.h): the daemon's loop drains them in one batch
  // when it wakes, for its timers or for ring_buffer_fd().
  absl::Status Drain();
  // Readable when records ask to be read now (a new process, a filling
  // buffer): for the loop's LoopWakeups.
  int ring_buffer_fd() const;
  // When the current window is due to be cut.
  absl::Time next_cut() const;
  // Whether on-demand recordings or stat/top answers are under way: they
  // are served every few tens of milliseconds.
  bool serving_requests() const;
  // The once-a-second work: targets, per-process metrics, the memory limit.
  // True when the daemon is over its memory limit.
  void Tick(absl::Time now);
  // Cuts the window when due (or now with `force`).
  void MaybeCut(absl::Time now, bool force = false);
  // The last window, after stopping the sampler and draining its records.
  void Finish(absl::Time now);
  // A recording, stat or top a control socket client asked for (see
  // OnDemandRecordings, OnDemandAccounting).
  void BeginRecording(std::shared_ptr<RecordJob> job, absl::Time now);
  // Completes the on-demand recordings, stats and tops that are over.
  void ServeRecordings(absl::Time now);
  // Applies a configuration that does not need a new session.
  void Apply(const DaemonConfig& config);

  // Fills in what this session counts.
  void FillHealth(DaemonHealth& health);
  const ProcessMetrics& process_metrics() const { return process_metrics_; }
  ProcessMetrics& process_metrics() { return process_metrics_; }
  const GpuMetrics& gpu_metrics() const { return *gpu_metrics_; }
  uint64_t next_sequence() const { return window_loop_->next_sequence(); }
  uint64_t windows() const { return window_loop_->windows(); }

 private:
  ProfilingSession(const DaemonConfig& config, ContainerLabels* labels);

  // What each thread of OOM-killed `pid` was doing at the kill, named.
  std::vector<KilledThreadStack> KilledThreadStacks(uint32_t pid);
  void WriteOomReports(std::vector<OomReport> reports);

  DaemonConfig config_;
  // First, so it goes last: everything below reads its recorder.
  std::unique_ptr<SamplingSession> sampling_;
  std::unique_ptr<AccountingReader> accounting_;
  std::unique_ptr<TargetSelector> targets_;
  ContainerLabels* labels_;
  ProcessMetrics process_metrics_;
  std::unique_ptr<GpuMetrics> gpu_metrics_;
  std::unique_ptr<WindowLoop> window_loop_;
  std::unique_ptr<OnDemandRecordings> on_demand_;
  std::unique_ptr<OnDemandAccounting> on_demand_accounting_;
  std::vector<BpfSampler::MapFill> map_fill_;
  absl::Time next_map_read_ = absl::InfinitePast();
  uint64_t memory_pressure_cuts_ = 0;
  PendingOomReports pending_oom_reports_;
};

}  // namespace pystrobe

#endif  // PYSTROBE_DAEMON_SERVICE_PROFILING_SESSION_H_
