// `pystrobe report FILE` and `pystrobe diff BEFORE AFTER`: tables read from
// recordings already written (folded, pprof, speedscope), no BPF, no root.
#ifndef PYSTROBE_DAEMON_CLI_REPORT_COMMAND_H_
#define PYSTROBE_DAEMON_CLI_REPORT_COMMAND_H_

#include <string>
#include <vector>

namespace pystrobe {

// Run the command with the arguments after "report" / "diff"; return the
// exit status (kExitUsage for bad flags and for files that cannot be read
// or are not recordings).
int RunReportCommand(const std::vector<std::string>& args);
int RunDiffCommand(const std::vector<std::string>& args);

}  // namespace pystrobe

#endif  // PYSTROBE_DAEMON_CLI_REPORT_COMMAND_H_
