#include "daemon/cli/daemon_command.h"

#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "config/check_config.h"
#include "config/config_loader.h"
#include "daemon/cli/daemon_options.h"
#include "daemon/cli/exit_status.h"
#include "daemon/loader/capabilities.h"
#include "daemon/loader/libbpf_errors.h"
#include "daemon/service/daemon_loop.h"
#include "daemon/service/signals.h"

namespace pystrobe {

int RunDaemonCommand(const std::vector<std::string>& args) {
  absl::StatusOr<DaemonArgs> parsed = ParseDaemonArgs(args);
  if (!parsed.ok()) {
    fprintf(stderr, "pystrobe daemon: %s\n%s", std::string(parsed.status().message()).c_str(),
            DaemonUsage());
    return kExitUsage;
  }
  if (parsed->help) {
    fputs(DaemonUsage(), stdout);
    return kExitOk;
  }
  // --config is the running daemon's file; --check-config names its own.
  if (parsed->check_config) return CheckDaemonConfig(parsed->check_config_file, parsed->overrides);
  std::error_code ignored;
  if (!parsed->config_path && std::filesystem::exists(kDefaultConfigPath, ignored)) {
    parsed->config_path = kDefaultConfigPath;
  }
  absl::StatusOr<DaemonConfig> config =
      LoadEffectiveConfig(parsed->config_path.value_or(""), parsed->overrides);
  if (!config.ok()) {
    return UsageError("daemon", config.status());
  }
  if (absl::Status caps = CheckProfilingCapabilities(CapabilitySet::OfThisProcess()); !caps.ok()) {
    return Fail("daemon", caps);
  }
  LibbpfLog::Capture(false);
  Signals::Install(Signals::Reload::kOnSighup);
  absl::Status run = RunDaemon({.config_path = parsed->config_path.value_or(""),
                                .overrides = parsed->overrides,
                                .socket_path = parsed->socket_path},
                               *config);
  return run.ok() ? kExitOk : Fail("daemon", run);
}

}  // namespace pystrobe
