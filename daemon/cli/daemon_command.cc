#include "daemon/cli/daemon_command.h"

#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "config/check_config.h"
#include "config/config_loader.h"
#include "daemon/cli/exit_status.h"
#include "daemon/control/control_protocol.h"
#include "daemon/loader/capabilities.h"
#include "daemon/loader/libbpf_errors.h"
#include "daemon/service/daemon_loop.h"
#include "daemon/service/signals.h"

namespace pystrobe {
namespace {

constexpr char kUsage[] = R"(usage: pystrobe daemon [options]

Profiles continuously (the whole host, or the configured targets), writes each
window to the profile directory as a gzipped pprof file, and serves Prometheus
metrics. SIGHUP reloads the configuration; SIGTERM writes the current window
and exits.

  --config FILE                 the configuration (default /etc/pystrobe/pystrobe.yaml
                                when it exists, else the built-in defaults)
  --prometheus-listen HOST:PORT overrides exporters.prometheus.listen
  --profile-dir DIR             overrides exporters.profile_dir
  --window SECONDS              overrides window
  --rate HZ                     overrides rate
  --socket PATH                 the control socket where record talks to the daemon
                                (default /run/pystrobe/pystrobe.sock)
  --check-config FILE           validate FILE (with any overrides) and exit
  -h, --help                    this text
)";

struct DaemonArgs {
  std::optional<std::string> config_path;
  std::string socket_path = kDefaultControlSocket;
  ConfigOverrides overrides;
  bool check_config = false;
  bool help = false;
};

absl::StatusOr<DaemonArgs> ParseDaemonArgs(const std::vector<std::string>& args) {
  DaemonArgs parsed;
  for (size_t i = 0; i < args.size(); ++i) {
    absl::string_view arg = args[i];
    if (arg == "-h" || arg == "--help") {
      parsed.help = true;
      continue;
    }
    // --check-config FILE or --check-config=FILE; RunDaemonCheckConfigCommand
    // reads the file from the arguments itself.
    if (arg == "--check-config") {
      if (i + 1 >= args.size()) return absl::InvalidArgumentError("--check-config needs a FILE");
      parsed.check_config = true;
      ++i;
      continue;
    }
    if (absl::StartsWith(arg, "--check-config=")) {
      parsed.check_config = true;
      continue;
    }
    if (arg == "--socket") {
      if (i + 1 >= args.size()) return absl::InvalidArgumentError("--socket needs a PATH");
      parsed.socket_path = args[++i];
      continue;
    }
    if (absl::ConsumePrefix(&arg, "--socket=")) {
      parsed.socket_path = std::string(arg);
      continue;
    }
    if (arg == "--config") {
      if (i + 1 >= args.size()) return absl::InvalidArgumentError("--config needs a FILE");
      parsed.config_path = args[++i];
      continue;
    }
    if (absl::ConsumePrefix(&arg, "--config=")) {
      parsed.config_path = std::string(arg);
      continue;
    }
    std::optional<absl::string_view> next;
    if (i + 1 < args.size()) next = args[i + 1];
    bool consumed_next = false;
    absl::StatusOr<bool> is_override =
        ParseOverrideFlag(args[i], next, &parsed.overrides, &consumed_next);
    if (!is_override.ok()) return is_override.status();
    if (!*is_override) return absl::InvalidArgumentError(absl::StrCat("unknown option ", args[i]));
    if (consumed_next) ++i;
  }
  return parsed;
}

}  // namespace

int RunDaemonCommand(const std::vector<std::string>& args) {
  absl::StatusOr<DaemonArgs> parsed = ParseDaemonArgs(args);
  if (!parsed.ok()) {
    fprintf(stderr, "pystrobe daemon: %s\n%s", std::string(parsed.status().message()).c_str(),
            kUsage);
    return kExitUsage;
  }
  if (parsed->help) {
    fputs(kUsage, stdout);
    return kExitOk;
  }
  if (parsed->check_config) {
    // --config is the running daemon's file; --check-config names its own.
    std::vector<std::string> check_args;
    for (size_t i = 0; i < args.size(); ++i) {
      if (args[i] == "--config") {
        ++i;
        continue;
      }
      if (absl::StartsWith(args[i], "--config=")) continue;
      if (args[i] == "--socket") {
        ++i;
        continue;
      }
      if (absl::StartsWith(args[i], "--socket=")) continue;
      check_args.push_back(args[i]);
    }
    return RunDaemonCheckConfigCommand(check_args);
  }
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
