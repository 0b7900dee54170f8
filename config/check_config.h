// `pystrobe daemon --check-config FILE`: validate a configuration and exit.
#ifndef PYSTROBE_CONFIG_CHECK_CONFIG_H_
#define PYSTROBE_CONFIG_CHECK_CONFIG_H_

#include <string>
#include <vector>

namespace pystrobe {

// `pystrobe daemon --check-config FILE`, with the daemon's other arguments
// (--config and --socket taken out): validates the file, and the override
// flags --rate, --window, --profile-dir and --prometheus-listen when given.
// Prints "FILE: OK" to stdout and returns 0, or prints every error (one per
// line, "FILE:LINE:COLUMN: KEY: MESSAGE") to stderr and returns 1. Returns 2
// when the file cannot be read or an argument is not one of those flags.
int RunDaemonCheckConfigCommand(const std::vector<std::string>& args);

}  // namespace pystrobe

#endif  // PYSTROBE_CONFIG_CHECK_CONFIG_H_
