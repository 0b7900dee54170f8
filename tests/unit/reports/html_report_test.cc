#include "daemon/reports/html_report.h"

#include <sstream>
#include <string>
#include <string_view>

#include "daemon/reports/recording_reader.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pystrobe {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

Recording Folded(std::string_view text) {
  absl::StatusOr<Recording> recording = ParseFolded(text, "test.folded");
  EXPECT_TRUE(recording.ok()) << recording.status();
  return *recording;
}

constexpr std::string_view kProgram =
    "p (1);<module> (mm.py:9);mul (mm.py:4);multiarray.so+0x2;dgemm_ 90\n"
    "p (1);<module> (mm.py:9);loop (mm.py:12) 8\n"
    "p (1);<module> (mm.py:9);<b&d> (mm.py:13) 2\n";

std::string Page(std::string_view folded) {
  HtmlReportOptions options;
  options.title = "mm.folded";
  std::ostringstream out;
  EXPECT_TRUE(WriteHtmlReport(Folded(folded), options, out).ok());
  return out.str();
}

TEST(HtmlReportTest, NamesTheHeaviestLineAndFunctionFirst) {
  std::string page = Page(kProgram);
  EXPECT_THAT(page, HasSubstr("data-heaviest-line=\"mul (mm.py:4)\""));
  EXPECT_THAT(page, HasSubstr("data-heaviest-function=\"mul\""));
  size_t table = page.find("<table id=\"lines\">");
  ASSERT_NE(table, std::string::npos);
  size_t first_row = page.find("<tr class=\"line-row\"", table);
  ASSERT_NE(first_row, std::string::npos);
  EXPECT_EQ(page.find("data-function=\"mul\"", first_row), page.find("data-function=", first_row));
  // The line's time is native: the column is there, and its share.
  EXPECT_THAT(page, HasSubstr("<th>native</th>"));
  EXPECT_THAT(page, HasSubstr("data-self=\"0.900000\""));
}

TEST(HtmlReportTest, IsOnePageThatFetchesNothing) {
  std::string page = Page(kProgram);
  EXPECT_TRUE(page.starts_with("<!DOCTYPE html>"));
  EXPECT_THAT(page, HasSubstr("default-src 'none'"));
  EXPECT_THAT(page, Not(HasSubstr("<?xml")));  // the SVG is inline
  EXPECT_THAT(page, HasSubstr("<svg"));
  EXPECT_THAT(page, Not(HasSubstr("src=\"http")));
  EXPECT_THAT(page, Not(HasSubstr("href=\"http")));
}

TEST(HtmlReportTest, EscapesNamesFromTheRecording) {
  std::string page = Page(kProgram);
  EXPECT_THAT(page, HasSubstr("&lt;b&amp;d&gt;"));
  EXPECT_THAT(page, Not(HasSubstr("<b&d>")));
  EXPECT_EQ(HtmlEscape("a\"'<>&"), "a&quot;&#39;&lt;&gt;&amp;");
}

TEST(HtmlReportTest, FocusKeepsOnlyTheMatchingStacks) {
  HtmlReportOptions options;
  options.focus.emplace("^loop$");
  std::ostringstream out;
  ASSERT_TRUE(WriteHtmlReport(Folded(kProgram), options, out).ok());
  std::string page = out.str();
  EXPECT_THAT(page, HasSubstr("data-heaviest-line=\"loop (mm.py:12)\""));
  EXPECT_THAT(page, Not(HasSubstr("data-function=\"mul\"")));
  EXPECT_THAT(page, Not(HasSubstr("dgemm_")));  // nor in the flame graph
}

TEST(HtmlReportTest, DiffShowsBothFlameGraphsAndTheChanges) {
  Recording before = Folded("p (1);main (m.py:1);old (m.py:5) 10\n");
  Recording after = Folded("p (1);main (m.py:1);fresh (m.py:8) 10\n");
  HtmlDiffOptions options;
  options.before_name = "before.folded";
  options.after_name = "after.folded";
  std::ostringstream out;
  ASSERT_TRUE(WriteHtmlDiff(before, after, options, out).ok());
  std::string page = out.str();
  EXPECT_THAT(page, HasSubstr("id=\"before\""));
  EXPECT_THAT(page, HasSubstr("id=\"after\""));
  EXPECT_THAT(page, HasSubstr("id=\"differential\""));
  EXPECT_THAT(page, HasSubstr("class=\"diff-row\" data-function=\"fresh\""));
  EXPECT_THAT(page, HasSubstr("class=\"diff-row\" data-function=\"old\""));
}

}  // namespace
}  // namespace pystrobe
