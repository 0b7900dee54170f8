#include "exporters/otlp_pusher.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"

namespace pystrobe {
namespace {

// gRPC status codes (grpc/doc/statuscodes.md).
enum GrpcCode : int {
  kGrpcOk = 0,
  kGrpcCancelled = 1,
  kGrpcUnknown = 2,
  kGrpcDeadlineExceeded = 4,
  kGrpcResourceExhausted = 8,
  kGrpcAborted = 10,
  kGrpcOutOfRange = 11,
  kGrpcUnavailable = 14,
  kGrpcDataLoss = 15,
};

// The codes OTLP/gRPC senders retry (the OTLP specification's table).
// RESOURCE_EXHAUSTED is retried too: the receiver says so only when it
// expects to recover (a memory limiter), and our retries are bounded.
bool IsRetryableGrpcCode(int code) {
  switch (code) {
    case kGrpcCancelled:
    case kGrpcDeadlineExceeded:
    case kGrpcResourceExhausted:
    case kGrpcAborted:
    case kGrpcOutOfRange:
    case kGrpcUnavailable:
    case kGrpcDataLoss:
      return true;
    default:
      return false;
  }
}

// The HTTP statuses OTLP/HTTP senders retry.
bool IsRetryableOtlpHttpStatus(int status) {
  return status == 429 || status == 502 || status == 503 || status == 504;
}

// A gRPC length-prefixed message: compressed flag 0, 4-byte big-endian length.
std::string GrpcFrame(std::string_view message) {
  std::string frame(5, '\0');
  uint32_t size = static_cast<uint32_t>(message.size());
  frame[1] = static_cast<char>(size >> 24);
  frame[2] = static_cast<char>(size >> 16);
  frame[3] = static_cast<char>(size >> 8);
  frame[4] = static_cast<char>(size);
  frame.append(message);
  return frame;
}

// The message of a body holding one uncompressed gRPC frame; nullopt when
// the body is not that.
std::optional<std::string_view> GrpcFrameMessage(std::string_view body) {
  if (body.size() < 5 || body[0] != 0) return std::nullopt;
  uint32_t size = (static_cast<uint32_t>(static_cast<uint8_t>(body[1])) << 24) |
                  (static_cast<uint32_t>(static_cast<uint8_t>(body[2])) << 16) |
                  (static_cast<uint32_t>(static_cast<uint8_t>(body[3])) << 8) |
                  static_cast<uint32_t>(static_cast<uint8_t>(body[4]));
  if (body.size() - 5 < size) return std::nullopt;
  return body.substr(5, size);
}

// grpc-message is percent-encoded (gRPC's PROTOCOL-HTTP2.md).
std::string PercentDecode(std::string_view text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    int value = 0;
    if (text[i] == '%' && i + 2 < text.size() &&
        absl::SimpleHexAtoi(absl::string_view(text.data() + i + 1, 2), &value)) {
      out.push_back(static_cast<char>(value));
      i += 2;
    } else {
      out.push_back(text[i]);
    }
  }
  return out;
}

// A partial success: the profiles refused, and the receiver's message.
void ReadPartialSuccess(std::string_view message, PushVerdict& verdict) {
  otlp_collector::ExportProfilesServiceResponse response;
  if (message.empty() ||
      !response.ParseFromArray(message.data(), static_cast<int>(message.size()))) {
    return;  // an empty or unreadable response is a plain success
  }
  const auto& partial = response.partial_success();
  verdict.rejected_items = static_cast<uint64_t>(std::max<int64_t>(0, partial.rejected_profiles()));
  if (partial.rejected_profiles() > 0 || !partial.error_message().empty()) {
    verdict.error =
        absl::StrCat("partial success: ", partial.rejected_profiles(),
                     " profiles rejected: ", ShortResponseBody(partial.error_message()));
  }
}

bool IsTokenChar(char c) {
  return absl::ascii_isalnum(static_cast<unsigned char>(c)) ||
         absl::string_view("!#$%&'*+-.^_`|~").find(c) != absl::string_view::npos;
}

}  // namespace

std::optional<OtlpProtocol> ParseOtlpProtocol(std::string_view text) {
  if (text == "grpc") return OtlpProtocol::kGrpc;
  if (text == "http/protobuf") return OtlpProtocol::kHttpProtobuf;
  return std::nullopt;
}

std::string_view OtlpProtocolName(OtlpProtocol protocol) {
  return protocol == OtlpProtocol::kGrpc ? "grpc" : "http/protobuf";
}

HttpRequest BuildOtlpHttpRequest(const OtlpPushOptions& options, const HttpUrl& url,
                                 std::string_view message) {
  HttpRequest request;
  request.method = "POST";
  if (options.protocol == OtlpProtocol::kGrpc) {
    request.target = absl::StrCat(url.path_prefix, kOtlpGrpcExportPath);
    request.headers = {
        {"content-type", "application/grpc"},
        {"te", "trailers"},
        // The receiver may stop work the sender no longer waits for.
        {"grpc-timeout", absl::StrCat(absl::ToInt64Milliseconds(options.policy.timeout), "m")}};
    request.body = GrpcFrame(message);
  } else {
    request.target = absl::StrCat(url.path_prefix, kOtlpHttpExportPath);
    request.headers = {{"Content-Type", "application/x-protobuf"}};
    request.body = std::string(message);
  }
  for (const auto& header : options.headers) request.headers.push_back(header);
  return request;
}

