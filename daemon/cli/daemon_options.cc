#include "daemon/cli/daemon_options.h"

#include <utility>

#include "daemon/flags/flag_table.h"

namespace pystrobe {
namespace {

// A flag whose text overrides a key of the file; checked as the key is
// (ApplyOverrides), not here.
Flag<DaemonArgs> OverrideFlag(std::string name, std::string value_name, std::string help,
                              std::optional<std::string> ConfigOverrides::*member) {
  return ValueFlag<DaemonArgs>({std::move(name)}, std::move(value_name), std::move(help),
                               [member](DaemonArgs& args, absl::string_view, std::string value) {
                                 args.overrides.*member = std::move(value);
                                 return absl::OkStatus();
                               });
}

FlagTable<DaemonArgs>::Spec DaemonSpec() {
  std::vector<Flag<DaemonArgs>> rows = {
      ValueFlag<DaemonArgs>({"--config"}, "FILE",
                            "the configuration (default /etc/pystrobe/pystrobe.yaml\n"
                            "when it exists, else the built-in defaults)",
                            [](DaemonArgs& args, absl::string_view, std::string value) {
                              args.config_path = std::move(value);
                              return absl::OkStatus();
                            })
          .MissingValue("FILE"),
      OverrideFlag("--prometheus-listen", "HOST:PORT", "overrides exporters.prometheus.listen",
                   &ConfigOverrides::prometheus_listen),
      OverrideFlag("--profile-dir", "DIR", "overrides exporters.profile_dir",
                   &ConfigOverrides::profile_dir),
      OverrideFlag("--window", "SECONDS", "overrides window", &ConfigOverrides::window),
      OverrideFlag("--rate", "HZ", "overrides rate", &ConfigOverrides::rate),
      ValueFlag<DaemonArgs>({"--socket"}, "PATH",
                            "the control socket where record talks to the daemon\n"
                            "(default /run/pystrobe/pystrobe.sock)",
                            [](DaemonArgs& args, absl::string_view, std::string value) {
                              args.socket_path = std::move(value);
                              return absl::OkStatus();
                            })
          .MissingValue("PATH"),
      ValueFlag<DaemonArgs>({"--check-config"}, "FILE",
                            "validate FILE (with any overrides) and exit",
                            [](DaemonArgs& args, absl::string_view, std::string value) {
                              args.check_config = true;
                              args.check_config_file = std::move(value);
                              return absl::OkStatus();
                            })
          .MissingValue("FILE"),
      HelpFlag(&DaemonArgs::help, "this text"),
  };
  return {
      .command = "daemon",
      .intro =
          "usage: pystrobe daemon [options]\n"
          "\n"
          "Profiles continuously (the whole host, or the configured targets), writes each\n"
          "window to the profile directory as a gzipped pprof file, and serves Prometheus\n"
          "metrics. SIGHUP reloads the configuration; SIGTERM writes the current window\n"
          "and exits.\n"
          "\n",
      .sections = {{.heading = "", .flags = std::move(rows)}},
      .outro = "",
      .help_column = 32,
      .positional = nullptr,
      .rest = nullptr,
      .check = nullptr,
  };
}

const FlagTable<DaemonArgs>& DaemonFlags() {
  static const FlagTable<DaemonArgs>* const table = new FlagTable<DaemonArgs>(DaemonSpec());
  return *table;
}

}  // namespace

absl::StatusOr<DaemonArgs> ParseDaemonArgs(const std::vector<std::string>& args) {
  return DaemonFlags().Parse(args);
}

const char* DaemonUsage() { return DaemonFlags().UsageText(); }

}  // namespace pystrobe
