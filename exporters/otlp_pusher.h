// Pushes each window to an OTLP receiver (an OpenTelemetry Collector,
// Pyroscope 2, any Profiles v1development endpoint) as one
// ExportProfilesServiceRequest (exporters/otlp_encoder.h), from the shared
// push queue (exporters/push_queue.h): bounded, retried, counted.
//
// The two transports of the OTLP specification (protocol/exporter.md,
// protocol/otlp.md):
// - grpc: POST <prefix>/opentelemetry.proto.collector.profiles.v1development.
//   ProfilesService/Export over HTTP/2 (prior knowledge on http://, ALPN on
//   https://), content-type application/grpc, te: trailers, the message in
//   one gRPC frame (a 0 byte, its length as 4 big-endian bytes, the bytes);
//   the answer's status is the trailer grpc-status (or a header, in a
//   trailers-only answer), the response message in the body's frame.
// - http/protobuf: POST <prefix>/v1development/profiles, content-type
//   application/x-protobuf, the message as the body; the response message
//   as the 2xx body.
//
// What an answer means: OK / 2xx is sent, with partial_success.
// rejected_profiles counted as rejected items (and its message kept for the
// log). Retried: gRPC UNAVAILABLE, RESOURCE_EXHAUSTED, ABORTED, CANCELLED,
// DEADLINE_EXCEEDED, OUT_OF_RANGE, DATA_LOSS; HTTP 429, 502, 503, 504 (and,
// in front of gRPC, any answer that is not HTTP 200: a proxy's); a
// Retry-After header is honoured on either transport. Anything else is
// rejected: retrying cannot change it.
#ifndef PYSTROBE_EXPORTERS_OTLP_PUSHER_H_
#define PYSTROBE_EXPORTERS_OTLP_PUSHER_H_

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "exporters/http_client.h"
#include "exporters/otlp_encoder.h"
#include "exporters/push_queue.h"
#include "model/profile.h"

namespace pystrobe {

enum class OtlpProtocol { kGrpc, kHttpProtobuf };

// "grpc" / "http/protobuf", as the configuration and OTEL_EXPORTER_OTLP_PROTOCOL
// spell them.
std::optional<OtlpProtocol> ParseOtlpProtocol(std::string_view text);
std::string_view OtlpProtocolName(OtlpProtocol protocol);

inline constexpr char kOtlpGrpcExportPath[] =
    "/opentelemetry.proto.collector.profiles.v1development.ProfilesService/Export";
inline constexpr char kOtlpHttpExportPath[] = "/v1development/profiles";

struct OtlpPushOptions {
  // http[s]://HOST:PORT[/PREFIX] (a collector listens on 4317 for gRPC and
  // 4318 for HTTP by default).
  std::string endpoint;
  OtlpProtocol protocol = OtlpProtocol::kGrpc;
  // TLS (https:// endpoints): a CA, a client certificate for mTLS. Secrets:
  // never in a message.
  HttpTlsOptions tls;
  // Sent with every request (a tenant, an API key): never logged.
  HttpHeaders headers;
  // service.name, host.name of the resources.
  OtlpResourceOptions resource;
  PushRetryPolicy policy;
};

// The request of one window, ready to send: `message` is the serialized
// ExportProfilesServiceRequest. Exposed for tests.
HttpRequest BuildOtlpHttpRequest(const OtlpPushOptions& options, const HttpUrl& url,
                                 std::string_view message);

// What an answer means (see the file comment). `where` names the request
// in the error ("POST https://collector:4317/...Export"). Exposed for tests.
PushVerdict JudgeOtlpResponse(OtlpProtocol protocol, const HttpResponse& response,
                              std::string_view where, absl::Time now);

// Checks the options: the endpoint, the headers, the retry policy.
absl::StatusOr<HttpUrl> ValidateOtlpPushOptions(const OtlpPushOptions& options);

class OtlpPusher {
 public:
  // Validates the options and starts the queue's worker.
  static absl::StatusOr<std::unique_ptr<OtlpPusher>> Create(OtlpPushOptions options);

  // Encodes the window's profiles (the CPU or off-CPU profile, and the
  // resident growth where there is one) as one request on the caller's
  // thread and queues it. FailedPrecondition after Shutdown.
  absl::Status Push(std::span<const Profile* const> profiles);

  PushStats Stats() const { return queue_.Stats(); }
  // See PushQueue::Shutdown.
  void Shutdown(absl::Time deadline) { queue_.Shutdown(deadline); }

 private:
  OtlpPusher(OtlpPushOptions options, HttpUrl url, std::unique_ptr<HttpClient> client);

  const OtlpPushOptions options_;
  const HttpUrl url_;
  const std::string where_;  // "POST <url>" for messages
  PushQueue queue_;
};

}  // namespace pystrobe

#endif  // PYSTROBE_EXPORTERS_OTLP_PUSHER_H_
