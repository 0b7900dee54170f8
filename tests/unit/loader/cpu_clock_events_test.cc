#include "daemon/loader/cpu_clock_events.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pystrobe {
namespace {

using ::testing::ElementsAre;

TEST(ParseCpuListTest, RangesAndSingleCpus) {
  EXPECT_THAT(*ParseCpuList("0-3,6,8-9\n"), ElementsAre(0, 1, 2, 3, 6, 8, 9));
  EXPECT_THAT(*ParseCpuList("0"), ElementsAre(0));
}

TEST(ParseCpuListTest, RejectsMalformedLists) {
  for (const char* bad : {"", "a", "3-1", "1-", "-2", "0,,1", "1-99999999"}) {
    EXPECT_FALSE(ParseCpuList(bad).ok()) << bad;
  }
}

TEST(OnlineCpusTest, ThisMachineHasAtLeastOneOnlineCpu) {
  absl::StatusOr<std::vector<int>> cpus = OnlineCpus();
  ASSERT_TRUE(cpus.ok()) << cpus.status();
  EXPECT_FALSE(cpus->empty());
}

}  // namespace
}  // namespace pystrobe
