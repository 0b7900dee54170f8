#include "daemon/cli/command_lifecycle.h"

#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "daemon/cli/signals.h"
#include "daemon/recording/process_table.h"

namespace pystrobe {

absl::Status PollUntilEnd(SamplingSession& session, const RecordingEnd& end, absl::Time start,
                          const std::function<void()>& after_poll) {
  while (!Signals::StopRequested()) {
    if (absl::Status s = session.Poll(); !s.ok()) return s;
    if (after_poll) after_poll();
    if (end.duration && absl::Now() - start >= *end.duration) break;
    if (end.command != nullptr && end.command->TryReap()) break;
    if (end.command == nullptr && !end.pids.empty() &&
        std::none_of(end.pids.begin(), end.pids.end(), ProcessIsAlive)) {
      break;
    }
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
