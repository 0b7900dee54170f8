// The command line of `pystrobe daemon`: the override flags take their value
// separately or inline and keep its text for the configuration's checks.
#include "daemon/cli/daemon_options.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pystrobe {
namespace {

using ::testing::HasSubstr;

TEST(DaemonOptionsTest, OverridesTakeSeparateAndInlineValues) {
  absl::StatusOr<DaemonArgs> args =
      ParseDaemonArgs({"--rate", "49", "--window=30", "--profile-dir", "/d",
                       "--prometheus-listen=:1", "--config", "/x"});
  ASSERT_TRUE(args.ok()) << args.status();
  EXPECT_EQ(args->overrides.rate, "49");
  EXPECT_EQ(args->overrides.window, "30");
  EXPECT_EQ(args->overrides.profile_dir, "/d");
  EXPECT_EQ(args->overrides.prometheus_listen, ":1");
  EXPECT_EQ(args->config_path, "/x");
  EXPECT_FALSE(args->check_config);
  EXPECT_THAT(ParseDaemonArgs({"--rate"}).status().message(), HasSubstr("--rate needs a value"));
}

TEST(DaemonOptionsTest, CheckConfigNamesItsFileAndKeepsTheOverrides) {
  absl::StatusOr<DaemonArgs> args =
      ParseDaemonArgs({"--config", "/etc/a.yaml", "--check-config=/b.yaml", "--rate", "0"});
  ASSERT_TRUE(args.ok()) << args.status();
  EXPECT_TRUE(args->check_config);
  EXPECT_EQ(args->check_config_file, "/b.yaml");
  EXPECT_EQ(args->overrides.rate, "0");  // refused by the check, not the parser
  EXPECT_THAT(ParseDaemonArgs({"--check-config"}).status().message(),
              HasSubstr("--check-config needs a FILE"));
  EXPECT_THAT(ParseDaemonArgs({"--frobnicate"}).status().message(), HasSubstr("--frobnicate"));
}

}  // namespace
}  // namespace pystrobe
