#include "daemon/reports/flat_report.h"

#include <unistd.h>

#include <cstdint>
#include <cstdlib>  // mkdtemp
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "daemon/reports/recording_diff.h"
#include "daemon/reports/recording_reader.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pystrobe {
namespace {

using ::testing::HasSubstr;

Recording Folded(std::string_view text) {
  absl::StatusOr<Recording> recording = ParseFolded(text, "test.folded");
  EXPECT_TRUE(recording.ok()) << recording.status();
  return *recording;
}

const ReportRow* Find(const std::vector<ReportRow>& rows, std::string_view function,
                      int64_t line = 0) {
  for (const ReportRow& row : rows) {
    if (row.key.function == function && row.key.line == line) return &row;
  }
  return nullptr;
}

// main calls a and b; a recurses; b's lines 20 and 21 cost 3:1.
constexpr std::string_view kProgram =
    "p (1);main (m.py:1);a (m.py:10);a (m.py:11);a (m.py:11) 40\n"
    "p (1);main (m.py:1);b (m.py:20) 30\n"
    "p (1);main (m.py:1);b (m.py:21) 10\n"
    "p (1);main (m.py:2) 20\n";

TEST(FlatReportTest, SelfIsTheInnermostPythonFrameAndTotalCountsARecursiveFunctionOnce) {
  FlatReport report =
      BuildFlatReport(Folded(kProgram), {}, ReportGrouping::kFunction, ReportSort::kSelf);
  EXPECT_EQ(report.total, 100);
  ASSERT_EQ(report.rows.size(), 3u);
  EXPECT_EQ(report.rows[0].key.function, "a");  // heaviest self first
  EXPECT_EQ(report.rows[0].self, 40);
  EXPECT_EQ(report.rows[0].total, 40);
  EXPECT_EQ(Find(report.rows, "b")->total, 40);
  EXPECT_EQ(Find(report.rows, "main")->self, 20);
  EXPECT_EQ(Find(report.rows, "main")->total, 100);

  FlatReport by_total =
      BuildFlatReport(Folded(kProgram), {}, ReportGrouping::kFunction, ReportSort::kTotal);
  EXPECT_EQ(by_total.rows[0].key.function, "main");
}

TEST(FlatReportTest, ByLineSplitsAFunctionsLines) {
  FlatReport report =
      BuildFlatReport(Folded(kProgram), {}, ReportGrouping::kLine, ReportSort::kSelf);
  EXPECT_EQ(Find(report.rows, "b", 20)->self, 30);
  EXPECT_EQ(Find(report.rows, "b", 21)->self, 10);
  EXPECT_EQ(Find(report.rows, "main", 1)->total, 80);
  EXPECT_EQ(Find(report.rows, "a", 11)->total, 40);  // twice on the stack, once counted
}

TEST(FlatReportTest, ByFileGroupsFramesWithoutAFile) {
  FlatReport report = BuildFlatReport(Folded("p (1);main (m.py:1);schedule_[k] 3\n"), {},
                                      ReportGrouping::kFile, ReportSort::kTotal);
  ASSERT_EQ(report.rows.size(), 2u);
  // The kernel's time is charged to the Python file that asked for it.
  EXPECT_EQ(report.rows[0].key.file, "m.py");
  EXPECT_EQ(report.rows[0].self, 3);
  EXPECT_EQ(report.rows[0].columns[static_cast<size_t>(CostColumn::kSystem)], 3);
  EXPECT_EQ(report.rows[1].key.file, kNoFile);
  EXPECT_EQ(report.rows[1].total, 3);
  EXPECT_EQ(report.rows[1].self, 0);
}

TEST(FlatReportTest, FocusKeepsMatchingStacksAndSharesOfTheWhole) {
  ReportFilter filter;
  filter.focus.emplace("^b$");
  FlatReport report =
      BuildFlatReport(Folded(kProgram), filter, ReportGrouping::kFunction, ReportSort::kSelf);
  EXPECT_EQ(report.total, 100);
  EXPECT_EQ(report.focused, 40);
  EXPECT_EQ(Find(report.rows, "main")->total, 40);
  EXPECT_EQ(Find(report.rows, "a"), nullptr);
}

TEST(FlatReportTest, CallersAndCallees) {
  Recording recording = Folded(kProgram);
  CallGraphReport callers =
      BuildCallGraphReport(recording, {}, "a", CallDirection::kCallers, ReportGrouping::kFunction);
  EXPECT_EQ(callers.function_total, 40);
  ASSERT_EQ(callers.rows.size(), 2u);  // main, and a itself (recursion)
  EXPECT_EQ(Find(callers.rows, "main")->total, 40);
  EXPECT_EQ(Find(callers.rows, "a")->total, 40);

  CallGraphReport callees = BuildCallGraphReport(recording, {}, "main", CallDirection::kCallees,
                                                 ReportGrouping::kFunction);
  EXPECT_EQ(callees.function_total, 100);
  EXPECT_EQ(Find(callees.rows, "a")->total, 40);
  EXPECT_EQ(Find(callees.rows, "b")->total, 40);
  EXPECT_EQ(Find(callees.rows, kSelfRow)->total, 20);
}

TEST(FlatReportTest, FileColonFunctionNamesOneOfTwoFunctionsOfOneName) {
  EXPECT_TRUE(NamesFunction({"run", "pkg/a.py", 3}, "run"));
  EXPECT_TRUE(NamesFunction({"run", "pkg/a.py", 3}, "a.py:run"));
  EXPECT_TRUE(NamesFunction({"run", "pkg/a.py", 3}, "pkg/a.py:run"));
  EXPECT_FALSE(NamesFunction({"run", "pkg/b.py", 3}, "a.py:run"));
}

TEST(FlatReportTest, SourceShowsTheFunctionFromItsDefWithEachLinesShare) {
  char dir[] = "/tmp/flat_report_test.XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  {
    std::ofstream source(std::string(dir) + "/m.py");
    source << "import x\n\n@deco\ndef b():\n    y = 1\n    heavy()\n    light()\n";
  }
  Recording recording = Folded(
      "p (1);b (m.py:6) 30\n"
      "p (1);b (m.py:7);c (n.py:1) 10\n");
  SourceReport report = BuildSourceReport(recording, {}, "b", {dir});
  ASSERT_EQ(report.files.size(), 1u);
  const SourceFile& file = report.files[0];
  EXPECT_EQ(file.function_total, 40);
  EXPECT_EQ(file.resolved, std::string(dir) + "/m.py");
  ASSERT_EQ(file.lines.size(), 5u);  // @deco down to line 7
  EXPECT_EQ(file.lines[0].line, 3);
  EXPECT_EQ(file.lines[0].text, "@deco");
  EXPECT_EQ(file.lines[3].line, 6);
  EXPECT_EQ(file.lines[3].self, 30);
  EXPECT_EQ(file.lines[4].self, 0);
  EXPECT_EQ(file.lines[4].total, 10);
  EXPECT_EQ(file.lines[4].text, "    light()");
  std::filesystem::remove_all(dir);
}

