#include "daemon/service/on_demand_recordings.h"

#include <signal.h>

#include <algorithm>
#include <cerrno>
#include <utility>

#include "absl/strings/str_cat.h"
#include "daemon/recording/profile_builder.h"

namespace pystrobe {
namespace {

bool PidAlive(uint32_t pid) { return kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM; }

}  // namespace

void RecordJob::AddInfo(std::string line) {
  absl::MutexLock lock(&mu_);
  info_.push_back(std::move(line));
}

std::vector<std::string> RecordJob::TakeInfo() {
  absl::MutexLock lock(&mu_);
  return std::exchange(info_, {});
}

void RecordJob::Complete(absl::StatusOr<Profile> result) {
  absl::MutexLock lock(&mu_);
  if (done_) return;
  result_ = std::move(result);
  done_ = true;
}

void RecordJob::CompleteWithAnswer(absl::StatusOr<std::string> answer) {
  absl::MutexLock lock(&mu_);
  if (done_) return;
  if (answer.ok()) {
    answer_ = std::move(*answer);
    result_ = Profile();
  } else {
    result_ = answer.status();
  }
  done_ = true;
}

bool RecordJob::WaitDone(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  mu_.AwaitWithTimeout(absl::Condition(&done_), timeout);
  return done_;
}

void OnDemandRecordings::Begin(std::shared_ptr<RecordJob> job, absl::Time now) {
  const RecordRequest& request = job->request();
  if (request.rate_hz != 0 && request.rate_hz != caps_.rate_hz) {
    job->Complete(absl::FailedPreconditionError(
        absl::StrCat("the daemon samples at ", caps_.rate_hz, " Hz, not ", request.rate_hz,
                     " Hz: leave out --rate (or pass --rate ", caps_.rate_hz,
                     "), or record without the daemon (--no-daemon)")));
    return;
  }
  if ((request.offcpu || request.idle) && !caps_.offcpu) {
    job->Complete(absl::FailedPreconditionError(
        "the daemon does not record off-CPU time (off_cpu: false in its configuration): "
        "record with --no-daemon"));
    return;
  }
  if (request.gil_only) {
    job->Complete(absl::FailedPreconditionError(
        "--gil is not available through the daemon (its windows keep every thread): "
        "record with --no-daemon"));
    return;
  }
  job->AddInfo(absl::StrCat("the daemon samples at ", caps_.rate_hz, " Hz"));
  if (!caps_.all_processes) {
    job->AddInfo(
        "the daemon samples only its configured targets: other processes are not in the "
        "profile");
  }
  auto active = std::make_unique<Active>();
  active->job = std::move(job);
  active->start = now;
  const RecordRequest& asked = active->job->request();
  // The daemon's windows are CPU time: its recordings are too.
  active->spec = {.measure = RecordingMeasure::kCpuTime,
                  .recorded_by = "pystrobe record (daemon)",
                  .target = RecordingTarget({}, asked.pids),
                  .names = ProfileBuilderOptionsFrom(asked),
                  .time = {.offcpu = asked.offcpu, .idle = asked.idle, .rate_hz = caps_.rate_hz}};
  active->baseline_on = WantedOf(*active, recorder_->stacks());
  active->baseline_off = WantedOf(*active, recorder_->offcpu_stacks());
  active_.push_back(std::move(active));
}

bool OnDemandRecordings::Wanted(const Active& active, const RawStack& stack) const {
  const std::vector<uint32_t>& pids = active.job->request().pids;
  if (pids.empty()) return true;
  uint32_t pid = recorder_->processes().image(stack.image).pid;
  return std::find(pids.begin(), pids.end(), pid) != pids.end();
}

StackAggregator OnDemandRecordings::WantedOf(const Active& active,
                                             const StackAggregator& stacks) const {
  if (active.job->request().pids.empty()) return stacks;
  StackAggregator wanted;
  for (const auto& [stack, weight] : stacks.weights()) {
    if (Wanted(active, stack)) wanted.Add(stack, weight);
  }
  return wanted;
}

void OnDemandRecordings::AddDelta(Active& active, const StackAggregator& now_on,
                                  const StackAggregator& now_off) {
  const RecordRequest& request = active.job->request();
  // What the window gained since the recording began, of the wanted processes.
  auto delta = [&](const StackAggregator& now, const StackAggregator& baseline) {
    return WantedOf(active, now.Since(baseline));
  };
  StackAggregator on = delta(now_on, active.baseline_on);
  StackAggregator off;
  if (request.offcpu || request.idle) off = delta(now_off, active.baseline_off);

  ProfileBuilder builder(*recorder_, kernel_, active.spec.names);
  // Now, while the window's processes are still known.
  AddRecordedStacks(active.spec, {.on_cpu = &on, .off_cpu = &off}, builder, recorder_->processes(),
                    active.profile);
}

void OnDemandRecordings::OnWindowTaken(const WindowStacks& stacks) {
  for (std::unique_ptr<Active>& active : active_) {
    if (active->job->abandoned()) continue;
    AddDelta(*active, stacks.on_cpu, stacks.off_cpu);
    // The recorder starts afresh after a cut.
    active->baseline_on = StackAggregator();
    active->baseline_off = StackAggregator();
  }
}

void OnDemandRecordings::Complete(Active& active, absl::Time now) {
  if (!active.job->abandoned()) {
    AddDelta(active, recorder_->stacks(), recorder_->offcpu_stacks());
    active.profile.title = RecordingTitle(active.spec);
    active.profile.start_time = active.start;
    active.profile.duration = now - active.start;
  }
  active.job->Complete(std::move(active.profile));
}

void OnDemandRecordings::Poll(absl::Time now) {
  for (auto it = active_.begin(); it != active_.end();) {
    Active& active = **it;
    const RecordRequest& request = active.job->request();
    bool over = active.job->stop_requested() ||
                (request.duration && now - active.start >= *request.duration) ||
                now - active.start >= kMaxRemoteRecording;
    if (!over && !request.pids.empty()) {
      over = std::none_of(request.pids.begin(), request.pids.end(), PidAlive);
    }
    if (!over) {
      ++it;
      continue;
    }
    Complete(active, now);
    it = active_.erase(it);
  }
}

void OnDemandRecordings::FinishAll(absl::Time now) {
  for (std::unique_ptr<Active>& active : active_) {
    active->job->AddInfo("the daemon's session ended (reload or stop): the profile is cut short");
    Complete(*active, now);
  }
  active_.clear();
}

}  // namespace pystrobe
