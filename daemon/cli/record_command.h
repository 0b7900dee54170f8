// `pystrobe record`: samples a command, some processes or the whole system
// and writes the profile when the target exits, the duration ends, or on
// SIGINT/SIGTERM.
#ifndef PYSTROBE_DAEMON_CLI_RECORD_COMMAND_H_
#define PYSTROBE_DAEMON_CLI_RECORD_COMMAND_H_

#include <string>
#include <vector>

namespace pystrobe {

// Runs `pystrobe record` with the arguments after "record"; returns the exit
// status. Messages go to stderr.
int RunRecordCommand(const std::vector<std::string>& args);

}  // namespace pystrobe

#endif  // PYSTROBE_DAEMON_CLI_RECORD_COMMAND_H_
