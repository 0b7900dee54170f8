// What the commands that run until a signal or a target's end share:
// `record`, `stat` and `top`.
#ifndef PYSTROBE_DAEMON_CLI_COMMAND_LIFECYCLE_H_
#define PYSTROBE_DAEMON_CLI_COMMAND_LIFECYCLE_H_

#include <cstdint>

#include "absl/time/time.h"
#include "daemon/cli/target_launcher.h"
#include "daemon/recording/process_table.h"

namespace pystrobe {

// SIGINT and SIGTERM end the command. The handlers are installed without
// SA_RESTART, so they also interrupt a wait in poll or sleep at once.
class StopSignals {
 public:
  static void Install();
  static bool Requested();
  // Ends the command as a signal would (a 'q' typed in top).
  static void Request(int signal);
};

// Ends a command we started that outlived the recording: SIGTERM, then
// SIGKILL after `grace`.
void StopCommand(LaunchedCommand& command, absl::Duration grace = absl::Seconds(2));

}  // namespace pystrobe

#endif  // PYSTROBE_DAEMON_CLI_COMMAND_LIFECYCLE_H_
