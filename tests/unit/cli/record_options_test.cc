#include "daemon/cli/record_options.h"

#include <string>
#include <vector>

#include "absl/time/civil_time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pystrobe {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

absl::StatusOr<RecordOptions> Parse(std::vector<std::string> args) {
  return ParseRecordOptions(args);
}

TEST(RecordOptionsTest, NoTargetMeansTheWholeSystemAtDefaults) {
  absl::StatusOr<RecordOptions> options = Parse({});
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_TRUE(options->all);
  EXPECT_EQ(options->rate_hz, 99);
  EXPECT_EQ(options->format, "svg");
  EXPECT_FALSE(options->duration.has_value());
}

TEST(RecordOptionsTest, CommandTakesEverythingAfterDoubleDash) {
  absl::StatusOr<RecordOptions> options =
      Parse({"-r", "250", "--threads", "--", "python3", "-c", "--rate 5"});
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_THAT(options->command, ElementsAre("python3", "-c", "--rate 5"));
  EXPECT_FALSE(options->all);
  EXPECT_EQ(options->rate_hz, 250);
  EXPECT_TRUE(options->threads);
}

TEST(RecordOptionsTest, PidIsRepeatableAndAcceptsInlineValues) {
  absl::StatusOr<RecordOptions> options = Parse({"--pid", "12", "-p", "34", "--pid=56"});
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_THAT(options->pids, ElementsAre(12u, 34u, 56u));
}

TEST(RecordOptionsTest, RateOutsideOneToThousandIsAClearError) {
  for (const char* rate : {"0", "1001", "-5", "fast", "99.5", ""}) {
    absl::StatusOr<RecordOptions> options = Parse({"--rate", rate});
    ASSERT_FALSE(options.ok()) << rate;
    EXPECT_THAT(options.status().message(),
                HasSubstr("--rate takes a whole number of Hz from 1 to 1000"));
  }
  EXPECT_TRUE(Parse({"-r", "1"}).ok());
  EXPECT_TRUE(Parse({"-r", "1000"}).ok());
}

TEST(RecordOptionsTest, DurationMustBePositiveSeconds) {
  absl::StatusOr<RecordOptions> options = Parse({"-d", "2.5"});
  ASSERT_TRUE(options.ok());
  EXPECT_EQ(*options->duration, absl::Milliseconds(2500));
  for (const char* bad : {"0", "-1", "soon", "nan"}) {
    EXPECT_FALSE(Parse({"--duration", bad}).ok()) << bad;
  }
}

TEST(RecordOptionsTest, UnknownFormatOptionAndMissingValuesAreErrors) {
  EXPECT_THAT(Parse({"-f", "png"}).status().message(), HasSubstr("--format takes folded or svg"));
  EXPECT_THAT(Parse({"--frobnicate"}).status().message(),
              HasSubstr("unknown option '--frobnicate'"));
  EXPECT_THAT(Parse({"--pid"}).status().message(), HasSubstr("--pid needs a value"));
  EXPECT_THAT(Parse({"--"}).status().message(), HasSubstr("followed by a command"));
  EXPECT_THAT(Parse({"--threads=yes"}).status().message(), HasSubstr("takes no value"));
}

TEST(RecordOptionsTest, OnlyOneKindOfTarget) {
  EXPECT_THAT(Parse({"--all", "--pid", "1"}).status().message(), HasSubstr("one kind of target"));
  EXPECT_THAT(Parse({"--pid", "1", "--", "true"}).status().message(),
              HasSubstr("one kind of target"));
}

TEST(RecordOptionsTest, PythonFlags) {
  absl::StatusOr<RecordOptions> options =
      Parse({"--native", "--gil", "--nolineno", "--full-filenames", "--max-python-depth", "300",
             "--subprocesses", "--pid", "7"});
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_TRUE(options->native);
  EXPECT_TRUE(options->gil_only);
  EXPECT_TRUE(options->no_line_numbers);
  EXPECT_TRUE(options->full_filenames);
  EXPECT_TRUE(options->subprocesses);
  EXPECT_EQ(options->max_python_depth, 300);
  EXPECT_EQ(Parse({}).value().max_python_depth, 128);
}

