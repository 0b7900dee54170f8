// The flag table facility (daemon/flags/flag_table.h) and record's table: one
// list of rows makes the parser, --help and the control protocol's record
// request, so what a command line sets is what a daemon reads back.
#include "daemon/flags/flag_table.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_split.h"
#include "daemon/flags/record_flags.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pystrobe {
namespace {

using ::testing::HasSubstr;

struct Toy {
  int level = 0;
  bool loud = false;
  std::vector<std::string> words;
  std::vector<std::string> command;
  bool help = false;
};

FlagTable<Toy> ToyTable() {
  return FlagTable<Toy>({
      .command = "toy",
      .intro = "usage: pystrobe toy\n\n",
      .sections = {{.heading = "Options:",
                    .flags =
                        {
                            ValueFlag<Toy>({"-l", "--level"}, "N", "how high\nand more",
                                           [](Toy& toy, absl::string_view, const std::string& v) {
                                             toy.level = std::stoi(v);
                                             return absl::OkStatus();
                                           })
                                .MissingValue("N"),
                            SwitchFlag<Toy>({"--loud"}, &Toy::loud, "shout"),
                            HelpFlag(&Toy::help, "this text"),
                        }}},
      .outro = "\nThe end.\n",
      .help_column = 17,
      .positional =
          [](Toy& toy, std::string word) {
            toy.words.push_back(std::move(word));
            return absl::OkStatus();
          },
      .rest =
          [](Toy& toy, std::vector<std::string> command) {
            toy.command = std::move(command);
            return absl::OkStatus();
          },
      .check =
          [](Toy& toy, const FlagsGiven& given) {
            if (toy.loud && !given.contains("--level")) {
              return absl::InvalidArgumentError("--loud needs --level");
            }
            return absl::OkStatus();
          },
  });
}

TEST(FlagTableTest, ReadsSeparateAndInlineValuesSwitchesWordsAndTheRest) {
  Toy toy;
  ASSERT_TRUE(
      ToyTable().Parse({"-l", "3", "a", "--level=4", "--loud", "-", "--", "x", "-y"}, toy).ok());
  EXPECT_EQ(toy.level, 4);
  EXPECT_TRUE(toy.loud);
  EXPECT_EQ(toy.words, (std::vector<std::string>{"a", "-"}));
  EXPECT_EQ(toy.command, (std::vector<std::string>{"x", "-y"}));
}

TEST(FlagTableTest, ErrorsNameTheFlagAsWritten) {
  auto error = [](std::vector<std::string> args) {
    Toy toy;
    return std::string(ToyTable().Parse(args, toy).message());
  };
  EXPECT_EQ(error({"--level"}), "--level needs a N");
  EXPECT_EQ(error({"-l"}), "-l needs a N");
  EXPECT_EQ(error({"--loud=yes"}), "--loud takes no value");
  EXPECT_EQ(error({"--bogus"}), "unknown option '--bogus' (see pystrobe toy --help)");
  EXPECT_EQ(error({"--loud"}), "--loud needs --level");
}

TEST(FlagTableTest, HelpEndsTheReadingAndSkipsTheChecks) {
  Toy toy;
  ASSERT_TRUE(ToyTable().Parse({"--loud", "--help", "--bogus"}, toy).ok());
  EXPECT_TRUE(toy.help);
}

TEST(FlagTableTest, UsageListsEveryFlagWithItsHelpAligned) {
  EXPECT_EQ(ToyTable().Usage(),
            "usage: pystrobe toy\n"
            "\n"
            "Options:\n"
            "  -l, --level N  how high\n"
            "                 and more\n"
            "      --loud     shout\n"
            "  -h, --help     this text\n"
            "\n"
            "The end.\n");
}

// Every flag a daemon honours travels: a command line parsed here and the
// request the daemon decodes are the same options.
TEST(RecordFlagsTest, WhatACommandLineSetsIsWhatTheDaemonReads) {
  absl::StatusOr<RecordOptions> cli =
      ParseRecordOptions({"-p", "12", "--pid=34", "-d", "2.5", "-r", "19", "--threads", "--native",
                          "--off-cpu", "--function", "--full-filenames"});
  ASSERT_TRUE(cli.ok()) << cli.status();
  RecordOptions daemon;
  for (absl::string_view line :
       absl::StrSplit(RecordFlags().EncodeWire(*cli), '\n', absl::SkipEmpty())) {
    std::pair<std::string, std::string> kv = absl::StrSplit(line, absl::MaxSplits('=', 1));
    ASSERT_TRUE(RecordFlags().DecodeWire(kv.first, kv.second, daemon).ok()) << line;
  }
  EXPECT_EQ(daemon.pids, cli->pids);
  EXPECT_EQ(daemon.duration, cli->duration);
  EXPECT_EQ(daemon.rate_hz, 19);
  EXPECT_TRUE(daemon.rate_given);
  EXPECT_TRUE(daemon.threads);
  EXPECT_TRUE(daemon.native);
  EXPECT_TRUE(daemon.offcpu);
  EXPECT_TRUE(daemon.function_lines);
  EXPECT_TRUE(daemon.full_filenames);
  EXPECT_FALSE(daemon.all);
}

TEST(RecordFlagsTest, ARateLeftOutIsTheDaemonsAndLocalFlagsStayLocal) {
  absl::StatusOr<RecordOptions> cli =
      ParseRecordOptions({"--all", "--asyncio", "-o", "x.svg", "--socket", "/s"});
  ASSERT_TRUE(cli.ok()) << cli.status();
  EXPECT_EQ(RecordFlags().EncodeWire(*cli), "all=1\n");
  EXPECT_EQ(cli->daemon_client.socket, "/s");
}

TEST(RecordFlagsTest, UnknownKeysAndBadValuesAreRefusedByName) {
  RecordOptions options;
  EXPECT_THAT(RecordFlags().DecodeWire("asyncio", "1", options).message(),
              HasSubstr("unknown key asyncio"));
  EXPECT_THAT(RecordFlags().DecodeWire("threads", "yes", options).message(),
              HasSubstr("threads must be 0 or 1"));
  EXPECT_THAT(RecordFlags().DecodeWire("duration_ms", "0", options).message(),
              HasSubstr("duration_ms"));
}

TEST(RecordFlagsTest, TheDaemonClientFlagsAreRowsOfRecordsTable) {
  EXPECT_THAT(ParseRecordOptions({"--socket"}).status().message(),
              HasSubstr("--socket needs a PATH"));
  EXPECT_TRUE(ParseRecordOptions({"--no-daemon"})->daemon_client.no_daemon);
  EXPECT_THAT(RecordUsage(), HasSubstr("--socket PATH"));
}

}  // namespace
}  // namespace pystrobe
