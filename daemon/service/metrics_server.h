// Serves the daemon's Prometheus metrics over HTTP (civetweb, with
// prometheus-cpp's text format), and beside them the read-only pages for
// people (ProfilePages: the recent windows as HTML), and stops within
// milliseconds. Only GET and HEAD are answered; nothing served changes
// anything, so the pages need no more than /metrics does: whoever reaches
// the port.
//
// civetweb before 1.16 (Debian 12 ships 1.15) stops only when its listening
// thread's poll ends, and that poll waits up to 2 s
// (https://github.com/civetweb/civetweb/issues/1163). SIGTERM must end the daemon within 2 s, so
// stopping connects to the server's own port: the poll wakes, sees civetweb stopping, and ends.
#ifndef PYSTROBE_DAEMON_SERVICE_METRICS_SERVER_H_
#define PYSTROBE_DAEMON_SERVICE_METRICS_SERVER_H_

#include <memory>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "daemon/service/profile_pages.h"
#include "prometheus/collectable.h"

class CivetServer;

namespace pystrobe {

class MetricsServer {
 public:
  // Serves `metrics` at http://`listen`/metrics, and `pages` (when given) at
  // the other paths it knows; `listen` is HOST:PORT as the configuration
  // validated it (":PORT" is every address).
  static absl::StatusOr<std::unique_ptr<MetricsServer>> Start(
      const std::string& listen, std::shared_ptr<prometheus::Collectable> metrics,
      std::shared_ptr<const HttpPages> pages = nullptr);

  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;
  ~MetricsServer();

 private:
  class Handler;

  MetricsServer(std::string wake_host, std::unique_ptr<Handler> handler,
                std::unique_ptr<CivetServer> server);

  // Where a connection reaches the listener: its own address, or loopback
  // when it listens on every address.
  std::string wake_host_;
  std::unique_ptr<Handler> handler_;  // outlives server_, which calls it
  std::unique_ptr<CivetServer> server_;
};

}  // namespace pystrobe

#endif  // PYSTROBE_DAEMON_SERVICE_METRICS_SERVER_H_
