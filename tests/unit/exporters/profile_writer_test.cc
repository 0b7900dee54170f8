#include "exporters/profile_writer.h"

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pystrobe {
namespace {

using ::testing::HasSubstr;

TEST(MakeProfileWriterTest, MakesFoldedWriter) {
  auto writer = MakeProfileWriter("folded");
  ASSERT_TRUE(writer.ok()) << writer.status();
  EXPECT_EQ((*writer)->extension(), "folded");
}

TEST(MakeProfileWriterTest, MakesSvgWriter) {
  auto writer = MakeProfileWriter("svg");
  ASSERT_TRUE(writer.ok()) << writer.status();
  EXPECT_EQ((*writer)->extension(), "svg");
}

TEST(MakeProfileWriterTest, RejectsUnknownFormatNamingItAndTheAcceptedOnes) {
  auto writer = MakeProfileWriter("png");
  ASSERT_FALSE(writer.ok());
  EXPECT_EQ(writer.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(writer.status().message(), HasSubstr("\"png\""));
  for (const char* accepted : {"folded", "svg", "pprof", "speedscope"}) {
    EXPECT_THAT(writer.status().message(), HasSubstr(accepted));
  }
}

TEST(MakeProfileWriterTest, FormatNamesAreCaseSensitive) {
  EXPECT_EQ(MakeProfileWriter("SVG").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(MakeProfileWriter("").status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace pystrobe
