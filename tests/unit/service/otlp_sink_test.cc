// exporters.otlp in the daemon: options from the configuration (header values
// read from their files, never quoted in errors), the sink turned on and off
// by Configure, and its windows counted when the receiver is down.
#include "daemon/service/otlp_sink.h"

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pystrobe {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::Pair;

class OtlpSinkTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/pystrobe-otlp-sink-test-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string Write(const std::string& name, const std::string& content) {
    std::string path = absl::StrCat(dir_, "/", name);
    std::ofstream(path) << content;
    return path;
  }

  std::string dir_;
};

TEST_F(OtlpSinkTest, HeaderFilesAreReadIntoHeaderValues) {
  DaemonConfig config;
  config.exporters.otlp.endpoint = "http://127.0.0.1:4318";
  config.exporters.otlp.protocol = "http/protobuf";
  config.exporters.otlp.headers = {{"X-Scope-OrgID", "team-a"}};
  config.exporters.otlp.header_files = {{"Authorization", Write("key", "Bearer k-1\n")}};
  config.exporters.otlp.service_name = "checkout";
  absl::StatusOr<OtlpPushOptions> options = OtlpOptionsFrom(config);
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->protocol, OtlpProtocol::kHttpProtobuf);
  EXPECT_THAT(options->headers, Contains(Pair("X-Scope-OrgID", "team-a")));
  EXPECT_THAT(options->headers, Contains(Pair("Authorization", "Bearer k-1")));
  EXPECT_EQ(options->resource.service_name, "checkout");
}

TEST_F(OtlpSinkTest, AnUnreadableHeaderFileNamesTheKeyAndLeavesTheSinkOff) {
  DaemonConfig config;
  config.exporters.otlp.endpoint = "http://127.0.0.1:4318";
  config.exporters.otlp.header_files = {{"Authorization", absl::StrCat(dir_, "/missing")}};
  OtlpSink sink;
  absl::Status status = sink.Configure(config);
  EXPECT_FALSE(status.ok());
  EXPECT_THAT(status.message(), HasSubstr("exporters.otlp.header_files.Authorization"));
  EXPECT_FALSE(sink.active());
}

TEST_F(OtlpSinkTest, AnEmptyEndpointTurnsTheExportOff) {
  DaemonConfig config;
  config.exporters.otlp.endpoint = "http://127.0.0.1:1";
  OtlpSink sink;
  ASSERT_TRUE(sink.Configure(config).ok());
  EXPECT_TRUE(sink.active());
  config.exporters.otlp.endpoint = "";
  ASSERT_TRUE(sink.Configure(config).ok());
  EXPECT_FALSE(sink.active());
  ProfileWindow window;
  EXPECT_TRUE(sink.Consume(window).ok()) << "no export: the window is simply not sent";
}

TEST_F(OtlpSinkTest, WindowsToADownReceiverAreCountedAndCarryOverAReconfiguration) {
  DaemonConfig config;
  config.exporters.otlp.endpoint = "http://127.0.0.1:1";  // nothing listens on port 1
  OtlpSink sink;
  ASSERT_TRUE(sink.Configure(config).ok());
  ProfileWindow window;
  window.profile.sample_rate_hz = 19;
  window.profile.Add({{"python3 (42)", FrameKind::kProcess}, {"f (a.py:1)", FrameKind::kPython}},
                     2);
  ASSERT_TRUE(sink.Consume(window).ok());
  for (int i = 0; i < 100 && sink.Health().errors[0] == 0; ++i) {
    absl::SleepFor(absl::Milliseconds(20));
  }
  EXPECT_GE(sink.Health().errors[static_cast<size_t>(PushErrorReason::kConnect)], 1u);
  EXPECT_THAT(sink.LastError(), HasSubstr("127.0.0.1:1"));
  // Another endpoint: a new pusher; the counts so far stay.
  config.exporters.otlp.endpoint = "http://127.0.0.1:2";
  ASSERT_TRUE(sink.Configure(config).ok());
  PushHealth health = sink.Health();
  EXPECT_EQ(health.enqueued, 1u);
  EXPECT_EQ(health.enqueued, health.sent + health.failed + health.rejected +
                                 health.dropped_shutdown + health.dropped_queue_full);
}

}  // namespace
}  // namespace pystrobe
