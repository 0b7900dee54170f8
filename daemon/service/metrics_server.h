// Serves the daemon's Prometheus metrics over HTTP (prometheus-cpp's Exposer,
// which runs civetweb) and stops within milliseconds.
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
#include "prometheus/collectable.h"
#include "prometheus/exposer.h"

namespace pystrobe {

class MetricsServer {
 public:
  // Serves `metrics` at http://`listen`/metrics; `listen` is HOST:PORT as the
  // configuration validated it (":PORT" is every address).
  static absl::StatusOr<std::unique_ptr<MetricsServer>> Start(
      const std::string& listen, std::shared_ptr<prometheus::Collectable> metrics);

  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;
  ~MetricsServer();

 private:
  MetricsServer(std::string wake_host, std::unique_ptr<prometheus::Exposer> exposer)
      : wake_host_(std::move(wake_host)), exposer_(std::move(exposer)) {}

  // Where a connection reaches the listener: its own address, or loopback
  // when it listens on every address.
  std::string wake_host_;
  std::unique_ptr<prometheus::Exposer> exposer_;
};

}  // namespace pystrobe

#endif  // PYSTROBE_DAEMON_SERVICE_METRICS_SERVER_H_
