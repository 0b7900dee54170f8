#include "daemon/service/push_sink.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "config/config.h"

namespace pystrobe {
namespace {

bool SameOptions(const PyroscopePushOptions& a, const PyroscopePushOptions& b) {
  return a.url == b.url && a.app_name == b.app_name && a.labels == b.labels &&
         a.policy.timeout == b.policy.timeout && a.policy.max_queue == b.policy.max_queue &&
         a.client == b.client && a.tenant_id == b.tenant_id && a.headers == b.headers;
}

}  // namespace

void AddPushStats(PushHealth& total, const PushStats& stats) {
  total.enqueued += stats.enqueued;
  total.sent += stats.sent;
  total.retried += stats.retried;
  total.dropped_queue_full += stats.dropped_queue_full;
  total.dropped_shutdown += stats.dropped_shutdown;
  total.rejected += stats.rejected;
  total.failed += stats.failed;
  total.bytes_sent += stats.bytes_sent;
  total.rejected_items += stats.rejected_items;
  for (size_t i = 0; i < stats.errors.size(); ++i) total.errors[i] += stats.errors[i];
}

absl::StatusOr<PyroscopePushOptions> PushOptionsFrom(const DaemonConfig& config) {
  const PushConfig& push = config.exporters.push;
  PyroscopePushOptions options;
  options.url = push.url;
  options.policy.timeout = push.timeout;
  options.policy.max_queue = push.max_queue;
  options.labels = config.labels;
  options.tenant_id = push.tenant_id;
  for (const auto& [name, value] : push.headers) options.headers.emplace_back(name, value);
  options.client.tls = HttpTlsOptions{.ca_file = push.tls.ca_file,
                                      .cert_file = push.tls.cert_file,
                                      .key_file = push.tls.key_file,
                                      .insecure_skip_verify = push.tls.insecure_skip_verify};
  if (!push.basic_auth.username.empty()) {
    absl::StatusOr<std::string> password = ReadSecretFile(push.basic_auth.password_file);
    if (!password.ok()) {
      return absl::Status(password.status().code(),
                          absl::StrCat("basic_auth.password_file: ", password.status().message()));
    }
    options.client.credentials.basic_username = push.basic_auth.username;
    options.client.credentials.basic_password = *std::move(password);
  }
  if (!push.bearer_token_file.empty()) {
    absl::StatusOr<std::string> token = ReadSecretFile(push.bearer_token_file);
    if (!token.ok()) {
      return absl::Status(token.status().code(),
                          absl::StrCat("bearer_token_file: ", token.status().message()));
    }
    options.client.credentials.bearer_token = *std::move(token);
  }
  return options;
}

PushSink::~PushSink() { Shutdown(absl::Now()); }

absl::Status PushSink::Configure(const DaemonConfig& config) {
  absl::StatusOr<PyroscopePushOptions> read = PushOptionsFrom(config);
  if (!read.ok()) {
    pusher_.Stop(absl::Now() + kReconfigureGrace);
    options_ = PyroscopePushOptions();
    return absl::Status(read.status().code(),
                        absl::StrCat("exporters.push.", read.status().message(), "; not pushing"));
  }
  PyroscopePushOptions next = *std::move(read);
  if (pusher_.get() != nullptr && SameOptions(next, options_)) return absl::OkStatus();
  pusher_.Stop(absl::Now() + kReconfigureGrace);
  options_ = next;
  if (next.url.empty()) return absl::OkStatus();
  absl::StatusOr<std::unique_ptr<PyroscopePusher>> pusher = PyroscopePusher::Create(next);
  if (!pusher.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("exporters.push: ", pusher.status().message(), "; not pushing"));
  }
  pusher_.Start(std::move(*pusher));
  return absl::OkStatus();
}

void PushSink::Shutdown(absl::Time deadline) { pusher_.Stop(deadline); }

PushHealth PushSink::Health() const { return pusher_.Health(); }

std::string PushSink::LastError() const { return pusher_.LastError(); }

absl::Status PushSink::Consume(const ProfileWindow& window) {
  if (pusher_.get() == nullptr) return absl::OkStatus();
  absl::Status status = pusher_.get()->Push(window.profile, window.start, window.end);
  // The resident-growth profile (memory: true), as a profile of its own type.
  if (window.memory) status.Update(pusher_.get()->Push(*window.memory, window.start, window.end));
  return status;
}

}  // namespace pystrobe
