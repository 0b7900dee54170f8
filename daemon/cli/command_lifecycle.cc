#include "daemon/cli/command_lifecycle.h"

#include <signal.h>
#include <sys/wait.h>

#include <cerrno>
#include <cstdio>
#include <fstream>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "daemon/cli/target_exits.h"
#include "daemon/service/signals.h"

namespace pystrobe {

absl::Status PollUntilEnd(SamplingSession& session, const RecordingEnd& end, absl::Time start,
                          const std::function<void()>& after_poll) {
  // The targets' ends are polled beside the ring buffer: asking /proc
  // whether each still runs after every poll cost more than the samples.
  std::optional<TargetExits> targets;
  if (end.command == nullptr && !end.pids.empty()) targets.emplace(end.pids);
  while (!Signals::StopRequested()) {
    if (targets) {
      targets->Wait(session.sampler().ring_buffer_fd(), SamplingSession::kPollInterval);
      if (absl::Status s = session.Poll(absl::ZeroDuration()); !s.ok()) return s;
    } else if (absl::Status s = session.Poll(); !s.ok()) {
      return s;
    }
    if (after_poll) after_poll();
    if (end.duration && absl::Now() - start >= *end.duration) break;
    if (end.command != nullptr && end.command->TryReap()) break;
    if (targets && targets->AllEnded()) break;
  }
  return absl::OkStatus();
}

void StopCommand(LaunchedCommand& command, absl::Duration grace) {
  if (command.TryReap()) return;
  kill(command.pid(), SIGTERM);
  absl::Time deadline = absl::Now() + grace;
  while (!command.TryReap() && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(20));
  if (!command.TryReap()) {
    kill(command.pid(), SIGKILL);
    command.Wait();
  }
}

std::unique_ptr<GpuSampler> OpenGpuSampler(const char* command, bool verbose) {
  absl::StatusOr<std::unique_ptr<GpuSampler>> gpus = GpuSampler::Open();
  if (!gpus.ok()) {
    if (verbose) {
      fprintf(stderr, "pystrobe %s: no GPU figures: %s\n", command,
              std::string(gpus.status().message()).c_str());
    }
    return nullptr;
  }
  return std::move(*gpus);
}

}  // namespace pystrobe
