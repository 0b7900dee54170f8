#include "daemon/service/push_sink.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace pystrobe {
namespace {

bool SameOptions(const PyroscopePushOptions& a, const PyroscopePushOptions& b) {
  return a.url == b.url && a.app_name == b.app_name && a.labels == b.labels &&
         a.timeout == b.timeout && a.max_queue == b.max_queue;
}

void Add(PushHealth& total, const PushStats& stats) {
  total.enqueued += stats.enqueued;
  total.sent += stats.sent;
  total.retried += stats.retried;
  total.dropped_queue_full += stats.dropped_queue_full;
  total.dropped_shutdown += stats.dropped_shutdown;
  total.rejected += stats.rejected;
  total.failed += stats.failed;
  total.bytes_sent += stats.bytes_sent;
}

}  // namespace

PyroscopePushOptions PushOptionsFrom(const DaemonConfig& config) {
  PyroscopePushOptions options;
  options.url = config.exporters.push.url;
  options.timeout = config.exporters.push.timeout;
  options.max_queue = config.exporters.push.max_queue;
  options.labels = config.labels;
  return options;
}

PushSink::~PushSink() { Shutdown(absl::Now()); }

absl::Status PushSink::Configure(const DaemonConfig& config) {
  PyroscopePushOptions next = PushOptionsFrom(config);
  if (pusher_ != nullptr && SameOptions(next, options_)) return absl::OkStatus();
  StopPusher(absl::Now() + kReconfigureGrace);
  options_ = next;
  if (next.url.empty()) return absl::OkStatus();
  absl::StatusOr<std::unique_ptr<PyroscopePusher>> pusher = PyroscopePusher::Create(next);
  if (!pusher.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("exporters.push: ", pusher.status().message(), "; not pushing"));
  }
  pusher_ = std::move(*pusher);
  return absl::OkStatus();
}

void PushSink::StopPusher(absl::Time deadline) {
  if (pusher_ == nullptr) return;
  pusher_->Shutdown(deadline);
  Add(retired_, pusher_->Stats());
  pusher_.reset();
}

void PushSink::Shutdown(absl::Time deadline) { StopPusher(deadline); }

PushHealth PushSink::Health() const {
  PushHealth health = retired_;
  if (pusher_ != nullptr) {
    PushStats stats = pusher_->Stats();
    Add(health, stats);
    health.queued = stats.queued;
  }
  return health;
}

absl::Status PushSink::Consume(const ProfileWindow& window) {
  if (pusher_ == nullptr) return absl::OkStatus();
  return pusher_->Push(window.profile, window.start, window.end);
}

}  // namespace pystrobe
