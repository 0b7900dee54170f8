// `pystrobe stat --pid` and `pystrobe top` served by the daemon: a
// measurement over a window from the accounting the session already runs
// (counter deltas between the start and the end) and its sampler (the
// on-demand recordings give the stacks, a tally of the target's samples
// the GIL share), answered as the stat report or a top snapshot.
#ifndef PYSTROBE_DAEMON_SERVICE_ON_DEMAND_ACCOUNTING_H_
#define PYSTROBE_DAEMON_SERVICE_ON_DEMAND_ACCOUNTING_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/time/time.h"
#include "daemon/accounting/memory_timeline.h"
#include "daemon/accounting/process_counters.h"
#include "daemon/accounting/sample_tally.h"
#include "daemon/accounting/stat_report.h"
#include "daemon/gpu/gpu_sampler.h"
#include "daemon/records/record_decoder.h"
#include "daemon/service/on_demand_recordings.h"

namespace pystrobe {

struct AccountingCapabilities {
  int rate_hz = 0;
  bool offcpu = false;         // the session follows threads off CPU
  bool all_processes = false;  // the session targets every process
  // Whether the session targets live process `pid` (its pids, name patterns,
  // cgroups and containers: TargetSelector::Includes); null: only
  // all_processes and what the accounting has counted tell.
  std::function<bool(uint32_t pid)> targets;
  // Whether process `pid`'s GC time is counted (its interpreter has the GC
  // probes); null: nobody's is.
  std::function<bool(uint32_t pid)> gc_measured;
  // NVML sees a GPU: a stat or top polls it over its own window (a sampler
  // of its own, so its figures are the window's).
  bool gpus = false;
  // The session samples resident growth (memory: true): a stat names the
  // stacks that grew its process's memory.
  bool memory = false;
};

class OnDemandAccounting : public RecordObserver {
 public:
  // `reader` and `recordings` must outlive this.
  OnDemandAccounting(AccountingReader* reader, OnDemandRecordings* recordings,
                     AccountingCapabilities caps)
      : reader_(reader), recordings_(recordings), caps_(std::move(caps)) {}

  // Starts a kStat or kTop job, or completes it with why it cannot be done.
  void Begin(std::shared_ptr<RecordJob> job, absl::Time now);
  // A decoded sampler record: counted for the stat targets it belongs to.
  void Observe(const RingRecord& record) override;
  // The processes the session read, before it lets the exited ones go:
  // their final figures.
  void OnProcesses(const std::vector<ProcessCounters>& processes);
  // A window was cut: the recorder's stacks start afresh.
  void OnWindowTaken(const WindowStacks& stacks);
  // Ends the measurements that are over (their recordings asked to stop),
  // before the recordings are polled...
  void StopDue(absl::Time now);
  // ... and answers those whose recordings are complete.
  void AnswerDone();
  // The session is ending: every job gets what it has; every recording,
  // also the clients' own, is completed (OnDemandRecordings::FinishAll).
  void FinishAll(absl::Time now);
  size_t active() const { return stats_.size() + tops_.size(); }

 private:
  using ProcessKey = std::pair<uint32_t, uint64_t>;  // pid, start_ns
  struct Stat {
    std::shared_ptr<RecordJob> job;
    absl::Time start;
    absl::Time end;
    bool stopped = false;
    uint64_t start_ns = 0;  // the process entry measured (0: none at the start)
    pystrobe_task_counters before = {};
    std::optional<ProcessCounters> final_seen;  // exited, read by the session
    ProcessCounters at_end;
    bool counted = false;  // at_end holds an entry
    SampleTally tally;
    std::shared_ptr<RecordJob> oncpu;
    std::shared_ptr<RecordJob> offcpu;  // null without off_cpu in the config
    std::unique_ptr<GpuSampler> gpus;   // null without NVML
    std::optional<GpuWindow> gpu_window;
    std::optional<MemoryTimeline> timeline;
    // Resident growth (caps.memory): the recorder's growth stacks when the
    // stat began or the window was last cut, and the target's growth in
    // the windows cut since.
    StackAggregator memory_baseline;
    StackAggregator memory_grown;
  };
  struct Top {
    std::shared_ptr<RecordJob> job;
    absl::Time start;
    absl::Time end;
    bool stopped = false;
    absl::flat_hash_map<ProcessKey, pystrobe_task_counters> before;
    absl::flat_hash_map<ProcessKey, ProcessCounters> exited;  // final figures
    TopSnapshot snapshot;
    std::shared_ptr<RecordJob> stacks;
    std::unique_ptr<GpuSampler> gpus;  // null without NVML
  };

  void BeginStat(std::shared_ptr<RecordJob> job, absl::Time now);
  // Notes the memory of a running stat's process on its timeline.
  void ObserveMemory(Stat& stat, bool force);
  // Adds what `stacks` gained over the stat's baseline, of its process.
  void AddMemoryGrowth(Stat& stat, const StackAggregator& stacks);
  void PickMemoryGrowth(Stat& stat, StatReport& report);
  void BeginTop(std::shared_ptr<RecordJob> job, absl::Time now);
  void StopStat(Stat& stat, absl::Time now);
  void StopTop(Top& top, absl::Time now);
  void AnswerStat(Stat& stat);
  void AnswerTop(Top& top);
  std::shared_ptr<RecordJob> StartRecording(RecordRequest request, absl::Time now);
  // A GPU sampler of a stat's or top's own, polling from now; null without NVML.
  std::unique_ptr<GpuSampler> OpenGpus() const;

  AccountingReader* reader_;
  OnDemandRecordings* recordings_;
  AccountingCapabilities caps_;
  std::vector<std::unique_ptr<Stat>> stats_;
  std::vector<std::unique_ptr<Top>> tops_;
};

}  // namespace pystrobe

#endif  // PYSTROBE_DAEMON_SERVICE_ON_DEMAND_ACCOUNTING_H_
