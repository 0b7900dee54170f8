// Sends each window to a profile store (exporters.push: Pyroscope's ingest
// API) through a PyroscopePusher, which queues and sends from its own thread.
// The sink outlives the pusher: a SIGHUP that changes the push configuration
// shuts the old pusher down and creates a new one, and the counters carry
// over so the daemon's metrics only grow.
#ifndef PYSTROBE_DAEMON_SERVICE_PUSH_SINK_H_
#define PYSTROBE_DAEMON_SERVICE_PUSH_SINK_H_

#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "config/config.h"
#include "daemon/service/self_metrics.h"
#include "daemon/service/window_sink.h"
#include "exporters/pyroscope_pusher.h"

namespace pystrobe {

// The pusher's options for a configuration: exporters.push (url, timeout,
// max_queue, TLS, credentials, tenant, headers) and the static labels. The
// password and token are read from their files here, so a SIGHUP picks up a
// rotated secret. Errors name the key and the file, never the secret.
absl::StatusOr<PyroscopePushOptions> PushOptionsFrom(const DaemonConfig& config);

// Adds a pusher's counters to the daemon's totals (not `queued`: a gauge).
void AddPushStats(PushHealth& total, const PushStats& stats);

// A store's current pusher and the counters of the pushers it replaced: what
// PushSink and OtlpSink share when a SIGHUP swaps their pusher. `Pusher` has
// Shutdown(absl::Time) and Stats() (a PushStats).
template <typename Pusher>
class PusherHandle {
 public:
  Pusher* get() const { return pusher_.get(); }
  void Start(std::unique_ptr<Pusher> pusher) { pusher_ = std::move(pusher); }

  // Lets the pusher send what it holds until `deadline`, keeps its counters
  // and drops it.
  void Stop(absl::Time deadline) {
    if (pusher_ == nullptr) return;
    pusher_->Shutdown(deadline);
    AddPushStats(retired_, pusher_->Stats());
    pusher_.reset();
  }

  // Totals over every pusher so far.
  PushHealth Health() const {
    PushHealth health = retired_;
    if (pusher_ != nullptr) {
      PushStats stats = pusher_->Stats();
      AddPushStats(health, stats);
      health.queued = stats.queued;
    }
    return health;
  }

  std::string LastError() const { return pusher_ == nullptr ? "" : pusher_->Stats().last_error; }

 private:
  std::unique_ptr<Pusher> pusher_;
  PushHealth retired_;  // what the pushers before this one counted
};

class PushSink : public WindowSink {
 public:
  // How long a reconfiguration lets the old pusher finish what it holds.
  static constexpr absl::Duration kReconfigureGrace = absl::Seconds(1);

  PushSink() = default;
  ~PushSink() override;

  // Starts pushing with `config`'s push settings, or stops when its URL is
  // empty. With the same settings (and secrets) as now, nothing happens;
  // otherwise the old pusher gets kReconfigureGrace to send its queue. An
  // error (a secret that cannot be read, options the pusher refuses) leaves
  // the sink without a pusher.
  absl::Status Configure(const DaemonConfig& config);

  // Stops taking windows and sends what is queued until `deadline`.
  void Shutdown(absl::Time deadline);

  bool active() const { return pusher_.get() != nullptr; }
  // Totals since the daemon started, over every pusher it had.
  PushHealth Health() const;
  // The current pusher's last error (empty after a success), for the log:
  // names the URL, never a credential.
  std::string LastError() const;

  std::string name() const override { return "push"; }
  // Queues the window; returns at once. OK without a pusher.
  absl::Status Consume(const ProfileWindow& window) override;

 private:
  PusherHandle<PyroscopePusher> pusher_;
  PyroscopePushOptions options_;
};

}  // namespace pystrobe

#endif  // PYSTROBE_DAEMON_SERVICE_PUSH_SINK_H_
