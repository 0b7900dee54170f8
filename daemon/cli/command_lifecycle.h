// What the local commands (`record`, `stat`, `top`) share around their
// sampling session: when it ends, the command they started, the GPUs.
#ifndef PYSTROBE_DAEMON_CLI_COMMAND_LIFECYCLE_H_
#define PYSTROBE_DAEMON_CLI_COMMAND_LIFECYCLE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "daemon/cli/target_launcher.h"
#include "daemon/gpu/gpu_sampler.h"
#include "daemon/recording/sampling_session.h"

namespace pystrobe {

// What ends a local recording besides a stop signal: its duration, the end
// of the command it launched, or the end of every process it was pointed at.
struct RecordingEnd {
  std::optional<absl::Duration> duration;
  LaunchedCommand* command = nullptr;
  std::vector<uint32_t> pids;
};

// Hands `session`'s records to its recorder until `end` or a stop signal,
// counting from `start`, and calls `after_poll` (if any) after each poll
// (every SamplingSession::kPollInterval at most). A failed read ends it
// early and is returned; what came before is kept.
absl::Status PollUntilEnd(SamplingSession& session, const RecordingEnd& end, absl::Time start,
                          const std::function<void()>& after_poll = nullptr);

// Ends a command we started that outlived the recording: SIGTERM, then
// SIGKILL after `grace`.
void StopCommand(LaunchedCommand& command, absl::Duration grace = absl::Seconds(2));

// The GPU sampler of `command` (not started), or null where there is no NVML
// or it cannot be used: no GPU is no failure, and with `verbose` one line
// says why there are no GPU figures.
std::unique_ptr<GpuSampler> OpenGpuSampler(const char* command, bool verbose);

}  // namespace pystrobe

#endif  // PYSTROBE_DAEMON_CLI_COMMAND_LIFECYCLE_H_
