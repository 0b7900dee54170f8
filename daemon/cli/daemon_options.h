// The command line of `pystrobe daemon`, parsed through its flag table: the
// configuration file, the flags that override it, the control socket and
// --check-config.
#ifndef PYSTROBE_DAEMON_CLI_DAEMON_OPTIONS_H_
#define PYSTROBE_DAEMON_CLI_DAEMON_OPTIONS_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "config/config_loader.h"
#include "daemon/flags/daemon_client_flags.h"

namespace pystrobe {

struct DaemonArgs {
  std::optional<std::string> config_path;
  std::string socket_path = kDefaultControlSocket;
  ConfigOverrides overrides;
  // --check-config FILE: validate FILE with the overrides, and exit.
  bool check_config = false;
  std::string check_config_file;
  bool help = false;
};

// The arguments after "daemon". InvalidArgument names the bad flag.
absl::StatusOr<DaemonArgs> ParseDaemonArgs(const std::vector<std::string>& args);

// The usage text for `pystrobe daemon`.
const char* DaemonUsage();

}  // namespace pystrobe

#endif  // PYSTROBE_DAEMON_CLI_DAEMON_OPTIONS_H_
