// The command line of `pystrobe dump`, parsed through its flag table.
#ifndef PYSTROBE_DAEMON_CLI_DUMP_OPTIONS_H_
#define PYSTROBE_DAEMON_CLI_DUMP_OPTIONS_H_

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace pystrobe {

struct DumpOptions {
  pid_t pid = 0;
  bool json = false;
  bool asyncio = false;
  bool help = false;
};

// The arguments after "dump". InvalidArgument names the bad flag or value.
absl::StatusOr<DumpOptions> ParseDumpOptions(const std::vector<std::string>& args);

// The usage text for `pystrobe dump`.
const char* DumpUsage();

}  // namespace pystrobe

#endif  // PYSTROBE_DAEMON_CLI_DUMP_OPTIONS_H_
