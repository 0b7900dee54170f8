// The command lines of `pystrobe report` and `pystrobe diff`, parsed through
// their flag tables.
#ifndef PYSTROBE_DAEMON_CLI_REPORT_OPTIONS_H_
#define PYSTROBE_DAEMON_CLI_REPORT_OPTIONS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/reports/call_graph_dot.h"
#include "daemon/reports/flat_report.h"

namespace pystrobe {

// The flags report and diff share.
struct TableOptions {
  ReportGrouping by = ReportGrouping::kFunction;
  ReportSort sort = ReportSort::kSelf;
  std::optional<int64_t> top;
  std::optional<std::string> sample_type;
  bool json = false;
};

struct ReportOptions {
  TableOptions table;
  std::string file;
  std::optional<std::string> focus;
  std::optional<std::string> source;
  std::optional<std::string> callers;
  std::optional<std::string> callees;
  std::optional<std::string> output;  // -o: where --dot or --html goes (stdout when unset)
  bool dot = false;
  bool html = false;
  CallGraphOptions graph;
  std::vector<std::string> files;  // the arguments that are not flags
  bool help = false;
};

struct DiffOptions {
  TableOptions table;
  std::string before;
  std::string after;
  std::optional<std::string> svg;  // -o: the differential SVG, or with --html the page
  bool html = false;
  std::vector<std::string> files;  // the arguments that are not flags
  bool help = false;
};

// The arguments after "report" / "diff". InvalidArgument names the bad flag
// or value.
absl::StatusOr<ReportOptions> ParseReportOptions(const std::vector<std::string>& args);
absl::StatusOr<DiffOptions> ParseDiffOptions(const std::vector<std::string>& args);

const char* ReportUsage();
const char* DiffUsage();

}  // namespace pystrobe

#endif  // PYSTROBE_DAEMON_CLI_REPORT_OPTIONS_H_
