// The OTLP push's requests and how it reads answers. The exchange itself
// (gRPC over HTTP/2 and plain HTTP, TLS with a client certificate, a receiver
// that is down, slow or answers 503) is checked end to end against receivers
// written in Python: tests/e2e/test_daemon_otlp.py.
#include "exporters/otlp_pusher.h"

#include <string>

#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pystrobe {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::Pair;

HttpUrl Url(const std::string& text) { return *ParseHttpUrl(text); }

std::string ResponseMessage(int64_t rejected, const std::string& message) {
  otlp_collector::ExportProfilesServiceResponse response;
  if (rejected != 0 || !message.empty()) {
    response.mutable_partial_success()->set_rejected_profiles(rejected);
    response.mutable_partial_success()->set_error_message(message);
  }
  return response.SerializeAsString();
}

std::string Frame(const std::string& message) {
  std::string frame(5, '\0');
  frame[4] = static_cast<char>(message.size());  // small messages only
  return frame + message;
}

TEST(OtlpPushRequestTest, GrpcIsOneLengthPrefixedFrameToTheExportMethod) {
  OtlpPushOptions options;
  options.headers = {{"x-scope-orgid", "tenant-a"}};
  options.policy.timeout = absl::Seconds(3);
  HttpRequest request = BuildOtlpHttpRequest(options, Url("http://collector:4317"), "abc");
  EXPECT_EQ(request.target,
            "/opentelemetry.proto.collector.profiles.v1development.ProfilesService/Export");
  EXPECT_EQ(request.body, std::string("\0\0\0\0\3abc", 8));
  EXPECT_THAT(request.headers, Contains(Pair("content-type", "application/grpc")));
  EXPECT_THAT(request.headers, Contains(Pair("te", "trailers")));
  EXPECT_THAT(request.headers, Contains(Pair("grpc-timeout", "3000m")));
  EXPECT_THAT(request.headers, Contains(Pair("x-scope-orgid", "tenant-a")));
}

TEST(OtlpPushRequestTest, HttpProtobufPostsTheMessageUnderThePrefix) {
  OtlpPushOptions options;
  options.protocol = OtlpProtocol::kHttpProtobuf;
  HttpRequest request = BuildOtlpHttpRequest(options, Url("https://otlp.example:443/p/"), "abc");
  EXPECT_EQ(request.target, "/p/v1development/profiles");
  EXPECT_EQ(request.body, "abc");
  EXPECT_THAT(request.headers, Contains(Pair("Content-Type", "application/x-protobuf")));
}

TEST(OtlpPushRequestTest, ProtocolNamesAreThoseOfTheSpecification) {
  EXPECT_EQ(ParseOtlpProtocol("grpc"), OtlpProtocol::kGrpc);
  EXPECT_EQ(ParseOtlpProtocol("http/protobuf"), OtlpProtocol::kHttpProtobuf);
  EXPECT_EQ(ParseOtlpProtocol("http/json"), std::nullopt);
}

HttpResponse Http(int status, HttpHeaders headers = {}, std::string body = "") {
  HttpResponse response;
  response.status = status;
  response.headers = std::move(headers);
  response.body = std::move(body);
  return response;
}

HttpResponse Grpc(int http_status, std::string grpc_status, std::string body = "",
                  HttpHeaders extra = {}) {
  HttpResponse response;
  response.status = http_status;
  response.headers = {{"content-type", "application/grpc"}};
  for (auto& header : extra) response.headers.push_back(header);
  if (!grpc_status.empty()) response.headers.emplace_back("grpc-status", grpc_status);
  response.body = std::move(body);
  return response;
}

TEST(OtlpJudgeTest, GrpcOkIsSentAndPartialSuccessCountsTheRejectedProfiles) {
  PushVerdict ok =
      JudgeOtlpResponse(OtlpProtocol::kGrpc, Grpc(200, "0", Frame("")), "w", absl::Now());
  EXPECT_EQ(ok.outcome, PushVerdict::Outcome::kSent);
  EXPECT_EQ(ok.rejected_items, 0u);
  PushVerdict partial = JudgeOtlpResponse(
      OtlpProtocol::kGrpc, Grpc(200, "0", Frame(ResponseMessage(2, "too old"))), "w", absl::Now());
  EXPECT_EQ(partial.outcome, PushVerdict::Outcome::kSent);
  EXPECT_EQ(partial.rejected_items, 2u);
  EXPECT_THAT(partial.error, HasSubstr("too old"));
}

TEST(OtlpJudgeTest, GrpcUnavailableIsRetriedAndInvalidArgumentIsRejected) {
  HttpResponse unavailable = Grpc(200, "14");
  unavailable.headers.emplace_back("grpc-message", "memory%20limit");
  PushVerdict retry =
      JudgeOtlpResponse(OtlpProtocol::kGrpc, unavailable, "POST http://c:4317/x", absl::Now());
  EXPECT_EQ(retry.outcome, PushVerdict::Outcome::kRetry);
  EXPECT_EQ(retry.reason, PushErrorReason::kGrpcStatus);
  EXPECT_THAT(retry.error, HasSubstr("gRPC status 14: memory limit"));
  PushVerdict rejected = JudgeOtlpResponse(OtlpProtocol::kGrpc, Grpc(200, "3"), "w", absl::Now());
  EXPECT_EQ(rejected.outcome, PushVerdict::Outcome::kRejected);
}

