// Sends each window to an OTLP profiles receiver (exporters.otlp) through an
// OtlpPusher, which queues and sends from its own thread. Like PushSink, the
// sink outlives its pusher: a SIGHUP that changes the settings (or a header
// file's content) replaces the pusher, and the counters carry over.
#ifndef PYSTROBE_DAEMON_SERVICE_OTLP_SINK_H_
#define PYSTROBE_DAEMON_SERVICE_OTLP_SINK_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "config/config.h"
#include "daemon/service/push_sink.h"
#include "daemon/service/self_metrics.h"
#include "daemon/service/window_sink.h"
#include "exporters/otlp_pusher.h"

namespace pystrobe {

// The pusher's options for a configuration: exporters.otlp, with the values
// of header_files read now (so a SIGHUP picks up a rotated key). Errors name
// the key and the file, never the secret.
absl::StatusOr<OtlpPushOptions> OtlpOptionsFrom(const DaemonConfig& config);

class OtlpSink : public WindowSink {
 public:
  // How long a reconfiguration lets the old pusher finish what it holds.
  static constexpr absl::Duration kReconfigureGrace = absl::Seconds(1);

  OtlpSink() = default;
  ~OtlpSink() override;

  // Starts exporting with `config`'s exporters.otlp, or stops when its
  // endpoint is empty. The same settings as now change nothing.
  absl::Status Configure(const DaemonConfig& config);
  // Stops taking windows and sends what is queued until `deadline`.
  void Shutdown(absl::Time deadline);

  bool active() const { return pusher_.get() != nullptr; }
  // Totals since the daemon started, over every pusher it had.
  PushHealth Health() const;
  // The current pusher's last error or partial-success message (empty after
  // a clean success), for the log: names the endpoint, never a header value.
  std::string LastError() const;

  std::string name() const override { return "otlp"; }
  // Queues the window (its profile and its resident growth, as one
  // request); returns at once. OK without a pusher.
  absl::Status Consume(const ProfileWindow& window) override;

 private:
  PusherHandle<OtlpPusher> pusher_;
  std::string options_key_;  // what the current pusher was made from, secrets hashed in
};

}  // namespace pystrobe

#endif  // PYSTROBE_DAEMON_SERVICE_OTLP_SINK_H_
