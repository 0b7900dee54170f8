#include "daemon/reports/html_report.h"

#include <algorithm>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "daemon/reports/flat_report.h"
#include "daemon/reports/recording_diff.h"
#include "daemon/reports/sample_charge.h"
#include "exporters/flamegraph_svg_writer.h"

namespace pystrobe {
namespace {

// Nothing may be fetched: scripts and styles are the page's own, images are
// inline. A page that tried to load anything would be blocked, not leak.
constexpr char kPageHead[] = R"html(<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:">
<meta name="viewport" content="width=device-width, initial-scale=1">
)html";

// A deep program's flame graph is taller than the screen; its root is at the
// bottom, so each graph's box starts scrolled down to it.
constexpr char kPageScript[] = R"js(
document.querySelectorAll('.flame').forEach(function (box) { box.scrollTop = box.scrollHeight; });
)js";

constexpr char kPageStyle[] = R"css(
body { font-family: -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; margin: 1.5em;
       color: #1b1b1b; background: #fff; }
h1 { font-size: 1.4em; margin-bottom: 0.2em; }
h2 { font-size: 1.15em; margin-top: 1.6em; border-bottom: 1px solid #ddd; }
h3 { font-size: 1em; font-family: monospace; }
p.summary { color: #555; margin-top: 0; }
table { border-collapse: collapse; font-size: 0.85em; }
th, td { padding: 2px 8px; text-align: right; white-space: nowrap; }
th { background: #f3f3f3; position: sticky; top: 0; }
td.name { text-align: left; font-family: monospace; }
td.src { text-align: left; font-family: monospace; white-space: pre; }
tr:nth-child(even) td { background: #fafafa; }
tr.hot td.src { background: #fff0e0; }
td.bar { width: 220px; text-align: left; }
.bar span { display: inline-block; height: 10px; vertical-align: middle; }
.c-python { background: #3c9a5f; } .c-native { background: #d9534f; }
.c-system { background: #f0a030; } .c-io_wait { background: #5b7bd5; }
.c-sleep { background: #9b8fd0; } .c-runqueue { background: #8a8a8a; }
.c-gil_wait { background: #c060c0; } .c-other_wait { background: #b0b0b0; }
.c-memory { background: #2a8fb0; }
.legend span.key { display: inline-block; width: 10px; height: 10px; margin: 0 4px 0 12px; }
.flame { max-height: 75vh; overflow: auto; border: 1px solid #eee; }
.flame svg { max-width: 100%; height: auto; display: block; }
.side { display: flex; gap: 1em; }
.side > div { flex: 1; min-width: 0; }
td.up { color: #b00000; } td.down { color: #0030b0; }
)css";

double Share(int64_t value, int64_t total) {
  return total == 0 ? 0.0 : static_cast<double>(value) / static_cast<double>(total);
}

std::string Percent(int64_t value, int64_t total) {
  return value == 0 ? "." : absl::StrFormat("%.2f%%", 100 * Share(value, total));
}

// An inline SVG flame graph: the file FlameGraphSvgWriter writes, without
// its XML declaration, which has no place inside HTML.
absl::StatusOr<std::string> InlineSvg(const Profile& profile, const FlameGraphStyler& styler) {
  std::ostringstream svg;
  absl::Status written = WriteFlameGraphSvg(profile, styler, svg);
  if (!written.ok()) return written;
  std::string text = svg.str();
  if (text.starts_with("<?xml")) text.erase(0, text.find('\n') + 1);
  return text;
}

std::string Legend(const std::vector<CostColumn>& shown) {
  std::string out = "<p class=\"legend\">Where each line's time went:";
  for (CostColumn column : shown) {
    absl::StrAppend(&out, "<span class=\"key c-", CostColumnKey(column), "\"></span>",
                    CostColumnTitle(column));
  }
  return out + "</p>\n";
}

// A bar per row, each column's part of it as wide as its share of all samples.
std::string Bar(const std::vector<CostColumn>& shown, const ColumnValues& values, int64_t total) {
  std::string out = "<td class=\"bar\">";
  for (CostColumn column : shown) {
    int64_t value = values[static_cast<size_t>(column)];
    if (value == 0) continue;
    absl::StrAppendFormat(&out, "<span class=\"c-%s\" style=\"width:%.1fpx\" title=\"%s\"></span>",
                          CostColumnKey(column), 220 * Share(value, total),
                          CostColumnTitle(column));
  }
  return out + "</td>";
}

std::string RowName(const ReportKey& key) {
  return FrameDisplayName({key.function, key.file, key.line});
}

void WriteTable(std::string& out, const std::string& id, const std::string& row_class,
                const FlatReport& report, size_t limit, const std::string& unit) {
  std::vector<CostColumn> shown = ColumnsWithSamples(report.columns);
  absl::StrAppend(&out, "<table id=\"", id, "\">\n<tr><th>self%</th><th>self</th><th></th>");
  for (CostColumn column : shown) absl::StrAppend(&out, "<th>", CostColumnTitle(column), "</th>");
  absl::StrAppend(&out, "<th>total%</th><th>total</th><th style=\"text-align:left\">",
                  row_class == "line-row" ? "line" : "function", "</th></tr>\n");
  limit = std::min(limit, report.rows.size());
  for (size_t i = 0; i < limit; ++i) {
    const ReportRow& row = report.rows[i];
    if (row.self == 0 && row.total == 0) continue;
    absl::StrAppendFormat(&out,
                          "<tr class=\"%s\" data-function=\"%s\" data-file=\"%s\" data-line=\"%d\" "
                          "data-self=\"%.6f\" data-total=\"%.6f\"><td>%s</td><td>%s</td>%s",
                          row_class, HtmlEscape(row.key.function), HtmlEscape(row.key.file),
                          row.key.line, Share(row.self, report.total),
                          Share(row.total, report.total), Percent(row.self, report.total),
                          HtmlEscape(FormatSampleValue(row.self, unit)),
                          Bar(shown, row.columns, report.total));
    for (CostColumn column : shown) {
      absl::StrAppend(&out, "<td>", Percent(row.columns[static_cast<size_t>(column)], report.total),
                      "</td>");
    }
    absl::StrAppend(&out, "<td>", Percent(row.total, report.total), "</td><td>",
                    HtmlEscape(FormatSampleValue(row.total, unit)), "</td><td class=\"name\">",
                    HtmlEscape(RowName(row.key)), "</td></tr>\n");
  }
  out.append("</table>\n");
  if (limit < report.rows.size()) {
    absl::StrAppendFormat(&out, "<p class=\"summary\">%d more rows (pystrobe report --top 0)</p>\n",
                          report.rows.size() - limit);
  }
}

void WriteSource(std::string& out, const SourceReport& source, const std::string& function,
                 bool read_sources) {
  std::vector<CostColumn> shown = ColumnsWithSamples(source.columns);
  for (const SourceFile& file : source.files) {
    absl::StrAppendFormat(&out, "<h3>%s in %s: %s of all%s</h3>\n", HtmlEscape(file.function),
                          HtmlEscape(file.file), Percent(file.function_total, source.total),
                          !read_sources           ? " (source not read here, lines only)"
                          : file.resolved.empty() ? " (source not found, lines only)"
                                                  : "");
    absl::StrAppend(&out, "<table class=\"source\" data-function=\"", HtmlEscape(function),
                    "\">\n<tr><th>self%</th>");
    for (CostColumn column : shown) {
      absl::StrAppend(&out, "<th>", CostColumnTitle(column), "</th>");
    }
    out.append("<th>total%</th><th>line</th><th style=\"text-align:left\">source</th></tr>\n");
    int64_t heaviest = 0;
    for (const SourceLine& line : file.lines) heaviest = std::max(heaviest, line.self);
    for (const SourceLine& line : file.lines) {
      bool hot = line.self > 0 && line.self * 4 >= heaviest;
      absl::StrAppend(&out, "<tr", hot ? " class=\"hot\"" : "", " data-line=\"", line.line,
                      "\"><td>", line.self > 0 ? Percent(line.self, source.total) : "", "</td>");
      for (CostColumn column : shown) {
        int64_t value = line.columns[static_cast<size_t>(column)];
        absl::StrAppend(&out, "<td>", value > 0 ? Percent(value, source.total) : "", "</td>");
      }
      absl::StrAppend(&out, "<td>", line.total > 0 ? Percent(line.total, source.total) : "",
                      "</td><td>", line.line, "</td><td class=\"src\">",
                      HtmlEscape(line.text.value_or("")), "</td></tr>\n");
    }
    out.append("</table>\n");
  }
}

std::string Summary(const Recording& recording, size_t sample_type, int64_t total) {
  const RecordedSampleType& type = recording.sample_types[sample_type];
  return absl::StrFormat("%s recording; %s (%s): %s in all", recording.format, type.type, type.unit,
                         FormatSampleValue(total, type.unit));
}

}  // namespace

std::string HtmlEscape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out.append("&amp;");
        break;
      case '<':
        out.append("&lt;");
        break;
      case '>':
        out.append("&gt;");
        break;
      case '"':
        out.append("&quot;");
        break;
      case '\'':
        out.append("&#39;");
        break;
      default:
        out.push_back(c);
    }
  }
  return out;
}

absl::Status WriteHtmlReport(const Recording& recording, const HtmlReportOptions& options,
                             std::ostream& out) {
  if (options.sample_type >= recording.sample_types.size()) {
    return absl::InvalidArgumentError("no such sample type");
  }
  const std::string& unit = recording.sample_types[options.sample_type].unit;
  ReportFilter filter;
  filter.sample_type = options.sample_type;
  filter.focus = options.focus;
  FlatReport lines = BuildFlatReport(recording, filter, ReportGrouping::kLine, ReportSort::kSelf);
  FlatReport functions =
      BuildFlatReport(recording, filter, ReportGrouping::kFunction, ReportSort::kSelf);
  Profile profile = ToProfile(recording, options.sample_type, filter);
  profile.title = options.title;
  absl::StatusOr<std::string> svg = InlineSvg(profile, nullptr);
  if (!svg.ok()) return svg.status();

  std::string page(kPageHead);
  absl::StrAppend(&page, "<title>pystrobe: ", HtmlEscape(options.title), "</title>\n<style>",
                  kPageStyle, "</style>\n</head>\n");
  std::string heaviest_line = lines.rows.empty() ? "" : RowName(lines.rows[0].key);
  std::string heaviest_function = functions.rows.empty() ? "" : functions.rows[0].key.function;
  absl::StrAppend(&page, "<body data-heaviest-line=\"", HtmlEscape(heaviest_line),
                  "\" data-heaviest-function=\"", HtmlEscape(heaviest_function), "\">\n");
  absl::StrAppend(&page, "<h1>pystrobe: ", HtmlEscape(options.title),
                  "</h1>\n<p class=\"summary\">",
                  HtmlEscape(Summary(recording, options.sample_type, lines.total)), "</p>\n");
  if (!heaviest_line.empty()) {
    absl::StrAppend(&page, "<p>Heaviest line: <code id=\"heaviest-line\">",
                    HtmlEscape(heaviest_line), "</code> (",
                    Percent(lines.rows[0].self, lines.total), " of all); heaviest function: <code ",
                    "id=\"heaviest-function\">", HtmlEscape(heaviest_function), "</code></p>\n");
  }
  absl::StrAppend(&page, "<h2>Flame graph</h2>\n<div class=\"flame\" id=\"flamegraph\">\n", *svg,
                  "</div>\n");
  absl::StrAppend(&page, "<h2>Lines, heaviest first</h2>\n",
                  Legend(ColumnsWithSamples(lines.columns)));
  WriteTable(page, "lines", "line-row", lines, options.rows, unit);
  page.append("<h2>Functions, heaviest first</h2>\n");
  WriteTable(page, "functions", "function-row", functions, options.rows, unit);

  // The source of the heaviest Python functions, by what was charged to them.
  page.append("<h2>Source of the heaviest functions</h2>\n<div id=\"source\">\n");
  size_t shown = 0;
  for (const ReportRow& row : functions.rows) {
    if (shown == options.source_functions || row.self == 0) break;
    if (row.key.file.empty()) continue;  // not Python
    std::string function = absl::StrCat(row.key.file, ":", row.key.function);
    SourceReport source =
        BuildSourceReport(recording, filter, function, options.source_dirs, options.read_sources);
    WriteSource(page, source, function, options.read_sources);
    ++shown;
  }
  if (shown == 0) page.append("<p class=\"summary\">No Python functions in this recording.</p>\n");
  absl::StrAppend(&page, "</div>\n<script>", kPageScript, "</script>\n</body>\n</html>\n");
  out << page;
  out.flush();
  if (!out) return absl::DataLossError("writing the HTML page failed");
  return absl::OkStatus();
}

absl::Status WriteHtmlDiff(const Recording& before, const Recording& after,
                           const HtmlDiffOptions& options, std::ostream& out) {
  RecordingDiff diff = DiffRecordings(before, options.before_type, after, options.after_type,
                                      ReportGrouping::kFunction, ReportSort::kSelf);
  Profile before_profile = ToProfile(before, options.before_type);
  before_profile.title = absl::StrCat("before: ", options.before_name);
  Profile after_profile = ToProfile(after, options.after_type);
  after_profile.title = absl::StrCat("after: ", options.after_name);
  absl::StatusOr<std::string> before_svg = InlineSvg(before_profile, nullptr);
  if (!before_svg.ok()) return before_svg.status();
  absl::StatusOr<std::string> after_svg = InlineSvg(after_profile, nullptr);
  if (!after_svg.ok()) return after_svg.status();
  std::ostringstream differential;
  absl::Status written = WriteDiffFlameGraph(
      before, options.before_type, after, options.after_type,
      absl::StrCat("differential: ", options.before_name, " -> ", options.after_name),
      differential);
  if (!written.ok()) return written;
  std::string diff_svg = differential.str();
  if (diff_svg.starts_with("<?xml")) diff_svg.erase(0, diff_svg.find('\n') + 1);

  std::string title = absl::StrCat(options.before_name, " -> ", options.after_name);
  std::string page(kPageHead);
  absl::StrAppend(&page, "<title>pystrobe diff: ", HtmlEscape(title), "</title>\n<style>",
                  kPageStyle, "</style>\n</head>\n<body>\n<h1>pystrobe diff: ", HtmlEscape(title),
                  "</h1>\n<p class=\"summary\">before: ",
                  HtmlEscape(Summary(before, options.before_type, diff.before_total)),
                  "<br>after: ", HtmlEscape(Summary(after, options.after_type, diff.after_total)),
                  "</p>\n");
  absl::StrAppend(&page, "<h2>Before and after</h2>\n<div class=\"side\"><div class=\"flame\" ",
                  "id=\"before\">", *before_svg, "</div><div class=\"flame\" id=\"after\">",
                  *after_svg, "</div></div>\n");
  absl::StrAppend(&page,
                  "<h2>Differential flame graph</h2>\n<p class=\"summary\">After's stacks: red "
                  "where a stack's share grew, blue where it shrank.</p>\n<div class=\"flame\" "
                  "id=\"differential\">",
                  diff_svg, "</div>\n");
  page.append(
      "<h2>What changed, biggest first</h2>\n<table id=\"diff\">\n<tr><th>self &Delta;</th>"
      "<th>before</th><th>after</th><th>total &Delta;</th><th>before</th><th>after</th>"
      "<th style=\"text-align:left\">function</th></tr>\n");
  size_t limit = std::min(options.rows, diff.rows.size());
  for (size_t i = 0; i < limit; ++i) {
    const DiffRow& row = diff.rows[i];
    const char* direction = row.delta_self() > 0 ? "up" : row.delta_self() < 0 ? "down" : "";
    absl::StrAppendFormat(
        &page,
        "<tr class=\"diff-row\" data-function=\"%s\" data-delta-self=\"%.6f\"><td class=\"%s\">"
        "%+.2f</td><td>%.2f%%</td><td>%.2f%%</td><td>%+.2f</td><td>%.2f%%</td><td>%.2f%%</td>"
        "<td class=\"name\">%s</td></tr>\n",
        HtmlEscape(row.key.function), row.delta_self(), direction, 100 * row.delta_self(),
        100 * row.before_self, 100 * row.after_self, 100 * row.delta_total(),
        100 * row.before_total, 100 * row.after_total, HtmlEscape(RowName(row.key)));
  }
  absl::StrAppend(&page, "</table>\n<script>", kPageScript, "</script>\n</body>\n</html>\n");
  out << page;
  out.flush();
  if (!out) return absl::DataLossError("writing the HTML page failed");
  return absl::OkStatus();
}

}  // namespace pystrobe
