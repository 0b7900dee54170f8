// The value parsers the configuration file and the command line share.
#include <cstdint>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "config/config.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pystrobe {
namespace {

using ::testing::HasSubstr;

TEST(ParseDurationTest, AcceptsEachUnit) {
  EXPECT_EQ(*ParseDuration("500ms"), absl::Milliseconds(500));
  EXPECT_EQ(*ParseDuration("30s"), absl::Seconds(30));
  EXPECT_EQ(*ParseDuration("90m"), absl::Minutes(90));
  EXPECT_EQ(*ParseDuration("24h"), absl::Hours(24));
  EXPECT_EQ(*ParseDuration("7d"), absl::Hours(7 * 24));
  EXPECT_EQ(*ParseDuration("2w"), absl::Hours(14 * 24));
}

TEST(ParseDurationTest, AddsUpSeveralParts) {
  EXPECT_EQ(*ParseDuration("1h30m"), absl::Minutes(90));
  EXPECT_EQ(*ParseDuration("1d12h"), absl::Hours(36));
  EXPECT_EQ(*ParseDuration("1m500ms"), absl::Milliseconds(60500));
}

TEST(ParseDurationTest, BareZeroIsZeroAndSurroundingSpaceIsIgnored) {
  EXPECT_EQ(*ParseDuration("0"), absl::ZeroDuration());
  EXPECT_EQ(*ParseDuration(" 5m "), absl::Minutes(5));
}

TEST(ParseDurationTest, RejectsWhatIsNotADurationWithAnExample) {
  for (const char* bad : {"7 days", "7", "", "h", "7x", "1.5h", "-5m", "5mm", "m5", "5M"}) {
    absl::StatusOr<absl::Duration> parsed = ParseDuration(bad);
    ASSERT_FALSE(parsed.ok()) << bad;
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(parsed.status().message(), HasSubstr("is not a duration (use e.g. 90m, 24h, 7d)"));
  }
  EXPECT_EQ(ParseDuration("7 days").status().message(),
            "\"7 days\" is not a duration (use e.g. 90m, 24h, 7d)");
}

TEST(ParseDurationTest, RejectsOverflow) {
  EXPECT_FALSE(ParseDuration("9999999999999999999w").ok());
  EXPECT_FALSE(ParseDuration("99999999999999999d").ok());
}

TEST(FormatConfigDurationTest, UsesTheLargestExactUnitAndRoundTrips) {
  EXPECT_EQ(FormatConfigDuration(absl::Hours(7 * 24)), "1w");
  EXPECT_EQ(FormatConfigDuration(absl::Hours(48)), "2d");
  EXPECT_EQ(FormatConfigDuration(absl::Minutes(90)), "90m");
  EXPECT_EQ(FormatConfigDuration(absl::Milliseconds(1500)), "1500ms");
  EXPECT_EQ(FormatConfigDuration(absl::ZeroDuration()), "0");
  for (absl::Duration d : {absl::Seconds(10), absl::Minutes(61), absl::Milliseconds(100)}) {
    EXPECT_EQ(*ParseDuration(FormatConfigDuration(d)), d);
  }
}

TEST(ParseSizeTest, AcceptsBinaryAndDecimalUnitsAndBareBytes) {
  EXPECT_EQ(*ParseSize("1GiB"), uint64_t{1} << 30);
  EXPECT_EQ(*ParseSize("500MiB"), uint64_t{500} << 20);
  EXPECT_EQ(*ParseSize("64KiB"), uint64_t{64} << 10);
  EXPECT_EQ(*ParseSize("2TiB"), uint64_t{2} << 40);
  EXPECT_EQ(*ParseSize("512B"), 512u);
  EXPECT_EQ(*ParseSize("100KB"), 100000u);
  EXPECT_EQ(*ParseSize("500MB"), 500000000u);
  EXPECT_EQ(*ParseSize("1GB"), 1000000000u);
  EXPECT_EQ(*ParseSize("1TB"), 1000000000000u);
  EXPECT_EQ(*ParseSize("4096"), 4096u);
  EXPECT_EQ(*ParseSize("0"), 0u);
}

TEST(ParseSizeTest, RejectsWhatIsNotASize) {
  for (const char* bad : {"1 GiB", "1gib", "1G", "GiB", "", "1.5GiB", "-1MiB", "1GiBs"}) {
    absl::StatusOr<uint64_t> parsed = ParseSize(bad);
    ASSERT_FALSE(parsed.ok()) << bad;
    EXPECT_THAT(parsed.status().message(), HasSubstr("is not a size (use e.g. 500MiB, 1GiB)"));
  }
  EXPECT_THAT(ParseSize("99999999999TiB").status().message(), HasSubstr("too large"));
}

TEST(FormatConfigSizeTest, UsesTheLargestExactBinaryUnit) {
  EXPECT_EQ(FormatConfigSize(uint64_t{1} << 30), "1GiB");
  EXPECT_EQ(FormatConfigSize(uint64_t{256} << 20), "256MiB");
  EXPECT_EQ(FormatConfigSize(1536), "1536B");
  EXPECT_EQ(FormatConfigSize(3072), "3KiB");
  EXPECT_EQ(FormatConfigSize(1000), "1000B");
  EXPECT_EQ(FormatConfigSize(0), "0");
}

TEST(ParseBoundedIntTest, NamesTheRange) {
  EXPECT_EQ(*ParseBoundedInt("19", 1, 1000), 19);
  EXPECT_EQ(ParseBoundedInt("0", 1, 1000).status().message(), "0 is out of range (1 to 1000)");
  EXPECT_EQ(ParseBoundedInt("0", 1, 1000).status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(ParseBoundedInt("fast", 1, 1000).status().message(), "\"fast\" is not an integer");
  EXPECT_FALSE(ParseBoundedInt("19.5", 1, 1000).ok());
  EXPECT_FALSE(ParseBoundedInt("", 1, 1000).ok());
}

TEST(ParseBoolTest, OnlyTrueAndFalse) {
  EXPECT_TRUE(*ParseBool("true"));
  EXPECT_TRUE(*ParseBool("True"));
  EXPECT_FALSE(*ParseBool("FALSE"));
  for (const char* bad : {"yes", "no", "on", "1", ""}) {
    EXPECT_THAT(ParseBool(bad).status().message(), HasSubstr("is not a boolean")) << bad;
  }
}

TEST(ParseWindowTest, SecondsOrDurationWithinOneHour) {
  EXPECT_EQ(*ParseWindow("60"), absl::Seconds(60));
  EXPECT_EQ(*ParseWindow("5m"), absl::Minutes(5));
  EXPECT_EQ(*ParseWindow("1"), absl::Seconds(1));
  EXPECT_EQ(*ParseWindow("3600"), absl::Hours(1));
  EXPECT_THAT(ParseWindow("0").status().message(), HasSubstr("out of range (1 to 3600 seconds)"));
  EXPECT_THAT(ParseWindow("2h").status().message(), HasSubstr("out of range"));
  EXPECT_THAT(ParseWindow("1500ms").status().message(), HasSubstr("whole number of seconds"));
  EXPECT_THAT(ParseWindow("soon").status().message(), HasSubstr("not a number of seconds"));
}

TEST(ValidateListenAddressTest, AcceptsHostPortForms) {
  for (const char* good : {"127.0.0.1:9464", "0.0.0.0:9464", ":9464", "[::]:9464", "[::1]:1",
                           "localhost:65535", "node-1.example.com:9464"}) {
    EXPECT_TRUE(ValidateListenAddress(good).ok()) << good;
  }
}

TEST(ValidateListenAddressTest, RejectsBadPortsAndHosts) {
  for (const char* bad : {"9464", "127.0.0.1", "127.0.0.1:0", "127.0.0.1:65536", "host:http",
                          "::1:9464", "[::1:9464", "a b:80", "127.0.0.1:"}) {
    EXPECT_THAT(ValidateListenAddress(bad).message(), HasSubstr("is not a HOST:PORT address"))
        << bad;
  }
}

TEST(ValidatePathsTest, AbsoluteWithoutDotDot) {
  EXPECT_TRUE(ValidateAbsolutePath("/var/lib/pystrobe/profiles").ok());
  EXPECT_FALSE(ValidateAbsolutePath("profiles").ok());
  EXPECT_FALSE(ValidateAbsolutePath("/var/../etc").ok());
  EXPECT_TRUE(ValidateCgroupPath("/system.slice/nginx.service").ok());
  EXPECT_TRUE(ValidateCgroupPath("/").ok());
  EXPECT_THAT(ValidateCgroupPath("system.slice").message(), HasSubstr("not a cgroup path"));
}

TEST(ValidatePushUrlTest, HttpWithAHost) {
  EXPECT_TRUE(ValidatePushUrl("http://pyroscope:4040").ok());
  EXPECT_TRUE(ValidatePushUrl("http://profiles.example.com/ingest").ok());
  EXPECT_FALSE(ValidatePushUrl("ftp://x").ok());
  EXPECT_FALSE(ValidatePushUrl("pyroscope:4040").ok());
  EXPECT_FALSE(ValidatePushUrl("http://").ok());
  EXPECT_FALSE(ValidatePushUrl("http://a b").ok());
}

TEST(ValidatePushUrlTest, HttpsIsAccepted) {
  EXPECT_TRUE(ValidatePushUrl("https://profiles.example.com").ok());
  EXPECT_TRUE(ValidatePushUrl("https://[::1]:4443/pyroscope").ok());
  EXPECT_THAT(ValidatePushUrl("https://store/ingest?x=1").message(), HasSubstr("query"));
}

TEST(ValidateStaticLabelNameTest, PrometheusNamesThatPystrobeDoesNotSet) {
  EXPECT_TRUE(ValidateStaticLabelName("cluster").ok());
  EXPECT_TRUE(ValidateStaticLabelName("_private2").ok());
  EXPECT_THAT(ValidateStaticLabelName("2fast").message(), HasSubstr("not a valid Prometheus"));
  EXPECT_THAT(ValidateStaticLabelName("team-name").message(), HasSubstr("not a valid Prometheus"));
  EXPECT_THAT(ValidateStaticLabelName("").message(), HasSubstr("not a valid Prometheus"));
  EXPECT_THAT(ValidateStaticLabelName("__name__").message(), HasSubstr("reserved"));
  EXPECT_THAT(ValidateStaticLabelName("pid").message(), HasSubstr("set by pystrobe itself"));
  EXPECT_THAT(ValidateStaticLabelName("container_id").message(), HasSubstr("set by pystrobe"));
  EXPECT_THAT(ValidateStaticLabelName("pid_in_namespace").message(), HasSubstr("set by pystrobe"));
  EXPECT_THAT(ValidateStaticLabelName("outcome").message(), HasSubstr("set by pystrobe"));
}

TEST(ValidateContainerIdTest, LowercaseHexTwelveToSixtyFour) {
  EXPECT_TRUE(ValidateContainerId("0123456789ab").ok());
  EXPECT_TRUE(ValidateContainerId(std::string(64, 'f')).ok());
  EXPECT_FALSE(ValidateContainerId("0123456789a").ok());
  EXPECT_FALSE(ValidateContainerId(std::string(65, 'f')).ok());
  EXPECT_FALSE(ValidateContainerId("0123456789AB").ok());
  EXPECT_FALSE(ValidateContainerId("nginx-container").ok());
}

TEST(ValidateProcessNamePatternTest, CompilesAsEcmaScript) {
  EXPECT_TRUE(ValidateProcessNamePattern("python3(\\.[0-9]+)?").ok());
  EXPECT_THAT(ValidateProcessNamePattern("python(").message(),
              HasSubstr("is not a regular expression"));
  EXPECT_FALSE(ValidateProcessNamePattern("").ok());
}

}  // namespace
}  // namespace pystrobe
