// The always-on service behind `pystrobe daemon`: one loop that profiles in
// windows (the whole host, or the configured targets), writes and pushes
// each window, answers the control socket's recordings and Prometheus's
// scrapes, reloads its configuration on SIGHUP, and on SIGTERM writes the
// window in progress and stops.
#ifndef PYSTROBE_DAEMON_SERVICE_DAEMON_LOOP_H_
#define PYSTROBE_DAEMON_SERVICE_DAEMON_LOOP_H_

#include <string>

#include "absl/status/status.h"
#include "config/config.h"
#include "config/config_loader.h"
#include "daemon/control/control_protocol.h"

namespace pystrobe {

// Where the daemon's configuration comes from: read at start by the caller,
// and again by the loop at each SIGHUP.
struct DaemonSources {
  std::string config_path;  // "": the built-in defaults
  ConfigOverrides overrides;
  // The control socket where record, stat and top talk to the daemon.
  std::string socket_path = kDefaultControlSocket;
};

// Runs the daemon with `config` (loaded from `sources`) until a stop is
// requested (Signals, installed with Reload::kOnSighup by the caller). An
// error when it cannot start (the profile directory, the metrics port, the
// first session); OK once it stopped, the last window written. Logs to
// stderr as "pystrobe daemon: ...".
absl::Status RunDaemon(const DaemonSources& sources, const DaemonConfig& config);

}  // namespace pystrobe

#endif  // PYSTROBE_DAEMON_SERVICE_DAEMON_LOOP_H_
