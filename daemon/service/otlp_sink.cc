#include "daemon/service/otlp_sink.h"

#include <functional>
#include <string>
#include <utility>

#include "absl/hash/hash.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "daemon/service/push_sink.h"

namespace pystrobe {
namespace {

// Two option sets are the same pusher when this is equal. Header values may
// be keys: only their hash is kept here.
std::string OptionsKey(const OtlpPushOptions& options) {
  std::string key = absl::StrCat(
      options.endpoint, "\n", std::string(OtlpProtocolName(options.protocol)), "\n",
      absl::FormatDuration(options.policy.timeout), "\n", options.policy.max_queue, "\n",
      options.tls.ca_file, "\n", options.tls.cert_file, "\n", options.tls.key_file, "\n",
      options.tls.insecure_skip_verify, "\n", options.resource.service_name, "\n");
  for (const auto& [name, value] : options.headers) {
    absl::StrAppend(&key, name, "=", absl::HashOf(value), "\n");
  }
  return key;
}

}  // namespace

absl::StatusOr<OtlpPushOptions> OtlpOptionsFrom(const DaemonConfig& config) {
  const OtlpConfig& otlp = config.exporters.otlp;
  OtlpPushOptions options;
  options.endpoint = otlp.endpoint;
  options.protocol = ParseOtlpProtocol(otlp.protocol).value_or(OtlpProtocol::kGrpc);
  options.policy.timeout = otlp.timeout;
  options.policy.max_queue = otlp.max_queue;
  options.tls = HttpTlsOptions{.ca_file = otlp.tls.ca_file,
                               .cert_file = otlp.tls.cert_file,
                               .key_file = otlp.tls.key_file,
                               .insecure_skip_verify = otlp.tls.insecure_skip_verify};
  for (const auto& [name, value] : otlp.headers) options.headers.emplace_back(name, value);
  for (const auto& [name, path] : otlp.header_files) {
    absl::StatusOr<std::string> value = ReadSecretFile(path);
    if (!value.ok()) {
      return absl::Status(value.status().code(),
                          absl::StrCat("header_files.", name, ": ", value.status().message()));
    }
    options.headers.emplace_back(name, *std::move(value));
  }
  options.resource.service_name = otlp.service_name;
  return options;
}

OtlpSink::~OtlpSink() { Shutdown(absl::Now()); }

absl::Status OtlpSink::Configure(const DaemonConfig& config) {
  absl::StatusOr<OtlpPushOptions> read = OtlpOptionsFrom(config);
  if (!read.ok()) {
    pusher_.Stop(absl::Now() + kReconfigureGrace);
    options_key_.clear();
    return absl::Status(
        read.status().code(),
        absl::StrCat("exporters.otlp.", read.status().message(), "; not exporting OTLP"));
  }
  std::string key = OptionsKey(*read);
  if (pusher_.get() != nullptr && key == options_key_) return absl::OkStatus();
  pusher_.Stop(absl::Now() + kReconfigureGrace);
  options_key_.clear();
  if (read->endpoint.empty()) return absl::OkStatus();
  absl::StatusOr<std::unique_ptr<OtlpPusher>> pusher = OtlpPusher::Create(*std::move(read));
  if (!pusher.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("exporters.", pusher.status().message(), "; not exporting OTLP"));
  }
  pusher_.Start(std::move(*pusher));
  options_key_ = std::move(key);
  return absl::OkStatus();
}

void OtlpSink::Shutdown(absl::Time deadline) { pusher_.Stop(deadline); }

PushHealth OtlpSink::Health() const { return pusher_.Health(); }

std::string OtlpSink::LastError() const { return pusher_.LastError(); }

absl::Status OtlpSink::Consume(const ProfileWindow& window) {
  if (pusher_.get() == nullptr) return absl::OkStatus();
  const Profile* profiles[] = {&window.profile, window.memory ? &*window.memory : nullptr};
  return pusher_.get()->Push(profiles);
}

}  // namespace pystrobe
