// The command lines of `pystrobe stat` and `pystrobe top`: targets, sort keys,
// the flags they share with each other and with the daemon client.
#include "daemon/cli/accounting_options.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pystrobe {
namespace {

using ::testing::HasSubstr;

TEST(ParseStatOptions, NeedsACommandOrAPidWithADuration) {
  EXPECT_FALSE(ParseStatOptions({}).ok());
  EXPECT_FALSE(ParseStatOptions({"--pid", "12"}).ok());
  absl::StatusOr<StatOptions> pid = ParseStatOptions({"--pid", "12", "-d", "2", "--json"});
  ASSERT_TRUE(pid.ok());
  EXPECT_EQ(*pid->pid, 12u);
  EXPECT_TRUE(pid->json);
  EXPECT_FALSE(pid->syscalls);
  EXPECT_TRUE(ParseStatOptions({"--syscalls", "--", "true"})->syscalls);
  EXPECT_TRUE(pid->offcpu_stacks);
  EXPECT_FALSE(ParseStatOptions({"--no-offcpu-stacks", "--", "true"})->offcpu_stacks);
  absl::StatusOr<StatOptions> cmd = ParseStatOptions({"--", "python3", "-c", "1"});
  ASSERT_TRUE(cmd.ok());
  EXPECT_EQ(cmd->command.size(), 3u);
}

TEST(ParseStatOptions, AllocationsAreOffByDefaultAndTakeASampleMean) {
  EXPECT_FALSE(ParseStatOptions({"--", "true"})->allocations);
  absl::StatusOr<StatOptions> on =
      ParseStatOptions({"--allocations", "--alloc-sample-bytes", "65536", "--", "true"});
  ASSERT_TRUE(on.ok()) << on.status();
  EXPECT_TRUE(on->allocations);
  EXPECT_EQ(on->alloc_sample_bytes, 65536u);
  EXPECT_EQ(ParseStatOptions({"--allocations", "--", "true"})->alloc_sample_bytes, 512u * 1024);
  // A mean without sampling is a mistake, as is a mean of nothing.
  EXPECT_THAT(ParseStatOptions({"--alloc-sample-bytes", "4096", "--", "true"}).status().message(),
              HasSubstr("--allocations"));
  EXPECT_FALSE(ParseStatOptions({"--allocations", "--alloc-sample-bytes", "0", "--", "true"}).ok());
}

TEST(ParseTopOptions, AcceptsTheFourSortKeysOnly) {
  EXPECT_EQ(ParseTopOptions({"--sort", "faults"})->sort, TopSort::kFaults);
  EXPECT_EQ(ParseTopOptions({"-s", "offcpu"})->sort, TopSort::kOffCpu);
  EXPECT_FALSE(ParseTopOptions({"--sort", "mem"}).ok());
  EXPECT_TRUE(ParseTopOptions({"--once"})->once);
}

TEST(AccountingOptions, StatAndTopTakeTheSharedFlagsAlike) {
  absl::StatusOr<StatOptions> stat =
      ParseStatOptions({"-p", "12", "-d", "1", "--rate", "97", "-v"});
  ASSERT_TRUE(stat.ok()) << stat.status();
  absl::StatusOr<TopOptions> top = ParseTopOptions({"--pid", "12", "-r", "97", "--verbose"});
  ASSERT_TRUE(top.ok()) << top.status();
  EXPECT_EQ(*stat->pid, 12u);
  EXPECT_EQ(*top->pid, 12u);
  EXPECT_EQ(stat->rate_hz, 97);
  EXPECT_EQ(top->rate_hz, 97);
  EXPECT_TRUE(stat->verbose);
  EXPECT_TRUE(top->verbose);
  EXPECT_FALSE(ParseStatOptions({"--pid", "x", "-d", "1"}).ok());
  EXPECT_FALSE(ParseTopOptions({"--rate", "0"}).ok());
  EXPECT_FALSE(ParseTopOptions({"--pid"}).ok());
  // --help wins over what follows it, even a bad flag.
  EXPECT_TRUE(ParseStatOptions({"--help", "--bogus"})->help);
  EXPECT_TRUE(ParseTopOptions({"-h", "--bogus"})->help);
}

TEST(AccountingOptions, StatAndTopHelpNameTheDaemonFlags) {
  for (const char* usage : {StatUsage(), TopUsage()}) {
    EXPECT_THAT(usage, HasSubstr("--socket PATH"));
    EXPECT_THAT(usage, HasSubstr("--no-daemon"));
  }
}

}  // namespace
}  // namespace pystrobe
