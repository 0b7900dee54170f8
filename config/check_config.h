// `pystrobe daemon --check-config FILE`: validate a configuration and exit.
#ifndef PYSTROBE_CONFIG_CHECK_CONFIG_H_
#define PYSTROBE_CONFIG_CHECK_CONFIG_H_

#include <string>
#include <vector>

namespace pystrobe {

// Validates the file: prints "FILE: OK" to stdout and returns 0, or prints
// every error (one per line, "FILE:LINE:COLUMN: KEY: MESSAGE") to stderr and
// returns 1. Returns 2 when the file cannot be read.
int RunCheckConfig(const std::string& path);

// The `pystrobe daemon` subcommand until the daemon exists: only
// `--check-config FILE` (optionally with the override flags --rate, --window,
// --profile-dir, --prometheus-listen, which are then validated too). Anything
// else prints that the daemon is not yet implemented and returns 2.
int RunDaemonCheckOnlyCommand(const std::vector<std::string>& args);

}  // namespace pystrobe

#endif  // PYSTROBE_CONFIG_CHECK_CONFIG_H_
