// `pystrobe stat`: runs a command (or watches a pid for a while) with the
// accounting programs and the sampler attached, then prints the counters, a
// verdict with its evidence, and the stacks behind the bounding resource.
#ifndef PYSTROBE_DAEMON_CLI_STAT_COMMAND_H_
#define PYSTROBE_DAEMON_CLI_STAT_COMMAND_H_

#include <string>
#include <vector>

namespace pystrobe {

// Runs `pystrobe stat` with the arguments after "stat"; returns the exit status.
int RunStatCommand(const std::vector<std::string>& args);

}  // namespace pystrobe

#endif  // PYSTROBE_DAEMON_CLI_STAT_COMMAND_H_