TEST(RecordOptionsTest, UnwindTableBudgetAndDiskCache) {
  RecordOptions defaults = Parse({}).value();
  EXPECT_EQ(defaults.native_table_mib, 32);
  EXPECT_EQ(defaults.unwind_cache, "/var/cache/pystrobe/unwind");
  absl::StatusOr<RecordOptions> options =
      Parse({"--native", "--native-table-mib", "8", "--unwind-cache", "/tmp/tables"});
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->native_table_mib, 8);
  EXPECT_EQ(options->unwind_cache, "/tmp/tables");
  EXPECT_EQ(Parse({"--unwind-cache", "none"}).value().unwind_cache, "");
  EXPECT_THAT(Parse({"--native-table-mib", "2"}).status().message(), HasSubstr("from 4 to 1024"));
  EXPECT_FALSE(Parse({"--unwind-cache", ""}).ok());
}

TEST(RecordOptionsTest, PythonFlagErrors) {
  EXPECT_THAT(Parse({"--max-python-depth", "0"}).status().message(), HasSubstr("from 1 to 384"));
  EXPECT_THAT(Parse({"--max-python-depth", "385"}).status().message(), HasSubstr("from 1 to 384"));
  EXPECT_THAT(Parse({"--function", "--nolineno"}).status().message(), HasSubstr("exclude"));
  EXPECT_THAT(Parse({"--subprocesses"}).status().message(), HasSubstr("--all sees them"));
}

TEST(RecordOptionsTest, ImportsIsATreeNotAProfileSoTakesNoFormat) {
  absl::StatusOr<RecordOptions> options = Parse({"--imports", "-o", "tree.txt", "--", "python3"});
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_TRUE(options->imports);
  EXPECT_EQ(options->output, "tree.txt");
  absl::StatusOr<RecordOptions> with_format = Parse({"--imports", "-f", "folded"});
  EXPECT_THAT(with_format.status().message(), HasSubstr("--imports writes a text tree"));
  EXPECT_THAT(Parse({"--imports=yes"}).status().message(), HasSubstr("takes no value"));
}

TEST(RecordOptionsTest, DefaultOutputNamesTheTargetAndTime) {
  absl::Time now =
      absl::FromCivil(absl::CivilSecond(2026, 11, 21, 23, 5, 9), absl::LocalTimeZone());
  RecordOptions command;
  command.command = {"/usr/bin/python3", "train.py"};
  EXPECT_EQ(DefaultOutputPath(command, now, "svg"), "pystrobe-python3-20261121-230509.svg");
  RecordOptions pid;
  pid.pids = {4242};
  EXPECT_EQ(DefaultOutputPath(pid, now, "folded"), "pystrobe-pid4242-20261121-230509.folded");
  RecordOptions all;
  all.all = true;
  EXPECT_EQ(DefaultOutputPath(all, now, "svg"), "pystrobe-all-20261121-230509.svg");
}

TEST(RecordOptionsTest, MemoryAndAllocationsWeighBytesAndExcludeTheTimeViews) {
  EXPECT_TRUE(Parse({"--memory", "--", "python3"})->memory);
  absl::StatusOr<RecordOptions> allocations = Parse({"--allocations", "--alloc-space", "-p", "1"});
  ASSERT_TRUE(allocations.ok());
  EXPECT_TRUE(allocations->allocations);
  EXPECT_TRUE(allocations->alloc_space);
  EXPECT_THAT(Parse({"--memory", "--off-cpu"}).status().message(), HasSubstr("--memory"));
  EXPECT_THAT(Parse({"--allocations", "--memory"}).status().message(), HasSubstr("--allocations"));
  EXPECT_THAT(Parse({"--alloc-space"}).status().message(), HasSubstr("view of --allocations"));
}

TEST(RecordOptionsTest, TheAllocationSamplingMeanIsASettingOfAllocations) {
  EXPECT_EQ(Parse({"--allocations", "--", "python3"})->alloc_sample_bytes, 512u * 1024);
  EXPECT_EQ(Parse({"--allocations", "--alloc-sample-bytes", "65536", "--", "python3"})
                ->alloc_sample_bytes,
            65536u);
  EXPECT_THAT(Parse({"--allocations", "--alloc-sample-bytes", "0"}).status().message(),
              HasSubstr("--alloc-sample-bytes"));
  EXPECT_THAT(Parse({"--alloc-sample-bytes", "4096"}).status().message(),
              HasSubstr("setting of --allocations"));
}

}  // namespace
}  // namespace pystrobe
