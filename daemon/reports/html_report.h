// `pystrobe report --html`: one self-contained HTML page (no network
// fetches: styles inline, the flame graph an inline SVG) with what a Python
// user looks for first: the flame graph, the heaviest lines with where their
// time went (Python, native, system, waiting), the heaviest functions, and
// the annotated source of the heaviest Python functions. For a diff, the
// two flame graphs side by side, the differential one and the table of
// changes. The daemon serves the same pages for its recent windows.
#ifndef PYSTROBE_DAEMON_REPORTS_HTML_REPORT_H_
#define PYSTROBE_DAEMON_REPORTS_HTML_REPORT_H_

#include <cstddef>
#include <optional>
#include <ostream>
#include <regex>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "daemon/reports/recording_reader.h"

namespace pystrobe {

struct HtmlReportOptions {
  std::string title;       // the page's heading, e.g. the recording's path
  size_t sample_type = 0;  // which of the recording's values to show
  // Only stacks with a frame whose function or file matches (report
  // --focus); the flame graph and tables show those, as shares of all.
  std::optional<std::regex> focus;
  size_t rows = 50;             // lines and functions listed
  size_t source_functions = 3;  // heaviest Python functions shown with their source
  // Where relative source file names are looked for (the recording's directory).
  std::vector<std::string> source_dirs;
  // Whether source files are read at all: not by a reader with more rights
  // than whoever named the files (the daemon; see BuildSourceReport).
  bool read_sources = true;
};

// The page's markers, for tests and tools: the heaviest line's row is the
// first <tr class="line-row"> of <table id="lines">, each row carrying
// data-function, data-file, data-line, data-self and data-total (shares
// of all samples); functions likewise in <table id="functions">
// (<tr class="function-row">); <body data-heaviest-line="function
// (file:line)" data-heaviest-function="function">.
absl::Status WriteHtmlReport(const Recording& recording, const HtmlReportOptions& options,
                             std::ostream& out);

struct HtmlDiffOptions {
  std::string before_name;
  std::string after_name;
  size_t before_type = 0;
  size_t after_type = 0;
  size_t rows = 50;
};

// <table id="diff"> with one <tr class="diff-row"> per change, biggest
// first; three flame graphs: before, after (side by side) and the
// differential one.
absl::Status WriteHtmlDiff(const Recording& before, const Recording& after,
                           const HtmlDiffOptions& options, std::ostream& out);

// `text` with &, <, >, " and ' escaped, for HTML text and attribute values.
std::string HtmlEscape(std::string_view text);

}  // namespace pystrobe

#endif  // PYSTROBE_DAEMON_REPORTS_HTML_REPORT_H_
