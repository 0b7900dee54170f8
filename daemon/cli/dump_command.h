// `pystrobe dump --pid PID [--json]`: the Python stack of every thread of a
// running CPython process, read from its memory without stopping it.
#ifndef PYSTROBE_DAEMON_CLI_DUMP_COMMAND_H_
#define PYSTROBE_DAEMON_CLI_DUMP_COMMAND_H_

#include <string>
#include <vector>

namespace pystrobe {

// Runs `pystrobe dump` with the arguments after "dump"; returns the exit
// status (kExitOk, kExitFailure when the process runs no supported CPython or
// cannot be read, kExitUsage for bad flags or a pid that does not exist).
// The dump goes to stdout, messages to stderr.
int RunDumpCommand(const std::vector<std::string>& args);

}  // namespace pystrobe

#endif  // PYSTROBE_DAEMON_CLI_DUMP_COMMAND_H_
