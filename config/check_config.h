// `pystrobe daemon --check-config FILE`: validate a configuration and exit.
#ifndef PYSTROBE_CONFIG_CHECK_CONFIG_H_
#define PYSTROBE_CONFIG_CHECK_CONFIG_H_

#include <string>

#include "config/config_loader.h"

namespace pystrobe {

// `pystrobe daemon --check-config FILE` with the override flags that came
// with it (--rate, --window, --profile-dir, --prometheus-listen; the daemon's
// flag table has read them): validates the file and the overrides. Prints
// "FILE: OK" to stdout and returns 0, or prints every error (one per line,
// "FILE:LINE:COLUMN: KEY: MESSAGE") to stderr and returns 1. Returns 2 when
// the file cannot be read.
int CheckDaemonConfig(const std::string& path, const ConfigOverrides& overrides);

}  // namespace pystrobe

#endif  // PYSTROBE_CONFIG_CHECK_CONFIG_H_