PushVerdict JudgeOtlpResponse(OtlpProtocol protocol, const HttpResponse& response,
                              std::string_view where_in, absl::Time now) {
  absl::string_view where(where_in.data(), where_in.size());
  PushVerdict verdict;
  std::optional<absl::Duration> retry_after;
  if (std::optional<std::string> value = response.Header("Retry-After")) {
    retry_after = ParseRetryAfter(*value, now);
  }
  std::optional<std::string> grpc_status =
      protocol == OtlpProtocol::kGrpc ? response.Header("grpc-status") : std::nullopt;

  if (protocol == OtlpProtocol::kGrpc && grpc_status) {
    int code = kGrpcUnknown;
    if (!absl::SimpleAtoi(*grpc_status, &code)) code = kGrpcUnknown;
    if (code == kGrpcOk) {
      if (std::optional<std::string_view> message = GrpcFrameMessage(response.body)) {
        ReadPartialSuccess(*message, verdict);
      }
      return verdict;
    }
    verdict.reason = PushErrorReason::kGrpcStatus;
    verdict.error = absl::StrCat(
        where, ": gRPC status ", code, ": ",
        ShortResponseBody(PercentDecode(response.Header("grpc-message").value_or(""))));
    verdict.outcome =
        IsRetryableGrpcCode(code) ? PushVerdict::Outcome::kRetry : PushVerdict::Outcome::kRejected;
    verdict.retry_after = retry_after;
    return verdict;
  }

  if (protocol == OtlpProtocol::kHttpProtobuf && response.status >= 200 && response.status < 300) {
    ReadPartialSuccess(response.body, verdict);
    return verdict;
  }
  // An HTTP error, or (gRPC) an answer without a gRPC status: a proxy's, or
  // a server that is not gRPC.
  verdict.reason = PushErrorReason::kHttpStatus;
  verdict.error = absl::StrCat(where, ": HTTP ", response.status, " ", response.reason, ": ",
                               ShortResponseBody(response.body));
  bool retry = protocol == OtlpProtocol::kGrpc
                   ? (response.status == 200 || response.status >= 500 ||
                      IsRetryableOtlpHttpStatus(response.status))
                   : IsRetryableOtlpHttpStatus(response.status);
  if (protocol == OtlpProtocol::kGrpc && response.status == 200) {
    verdict.reason = PushErrorReason::kGrpcStatus;
    verdict.error = absl::StrCat(where, ": a gRPC answer without grpc-status");
  }
  verdict.outcome = retry ? PushVerdict::Outcome::kRetry : PushVerdict::Outcome::kRejected;
  verdict.retry_after = retry_after;
  return verdict;
}

absl::StatusOr<HttpUrl> ValidateOtlpPushOptions(const OtlpPushOptions& options) {
  absl::StatusOr<HttpUrl> url = ParseHttpUrl(options.endpoint);
  if (!url.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("otlp: endpoint: ", url.status().message()));
  }
  for (const auto& [name, value] : options.headers) {
    if (name.empty() || !std::all_of(name.begin(), name.end(), IsTokenChar)) {
      return absl::InvalidArgumentError(
          absl::StrCat("otlp: header name \"", name, "\" is not an HTTP token"));
    }
    if (std::any_of(value.begin(), value.end(), [](char c) {
          return absl::ascii_iscntrl(static_cast<unsigned char>(c)) && c != '\t';
        })) {
      // The value is left out: a header may carry a key.
      return absl::InvalidArgumentError(
          absl::StrCat("otlp: header ", name, ": the value has a control character"));
    }
  }
  if (absl::Status policy = ValidatePushRetryPolicy(options.policy, "otlp"); !policy.ok()) {
    return policy;
  }
  return url;
}

absl::StatusOr<std::unique_ptr<OtlpPusher>> OtlpPusher::Create(OtlpPushOptions options) {
  absl::StatusOr<HttpUrl> url = ValidateOtlpPushOptions(options);
  if (!url.ok()) return url.status();
  HttpClientOptions client_options;
  client_options.tls = options.tls;
  client_options.http2 = options.protocol == OtlpProtocol::kGrpc;
  absl::StatusOr<std::unique_ptr<HttpClient>> client = HttpClient::Create(*url, client_options);
  if (!client.ok()) {
    return absl::Status(client.status().code(), absl::StrCat("otlp: ", client.status().message()));
  }
  return std::unique_ptr<OtlpPusher>(
      new OtlpPusher(std::move(options), *std::move(url), *std::move(client)));
}

OtlpPusher::OtlpPusher(OtlpPushOptions options, HttpUrl url, std::unique_ptr<HttpClient> client)
    : options_(std::move(options)),
      url_(std::move(url)),
      where_(absl::StrCat(
          "POST ", url_.ToString(options_.protocol == OtlpProtocol::kGrpc ? kOtlpGrpcExportPath
                                                                          : kOtlpHttpExportPath))),
      queue_(options_.policy, std::move(client),
             [this](const HttpRequest&, const HttpResponse& response) {
               return JudgeOtlpResponse(options_.protocol, response, where_, absl::Now());
             }) {}

absl::Status OtlpPusher::Push(std::span<const Profile* const> profiles) {
  if (queue_.stopping()) return absl::FailedPreconditionError("otlp: the pusher is shut down");
  std::string message;
  if (!ToOtlpRequest(profiles, options_.resource).SerializeToString(&message)) {
    return absl::InternalError("otlp: serializing the request failed");
  }
  return queue_.Enqueue(BuildOtlpHttpRequest(options_, url_, message));
}

}  // namespace pystrobe
