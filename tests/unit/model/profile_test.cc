#include "model/profile.h"

#include <memory>
#include <vector>

#include "gtest/gtest.h"

namespace pystrobe {
namespace {

std::vector<Frame> Stack(std::vector<std::string> names) {
  std::vector<Frame> frames;
  for (std::string& name : names) frames.push_back(Frame{std::move(name), FrameKind::kNative});
  return frames;
}

TEST(ProfileTest, AddMergesEqualStacksAndSumsCounts) {
  Profile profile;
  profile.Add(Stack({"a", "b"}), 2);
  profile.Add(Stack({"a", "b"}), 3);

  ASSERT_EQ(profile.stacks().size(), 1u);
  EXPECT_EQ(profile.stacks()[0].count, 5u);
  EXPECT_EQ(profile.total_count(), 5u);
}

TEST(ProfileTest, AddKeepsSameNamesOfDifferentKindsApart) {
  Profile profile;
  profile.Add({Frame{"f", FrameKind::kPython}}, 1);
  profile.Add({Frame{"f", FrameKind::kNative}}, 1);

  EXPECT_EQ(profile.stacks().size(), 2u);
  EXPECT_EQ(profile.total_count(), 2u);
}

TEST(ProfileTest, AddDoesNotConfuseAPrefixWithALongerStack) {
  Profile profile;
  profile.Add(Stack({"a"}), 1);
  profile.Add(Stack({"a", "b"}), 1);
  profile.Add(Stack({"ab"}), 1);

  EXPECT_EQ(profile.stacks().size(), 3u);
}

TEST(ProfileTest, StacksStayInTheOrderFirstAdded) {
  Profile profile;
  profile.Add(Stack({"z"}), 1);
  profile.Add(Stack({"a"}), 1);
  profile.Add(Stack({"z"}), 1);

  ASSERT_EQ(profile.stacks().size(), 2u);
  EXPECT_EQ(profile.stacks()[0].frames[0].name, "z");
  EXPECT_EQ(profile.stacks()[1].frames[0].name, "a");
}

}  // namespace
}  // namespace pystrobe
