#include "exporters/folded_writer.h"

#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "model/profile.h"

namespace pystrobe {
namespace {

std::string Fold(const Profile& profile) {
  std::ostringstream out;
  absl::Status status = FoldedWriter().Write(profile, out);
  EXPECT_TRUE(status.ok()) << status;
  return out.str();
}

TEST(FoldedWriterTest, WritesOneLineRootFirstPerStackSortedByText) {
  Profile profile;
  profile.Add({{"python3 (7)", FrameKind::kProcess},
               {"main (app.py:3)", FrameKind::kPython},
               {"write_[k]", FrameKind::kKernel}},
              4);
  profile.Add({{"python3 (7)", FrameKind::kProcess}, {"idle (app.py:9)", FrameKind::kPython}}, 2);

  EXPECT_EQ(Fold(profile),
            "python3 (7);idle (app.py:9) 2\n"
            "python3 (7);main (app.py:3);write_[k] 4\n");
}

TEST(FoldedWriterTest, MergesEqualStacksAddedSeveralTimes) {
  Profile profile;
  profile.Add({{"a", FrameKind::kNative}, {"b", FrameKind::kNative}}, 1);
  profile.Add({{"a", FrameKind::kNative}, {"c", FrameKind::kNative}}, 1);
  profile.Add({{"a", FrameKind::kNative}, {"b", FrameKind::kNative}}, 5);

  EXPECT_EQ(Fold(profile), "a;b 6\na;c 1\n");
}

TEST(FoldedWriterTest, AddsNoKindSuffixes) {
  Profile profile;
  profile.Add({{"do_syscall_64_[k]", FrameKind::kKernel}, {"f", FrameKind::kPython}}, 1);

  EXPECT_EQ(Fold(profile), "do_syscall_64_[k];f 1\n");
}

TEST(FoldedWriterTest, ReplacesSeparatorsAndLineBreaksInsideNames) {
  Profile profile;
  profile.Add({{"a;b", FrameKind::kNative}, {"line\nbreak\r", FrameKind::kPython}}, 3);

  EXPECT_EQ(Fold(profile), "a:b;line break  3\n");
}

TEST(FoldedWriterTest, NeverWritesAnEmptyFrameName) {
  Profile profile;
  profile.Add({{"root", FrameKind::kProcess}, {"", FrameKind::kNative}}, 1);
  profile.Add({}, 2);

  EXPECT_EQ(Fold(profile), "[unknown] 2\nroot;[unknown] 1\n");
}

TEST(FoldedWriterTest, MergesStacksThatFoldToTheSameText) {
  Profile profile;
  profile.Add({{"f", FrameKind::kPython}}, 1);
  profile.Add({{"f", FrameKind::kNative}}, 2);

  EXPECT_EQ(Fold(profile), "f 3\n");
}

TEST(FoldedWriterTest, SkipsStacksWithoutSamples) {
  Profile profile;
  profile.Add({{"never", FrameKind::kNative}}, 0);
  profile.Add({{"once", FrameKind::kNative}}, 1);

  EXPECT_EQ(Fold(profile), "once 1\n");
}

TEST(FoldedWriterTest, EmptyProfileWritesNothing) { EXPECT_EQ(Fold(Profile()), ""); }

TEST(FoldedWriterTest, ReportsAFailedStream) {
  Profile profile;
  profile.Add({{"f", FrameKind::kNative}}, 1);
  std::ostringstream out;
  out.setstate(std::ios::badbit);

  EXPECT_EQ(FoldedWriter().Write(profile, out).code(), absl::StatusCode::kDataLoss);
}

TEST(FoldedWriterTest, ExtensionIsFolded) { EXPECT_EQ(FoldedWriter().extension(), "folded"); }

}  // namespace
}  // namespace pystrobe
