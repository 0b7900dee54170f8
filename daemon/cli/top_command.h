// `pystrobe top`: a live, per-second view of every process (or of every
// thread of one process) from the accounting counters, with the hottest
// Python functions from the sampler.
#ifndef PYSTROBE_DAEMON_CLI_TOP_COMMAND_H_
#define PYSTROBE_DAEMON_CLI_TOP_COMMAND_H_

#include <string>
#include <vector>

namespace pystrobe {

// Runs `pystrobe top` with the arguments after "top"; returns the exit status.
int RunTopCommand(const std::vector<std::string>& args);

}  // namespace pystrobe

#endif  // PYSTROBE_DAEMON_CLI_TOP_COMMAND_H_
