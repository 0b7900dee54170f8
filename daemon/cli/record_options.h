// The command line of `pystrobe record`: its options and flags live below
// cli and control (daemon/flags/record_flags.h), which read them both; what
// only the client needs is here.
#ifndef PYSTROBE_DAEMON_CLI_RECORD_OPTIONS_H_
#define PYSTROBE_DAEMON_CLI_RECORD_OPTIONS_H_

#include <string>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "daemon/flags/record_flags.h"

namespace pystrobe {

// "pystrobe-<target>-<YYYYmmdd-HHMMSS>.<extension>", target being the
// command's base name, "pid<PID>" or "all".
std::string DefaultOutputPath(const RecordOptions& options, absl::Time now,
                              absl::string_view extension);

}  // namespace pystrobe

#endif  // PYSTROBE_DAEMON_CLI_RECORD_OPTIONS_H_