TEST(OtlpJudgeTest, ProxyAnswersInFrontOfGrpcAreJudgedByTheirHttpStatus) {
  PushVerdict busy = JudgeOtlpResponse(
      OtlpProtocol::kGrpc, Grpc(503, "", "busy", {{"Retry-After", "7"}}), "w", absl::Now());
  EXPECT_EQ(busy.outcome, PushVerdict::Outcome::kRetry);
  EXPECT_EQ(busy.retry_after, absl::Seconds(7));
  PushVerdict missing = JudgeOtlpResponse(OtlpProtocol::kGrpc, Grpc(200, ""), "w", absl::Now());
  EXPECT_EQ(missing.outcome, PushVerdict::Outcome::kRetry);
  EXPECT_THAT(missing.error, HasSubstr("without grpc-status"));
  PushVerdict forbidden = JudgeOtlpResponse(OtlpProtocol::kGrpc, Grpc(403, ""), "w", absl::Now());
  EXPECT_EQ(forbidden.outcome, PushVerdict::Outcome::kRejected);
}

TEST(OtlpJudgeTest, HttpRetriesOnlyWhatTheSpecificationRetriesHonouringRetryAfter) {
  for (int status : {429, 502, 503, 504}) {
    HttpResponse response = Http(status, {{"Retry-After", "2"}});
    PushVerdict verdict =
        JudgeOtlpResponse(OtlpProtocol::kHttpProtobuf, response, "w", absl::Now());
    EXPECT_EQ(verdict.outcome, PushVerdict::Outcome::kRetry) << status;
    EXPECT_EQ(verdict.retry_after, absl::Seconds(2)) << status;
  }
  for (int status : {400, 401, 404, 413, 500}) {
    PushVerdict verdict =
        JudgeOtlpResponse(OtlpProtocol::kHttpProtobuf, Http(status), "w", absl::Now());
    EXPECT_EQ(verdict.outcome, PushVerdict::Outcome::kRejected) << status;
  }
  HttpResponse partial = Http(200, {}, ResponseMessage(1, "dup"));
  PushVerdict verdict = JudgeOtlpResponse(OtlpProtocol::kHttpProtobuf, partial, "w", absl::Now());
  EXPECT_EQ(verdict.outcome, PushVerdict::Outcome::kSent);
  EXPECT_EQ(verdict.rejected_items, 1u);
}

TEST(OtlpPushOptionsTest, EndpointHeadersAndPolicyAreChecked) {
  OtlpPushOptions options;
  options.endpoint = "grpc://collector:4317";
  EXPECT_THAT(ValidateOtlpPushOptions(options).status().message(), HasSubstr("otlp: endpoint"));
  options.endpoint = "http://collector:4317";
  options.headers = {{"bad name", "v"}};
  EXPECT_THAT(ValidateOtlpPushOptions(options).status().message(), HasSubstr("HTTP token"));
  options.headers = {{"api-key", "sec\nret"}};
  absl::Status status = ValidateOtlpPushOptions(options).status();
  EXPECT_THAT(status.message(), HasSubstr("control character"));
  EXPECT_THAT(status.message(), ::testing::Not(HasSubstr("sec")));
  options.headers = {};
  options.policy.max_queue = 0;
  EXPECT_THAT(ValidateOtlpPushOptions(options).status().message(), HasSubstr("max_queue"));
}

TEST(OtlpPusherTest, ADownReceiverCountsTheWindowFailedWithoutBlockingPush) {
  OtlpPushOptions options;
  options.endpoint = "http://127.0.0.1:1";  // nothing listens on port 1
  options.protocol = OtlpProtocol::kHttpProtobuf;
  options.policy.max_attempts = 2;
  options.policy.initial_backoff = absl::Milliseconds(10);
  options.policy.max_backoff = absl::Milliseconds(10);
  absl::StatusOr<std::unique_ptr<OtlpPusher>> pusher = OtlpPusher::Create(options);
  ASSERT_TRUE(pusher.ok()) << pusher.status();
  Profile profile;
  profile.sample_rate_hz = 10;
  profile.Add({{"python3 (42)", FrameKind::kProcess}, {"work (a.py:1)", FrameKind::kPython}}, 3);
  const Profile* profiles[] = {&profile};
  absl::Time before = absl::Now();
  ASSERT_TRUE((*pusher)->Push(profiles).ok());
  EXPECT_LT(absl::Now() - before, absl::Milliseconds(500));
  for (int i = 0; i < 200 && (*pusher)->Stats().failed == 0; ++i)
    absl::SleepFor(absl::Milliseconds(10));
  PushStats stats = (*pusher)->Stats();
  EXPECT_EQ(stats.failed, 1u);
  EXPECT_EQ(stats.retried, 1u);
  EXPECT_EQ(stats.errors[static_cast<size_t>(PushErrorReason::kConnect)], 2u);
  (*pusher)->Shutdown(absl::Now());
  EXPECT_EQ((*pusher)->Push(profiles).code(), absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace pystrobe
