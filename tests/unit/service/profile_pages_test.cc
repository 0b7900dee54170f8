#include "daemon/service/profile_pages.h"

#include <memory>
#include <string>

#include "absl/time/time.h"
#include "daemon/service/recent_windows.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pystrobe {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

ProfileWindow Window(uint64_t sequence) {
  ProfileWindow window;
  window.sequence = sequence;
  window.start = absl::FromUnixSeconds(1'700'000'000 + 10 * sequence);
  window.end = window.start + absl::Seconds(10);
  window.profile.Add({{"python3 (42)", FrameKind::kProcess},
                      {"<module> (mm.py:9)", FrameKind::kPython},
                      {"mul (mm.py:4)", FrameKind::kPython},
                      {"dgemm_", FrameKind::kNative}},
                     90);
  window.profile.Add({{"python3 (42)", FrameKind::kProcess},
                      {"<module> (mm.py:9)", FrameKind::kPython},
                      {"loop (mm.py:12)", FrameKind::kPython}},
                     8);
  window.profile.Add({{"sshd <x> (7)", FrameKind::kProcess}, {"poll", FrameKind::kNative}}, 2);
  return window;
}

TEST(RecentWindowsTest, KeepsTheLastFewNewestFirst) {
  RecentWindows windows(2);
  for (uint64_t n = 1; n <= 3; ++n) ASSERT_TRUE(windows.Consume(Window(n)).ok());
  auto kept = windows.Windows();
  ASSERT_EQ(kept.size(), 2u);
  EXPECT_EQ(kept[0]->sequence, 3u);
  EXPECT_EQ(kept[1]->sequence, 2u);
  EXPECT_EQ(windows.Find(1), nullptr);
  EXPECT_NE(windows.Find(2), nullptr);
}

class ProfilePagesTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(windows_->Consume(Window(7)).ok()); }
  std::shared_ptr<RecentWindows> windows_ = std::make_shared<RecentWindows>();
  ProfilePages pages_{windows_};
};

TEST_F(ProfilePagesTest, IndexListsWindowsAndTheirProcessesWithLinks) {
  std::optional<PageResponse> index = pages_.Get("/", "");
  ASSERT_TRUE(index.has_value());
  EXPECT_EQ(index->status, 200);
  EXPECT_THAT(index->body, HasSubstr("data-window=\"7\""));
  EXPECT_THAT(index->body, HasSubstr("href=\"/profile?window=7&amp;pid=42\">python3</a>"));
  EXPECT_THAT(index->body, HasSubstr("sshd &lt;x&gt;"));  // names escaped
  // Heaviest process first.
  EXPECT_LT(index->body.find("data-pid=\"42\""), index->body.find("data-pid=\"7\""));
}

TEST_F(ProfilePagesTest, ProfileOfOneProcessIsTheReportPage) {
  std::optional<PageResponse> page = pages_.Get("/profile", "window=7&pid=42");
  ASSERT_TRUE(page.has_value());
  EXPECT_EQ(page->status, 200);
  EXPECT_THAT(page->body, HasSubstr("data-heaviest-line=\"mul (mm.py:4)\""));
  EXPECT_THAT(page->body, HasSubstr("<th>native</th>"));
  EXPECT_THAT(page->body, Not(HasSubstr("poll")));  // another process's

  std::optional<PageResponse> all = pages_.Get("/profile", "window=7");
  ASSERT_TRUE(all.has_value());
  EXPECT_THAT(all->body, HasSubstr("poll"));
}

// A process names its code's files itself (co_filename); the daemon, which
// may read any file, must not show their text to whoever reaches its port.
TEST_F(ProfilePagesTest, NeverReadsTheFilesAProfileNames) {
  ProfileWindow window = Window(8);
  window.profile.Add(
      {{"evil (66)", FrameKind::kProcess}, {"<module> (/etc/hostname:1)", FrameKind::kPython}},
      1000);
  ASSERT_TRUE(windows_->Consume(window).ok());
  std::optional<PageResponse> page = pages_.Get("/profile", "window=8&pid=66");
  ASSERT_TRUE(page.has_value());
  EXPECT_EQ(page->status, 200);
  EXPECT_THAT(page->body, HasSubstr("source not read here, lines only"));
}

TEST_F(ProfilePagesTest, BadOrMissingWindowsAreAnsweredNotGuessed) {
  EXPECT_EQ(pages_.Get("/profile", "")->status, 400);
  EXPECT_EQ(pages_.Get("/profile", "window=abc")->status, 400);
  EXPECT_EQ(pages_.Get("/profile", "window=7&delete=1")->status, 400);
  EXPECT_EQ(pages_.Get("/profile", "window=99")->status, 404);
  EXPECT_EQ(pages_.Get("/profile", "window=7&pid=1")->status, 404);
  EXPECT_EQ(pages_.Get("/profile", "window=7&memory=1")->status, 404);
  EXPECT_FALSE(pages_.Get("/admin", "").has_value());
}

}  // namespace
}  // namespace pystrobe
