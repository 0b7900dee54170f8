// `pystrobe daemon`: the always-on service. Profiles (system-wide, or the
// configured targets) in windows written to the profile directory, serves
// Prometheus metrics, reloads its configuration on SIGHUP, and on SIGTERM
// writes the window in progress and exits. Here: its flags, --check-config,
// and loading the configuration; the loop is daemon/service/daemon_loop.h.
#ifndef PYSTROBE_DAEMON_CLI_DAEMON_COMMAND_H_
#define PYSTROBE_DAEMON_CLI_DAEMON_COMMAND_H_

#include <string>
#include <vector>

namespace pystrobe {

int RunDaemonCommand(const std::vector<std::string>& args);

}  // namespace pystrobe

#endif  // PYSTROBE_DAEMON_CLI_DAEMON_COMMAND_H_
