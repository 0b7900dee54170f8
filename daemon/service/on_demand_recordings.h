// Recordings that clients of the control socket ask for, cut out of the
// daemon's own sampling instead of loading a second copy of the programs.
//
// A recording starts from a copy of the recorder's counts for its targets
// (the baseline) and, at each window cut and at its end, adds what was counted
// since: counts now minus the baseline. The part of each window is symbolized
// at the cut, before the window forgets exited processes, so a short-lived
// process sampled during the recording keeps its names.
#ifndef PYSTROBE_DAEMON_SERVICE_ON_DEMAND_RECORDINGS_H_
#define PYSTROBE_DAEMON_SERVICE_ON_DEMAND_RECORDINGS_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "daemon/control/control_protocol.h"
#include "daemon/recording/recorder.h"
#include "daemon/recording/recording_profile.h"
#include "daemon/symbolizer/kernel_symbolizer.h"
#include "exporters/profile.h"

namespace pystrobe {

// One client's recording, shared by the connection's thread (which waits for
// it) and the window loop's thread (which records it).
class RecordJob {
 public:
  explicit RecordJob(RecordRequest request) : request_(std::move(request)) {}
  // A stat or top request (see OnDemandAccounting): its answer is bytes.
  explicit RecordJob(StatRequest stat) : type_(ControlMessageType::kStat), stat_(stat) {}
  explicit RecordJob(TopRequest top) : type_(ControlMessageType::kTop), top_(top) {}

  // kRecord, kStat or kTop.
  ControlMessageType type() const { return type_; }
  const RecordRequest& request() const { return request_; }
  const StatRequest& stat_request() const { return stat_; }
  const TopRequest& top_request() const { return top_; }

  // The client asked to stop (kStop), or went away (`abandon`: nobody
  // wants the result).
  void RequestStop() { stop_.store(true); }
  void Abandon() {
    stop_.store(true);
    abandoned_.store(true);
  }
  bool stop_requested() const { return stop_.load(); }
  bool abandoned() const { return abandoned_.load(); }

  // Lines for the user, sent as kInfo before the result.
  void AddInfo(std::string line);
  std::vector<std::string> TakeInfo();

  void Complete(absl::StatusOr<Profile> result);
  // A stat or top job's answer (the kResult bytes) or why there is none.
  void CompleteWithAnswer(absl::StatusOr<std::string> answer);
  // Waits up to `timeout` for Complete; true when completed.
  bool WaitDone(absl::Duration timeout);
  // After WaitDone returned true.
  const absl::StatusOr<Profile>& result() const { return result_; }
  // After WaitDone returned true, for stat and top jobs whose result is ok.
  const std::string& answer() const { return answer_; }

 private:
  const ControlMessageType type_ = ControlMessageType::kRecord;
  const RecordRequest request_;
  const StatRequest stat_;
  const TopRequest top_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> abandoned_{false};
  mutable absl::Mutex mu_;
  std::vector<std::string> info_ ABSL_GUARDED_BY(mu_);
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  absl::StatusOr<Profile> result_ = absl::UnknownError("not done");
  std::string answer_;
};

// What the running session can record: requests outside it are refused.
struct RecordCapabilities {
  int rate_hz = 0;
  bool offcpu = false;         // the session records off-CPU intervals
  bool all_processes = false;  // the session samples every process
};

class OnDemandRecordings {
 public:
  // `recorder` and `kernel` (may be null) must outlive this.
  OnDemandRecordings(Recorder* recorder, const KernelSymbolizer* kernel, RecordCapabilities caps)
      : recorder_(recorder), kernel_(kernel), caps_(caps) {}

  // The recorder and kernel symbols the recordings read: stat's resident
  // growth is read from them too.
  Recorder& recorder() { return *recorder_; }
  const KernelSymbolizer* kernel() const { return kernel_; }

  // Starts `job`, or completes it at once with the reason it cannot be
  // recorded here.
  void Begin(std::shared_ptr<RecordJob> job, absl::Time now);
  // The window's stacks were taken (`stacks`, not yet evicted): every
  // recording takes its part of them.
  void OnWindowTaken(const WindowStacks& stacks);
  // Completes the recordings that are over: duration elapsed, stop asked,
  // every target pid gone.
  void Poll(absl::Time now);
  // Completes every recording with what it has (the session is ending).
  void FinishAll(absl::Time now);
  size_t active() const { return active_.size(); }

 private:
  struct Active {
    std::shared_ptr<RecordJob> job;
    absl::Time start;
    // The profile it builds (daemon/recording/recording_profile.h).
    RecordingProfileSpec spec;
    // The wanted stacks of the current window at the start (none after a cut).
    StackAggregator baseline_on;
    StackAggregator baseline_off;
    Profile profile;
  };

  bool Wanted(const Active& active, const RawStack& stack) const;
  // The stacks of `stacks` that the recording's targets sampled.
  StackAggregator WantedOf(const Active& active, const StackAggregator& stacks) const;
  // Adds what `now` gained over the baselines (for the recording's targets).
  void AddDelta(Active& active, const StackAggregator& now_on, const StackAggregator& now_off);
  void Complete(Active& active, absl::Time now);

  Recorder* recorder_;
  const KernelSymbolizer* kernel_;
  RecordCapabilities caps_;
  std::vector<std::unique_ptr<Active>> active_;
};

}  // namespace pystrobe

#endif  // PYSTROBE_DAEMON_SERVICE_ON_DEMAND_RECORDINGS_H_