TEST(FlatReportTest, SourceWithoutTheFileListsTheSampledLines) {
  SourceReport report =
      BuildSourceReport(Folded("p (1);b (nowhere.py:6) 3\n"), {}, "b", {"/nonexistent"});
  ASSERT_EQ(report.files.size(), 1u);
  EXPECT_TRUE(report.files[0].resolved.empty());
  ASSERT_EQ(report.files[0].lines.size(), 1u);
  EXPECT_FALSE(report.files[0].lines[0].text.has_value());
}

TEST(FlatReportTest, BadGroupingAndSortNameTheFlag) {
  EXPECT_THAT(ParseReportGrouping("module").status().message(), HasSubstr("--by"));
  EXPECT_THAT(ParseReportSort("calls").status().message(), HasSubstr("--sort"));
}

TEST(RecordingDiffTest, ARecordingAgainstItselfChangesNothing) {
  Recording recording = Folded(kProgram);
  RecordingDiff diff =
      DiffRecordings(recording, 0, recording, 0, ReportGrouping::kFunction, ReportSort::kSelf);
  ASSERT_EQ(diff.rows.size(), 3u);
  for (const DiffRow& row : diff.rows) {
    EXPECT_EQ(row.delta_self(), 0) << row.key.function;
    EXPECT_EQ(row.delta_total(), 0) << row.key.function;
  }
}

TEST(RecordingDiffTest, SharesAreNormalisedToEachTotal) {
  // b doubles its share in a recording twice as long; a is gone.
  Recording before = Folded("p (1);a (m.py:1) 50\np (1);b (m.py:2) 50\n");
  Recording after = Folded("p (1);b (m.py:2) 200\n");
  RecordingDiff diff =
      DiffRecordings(before, 0, after, 0, ReportGrouping::kFunction, ReportSort::kSelf);
  EXPECT_EQ(diff.before_total, 100);
  EXPECT_EQ(diff.after_total, 200);
  ASSERT_EQ(diff.rows.size(), 2u);
  EXPECT_EQ(diff.rows[0].key.function, "b");  // ties on |delta|: the heavier now first
  EXPECT_DOUBLE_EQ(diff.rows[0].delta_self(), 0.5);
  EXPECT_EQ(diff.rows[0].after.self, 200);
  EXPECT_EQ(diff.rows[1].key.function, "a");
  EXPECT_DOUBLE_EQ(diff.rows[1].delta_self(), -0.5);
  EXPECT_EQ(diff.rows[1].after.total, 0);
}

TEST(RecordingDiffTest, FlameGraphIsRedWhereAStackGrewAndBlueWhereItShrank) {
  Recording before = Folded(
      "p (1);main (m.py:1);grew (m.py:5) 10\n"
      "p (1);main (m.py:1);shrank (m.py:9) 90\n");
  Recording after = Folded(
      "p (1);main (m.py:1);grew (m.py:5) 90\n"
      "p (1);main (m.py:1);shrank (m.py:9) 10\n");
  std::ostringstream svg;
  ASSERT_TRUE(WriteDiffFlameGraph(before, 0, after, 0, "t", svg).ok());
  std::string text = svg.str();
  // The largest change is full colour; main (all samples, both times) white.
  EXPECT_THAT(text, HasSubstr("grew (m.py:5) (90 samples, 90.00%, +80.00 points: 10.00% before, "
                              "90.00% after)</title><rect"));
  std::smatch grew;
  ASSERT_TRUE(
      std::regex_search(text, grew, std::regex("grew [^<]*</title><rect [^>]*fill=\"([^\"]+)\"")));
  EXPECT_EQ(grew[1], "rgb(255,55,55)");
  std::smatch shrank;
  ASSERT_TRUE(std::regex_search(text, shrank,
                                std::regex("shrank [^<]*</title><rect [^>]*fill=\"([^\"]+)\"")));
  EXPECT_EQ(shrank[1], "rgb(55,55,255)");
  std::smatch main;
  ASSERT_TRUE(
      std::regex_search(text, main, std::regex("main [^<]*</title><rect [^>]*fill=\"([^\"]+)\"")));
  EXPECT_EQ(main[1], "rgb(255,255,255)");
}

}  // namespace
}  // namespace pystrobe
